//! The 3-terminal device shared by `benches/medium.rs` and
//! `tests/macro_companions.rs` (included by `#[path]`), with its
//! hand-written per-device Jacobians.

use rlx::prelude::*;

pub const IS: f64 = 1e-3;
pub const VT: f64 = 0.05;

/// Terminal currents of a diode-like device, `u: [N, 3]` → `[N, 3]`:
/// a diode `IS (exp((v0 − v1)/VT) − 1)` from 0 to 1, a tanh channel
/// `0.5 tanh(2 (v1 − v2)) (1 + 0.1 v0)` from 1 to 2, a bilinear leak
/// `0.01 v0 v2` from 0 to 2.
#[differentiable]
pub fn device(u: &Tensor) -> Tensor {
    let v0 = u.slice_range(0..1, 1);
    let v1 = u.slice_range(1..2, 1);
    let v2 = u.slice_range(2..3, 1);
    let id = ((&v0 - &v1) * (1.0 / VT)).exp() * IS - IS;
    let it = ((&v1 - &v2) * 2.0).tanh() * 0.5 * (&v0 * 0.1 + 1.0);
    let il = &v0 * &v2 * 0.01;
    let i0 = &id + &il;
    let i1 = &it - &id;
    let i2 = (&it + &il) * -1.0;
    Tensor::concat(&[&i0, &i1, &i2], 1)
}

/// The analytic per-device Jacobians of [`device`], `[N, 3, 3]`.
pub fn device_jacobian_by_hand(u: &[f64], jac: &mut [f64]) {
    for (v, j) in u.chunks_exact(3).zip(jac.chunks_exact_mut(9)) {
        let (v0, v1, v2) = (v[0], v[1], v[2]);
        let gd = IS / VT * ((v0 - v1) / VT).exp();
        let th = (2.0 * (v1 - v2)).tanh();
        let s = 1.0 + 0.1 * v0;
        let gt = (1.0 - th * th) * s; // ∂it/∂v1 = −∂it/∂v2
        let dt0 = 0.05 * th; // ∂it/∂v0
        let (l0, l2) = (0.01 * v2, 0.01 * v0);
        j.copy_from_slice(&[
            gd + l0,
            -gd,
            l2,
            dt0 - gd,
            gt + gd,
            -gt,
            -dt0 - l0,
            -gt,
            gt - l2,
        ]);
    }
}
