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
//! 2. A 200-section diode ladder with the dense `value_and_jacobian_ladder`
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
    let diode = ((v / V_T).exp() - 1.0) * I_SAT;
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

fn sparse_grid(k: usize) -> rlx::Result<History> {
    let n = k * k;
    let vs = 5.0;
    let i_src: Vec<f64> = (0..n)
        .map(|m| 2e-4 * (1.0 + (m % 7) as f64 / 7.0))
        .collect();
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
    let ladder = dense_ladder(n)?;
    let path = plot(
        (&format!("{k} × {k} grid, sparse Jacobian"), &grid),
        (&format!("{n}-node ladder, dense Jacobian"), &ladder),
    )?;
    println!("residual history plotted to {}", path.display());
    println!("ok");
    Ok(())
}
