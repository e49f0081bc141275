//! Forms a new user writes on the first day, compiled with every warning
//! denied (generated code must not warn in such crates).
#![deny(warnings)]
use rlx::prelude::*;

#[differentiable]
fn sumsin(x: &Tensor) -> Tensor {
    (x.sin() * x).sum_all()
}

/// `?` in the body: the gradient of another function, differentiable again.
#[differentiable]
fn grad_of_sumsin(x: &Tensor) -> Tensor {
    let g = grad_sumsin(x)?;
    g * 2.0
}

/// A parameter unused on purpose (`_y`): its tangent is `tangent_y`.
#[differentiable]
fn ignores_y(x: &Tensor, _y: f64) -> Tensor {
    x.square().sum_all()
}

/// A `let` bound to a traced `if` used by a method call.
#[differentiable]
fn let_select(x: &Tensor) -> Tensor {
    let y = if x > 0.0 { x.sqrt() } else { 0.0 * x };
    y.sum_all()
}

/// Scalar math as written for numbers (van der Pol).
#[differentiable]
fn van_der_pol(x: f64, v: f64, mu: f64) -> f64 {
    mu * (1.0 - x * x) * v - x
}

/// A scalar helper written once for numbers, used inside a traced body
/// with a tensor, next to a closure over numbers.
#[differentiable]
fn lj(r: f64) -> f64 {
    4.0 * (r.powi(-12) - r.powi(-6))
}

#[differentiable]
fn with_helpers(x: &Tensor, _scale: f32) -> f64 {
    let r = x.sum_all();
    let half = |v: f64| v * 0.5;
    lj(&r) + half(r)
}

fn main() {
    assert_eq!(lj(1.0), 0.0);
    let r = Tensor::from_slice(&[0.5f64, 0.5], [2]);
    assert_eq!(with_helpers(&r, 1.0), 0.5);
    let (_, _, (hx, _)) = (0, 0, hessian_with_helpers(&r, 1.0).unwrap());
    assert_eq!(hx.0.shape().dims(), &[2, 2]);
    let x = Tensor::from_slice(&[0.5f64, -1.0], [2]);
    let g = grad_of_sumsin(&x).to_vec::<f64>().unwrap();
    assert!((g[0] - 2.0 * (0.5f64.cos() * 0.5 + 0.5f64.sin())).abs() < 1e-12);
    let (gx, gy) = grad_ignores_y(&x, 1.0).unwrap();
    assert_eq!(gx.to_vec::<f64>().unwrap(), vec![1.0, -2.0]);
    assert_eq!(gy, 0.0);
    let (_, t) = jvp_ignores_y(&x, 3.0, &x, 1.0).unwrap();
    assert_eq!(t.item::<f64>().unwrap(), 2.0 * (0.25 + 1.0));
    assert_eq!(let_select(&x).item::<f64>().unwrap(), 0.5f64.sqrt());
    let (dx, dv, dmu) = grad_van_der_pol(0.5, 2.0, 3.0).unwrap();
    assert_eq!((dx, dv, dmu), (-2.0 * 3.0 * 0.5 * 2.0 - 1.0, 3.0 * 0.75, 0.75 * 2.0));
}
