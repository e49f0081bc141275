// A struct of float constants as a parameter: static configuration that
// cannot be hashed. One error, on the parameter's type, and none from the
// companions or their callers.
use rlx::prelude::*;

#[derive(Clone, Copy, PartialEq)]
struct Spring {
    k: f64,
    rest: f64,
}

#[differentiable]
fn energy(q: &Tensor, spring: Spring) -> f64 {
    let r = q.square().sum_all().sqrt();
    0.5 * spring.k * (r - spring.rest).powi(2)
}

fn main() {
    let q = Tensor::from_slice(&[1.0, 2.0], [2]);
    let spring = Spring { k: 10.0, rest: 1.0 };
    let _ = energy(&q, spring);
    let _ = grad_energy(&q, spring);
    let _ = hessian_energy(&q, spring);
}
