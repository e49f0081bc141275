use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor) -> Tensor {
    let t = if x > 0.0 { (x.clone(), x.clone()) } else { (x.clone(), x.clone()) };
    let _ = t;
    x.clone()
}

fn main() {}
