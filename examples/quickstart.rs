//! The README's first snippet: a spring's energy, its value, its gradient.
//!
//! Run with `cargo run --release --example quickstart`.

use rlx::prelude::*;

/// Energy of a spring of stiffness `k` and rest length `rest` between two
/// points in the plane, `q = [x0, y0, x1, y1]`.
#[differentiable]
pub fn spring_energy(q: &Tensor, k: f64, rest: f64) -> f64 {
    let d = q.slice_range(2..4, 0) - q.slice_range(0..2, 0);
    let r = d.square().sum_all().sqrt();
    0.5 * k * (r - rest).powi(2)
}

fn main() -> rlx::Result<()> {
    let q = Tensor::from_slice(&[0.0, 0.0, 1.2, 0.1], [4]);

    // A plain call runs the compiled function.
    let e = spring_energy(&q, 10.0, 1.0);
    // Gradients with respect to every parameter, of the same types.
    let (dq, dk, drest) = grad_spring_energy(&q, 10.0, 1.0)?;
    // Value and gradient in one execution.
    let (e2, (dq2, _, _)) = value_and_grad_spring_energy(&q, 10.0, 1.0)?;

    println!("energy          = {e:.6}");
    println!("d energy / d q  = {dq}");
    println!("d energy / d k  = {dk:.6}");
    println!("d energy / d r0 = {drest:.6}");

    // Check against the closed form: E = k/2 (r - r0)^2, dE/dr0 = -k (r - r0).
    let r = (1.2f64 * 1.2 + 0.1 * 0.1).sqrt();
    let expect_e = 0.5 * 10.0 * (r - 1.0).powi(2);
    assert!((e - expect_e).abs() < 1e-12, "energy {e} vs {expect_e}");
    assert!((e2 - e).abs() == 0.0);
    assert!((drest + 10.0 * (r - 1.0)).abs() < 1e-12);
    assert!((dk - 0.5 * (r - 1.0).powi(2)).abs() < 1e-12);
    assert_eq!(dq.to_vec::<f64>()?, dq2.to_vec::<f64>()?);
    println!("ok: matches the closed form");
    Ok(())
}
