use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    if let Some(y) = Some(x) {
        y.clone()
    } else {
        x.clone()
    }
}

fn main() {}
