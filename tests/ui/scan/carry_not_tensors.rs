use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    let mut count = 0usize;
    #[scan]
    for _ in 0..steps {
        x = x.sin();
        count += 1;
    }
    x.sum_all() * count as f64
}

fn main() {}
