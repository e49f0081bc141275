use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, n: f64) -> Tensor {
    let mut x = x0.clone();
    #[scan]
    for _ in 0..n {
        x = x.sin();
    }
    x.sum_all()
}

fn main() {}
