//! A private `#[differentiable]` function used only through companions
//! is not dead code, and its unused companions are not reported (the
//! unused function itself is: `tests/ui/lint/unused_private_fn.rs`).
#![deny(dead_code)]
use rlx::prelude::*;

#[differentiable]
fn energy(x: &Tensor) -> Tensor {
    x.square().sum_all()
}

/// Generic over its float parameter (the plain call takes numbers or
/// tensors): used only through `grad_`.
#[differentiable]
fn scaled(x: f64, k: f64) -> f64 {
    k * x * x
}

/// With a static parameter: used only through `hessian_`.
#[differentiable]
fn powered(x: &Tensor, n: i32) -> Tensor {
    x.powi(n).sum_all()
}

/// Used only by its plain call: its companions, `graph_cubed` and
/// `nth_derivative_cubed`, all unused, are not reported.
#[differentiable]
fn cubed(x: f64) -> f64 {
    x * x * x
}

fn main() -> rlx::Result<()> {
    assert_eq!(cubed(2.0), 8.0);
    let x = Tensor::from_slice(&[1.0, 2.0], [2]);
    assert_eq!(grad_energy(&x)?.to_vec::<f64>()?, vec![2.0, 4.0]);
    let (dx, dk) = grad_scaled(3.0, 2.0)?;
    assert_eq!((dx, dk), (12.0, 9.0));
    // d²/dx² Σ x³ = diag(6x)
    assert_eq!(hessian_powered(&x, 3)?.to_vec::<f64>()?, vec![6.0, 0.0, 0.0, 12.0]);
    Ok(())
}
