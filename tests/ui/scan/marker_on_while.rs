use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    let mut i = 0;
    #[scan]
    while i < steps {
        x = x.sin();
        i += 1;
    }
    x.sum_all()
}

fn main() {}
