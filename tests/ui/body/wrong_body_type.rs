use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> (Tensor, f64) {
    (x.clone(), x.clone(), x.clone())
}

fn main() {}
