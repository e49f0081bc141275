use rlx::prelude::*;

struct Model;

impl Model {
    #[differentiable]
    fn f(&self, x: &Tensor) -> Tensor {
        x.clone()
    }
}

// The callers of the method and of its companions get no follow-on error.
fn main() {
    let x = Tensor::from_slice(&[1.0, 2.0], [2]);
    let _ = Model.f(&x);
    let _ = Model.jacobian_f(&x);
}
