use rlx::prelude::*;

#[differentiable]
fn f(x0: &Tensor, steps: usize) -> Tensor {
    let mut x = x0.clone();
    let mut path = Vec::new();
    #[scan]
    for _ in 0..steps {
        x = x.sin() + path.len() as f64;
        path.push(x.clone());
    }
    x.sum_all()
}

fn main() {}
