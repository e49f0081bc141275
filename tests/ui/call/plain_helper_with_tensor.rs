use rlx::prelude::*;

// A helper of numbers without `#[differentiable]` cannot take a tensor.
fn lj(r: f64) -> f64 {
    4.0 * (r.powi(-12) - r.powi(-6))
}

#[differentiable]
fn energy(x: &Tensor) -> Tensor {
    let r = x.sum_all();
    lj(r)
}

fn main() {}
