use rlx::prelude::*;

#[differentiable(with(x))]
fn f(x: &Tensor) -> Tensor {
    x.clone()
}

fn main() {}
