use rlx::prelude::*;

#[differentiable]
async fn f(x: &Tensor) -> Tensor {
    x.clone()
}

fn main() {}
