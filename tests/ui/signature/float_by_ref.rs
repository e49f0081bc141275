use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor, k: &f64) -> Tensor {
    x.clone()
}

fn main() {}
