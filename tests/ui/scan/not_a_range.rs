use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, rates: Vec<u32>) -> Tensor {
    let mut x = x0.clone();
    #[scan]
    for r in rates.iter() {
        x = &x * 0.5;
    }
    x.sum_all()
}

fn main() {}
