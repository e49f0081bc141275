// A static parameter is stored with the plans it selects: it cannot borrow.
use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor, mode: &str) -> Tensor {
    if mode == "double" {
        x * 2.0
    } else {
        x.clone()
    }
}

fn main() {
    let x = Tensor::from_slice(&[1.0, 2.0], [2]);
    let _ = grad_f(&x, "double");
}
