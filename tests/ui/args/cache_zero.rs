use rlx::prelude::*;

#[differentiable(cache = 0)]
fn f(x: &Tensor) -> Tensor {
    x.sum_all()
}

fn main() {}
