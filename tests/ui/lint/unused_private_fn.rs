// A private `#[differentiable]` function that nothing uses is dead code,
// reported by its own name, as a plain function would be; its unused
// companions are not reported.
#![deny(dead_code)]
use rlx::prelude::*;

#[differentiable]
fn energy(x: &Tensor) -> Tensor {
    x.square().sum_all()
}

/// A function with a float and a static parameter (a generic plain call
/// and a static key): reported the same way.
#[differentiable]
fn powered(x: &Tensor, k: f64, n: i32) -> f64 {
    k * x.powi(n).sum_all()
}

fn main() {}
