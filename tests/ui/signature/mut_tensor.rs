use rlx::prelude::*;

#[differentiable]
fn f(x: &mut Tensor) -> Tensor {
    x.clone()
}

fn main() {}
