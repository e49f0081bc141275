//! Element-wise block loops for the fused loops.
//!
//! The scalar function of each op is defined once, in
//! [`crate::kernels::scalar`] (re-exported here for the compiled paths:
//! register chains and the scalar region call it directly). Each `*_block`
//! function matches on the op once and then runs one tight loop over a
//! block of values calling that function with the op a constant, so the
//! loop body has no dispatch and LLVM can vectorise it. Fused, chained,
//! scalar and per-op execution therefore agree bit for bit; `f16`/`bf16`
//! values are computed in `f32` by the callers.

use rlx_core::{BinaryOp, CmpOp, UnaryOp};

pub(crate) use crate::kernels::scalar::{binary, binary_bool, compare, unary, unary_bool, Real};
use crate::kernels::scalar::{
    binary_core, binary_i64, binary_rare, unary_core, unary_i64, unary_rare,
};

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
            // Complex operands run through the reference kernels' steps.
            UnaryOp::Conj | UnaryOp::Real | UnaryOp::Imag => {
                unreachable!("complex values run through kernel steps")
            }
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
            BinaryOp::Complex => unreachable!("complex values run through kernel steps"),
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

impl<'a, T: Copy> Arg<'a, T> {
    /// Elements `from..to` (a scalar stays a scalar).
    #[inline(always)]
    fn sub(self, from: usize, to: usize) -> Arg<'a, T> {
        match self {
            Arg::Slice(s) => Arg::Slice(&s[from..to]),
            Arg::Scalar(c) => Arg::Scalar(c),
        }
    }

    /// Element `i`.
    #[inline(always)]
    fn at(self, i: usize) -> T {
        match self {
            Arg::Slice(s) => s[i],
            Arg::Scalar(c) => c,
        }
    }
}

/// `out.fill(v())`, out of line: a broadcast operand's value is computed
/// only when the operand is one. Inlined into the block loops, LLVM
/// hoisted `f(x)` of the broadcast arm above the test of the operand's
/// kind (pure arithmetic is safe to speculate), so every block computed
/// it on the bits of a slice's length, a subnormal float: each operation
/// on a subnormal costs a microcode assist of about 150 cycles on Intel
/// cores, and an LSTM step's sigmoid and tanh blocks spent more time there
/// than on their elements. A call that writes memory is not speculated.
#[cold]
#[inline(never)]
fn fill_with<U: Copy>(out: &mut [U], v: impl FnOnce() -> U) {
    out.fill(v())
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
        Arg::Scalar(x) => fill_with(out, || f(x)),
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
        (Arg::Scalar(x), Arg::Scalar(y)) => fill_with(out, || f(x, y)),
    }
}

/// Elements per chunk of [`map2_split`]: the chunk's inputs are still in
/// L1 when the rare lanes are looked for.
const SPLIT_CHUNK: usize = 256;

/// Whether `f(a[i], b[i])` holds for some `i < n`: a branch-free fold over
/// zipped slices, so that LLVM vectorises it, and removes it for an op
/// whose `f` is constant `false` (an indexed loop keeps its bounds checks,
/// and with them an empty loop over every element).
#[inline(always)]
fn any2<T: Copy>(a: Arg<'_, T>, b: Arg<'_, T>, n: usize, f: impl Fn(T, T) -> bool) -> bool {
    match (a, b) {
        (Arg::Slice(x), Arg::Slice(y)) => x[..n]
            .iter()
            .zip(&y[..n])
            .fold(false, |any, (&p, &q)| any | f(p, q)),
        (Arg::Slice(x), Arg::Scalar(c)) => x[..n].iter().fold(false, |any, &p| any | f(p, c)),
        (Arg::Scalar(c), Arg::Slice(y)) => y[..n].iter().fold(false, |any, &q| any | f(c, q)),
        (Arg::Scalar(c), Arg::Scalar(d)) => n > 0 && f(c, d),
    }
}

/// `out[i] = full(a[i], b[i])` for a function that is `core` (branch-free,
/// vectorised) except where `rare` holds: each chunk is computed with
/// `core`, then its rare lanes are redone with `full`. Where `rare` is
/// constantly false (most ops) the second step compiles away.
#[inline(always)]
fn map2_split<T: Copy, U: Copy>(
    a: Arg<'_, T>,
    b: Arg<'_, T>,
    out: &mut [U],
    core: impl Fn(T, T) -> U,
    rare: impl Fn(T, T) -> bool,
    full: impl Fn(T, T) -> U,
) {
    let n = out.len();
    let mut from = 0;
    while from < n {
        let to = n.min(from + SPLIT_CHUNK);
        let (a, b, out) = (a.sub(from, to), b.sub(from, to), &mut out[from..to]);
        map2(a, b, out, &core);
        if any2(a, b, out.len(), &rare) {
            for (i, o) in out.iter_mut().enumerate() {
                let (x, y) = (a.at(i), b.at(i));
                if rare(x, y) {
                    *o = full(x, y);
                }
            }
        }
        from = to;
    }
}

/// `out[i] = op(a[i])` for floats (AVX-512 or AVX2 code where the CPU
/// has it).
pub(crate) fn unary_block<T: Real>(op: UnaryOp, a: Arg<'_, T>, out: &mut [T]) {
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    if out.len() >= WIDE_512 && std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        return unsafe { wide512::unary_block(op, a, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::unary_block(op, a, out) };
    }
    unary_block_portable(op, a, out)
}

/// `out[i] = op(a[i], b[i])` for floats (AVX-512 or AVX2 code where the
/// CPU has it).
pub(crate) fn binary_block<T: Real>(op: BinaryOp, a: Arg<'_, T>, b: Arg<'_, T>, out: &mut [T]) {
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    if out.len() >= WIDE_512 && std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        return unsafe { wide512::binary_block(op, a, b, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::binary_block(op, a, b, out) };
    }
    binary_block_portable(op, a, b, out)
}

/// The portable block loops inlined into functions compiled with target
/// feature `$feature` (module `$name`), so that LLVM vectorises them as
/// wide as that feature allows.
macro_rules! block_loops_for {
    ($name:ident, $feature:literal) => {
        mod $name {
            use super::*;

            /// # Safety
            #[doc = concat!("The CPU must support `", $feature, "`.")]
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn unary_block<T: Real>(op: UnaryOp, a: Arg<'_, T>, out: &mut [T]) {
                unary_block_portable(op, a, out)
            }

            /// # Safety
            #[doc = concat!("The CPU must support `", $feature, "`.")]
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn binary_block<T: Real>(
                op: BinaryOp,
                a: Arg<'_, T>,
                b: Arg<'_, T>,
                out: &mut [T],
            ) {
                binary_block_portable(op, a, b, out)
            }
        }
    };
}

// The block loops compiled for AVX2: LLVM vectorises them 8 `f32` (4 `f64`)
// wide instead of 4 (2).
#[cfg(target_arch = "x86_64")]
block_loops_for!(wide, "avx2");

/// Fewest elements a block loop runs with AVX-512: shorter blocks
/// (scalars broadcast into a few lanes) would spend their time in the
/// 512-bit loop's remainder, so they keep the AVX2 code.
#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
const WIDE_512: usize = 32;

// The block loops compiled for AVX-512F: the same code again, which LLVM
// vectorises 16 `f32` (8 `f64`) wide. Every lane runs the IEEE additions,
// multiplications, divisions and selects of the scalar function (no fused
// multiply-add: Rust never contracts), so the results are the bits of the
// AVX2 and portable loops (`float_blocks_match_tables`). A
// transcendental-heavy fused loop (an LSTM step's gates) spends most of its
// time here.
#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
block_loops_for!(wide512, "avx512f");

#[inline(always)]
fn unary_block_portable<T: Real>(op: UnaryOp, a: Arg<'_, T>, out: &mut [T]) {
    if let UnaryOp::Powi(n) = op {
        return powi_block(n, a, out);
    }
    macro_rules! body {
        ($k:expr) => {
            map2_split(
                a,
                Arg::Scalar(T::ZERO),
                out,
                |x, _| unary_core($k, x),
                |x, _| unary_rare($k, x),
                |x, _| unary($k, x),
            )
        };
    }
    each_unary!(op, body)
}

/// `out[i] = a[i]^n`: one loop per small exponent with `n` a constant, so
/// the square-and-multiply of [`Real::powi`] unrolls into a few vector
/// multiplies (the same operations in the same order as with `n` known
/// only at run time, hence the same bits); other exponents loop over it.
#[inline(always)]
fn powi_block<T: Real>(n: i32, a: Arg<'_, T>, out: &mut [T]) {
    macro_rules! by {
        ($($k:literal)*) => {
            match n {
                $($k => map1(a, out, |x| x.powi($k)),)*
                _ => map1(a, out, |x| x.powi(n)),
            }
        };
    }
    by!(-8 -7 -6 -5 -4 -3 -2 -1 0 1 2 3 4 5 6 7 8)
}

#[inline(always)]
fn binary_block_portable<T: Real>(op: BinaryOp, a: Arg<'_, T>, b: Arg<'_, T>, out: &mut [T]) {
    macro_rules! body {
        ($k:expr) => {
            map2_split(
                a,
                b,
                out,
                |x, y| binary_core($k, x, y),
                |x, y| binary_rare($k, x, y),
                |x, y| binary($k, x, y),
            )
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

/// An element-wise op a sink applies to each element of its register
/// before combining it: a `neg` or `square` read only by the reduction
/// then costs no pass of its own over the block (`sum(neg(x))`, the
/// cotangent of a broadcast subtracted; `sum(square(x))`, a norm). The op
/// runs in the register's own type, before the widening to `f64`, as the
/// instruction it replaces did, so the bits are the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Pre {
    #[default]
    Id,
    Neg,
    Square,
}

impl Pre {
    /// The op on an `f64`: `kernels::scalar::unary`'s `Neg` and `Square`
    /// (the fused-against-unfused tests hold the bits equal), written out
    /// so that it inlines.
    #[inline(always)]
    pub(crate) fn apply(self, v: f64) -> f64 {
        match self {
            Pre::Id => v,
            Pre::Neg => -v,
            Pre::Square => v * v,
        }
    }

    /// The sink form of `op`, if it has one.
    pub(crate) fn of(op: UnaryOp) -> Option<Pre> {
        match op {
            UnaryOp::Neg => Some(Pre::Neg),
            UnaryOp::Square => Some(Pre::Square),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with both signs, zeros, tails, infinities and NaN.
    fn values<T: Real>() -> Vec<T> {
        let v = [
            0.0, -0.0, 0.3, -0.7, 1.0, -1.0, 2.5, -3.25, 20.0, -90.0, 1e-3, 800.0, -800.0,
            // Beyond the Cody–Waite range of sin/cos: the libm lanes.
            3e6, -1e10, 1e300,
        ];
        let mut v: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
        v.extend([T::INFINITY, T::NEG_INFINITY, T::NAN]);
        // Odd length: the vector loops have a remainder.
        v.extend((0..20).map(|i| T::from_f64(i as f64 * 0.37 - 3.0)));
        v
    }

    fn same<T: Real>(got: T, want: T, what: &str) {
        let same = got.to_f64().to_bits() == want.to_f64().to_bits();
        assert!(
            same || (got.is_nan() && want.is_nan()),
            "{what}: {got:?} vs {want:?}"
        );
    }

    /// The block loops (dispatching, portable, and with broadcast operands)
    /// compute exactly the scalar tables of `kernels::scalar`.
    fn blocks_match_tables<T: Real>() {
        let x = values::<T>();
        let y: Vec<T> = x.iter().rev().copied().collect();
        let mut out = vec![T::ZERO; x.len()];
        for op in UnaryOp::ALL.into_iter().chain([UnaryOp::Powi(-3)]) {
            unary_block(op, Arg::Slice(&x), &mut out);
            for (&o, &v) in out.iter().zip(&x) {
                same(o, unary(op, v), &format!("{op:?}({v:?})"));
            }
            unary_block_portable(op, Arg::Scalar(x[3]), &mut out);
            for &o in &out {
                same(o, unary(op, x[3]), &format!("{op:?}({:?})", x[3]));
            }
        }
        for op in BinaryOp::ALL {
            binary_block(op, Arg::Slice(&x), Arg::Slice(&y), &mut out);
            for ((&o, &a), &b) in out.iter().zip(&x).zip(&y) {
                same(o, binary(op, a, b), &format!("{op:?}({a:?}, {b:?})"));
            }
            let c = T::from_f64(0.5);
            binary_block_portable(op, Arg::Scalar(c), Arg::Slice(&y), &mut out);
            for (&o, &b) in out.iter().zip(&y) {
                same(o, binary(op, c, b), &format!("{op:?}({c:?}, {b:?})"));
            }
            // Both broadcast: the out-of-line fill.
            binary_block(op, Arg::Scalar(c), Arg::Scalar(x[3]), &mut out);
            for &o in &out {
                same(
                    o,
                    binary(op, c, x[3]),
                    &format!("{op:?}({c:?}, {:?})", x[3]),
                );
            }
        }
    }

    #[test]
    fn float_blocks_match_tables() {
        blocks_match_tables::<f32>();
        blocks_match_tables::<f64>();
        wide_blocks_match_portable::<f32>();
        wide_blocks_match_portable::<f64>();
    }

    /// The AVX2 and AVX-512 block loops (where the CPU has them) give the
    /// bits of the portable loop, whichever one `unary_block` dispatches to,
    /// at lengths around the vector widths (remainders of each loop).
    fn wide_blocks_match_portable<T: Real>() {
        #[cfg(target_arch = "x86_64")]
        {
            let base = values::<T>();
            let x: Vec<T> = (0..67).map(|i| base[i % base.len()]).collect();
            let y: Vec<T> = (0..67).map(|i| base[(i * 7 + 3) % base.len()]).collect();
            // NaNs as one pattern (`same` above does not compare payloads).
            let bits = |v: &[T]| -> Vec<u64> {
                v.iter()
                    .map(|x| match x.is_nan() {
                        true => u64::MAX,
                        false => x.to_f64().to_bits(),
                    })
                    .collect()
            };
            for n in [1, 7, 8, 15, 16, 17, 31, 32, 33, 48, 64, 67] {
                let (x, y) = (&x[..n], &y[..n]);
                let mut want = vec![T::ZERO; n];
                let mut got = vec![T::ZERO; n];
                for op in UnaryOp::ALL.into_iter().chain([UnaryOp::Powi(-3)]) {
                    unary_block_portable(op, Arg::Slice(x), &mut want);
                    if std::is_x86_feature_detected!("avx2") {
                        // SAFETY: the CPU supports AVX2.
                        unsafe { wide::unary_block(op, Arg::Slice(x), &mut got) };
                        assert_eq!(bits(&got), bits(&want), "avx2 {op:?}, n = {n}");
                    }
                    #[cfg(feature = "avx512")]
                    if std::is_x86_feature_detected!("avx512f") {
                        // SAFETY: the CPU supports AVX-512F.
                        unsafe { wide512::unary_block(op, Arg::Slice(x), &mut got) };
                        assert_eq!(bits(&got), bits(&want), "avx512 {op:?}, n = {n}");
                    }
                }
                for op in BinaryOp::ALL {
                    binary_block_portable(op, Arg::Slice(x), Arg::Slice(y), &mut want);
                    if std::is_x86_feature_detected!("avx2") {
                        // SAFETY: the CPU supports AVX2.
                        unsafe { wide::binary_block(op, Arg::Slice(x), Arg::Slice(y), &mut got) };
                        assert_eq!(bits(&got), bits(&want), "avx2 {op:?}, n = {n}");
                    }
                    #[cfg(feature = "avx512")]
                    if std::is_x86_feature_detected!("avx512f") {
                        // SAFETY: the CPU supports AVX-512F.
                        unsafe {
                            wide512::binary_block(op, Arg::Slice(x), Arg::Slice(y), &mut got)
                        };
                        assert_eq!(bits(&got), bits(&want), "avx512 {op:?}, n = {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn integer_bool_and_compare_blocks_match_tables() {
        let x: Vec<i64> = vec![i64::MIN, -7, -1, 0, 1, 3, i64::MAX];
        let mut out = vec![0i64; x.len()];
        unary_block_i64(UnaryOp::Powi(-1), Arg::Slice(&x), &mut out);
        assert_eq!(out, [0, 0, -1, 0, 1, 0, 0]);
        binary_block_i64(BinaryOp::Add, Arg::Slice(&x), Arg::Scalar(1), &mut out);
        assert_eq!(out[6], i64::MIN);
        let mut flags = vec![false; x.len()];
        compare_block(CmpOp::Ge, Arg::Slice(&x), Arg::Scalar(0), &mut flags);
        assert_eq!(flags, [false, false, false, true, true, true, true]);
        let (mut nots, mut any) = (vec![false; x.len()], vec![false; x.len()]);
        unary_block_bool(UnaryOp::Not, Arg::Slice(&flags), &mut nots);
        binary_block_bool(
            BinaryOp::Or,
            Arg::Slice(&flags),
            Arg::Slice(&nots),
            &mut any,
        );
        assert!(any.iter().all(|&f| f));
    }
}
