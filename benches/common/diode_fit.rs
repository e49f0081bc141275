//! A diode fit: a few scalar parameters driving a large element-wise
//! computation (issue #15, scalar regions of mixed graphs). Shared by
//! `benches/medium.rs` and `tests/mixed_companions.rs`.
//!
//! Five parameters `p = [is0, n, temp, eg, gain]` go through a chain of
//! small ops (the thermal voltage `vt = k/q · temp`, the saturation current
//! scaled to the temperature `is = is0 · r³ · exp((r − 1) · eg / vt)` with
//! `r = temp / TNOM`, the slope `n · vt`), then the diode law
//! `i = gain · is · (exp(v / (n · vt)) − 1)` over `N` measured voltages,
//! and the loss `Σ (i − i_meas)²`. Its gradient adds reductions of large
//! cotangents into the parameters, which feed small chains again.
#![allow(dead_code)]

use rlx::prelude::*;

/// Boltzmann's constant over the elementary charge, V/K.
pub const K_OVER_Q: f64 = 8.617_333_262e-5;
/// The temperature at which `is0` is given, K.
pub const TNOM: f64 = 300.15;

/// The parameters the data are made with, and the ones the fit starts at.
pub const TRUE: [f64; 5] = [1e-12, 1.6, 305.0, 1.12, 2.0];
pub const START: [f64; 5] = [1.5e-12, 1.5, 300.0, 1.1, 1.8];

/// The loss over the measured `(v, i_meas)` (a plain function over
/// tensors: traced by [`diode_fit`] and by tests that build the graph).
pub fn diode_fit_body(p: &Tensor, v: &Tensor, i_meas: &Tensor) -> Tensor {
    let is0 = p.slice_range(0..1, 0);
    let n = p.slice_range(1..2, 0);
    let temp = p.slice_range(2..3, 0);
    let eg = p.slice_range(3..4, 0);
    let gain = p.slice_range(4..5, 0);
    let vt = &temp * K_OVER_Q;
    let r = &temp * (1.0 / TNOM);
    let is = is0 * r.powi(3) * ((&r - 1.0) * eg / &vt).exp();
    let slope = n * vt;
    let i = is * ((v / slope).exp() - 1.0) * gain;
    (i - i_meas).square().sum_all()
}

/// [`diode_fit_body`] as a differentiable function of the parameters.
#[differentiable(wrt(p))]
pub fn diode_fit(p: &Tensor, v: &Tensor, i_meas: &Tensor) -> f64 {
    diode_fit_body(p, v, i_meas)
}

/// `n` voltages in [0.3, 0.7) and the currents of the model at [`TRUE`].
pub fn data(n: usize) -> (Vec<f64>, Vec<f64>) {
    let v: Vec<f64> = (0..n).map(|k| 0.3 + 0.4 * k as f64 / n as f64).collect();
    let none = vec![0.0; n];
    let mut i = vec![0.0; n];
    let mut grad = [0.0; 5];
    currents(&TRUE, &v, &none, &mut i, &mut grad);
    (v, i)
}

/// The model's currents at `p` into `i`; returns the loss against
/// `i_meas` and writes its analytic gradient into `grad`.
pub fn currents(
    p: &[f64; 5],
    v: &[f64],
    i_meas: &[f64],
    i: &mut [f64],
    grad: &mut [f64; 5],
) -> f64 {
    let [is0, n, temp, eg, gain] = *p;
    let vt = temp * K_OVER_Q;
    let r = temp * (1.0 / TNOM);
    let w = (r - 1.0) * eg / vt;
    let ex = w.exp();
    let is = is0 * r.powi(3) * ex;
    let slope = n * vt;
    // Σ 2d (e − 1) and Σ 2d · e · v over the devices.
    let (mut loss, mut s1, mut s2) = (0.0, 0.0, 0.0);
    for ((&vk, &mk), ik) in v.iter().zip(i_meas).zip(i.iter_mut()) {
        let e = (vk / slope).exp();
        *ik = is * (e - 1.0) * gain;
        let d = *ik - mk;
        loss += d * d;
        s1 += 2.0 * d * (e - 1.0);
        s2 += 2.0 * d * e * vk;
    }
    let d_is = s1 * gain;
    let d_slope = -s2 * is * gain / (slope * slope);
    let d_r = d_is * is0 * ex * (3.0 * r * r + r.powi(3) * eg / vt);
    let d_vt = -d_is * is * w / vt + d_slope * n;
    *grad = [
        d_is * r.powi(3) * ex,
        d_slope * vt,
        d_r / TNOM + d_vt * K_OVER_Q,
        d_is * is * (r - 1.0) / vt,
        s1 * is,
    ];
    loss
}
