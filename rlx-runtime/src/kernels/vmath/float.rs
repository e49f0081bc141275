//! [`VFloat`]: what the generic algorithms need of `f32` and `f64` —
//! arithmetic, bit-level primitives that vectorise, the reduction constants
//! and polynomial coefficients of each type — and the functions whose
//! algorithm differs by type (`sin`, `cos`, `erf`, `pow`).

use std::ops::{Add, Div, Mul, Neg, Sub};

use super::{erf, pow, trig};

/// A float type the vectorisable math is defined for (`f32` or `f64`).
///
/// ```
/// use rlx::runtime::kernels::vmath::{self, VFloat};
/// assert_eq!(vmath::exp(0.0f32), f32::ONE);
/// assert_eq!(1.5f64.round_int(), 2.0);
/// ```
pub trait VFloat:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + 'static
{
    /// `0`
    const ZERO: Self;
    /// `1`
    const ONE: Self;
    /// A quiet NaN.
    const NAN: Self;
    /// `+∞`
    const INFINITY: Self;
    /// `-∞`
    const NEG_INFINITY: Self;

    /// `|x|` (clears the sign bit).
    fn abs(self) -> Self;
    /// `|self|` with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// The nearest integer (ties to even), as a float: `(x + M) - M` with
    /// `M = 1.5 · 2^mantissa bits`, exact for `|x| < 2^(mantissa bits - 1)`.
    fn round_int(self) -> Self;

    /// `sin` (Cody–Waite reduction; libm beyond its range).
    fn sin(self) -> Self {
        if self.trig_rare() {
            self.sin_libm()
        } else {
            self.sin_core()
        }
    }
    /// `cos`, see [`VFloat::sin`].
    fn cos(self) -> Self {
        if self.trig_rare() {
            self.cos_libm()
        } else {
            self.cos_core()
        }
    }
    /// `erf`.
    fn erf(self) -> Self {
        if self.erf_rare() {
            self.erf_libm()
        } else {
            self.erf_core()
        }
    }
    /// `self^y`.
    fn pow(self, y: Self) -> Self {
        if self.pow_rare(y) {
            self.pow_libm(y)
        } else {
            self.pow_core(y)
        }
    }

    #[doc(hidden)]
    /// `sin` without the range check (valid where `!trig_rare`).
    fn sin_core(self) -> Self;
    #[doc(hidden)]
    fn cos_core(self) -> Self;
    #[doc(hidden)]
    /// Outside the reduction's range (or not finite).
    fn trig_rare(self) -> bool;
    #[doc(hidden)]
    fn sin_libm(self) -> Self;
    #[doc(hidden)]
    fn cos_libm(self) -> Self;
    #[doc(hidden)]
    fn erf_core(self) -> Self;
    #[doc(hidden)]
    fn erf_rare(self) -> bool;
    #[doc(hidden)]
    fn erf_libm(self) -> Self;
    #[doc(hidden)]
    fn pow_core(self, y: Self) -> Self;
    #[doc(hidden)]
    fn pow_rare(self, y: Self) -> bool;
    #[doc(hidden)]
    fn pow_libm(self, y: Self) -> Self;

    // --- what the generic algorithms (exp.rs, log.rs) need ---
    #[doc(hidden)]
    /// `2^k` for an integer-valued `k` of the normal exponent range.
    fn pow2i(k: Self) -> Self;
    #[doc(hidden)]
    /// `x = 2^k m` with `m` in `[√½, √2)`, for positive normal `x`: `(k, m)`.
    fn split_log(self) -> (Self, Self);
    #[doc(hidden)]
    const HALF: Self;
    #[doc(hidden)]
    const TWO: Self;
    #[doc(hidden)]
    const MIN_POSITIVE: Self;
    #[doc(hidden)]
    /// `2^SUB_BITS` lifts a subnormal into the normal range.
    const SUB_SCALE: Self;
    #[doc(hidden)]
    const SUB_BITS: Self;
    #[doc(hidden)]
    const LOG2E: Self;
    #[doc(hidden)]
    /// `ln 2` rounded to few enough bits that `k · LN2_HI` is exact for
    /// every `k` of the reductions.
    const LN2_HI: Self;
    #[doc(hidden)]
    const LN2_LO: Self;
    #[doc(hidden)]
    /// `exp` clamps its argument to `[EXP_LO, EXP_HI]`: beyond, the result
    /// is already `+∞` or `0`.
    const EXP_HI: Self;
    #[doc(hidden)]
    const EXP_LO: Self;
    #[doc(hidden)]
    /// Below this `expm1` is `-1` (rounded).
    const EXPM1_LO: Self;
    #[doc(hidden)]
    /// The largest `k` with `2^k` finite.
    const MAX_K: Self;
    #[doc(hidden)]
    /// Above this `tanh` is `±1` (rounded).
    const TANH_MAX: Self;
    #[doc(hidden)]
    /// `(e^r - 1 - r) / r²` on `|r| ≤ ln2 / 2`, low degree first.
    const EXP_P: &'static [Self];
    #[doc(hidden)]
    /// `(2 atanh(s) / s - 2) / s²` in `z = s²`, `|s| ≤ 3 - 2√2`.
    const LN_P: &'static [Self];
}

/// The methods that are std's own, and the libm fallbacks of `sin`/`cos`.
macro_rules! std_methods {
    ($t:ident) => {
        #[inline(always)]
        fn abs(self) -> $t {
            $t::abs(self)
        }
        #[inline(always)]
        fn copysign(self, sign: $t) -> $t {
            $t::copysign(self, sign)
        }
        #[inline(always)]
        fn is_nan(self) -> bool {
            $t::is_nan(self)
        }
        fn sin_libm(self) -> $t {
            $t::sin(self)
        }
        fn cos_libm(self) -> $t {
            $t::cos(self)
        }
    };
}

impl VFloat for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NAN: f32 = f32::NAN;
    const INFINITY: f32 = f32::INFINITY;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const HALF: f32 = 0.5;
    const TWO: f32 = 2.0;
    const MIN_POSITIVE: f32 = f32::MIN_POSITIVE;
    const SUB_SCALE: f32 = 33554432.0; // 2^25
    const SUB_BITS: f32 = 25.0;
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 16 significant bits: k ≤ 151 has 8.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const EXP_HI: f32 = 89.0;
    const EXP_LO: f32 = -104.0;
    const EXPM1_LO: f32 = -18.0;
    const MAX_K: f32 = 127.0;
    const TANH_MAX: f32 = 10.0;
    const EXP_P: &'static [f32] = &[
        0.5,
        0.166_665_78,
        0.041_666_556,
        0.008_363_173,
        0.001_392_617_6,
    ];
    const LN_P: &'static [f32] = &[0.666_666_87, 0.399_887_8, 0.295_799_5];

    std_methods!(f32);
    #[inline(always)]
    fn round_int(self) -> f32 {
        const M: f32 = 12582912.0; // 1.5 · 2^23
        (self + M) - M
    }
    #[inline(always)]
    fn pow2i(k: f32) -> f32 {
        // The low mantissa bits of 2^23 + 127 + k hold the biased exponent.
        f32::from_bits((k + 8388735.0).to_bits() << 23)
    }
    #[inline(always)]
    fn split_log(self) -> (f32, f32) {
        // Adding 1 - √½ to the bits carries into the exponent exactly when
        // the mantissa is at least √2, so m lands in [√½, √2).
        let ix = self.to_bits().wrapping_add(0x3f80_0000 - 0x3f35_04f3);
        let k = f32::from_bits(0x4b00_0000 | (ix >> 23)) - 8388735.0;
        let m = f32::from_bits((ix & 0x007f_ffff) + 0x3f35_04f3);
        (k, m)
    }
    #[inline(always)]
    fn sin_core(self) -> f32 {
        trig::sin_cos_f32(self, false)
    }
    #[inline(always)]
    fn cos_core(self) -> f32 {
        trig::sin_cos_f32(self, true)
    }
    // Negated so that NaN is rare too.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    #[inline(always)]
    fn trig_rare(self) -> bool {
        !(f32::abs(self) <= trig::F32_RANGE)
    }
    #[inline(always)]
    fn erf_core(self) -> f32 {
        erf::erf_f32(self)
    }
    #[inline(always)]
    fn erf_rare(self) -> bool {
        false
    }
    fn erf_libm(self) -> f32 {
        libm::erff(self)
    }
    #[inline(always)]
    fn pow_core(self, y: f32) -> f32 {
        pow::pow_f32(self, y)
    }
    #[inline(always)]
    fn pow_rare(self, y: f32) -> bool {
        pow::rare(self, y)
    }
    fn pow_libm(self, y: f32) -> f32 {
        f32::powf(self, y)
    }
}

impl VFloat for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NAN: f64 = f64::NAN;
    const INFINITY: f64 = f64::INFINITY;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const HALF: f64 = 0.5;
    const TWO: f64 = 2.0;
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    const SUB_SCALE: f64 = 18014398509481984.0; // 2^54
    const SUB_BITS: f64 = 54.0;
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    // 42 significant bits: k ≤ 1076 has 11.
    const LN2_HI: f64 = 0.693_147_180_559_890_3;
    const LN2_LO: f64 = 5.497_923_018_708_371e-14;
    const EXP_HI: f64 = 710.0;
    const EXP_LO: f64 = -746.0;
    const EXPM1_LO: f64 = -40.0;
    const MAX_K: f64 = 1023.0;
    const TANH_MAX: f64 = 22.0;
    const EXP_P: &'static [f64] = &[
        0.500_000_000_000_000_1,
        0.166_666_666_666_666_69,
        0.041_666_666_666_624_164,
        0.008_333_333_333_330_065,
        0.001_388_888_891_719_671_9,
        0.000_198_412_698_630_405_45,
        2.480_152_132_236_869_2e-5,
        2.755_726_848_031_002_4e-6,
        2.762_007_587_998_336_7e-7,
        2.510_037_583_256_123_4e-8,
    ];
    const LN_P: &'static [f64] = &[
        0.666_666_666_666_667,
        0.399_999_999_998_995_05,
        0.285_714_286_259_754_87,
        0.222_222_111_347_950_8,
        0.181_828_891_252_617_23,
        0.153_317_216_005_560_42,
        0.146_164_496_850_434_06,
    ];

    std_methods!(f64);
    #[inline(always)]
    fn round_int(self) -> f64 {
        const M: f64 = 6755399441055744.0; // 1.5 · 2^52
        (self + M) - M
    }
    #[inline(always)]
    fn pow2i(k: f64) -> f64 {
        f64::from_bits((k + 4503599627371519.0).to_bits() << 52)
    }
    #[inline(always)]
    fn split_log(self) -> (f64, f64) {
        let ix = self
            .to_bits()
            .wrapping_add(0x3ff0_0000_0000_0000 - 0x3fe6_a09e_667f_3bcd);
        // The exponent through the bits of 2^52 + e (no i64 → f64
        // conversion, which AVX2 lacks).
        let k = f64::from_bits(0x4330_0000_0000_0000 | (ix >> 52)) - 4503599627371519.0;
        let m = f64::from_bits((ix & 0x000f_ffff_ffff_ffff) + 0x3fe6_a09e_667f_3bcd);
        (k, m)
    }
    #[inline(always)]
    fn sin_core(self) -> f64 {
        trig::sin_cos_f64(self, false)
    }
    #[inline(always)]
    fn cos_core(self) -> f64 {
        trig::sin_cos_f64(self, true)
    }
    // Negated so that NaN is rare too.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    #[inline(always)]
    fn trig_rare(self) -> bool {
        !(f64::abs(self) <= trig::F64_RANGE)
    }
    // erf and pow of f64 stay libm calls (see the module doc): the core is
    // never used.
    #[inline(always)]
    fn erf_core(self) -> f64 {
        libm::erf(self)
    }
    #[inline(always)]
    fn erf_rare(self) -> bool {
        false
    }
    fn erf_libm(self) -> f64 {
        libm::erf(self)
    }
    #[inline(always)]
    fn pow_core(self, y: f64) -> f64 {
        f64::powf(self, y)
    }
    #[inline(always)]
    fn pow_rare(self, _y: f64) -> bool {
        false
    }
    fn pow_libm(self, y: f64) -> f64 {
        f64::powf(self, y)
    }
}
