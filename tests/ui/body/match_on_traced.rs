use rlx::prelude::*;

#[differentiable]
fn f(x: f64) -> f64 {
    match x {
        _ => x,
    }
}

fn main() {}
