use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    #[scan(budget = 4)]
    for _ in 0..steps {
        x = x.sin();
    }
    x.sum_all()
}

fn main() {}
