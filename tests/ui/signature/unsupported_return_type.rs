use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Vec<f64> {
    vec![x.numel() as f64]
}

fn main() {}
