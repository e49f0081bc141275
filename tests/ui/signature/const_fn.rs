use rlx::prelude::*;

#[differentiable]
const fn f(x: f64) -> f64 {
    x
}

fn main() {}
