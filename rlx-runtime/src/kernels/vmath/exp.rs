//! `exp`, `expm1` and `tanh`: one reduction `x = k ln2 + r`, `|r| ≤ ln2/2`,
//! and one polynomial `e^r - 1 = r + r² P(r)`.

use super::{poly, select, VFloat};

/// `x` clamped to `[lo, hi]`; NaN stays NaN (both tests are false).
#[inline(always)]
fn clamp<T: VFloat>(x: T, lo: T, hi: T) -> T {
    let x = select(x > hi, hi, x);
    select(x < lo, lo, x)
}

/// `(k, hi, lo)` with `x = k ln2 + hi + lo`: `k · LN2_HI` is exact, so is
/// `x - k · LN2_HI` (Sterbenz), and `lo` is what rounding `hi` lost
/// (Fast2Sum; the rounding of `k · LN2_LO`, below `2^-80` relative, is
/// the only error).
#[inline(always)]
fn reduce<T: VFloat>(x: T) -> (T, T, T) {
    let k = (x * T::LOG2E).round_int();
    let a = x - k * T::LN2_HI;
    let b = k * T::LN2_LO;
    let hi = a - b;
    (k, hi, (a - hi) - b)
}

/// `e^r - 1 - hi` for `r = hi + lo`, `|r| ≤ ln2/2`: the small part.
#[inline(always)]
fn expm1_tail<T: VFloat>(hi: T, lo: T) -> T {
    lo + (hi * hi) * poly(hi, T::EXP_P)
}

/// `p · 2^k` in two exact steps `2^k1 · 2^k2` (`k1 ≈ k2 ≈ k/2`): both
/// factors are normal for every `k` of `exp`'s clamped range, `p · 2^k1`
/// is exact, and the second product rounds once — also into the subnormal
/// range and to `+∞`.
#[inline(always)]
fn scale<T: VFloat>(p: T, k: T) -> T {
    let k1 = (k * T::HALF).round_int();
    p * T::pow2i(k1) * T::pow2i(k - k1)
}

/// `e^x`.
///
/// ```
/// use rlx::runtime::kernels::vmath::exp;
/// assert_eq!(exp(1.0f64), std::f64::consts::E);
/// assert_eq!((exp(-f32::INFINITY), exp(1000.0f64)), (0.0, f64::INFINITY));
/// ```
#[inline(always)]
pub fn exp<T: VFloat>(x: T) -> T {
    let (k, hi, lo) = reduce(clamp(x, T::EXP_LO, T::EXP_HI));
    // 1 + hi = s + e exactly (Fast2Sum), so the only rounding of note is
    // the last addition: results are within about 0.52 ulp.
    let s = T::ONE + hi;
    let e = (T::ONE - s) + hi;
    scale(s + (e + expm1_tail(hi, lo)), k)
}

/// `e^x - 1`, accurate near 0.
///
/// ```
/// use rlx::runtime::kernels::vmath::expm1;
/// assert_eq!(expm1(1e-10f64), 1.00000000005e-10);
/// assert_eq!(expm1(-0.0f32).to_bits(), (-0.0f32).to_bits());
/// ```
#[inline(always)]
pub fn expm1<T: VFloat>(x: T) -> T {
    let (k, hi, lo) = reduce(clamp(x, T::EXPM1_LO, T::EXP_HI));
    let q = hi + expm1_tail(hi, lo);
    // e^x - 1 = 2^k q + (2^k - 1): both terms exact up to one rounding
    // each while 2^k is finite.
    let s = T::pow2i(select(k > T::MAX_K, T::MAX_K, k));
    let small = s * q + (s - T::ONE);
    // 2^k overflows only when e^x - 1 rounds to e^x.
    let big = scale(T::ONE + q, k) - T::ONE;
    let y = select(k > T::MAX_K, big, small);
    // Keeps the sign of zero (q would be +0 for -0).
    select(x == T::ZERO, x, y)
}

/// `tanh x = e / (e + 2)` with `e = e^(2|x|) - 1`, sign restored: no
/// cancellation for small `|x|`, and `±1` from `|x| > TANH_MAX` on.
///
/// ```
/// use rlx::runtime::kernels::vmath::tanh;
/// assert_eq!((tanh(30.0f32), tanh(-30.0f32)), (1.0, -1.0));
/// assert_eq!(tanh(1e-20f64), 1e-20);
/// ```
#[inline(always)]
pub fn tanh<T: VFloat>(x: T) -> T {
    let t = x.abs();
    let t = select(t > T::TANH_MAX, T::TANH_MAX, t);
    let e = expm1(t + t);
    (e / (e + T::TWO)).copysign(x)
}
