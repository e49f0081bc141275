use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    if x > 0.0 {
        return x.clone();
    } else {
        x.clone()
    }
}

fn main() {}
