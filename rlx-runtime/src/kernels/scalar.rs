//! Op math, written once: the scalar function of every element-wise op.
//!
//! [`Real`] abstracts `f32` and `f64`; [`Float`] ties each float storage
//! type to the type it is computed in (`f16`/`bf16` load into `f32`, compute,
//! and round back on store). Kernels call [`unary`], [`binary`] and
//! [`compare`] inside their loops; integer and boolean values have their own
//! small tables ([`unary_i64`], [`binary_i64`]).

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

use half::{bf16, f16};
use rlx_core::{BinaryOp, CmpOp, UnaryOp};

/// A float type arithmetic is done in (`f32` or `f64`).
pub trait Real:
    Copy
    + PartialOrd
    + Debug
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
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
    /// sine
    fn sin(self) -> Self;
    /// cosine
    fn cos(self) -> Self;
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
    /// absolute value
    fn abs(self) -> Self;
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
    /// error function
    fn erf(self) -> Self;
    /// complementary error function `1 - erf(x)`
    fn erfc(self) -> Self;
    /// whether the value is NaN
    fn is_nan(self) -> bool;
}

macro_rules! real {
    ($t:ident, $erf:path, $erfc:path) => {
        impl Real for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const NAN: $t = $t::NAN;
            const INFINITY: $t = $t::INFINITY;
            const NEG_INFINITY: $t = $t::NEG_INFINITY;
            const EPSILON: $t = $t::EPSILON;
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn exp(self) -> $t {
                $t::exp(self)
            }
            fn exp_m1(self) -> $t {
                $t::exp_m1(self)
            }
            fn ln(self) -> $t {
                $t::ln(self)
            }
            fn ln_1p(self) -> $t {
                $t::ln_1p(self)
            }
            fn sin(self) -> $t {
                $t::sin(self)
            }
            fn cos(self) -> $t {
                $t::cos(self)
            }
            fn tan(self) -> $t {
                $t::tan(self)
            }
            fn tanh(self) -> $t {
                $t::tanh(self)
            }
            fn sinh(self) -> $t {
                $t::sinh(self)
            }
            fn cosh(self) -> $t {
                $t::cosh(self)
            }
            fn asin(self) -> $t {
                $t::asin(self)
            }
            fn acos(self) -> $t {
                $t::acos(self)
            }
            fn atan(self) -> $t {
                $t::atan(self)
            }
            fn atan2(self, x: $t) -> $t {
                $t::atan2(self, x)
            }
            fn sqrt(self) -> $t {
                $t::sqrt(self)
            }
            fn abs(self) -> $t {
                $t::abs(self)
            }
            fn floor(self) -> $t {
                $t::floor(self)
            }
            fn ceil(self) -> $t {
                $t::ceil(self)
            }
            fn round(self) -> $t {
                // `round` in std rounds half away from zero.
                $t::round(self)
            }
            fn powi(self, n: i32) -> $t {
                $t::powi(self, n)
            }
            fn powf(self, e: $t) -> $t {
                $t::powf(self, e)
            }
            fn erf(self) -> $t {
                $erf(self)
            }
            fn erfc(self) -> $t {
                $erfc(self)
            }
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
        }
    };
}

real!(f32, libm::erff, libm::erfcf);
real!(f64, libm::erf, libm::erfc);

/// A float storage type and the [`Real`] type it is computed in.
pub trait Float: Copy + Send + Sync + 'static {
    /// The type arithmetic happens in.
    type C: Real;
    /// Widens a stored value.
    fn load(self) -> Self::C;
    /// Rounds a computed value to storage.
    fn store(c: Self::C) -> Self;
}

impl Float for f32 {
    type C = f32;
    fn load(self) -> f32 {
        self
    }
    fn store(c: f32) -> f32 {
        c
    }
}

impl Float for f64 {
    type C = f64;
    fn load(self) -> f64 {
        self
    }
    fn store(c: f64) -> f64 {
        c
    }
}

impl Float for f16 {
    type C = f32;
    fn load(self) -> f32 {
        self.to_f32()
    }
    fn store(c: f32) -> f16 {
        f16::from_f32(c)
    }
}

impl Float for bf16 {
    type C = f32;
    fn load(self) -> f32 {
        self.to_f32()
    }
    fn store(c: f32) -> bf16 {
        bf16::from_f32(c)
    }
}

/// `max` that propagates NaN (either operand NaN gives NaN).
pub fn max_nan<C: Real>(a: C, b: C) -> C {
    if a.is_nan() || b.is_nan() {
        C::NAN
    } else if a >= b {
        a
    } else {
        b
    }
}

/// `min` that propagates NaN (either operand NaN gives NaN).
pub fn min_nan<C: Real>(a: C, b: C) -> C {
    if a.is_nan() || b.is_nan() {
        C::NAN
    } else if a <= b {
        a
    } else {
        b
    }
}

/// The logistic function `1 / (1 + e^-x)`, without overflow for either sign.
pub fn sigmoid<C: Real>(x: C) -> C {
    if x >= C::ZERO {
        C::ONE / (C::ONE + (-x).exp())
    } else {
        let e = x.exp();
        e / (C::ONE + e)
    }
}

/// The scalar function of a unary op on floats.
///
/// `Not` on a number is the logical not of `x != 0` (1 or 0).
///
/// ```
/// use rlx_runtime::kernels::scalar::unary;
/// use rlx_runtime::UnaryOp;
/// assert_eq!(unary(UnaryOp::Round, -2.5f64), -3.0);
/// assert_eq!(unary(UnaryOp::Sign, 0.0f64), 0.0);
/// assert!((unary(UnaryOp::Gelu, 1.0f64) - 0.8413447460685429).abs() < 1e-15);
/// ```
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
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Erf => x.erf(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Not => {
            if x == C::ZERO {
                C::ONE
            } else {
                C::ZERO
            }
        }
    }
}

/// The scalar function of a binary op on floats.
///
/// `And`/`Or` on numbers are logical on `x != 0` (1 or 0).
///
/// ```
/// use rlx_runtime::kernels::scalar::binary;
/// use rlx_runtime::BinaryOp;
/// assert_eq!(binary(BinaryOp::MulZero, 0.0f64, f64::INFINITY), 0.0);
/// assert!(binary(BinaryOp::Max, f64::NAN, 1.0).is_nan());
/// ```
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
    }
}

fn truth<C: Real>(b: bool) -> C {
    if b {
        C::ONE
    } else {
        C::ZERO
    }
}

/// The scalar function of a comparison (IEEE: every comparison with NaN is
/// false except `Ne`).
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
pub fn unary_i64(op: UnaryOp, x: i64) -> i64 {
    match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Sign => x.signum(),
        UnaryOp::Square => x.wrapping_mul(x),
        UnaryOp::Relu => x.max(0),
        UnaryOp::Powi(n) => {
            if n >= 0 {
                x.wrapping_pow(n as u32)
            } else {
                match x {
                    1 => 1,
                    -1 => {
                        if n % 2 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                }
            }
        }
        UnaryOp::Not => (x == 0) as i64,
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
pub fn binary_i64(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::MulZero => {
            if a == 0 {
                0
            } else {
                a.wrapping_mul(b)
            }
        }
        BinaryOp::And => (a != 0 && b != 0) as i64,
        BinaryOp::Or => (a != 0 || b != 0) as i64,
        BinaryOp::Div | BinaryOp::Pow | BinaryOp::Atan2 => binary(op, a as f64, b as f64) as i64,
    }
}

/// The scalar function of a unary op on `bool` (numbers are 0 and 1).
pub fn unary_bool(op: UnaryOp, x: bool) -> bool {
    if op == UnaryOp::Not {
        !x
    } else {
        unary_i64(op, x as i64) != 0
    }
}

/// The scalar function of a binary op on `bool` (numbers are 0 and 1).
pub fn binary_bool(op: BinaryOp, a: bool, b: bool) -> bool {
    binary_i64(op, a as i64, b as i64) != 0
}
