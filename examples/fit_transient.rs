//! Fitting diode parameters and a capacitance to a transient waveform,
//! with every derivative through a backward-Euler simulation from rlx.
//!
//! The circuit: a chain of `n` nodes, each with a capacitor `C` and a diode
//! (saturation current `Is`, ideality `n_d`) to ground and a current source
//! (a sine with a phase that moves along the chain); neighbouring nodes,
//! and each end to ground, are joined by a conductance `G`. Backward Euler
//! over 200 steps of `DT`: each step is the root of Kirchhoff's current law
//!
//! ```text
//! F(v⁺) = C (v⁺ − v) / DT + G L v⁺ + Is (exp(v⁺ / (n_d V_T)) − 1) − i_src(t) = 0
//! ```
//!
//! found by `rlx::root` (Newton) inside a `#[scan]` loop: the loop is
//! traced once, every companion differentiates it (the root by the
//! implicit function theorem, the loop with its checkpoints).
//!
//! A "measured" waveform is simulated from known parameters, plus 0.5 mV
//! of deterministic noise. From a perturbed start, Levenberg–Marquardt
//! recovers `(ln Is, n_d, C)`: the Jacobian of the waveform (forward mode,
//! `jvp_waveform`: one tangent per parameter through the 200 roots) gives the
//! normal matrix `JᵀJ`, the gradient of the misfit (reverse mode,
//! `value_and_grad_misfit`, one transposed solve per step) gives `Jᵀr`;
//! the two are checked against each other at every iteration. The loop
//! keeps its default budget (every carry stored while they fit in 16 MiB):
//! the gradient then costs 1.1× the simulation at 120 nodes;
//! `#[scan(checkpoints = 16)]` bounds the stored carries at 16 whatever
//! the length, for 3.9× (steps recomputed from the checkpoints). It prints
//! the convergence table, writes `target/plots/fit_transient.svg` (the
//! waveform at two nodes: measured, the start, the fit) and exits with an
//! error if the recovered parameters are off by more than 1 %.
//!
//! Size: the Jacobian inside `rlx::root` is dense for now, so a Newton
//! iteration costs an `n × n` Jacobian and LU (`O(n³)`). One simulation
//! (200 steps, first call) took 0.4 s at 120 nodes, 1.1 s at 250 and 8 s
//! at 500 on the 2-core test machine, and an iteration of the fit costs
//! about fifteen simulations: 1 000 nodes (about a minute per simulation)
//! would take hours, so the full run uses 120 nodes (about a minute in
//! all) and `--ci` 16; `--nodes=N` picks another size. Units: volts,
//! milliamperes, kilo-ohms (millisiemens), microfarads, milliseconds.
//!
//! Run with `cargo run --release --example fit_transient` (or `-- --ci`).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use plotters::prelude::*;
use rlx::prelude::*;
use rlx::Newton;

/// Thermal voltage at 300 K, volts.
const V_T: f64 = 0.025_85;
/// Conductance between neighbouring nodes (and from each end to ground), mS.
const G: f64 = 1.0;
/// Time step, ms.
const DT: f64 = 0.02;
/// Steps of the simulation.
const STEPS: usize = 200;
/// Newton's tolerance on the current balance, mA.
const TOL: f64 = 1e-11;
/// The parameters the measurement was made with: `(ln Is, n_d, C)`
/// (`Is` = 1 nA).
const TRUE: [f64; 3] = [-13.815_510_557_964_274, 1.8, 0.5];
/// Where the fit starts: `Is` 20× too large, `n_d` and `C` off by 17 % and 60 %.
const START: [f64; 3] = [-10.819_778_284_410_283, 2.1, 0.8];

/// Kirchhoff's current law at the new voltages `v` after a step from
/// `prev` with source currents `s`: the currents leaving every node, mA.
fn kcl(v: &Tensor, prev: &Tensor, s: &Tensor, is: &Tensor, nvt: &Tensor, cap: &Tensor) -> Tensor {
    let n = v.shape().dim(0);
    let z = Tensor::zeros([1], DType::F64);
    let padded = Tensor::concat(&[&z, v, &z], 0);
    let chain = (v * 2.0 - padded.slice_range(0..n, 0) - padded.slice_range(2..n + 2, 0)) * G;
    let diode = ((v / nvt).exp() - 1.0) * is;
    (v - prev) * cap * (1.0 / DT) + chain + diode - s
}

/// The node voltages at every step, `[STEPS, n]`, from `v0` under the
/// sources `src` (`[STEPS, n]`).
#[differentiable(wrt(log_is, ideality, cap))]
pub fn waveform(v0: &Tensor, src: &Tensor, log_is: f64, ideality: f64, cap: f64) -> Tensor {
    let is = log_is.exp();
    let nvt = &ideality * V_T;
    let mut v = v0.clone();
    let mut path = Vec::new();
    #[scan]
    for t in 0..src.shape().dim(0) {
        let s = &src[t];
        let prev = v.clone();
        v = rlx::root(
            |y| kcl(y, &prev, s, &is, &nvt, &cap),
            &prev,
            Newton::new().tol(TOL),
        )?;
        path.push(v.reshape([1, v.shape().dim(0)]));
    }
    Tensor::concat(&path, 0)
}

/// Half the squared distance between the simulated and the measured waveform.
#[differentiable(wrt(log_is, ideality, cap))]
pub fn misfit(
    v0: &Tensor,
    src: &Tensor,
    measured: &Tensor,
    log_is: f64,
    ideality: f64,
    cap: f64,
) -> f64 {
    let r = waveform(v0, src, log_is, ideality, cap) - measured;
    r.square().sum_all() * 0.5
}

/// The sources: 1 mA ± 0.8 mA, period 2 ms, phase moving along the chain.
fn sources(n: usize) -> Tensor {
    let s = (0..STEPS * n).map(|k| {
        let (t, i) = ((k / n + 1) as f64 * DT, k % n);
        1.0 + 0.8 * (std::f64::consts::TAU * t / 2.0 + 0.15 * i as f64).sin()
    });
    Tensor::from_vec(s.collect(), [STEPS, n])
}

/// Deterministic noise, uniform in ±`amp` (a 64-bit LCG).
fn noise(len: usize, amp: f64) -> Vec<f64> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            amp * (2.0 * (x >> 11) as f64 / (1u64 << 53) as f64 - 1.0)
        })
        .collect()
}

/// The inputs of a fit: initial voltages, sources, measured waveform.
struct Data {
    v0: Tensor,
    src: Tensor,
    measured: Tensor,
}

fn misfit_at(d: &Data, p: [f64; 3]) -> rlx::Result<f64> {
    let (value, _) = value_and_grad_misfit(&d.v0, &d.src, &d.measured, p[0], p[1], p[2])?;
    Ok(value)
}

/// Solves the 3×3 system `a x = b` (symmetric positive definite here) by
/// Gaussian elimination with partial pivoting.
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> [f64; 3] {
    for c in 0..3 {
        let p = (c..3)
            .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
            .unwrap_or(c);
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..3 {
            let f = a[r][c] / a[c][c];
            let pivot_row = a[c];
            for (e, p) in a[r].iter_mut().zip(pivot_row).skip(c) {
                *e -= f * p;
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = [0.0; 3];
    for r in (0..3).rev() {
        let s: f64 = (r + 1..3).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    x
}

/// Levenberg–Marquardt from `START`: the parameters found and the misfit
/// after each iteration.
fn fit(d: &Data) -> Result<([f64; 3], Vec<f64>), Box<dyn Error>> {
    let mut p = START;
    let mut lambda = 1e-3;
    let mut history = Vec::new();
    println!(
        "{:>4} {:>12} {:>10} {:>9} {:>12} {:>8} {:>8} {:>7}",
        "iter", "misfit", "‖∇‖", "λ", "Is (mA)", "n_d", "C (µF)", "s"
    );
    for iter in 0..40 {
        let clock = Instant::now();
        // reverse mode: the misfit and its gradient Jᵀr
        let (value, (g0, g1, g2)) =
            value_and_grad_misfit(&d.v0, &d.src, &d.measured, p[0], p[1], p[2])?;
        let grad = [g0, g1, g2];
        // forward mode: the waveform's Jacobian, one [STEPS, n] column per
        // parameter (three `jvp_` calls: at 120 nodes they took 2 s,
        // `jacobian_waveform`, which batches the three tangents, 4.9 s)
        let mut cols = Vec::with_capacity(3);
        let mut simulated = None;
        for k in 0..3 {
            let e = |i: usize| if i == k { 1.0 } else { 0.0 };
            let (w, col) = jvp_waveform(&d.v0, &d.src, p[0], p[1], p[2], e(0), e(1), e(2))?;
            cols.push(col.to_vec::<f64>()?);
            simulated = Some(w);
        }
        let r: Vec<f64> = simulated
            .ok_or("no simulation")?
            .to_vec::<f64>()?
            .iter()
            .zip(d.measured.to_vec::<f64>()?)
            .map(|(s, m)| s - m)
            .collect();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let mut jtj = [[0.0; 3]; 3];
        for (a, row) in jtj.iter_mut().enumerate() {
            for (b, e) in row.iter_mut().enumerate() {
                *e = dot(&cols[a], &cols[b]);
            }
        }
        // forward against reverse: Jᵀr from the Jacobian is the gradient
        for (k, col) in cols.iter().enumerate() {
            let jtr = dot(col, &r);
            // |Jᵀr| ≤ ‖J_k‖ ‖r‖: the scale of the sum's rounding
            let scale = dot(col, col).sqrt() * dot(&r, &r).sqrt();
            if (jtr - grad[k]).abs() > 1e-9 * scale {
                return Err(format!(
                    "parameter {k}: Jᵀr = {jtr:e} but the gradient is {:e}",
                    grad[k]
                )
                .into());
            }
        }
        let gnorm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        history.push(value);
        println!(
            "{iter:>4} {value:>12.5e} {gnorm:>10.3e} {lambda:>9.1e} {:>12.4e} {:>8.5} {:>8.5} {:>7.2}",
            p[0].exp(),
            p[1],
            p[2],
            clock.elapsed().as_secs_f64()
        );
        if gnorm <= 1e-9 * value.max(1e-12).sqrt() || lambda > 1e12 {
            break;
        }
        // damped normal equations, the damping scaled by diag(JᵀJ)
        let mut accepted = false;
        while lambda <= 1e12 {
            let mut a = jtj;
            for (k, row) in a.iter_mut().enumerate() {
                row[k] += lambda * jtj[k][k];
            }
            let step = solve3(a, [-grad[0], -grad[1], -grad[2]]);
            let trial = [p[0] + step[0], p[1] + step[1], p[2] + step[2]];
            // a trial the simulation cannot run (Newton fails) is a rejected step
            let better =
                trial[1] > 0.0 && trial[2] > 0.0 && misfit_at(d, trial).is_ok_and(|m| m < value);
            if better {
                let small = step
                    .iter()
                    .zip(&trial)
                    .all(|(s, x)| s.abs() <= 1e-10 * x.abs().max(1.0));
                p = trial;
                lambda = (lambda / 3.0).max(1e-9);
                accepted = !small;
                break;
            }
            lambda *= 4.0;
        }
        if !accepted {
            break;
        }
    }
    Ok((p, history))
}

fn plot(n: usize, d: &Data, fitted: &Tensor, start: &Tensor) -> Result<PathBuf, Box<dyn Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/plots");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("fit_transient.svg");
    draw(&path, n, d, fitted, start)?;
    Ok(path)
}

fn draw(
    path: &Path,
    n: usize,
    d: &Data,
    fitted: &Tensor,
    start: &Tensor,
) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (960, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (measured, fitted, start) = (
        d.measured.to_vec::<f64>()?,
        fitted.to_vec::<f64>()?,
        start.to_vec::<f64>()?,
    );
    let nodes = [0, n / 2];
    let series = |w: &[f64], node: usize| -> Vec<(f64, f64)> {
        (0..STEPS)
            .map(|t| ((t + 1) as f64 * DT, w[t * n + node]))
            .collect()
    };
    let all = measured.iter().chain(&fitted).chain(&start);
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Diode chain of {n} nodes: measured vs fitted waveform"),
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..STEPS as f64 * DT, (lo - 0.05)..(hi + 0.05))?;
    chart
        .configure_mesh()
        .x_desc("time, ms")
        .y_desc("node voltage, V")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .draw()?;
    for (node, colour) in nodes.into_iter().zip([BLUE, RED]) {
        chart
            .draw_series(
                series(&measured, node)
                    .into_iter()
                    .step_by(2)
                    .map(|p| Circle::new(p, 2, colour.filled())),
            )?
            .label(format!("node {node}: measured"))
            .legend(move |(x, y)| Circle::new((x + 12, y), 3, colour.filled()));
        chart
            .draw_series(LineSeries::new(
                series(&fitted, node),
                colour.stroke_width(2),
            ))?
            .label(format!("node {node}: fitted"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(2))
            });
        let faint = colour.mix(0.35);
        chart
            .draw_series(LineSeries::new(series(&start, node), faint.stroke_width(1)))?
            .label(format!("node {node}: start of the fit"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], faint.stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let ci = std::env::args().any(|a| a == "--ci");
    let nodes =
        std::env::args().find_map(|a| a.strip_prefix("--nodes=").and_then(|n| n.parse().ok()));
    let n = nodes.unwrap_or(if ci { 16 } else { 120 });
    println!("diode chain: {n} nodes, {STEPS} backward-Euler steps of {DT} ms");
    let v0 = Tensor::zeros([n], DType::F64);
    let src = sources(n);
    let clock = Instant::now();
    let clean = waveform(&v0, &src, TRUE[0], TRUE[1], TRUE[2]);
    println!(
        "one simulation (first call: tracing and compiling included): {:.2} s",
        clock.elapsed().as_secs_f64()
    );
    let measured: Vec<f64> = clean
        .to_vec::<f64>()?
        .iter()
        .zip(noise(STEPS * n, 5e-4))
        .map(|(v, e)| v + e)
        .collect();
    let d = Data {
        v0,
        src,
        measured: Tensor::from_vec(measured, [STEPS, n]),
    };
    let clock = Instant::now();
    let (p, history) = fit(&d)?;
    println!(
        "{} iterations in {:.1} s; misfit {:.3e} → {:.3e}",
        history.len(),
        clock.elapsed().as_secs_f64(),
        history.first().copied().unwrap_or(f64::NAN),
        history.last().copied().unwrap_or(f64::NAN)
    );
    // The cost of a gradient against the simulation alone (warm plans).
    let time = |f: &dyn Fn() -> rlx::Result<()>| -> rlx::Result<f64> {
        let clock = Instant::now();
        for _ in 0..3 {
            f()?;
        }
        Ok(clock.elapsed().as_secs_f64() / 3.0)
    };
    let forward = time(&|| {
        misfit(&d.v0, &d.src, &d.measured, p[0], p[1], p[2]);
        Ok(())
    })?;
    let reverse =
        time(&|| value_and_grad_misfit(&d.v0, &d.src, &d.measured, p[0], p[1], p[2]).map(|_| ()))?;
    println!(
        "misfit alone {:.1} ms, with its gradient (reverse mode) {:.1} ms: {:.2}×",
        forward * 1e3,
        reverse * 1e3,
        reverse / forward
    );
    let truth = [TRUE[0].exp(), TRUE[1], TRUE[2]];
    let found = [p[0].exp(), p[1], p[2]];
    println!(
        "{:>6} {:>12} {:>12} {:>10}",
        "", "true", "recovered", "rel. error"
    );
    let mut worst: f64 = 0.0;
    for (name, (t, f)) in ["Is", "n_d", "C"].iter().zip(truth.iter().zip(&found)) {
        let e = (f - t).abs() / t.abs();
        // a NaN error makes the worst NaN (`f64::max` would drop it)
        worst = if e.is_nan() || worst.is_nan() {
            f64::NAN
        } else {
            worst.max(e)
        };
        println!("{name:>6} {t:>12.5e} {f:>12.5e} {e:>10.2e}");
    }
    let fitted = waveform(&d.v0, &d.src, p[0], p[1], p[2]);
    let start = waveform(&d.v0, &d.src, START[0], START[1], START[2]);
    let path = plot(n, &d, &fitted, &start)?;
    println!("plot: {}", path.display());
    if worst.is_nan() || worst > 1e-2 {
        return Err(format!(
            "the recovered parameters are off by {:.2} % (more than 1 %)",
            worst * 100.0
        )
        .into());
    }
    Ok(())
}
