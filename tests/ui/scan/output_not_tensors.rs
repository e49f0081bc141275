use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    let mut shapes = Vec::new();
    #[scan]
    for _ in 0..steps {
        x = x.sin();
        shapes.push(x.shape().clone());
    }
    x.sum_all()
}

fn main() {}
