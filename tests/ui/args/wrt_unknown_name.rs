use rlx::prelude::*;

#[differentiable(wrt(y))]
fn f(x: &Tensor) -> Tensor {
    x.clone()
}

fn main() {}
