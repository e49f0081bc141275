//! DC operating point of nonlinear circuits by Newton–Raphson, with the
//! sparse Jacobian path at real scale and the dense one for comparison.
//!
//! 1. A 2-D resistor–diode grid of `k × k` nodes (20 164 by default):
//!    neighbouring nodes are joined by resistors `R`, the first row is fed
//!    from a voltage source `VS` through `R_SOURCE`, and every node has a
//!    diode, a leakage resistor and a current source to ground. Kirchhoff's
//!    current law at every node gives the residual `F(v) = 0`; Newton's
//!    method solves `J(v) dv = -F(v)` with the residual and its sparse
//!    Jacobian from one execution (`value_and_sparse_jacobian_into_grid`,
//!    five nonzeros per row, found from the traced graph and compressed to a
//!    handful of colours) and a sparse LU from faer whose symbolic
//!    factorisation is computed once and reused at every step.
//! 2. The 200-section diode ladder with the dense `jacobian_ladder` and the
//!    runtime's dense LU, the way to go for small circuits.
//!
//! Run with `cargo run --release --example circuit`, or `-- --ci` for
//! smaller, faster instances.

use std::time::Instant;

use rlx::prelude::*;

#[path = "../benches/common/circuit.rs"]
mod circuit;
use circuit::{grid_residual, value_and_jacobian_ladder, I_SAT, R, R_LEAK, R_LOAD, R_SOURCE, V_T};

/// Currents leaving each node of the `k × k` grid (amperes); zero at the
/// operating point (see `benches/common/circuit.rs`).
#[differentiable(wrt(v))]
pub fn grid(v: &Tensor, vs: f64, i_src: &Tensor, k: usize) -> Tensor {
    grid_residual(v, &vs, i_src, k)
}

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

fn sparse_grid(k: usize) -> rlx::Result<()> {
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
    println!(
        "{:>4}  {:>12}  {:>12}  {:>10}",
        "iter", "|F(v)|", "|dv|", "step (ms)"
    );
    let mut converged = false;
    let mut total = 0.0;
    let mut steps = 0;
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
        steps += 1;
        damped_update(&mut v, &dv);
        let (fnorm, step) = (norm(&f), norm(&dv));
        println!("{iter:>4}  {fnorm:>12.3e}  {step:>12.3e}  {ms:>10.2}");
        if fnorm < 1e-10 && step < 1e-9 {
            converged = true;
            break;
        }
    }
    assert!(converged, "Newton did not converge");
    println!(
        "mean Newton step (residual + sparse Jacobian, numeric LU, solve): {:.2} ms over {steps} steps",
        total / steps as f64
    );
    let check = norm(&grid_reference(&v, vs, &i_src, k));
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    println!("node voltages: min {lo:.6} V, max {hi:.6} V");
    println!("independent residual check: |F(v)| = {check:.3e} A");
    assert!(check < 1e-9, "the independent residual disagrees: {check}");
    Ok(())
}

fn dense_ladder(n: usize) -> rlx::Result<()> {
    let vs = 5.0;
    let i_src: Vec<f64> = (0..n)
        .map(|k| 1e-3 * (1.0 + (k % 7) as f64 / 7.0))
        .collect();
    let i_src_t = Tensor::from_slice(&i_src, [n]);
    let mut v = vec![0.6; n];
    println!("DC operating point of a {n}-section diode ladder, dense Newton (comparison)");
    println!(
        "{:>4}  {:>12}  {:>12}  {:>10}",
        "iter", "|F(v)|", "|dv|", "step (ms)"
    );
    let mut converged = false;
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
        println!("{iter:>4}  {fnorm:>12.3e}  {step:>12.3e}  {ms:>10.2}");
        if fnorm < 1e-12 && step < 1e-9 {
            converged = true;
            break;
        }
    }
    assert!(converged, "Newton did not converge");
    let check = norm(&ladder_reference(&v, vs, &i_src));
    println!("node voltages: first {:.6} V, last {:.6} V", v[0], v[n - 1]);
    println!("independent residual check: |F(v)| = {check:.3e} A");
    assert!(check < 1e-10, "the independent residual disagrees: {check}");
    Ok(())
}

fn main() -> rlx::Result<()> {
    let ci = std::env::args().any(|a| a == "--ci");
    sparse_grid(if ci { 30 } else { 142 })?;
    println!();
    dense_ladder(if ci { 40 } else { 200 })?;
    println!("ok");
    Ok(())
}
