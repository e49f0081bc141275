use rlx::prelude::*;

#[differentiable]
fn f(x: &Tensor, n: usize) -> Tensor {
    let mut i = 0;
    loop {
        i += 1;
        if i == n {
            break;
        }
    }
    x.clone()
}

fn main() {}
