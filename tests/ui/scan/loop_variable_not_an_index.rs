use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    #[scan]
    for t in 0..steps {
        x = &x * (t as f64 * 0.1);
    }
    x.sum_all()
}

fn main() {}
