//! `sin` and `cos`: `x = k π/2 + r`, `|r| ≤ π/4`, with `π/2` in three parts
//! (`C1`, `C2` of 33 significant bits, so `k · C1` and `k · C2` are exact
//! for `|k| < 2^20`); then the sine or cosine polynomial of `r` by the
//! quadrant `k mod 4`. `f32` arguments are reduced and evaluated in `f64`
//! (shorter polynomials) and rounded once at the end.

use super::{poly, select, VFloat};

const C1: f64 = 1.570_796_326_734_125_6;
const C2: f64 = 6.077_100_506_303_966e-11;
const C3: f64 = 2.022_266_248_795_950_6e-21;

/// The `f32` core's range: `|k| < 2^20`, and the reduction's error (about
/// `k · 2^-122`) is far below an `f32` ulp of the smallest `|r|` there.
pub(super) const F32_RANGE: f32 = 1.5e6;
/// The `f64` core's range: the reduction error `k · 2^-122` stays below one
/// ulp of `r` even for the `x` nearest a multiple of `π/2`. Beyond, libm
/// (Payne–Hanek).
pub(super) const F64_RANGE: f64 = 32768.0;

/// `(sin r - r) / r³` in `z = r²`, low degree first.
const SIN_64: [f64; 6] = [
    -0.166_666_666_666_666_66,
    0.008_333_333_333_330_948,
    -0.000_198_412_698_367_585_74,
    2.755_731_610_255_244e-6,
    -2.505_113_184_500_362_4e-8,
    1.591_812_929_486_660_8e-10,
];
/// `(cos r - 1 + z/2) / z²` in `z = r²`.
const COS_64: [f64; 6] = [
    0.041_666_666_666_666_664,
    -0.001_388_888_888_888_739_8,
    2.480_158_729_876_569e-5,
    -2.755_731_727_172_979_3e-7,
    2.087_614_626_840_32e-9,
    -1.138_263_242_552_171_7e-11,
];
/// Shorter versions, accurate to about 2^-35, for `f32` arguments.
const SIN_32: [f64; 4] = [
    -0.166_666_666_638_552_9,
    0.008_333_331_874_710_208,
    -0.000_198_400_867_353_848_46,
    2.724_992_580_305_979e-6,
];
const COS_32: [f64; 4] = [
    0.041_666_666_664_321_2,
    -0.001_388_888_767_201_679,
    2.480_060_037_715_673e-5,
    -2.730_095_920_390_147e-7,
];

/// `sin x` (or `cos x`) for `|x|` within the core's range.
#[inline(always)]
fn sin_cos(x: f64, cos: bool, sin_p: &[f64], cos_p: &[f64]) -> f64 {
    let k = (x * std::f64::consts::FRAC_2_PI).round_int();
    let r = ((x - k * C1) - k * C2) - k * C3;
    let z = r * r;
    let s = r + (r * z) * poly(z, sin_p);
    // 1 - z/2 rounded, plus what that rounding lost.
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let c = w + (((1.0 - w) - hz) + (z * z) * poly(z, cos_p));
    // The quadrant from the low bits of k + 1.5 · 2^52 (a multiple of 4).
    let n = (k + 6755399441055744.0).to_bits() + u64::from(cos);
    let v = select(n & 1 == 1, c, s);
    let v = select(n & 2 == 2, -v, v);
    // sin(±0) = ±0 (the polynomial gives +0 for -0).
    select(x == 0.0 && !cos, x, v)
}

#[inline(always)]
pub(super) fn sin_cos_f64(x: f64, cos: bool) -> f64 {
    sin_cos(x, cos, &SIN_64, &COS_64)
}

#[inline(always)]
pub(super) fn sin_cos_f32(x: f32, cos: bool) -> f32 {
    sin_cos(f64::from(x), cos, &SIN_32, &COS_32) as f32
}
