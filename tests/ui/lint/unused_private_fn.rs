// A private `#[differentiable]` function that nothing uses is dead code,
// reported by its own name, as a plain function would be; its unused
// companions are not reported.
#![deny(dead_code)]
use rlx::prelude::*;

#[differentiable]
fn energy(x: &Tensor) -> Tensor {
    x.square().sum_all()
}

fn main() {}
