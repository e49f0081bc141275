use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    let parts = vec![x.clone()];
    let doubled = parts * 2.0;
    doubled.sum_all()
}

fn main() {}
