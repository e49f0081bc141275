use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    let mut log = String::new();
    #[scan]
    for _ in 0..steps {
        x = x.sin();
        log.push_str("step ");
    }
    x.sum_all()
}

fn main() {}
