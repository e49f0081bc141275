use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    while y < 1.0 {
        y = x.clone();
    }
    y
}

fn main() {}
