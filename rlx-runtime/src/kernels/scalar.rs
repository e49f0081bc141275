//! Op math, written once: the scalar function of every element-wise op.
//!
//! [`Real`] abstracts `f32` and `f64`; [`Float`] ties each float storage
//! type to the type it is computed in (`f16`/`bf16` load into `f32`, compute,
//! and round back on store). Integer and boolean values have their own small
//! tables ([`unary_i64`], [`binary_i64`], [`unary_bool`], [`binary_bool`]).
//!
//! These tables are the only definition of the ops: the reference kernels
//! and [`interpret`](crate::interpret()) call them per element, and the
//! compiled fused loops, register chains, scalar regions and their native
//! code (through the scalar interpreter's functions) call them too, so every
//! path computes the same values bit for bit. Each function is
//! `#[inline(always)]`: called with the op a constant, the `match` folds
//! away and a loop around it vectorises, which is why `sigmoid`, `silu`,
//! `min` and `max` are written without a branch on the value (they become
//! vector blends, not jumps). `exp`, `expm1`, `tanh`, `ln`, `log1p`, `sin`,
//! `cos`, `erf` and `pow` come from [`super::vmath`], written the same way
//! (libm calls would stop the loops from vectorising); ops with a rare
//! libm path expose it through [`unary_core`]/[`unary_rare`] and
//! [`binary_core`]/[`binary_rare`] so block loops keep the branch out of
//! their vector loop.

use std::convert::identity;
use std::fmt::Debug;
use std::ops::AddAssign;

use half::{bf16, f16};
use rlx_core::{BinaryOp, CmpOp, UnaryOp};

use super::vmath::{self, VFloat};

/// A float type arithmetic is done in (`f32` or `f64`).
///
/// Constants (`ZERO`, `ONE`, `NAN`, `INFINITY`, `NEG_INFINITY`), `abs`,
/// `is_nan`, `sin`, `cos`, `erf` and `pow` come from [`VFloat`], the
/// vectorisable math of [`super::vmath`].
pub trait Real: VFloat + Debug + AddAssign + Send + Sync + 'static {
    /// Machine epsilon.
    const EPSILON: Self;
    /// Rounding conversion from `f64`.
    fn from_f64(v: f64) -> Self;
    /// Exact conversion to `f64`.
    fn to_f64(self) -> f64;
    /// `e^x`
    fn exp(self) -> Self;
    /// `e^x - 1`
    fn exp_m1(self) -> Self;
    /// natural logarithm
    fn ln(self) -> Self;
    /// `ln(1 + x)`
    fn ln_1p(self) -> Self;
    /// tangent
    fn tan(self) -> Self;
    /// hyperbolic tangent
    fn tanh(self) -> Self;
    /// hyperbolic sine
    fn sinh(self) -> Self;
    /// hyperbolic cosine
    fn cosh(self) -> Self;
    /// arcsine
    fn asin(self) -> Self;
    /// arccosine
    fn acos(self) -> Self;
    /// arctangent
    fn atan(self) -> Self;
    /// `atan2(self, x)`
    fn atan2(self, x: Self) -> Self;
    /// square root
    fn sqrt(self) -> Self;
    /// round toward -∞
    fn floor(self) -> Self;
    /// round toward +∞
    fn ceil(self) -> Self;
    /// round half away from zero
    fn round(self) -> Self;
    /// integer power
    fn powi(self, n: i32) -> Self;
    /// real power
    fn powf(self, e: Self) -> Self;
    /// complementary error function `1 - erf(x)`
    fn erfc(self) -> Self;
}

/// Forwards `Real` methods to the inherent methods of the same name.
macro_rules! forward {
    ($t:ident; $($f:ident($($a:ident: $at:ty),*)),* $(,)?) => {
        $(
            #[inline(always)]
            fn $f(self $(, $a: $at)*) -> $t {
                $t::$f(self $(, $a)*)
            }
        )*
    };
}

/// Defines `Real` methods as calls of the given functions.
macro_rules! via {
    ($t:ident; $($f:ident = $g:path),* $(,)?) => {
        $(
            #[inline(always)]
            fn $f(self) -> $t {
                $g(self)
            }
        )*
    };
}

macro_rules! real {
    ($t:ident, $erfc:path) => {
        impl Real for $t {
            const EPSILON: $t = $t::EPSILON;
            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            forward!($t; tan(), sinh(), cosh(), asin(), acos(), atan(), atan2(x: $t), sqrt(),
                floor(), ceil(), round());
            via!($t; exp = vmath::exp, exp_m1 = vmath::expm1, ln = vmath::ln,
                ln_1p = vmath::log1p, tanh = vmath::tanh, erfc = $erfc);
            /// Square-and-multiply over `|n|`, then one reciprocal for a
            /// negative `n`: the algorithm `powi` runs for an exponent
            /// known only at run time (compiler-builtins' `__powidf2` and
            /// `__powisf2`), so results are bit-identical to it, written
            /// out so that it inlines (and unrolls for a constant `n`)
            /// instead of being a call per element.
            #[inline(always)]
            fn powi(self, n: i32) -> $t {
                let (mut a, mut b, mut r) = (self, n.unsigned_abs(), 1.0 as $t);
                loop {
                    if b & 1 != 0 {
                        r *= a;
                    }
                    b >>= 1;
                    if b == 0 {
                        break;
                    }
                    a *= a;
                }
                if n < 0 {
                    1.0 / r
                } else {
                    r
                }
            }
            #[inline(always)]
            fn powf(self, e: $t) -> $t {
                VFloat::pow(self, e)
            }
        }
    };
}

// libm's own `f32` versions, like every other `f32` op here (computed in
// `f32`, not through `f64`).
real!(f32, libm::erfcf);
real!(f64, libm::erfc);

/// A float storage type and the [`Real`] type it is computed in.
pub trait Float: Copy + Send + Sync + 'static {
    /// The type arithmetic happens in.
    type C: Real;
    /// Widens a stored value.
    fn load(self) -> Self::C;
    /// Rounds a computed value to storage.
    fn store(c: Self::C) -> Self;
}

macro_rules! float {
    ($t:ty, $c:ty, $load:expr, $store:expr) => {
        impl Float for $t {
            type C = $c;
            #[inline(always)]
            fn load(self) -> $c {
                $load(self)
            }
            #[inline(always)]
            fn store(c: $c) -> $t {
                $store(c)
            }
        }
    };
}

float!(f32, f32, identity, identity);
float!(f64, f64, identity, identity);
float!(f16, f32, f16::to_f32, f16::from_f32);
float!(bf16, f32, bf16::to_f32, bf16::from_f32);

/// `max` that propagates NaN: a NaN `a` is kept by the first test, a NaN
/// `b` fails `a >= b`, so either operand NaN gives that NaN (branch-free in
/// loops: a compare, an unordered test and a blend).
///
/// ```
/// use rlx::runtime::kernels::scalar::max_nan;
/// assert!(max_nan(1.0f32, f32::NAN).is_nan() && max_nan(f32::NAN, 1.0).is_nan());
/// assert_eq!(max_nan(-1.0f64, 2.0), 2.0);
/// ```
#[inline(always)]
pub fn max_nan<C: Real>(a: C, b: C) -> C {
    if a >= b || a.is_nan() {
        a
    } else {
        b
    }
}

/// `min` that propagates NaN (either operand NaN gives that NaN); see
/// [`max_nan`].
#[inline(always)]
pub fn min_nan<C: Real>(a: C, b: C) -> C {
    if a <= b || a.is_nan() {
        a
    } else {
        b
    }
}

/// The logistic function `1 / (1 + e^-x)`, branch-free so loops over it
/// vectorise. Accurate to a few ulp for both signs: for `x < 0` the error
/// of `e^-x` (a large value) carries over relatively, it does not cancel.
/// Only deep underflow loses digits (`x < -708` in `f64`, `-87` in `f32`,
/// where the result is subnormal; `e^-x` overflows to `+∞` and the result
/// to 0 a little before the true value would).
///
/// ```
/// use rlx::runtime::kernels::scalar::sigmoid;
/// assert_eq!(sigmoid(0.0f64), 0.5);
/// assert_eq!((sigmoid(-800.0f64), sigmoid(800.0f64)), (0.0, 1.0));
/// ```
#[inline(always)]
pub fn sigmoid<C: Real>(x: C) -> C {
    C::ONE / (C::ONE + (-x).exp())
}

/// The scalar function of a unary op on floats.
///
/// `Not` on a number is the logical not of `x != 0` (1 or 0); `silu` is
/// `x / (1 + e^-x)`, one rounding fewer than `x * sigmoid(x)`.
///
/// ```
/// use rlx::runtime::kernels::scalar::unary;
/// use rlx::UnaryOp;
/// assert_eq!(unary(UnaryOp::Round, -2.5f64), -3.0);
/// assert_eq!(unary(UnaryOp::Sign, 0.0f64), 0.0);
/// assert!((unary(UnaryOp::Gelu, 1.0f64) - 0.8413447460685429).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn unary<C: Real>(op: UnaryOp, x: C) -> C {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Ln => x.ln(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => C::ONE / x.sqrt(),
        UnaryOp::Recip => C::ONE / x,
        UnaryOp::Square => x * x,
        UnaryOp::Powi(n) => x.powi(n),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > C::ZERO {
                C::ONE
            } else if x < C::ZERO {
                -C::ONE
            } else {
                // 0 stays 0, NaN stays NaN.
                x
            }
        }
        UnaryOp::Relu => {
            if x > C::ZERO || x.is_nan() {
                x
            } else {
                C::ZERO
            }
        }
        // x Φ(x) = x erfc(-x/√2) / 2: erfc keeps full relative accuracy in the
        // left tail, where 1 + erf(x/√2) would cancel.
        UnaryOp::Gelu => {
            let half = C::from_f64(0.5);
            half * x * (-x * C::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erfc()
        }
        UnaryOp::Silu => x / (C::ONE + (-x).exp()),
        UnaryOp::Erf => x.erf(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Not => truth(x == C::ZERO),
        // A real value is its own conjugate and real part (`infer` takes
        // these ops on complex values only; the table stays total).
        UnaryOp::Conj | UnaryOp::Real => x,
        UnaryOp::Imag => C::ZERO,
    }
}

/// The scalar function of a binary op on floats.
///
/// `And`/`Or` on numbers are logical on `x != 0` (1 or 0).
///
/// ```
/// use rlx::runtime::kernels::scalar::binary;
/// use rlx::BinaryOp;
/// assert_eq!(binary(BinaryOp::MulZero, 0.0f64, f64::INFINITY), 0.0);
/// assert!(binary(BinaryOp::Max, f64::NAN, 1.0).is_nan());
/// ```
#[inline(always)]
pub fn binary<C: Real>(op: BinaryOp, a: C, b: C) -> C {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Min => min_nan(a, b),
        BinaryOp::Max => max_nan(a, b),
        BinaryOp::Atan2 => a.atan2(b),
        BinaryOp::MulZero => {
            if a == C::ZERO {
                C::ZERO
            } else {
                a * b
            }
        }
        BinaryOp::And => truth((a != C::ZERO) && (b != C::ZERO)),
        BinaryOp::Or => truth((a != C::ZERO) || (b != C::ZERO)),
        // Complex results are computed by `kernels::complex` (`infer` gives
        // `complex` a complex result); the real table stays total.
        BinaryOp::Complex => a,
    }
}

/// The branch-free part of [`unary`]: equal to `unary(op, x)` wherever
/// `!unary_rare(op, x)`. Block loops compute it for a whole chunk (it
/// vectorises), then redo the rare lanes with [`unary`], which gives the
/// same bits as calling [`unary`] per element (see [`super::vmath`]).
///
/// ```
/// use rlx::runtime::kernels::scalar::{unary, unary_core, unary_rare};
/// use rlx::UnaryOp;
/// assert!(!unary_rare(UnaryOp::Sin, 1.0f64) && unary_rare(UnaryOp::Sin, 1e300f64));
/// assert_eq!(unary_core(UnaryOp::Sin, 1.0f64), unary(UnaryOp::Sin, 1.0f64));
/// ```
#[inline(always)]
pub fn unary_core<C: Real>(op: UnaryOp, x: C) -> C {
    match op {
        UnaryOp::Sin => x.sin_core(),
        UnaryOp::Cos => x.cos_core(),
        UnaryOp::Erf => x.erf_core(),
        _ => unary(op, x),
    }
}

/// Whether `unary(op, x)` takes its rare (libm) path; see [`unary_core`].
#[inline(always)]
pub fn unary_rare<C: Real>(op: UnaryOp, x: C) -> bool {
    match op {
        UnaryOp::Sin | UnaryOp::Cos => x.trig_rare(),
        UnaryOp::Erf => x.erf_rare(),
        _ => false,
    }
}

/// The branch-free part of [`binary`], see [`unary_core`].
#[inline(always)]
pub fn binary_core<C: Real>(op: BinaryOp, a: C, b: C) -> C {
    match op {
        BinaryOp::Pow => a.pow_core(b),
        _ => binary(op, a, b),
    }
}

/// Whether `binary(op, a, b)` takes its rare (libm) path.
#[inline(always)]
pub fn binary_rare<C: Real>(op: BinaryOp, a: C, b: C) -> bool {
    match op {
        BinaryOp::Pow => a.pow_rare(b),
        _ => false,
    }
}

#[inline(always)]
fn truth<C: Real>(b: bool) -> C {
    if b {
        C::ONE
    } else {
        C::ZERO
    }
}

/// The scalar function of a comparison (IEEE: every comparison with NaN is
/// false except `Ne`).
#[inline(always)]
pub fn compare<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

/// The scalar function of a unary op on `i64` (wrapping arithmetic).
///
/// Ops that only make sense on floats (shape inference rejects them for
/// `i64`) are computed in `f64` and truncated, so the table is total.
/// `Powi` with a negative exponent truncates toward zero like integer
/// division (`0^-n` is 0).
#[inline(always)]
pub fn unary_i64(op: UnaryOp, x: i64) -> i64 {
    match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Sign => x.signum(),
        UnaryOp::Square => x.wrapping_mul(x),
        UnaryOp::Relu => x.max(0),
        UnaryOp::Powi(n) if n >= 0 => x.wrapping_pow(n.unsigned_abs()),
        // `1 / x^|n|`: ±1 for |x| = 1, else 0.
        UnaryOp::Powi(n) => match x {
            1 => 1,
            -1 if n % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        },
        UnaryOp::Not => (x == 0) as i64,
        UnaryOp::Conj | UnaryOp::Real => x,
        UnaryOp::Imag => 0,
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Ln
        | UnaryOp::Log1p
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Tanh
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sigmoid
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Recip
        | UnaryOp::Gelu
        | UnaryOp::Silu
        | UnaryOp::Erf
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round => unary(op, x as f64) as i64,
    }
}

/// The scalar function of a binary op on `i64` (wrapping arithmetic; float
/// only ops are computed in `f64` and truncated).
#[inline(always)]
pub fn binary_i64(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        // `0 * b` is 0 for every integer `b`: `MulZero` is `Mul`.
        BinaryOp::Mul | BinaryOp::MulZero => a.wrapping_mul(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::And => (a != 0 && b != 0) as i64,
        BinaryOp::Or => (a != 0 || b != 0) as i64,
        BinaryOp::Complex => a,
        BinaryOp::Div | BinaryOp::Pow | BinaryOp::Atan2 => binary(op, a as f64, b as f64) as i64,
    }
}

/// The scalar function of a unary op on `bool`: only `Not` exists for
/// `Bool`; other ops (rejected by shape inference) act on 0 and 1.
#[inline(always)]
pub fn unary_bool(op: UnaryOp, x: bool) -> bool {
    match op {
        UnaryOp::Not => !x,
        other => unary_i64(other, x as i64) != 0,
    }
}

/// The scalar function of a binary op on `bool`: `And`/`Or`; other ops act
/// on 0 and 1.
#[inline(always)]
pub fn binary_bool(op: BinaryOp, a: bool, b: bool) -> bool {
    match op {
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        other => binary_i64(other, a as i64, b as i64) != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-branch logistic function, exact up to the rounding of `exp`
    /// and two operations for either sign.
    fn stable_sigmoid(x: f64) -> f64 {
        if x >= 0.0 {
            1.0 / (1.0 + (-x).exp())
        } else {
            let e = x.exp();
            e / (1.0 + e)
        }
    }

    /// Distance in units of the last place between two finite `f32`s.
    fn ulps(a: f32, b: f32) -> u32 {
        let key = |v: f32| {
            let i = v.to_bits() as i32;
            if i < 0 {
                i32::MIN - i
            } else {
                i
            }
        };
        key(a).abs_diff(key(b))
    }

    #[test]
    fn erf_matches_known_values() {
        // Reference values of erf from Abramowitz & Stegun table 7.1 / high-precision tables.
        let cases = [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.999_977_909_503_001_4),
            (4.0, 0.999_999_984_582_742_1),
            (7.0, 1.0),
        ];
        for (x, want) in cases {
            let got = unary(UnaryOp::Erf, x);
            assert!((got - want).abs() <= 4e-16, "erf({x}) = {got}, want {want}");
            assert!((unary(UnaryOp::Erf, -x) + want).abs() <= 4e-16);
            // f32: libm's erff, within one ulp of the rounded f64 value.
            let got32 = unary(UnaryOp::Erf, x as f32);
            assert!(ulps(got32, want as f32) <= 1, "erf({x}f32) = {got32}");
        }
        assert!(unary(UnaryOp::Erf, f64::NAN).is_nan() && Real::erfc(f32::NAN).is_nan());
        // erfc keeps relative accuracy far in the tail: erfc(5) = 1.5374597944280349e-12.
        assert!((Real::erfc(5.0f64) / 1.537_459_794_428_035e-12 - 1.0).abs() < 1e-13);
        assert!((Real::erfc(5.0f32) / 1.537_459_8e-12 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn sigmoid_and_silu_are_accurate_for_both_signs() {
        for i in -7000..=7000 {
            let x = i as f64 * 0.1;
            let want = stable_sigmoid(x);
            let got = unary(UnaryOp::Sigmoid, x);
            assert!(
                (got - want).abs() <= 4.0 * f64::EPSILON * want,
                "sigmoid({x})"
            );
            let silu = unary(UnaryOp::Silu, x);
            let want_silu = x * want;
            assert!((silu - want_silu).abs() <= 4.0 * f64::EPSILON * want_silu.abs());
            // f32 away from its deep underflow (the result stays normal).
            if x > -87.0 {
                let got = unary(UnaryOp::Sigmoid, x as f32);
                assert!(
                    ulps(got, stable_sigmoid(x as f32 as f64) as f32) <= 2,
                    "{x}f32"
                );
            }
        }
        assert_eq!(sigmoid(f64::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert!(sigmoid(f64::NAN).is_nan());
        assert_eq!(unary(UnaryOp::Silu, -800.0f64), 0.0);
    }

    #[test]
    fn nan_propagates_through_relu_sign_min_max() {
        assert!(unary(UnaryOp::Relu, f64::NAN).is_nan());
        assert!(unary(UnaryOp::Sign, f64::NAN).is_nan());
        for op in [BinaryOp::Min, BinaryOp::Max] {
            assert!(binary(op, f64::NAN, 1.0).is_nan());
            assert!(binary(op, 1.0f32, f32::NAN).is_nan());
            assert!(binary(op, f32::NAN, f32::NAN).is_nan());
        }
        assert_eq!(binary(BinaryOp::Max, -1.0, 2.0), 2.0);
        assert_eq!(binary(BinaryOp::Min, -1.0, 2.0), -1.0);
        assert_eq!(unary(UnaryOp::Sign, -3.0f32), -1.0);
        assert_eq!(binary(BinaryOp::MulZero, 0.0, f64::INFINITY), 0.0);
        assert!(binary(BinaryOp::Mul, 0.0, f64::INFINITY).is_nan());
    }

    #[test]
    fn logical_ops_on_numbers() {
        assert_eq!(unary(UnaryOp::Not, 0.0f64), 1.0);
        assert_eq!(unary(UnaryOp::Not, -2.5f32), 0.0);
        assert_eq!(binary(BinaryOp::And, 2.0f64, 0.0), 0.0);
        assert_eq!(binary(BinaryOp::Or, 0.0f32, -1.0), 1.0);
        assert!(unary_bool(UnaryOp::Not, false));
        assert!(!binary_bool(BinaryOp::And, true, false));
        assert!(binary_bool(BinaryOp::Or, true, false));
        assert!(binary_bool(BinaryOp::Max, false, true));
    }

    #[test]
    fn integer_ops_wrap() {
        assert_eq!(binary_i64(BinaryOp::Add, i64::MAX, 1), i64::MIN);
        assert_eq!(binary_i64(BinaryOp::MulZero, 0, 7), 0);
        assert_eq!(unary_i64(UnaryOp::Neg, i64::MIN), i64::MIN);
        assert_eq!(unary_i64(UnaryOp::Powi(3), -2), -8);
        let inv: Vec<i64> = [-2, -1, 0, 1, 2]
            .into_iter()
            .map(|x| unary_i64(UnaryOp::Powi(-1), x))
            .collect();
        assert_eq!(inv, [0, -1, 0, 1, 0]);
        assert_eq!(unary_i64(UnaryOp::Powi(-2), -1), 1);
        assert_eq!(binary_i64(BinaryOp::Div, 7, -2), -3);
    }

    /// `Real::powi` is written out (so that it inlines and unrolls) but
    /// must give the bits of `powi` with an exponent known only at run
    /// time (compiler-builtins' `__powidf2`/`__powisf2`), which the
    /// reference evaluators use: every exponent in -40..=40 over values
    /// spanning underflow, overflow, signed zeros, infinities and NaN.
    #[test]
    fn powi_is_bit_identical_to_the_run_time_powi() {
        let mut xs: Vec<f64> = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            5e-324,
            1e300,
            -1e-300,
        ];
        xs.extend((0..400).map(|i| {
            let t = i as f64 / 399.0;
            (-1f64).powi(i) * (10f64).powf(-30.0 + 60.0 * t) * (1.0 + 0.37 * t)
        }));
        for n in -40..=40 {
            let rt = std::hint::black_box(n);
            for &x in &xs {
                let (got, want) = (Real::powi(x, n), x.powi(rt));
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{x:e}^{n}: {got:e} vs {want:e}"
                );
                let x = x as f32;
                let (got, want) = (Real::powi(x, n), x.powi(rt));
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{x:e}^{n} (f32): {got:e} vs {want:e}"
                );
            }
        }
    }
}
