//! Fused element-wise loops.
//!
//! A [`FusedStep`] evaluates a chain of element-wise nodes (unary, binary,
//! compare, select, cast, broadcast) of one output shape in a single pass:
//! the output is cut into blocks of [`BLOCK`] elements; for each block,
//! every instruction runs one tight loop over block-sized registers (small
//! arrays in the per-call [`Registers`]), so intermediate values never
//! leave the L1 cache and no loop body dispatches per element. Runs of
//! cheap float ops are merged into one [`Instr::Chain`] that keeps its
//! running value in vector registers (see `chain`); a body that is a single
//! instruction reading leaves and writing a target streams over the whole
//! output in one block.
//!
//! Registers live in four banks by compute type: `f32` (also for `f16` and
//! `bf16`, rounded after each op as the reference kernels do), `f64`,
//! `i64` and `bool`. Operands from outside the chain ("leaves") are loaded
//! per block: contiguously, as a splat (filled once per call) or through
//! strides (a broadcast, or a slice or transpose read in place), at an
//! offset into their storage. Results are stored contiguously or scattered
//! through strides into the concat or transpose they are placed in (see
//! `io`), and reductions of results are folded in (see `fold`).

use half::{bf16, f16};
use rlx_core::{BinaryOp, CmpOp, DType, UnaryOp};

use crate::compile::base::env::Env;
use crate::compile::base::math;
use crate::compile::base::math::Arg;
use crate::compile::base::parallel;
use crate::compile::base::parallel::{window, RawTarget, Scratch};
use crate::compile::base::regs::{reg, reg_mut, Bank, Out, Reg, Registers, Src, BLOCK};
use crate::compile::fusion::chain::{Chain, ChainReal, Resolved, Stage, Start, MAX_STAGES};
use crate::compile::fusion::fold::Sink;
use crate::compile::fusion::interleave::{interleave, Interleave};
use crate::compile::fusion::io::{fill, load, scatter, store, Access, Leaf, Scatter};
use crate::storage::{Cache, Storage};

/// One block-wide instruction.
#[derive(Clone, Debug)]
pub(crate) enum Instr {
    /// Loads leaf `leaf` (not a splat) into its register for the current block.
    Load {
        leaf: u32,
    },
    /// Copies the current block of target `target` into register `dst`:
    /// the matrix product an epilogue step wrote into the buffer this loop
    /// then overwrites (see `epilogue`). It comes first in the body, so
    /// every block is read before anything writes it.
    LoadTarget {
        target: u32,
        dst: Reg,
    },
    Unary {
        op: UnaryOp,
        bank: Bank,
        x: Src,
        dst: Out,
    },
    Binary {
        op: BinaryOp,
        bank: Bank,
        a: Src,
        b: Src,
        dst: Out,
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
    /// A run of cheap float ops evaluated in vector registers.
    Chain(Chain),
    /// Writes a register through `map` into target `target` (a value
    /// placed in a window of a concat or transpose).
    Scatter {
        src: Reg,
        target: u32,
        map: Scatter,
    },
    /// Writes several registers through one walk into target `target`,
    /// item by item (the pieces of a concat one loop computes).
    Interleave {
        target: u32,
        il: Interleave,
    },
    /// Combines a register into the accumulators of sink `sink` (a
    /// reduction folded into the loop; see `fold`).
    Fold {
        src: Reg,
        sink: u32,
    },
}

/// The per-call scratch of fused loops, owned by the plan's state and
/// lent to each loop step: one thread's registers, an index vector as long
/// as the plan's largest rank, the registers and target views of parts run
/// on other threads, and the `f64` accumulators of reductions.
#[derive(Debug)]
pub(crate) struct LoopScratch {
    pub(crate) regs: Registers,
    pub(crate) idx: Vec<usize>,
    pub(crate) par: Scratch,
    pub(crate) acc: Vec<f64>,
}

/// A compiled element-wise chain.
#[derive(Clone, Debug)]
pub(crate) struct FusedStep {
    /// Number of output elements.
    pub(crate) numel: usize,
    leaves: Vec<Leaf>,
    pub(crate) body: Vec<Instr>,
    /// Reductions folded into the loop; a loop with sinks runs on one thread.
    pub(crate) sinks: Vec<Sink>,
    /// Elements per block: [`BLOCK`], or all of them when the body is one
    /// instruction streaming from leaves to a target — no register holds a
    /// per-block value then, so blocks would only add dispatch.
    block: usize,
}

/// An element type with its own register bank and storage variant.
trait Lanes: Copy + 'static {
    fn bank(regs: &mut Registers) -> &mut [Self];
    fn of(s: &Storage) -> &[Self];
    /// The elements of a target of this type.
    fn raw(t: RawTarget) -> (*mut Self, usize);
}

macro_rules! lanes {
    ($t:ty, $field:ident, $variant:ident) => {
        impl Lanes for $t {
            fn bank(regs: &mut Registers) -> &mut [Self] {
                &mut regs.$field
            }
            fn of(s: &Storage) -> &[Self] {
                match s {
                    Storage::$variant(v) => v,
                    _ => unreachable!("the planner reads leaves in place only in their own type"),
                }
            }
            fn raw(t: RawTarget) -> (*mut Self, usize) {
                match t {
                    RawTarget::$variant(p, n) => (p, n),
                    _ => unreachable!("the planner writes targets in place only in their own type"),
                }
            }
        }
    };
}

lanes!(f32, f32, F32);
lanes!(f64, f64, F64);
lanes!(i64, i64, I64);
lanes!(bool, bool, Bool);

/// Block context: where the current block starts and how long it is.
#[derive(Clone, Copy)]
struct At<'e> {
    env: &'e Env<'e>,
    leaves: &'e [Leaf],
    start: usize,
    len: usize,
}

/// Read access to the operands of one op in bank `T`: the registers other
/// than the destination, and the leaves.
struct Reader<'a, T> {
    lo: &'a [T],
    hi: &'a [T],
    /// Start of the destination register (`usize::MAX` when the op writes a target).
    d: usize,
    at: At<'a>,
}

impl<'a, T: Lanes> Reader<'a, T> {
    #[inline(always)]
    fn reg(&self, r: Reg) -> &'a [T] {
        let s = r.idx as usize * BLOCK;
        debug_assert_ne!(s, self.d, "destination register aliases an operand");
        if s < self.d {
            &self.lo[s..s + BLOCK]
        } else {
            let o = s - self.d - BLOCK;
            &self.hi[o..o + BLOCK]
        }
    }

    #[inline(always)]
    fn arg(&self, s: Src) -> Arg<'a, T> {
        let (start, len) = (self.at.start, self.at.len);
        match s {
            Src::Reg(r) => Arg::Slice(&self.reg(r)[..len]),
            Src::Splat(r) => Arg::Scalar(self.reg(r)[0]),
            Src::Direct(l) => {
                let leaf = &self.at.leaves[l as usize];
                let at = leaf.off + start;
                Arg::Slice(&T::of(self.at.env.get(leaf.val))[at..at + len])
            }
        }
    }
}

/// The destination slice (mutable) of one op in bank `T` and a reader for
/// its operands. A destination register never holds one of its own
/// operands (the planner allocates it while the operands are live), so the
/// borrows are disjoint.
#[inline(always)]
fn operands<'a, T: Lanes>(
    regs: &'a mut Registers,
    targets: &'a [RawTarget],
    at: At<'a>,
    dst: Out,
) -> (&'a mut [T], Reader<'a, T>) {
    let (start, len) = (at.start, at.len);
    let bank = T::bank(regs);
    match dst {
        Out::Reg(r) => {
            let d = r.idx as usize * BLOCK;
            let (lo, rest) = bank.split_at_mut(d);
            let (o, hi) = rest.split_at_mut(BLOCK);
            (&mut o[..len], Reader { lo, hi, d, at })
        }
        Out::Target(t) => {
            let (p, n) = T::raw(targets[t as usize]);
            // SAFETY: the block `start..start + len` of a target belongs to
            // the one part running it, and nothing else borrows it now.
            let o = unsafe { window(p, n, start, len) };
            let r = Reader {
                lo: bank,
                hi: &[],
                d: usize::MAX,
                at,
            };
            (o, r)
        }
    }
}

impl FusedStep {
    /// A step computing `body` over `numel` elements.
    pub(crate) fn new(
        numel: usize,
        leaves: Vec<Leaf>,
        body: Vec<Instr>,
        sinks: Vec<Sink>,
    ) -> FusedStep {
        let block = match &body[..] {
            [ins] if streams(ins) => numel.max(1),
            _ => BLOCK,
        };
        FusedStep {
            numel,
            leaves,
            body,
            sinks,
            block,
        }
    }

    /// Runs the chain, writing stored values into `targets`. Above
    /// [`parallel::MIN_PER_PART`] elements per part the output is cut into
    /// block-aligned ranges run on several threads, each with its own
    /// registers from `par`; every element is computed by the same
    /// instructions as on one thread, so the bits do not change. `acc` is
    /// the `f64` scratch of the sinks.
    ///
    /// `fresh(k)` is `Some(n)` when target `k` is a fresh output that the
    /// loop writes whole through stores only (`Target::fills` of the
    /// plan): its storage holds no elements and has room for `n`, the
    /// loop writes all `n` into that spare room ([`RawTarget::spare`]),
    /// and the caller then sets its length.
    pub(crate) fn run(
        &self,
        env: &Env<'_>,
        targets: &mut [Storage],
        fresh: impl Fn(usize) -> Option<usize>,
        scratch: &mut LoopScratch,
    ) {
        let LoopScratch {
            regs,
            idx,
            par,
            acc,
        } = scratch;
        for s in &self.sinks {
            s.start(acc);
        }
        // Raw views: parts write disjoint ranges of the same targets.
        par.targets.clear();
        par.targets
            .extend(targets.iter_mut().enumerate().map(|(k, s)| match fresh(k) {
                Some(n) => RawTarget::spare(s, n),
                None => RawTarget::of(s),
            }));
        let parts = if self.sinks.is_empty() {
            parallel::parts_for(self.numel)
        } else {
            1
        };
        if parts > 1 {
            par.lanes(parts);
        }
        let Scratch {
            lanes,
            targets: views,
            ..
        } = par;
        if parts <= 1 {
            self.run_range(env, regs, views, idx, (0, self.numel), acc);
        } else {
            parallel::for_each_mut(&mut lanes[..parts], &|p, lane| {
                let range = parallel::part_range(self.numel, parts, p);
                let no_sinks: &mut [f64] = &mut [];
                self.run_range(env, &mut lane.regs, views, &mut lane.idx, range, no_sinks);
            });
        }
        // No pointer into the targets outlives the step.
        views.clear();
        for s in &self.sinks {
            s.finish(acc, &mut targets[s.target as usize]);
        }
    }

    /// Runs the chain over elements `lo..hi` (`lo` a multiple of [`BLOCK`]).
    fn run_range(
        &self,
        env: &Env<'_>,
        regs: &mut Registers,
        targets: &[RawTarget],
        idx: &mut [usize],
        (lo, hi): (usize, usize),
        acc: &mut [f64],
    ) {
        // Splat leaves: fill their registers once, as far as a block reads
        // them (a small value fills a few lanes, not the whole register).
        let lanes = self.block.min(self.numel).min(BLOCK);
        for leaf in &self.leaves {
            if let (&Access::Splat { whole }, Some(r)) = (&leaf.access, leaf.reg) {
                let lanes = if whole { lanes } else { 1 };
                fill(regs, r, env.get(leaf.val), leaf.off, lanes);
            }
        }
        let mut start = lo;
        while start < hi {
            let len = self.block.min(hi - start);
            let at = At {
                env,
                leaves: &self.leaves,
                start,
                len,
            };
            self.prefetch_next(env, start + len, hi);
            for ins in &self.body {
                match *ins {
                    Instr::Fold { src, sink } => {
                        self.sinks[sink as usize].fold_reg(regs, src, (start, len), idx, acc)
                    }
                    _ => exec(ins, at, regs, targets, idx),
                }
            }
            start += len;
        }
    }

    /// Asks the cache to fetch the next block of every contiguous leaf
    /// while this block computes, so memory traffic overlaps the
    /// register-to-register passes (a plain loop gets this overlap for free).
    #[inline]
    fn prefetch_next(&self, env: &Env<'_>, next: usize, hi: usize) {
        if next >= hi {
            return;
        }
        let contiguous = self
            .leaves
            .iter()
            .filter(|l| matches!(l.access, Access::Contig));
        for l in contiguous {
            env.get(l.val).prefetch(l.off + next, BLOCK, Cache::L1);
        }
    }
}

/// Whether `ins` reads only leaves (in place or splat) and writes a target.
fn streams(ins: &Instr) -> bool {
    let leaf = |s: Src| matches!(s, Src::Direct(_) | Src::Splat(_));
    match ins {
        Instr::Unary { x, dst, .. } => leaf(*x) && matches!(dst, Out::Target(_)),
        Instr::Binary { a, b, dst, .. } => leaf(*a) && leaf(*b) && matches!(dst, Out::Target(_)),
        Instr::Chain(ch) => {
            leaf(ch.start)
                && matches!(ch.dst, Out::Target(_))
                && ch.stages.iter().all(|st| match st {
                    Stage::Unary(_) => true,
                    Stage::Binary { operand, .. } => leaf(*operand),
                })
        }
        Instr::Load { .. }
        | Instr::LoadTarget { .. }
        | Instr::Compare { .. }
        | Instr::Select { .. }
        | Instr::Cast { .. }
        | Instr::Round { .. }
        | Instr::Store { .. }
        | Instr::Scatter { .. }
        | Instr::Interleave { .. }
        | Instr::Fold { .. } => false,
    }
}

/// Copies elements `start..start + len` of target `t` into register `r`.
fn load_target<T: Lanes>(regs: &mut Registers, t: RawTarget, r: Reg, start: usize, len: usize) {
    let (p, n) = T::raw(t);
    // SAFETY: the block `start..start + len` of a target belongs to the one
    // part running it, and no other reference into it is live: the copy
    // ends before any instruction of the block writes the target.
    let block = unsafe { window(p, n, start, len) };
    reg_mut(T::bank(regs), r)[..len].copy_from_slice(block);
}

fn exec<'e>(
    ins: &Instr,
    at: At<'e>,
    regs: &mut Registers,
    targets: &[RawTarget],
    idx: &mut [usize],
) {
    let (start, len) = (at.start, at.len);
    match *ins {
        Instr::Load { leaf } => {
            let leaf = &at.leaves[leaf as usize];
            if let Some(r) = leaf.reg {
                let src = at.env.get(leaf.val);
                load(regs, (leaf, r), src, start, len, idx);
            }
        }
        Instr::LoadTarget { target, dst } => match dst.bank {
            Bank::F32 => load_target::<f32>(regs, targets[target as usize], dst, start, len),
            Bank::F64 => load_target::<f64>(regs, targets[target as usize], dst, start, len),
            Bank::I64 => load_target::<i64>(regs, targets[target as usize], dst, start, len),
            Bank::Bool => load_target::<bool>(regs, targets[target as usize], dst, start, len),
        },
        Instr::Unary { op, bank, x, dst } => match bank {
            Bank::F32 => {
                let (o, r) = operands::<f32>(regs, targets, at, dst);
                math::unary_block(op, r.arg(x), o);
            }
            Bank::F64 => {
                let (o, r) = operands::<f64>(regs, targets, at, dst);
                math::unary_block(op, r.arg(x), o);
            }
            Bank::I64 => {
                let (o, r) = operands::<i64>(regs, targets, at, dst);
                math::unary_block_i64(op, r.arg(x), o);
            }
            Bank::Bool => {
                let (o, r) = operands::<bool>(regs, targets, at, dst);
                math::unary_block_bool(op, r.arg(x), o);
            }
        },
        Instr::Binary {
            op,
            bank,
            a,
            b,
            dst,
        } => match bank {
            Bank::F32 => {
                let (o, r) = operands::<f32>(regs, targets, at, dst);
                math::binary_block(op, r.arg(a), r.arg(b), o);
            }
            Bank::F64 => {
                let (o, r) = operands::<f64>(regs, targets, at, dst);
                math::binary_block(op, r.arg(a), r.arg(b), o);
            }
            Bank::I64 => {
                let (o, r) = operands::<i64>(regs, targets, at, dst);
                math::binary_block_i64(op, r.arg(a), r.arg(b), o);
            }
            Bank::Bool => {
                let (o, r) = operands::<bool>(regs, targets, at, dst);
                math::binary_block_bool(op, r.arg(a), r.arg(b), o);
            }
        },
        Instr::Compare { op, a, b, dst } => {
            macro_rules! cmp {
                ($bank:ident) => {{
                    let Registers {
                        $bank: src, bool, ..
                    } = regs;
                    math::compare_block(
                        op,
                        Arg::Slice(&reg(src, a)[..len]),
                        Arg::Slice(&reg(src, b)[..len]),
                        &mut reg_mut(bool, dst)[..len],
                    )
                }};
            }
            match a.bank {
                Bank::F32 => cmp!(f32),
                Bank::F64 => cmp!(f64),
                Bank::I64 => cmp!(i64),
                Bank::Bool => {
                    let (o, r) = operands::<bool>(regs, targets, at, Out::Reg(dst));
                    math::compare_block(op, r.arg(Src::Reg(a)), r.arg(Src::Reg(b)), o);
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
                Bank::F32 => select_in(f32, &reg(bool, c)[..len], a, b, dst, len),
                Bank::F64 => select_in(f64, &reg(bool, c)[..len], a, b, dst, len),
                Bank::I64 => select_in(i64, &reg(bool, c)[..len], a, b, dst, len),
                Bank::Bool => {
                    let d = dst.idx as usize * BLOCK;
                    // The condition may share the bool bank with the destination.
                    let (lo, rest) = bool.split_at_mut(d);
                    let (o, hi) = rest.split_at_mut(BLOCK);
                    let get = |r: Reg| -> &[bool] {
                        let s = r.idx as usize * BLOCK;
                        if s < d {
                            &lo[s..s + BLOCK]
                        } else {
                            &hi[s - d - BLOCK..s - d]
                        }
                    };
                    math::select_block(
                        &get(c)[..len],
                        &get(a)[..len],
                        &get(b)[..len],
                        &mut o[..len],
                    );
                }
            }
        }
        Instr::Cast { x, dst } => cast(regs, x, dst, len),
        Instr::Round { reg: r, dtype } => {
            let v = &mut reg_mut(&mut regs.f32, r)[..len];
            match dtype {
                DType::F16 => v.iter_mut().for_each(|x| *x = f16::from_f32(*x).to_f32()),
                DType::BF16 => v.iter_mut().for_each(|x| *x = bf16::from_f32(*x).to_f32()),
                DType::F32 | DType::F64 | DType::I64 | DType::Bool | DType::C32 | DType::C64 => {}
            }
        }
        Instr::Store { src, target } => {
            store(regs, src, targets[target as usize], start, len);
        }
        Instr::Scatter {
            src,
            target,
            ref map,
        } => scatter(regs, src, map, targets[target as usize], start, len, idx),
        Instr::Interleave { target, ref il } => {
            interleave(regs, il, targets[target as usize], start, len, idx)
        }
        Instr::Chain(ref ch) => match ch.bank {
            Bank::F32 => run_chain::<f32>(ch, at, regs, targets),
            Bank::F64 => run_chain::<f64>(ch, at, regs, targets),
            Bank::I64 | Bank::Bool => unreachable!("chains are formed in float banks only"),
        },
        Instr::Fold { .. } => unreachable!("folds run in `run_range`, which owns the scratch"),
    }
}

/// Runs a chain over the current block: resolves each stage's operand to
/// a block slice or a scalar, then hands the block to the chain kernel.
fn run_chain<T: Lanes + ChainReal>(
    ch: &Chain,
    at: At<'_>,
    regs: &mut Registers,
    targets: &[RawTarget],
) {
    let (o, r) = operands::<T>(regs, targets, at, ch.dst);
    let mut stages = [Resolved::NONE; MAX_STAGES];
    for (s, st) in stages.iter_mut().zip(&ch.stages) {
        *s = match *st {
            Stage::Unary(u) => Resolved::Unary(u),
            Stage::Binary {
                op,
                operand,
                value_first,
            } => Resolved::Binary(op, r.arg(operand), value_first),
        };
    }
    let start = if ch.in_place() {
        Start::Out
    } else {
        Start::Arg(r.arg(ch.start))
    };
    T::run_chain(start, &stages[..ch.stages.len()], o);
}

/// `dst = c ? a : b` within one bank.
fn select_in<T: Copy>(bank: &mut [T], c: &[bool], a: Reg, b: Reg, dst: Reg, len: usize) {
    let d = dst.idx as usize * BLOCK;
    let (lo, rest) = bank.split_at_mut(d);
    let (o, hi) = rest.split_at_mut(BLOCK);
    let get = |r: Reg| -> &[T] {
        let s = r.idx as usize * BLOCK;
        if s < d {
            &lo[s..s + BLOCK]
        } else {
            &hi[s - d - BLOCK..s - d]
        }
    };
    math::select_block(c, &get(a)[..len], &get(b)[..len], &mut o[..len]);
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
            let (s, d) = (x.idx as usize * BLOCK, dst.idx as usize * BLOCK);
            regs.$b.copy_within(s..s + len, d);
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
