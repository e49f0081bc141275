use rlx::prelude::*;

#[differentiable]
unsafe fn f(x: &Tensor) -> Tensor {
    x.clone()
}

fn main() {}
