//! Fused element-wise loops.
//!
//! A [`FusedStep`] evaluates a chain of element-wise nodes (unary, binary,
//! compare, select, cast, broadcast) of one output shape in a single pass:
//! the output is cut into blocks of [`BLOCK`] elements; for each block,
//! every instruction runs one tight loop over block-sized registers (small
//! arrays in the per-call [`Registers`]), so intermediate values never
//! leave the L1 cache and no loop body dispatches per element.
//!
//! Registers live in four banks by compute type: `f32` (also for `f16` and
//! `bf16`, rounded after each op as the reference kernels do), `f64`,
//! `i64` and `bool`. Operands from outside the chain ("leaves") are loaded
//! per block: contiguously, as a splat (filled once per call) or through
//! broadcast strides.

use half::{bf16, f16};
use rlx_core::{BinaryOp, CmpOp, DType, UnaryOp};

use super::exec::Env;
use super::math;
use super::plan::Val;
use crate::storage::Storage;

/// Elements per block: 256 `f64` registers are 2 KiB, so a chain with a
/// dozen live values stays in L1.
pub(crate) const BLOCK: usize = 256;

/// A register bank (compute type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bank {
    F32,
    F64,
    I64,
    Bool,
}

impl Bank {
    /// The bank values of `dtype` are computed in.
    pub(crate) fn of(dtype: DType) -> Bank {
        match dtype {
            DType::F32 | DType::F16 | DType::BF16 => Bank::F32,
            DType::F64 => Bank::F64,
            DType::I64 => Bank::I64,
            DType::Bool => Bank::Bool,
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Bank::F32 => 0,
            Bank::F64 => 1,
            Bank::I64 => 2,
            Bank::Bool => 3,
        }
    }
}

/// A register: bank and index within the bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reg {
    pub(crate) bank: Bank,
    pub(crate) idx: u32,
}

/// How a leaf operand maps onto the chain's output elements.
#[derive(Clone, Debug)]
pub(crate) enum Access {
    /// Same shape as the output: element `i` is element `i`.
    Contig,
    /// One element, broadcast everywhere (loaded once per call).
    Splat,
    /// NumPy broadcast: `dims` are the output dims, `strides` the leaf's
    /// element strides per output axis (0 on broadcast axes).
    Broadcast {
        dims: Vec<usize>,
        strides: Vec<usize>,
    },
}

/// An operand from outside the chain.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub(crate) val: Val,
    pub(crate) access: Access,
    pub(crate) reg: Reg,
}

/// One block-wide instruction.
#[derive(Clone, Debug)]
pub(crate) enum Instr {
    /// Loads leaf `leaf` (not a splat) for the current block.
    Load {
        leaf: u32,
    },
    Unary {
        op: UnaryOp,
        x: Reg,
        dst: Reg,
    },
    Binary {
        op: BinaryOp,
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    Compare {
        op: CmpOp,
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    Select {
        c: Reg,
        a: Reg,
        b: Reg,
        dst: Reg,
    },
    Cast {
        x: Reg,
        dst: Reg,
    },
    /// Rounds an `f32` register through `f16` or `bf16`.
    Round {
        reg: Reg,
        dtype: DType,
    },
    /// Writes a register to target `target` of the step.
    Store {
        src: Reg,
        target: u32,
    },
}

/// A compiled element-wise chain.
#[derive(Clone, Debug)]
pub(crate) struct FusedStep {
    /// Number of output elements.
    pub(crate) numel: usize,
    pub(crate) leaves: Vec<Leaf>,
    pub(crate) body: Vec<Instr>,
}

/// The per-call register banks, `BLOCK` elements per register.
#[derive(Debug, Default)]
pub(crate) struct Registers {
    pub(crate) f32: Vec<f32>,
    pub(crate) f64: Vec<f64>,
    pub(crate) i64: Vec<i64>,
    pub(crate) bool: Vec<bool>,
}

impl Registers {
    /// Banks holding `counts[bank]` registers each.
    pub(crate) fn new(counts: [usize; 4]) -> Registers {
        Registers {
            f32: vec![0.0; counts[0] * BLOCK],
            f64: vec![0.0; counts[1] * BLOCK],
            i64: vec![0; counts[2] * BLOCK],
            bool: vec![false; counts[3] * BLOCK],
        }
    }
}

fn reg<T>(bank: &[T], r: Reg) -> &[T] {
    let s = r.idx as usize * BLOCK;
    &bank[s..s + BLOCK]
}

fn reg_mut<T>(bank: &mut [T], r: Reg) -> &mut [T] {
    let s = r.idx as usize * BLOCK;
    &mut bank[s..s + BLOCK]
}

/// The destination register mutably and `N` distinct source registers of
/// the same bank immutably (the planner never gives a destination the
/// register of one of its operands).
fn split<T, const N: usize>(bank: &mut [T], dst: Reg, srcs: [Reg; N]) -> (&mut [T], [&[T]; N]) {
    let d = dst.idx as usize * BLOCK;
    let (lo, rest) = bank.split_at_mut(d);
    let (out, hi) = rest.split_at_mut(BLOCK);
    let (lo, hi): (&[T], &[T]) = (lo, hi);
    let srcs = srcs.map(|r| {
        let s = r.idx as usize * BLOCK;
        debug_assert_ne!(s, d, "destination register aliases an operand");
        if s < d {
            &lo[s..s + BLOCK]
        } else {
            let o = s - d - BLOCK;
            &hi[o..o + BLOCK]
        }
    });
    (out, srcs)
}

impl FusedStep {
    /// Runs the chain, writing stored values into `targets`.
    pub(crate) fn run(
        &self,
        env: &Env<'_>,
        regs: &mut Registers,
        targets: &mut [Storage],
        idx: &mut [usize],
    ) {
        // Splat leaves: fill their registers once.
        for leaf in &self.leaves {
            if let Access::Splat = leaf.access {
                let v = env.get(leaf.val);
                fill(regs, leaf.reg, v);
            }
        }
        let mut start = 0;
        while start < self.numel {
            let len = BLOCK.min(self.numel - start);
            for ins in &self.body {
                self.exec(ins, env, regs, targets, idx, start, len);
            }
            start += len;
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn exec(
        &self,
        ins: &Instr,
        env: &Env<'_>,
        regs: &mut Registers,
        targets: &mut [Storage],
        idx: &mut [usize],
        start: usize,
        len: usize,
    ) {
        match *ins {
            Instr::Load { leaf } => {
                let leaf = &self.leaves[leaf as usize];
                load(regs, leaf, env.get(leaf.val), start, len, idx);
            }
            Instr::Unary { op, x, dst } => match dst.bank {
                Bank::F32 => {
                    let (o, [a]) = split(&mut regs.f32, dst, [x]);
                    math::unary_block(op, &a[..len], &mut o[..len]);
                }
                Bank::F64 => {
                    let (o, [a]) = split(&mut regs.f64, dst, [x]);
                    math::unary_block(op, &a[..len], &mut o[..len]);
                }
                Bank::I64 => {
                    let (o, [a]) = split(&mut regs.i64, dst, [x]);
                    math::unary_block_i64(op, &a[..len], &mut o[..len]);
                }
                Bank::Bool => {
                    let (o, [a]) = split(&mut regs.bool, dst, [x]);
                    math::unary_block_bool(op, &a[..len], &mut o[..len]);
                }
            },
            Instr::Binary { op, a, b, dst } => match dst.bank {
                Bank::F32 => {
                    let (o, [a, b]) = split(&mut regs.f32, dst, [a, b]);
                    math::binary_block(op, &a[..len], &b[..len], &mut o[..len]);
                }
                Bank::F64 => {
                    let (o, [a, b]) = split(&mut regs.f64, dst, [a, b]);
                    math::binary_block(op, &a[..len], &b[..len], &mut o[..len]);
                }
                Bank::I64 => {
                    let (o, [a, b]) = split(&mut regs.i64, dst, [a, b]);
                    math::binary_block_i64(op, &a[..len], &b[..len], &mut o[..len]);
                }
                Bank::Bool => {
                    let (o, [a, b]) = split(&mut regs.bool, dst, [a, b]);
                    math::binary_block_bool(op, &a[..len], &b[..len], &mut o[..len]);
                }
            },
            Instr::Compare { op, a, b, dst } => {
                let o = &mut reg_mut(&mut regs.bool, dst)[..len];
                match a.bank {
                    Bank::F32 => math::compare_block(
                        op,
                        &reg(&regs.f32, a)[..len],
                        &reg(&regs.f32, b)[..len],
                        o,
                    ),
                    Bank::F64 => math::compare_block(
                        op,
                        &reg(&regs.f64, a)[..len],
                        &reg(&regs.f64, b)[..len],
                        o,
                    ),
                    Bank::I64 => math::compare_block(
                        op,
                        &reg(&regs.i64, a)[..len],
                        &reg(&regs.i64, b)[..len],
                        o,
                    ),
                    Bank::Bool => {
                        let (o, [a, b]) = split(&mut regs.bool, dst, [a, b]);
                        math::compare_block(op, &a[..len], &b[..len], &mut o[..len]);
                    }
                }
            }
            Instr::Select { c, a, b, dst } => {
                let Registers {
                    f32,
                    f64,
                    i64,
                    bool,
                } = regs;
                match dst.bank {
                    Bank::F32 => {
                        let (o, [a, b]) = split(f32, dst, [a, b]);
                        math::select_block(
                            &reg(bool, c)[..len],
                            &a[..len],
                            &b[..len],
                            &mut o[..len],
                        );
                    }
                    Bank::F64 => {
                        let (o, [a, b]) = split(f64, dst, [a, b]);
                        math::select_block(
                            &reg(bool, c)[..len],
                            &a[..len],
                            &b[..len],
                            &mut o[..len],
                        );
                    }
                    Bank::I64 => {
                        let (o, [a, b]) = split(i64, dst, [a, b]);
                        math::select_block(
                            &reg(bool, c)[..len],
                            &a[..len],
                            &b[..len],
                            &mut o[..len],
                        );
                    }
                    Bank::Bool => {
                        let (o, [c, a, b]) = split(bool, dst, [c, a, b]);
                        math::select_block(&c[..len], &a[..len], &b[..len], &mut o[..len]);
                    }
                }
            }
            Instr::Cast { x, dst } => cast(regs, x, dst, len),
            Instr::Round { reg: r, dtype } => {
                let v = &mut reg_mut(&mut regs.f32, r)[..len];
                match dtype {
                    DType::F16 => v.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32()),
                    DType::BF16 => v.iter_mut().for_each(|x| *x = bf16::from_f32(*x).to_f32()),
                    DType::F32 | DType::F64 | DType::I64 | DType::Bool => {}
                }
            }
            Instr::Store { src, target } => {
                store(regs, src, &mut targets[target as usize], start, len);
            }
        }
    }
}

/// Converts between banks (or copies within one).
fn cast(regs: &mut Registers, x: Reg, dst: Reg, len: usize) {
    macro_rules! conv {
        ($src:ident, $dst:ident, $f:expr) => {{
            let f = $f;
            let s = &reg(&regs.$src, x)[..len];
            let d = &mut reg_mut(&mut regs.$dst, dst)[..len];
            for (o, &v) in d.iter_mut().zip(s) {
                *o = f(v);
            }
        }};
    }
    macro_rules! same {
        ($b:ident) => {{
            let (o, [a]) = split(&mut regs.$b, dst, [x]);
            o[..len].copy_from_slice(&a[..len]);
        }};
    }
    match (x.bank, dst.bank) {
        (Bank::F32, Bank::F32) => same!(f32),
        (Bank::F64, Bank::F64) => same!(f64),
        (Bank::I64, Bank::I64) => same!(i64),
        (Bank::Bool, Bank::Bool) => same!(bool),
        (Bank::F32, Bank::F64) => conv!(f32, f64, |v: f32| v as f64),
        (Bank::F32, Bank::I64) => conv!(f32, i64, |v: f32| v as i64),
        (Bank::F32, Bank::Bool) => conv!(f32, bool, |v: f32| v != 0.0),
        (Bank::F64, Bank::F32) => conv!(f64, f32, |v: f64| v as f32),
        (Bank::F64, Bank::I64) => conv!(f64, i64, |v: f64| v as i64),
        (Bank::F64, Bank::Bool) => conv!(f64, bool, |v: f64| v != 0.0),
        (Bank::I64, Bank::F32) => conv!(i64, f32, |v: i64| v as f32),
        (Bank::I64, Bank::F64) => conv!(i64, f64, |v: i64| v as f64),
        (Bank::I64, Bank::Bool) => conv!(i64, bool, |v: i64| v != 0),
        (Bank::Bool, Bank::F32) => conv!(bool, f32, |v: bool| v as u8 as f32),
        (Bank::Bool, Bank::F64) => conv!(bool, f64, |v: bool| v as u8 as f64),
        (Bank::Bool, Bank::I64) => conv!(bool, i64, |v: bool| v as i64),
    }
}

/// Copies `src[pos(i)]` for the block `start..start + len` into `out`,
/// converting each element with `f`.
#[inline]
fn gather<S: Copy, T: Copy>(
    src: &[S],
    access: &Access,
    start: usize,
    out: &mut [T],
    idx: &mut [usize],
    f: impl Fn(S) -> T,
) {
    match access {
        Access::Contig => {
            let n = out.len();
            for (o, &v) in out.iter_mut().zip(&src[start..start + n]) {
                *o = f(v);
            }
        }
        Access::Splat => {
            out.fill(f(src[0]));
        }
        Access::Broadcast { dims, strides } => {
            let r = dims.len();
            let idx = &mut idx[..r];
            // Multi-index of `start`.
            let mut rem = start;
            for d in (0..r).rev() {
                idx[d] = rem % dims[d];
                rem /= dims[d];
            }
            let inner = dims[r - 1];
            let s_in = strides[r - 1];
            let mut done = 0;
            while done < out.len() {
                let off: usize = idx.iter().zip(strides.iter()).map(|(i, s)| i * s).sum();
                let run = (inner - idx[r - 1]).min(out.len() - done);
                let dst = &mut out[done..done + run];
                if s_in == 0 {
                    let v = src[off];
                    dst.iter_mut().for_each(|o| *o = f(v));
                } else {
                    for (j, o) in dst.iter_mut().enumerate() {
                        *o = f(src[off + j * s_in]);
                    }
                }
                done += run;
                // Advance the multi-index by `run` (stays within the row or wraps once).
                idx[r - 1] += run;
                let mut d = r - 1;
                while d > 0 && idx[d] >= dims[d] {
                    idx[d] = 0;
                    idx[d - 1] += 1;
                    d -= 1;
                }
            }
        }
    }
}

fn load(
    regs: &mut Registers,
    leaf: &Leaf,
    src: &Storage,
    start: usize,
    len: usize,
    idx: &mut [usize],
) {
    let r = leaf.reg;
    let a = &leaf.access;
    match src {
        Storage::F32(v) => gather(
            v,
            a,
            start,
            &mut reg_mut(&mut regs.f32, r)[..len],
            idx,
            |x| x,
        ),
        Storage::F16(v) => gather(
            v,
            a,
            start,
            &mut reg_mut(&mut regs.f32, r)[..len],
            idx,
            f16::to_f32,
        ),
        Storage::BF16(v) => gather(
            v,
            a,
            start,
            &mut reg_mut(&mut regs.f32, r)[..len],
            idx,
            bf16::to_f32,
        ),
        Storage::F64(v) => gather(
            v,
            a,
            start,
            &mut reg_mut(&mut regs.f64, r)[..len],
            idx,
            |x| x,
        ),
        Storage::I64(v) => gather(
            v,
            a,
            start,
            &mut reg_mut(&mut regs.i64, r)[..len],
            idx,
            |x| x,
        ),
        Storage::Bool(v) => gather(
            v,
            a,
            start,
            &mut reg_mut(&mut regs.bool, r)[..len],
            idx,
            |x| x,
        ),
    }
}

/// Fills a whole register with element 0 of `src` (a splat leaf).
fn fill(regs: &mut Registers, r: Reg, src: &Storage) {
    match src {
        Storage::F32(v) => reg_mut(&mut regs.f32, r).fill(v[0]),
        Storage::F16(v) => reg_mut(&mut regs.f32, r).fill(v[0].to_f32()),
        Storage::BF16(v) => reg_mut(&mut regs.f32, r).fill(v[0].to_f32()),
        Storage::F64(v) => reg_mut(&mut regs.f64, r).fill(v[0]),
        Storage::I64(v) => reg_mut(&mut regs.i64, r).fill(v[0]),
        Storage::Bool(v) => reg_mut(&mut regs.bool, r).fill(v[0]),
    }
}

fn store(regs: &Registers, src: Reg, dst: &mut Storage, start: usize, len: usize) {
    macro_rules! put {
        ($bank:ident, $v:expr, $f:expr) => {{
            let f = $f;
            let s = &reg(&regs.$bank, src)[..len];
            for (o, &x) in $v[start..start + len].iter_mut().zip(s) {
                *o = f(x);
            }
        }};
    }
    match dst {
        Storage::F32(v) => put!(f32, v, |x: f32| x),
        Storage::F16(v) => put!(f32, v, f16::from_f32),
        Storage::BF16(v) => put!(f32, v, bf16::from_f32),
        Storage::F64(v) => put!(f64, v, |x: f64| x),
        Storage::I64(v) => put!(i64, v, |x: i64| x),
        Storage::Bool(v) => put!(bool, v, |x: bool| x),
    }
}
