//! Register chains: runs of cheap float ops on one value, evaluated in
//! vector registers.
//!
//! Inside a fused loop every instruction makes one pass over the block,
//! loading its operands from L1 and storing its result. For cheap ops
//! (add, mul, max, abs, sqrt, ...) those loads and stores cost more than
//! the math. A [`Chain`] replaces a run of such ops, each consuming the
//! previous one's result, by one instruction that walks the block in
//! chunks of eight vectors (64 `f32` lanes with AVX2), keeps the chunk in
//! registers through every op and stores only the final value. The op of
//! each stage is dispatched once per chunk, not per element.
//!
//! The chunk is a plain array that LLVM keeps in registers; how the lane
//! loops are written matters (`iter_mut().for_each` keeps it there, while
//! a `for` loop over a zip let it live on the stack with masked stores and
//! ran 3.5x slower), so check the bench after touching [`apply`].
//!
//! Every stage applies `math::unary` / `math::binary` with the op a
//! constant — the functions the per-op block loops use — so a chain's
//! results are bit for bit those of the instructions it replaces (NaN
//! propagation of `min`/`max`/`relu` included). Chains are formed after
//! planning, by [`crate::compile::fusion::chain_form`].

use rlx_core::{BinaryOp, UnaryOp};

use crate::compile::base::math;
use crate::compile::base::math::{Arg, Real};
use crate::compile::base::regs::{Bank, Out, Src};

/// Most stages of one chain; longer runs become several chains, so the
/// stages resolved for a block fit in a stack array.
pub(crate) const MAX_STAGES: usize = 16;

/// A float type chains run on, with its chunk widths: eight vectors, the
/// most that stay in the 16 vector registers of x86-64 next to the
/// temporaries of `min`/`max` (wider chunks spill and run several times
/// slower; narrower ones spend more on per-stage dispatch).
pub(crate) trait ChainReal: Real {
    /// Lanes per chunk with AVX2 (eight 256-bit vectors).
    const WIDE: usize;
    /// Lanes per chunk without (eight 128-bit vectors).
    const NARROW: usize;
    /// [`run`] for this type.
    fn run_chain(start: Start<'_, Self>, stages: &[Resolved<'_, Self>], out: &mut [Self]);
    /// The code [`run`] uses without AVX2, for tests on any CPU.
    #[cfg(test)]
    fn run_chain_portable(start: Start<'_, Self>, stages: &[Resolved<'_, Self>], out: &mut [Self]);
}

impl ChainReal for f32 {
    const WIDE: usize = 64;
    const NARROW: usize = 32;
    fn run_chain(start: Start<'_, f32>, stages: &[Resolved<'_, f32>], out: &mut [f32]) {
        run::<f32, { f32::WIDE }, { f32::NARROW }>(start, stages, out)
    }
    #[cfg(test)]
    fn run_chain_portable(start: Start<'_, f32>, stages: &[Resolved<'_, f32>], out: &mut [f32]) {
        run_portable::<f32, { f32::NARROW }>(start, stages, out)
    }
}

impl ChainReal for f64 {
    const WIDE: usize = 32;
    const NARROW: usize = 16;
    fn run_chain(start: Start<'_, f64>, stages: &[Resolved<'_, f64>], out: &mut [f64]) {
        run::<f64, { f64::WIDE }, { f64::NARROW }>(start, stages, out)
    }
    #[cfg(test)]
    fn run_chain_portable(start: Start<'_, f64>, stages: &[Resolved<'_, f64>], out: &mut [f64]) {
        run_portable::<f64, { f64::NARROW }>(start, stages, out)
    }
}

/// A unary op a chain applies in registers (inline vector code, no call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChainUnary {
    Neg,
    Abs,
    Sqrt,
    Rsqrt,
    Recip,
    Square,
    Relu,
    /// `x^n` for `|n| ≤ 4` (a few products, then a reciprocal for a
    /// negative `n`: `r⁻⁶` and the `r⁻⁴` of its derivative).
    Powi(i8),
}

impl ChainUnary {
    /// The chain form of `op`, if it is cheap enough to chain.
    pub(crate) fn of(op: UnaryOp) -> Option<ChainUnary> {
        Some(match op {
            UnaryOp::Neg => ChainUnary::Neg,
            UnaryOp::Abs => ChainUnary::Abs,
            UnaryOp::Sqrt => ChainUnary::Sqrt,
            UnaryOp::Rsqrt => ChainUnary::Rsqrt,
            UnaryOp::Recip => ChainUnary::Recip,
            UnaryOp::Square => ChainUnary::Square,
            UnaryOp::Relu => ChainUnary::Relu,
            UnaryOp::Powi(n) if (-4..=4).contains(&n) => ChainUnary::Powi(n as i8),
            _ => return None,
        })
    }

    /// The graph op.
    pub(crate) fn op(self) -> UnaryOp {
        match self {
            ChainUnary::Neg => UnaryOp::Neg,
            ChainUnary::Abs => UnaryOp::Abs,
            ChainUnary::Sqrt => UnaryOp::Sqrt,
            ChainUnary::Rsqrt => UnaryOp::Rsqrt,
            ChainUnary::Recip => UnaryOp::Recip,
            ChainUnary::Square => UnaryOp::Square,
            ChainUnary::Relu => UnaryOp::Relu,
            ChainUnary::Powi(n) => UnaryOp::Powi(n.into()),
        }
    }
}

/// A binary op a chain applies in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChainBinary {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    /// `0 · x = 0` for every `x` (the product of derivative rules).
    MulZero,
}

impl ChainBinary {
    /// The chain form of `op`, if it is cheap enough to chain.
    pub(crate) fn of(op: BinaryOp) -> Option<ChainBinary> {
        Some(match op {
            BinaryOp::Add => ChainBinary::Add,
            BinaryOp::Sub => ChainBinary::Sub,
            BinaryOp::Mul => ChainBinary::Mul,
            BinaryOp::Div => ChainBinary::Div,
            BinaryOp::Min => ChainBinary::Min,
            BinaryOp::Max => ChainBinary::Max,
            BinaryOp::MulZero => ChainBinary::MulZero,
            _ => return None,
        })
    }

    /// The graph op.
    pub(crate) fn op(self) -> BinaryOp {
        match self {
            ChainBinary::Add => BinaryOp::Add,
            ChainBinary::Sub => BinaryOp::Sub,
            ChainBinary::Mul => BinaryOp::Mul,
            ChainBinary::Div => BinaryOp::Div,
            ChainBinary::Min => BinaryOp::Min,
            ChainBinary::Max => BinaryOp::Max,
            ChainBinary::MulZero => BinaryOp::MulZero,
        }
    }
}

/// One op of a chain, applied to the running value `v`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Stage {
    /// `v = op(v)`.
    Unary(ChainUnary),
    /// `v = op(v, operand)`, or `op(operand, v)` when `value_first` is false.
    Binary {
        op: ChainBinary,
        operand: Src,
        value_first: bool,
    },
}

/// A run of cheap float ops: `dst = stages(start)`. The destination is
/// never a register a stage reads; it may be the start's register (the
/// chain then runs in place, see [`Chain::in_place`]).
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    /// `F32` or `F64`.
    pub(crate) bank: Bank,
    /// The value the first stage applies to.
    pub(crate) start: Src,
    /// At most [`MAX_STAGES`] stages, in order.
    pub(crate) stages: Vec<Stage>,
    /// Where the final value goes.
    pub(crate) dst: Out,
}

impl Chain {
    /// Whether the chain starts from the register it writes.
    pub(crate) fn in_place(&self) -> bool {
        matches!((self.start, self.dst), (Src::Reg(a), Out::Reg(b)) if a == b)
    }
}

/// Where a chain's first value comes from, for the current block.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Start<'a, T> {
    /// An operand: a block-long slice or a scalar.
    Arg(Arg<'a, T>),
    /// The output slice itself: the chain runs in place on its register.
    Out,
}

/// A stage with its operand resolved for the current block.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Resolved<'a, T> {
    Unary(ChainUnary),
    /// Op, operand (block-long slice or scalar) and `value_first`.
    Binary(ChainBinary, Arg<'a, T>, bool),
}

impl<T> Resolved<'_, T> {
    /// A filler for unused entries of a stage array.
    pub(crate) const NONE: Self = Resolved::Unary(ChainUnary::Neg);
}

/// `out[i] = stages(start[i])` over one block: chunks of `WIDE` lanes in
/// registers with AVX2 (`NARROW` without), then the remaining elements one
/// by one. Slice operands are `out.len()` long.
fn run<T: Real, const WIDE: usize, const NARROW: usize>(
    start: Start<'_, T>,
    stages: &[Resolved<'_, T>],
    out: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { run_avx2::<T, WIDE>(start, stages, out) };
    }
    run_portable::<T, NARROW>(start, stages, out)
}

/// [`run`] compiled for AVX2, so a chunk is four 256-bit registers.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2<T: Real, const L: usize>(
    start: Start<'_, T>,
    stages: &[Resolved<'_, T>],
    out: &mut [T],
) {
    run_portable::<T, L>(start, stages, out)
}

#[inline(always)]
fn run_portable<T: Real, const L: usize>(
    start: Start<'_, T>,
    stages: &[Resolved<'_, T>],
    out: &mut [T],
) {
    let n = out.len();
    let at = chunks::<T, L>(start, stages, out, 0);
    // The rest a few lanes at a time (a block of 999 elements leaves 7
    // past the wide chunks), then one by one: the same op per element in
    // every path.
    let at = chunks::<T, QUAD>(start, stages, out, at);
    if at < n {
        tail(start, stages, &mut out[at..], at);
    }
}

/// Lanes of the short chunks after the wide ones.
const QUAD: usize = 4;

/// `out[i] = stages(start[i])` for the whole chunks of `L` elements from
/// `from` on; returns where they end.
#[inline(always)]
fn chunks<T: Real, const L: usize>(
    start: Start<'_, T>,
    stages: &[Resolved<'_, T>],
    out: &mut [T],
    from: usize,
) -> usize {
    let n = out.len();
    let full = from + (n - from) / L * L;
    let mut at = from;
    while at < full {
        let mut v: [T; L] = match start {
            Start::Arg(Arg::Slice(s)) => chunk(s, at),
            Start::Arg(Arg::Scalar(c)) => [c; L],
            Start::Out => chunk(out, at),
        };
        for st in stages {
            apply(&mut v, st, at);
        }
        out[at..at + L].copy_from_slice(&v);
        at += L;
    }
    full
}

/// Elements `at..at + L` of a block-long slice.
#[inline(always)]
fn chunk<T: Copy, const L: usize>(s: &[T], at: usize) -> [T; L] {
    let c: &[T; L] = s[at..at + L]
        .try_into()
        .expect("a chunk is L elements long");
    *c
}

/// Applies one stage to a chunk starting at element `at` of the block. Each
/// arm is one loop over the lanes with the op a constant, which LLVM turns
/// into a few vector instructions.
#[inline(always)]
fn apply<T: Real, const L: usize>(v: &mut [T; L], stage: &Resolved<'_, T>, at: usize) {
    match *stage {
        Resolved::Unary(u) => {
            macro_rules! lanes {
                ($op:expr) => {
                    v.iter_mut().for_each(|x| *x = math::unary($op, *x))
                };
            }
            match u {
                ChainUnary::Neg => lanes!(UnaryOp::Neg),
                ChainUnary::Abs => lanes!(UnaryOp::Abs),
                ChainUnary::Sqrt => lanes!(UnaryOp::Sqrt),
                ChainUnary::Rsqrt => lanes!(UnaryOp::Rsqrt),
                ChainUnary::Recip => lanes!(UnaryOp::Recip),
                ChainUnary::Square => lanes!(UnaryOp::Square),
                ChainUnary::Relu => lanes!(UnaryOp::Relu),
                // One loop per exponent, so that it unrolls (as `powi`'s
                // block kernel does; the same products, the same bits).
                ChainUnary::Powi(n) => match n {
                    -4 => lanes!(UnaryOp::Powi(-4)),
                    -3 => lanes!(UnaryOp::Powi(-3)),
                    -2 => lanes!(UnaryOp::Powi(-2)),
                    -1 => lanes!(UnaryOp::Powi(-1)),
                    0 => lanes!(UnaryOp::Powi(0)),
                    1 => lanes!(UnaryOp::Powi(1)),
                    2 => lanes!(UnaryOp::Powi(2)),
                    3 => lanes!(UnaryOp::Powi(3)),
                    _ => lanes!(UnaryOp::Powi(4)),
                },
            }
        }
        Resolved::Binary(op, arg, value_first) => {
            macro_rules! lanes {
                ($op:expr) => {
                    match (arg, value_first) {
                        (Arg::Scalar(c), true) => {
                            v.iter_mut().for_each(|x| *x = math::binary($op, *x, c))
                        }
                        (Arg::Scalar(c), false) => {
                            v.iter_mut().for_each(|x| *x = math::binary($op, c, *x))
                        }
                        (Arg::Slice(s), true) => {
                            let c: [T; L] = chunk(s, at);
                            v.iter_mut()
                                .zip(c)
                                .for_each(|(x, c)| *x = math::binary($op, *x, c));
                        }
                        (Arg::Slice(s), false) => {
                            let c: [T; L] = chunk(s, at);
                            v.iter_mut()
                                .zip(c)
                                .for_each(|(x, c)| *x = math::binary($op, c, *x));
                        }
                    }
                };
            }
            match op {
                ChainBinary::Add => lanes!(BinaryOp::Add),
                ChainBinary::Sub => lanes!(BinaryOp::Sub),
                ChainBinary::Mul => lanes!(BinaryOp::Mul),
                ChainBinary::Div => lanes!(BinaryOp::Div),
                ChainBinary::Min => lanes!(BinaryOp::Min),
                ChainBinary::Max => lanes!(BinaryOp::Max),
                ChainBinary::MulZero => lanes!(BinaryOp::MulZero),
            }
        }
    }
}

/// The last `out.len() < L` elements of a block (from element `from`),
/// one at a time through every stage.
#[inline(never)]
fn tail<T: Real>(start: Start<'_, T>, stages: &[Resolved<'_, T>], out: &mut [T], from: usize) {
    for (j, o) in out.iter_mut().enumerate() {
        let i = from + j;
        let at = |a: Arg<'_, T>| match a {
            Arg::Slice(s) => s[i],
            Arg::Scalar(c) => c,
        };
        let mut x = match start {
            Start::Arg(a) => at(a),
            Start::Out => *o,
        };
        for st in stages {
            x = match *st {
                Resolved::Unary(u) => math::unary(u.op(), x),
                Resolved::Binary(op, arg, true) => math::binary(op.op(), x, at(arg)),
                Resolved::Binary(op, arg, false) => math::binary(op.op(), at(arg), x),
            };
        }
        *o = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_UNARY: [ChainUnary; 16] = [
        ChainUnary::Neg,
        ChainUnary::Abs,
        ChainUnary::Sqrt,
        ChainUnary::Rsqrt,
        ChainUnary::Recip,
        ChainUnary::Square,
        ChainUnary::Relu,
        ChainUnary::Powi(-4),
        ChainUnary::Powi(-3),
        ChainUnary::Powi(-2),
        ChainUnary::Powi(-1),
        ChainUnary::Powi(0),
        ChainUnary::Powi(1),
        ChainUnary::Powi(2),
        ChainUnary::Powi(3),
        ChainUnary::Powi(4),
    ];
    const ALL_BINARY: [ChainBinary; 7] = [
        ChainBinary::Add,
        ChainBinary::Sub,
        ChainBinary::Mul,
        ChainBinary::Div,
        ChainBinary::Min,
        ChainBinary::Max,
        ChainBinary::MulZero,
    ];

    /// Awkward values: NaN, signed zeros, infinities, negatives (for sqrt),
    /// tiny and large magnitudes, cycled over `n` elements.
    fn values<T: Real>(n: usize, shift: usize) -> Vec<T> {
        let pool = [
            f64::NAN,
            0.0,
            -0.0,
            1.5,
            -2.25,
            f64::INFINITY,
            f64::NEG_INFINITY,
            3.0e-40,
            -7.0,
            0.5,
            1.0e30,
            2.0,
            -0.75,
        ];
        (0..n)
            .map(|i| T::from_f64(pool[(i * 7 + shift) % pool.len()]))
            .collect()
    }

    /// Bit-level equality, with any NaN equal to any NaN.
    fn same<T: Real + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let ok = (g.is_nan() && w.is_nan())
                || (g == w && (g != T::ZERO || (T::ONE / g > T::ZERO) == (T::ONE / w > T::ZERO)));
            assert!(ok, "{what}: element {i}: got {g:?}, want {w:?}");
        }
    }

    /// Stage by stage with the block kernels the chain replaces.
    fn reference<T: Real>(start: Arg<'_, T>, stages: &[Resolved<'_, T>], n: usize) -> Vec<T> {
        let mut v = vec![T::ZERO; n];
        match start {
            Arg::Slice(s) => v.copy_from_slice(s),
            Arg::Scalar(c) => v.fill(c),
        }
        for st in stages {
            let mut o = vec![T::ZERO; n];
            match *st {
                Resolved::Unary(u) => math::unary_block(u.op(), Arg::Slice(&v), &mut o),
                Resolved::Binary(op, arg, true) => {
                    math::binary_block(op.op(), Arg::Slice(&v), arg, &mut o)
                }
                Resolved::Binary(op, arg, false) => {
                    math::binary_block(op.op(), arg, Arg::Slice(&v), &mut o)
                }
            }
            v = o;
        }
        v
    }

    /// Every stage kind: each unary op; each binary op with a slice, a
    /// `-0.0` or a NaN operand, on either side.
    fn kinds<T: Real>(y: &[T]) -> Vec<Resolved<'_, T>> {
        let mut kinds: Vec<Resolved<'_, T>> =
            ALL_UNARY.iter().map(|&u| Resolved::Unary(u)).collect();
        for &op in &ALL_BINARY {
            for first in [true, false] {
                kinds.push(Resolved::Binary(op, Arg::Slice(y), first));
                kinds.push(Resolved::Binary(op, Arg::Scalar(T::from_f64(-0.0)), first));
                kinds.push(Resolved::Binary(
                    op,
                    Arg::Scalar(T::from_f64(f64::NAN)),
                    first,
                ));
            }
        }
        kinds
    }

    /// Every pair of stage kinds, on lengths with and without short
    /// chunks and a tail (`3 · WIDE + 5`: a short chunk and one element
    /// past the wide chunks; `3`: only a tail), against the per-op block
    /// kernels (AVX2 and portable code).
    fn every_pair<T: ChainReal + std::fmt::Debug>() {
        let n = 3 * T::WIDE + 5;
        let x = values::<T>(n, 0);
        let y = values::<T>(n, 5);
        for len in [n, T::WIDE, T::NARROW, T::NARROW - 3, 3, 0] {
            let (x, kinds) = (&x[..len], kinds(&y[..len]));
            for a in &kinds {
                for b in &kinds {
                    let st = [*a, *b];
                    let want = reference(Arg::Slice(x), &st, len);
                    let mut got = vec![T::ZERO; len];
                    T::run_chain(Start::Arg(Arg::Slice(x)), &st, &mut got);
                    same(&got, &want, &format!("{st:?} len {len}"));
                    // In place.
                    let mut got = x.to_vec();
                    T::run_chain(Start::Out, &st, &mut got);
                    same(&got, &want, &format!("in place {st:?} len {len}"));
                    // The code for CPUs without AVX2 (and its chunk width).
                    let mut portable = vec![T::ZERO; len];
                    T::run_chain_portable(Start::Arg(Arg::Slice(x)), &st, &mut portable);
                    same(&portable, &want, &format!("portable {st:?} len {len}"));
                }
            }
        }
    }

    #[test]
    fn every_stage_pair_matches_the_block_kernels_f32() {
        every_pair::<f32>();
    }

    #[test]
    fn every_stage_pair_matches_the_block_kernels_f64() {
        every_pair::<f64>();
    }

    #[test]
    fn scalar_start_and_long_chains() {
        let n = 2 * f32::WIDE + 7;
        let y = values::<f32>(n, 3);
        let stages: Vec<Resolved<'_, f32>> = (0..MAX_STAGES)
            .map(|k| match k % 4 {
                0 => Resolved::Binary(ChainBinary::Max, Arg::Slice(&y), k % 8 == 0),
                1 => Resolved::Unary(ChainUnary::Abs),
                2 => Resolved::Binary(ChainBinary::Mul, Arg::Scalar(0.75), false),
                _ => Resolved::Unary(ChainUnary::Sqrt),
            })
            .collect();
        let mut got = vec![0.0f32; n];
        f32::run_chain(Start::Arg(Arg::Scalar(-3.5)), &stages, &mut got);
        let want = reference(Arg::Scalar(-3.5), &stages, n);
        same(&got, &want, "scalar start");
    }

    #[test]
    fn ops_round_trip() {
        for u in ALL_UNARY {
            assert_eq!(ChainUnary::of(u.op()), Some(u));
        }
        for b in ALL_BINARY {
            assert_eq!(ChainBinary::of(b.op()), Some(b));
        }
        assert_eq!(ChainUnary::of(UnaryOp::Tanh), None);
        assert_eq!(ChainUnary::of(UnaryOp::Powi(5)), None);
        assert_eq!(ChainUnary::of(UnaryOp::Powi(-5)), None);
        assert_eq!(ChainBinary::of(BinaryOp::Pow), None);
    }
}
