//! DC operating point of nonlinear circuits by Newton–Raphson, with the
//! sparse Jacobian path at real scale and the dense one for comparison.
//!
//! 1. A 2-D resistor–diode grid of `k × k` nodes (20 164 by default):
//!    neighbouring nodes are joined by resistors `R`, the first row is fed
//!    from a voltage source `vs` through `R_SOURCE`, and every node has a
//!    diode, a leakage resistor and a current source to ground. Kirchhoff's
//!    current law at every node gives the residual `F(v) = 0`; Newton's
//!    method solves `J(v) dv = -F(v)` with the residual and its sparse
//!    Jacobian from one execution (`value_and_sparse_jacobian_into_grid`,
//!    five nonzeros per row, found from the traced graph and compressed to a
//!    handful of colours) and a sparse LU from faer whose symbolic
//!    factorisation is computed once and reused at every step.
//! 2. The DC sensitivities on the same grid: the derivative of the power
//!    the source delivers with respect to every source current and every
//!    diode's `Is`, by one `value_and_grad_dc_power` (`rlx::root` on the
//!    sparse path, then one reverse pass: a transposed sparse solve and
//!    one reverse pass of the residual), checked against central
//!    differences of the full Newton solve for a few parameters.
//! 3. A 200-section diode ladder with the dense `value_and_jacobian_ladder`
//!    and a dense LU, the way to go for small circuits.
//!
//! Both residuals are checked against independent plain-Rust versions, and
//! the residual norm per Newton iteration is plotted (log scale) to
//! `target/plots/circuit.svg`.
//!
//! Run with `cargo run --release --example circuit`, or `-- --ci` for
//! smaller, faster instances. `benches/sparse.rs` times this file's model.

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use plotters::prelude::*;
use rlx::prelude::*;

// ---------------------------------------------------------------- the model

/// Resistors between neighbouring nodes, ohms.
pub const R: f64 = 50.0;
/// Resistance of the voltage source, ohms.
pub const R_SOURCE: f64 = 10.0;
/// Leakage from every grid node to ground, ohms.
pub const R_LEAK: f64 = 1.0e5;
/// Load at the last ladder node, ohms.
pub const R_LOAD: f64 = 1_000.0;
/// Diode saturation current, amperes.
pub const I_SAT: f64 = 1e-14;
/// Thermal voltage at 300 K, volts.
pub const V_T: f64 = 0.025_85;

/// Currents leaving each node of the `k × k` grid (amperes); zero at the
/// operating point. `v` and `i_src` are `[k, k]`; `vs` is the source voltage.
#[differentiable(wrt(v))]
pub fn grid(v: &Tensor, vs: f64, i_src: &Tensor, k: usize) -> Tensor {
    grid_currents(v, &vs, i_src, &Tensor::full([k, k], I_SAT, DType::F64), k)
}

/// [`grid`] with one saturation current per diode (`i_sat`, `[k, k]`).
#[differentiable(wrt(v))]
pub fn grid_is(v: &Tensor, vs: f64, i_src: &Tensor, i_sat: &Tensor, k: usize) -> Tensor {
    grid_currents(v, &vs, i_src, i_sat, k)
}

/// The power the source delivers at the grid's DC operating point (watts),
/// found by `rlx::root` from the guess `v0`: Newton on [`grid_currents`]
/// with the sparse Jacobian (chosen from its pattern) and faer's sparse
/// LU. Its gradient with respect to every source current and every
/// diode's `Is` is one reverse pass: a transposed sparse solve with the
/// Jacobian at the solution and one reverse pass of the residual.
#[differentiable(wrt(i_src, i_sat))]
pub fn dc_power(v0: &Tensor, vs: f64, i_src: &Tensor, i_sat: &Tensor, k: usize) -> f64 {
    let newton = rlx::Newton::new().tol(1e-12);
    let v = rlx::root(|v| grid_currents(v, &vs, i_src, i_sat, k), v0, newton)?;
    ((&vs - v.slice_range(0..1, 0)) / R_SOURCE).sum_all() * &vs
}

/// The grid's KCL residual with per-diode saturation currents.
pub fn grid_currents(v: &Tensor, vs: &Tensor, i_src: &Tensor, i_sat: &Tensor, k: usize) -> Tensor {
    // Current through each horizontal and vertical resistor, then the net
    // current out of each node: an edge's current leaves one end and
    // enters the other, and the borders have no edge beyond them.
    let ih = (v.slice_range(0..k - 1, 1) - v.slice_range(1..k, 1)) / R;
    let iv = (v.slice_range(0..k - 1, 0) - v.slice_range(1..k, 0)) / R;
    let zc = Tensor::zeros([k, 1], DType::F64);
    let zr = Tensor::zeros([1, k], DType::F64);
    let out_h = Tensor::concat(&[&ih, &zc], 1) - Tensor::concat(&[&zc, &ih], 1);
    let out_v = Tensor::concat(&[&iv, &zr], 0) - Tensor::concat(&[&zr, &iv], 0);
    // The first row is fed from the source.
    let fed = Tensor::concat(
        &[
            &((v.slice_range(0..1, 0) - vs) / R_SOURCE),
            &Tensor::zeros([k - 1, k], DType::F64),
        ],
        0,
    );
    let diode = ((v / V_T).exp() - 1.0) * i_sat;
    out_h + out_v + fed + diode + v / R_LEAK - i_src
}

/// Currents leaving each node of the `n`-node ladder (amperes): a voltage
/// source `vs` feeds node 0 through `R_SOURCE`, consecutive nodes are
/// joined by `R`, every node has a diode and a current source to ground,
/// and the last node a load `R_LOAD`.
#[differentiable(wrt(v))]
pub fn ladder(v: &Tensor, vs: f64, i_src: &Tensor, n: usize) -> Tensor {
    let left = Tensor::concat(&[&vs.reshape([1]), &v.slice_range(0..n - 1, 0)], 0);
    let g_left = Tensor::concat(
        &[
            &Tensor::full([1], 1.0 / R_SOURCE, DType::F64),
            &Tensor::full([n - 1], 1.0 / R, DType::F64),
        ],
        0,
    );
    let to_left = (v - &left) * &g_left;
    let to_right = Tensor::concat(
        &[
            &((v.slice_range(0..n - 1, 0) - v.slice_range(1..n, 0)) / R),
            &(v.slice_range(n - 1..n - 1 + 1, 0) / R_LOAD),
        ],
        0,
    );
    let diode = ((v / V_T).exp() - 1.0) * I_SAT;
    to_left + to_right + diode - i_src
}

// ------------------------------------------------ independent checks in Rust

/// The grid residual in plain Rust, written independently, to check the answer.
fn grid_reference(v: &[f64], vs: f64, i_src: &[f64], k: usize) -> Vec<f64> {
    let mut f = vec![0.0; k * k];
    for i in 0..k {
        for j in 0..k {
            let n = i * k + j;
            let mut out = I_SAT * ((v[n] / V_T).exp() - 1.0) + v[n] / R_LEAK - i_src[n];
            for (di, dj) in [(-1i64, 0i64), (1, 0), (0, -1), (0, 1)] {
                let (a, b) = (i as i64 + di, j as i64 + dj);
                if a >= 0 && b >= 0 && (a as usize) < k && (b as usize) < k {
                    out += (v[n] - v[a as usize * k + b as usize]) / R;
                }
            }
            if i == 0 {
                out += (v[n] - vs) / R_SOURCE;
            }
            f[n] = out;
        }
    }
    f
}

/// The ladder residual in plain Rust, to check the answer.
fn ladder_reference(v: &[f64], vs: f64, i_src: &[f64]) -> Vec<f64> {
    let n = v.len();
    (0..n)
        .map(|k| {
            let (left, g_left) = if k == 0 {
                (vs, 1.0 / R_SOURCE)
            } else {
                (v[k - 1], 1.0 / R)
            };
            let right = if k + 1 < n {
                (v[k] - v[k + 1]) / R
            } else {
                v[k] / R_LOAD
            };
            (v[k] - left) * g_left + right + I_SAT * ((v[k] / V_T).exp() - 1.0) - i_src[k]
        })
        .collect()
}

// ------------------------------------------------------------------- Newton

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|a| a * a).sum::<f64>().sqrt()
}

/// Limits each Newton step to a few thermal voltages, as circuit simulators
/// do for junctions, so that `exp` cannot overflow far from the solution.
fn damped_update(v: &mut [f64], dv: &[f64]) {
    let limit = 4.0 * V_T;
    for (vk, d) in v.iter_mut().zip(dv) {
        *vk += d.clamp(-limit, limit);
    }
}

/// `|F(v)|` before each Newton update, one entry per iteration.
type History = Vec<f64>;

/// The grid's source currents (amperes).
fn grid_sources(n: usize) -> Vec<f64> {
    (0..n)
        .map(|m| 2e-4 * (1.0 + (m % 7) as f64 / 7.0))
        .collect()
}

fn sparse_grid(k: usize) -> rlx::Result<History> {
    let n = k * k;
    let vs = 5.0;
    let i_src = grid_sources(n);
    let i_src_t = Tensor::from_slice(&i_src, [k, k]);
    let mut v = vec![0.6; n];
    println!("DC operating point of a {k} × {k} resistor–diode grid ({n} nodes), sparse Newton");

    // First call: trace, sparsity pattern, colouring, compile, and faer's
    // symbolic LU, all once for this size.
    let t0 = Instant::now();
    let vt = Tensor::from_slice(&v, [k, k]);
    let mut jac = sparse_jacobian_grid(&vt, vs, &i_src_t, k)?;
    let mut lu = SparseLu::new(jac.pattern())?;
    println!(
        "first call (pattern, colouring, compile, symbolic LU): {:.1} ms; Jacobian {n} × {n} with {} nonzeros",
        t0.elapsed().as_secs_f64() * 1e3,
        jac.nnz()
    );

    let mut f = vec![0.0; n];
    let mut dv = vec![0.0; n];
    let mut history = History::new();
    println!(
        "{:>4}  {:>12}  {:>12}  {:>10}",
        "iter", "|F(v)|", "|dv|", "step (ms)"
    );
    let mut total = 0.0;
    for iter in 0..60 {
        let t = Instant::now();
        let vt = Tensor::from_slice(&v, [k, k]);
        value_and_sparse_jacobian_into_grid(&vt, vs, &i_src_t, k, &mut f, &mut jac)?;
        lu.factor(&jac)?;
        for (d, fi) in dv.iter_mut().zip(&f) {
            *d = -fi;
        }
        lu.solve_in_place(&mut dv)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        total += ms;
        damped_update(&mut v, &dv);
        let (fnorm, step) = (norm(&f), norm(&dv));
        history.push(fnorm);
        println!("{iter:>4}  {fnorm:>12.3e}  {step:>12.3e}  {ms:>10.2}");
        if fnorm < 1e-10 && step < 1e-9 {
            break;
        }
    }
    let last = *history.last().expect("at least one iteration");
    assert!(last < 1e-10, "Newton did not converge: |F| = {last:.3e}");
    println!(
        "mean Newton step (residual + sparse Jacobian, numeric LU, solve): {:.2} ms over {} steps",
        total / history.len() as f64,
        history.len()
    );
    let check = norm(&grid_reference(&v, vs, &i_src, k));
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    println!("node voltages: min {lo:.6} V, max {hi:.6} V");
    println!("independent residual check: |F(v)| = {check:.3e} A");
    assert!(check < 1e-9, "the independent residual disagrees: {check}");
    Ok(history)
}

fn dense_ladder(n: usize) -> rlx::Result<History> {
    let vs = 5.0;
    let i_src: Vec<f64> = (0..n)
        .map(|k| 1e-3 * (1.0 + (k % 7) as f64 / 7.0))
        .collect();
    let i_src_t = Tensor::from_slice(&i_src, [n]);
    let mut v = vec![0.6; n];
    let mut history = History::new();
    println!("DC operating point of a {n}-section diode ladder, dense Newton (comparison)");
    println!(
        "{:>4}  {:>12}  {:>12}  {:>10}",
        "iter", "|F(v)|", "|dv|", "step (ms)"
    );
    for iter in 0..50 {
        let t = Instant::now();
        let vt = Tensor::from_slice(&v, [n]);
        let (f, jac) = value_and_jacobian_ladder(&vt, vs, &i_src_t, n)?;
        let rhs = (-&f).reshape([n, 1]);
        let dv = jac.try_solve(&rhs)?.to_vec::<f64>()?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        damped_update(&mut v, &dv);
        let fnorm = norm(&f.to_vec::<f64>()?);
        let step = norm(&dv);
        history.push(fnorm);
        println!("{iter:>4}  {fnorm:>12.3e}  {step:>12.3e}  {ms:>10.2}");
        if fnorm < 1e-12 && step < 1e-9 {
            break;
        }
    }
    let last = *history.last().expect("at least one iteration");
    assert!(last < 1e-12, "Newton did not converge: |F| = {last:.3e}");
    let check = norm(&ladder_reference(&v, vs, &i_src));
    println!("node voltages: first {:.6} V, last {:.6} V", v[0], v[n - 1]);
    println!("independent residual check: |F(v)| = {check:.3e} A");
    assert!(check < 1e-10, "the independent residual disagrees: {check}");
    Ok(history)
}

// ------------------------------------------------------ DC sensitivities

/// The power delivered by the source at node voltages `v` (watts).
fn power(v: &[f64], vs: f64, k: usize) -> f64 {
    vs * v[..k].iter().map(|vj| (vs - vj) / R_SOURCE).sum::<f64>()
}

/// The operating point with per-diode `i_sat`, by this file's own sparse
/// Newton (the rlx sparse Jacobian of [`grid_is`], `SparseLu`, damped
/// steps) from `v`, to `max|F| <= 1e-13` A: the full solve that the central
/// differences of the sensitivities run.
fn newton_is(
    k: usize,
    vs: f64,
    i_src: &[f64],
    i_sat: &[f64],
    mut v: Vec<f64>,
) -> Result<Vec<f64>, Box<dyn Error>> {
    let n = k * k;
    let (src, sat) = (
        Tensor::from_slice(i_src, [k, k]),
        Tensor::from_slice(i_sat, [k, k]),
    );
    let mut jac = sparse_jacobian_grid_is(&Tensor::from_slice(&v, [k, k]), vs, &src, &sat, k)?;
    let mut lu = SparseLu::new(jac.pattern())?;
    let (mut f, mut dv) = (vec![0.0; n], vec![0.0; n]);
    for _ in 0..60 {
        let vt = Tensor::from_slice(&v, [k, k]);
        value_and_sparse_jacobian_into_grid_is(&vt, vs, &src, &sat, k, &mut f, &mut jac)?;
        if f.iter().all(|x| x.abs() <= 1e-13) {
            return Ok(v);
        }
        lu.factor(&jac)?;
        for (d, fi) in dv.iter_mut().zip(&f) {
            *d = -fi;
        }
        lu.solve_in_place(&mut dv)?;
        damped_update(&mut v, &dv);
    }
    Err("the sparse Newton of the central differences did not converge".into())
}

/// `dP/d i_src` and `dP/d Is` for every node by one `value_and_grad` of
/// [`dc_power`] (Newton by `rlx::root`, then one reverse pass), checked
/// against central differences of the full Newton solve ([`newton_is`]) for
/// a few parameters; an error if any is off.
fn sensitivities(k: usize, i_src: &[f64]) -> Result<(), Box<dyn Error>> {
    let n = k * k;
    let vs = 5.0;
    let i_sat = vec![I_SAT; n];
    let (src, sat) = (
        Tensor::from_slice(i_src, [k, k]),
        Tensor::from_slice(&i_sat, [k, k]),
    );
    let v0 = Tensor::full([k, k], 0.6, DType::F64);
    println!("DC sensitivities of the delivered power on the {k} × {k} grid: rlx::root + one reverse pass");
    let t = Instant::now();
    let (p, (d_src, d_sat)) = value_and_grad_dc_power(&v0, vs, &src, &sat, k)?;
    let first = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let again = value_and_grad_dc_power(&v0, vs, &src, &sat, k)?;
    let warm = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(again.0, p, "a warm call gives the same power");
    println!(
        "P = {p:.9} W; value_and_grad_dc_power: first call {first:.0} ms (trace, pattern, colouring, compile, symbolic LU, Newton, adjoint), warm {warm:.1} ms"
    );
    let (d_src, d_sat) = (d_src.to_vec::<f64>()?, d_sat.to_vec::<f64>()?);
    let range = |d: &[f64]| {
        d.iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)))
    };
    let ((s0, s1), (i0, i1)) = (range(&d_src), range(&d_sat));
    println!("dP/d i_src over {n} sources: {s0:.6} .. {s1:.6} V; dP/d Is over {n} diodes: {i0:.4e} .. {i1:.4e} W/A");

    let v_op = newton_is(k, vs, i_src, &i_sat, vec![0.6; n])?;
    let p_hand = power(&v_op, vs, k);
    println!("P by the hand-written Newton: {p_hand:.9} W");
    if (p - p_hand).abs() > 1e-9 * p.abs() {
        return Err(
            format!("rlx::root's power {p} differs from the hand Newton's {p_hand}").into(),
        );
    }
    // Far from the source the sensitivities fall below what differences of
    // a 60 W power can resolve (10⁻¹⁵ relative), so the checked parameters
    // are those of the largest derivative and two next to the source.
    let argmax = |d: &[f64]| {
        (0..d.len())
            .max_by(|&a, &b| d[a].abs().total_cmp(&d[b].abs()))
            .unwrap_or(0)
    };
    let mut worst = 0.0f64;
    println!(
        "{:>10} {:>6}  {:>16}  {:>16}  {:>9}",
        "parameter", "node", "reverse pass", "central diff.", "rel. err"
    );
    let checks = [
        ("i_src", argmax(&d_src)),
        ("i_src", 1),
        ("i_src", k),
        ("Is", argmax(&d_sat)),
        ("Is", 1),
        ("Is", k),
    ];
    for (what, m) in checks {
        let (base, ad) = match what {
            "i_src" => (i_src, d_src[m]),
            _ => (&i_sat[..], d_sat[m]),
        };
        let h = 1e-3 * base[m];
        let solve_at = |e: f64| -> Result<f64, Box<dyn Error>> {
            let mut q = base.to_vec();
            q[m] += e;
            let v = match what {
                "i_src" => newton_is(k, vs, &q, &i_sat, v_op.clone())?,
                _ => newton_is(k, vs, i_src, &q, v_op.clone())?,
            };
            Ok(power(&v, vs, k))
        };
        let fd = (solve_at(h)? - solve_at(-h)?) / (2.0 * h);
        let rel = (fd - ad).abs() / ad.abs().max(f64::MIN_POSITIVE);
        worst = worst.max(rel);
        println!("{what:>10} {m:>6}  {ad:>16.9e}  {fd:>16.9e}  {rel:>9.1e}");
    }
    if worst > 1e-4 {
        return Err(format!("the sensitivities disagree with central differences (worst relative error {worst:.1e})").into());
    }
    println!(
        "sensitivities agree with central differences of the full Newton solve (worst {worst:.1e})"
    );
    Ok(())
}

// -------------------------------------------------------------------- plot

/// Plots `|F(v)|` per Newton iteration of both circuits on a log scale.
fn plot(grid: (&str, &History), ladder: (&str, &History)) -> Result<PathBuf, Box<dyn Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/plots");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("circuit.svg");
    draw(&path, grid, ladder)?;
    Ok(path)
}

fn draw(
    path: &std::path::Path,
    grid: (&str, &History),
    ladder: (&str, &History),
) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let iters = grid.1.len().max(ladder.1.len());
    let all = grid.1.iter().chain(ladder.1).copied().filter(|r| *r > 0.0);
    let (lo, hi) = all.fold((f64::MAX, f64::MIN), |(a, b), r| (a.min(r), b.max(r)));
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Newton on two diode circuits: residual per iteration",
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(
            0usize..iters.saturating_sub(1).max(1),
            (lo / 10.0..hi * 10.0).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("Newton iteration")
        .y_desc("‖F(v)‖₂, amperes (log scale)")
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .draw()?;
    for ((label, history), colour) in [(grid, BLUE), (ladder, RED)] {
        let points: Vec<(usize, f64)> = history
            .iter()
            .enumerate()
            .filter(|(_, r)| **r > 0.0)
            .map(|(i, r)| (i, *r))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(2))
            });
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let ci = std::env::args().any(|a| a == "--ci");
    let (k, n) = if ci { (30, 40) } else { (142, 200) };
    let grid = sparse_grid(k)?;
    println!();
    sensitivities(k, &grid_sources(k * k))?;
    println!();
    let ladder = dense_ladder(n)?;
    let path = plot(
        (&format!("{k} × {k} grid, sparse Jacobian"), &grid),
        (&format!("{n}-node ladder, dense Jacobian"), &ladder),
    )?;
    println!("residual history plotted to {}", path.display());
    println!("ok");
    Ok(())
}
