use rlx::prelude::*;

#[differentiable(wrt(x, n))]
fn f(x: &Tensor, n: usize) -> Tensor {
    let _ = n;
    x.clone()
}

fn main() {}
