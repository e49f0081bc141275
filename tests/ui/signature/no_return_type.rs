use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) {
    let _ = x;
}

fn main() {}
