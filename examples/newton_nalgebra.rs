//! Newton's method on the Bratu problem with nalgebra types end to end:
//! the state is a `DVector`, the Jacobian a `DMatrix` factorised by
//! nalgebra's LU; rlx differentiates the residual, written once over
//! tensors. Needs the `nalgebra` feature:
//!
//! ```sh
//! cargo run --release --features nalgebra --example newton_nalgebra
//! ```
//!
//! (`-- --ci` solves a smaller grid.)
//!
//! The problem: `-u'' = λ eᵘ` on `(0, 1)`, `u(0) = u(1) = 0`, discretised
//! on `n` interior points with central differences. For `λ = 1` the lower
//! solution is `u(x) = -2 ln(cosh((x - ½) θ/2) / cosh(θ/4))` with
//! `θ = √(2λ) cosh(θ/4)`; the discrete solution agrees to `O(h²)`.

use nalgebra::{DMatrix, DVector};
use rlx::prelude::*;

const LAMBDA: f64 = 1.0;

/// `F(u)_i = (2u_i - u_{i-1} - u_{i+1}) / h² - λ e^{u_i}` (zero boundary values).
#[differentiable(wrt(u))]
fn residual(u: &Tensor, lambda: f64) -> Tensor {
    let n = u.shape().dims()[0];
    let h = 1.0 / (n + 1) as f64;
    let zero = Tensor::zeros([1], DType::F64);
    let padded = Tensor::concat(&[&zero, u, &zero], 0);
    let laplacian =
        (u * 2.0 - padded.slice_range(0..n, 0) - padded.slice_range(2..2 + n, 0)) / (h * h);
    laplacian - lambda * u.exp()
}

/// The closed-form solution for `λ = 1` at `x`.
fn exact(x: f64) -> f64 {
    // θ = √2 cosh(θ/4), by Newton's method on numbers.
    let mut theta: f64 = 1.5;
    for _ in 0..50 {
        let g = theta - 2f64.sqrt() * (theta / 4.0).cosh();
        let dg = 1.0 - 2f64.sqrt() * (theta / 4.0).sinh() / 4.0;
        theta -= g / dg;
    }
    -2.0 * (((x - 0.5) * theta / 2.0).cosh() / (theta / 4.0).cosh()).ln()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ci = std::env::args().any(|a| a == "--ci");
    let n = if ci { 40 } else { 200 };
    let mut u = DVector::<f64>::zeros(n);
    let mut steps = 0;
    loop {
        let t = Tensor::from(&u);
        let f = DVector::<f64>::try_from(residual(&t, LAMBDA))?;
        println!("step {steps}: |F| = {:.3e}", f.norm());
        if f.norm() < 1e-9 {
            break;
        }
        if steps == 20 {
            return Err("Newton did not converge in 20 steps".into());
        }
        let jac = DMatrix::<f64>::try_from(jacobian_residual(&t, LAMBDA)?)?;
        let du = jac.lu().solve(&(-&f)).ok_or("singular Jacobian")?;
        u += du;
        steps += 1;
    }
    let h = 1.0 / (n + 1) as f64;
    let err = (0..n)
        .map(|i| (u[i] - exact((i + 1) as f64 * h)).abs())
        .fold(0.0, f64::max);
    println!(
        "n = {n}: converged in {steps} Newton steps; max |u - exact| = {err:.2e} (h² = {:.2e})",
        h * h
    );
    // Second-order accurate: the error is a small multiple of h².
    assert!(
        steps <= 6,
        "quadratic convergence expected, took {steps} steps"
    );
    assert!(
        err < 0.1 * h * h,
        "discretisation error {err} too large for h = {h}"
    );
    Ok(())
}
