use rlx::prelude::*;

struct Model;

impl Model {
    #[differentiable]
    fn f(&self, x: &Tensor) -> Tensor {
        x.clone()
    }
}

fn main() {}
