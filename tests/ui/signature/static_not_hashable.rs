use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor, weights: Vec<f64>) -> Tensor {
    x.clone()
}

fn main() {}
