use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    if x > 0.0 {
        y = x.clone();
    }
    y
}

fn main() {}
