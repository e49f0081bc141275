//! `pow` of `f32`: `e^(y ln x)` in `f64` for positive finite `x` and finite
//! `y` (the relative error of `y ln x` in `f64`, at most `104 · 2^-53`, is
//! far below an `f32` ulp), rounded once. Zero, negative, infinite and NaN
//! bases and infinite or NaN exponents (C99's special cases) go to libm.

use super::{exp, ln};

/// Whether `x^y` is one of the special cases libm computes (negated so
/// that NaN is one).
#[allow(clippy::neg_cmp_op_on_partial_ord)]
#[inline(always)]
pub(super) fn rare(x: f32, y: f32) -> bool {
    !(x > 0.0 && x < f32::INFINITY && y.abs() < f32::INFINITY)
}

#[inline(always)]
pub(super) fn pow_f32(x: f32, y: f32) -> f32 {
    exp(f64::from(y) * ln(f64::from(x))) as f32
}
