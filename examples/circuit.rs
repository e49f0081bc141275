//! DC operating point of a nonlinear circuit by Newton–Raphson.
//!
//! A ladder of `n` sections: a voltage source `VS` feeds node 0 through a
//! resistor; consecutive nodes are joined by resistors `R`; every node has
//! a diode and a current source to ground, and the last node a load
//! resistor. Kirchhoff's current law at every node gives the residual
//! `F(v) = 0`; Newton's method solves `J(v) dv = -F(v)` with the Jacobian
//! `J = dF/dv` from `jacobian_residual` (all columns in one batched
//! execution) and the runtime's dense LU solve.
//!
//! Run with `cargo run --release --example circuit` (200 sections), or
//! `-- --ci` for a smaller, faster instance.

use rlx::prelude::*;

const R: f64 = 50.0; // series resistors, ohms
const R_SOURCE: f64 = 10.0; // source resistance, ohms
const R_LOAD: f64 = 1_000.0; // load at the last node, ohms
const I_SAT: f64 = 1e-14; // diode saturation current, amperes
const V_T: f64 = 0.025_85; // thermal voltage at 300 K, volts

/// Sum of the currents leaving each node (amperes); zero at the operating point.
#[differentiable(wrt(v))]
pub fn residual(v: &Tensor, vs: f64, i_src: &Tensor, n: usize) -> Tensor {
    // Neighbour to the left of each node (the source for node 0) and the
    // conductance of the resistor in between.
    let left = Tensor::concat(&[&vs.reshape([1]), &v.slice(0, 0, n - 1)], 0);
    let g_left = Tensor::concat(
        &[
            &Tensor::full(1.0 / R_SOURCE, [1], DType::F64),
            &Tensor::full(1.0 / R, [n - 1], DType::F64),
        ],
        0,
    );
    let to_left = (v - &left) * &g_left;
    // Current into the right neighbour (the load for the last node).
    let to_right = Tensor::concat(
        &[
            &((v.slice(0, 0, n - 1) - v.slice(0, 1, n - 1)) / R),
            &(v.slice(0, n - 1, 1) / R_LOAD),
        ],
        0,
    );
    let diode = ((v / V_T).exp() - 1.0) * I_SAT;
    to_left + to_right + diode - i_src
}

/// The same residual in plain Rust, written independently, to check the answer.
fn residual_reference(v: &[f64], vs: f64, i_src: &[f64]) -> Vec<f64> {
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

fn main() -> rlx::Result<()> {
    let ci = std::env::args().any(|a| a == "--ci");
    let n = if ci { 40 } else { 200 };
    let vs = 5.0;
    let i_src: Vec<f64> = (0..n)
        .map(|k| 1e-3 * (1.0 + (k % 7) as f64 / 7.0))
        .collect();
    let i_src_t = Tensor::from_slice(&i_src, [n]);

    let mut v = vec![0.6; n];
    println!("DC operating point of a {n}-section diode ladder (Newton–Raphson)");
    println!("{:>4}  {:>12}  {:>12}", "iter", "|F(v)|", "|dv|");
    let mut converged = false;
    for iter in 0..50 {
        let vt = Tensor::from_slice(&v, [n]);
        let f = residual(&vt, vs, &i_src_t, n);
        let jac = jacobian_residual(&vt, vs, &i_src_t, n)?;
        let rhs = (-&f).reshape([n, 1]);
        let dv = jac.try_solve(&rhs)?.to_vec::<f64>()?;
        // Limit each step to a few thermal voltages, as circuit simulators do
        // for junctions, so that exp() cannot overflow far from the solution.
        let limit = 4.0 * V_T;
        for (vk, d) in v.iter_mut().zip(&dv) {
            *vk += d.clamp(-limit, limit);
        }
        let fnorm = norm(&f.to_vec::<f64>()?);
        let step = norm(&dv);
        println!("{iter:>4}  {fnorm:>12.3e}  {step:>12.3e}");
        if fnorm < 1e-12 && step < 1e-9 {
            converged = true;
            break;
        }
    }
    assert!(converged, "Newton did not converge");

    let check = norm(&residual_reference(&v, vs, &i_src));
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    println!(
        "node voltages: first {:.6} V, last {:.6} V, min {lo:.6} V, max {hi:.6} V",
        v[0],
        v[n - 1]
    );
    println!("independent residual check: |F(v)| = {check:.3e} A");
    assert!(check < 1e-10, "the independent residual disagrees: {check}");
    println!("ok");
    Ok(())
}
