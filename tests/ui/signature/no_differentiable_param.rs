use rlx::prelude::*;

#[differentiable]
fn f(n: usize) -> f64 {
    n as f64
}

fn main() {}
