use rlx::prelude::*;

#[differentiable]
fn f<T: Clone>(x: &Tensor, cfg: T) -> Tensor {
    x.clone()
}

fn main() {}
