use rlx::prelude::*;

#[differentiable]
fn lj(r: f64) -> f64 {
    4.0 * (r.powi(-12) - r.powi(-6))
}

fn main() {
    let n = 2u32;
    let _ = lj(n);
}
