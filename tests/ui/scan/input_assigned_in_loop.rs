use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, xs: &Tensor) -> Tensor {
    let mut x = x0.clone();
    let mut ys = xs.clone();
    #[scan]
    for t in 0..xs.shape().dim(0) {
        x = &x + &ys[t];
        ys = &ys * 0.5;
    }
    x.sum_all()
}

fn main() {}
