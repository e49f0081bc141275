//! AC analysis of a 5th-order Butterworth LC-ladder low-pass filter, with
//! the sensitivity of its gain to every component by one reverse pass per
//! frequency.
//!
//! The filter is doubly terminated (1 Ω source and load resistors) with
//! the normalised element values `g_k = 2 sin((2k − 1)π/10)`: shunt C₁,
//! series L₂, shunt C₃, series L₄, shunt C₅. Its transfer function from the
//! source voltage to the load is `H(s) = ½ / B₅(s)`, `B₅` the Butterworth
//! polynomial, so `|H(jω)| = ½ / √(1 + ω¹⁰)` and `∠H = −Σ arg(jω − sₖ)` over
//! the poles `sₖ` on the left unit half-circle.
//!
//! `log_gain` builds the complex modified-nodal-analysis matrix
//! `Y(jω) = G + jω C` (node voltages, inductor and source branch currents)
//! from the netlist's stamps and the component values, solves `Y x = e` by
//! a dense complex LU and returns `ln|H|` (and `H`). One `value_and_grad_`
//! call per frequency gives `H` and `∂ln|H|/∂p` for all seven components
//! and `ω`; the sensitivities `S_p = ∂ln|H|/∂ln p = p ∂ln|H|/∂p` are
//! checked against central differences and against the two identities of
//! any RLC network whose output is a voltage ratio:
//! - impedance scaling (`R, L → λR, λL`, `C → C/λ` leaves `H` unchanged):
//!   `Σ S_R + Σ S_L − Σ S_C = 0`;
//! - frequency scaling (`ω → λω`, `L, C → L/λ, C/λ`):
//!   `Σ S_L + Σ S_C = ω ∂ln|H|/∂ω`.
//!
//! The Bode plot (magnitude, phase, the largest sensitivities) goes to
//! `target/plots/bode.svg`. Run with `cargo run --release --example
//! ac_sweep`, or `-- --ci` for a shorter sweep. Exits non-zero if a check
//! fails.

use std::error::Error;
use std::f64::consts::PI;
use std::path::{Path, PathBuf};
use std::time::Instant;

use plotters::prelude::*;
use rlx::prelude::*;

// ---------------------------------------------------------------- the netlist

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    R,
    L,
    C,
}

/// A two-terminal element between nodes `a` and `b` (`None` is ground).
struct Element {
    name: &'static str,
    kind: Kind,
    a: Option<usize>,
    b: Option<usize>,
}

/// Nodes: 0 the source terminal, 1–3 the ladder, 3 the output.
const NODES: usize = 4;
const OUT: usize = 3;

/// The ladder, in the order of the component-value vector `p`; a 1 V
/// source drives node 0.
const LADDER: [Element; 7] = [
    el("Rs", Kind::R, Some(0), Some(1)),
    el("C1", Kind::C, Some(1), None),
    el("L2", Kind::L, Some(1), Some(2)),
    el("C3", Kind::C, Some(2), None),
    el("L4", Kind::L, Some(2), Some(3)),
    el("C5", Kind::C, Some(3), None),
    el("RL", Kind::R, Some(3), None),
];

const fn el(name: &'static str, kind: Kind, a: Option<usize>, b: Option<usize>) -> Element {
    Element { name, kind, a, b }
}

/// The Butterworth values: 1 Ω terminations, `g_k = 2 sin((2k − 1)π/10)`.
fn butterworth() -> Vec<f64> {
    let mut k = 0;
    LADDER
        .iter()
        .map(|e| match e.kind {
            Kind::R => 1.0,
            _ => {
                k += 1;
                2.0 * ((2 * k - 1) as f64 * PI / 10.0).sin()
            }
        })
        .collect()
}

/// The modified nodal analysis of [`LADDER`], as constant stamps: the
/// matrix is `base + Σ_e coef_e · stamp_e` with `coef_e = 1/R` for a
/// resistor and `jωL`, `jωC` for a reactive element.
struct Mna {
    /// Unknowns: node voltages, one branch current per inductor, the source current.
    n: usize,
    /// Incidence entries of the inductor and source branches, `[n, n]`.
    base: Vec<f64>,
    /// One `[n, n]` stamp per element, `[elements, n · n]`.
    stamps: Vec<f64>,
    /// 1 for resistors (the real part), 0 otherwise.
    resistive: Vec<f64>,
    /// 1 for inductors and capacitors (the imaginary part), 0 otherwise.
    reactive: Vec<f64>,
    /// The right-hand side: the 1 V source.
    rhs: Vec<f64>,
}

impl Mna {
    fn of(netlist: &[Element]) -> Mna {
        let inductors = netlist.iter().filter(|e| e.kind == Kind::L).count();
        let n = NODES + inductors + 1;
        let source = n - 1;
        let mut base = vec![0.0; n * n];
        let mut stamps = vec![0.0; netlist.len() * n * n];
        let mut branch = NODES;
        for (i, e) in netlist.iter().enumerate() {
            let s = &mut stamps[i * n * n..(i + 1) * n * n];
            match e.kind {
                // Admittance stamp: current a → b is coef · (v_a − v_b).
                Kind::R | Kind::C => {
                    for (p, sp) in [(e.a, 1.0), (e.b, -1.0)] {
                        for (q, sq) in [(e.a, 1.0), (e.b, -1.0)] {
                            if let (Some(p), Some(q)) = (p, q) {
                                s[p * n + q] += sp * sq;
                            }
                        }
                    }
                }
                // Branch current i (a → b) leaves a, enters b, and
                // v_a − v_b − jωL i = 0.
                Kind::L => {
                    for (node, sign) in [(e.a, 1.0), (e.b, -1.0)] {
                        if let Some(v) = node {
                            base[v * n + branch] += sign;
                            base[branch * n + v] += sign;
                        }
                    }
                    s[branch * n + branch] = -1.0;
                    branch += 1;
                }
            }
        }
        // The source delivers its current into node 0, and v_0 = 1 V.
        base[source] -= 1.0;
        base[source * n] = 1.0;
        let mut rhs = vec![0.0; n];
        rhs[source] = 1.0;
        let mask = |k: fn(Kind) -> bool| netlist.iter().map(|e| k(e.kind) as u8 as f64).collect();
        Mna {
            n,
            base,
            stamps,
            resistive: mask(|k| k == Kind::R),
            reactive: mask(|k| k != Kind::R),
            rhs,
        }
    }
}

// ---------------------------------------------------------------- the model

/// `ln|H(jω)|` of [`LADDER`] with component values `p` (ohms, henries,
/// farads, in netlist order) at angular frequency `w`, and `H` itself
/// (complex, 0-d) as an auxiliary output.
#[differentiable]
fn log_gain(p: &Tensor, w: f64) -> (f64, Tensor) {
    let m = Mna::of(&LADDER);
    let (n, e) = (m.n, LADDER.len());
    let g = Tensor::from_vec(m.resistive, [e]) / p;
    let b = Tensor::from_vec(m.reactive, [e]) * p * &w;
    let stamps = Tensor::from_vec(m.stamps, [e, n * n]);
    let re = g.reshape([1, e]).matmul(&stamps).reshape([n, n]) + Tensor::from_vec(m.base, [n, n]);
    let im = b.reshape([1, e]).matmul(&stamps).reshape([n, n]);
    let y = Tensor::complex(&re, &im);
    let rhs = Tensor::complex(
        &Tensor::from_vec(m.rhs, [n, 1]),
        &Tensor::zeros([n, 1], DType::F64),
    );
    let h = y.solve(&rhs).slice_range(OUT..OUT + 1, 0).reshape([]);
    (h.abs().ln(), h)
}

// ---------------------------------------------------------------- closed form

/// `H(jω) = ½ / B₅(jω)`, from the poles `sₖ = exp(iπ(2k + 4)/10)`.
fn closed_form(w: f64) -> (f64, f64) {
    let mag = 0.5 / (1.0 + w.powi(10)).sqrt();
    // jω − sₖ has a positive real part, so each arg is continuous in ω.
    let phase = -(1..=5)
        .map(|k| {
            let t = PI * (2 * k + 4) as f64 / 10.0;
            (w - t.sin()).atan2(-t.cos())
        })
        .sum::<f64>();
    (mag, phase)
}

/// `a − b` wrapped into `(−π, π]`.
fn angle_diff(a: f64, b: f64) -> f64 {
    let d = (a - b).rem_euclid(2.0 * PI);
    if d > PI {
        d - 2.0 * PI
    } else {
        d
    }
}

// ---------------------------------------------------------------- the sweep

/// One frequency's results.
struct Point {
    w: f64,
    db: f64,
    /// Unwrapped phase, radians.
    phase: f64,
    /// `S_p` per component.
    sens: Vec<f64>,
}

/// Counts failed checks, printing the first few.
#[derive(Default)]
struct Checks {
    failed: usize,
    worst_db: f64,
    worst_phase: f64,
    worst_fd: f64,
    worst_identity: f64,
}

impl Checks {
    fn expect(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            if self.failed < 10 {
                eprintln!("check failed: {}", what());
            }
            self.failed += 1;
        }
    }
}

fn sweep(frequencies: usize) -> rlx::Result<(Vec<Point>, Checks)> {
    let values = butterworth();
    let p = Tensor::from_slice(&values, [values.len()]);
    let (lo, hi) = (1e-2f64, 1e2f64);
    let ws: Vec<f64> = (0..frequencies)
        .map(|i| lo * (hi / lo).powf(i as f64 / (frequencies - 1) as f64))
        .collect();
    let mut checks = Checks::default();
    let mut points = Vec::with_capacity(ws.len());
    let t0 = Instant::now();
    value_and_grad_log_gain(&p, ws[0])?;
    let first = t0.elapsed();
    let t0 = Instant::now();
    let mut results = Vec::with_capacity(ws.len());
    for &w in &ws {
        results.push(value_and_grad_log_gain(&p, w)?);
    }
    let each = t0.elapsed() / ws.len() as u32;
    println!(
        "{} frequencies from {lo} to {hi} rad/s: first call (trace, differentiate, compile) {:.1} ms, \
         then |H|, its {} component sensitivities and ∂/∂ω {:.1} µs per frequency",
        ws.len(),
        first.as_secs_f64() * 1e3,
        values.len(),
        each.as_secs_f64() * 1e6,
    );
    let mut unwrapped: Option<f64> = None;
    for (&w, ((ln_h, h), (dp, dw))) in ws.iter().zip(results) {
        let h = h.item::<C64>()?;
        let (mag, phase) = closed_form(w);
        let db = 20.0 * h.norm().log10();
        let want_db = 20.0 * mag.log10();
        let (e_db, e_phase) = ((db - want_db).abs(), angle_diff(h.arg(), phase).abs());
        checks.worst_db = checks.worst_db.max(e_db);
        checks.worst_phase = checks.worst_phase.max(e_phase);
        checks.expect(e_db <= 1e-10 && e_phase <= 1e-10, || {
            format!(
                "ω = {w}: {db} dB ∠{} vs closed form {want_db} dB ∠{phase}",
                h.arg()
            )
        });
        checks.expect((ln_h - h.norm().ln()).abs() <= 1e-14, || {
            format!("ω = {w}: ln|H| = {ln_h} but H = {h}")
        });
        // Unwrap the computed phase along the sweep for the plot.
        let phi = match unwrapped {
            None => h.arg(),
            Some(prev) => prev + angle_diff(h.arg(), prev),
        };
        unwrapped = Some(phi);

        let dp = dp.to_vec::<f64>()?;
        let sens: Vec<f64> = values.iter().zip(&dp).map(|(v, d)| v * d).collect();
        // Central differences in ln p.
        let step = 1e-5f64;
        for (k, &s) in sens.iter().enumerate() {
            let at = |f: f64| {
                let mut q = values.clone();
                q[k] *= f;
                log_gain(&Tensor::from_slice(&q, [q.len()]), w).0
            };
            let fd = (at(step.exp()) - at((-step).exp())) / (2.0 * step);
            let err = (s - fd).abs() / (1.0 + fd.abs());
            checks.worst_fd = checks.worst_fd.max(err);
            checks.expect(err <= 1e-7, || {
                format!(
                    "ω = {w}: S_{} = {s} vs central difference {fd}",
                    LADDER[k].name
                )
            });
        }
        let sum = |kind: Kind| -> f64 {
            LADDER
                .iter()
                .zip(&sens)
                .filter(|(e, _)| e.kind == kind)
                .map(|(_, s)| s)
                .sum()
        };
        let (sr, sl, sc) = (sum(Kind::R), sum(Kind::L), sum(Kind::C));
        let impedance = sr + sl - sc;
        let frequency = sl + sc - w * dw;
        let worst = impedance.abs().max(frequency.abs());
        checks.worst_identity = checks.worst_identity.max(worst);
        checks.expect(worst <= 1e-10 * (1.0 + (w * dw).abs()), || {
            format!(
                "ω = {w}: ΣS_R + ΣS_L − ΣS_C = {impedance}, ΣS_L + ΣS_C − ω∂ln|H|/∂ω = {frequency}"
            )
        });
        points.push(Point {
            w,
            db,
            phase: phi,
            sens,
        });
    }
    Ok((points, checks))
}

fn table(points: &[Point]) {
    print!("{:>9} {:>10} {:>9}", "ω rad/s", "|H| dB", "∠H deg");
    for e in &LADDER {
        print!(" {:>8}", format!("S_{}", e.name));
    }
    println!();
    let rows = 9;
    for r in 0..rows {
        let pt = &points[r * (points.len() - 1) / (rows - 1)];
        print!(
            "{:>9.4} {:>10.4} {:>9.2}",
            pt.w,
            pt.db,
            pt.phase.to_degrees()
        );
        for s in &pt.sens {
            print!(" {s:>8.4}");
        }
        println!();
    }
}

// ---------------------------------------------------------------- the plot

fn plot(points: &[Point]) -> Result<PathBuf, Box<dyn Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/plots");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("bode.svg");
    draw(&path, points)?;
    Ok(path)
}

/// Draws one panel of `series` (label, colour, values per point) against
/// log ω.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    points: &[Point],
    title: &str,
    y_desc: &str,
    series: &[(String, RGBColor, Vec<f64>)],
) -> Result<(), Box<dyn Error>> {
    let (lo, hi) = series
        .iter()
        .flat_map(|s| s.2.iter())
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let pad = 0.05 * (hi - lo).max(1e-9);
    let (w0, w1) = (points[0].w, points[points.len() - 1].w);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d((w0..w1).log_scale(), lo - pad..hi + pad)?;
    chart
        .configure_mesh()
        .x_desc("ω, rad/s")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0e}"))
        .label_style(("sans-serif", 13))
        .draw()?;
    for (label, colour, values) in series {
        let colour = *colour;
        chart
            .draw_series(LineSeries::new(
                points.iter().zip(values).map(|(p, v)| (p.w, *v)),
                colour.stroke_width(2),
            ))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 13))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
    }
    Ok(())
}

fn draw(path: &Path, points: &[Point]) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (900, 1000)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((3, 1));
    let col = |f: &dyn Fn(&Point) -> f64| points.iter().map(f).collect::<Vec<f64>>();
    let mag = [("|H|".to_string(), BLUE, col(&|p| p.db))];
    panel(
        &areas[0],
        points,
        "5th-order Butterworth LC ladder: gain",
        "|H(jω)|, dB",
        &mag,
    )?;
    let phase = [("∠H".to_string(), RED, col(&|p| p.phase.to_degrees()))];
    panel(&areas[1], points, "phase", "∠H(jω), degrees", &phase)?;
    // The four components with the largest |S_p| anywhere in the sweep.
    let peak = |k: usize| points.iter().fold(0.0f64, |m, p| m.max(p.sens[k].abs()));
    let mut order: Vec<usize> = (0..LADDER.len()).collect();
    order.sort_by(|&a, &b| peak(b).total_cmp(&peak(a)));
    let colours = [BLUE, RED, GREEN, MAGENTA];
    let sens: Vec<(String, RGBColor, Vec<f64>)> = order
        .iter()
        .take(4)
        .zip(colours)
        .map(|(&k, c)| (format!("S_{}", LADDER[k].name), c, col(&|p| p.sens[k])))
        .collect();
    panel(
        &areas[2],
        points,
        "largest sensitivities S_p = ∂ln|H|/∂ln p",
        "S_p",
        &sens,
    )?;
    root.present()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let ci = std::env::args().any(|a| a == "--ci");
    let frequencies = if ci { 60 } else { 400 };
    println!("AC sweep of a doubly terminated 5th-order Butterworth LC ladder (1 Ω terminations)");
    let (points, checks) = sweep(frequencies)?;
    table(&points);
    println!(
        "worst errors: |H| {:.1e} dB and ∠H {:.1e} rad against the closed form; \
         S_p {:.1e} against central differences; network identities {:.1e}",
        checks.worst_db, checks.worst_phase, checks.worst_fd, checks.worst_identity
    );
    let path = plot(&points)?;
    println!("Bode plot written to {}", path.display());
    if checks.failed > 0 {
        return Err(format!("{} checks failed", checks.failed).into());
    }
    println!("ok");
    Ok(())
}
