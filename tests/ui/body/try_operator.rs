use rlx::prelude::*;

#[differentiable]
fn inner(x: &Tensor) -> Tensor {
    x.clone()
}

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    grad_inner(x)?
}

fn main() {}
