use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    let y = async { x.clone() };
    x.clone()
}

fn main() {}
