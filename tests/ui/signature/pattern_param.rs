use rlx::prelude::*;

#[differentiable]
fn f((x, y): (Tensor, Tensor)) -> Tensor {
    x
}

fn main() {}
