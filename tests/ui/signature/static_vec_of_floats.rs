// A `Vec<f64>` parameter is static configuration, and `f64` is neither
// `Eq` nor `Hash`: one error, on the parameter's type.
use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor, weights: Vec<f64>) -> Tensor {
    x * weights[0]
}

fn main() {
    let x = Tensor::from_slice(&[1.0, 2.0], [2]);
    let _ = jacobian_f(&x, vec![2.0]);
}
