use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    #[scan]
    for _ in 0..steps {
        x = x.try_reshape([3])?;
    }
    x.sum_all()
}

fn main() {}
