//! `ln` and `log1p`: `x = 2^k m` with `m` in `[√½, √2)`, `f = m - 1`, and
//! `ln(1 + f) = 2 atanh(s)`, `s = f / (2 + f)`, `|s| ≤ 3 - 2√2`.

use super::{poly, select, VFloat};

/// `k ln2 + ln(1 + f) + c`, written so that `f` (exact) is added last and
/// the small terms first (the fdlibm arrangement).
#[inline(always)]
fn ln_reduced<T: VFloat>(k: T, f: T, c: T) -> T {
    let s = f / (T::TWO + f);
    let z = s * s;
    let r = z * poly(z, T::LN_P);
    let hfsq = T::HALF * f * f;
    k * T::LN2_HI - ((hfsq - (s * (hfsq + r) + (k * T::LN2_LO + c))) - f)
}

/// The IEEE results outside `(0, ∞)`: `ln(±0) = -∞`, `ln(∞) = ∞`, NaN for
/// negative numbers and NaN; `y` inside.
#[inline(always)]
fn edges<T: VFloat>(x: T, y: T) -> T {
    let y = select(x == T::INFINITY, x, y);
    let y = select(x == T::ZERO, T::NEG_INFINITY, y);
    select(x >= T::ZERO, y, T::NAN)
}

/// The natural logarithm.
///
/// ```
/// use rlx::runtime::kernels::vmath::ln;
/// assert_eq!(ln(1.0f64), 0.0);
/// assert_eq!(ln(std::f32::consts::E), 1.0);
/// assert!(ln(-1.0f64).is_nan() && ln(0.0f32) == f32::NEG_INFINITY);
/// ```
#[inline(always)]
pub fn ln<T: VFloat>(x: T) -> T {
    let sub = x < T::MIN_POSITIVE;
    let (k, m) = select(sub, x * T::SUB_SCALE, x).split_log();
    let k = select(sub, k - T::SUB_BITS, k);
    edges(x, ln_reduced(k, m - T::ONE, T::ZERO))
}

/// `ln(1 + x)`, accurate near 0.
///
/// ```
/// use rlx::runtime::kernels::vmath::log1p;
/// assert!((log1p(1e-10f64) - 9.9999999995e-11).abs() < 1e-25);
/// assert_eq!(log1p(-1.0f32), f32::NEG_INFINITY);
/// ```
#[inline(always)]
pub fn log1p<T: VFloat>(x: T) -> T {
    let u = T::ONE + x;
    let (k, m) = u.split_log();
    // 1 + x = u (1 + c) up to second order: c is the rounding error of
    // 1 + x (exact: u - 1 and the subtraction are exact) over u.
    let c = (x - (u - T::ONE)) / u;
    let y = edges(u, ln_reduced(k, m - T::ONE, c));
    // log1p(±0) = ±0, and u = 1 (ln 0) only for tiny x, where c = x.
    select(x == T::ZERO, x, y)
}
