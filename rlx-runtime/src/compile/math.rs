//! Element-wise op math, written once and used by the fused loops and the
//! scalar region.
//!
//! Each `*_block` function matches on the op once and then runs one tight
//! loop over a block of values, so the loop body has no dispatch and LLVM
//! can vectorise it. The scalar region calls the same functions on blocks
//! of length 1, so fused, scalar and per-op execution agree bit for bit.
//!
//! Semantics follow the reference kernels: floats follow IEEE 754 (NaN
//! propagates through `relu`, `sign`, `min` and `max`); integers wrap on
//! overflow instead of panicking; `f16`/`bf16` values are computed in `f32`
//! by the callers.

use rlx_core::{BinaryOp, CmpOp, UnaryOp};

/// A floating-point compute type (`f32` or `f64`).
pub(crate) trait Real:
    Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sqrt(self) -> Self;
    fn powi(self, n: i32) -> Self;
    fn powf(self, e: Self) -> Self;
    fn abs(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round(self) -> Self;
    fn atan2(self, o: Self) -> Self;
    fn erf(self) -> Self;
    fn erfc(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! real_impl {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                <$t>::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                <$t>::cosh(self)
            }
            #[inline(always)]
            fn asin(self) -> Self {
                <$t>::asin(self)
            }
            #[inline(always)]
            fn acos(self) -> Self {
                <$t>::acos(self)
            }
            #[inline(always)]
            fn atan(self) -> Self {
                <$t>::atan(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn powi(self, n: i32) -> Self {
                <$t>::powi(self, n)
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn round(self) -> Self {
                <$t>::round(self)
            }
            #[inline(always)]
            fn atan2(self, o: Self) -> Self {
                <$t>::atan2(self, o)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                erf(self as f64) as $t
            }
            #[inline(always)]
            fn erfc(self) -> Self {
                erfc(self as f64) as $t
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

real_impl!(f32);
real_impl!(f64);

/// The error function `erf(x) = 2/√π ∫₀ˣ e^{-t²} dt`, to about 1 ulp in f64.
///
/// For `|x| < 2.5` the series `erf(x) = 2/√π · e^{-x²} · Σₙ 2ⁿ x^{2n+1} / (1·3·…·(2n+1))`
/// (all terms positive, so no cancellation); above, the continued fraction
/// `erfc(x) = e^{-x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`
/// evaluated from the tail; beyond 6 the value is ±1 in f64.
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let r = if a < 2.5 {
        let x2 = a * a;
        let mut term = a;
        let mut sum = a;
        let mut n = 0.0;
        while term > sum * 1e-17 {
            n += 1.0;
            term *= 2.0 * x2 / (2.0 * n + 1.0);
            sum += term;
        }
        std::f64::consts::FRAC_2_SQRT_PI * (-x2).exp() * sum
    } else if a < 6.0 {
        // Continued fraction of erfc, evaluated backwards with 60 levels
        // (converges to full precision for a >= 2.5).
        let mut f = a;
        for k in (1..=60).rev() {
            f = a + (k as f64 * 0.5) / f;
        }
        1.0 - (-a * a).exp() / (f * std::f64::consts::PI.sqrt())
    } else {
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// The complementary error function `erfc(x) = 1 - erf(x)`, with full
/// relative accuracy in the right tail (the continued fraction of [`erf`]
/// for `x >= 2.5`).
pub(crate) fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < 2.5 {
        return 1.0 - erf(x);
    }
    if x > 27.3 {
        return 0.0;
    }
    let mut f = x;
    for k in (1..=60).rev() {
        f = x + (k as f64 * 0.5) / f;
    }
    (-x * x).exp() / (f * std::f64::consts::PI.sqrt())
}

/// One unary op on a value, with the op known at the call site.
#[inline(always)]
pub(crate) fn unary<T: Real>(op: UnaryOp, x: T) -> T {
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
        UnaryOp::Sigmoid => T::ONE / (T::ONE + (-x).exp()),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => T::ONE / x.sqrt(),
        UnaryOp::Recip => T::ONE / x,
        UnaryOp::Square => x * x,
        UnaryOp::Powi(n) => x.powi(n),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                -T::ONE
            } else {
                x
            }
        }
        UnaryOp::Relu => {
            if x > T::ZERO || x.is_nan() {
                x
            } else {
                T::ZERO
            }
        }
        // x Φ(x) = x erfc(-x/√2) / 2: erfc keeps its relative accuracy in the
        // left tail, where 1 + erf(x/√2) cancels.
        UnaryOp::Gelu => {
            T::from_f64(0.5) * x * (-x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erfc()
        }
        UnaryOp::Silu => x / (T::ONE + (-x).exp()),
        UnaryOp::Erf => x.erf(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        // Rejected for floats by shape inference; identity keeps this total.
        UnaryOp::Not => x,
    }
}

/// One binary op on two values.
#[inline(always)]
pub(crate) fn binary<T: Real>(op: BinaryOp, a: T, b: T) -> T {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        // NaN-propagating, as the reference kernels (either operand NaN gives NaN).
        // A NaN `a` is kept by the first test, a NaN `b` fails `a <= b`.
        BinaryOp::Min => {
            if a <= b || a.is_nan() {
                a
            } else {
                b
            }
        }
        BinaryOp::Max => {
            if a >= b || a.is_nan() {
                a
            } else {
                b
            }
        }
        BinaryOp::Atan2 => a.atan2(b),
        BinaryOp::MulZero => {
            if a == T::ZERO {
                T::ZERO
            } else {
                a * b
            }
        }
        // Rejected for floats by shape inference: logical meaning on 0/1.
        BinaryOp::And => {
            if a != T::ZERO && b != T::ZERO {
                T::ONE
            } else {
                T::ZERO
            }
        }
        BinaryOp::Or => {
            if a != T::ZERO || b != T::ZERO {
                T::ONE
            } else {
                T::ZERO
            }
        }
    }
}

/// One comparison.
#[inline(always)]
pub(crate) fn compare<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

/// One unary op on an integer (overflow wraps).
#[inline(always)]
pub(crate) fn unary_i64(op: UnaryOp, x: i64) -> i64 {
    match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Sign => x.signum(),
        UnaryOp::Square => x.wrapping_mul(x),
        UnaryOp::Relu => x.max(0),
        UnaryOp::Powi(n) => {
            if n >= 0 {
                x.wrapping_pow(n.unsigned_abs())
            } else {
                // Integer reciprocal powers: exact for |x| = 1, else 0 (1/0 saturates).
                (x as f64).powi(n) as i64
            }
        }
        // Float-only ops are rejected for i64 by shape inference; these arms
        // compute through f64 so the table stays total.
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
        UnaryOp::Not => (x == 0) as i64,
    }
}

/// One binary op on integers (overflow wraps).
#[inline(always)]
pub(crate) fn binary_i64(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul | BinaryOp::MulZero => a.wrapping_mul(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Max => a.max(b),
        BinaryOp::And => (a != 0 && b != 0) as i64,
        BinaryOp::Or => (a != 0 || b != 0) as i64,
        // Float-only ops (rejected for i64 by shape inference) go through f64.
        BinaryOp::Div | BinaryOp::Pow | BinaryOp::Atan2 => binary(op, a as f64, b as f64) as i64,
    }
}

/// One op on booleans: only `Not` (unary) and `And`/`Or` (binary) exist
/// for `Bool`; other ops are rejected by shape inference and act on 0/1.
#[inline(always)]
pub(crate) fn unary_bool(op: UnaryOp, x: bool) -> bool {
    match op {
        UnaryOp::Not => !x,
        other => unary_i64(other, x as i64) != 0,
    }
}

/// See [`unary_bool`].
#[inline(always)]
pub(crate) fn binary_bool(op: BinaryOp, a: bool, b: bool) -> bool {
    match op {
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        other => binary_i64(other, a as i64, b as i64) != 0,
    }
}

/// Expands `$body!(op)` once per unary op with the op as a constant, so
/// each arm is its own loop without dispatch.
macro_rules! each_unary {
    ($op:expr, $body:ident) => {
        match $op {
            UnaryOp::Neg => $body!(UnaryOp::Neg),
            UnaryOp::Exp => $body!(UnaryOp::Exp),
            UnaryOp::Expm1 => $body!(UnaryOp::Expm1),
            UnaryOp::Ln => $body!(UnaryOp::Ln),
            UnaryOp::Log1p => $body!(UnaryOp::Log1p),
            UnaryOp::Sin => $body!(UnaryOp::Sin),
            UnaryOp::Cos => $body!(UnaryOp::Cos),
            UnaryOp::Tan => $body!(UnaryOp::Tan),
            UnaryOp::Tanh => $body!(UnaryOp::Tanh),
            UnaryOp::Sinh => $body!(UnaryOp::Sinh),
            UnaryOp::Cosh => $body!(UnaryOp::Cosh),
            UnaryOp::Asin => $body!(UnaryOp::Asin),
            UnaryOp::Acos => $body!(UnaryOp::Acos),
            UnaryOp::Atan => $body!(UnaryOp::Atan),
            UnaryOp::Sigmoid => $body!(UnaryOp::Sigmoid),
            UnaryOp::Sqrt => $body!(UnaryOp::Sqrt),
            UnaryOp::Rsqrt => $body!(UnaryOp::Rsqrt),
            UnaryOp::Recip => $body!(UnaryOp::Recip),
            UnaryOp::Square => $body!(UnaryOp::Square),
            UnaryOp::Powi(n) => $body!(UnaryOp::Powi(n)),
            UnaryOp::Abs => $body!(UnaryOp::Abs),
            UnaryOp::Sign => $body!(UnaryOp::Sign),
            UnaryOp::Relu => $body!(UnaryOp::Relu),
            UnaryOp::Gelu => $body!(UnaryOp::Gelu),
            UnaryOp::Silu => $body!(UnaryOp::Silu),
            UnaryOp::Erf => $body!(UnaryOp::Erf),
            UnaryOp::Floor => $body!(UnaryOp::Floor),
            UnaryOp::Ceil => $body!(UnaryOp::Ceil),
            UnaryOp::Round => $body!(UnaryOp::Round),
            UnaryOp::Not => $body!(UnaryOp::Not),
        }
    };
}

/// Like [`each_unary`] for binary ops.
macro_rules! each_binary {
    ($op:expr, $body:ident) => {
        match $op {
            BinaryOp::Add => $body!(BinaryOp::Add),
            BinaryOp::Sub => $body!(BinaryOp::Sub),
            BinaryOp::Mul => $body!(BinaryOp::Mul),
            BinaryOp::Div => $body!(BinaryOp::Div),
            BinaryOp::Pow => $body!(BinaryOp::Pow),
            BinaryOp::Min => $body!(BinaryOp::Min),
            BinaryOp::Max => $body!(BinaryOp::Max),
            BinaryOp::Atan2 => $body!(BinaryOp::Atan2),
            BinaryOp::MulZero => $body!(BinaryOp::MulZero),
            BinaryOp::And => $body!(BinaryOp::And),
            BinaryOp::Or => $body!(BinaryOp::Or),
        }
    };
}

/// Like [`each_unary`] for comparisons.
macro_rules! each_cmp {
    ($op:expr, $body:ident) => {
        match $op {
            CmpOp::Lt => $body!(CmpOp::Lt),
            CmpOp::Le => $body!(CmpOp::Le),
            CmpOp::Gt => $body!(CmpOp::Gt),
            CmpOp::Ge => $body!(CmpOp::Ge),
            CmpOp::Eq => $body!(CmpOp::Eq),
            CmpOp::Ne => $body!(CmpOp::Ne),
        }
    };
}

/// A block operand: a slice of `len` values, or one value broadcast.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a, T> {
    Slice(&'a [T]),
    Scalar(T),
}

/// `out[i] = f(a[i])`, one tight loop.
#[inline(always)]
fn map1<T: Copy, U: Copy>(a: Arg<'_, T>, out: &mut [U], f: impl Fn(T) -> U) {
    match a {
        Arg::Slice(a) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x);
            }
        }
        Arg::Scalar(x) => out.fill(f(x)),
    }
}

/// `out[i] = f(a[i], b[i])`, one tight loop per operand kind.
#[inline(always)]
fn map2<T: Copy, U: Copy>(a: Arg<'_, T>, b: Arg<'_, T>, out: &mut [U], f: impl Fn(T, T) -> U) {
    match (a, b) {
        (Arg::Slice(a), Arg::Slice(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Arg::Slice(a), Arg::Scalar(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        (Arg::Scalar(x), Arg::Slice(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        (Arg::Scalar(x), Arg::Scalar(y)) => out.fill(f(x, y)),
    }
}

/// `out[i] = op(a[i])` for floats (AVX2 code where the CPU has it).
pub(crate) fn unary_block<T: Real>(op: UnaryOp, a: Arg<'_, T>, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::unary_block(op, a, out) };
    }
    unary_block_portable(op, a, out)
}

/// `out[i] = op(a[i], b[i])` for floats (AVX2 code where the CPU has it).
pub(crate) fn binary_block<T: Real>(op: BinaryOp, a: Arg<'_, T>, b: Arg<'_, T>, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::binary_block(op, a, b, out) };
    }
    binary_block_portable(op, a, b, out)
}

/// The block loops compiled for AVX2: the same code as the portable
/// versions, inlined into functions with the target feature enabled, so
/// LLVM vectorises them 8 `f32` (4 `f64`) wide instead of 4 (2).
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn unary_block<T: Real>(op: UnaryOp, a: Arg<'_, T>, out: &mut [T]) {
        unary_block_portable(op, a, out)
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn binary_block<T: Real>(
        op: BinaryOp,
        a: Arg<'_, T>,
        b: Arg<'_, T>,
        out: &mut [T],
    ) {
        binary_block_portable(op, a, b, out)
    }
}

#[inline(always)]
fn unary_block_portable<T: Real>(op: UnaryOp, a: Arg<'_, T>, out: &mut [T]) {
    macro_rules! body {
        ($k:expr) => {
            map1(a, out, |x| unary($k, x))
        };
    }
    each_unary!(op, body)
}

#[inline(always)]
fn binary_block_portable<T: Real>(op: BinaryOp, a: Arg<'_, T>, b: Arg<'_, T>, out: &mut [T]) {
    macro_rules! body {
        ($k:expr) => {
            map2(a, b, out, |x, y| binary($k, x, y))
        };
    }
    each_binary!(op, body)
}

/// `out[i] = op(a[i])` for integers.
pub(crate) fn unary_block_i64(op: UnaryOp, a: Arg<'_, i64>, out: &mut [i64]) {
    macro_rules! body {
        ($k:expr) => {
            map1(a, out, |x| unary_i64($k, x))
        };
    }
    each_unary!(op, body)
}

/// `out[i] = op(a[i], b[i])` for integers.
pub(crate) fn binary_block_i64(op: BinaryOp, a: Arg<'_, i64>, b: Arg<'_, i64>, out: &mut [i64]) {
    macro_rules! body {
        ($k:expr) => {
            map2(a, b, out, |x, y| binary_i64($k, x, y))
        };
    }
    each_binary!(op, body)
}

/// `out[i] = op(a[i])` for booleans.
pub(crate) fn unary_block_bool(op: UnaryOp, a: Arg<'_, bool>, out: &mut [bool]) {
    map1(a, out, |x| unary_bool(op, x))
}

/// `out[i] = op(a[i], b[i])` for booleans.
pub(crate) fn binary_block_bool(
    op: BinaryOp,
    a: Arg<'_, bool>,
    b: Arg<'_, bool>,
    out: &mut [bool],
) {
    map2(a, b, out, |x, y| binary_bool(op, x, y))
}

/// `out[i] = a[i] op b[i]`.
pub(crate) fn compare_block<T: PartialOrd + Copy>(
    op: CmpOp,
    a: Arg<'_, T>,
    b: Arg<'_, T>,
    out: &mut [bool],
) {
    macro_rules! body {
        ($k:expr) => {
            map2(a, b, out, |x, y| compare($k, x, y))
        };
    }
    each_cmp!(op, body)
}

/// `out[i] = c[i] ? a[i] : b[i]`.
pub(crate) fn select_block<T: Copy>(c: &[bool], a: &[T], b: &[T], out: &mut [T]) {
    for (((o, &c), &x), &y) in out.iter_mut().zip(c).zip(a).zip(b) {
        *o = if c { x } else { y };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let got = erf(x);
            assert!((got - want).abs() <= 4e-16, "erf({x}) = {got}, want {want}");
            assert!((erf(-x) + want).abs() <= 4e-16);
        }
        assert!(erf(f64::NAN).is_nan());
    }

    #[test]
    fn relu_and_sign_propagate_nan() {
        assert!(unary(UnaryOp::Relu, f64::NAN).is_nan());
        assert!(binary(BinaryOp::Max, f64::NAN, 1.0).is_nan());
        assert!(binary(BinaryOp::Min, 1.0f32, f32::NAN).is_nan());
        assert_eq!(binary(BinaryOp::Max, -1.0, 2.0), 2.0);
        // erfc keeps relative accuracy far in the tail: erfc(5) = 1.5374597944280349e-12.
        assert!((erfc(5.0) / 1.537_459_794_428_035e-12 - 1.0).abs() < 1e-13);
        assert!(unary(UnaryOp::Sign, f64::NAN).is_nan());
        assert_eq!(unary(UnaryOp::Sign, -3.0f32), -1.0);
        assert_eq!(binary(BinaryOp::MulZero, 0.0, f64::INFINITY), 0.0);
        assert!(binary(BinaryOp::Mul, 0.0, f64::INFINITY).is_nan());
    }

    #[test]
    fn integer_ops_wrap() {
        assert_eq!(binary_i64(BinaryOp::Add, i64::MAX, 1), i64::MIN);
        assert_eq!(unary_i64(UnaryOp::Powi(3), -2), -8);
        assert_eq!(unary_i64(UnaryOp::Powi(-1), 1), 1);
    }
}
