//! Reductions folded into the fused loop that computes their operand.
//!
//! A reduction whose operand is a member of a fused element-wise loop
//! (one that is never split across threads) becomes a [`Sink`] of that
//! loop: each block of the operand, still in its register, is combined
//! into the reduction's accumulators, so the operand is never stored and
//! read back (a sum of squares reads its input once).
//!
//! The combine order is exactly `ReduceStep`'s: the operand is walked in
//! row-major order; a reduced innermost axis goes into eight interleaved
//! partial results per row, folded into the row's accumulator before the
//! row's remainder; a kept innermost axis combines element by element. So
//! a folded reduction gives the same bits as the reduction step, whatever
//! the block boundaries.

use rlx_core::ReduceOp;

use crate::compile::base::math::Pre;
use crate::compile::base::regs::{Bank, Reg, Registers, BLOCK};
use crate::compile::fusion::io::{for_row_groups, for_runs, short_rows};
use crate::compile::fusion::row_sums;
use crate::compile::steps::reduce::{write_f64, Acc};
use crate::storage::Storage;

/// Interleaved partial results of a reduced innermost axis.
const LANES: usize = 8;

/// A reduction folded into a fused loop over its operand.
#[derive(Clone, Debug)]
pub(crate) struct Sink {
    pub(crate) op: ReduceOp,
    /// The operand's dims (the loop's shape).
    pub(crate) dims: Vec<usize>,
    /// Output stride per operand axis (0 on reduced axes).
    pub(crate) out_strides: Vec<usize>,
    pub(crate) out_numel: usize,
    /// Operand elements per output element (for the mean).
    pub(crate) count: usize,
    /// Where this sink's accumulators (`out_numel` of them, then the
    /// partial results of the current row) start in the `f64` scratch.
    pub(crate) acc_off: usize,
    /// The step target receiving the result.
    pub(crate) target: u32,
    /// The op applied to each element before it is combined (see
    /// [`Pre`]): a negation or square whose only reader is this sink.
    pub(crate) pre: Pre,
}

/// Combines `vals`, the elements from `pos` on of a reduced row, into the
/// interleaved partial results: element `pos + j` into `lanes[(pos + j) %
/// LANES]`, in order. Whole groups of [`LANES`] go through a local array
/// the compiler keeps in vector registers.
#[inline(always)]
fn into_lanes<T: Copy>(
    lanes: &mut [f64],
    pos: usize,
    vals: &[T],
    to: &impl Fn(T) -> f64,
    combine: &impl Fn(f64, f64) -> f64,
) {
    let lanes: &mut [f64; LANES] = lanes.try_into().expect("a sink has LANES partial results");
    let head = ((LANES - pos % LANES) % LANES).min(vals.len());
    for (j, &v) in vals[..head].iter().enumerate() {
        let l = (pos + j) % LANES;
        lanes[l] = combine(lanes[l], to(v));
    }
    let mut part = *lanes;
    let groups = vals[head..].chunks_exact(LANES);
    let tail = groups.remainder();
    for group in groups {
        part.iter_mut()
            .zip(group)
            .for_each(|(a, &v)| *a = combine(*a, to(v)));
    }
    // The tail starts at lane 0 (the head ended on a group boundary).
    part.iter_mut()
        .zip(tail)
        .for_each(|(a, &v)| *a = combine(*a, to(v)));
    *lanes = part;
}

impl Sink {
    /// `f64` scratch elements the sink uses.
    pub(crate) fn scratch(op_numel: usize) -> usize {
        op_numel + LANES
    }

    /// Sets the accumulators to the identity (before the loop).
    pub(crate) fn start(&self, acc: &mut [f64]) {
        acc[self.acc_off..self.acc_off + self.out_numel].fill(f64::identity(self.op));
    }

    /// Folds the block `start..start + len` of the operand, held in
    /// register `src`.
    pub(crate) fn fold_reg(
        &self,
        regs: &Registers,
        src: Reg,
        (start, len): (usize, usize),
        idx: &mut [usize],
        acc: &mut [f64],
    ) {
        let r = src.idx as usize * BLOCK..src.idx as usize * BLOCK + len;
        let x64 = || &regs.f64[r.clone()];
        let x32 = || &regs.f32[r.clone()];
        let at = (start, idx);
        // `-v` and `v * v` are `kernels::scalar::unary`'s `Neg` and
        // `Square` (the fused-against-unfused tests hold the bits equal),
        // written out so that they inline.
        if src.bank == Bank::F64 && self.sums_rows_of_three() {
            return self.fold_rows3(x64(), start, acc);
        }
        if src.bank == Bank::F64 && self.sums_sweeps_of_three() {
            return self.fold_sweeps3(x64(), start, acc);
        }
        match (src.bank, self.pre) {
            (Bank::F64, Pre::Id) => self.fold(x64(), |v| v, at, acc),
            (Bank::F64, Pre::Neg) => self.fold(x64(), |v| -v, at, acc),
            (Bank::F64, Pre::Square) => self.fold(x64(), |v| v * v, at, acc),
            (Bank::F32, Pre::Id) => self.fold(x32(), |v| v as f64, at, acc),
            (Bank::F32, Pre::Neg) => self.fold(x32(), |v| (-v) as f64, at, acc),
            (Bank::F32, Pre::Square) => self.fold(x32(), |v| (v * v) as f64, at, acc),
            (Bank::I64 | Bank::Bool, _) => unreachable!("only float reductions are folded"),
        }
    }

    /// Whether this is a sum (or mean) over rows of three elements whose
    /// accumulators are `in_row` apart within a row and `across` apart
    /// from row to row.
    fn sums_rows_of_three_with(&self, in_row: usize, across: usize) -> bool {
        let r = self.dims.len();
        matches!(self.op, ReduceOp::Sum | ReduceOp::Mean)
            && r >= 2
            && self.dims[r - 1] == 3
            && self.out_strides[r - 1] == in_row
            && self.out_strides[r - 2] == across
    }

    /// Whether this is a sum (or mean) of rows of three elements into
    /// consecutive accumulators (`sum(square(d), [2])` over `[n, m, 3]`),
    /// which [`row_sums`] takes four rows at a time.
    fn sums_rows_of_three(&self) -> bool {
        self.sums_rows_of_three_with(0, 1)
    }

    /// [`Sink::fold_with`]'s short-row walk for [`Sink::sums_rows_of_three`]:
    /// whole rows go to [`row_sums::sum_rows3`], which does each row's
    /// operations in the same order; a row the block boundary cuts goes
    /// element by element, as there.
    fn fold_rows3(&self, vals: &[f64], start: usize, acc: &mut [f64]) {
        let acc = &mut acc[self.acc_off..self.acc_off + self.out_numel];
        let pre = self.pre;
        for_row_groups::<3>(
            &self.dims,
            &self.out_strides,
            start,
            vals.len(),
            |done, o, count| {
                if count == 0 {
                    let mut a = acc[o];
                    if (start + done) % 3 == 0 {
                        a += 0.0;
                    }
                    acc[o] = a + pre.apply(vals[done]);
                    return;
                }
                row_sums::sum_rows3(&vals[done..done + 3 * count], &mut acc[o..o + count], pre);
            },
        );
    }

    /// Whether this is a sum (or mean) over the axis before rows of three
    /// elements kept side by side (`sum(g, [1])` over `[n, m, 3]`), whose
    /// sweeps [`row_sums`] runs in lockstep.
    fn sums_sweeps_of_three(&self) -> bool {
        self.sums_rows_of_three_with(1, 0)
    }

    /// [`Sink::fold_with`]'s short-row walk for
    /// [`Sink::sums_sweeps_of_three`]: whole rows of up to four sweeps
    /// with the same number of rows and disjoint accumulators go to
    /// [`row_sums::sum_sweeps3`] together (each accumulator still takes
    /// its elements in order); an element of a row the block boundary cuts
    /// goes alone, as there, after the sweeps before it.
    fn fold_sweeps3(&self, vals: &[f64], start: usize, acc: &mut [f64]) {
        let acc = &mut acc[self.acc_off..self.acc_off + self.out_numel];
        let pre = self.pre;
        let mut pending = [(0usize, 0usize); 4];
        let (mut n, mut rows) = (0, 0);
        for_row_groups::<3>(
            &self.dims,
            &self.out_strides,
            start,
            vals.len(),
            |done, o, count| {
                let clash = pending[..n].iter().any(|&(_, q)| q.abs_diff(o) < 3);
                if n > 0 && (count == 0 || count != rows || clash || n == pending.len()) {
                    row_sums::sum_sweeps3(vals, &pending[..n], rows, acc, pre);
                    n = 0;
                }
                if count == 0 {
                    acc[o] += pre.apply(vals[done]);
                    return;
                }
                pending[n] = (done, o);
                n += 1;
                rows = count;
            },
        );
        row_sums::sum_sweeps3(vals, &pending[..n], rows, acc, pre);
    }

    fn fold<T: Copy>(
        &self,
        vals: &[T],
        to: impl Fn(T) -> f64,
        at: (usize, &mut [usize]),
        acc: &mut [f64],
    ) {
        // One monomorphic loop per reduction: each closure names its op, so
        // the combine is inlined, not dispatched per element.
        macro_rules! with {
            ($op:expr) => {
                self.fold_with(
                    vals,
                    to,
                    at,
                    acc,
                    |a, x| f64::combine($op, a, x),
                    f64::identity($op),
                )
            };
        }
        match self.op {
            ReduceOp::Sum => with!(ReduceOp::Sum),
            ReduceOp::Mean => with!(ReduceOp::Mean),
            ReduceOp::Prod => with!(ReduceOp::Prod),
            ReduceOp::Max => with!(ReduceOp::Max),
            ReduceOp::Min => with!(ReduceOp::Min),
        }
    }

    #[inline(always)]
    fn fold_with<T: Copy>(
        &self,
        vals: &[T],
        to: impl Fn(T) -> f64,
        (start, idx): (usize, &mut [usize]),
        acc: &mut [f64],
        combine: impl Fn(f64, f64) -> f64,
        identity: f64,
    ) {
        let (acc, lanes) = acc[self.acc_off..self.acc_off + Sink::scratch(self.out_numel)]
            .split_at_mut(self.out_numel);
        let r = self.dims.len();
        let inner = self.dims[r - 1];
        let s_in = self.out_strides[r - 1];
        let full = inner - inner % LANES;
        if short_rows(&self.dims) {
            // Rows of a few elements: whole rows a sweep at a time, in
            // registers where they combine into the same accumulators.
            // Every accumulator still takes its elements in order, and a
            // reduced row still starts with the identity (the partial
            // results of a row shorter than `LANES` hold only that).
            let q = self.out_strides[r - 2];
            macro_rules! rows {
                ($n:literal) => {
                    for_row_groups::<$n>(
                        &self.dims,
                        &self.out_strides,
                        start,
                        vals.len(),
                        |done, o, count| {
                            if count == 0 {
                                let mut a = acc[o];
                                if s_in == 0 && (start + done) % inner == 0 {
                                    a = combine(a, identity);
                                }
                                acc[o] = combine(a, to(vals[done]));
                                return;
                            }
                            let rows = vals[done..done + count * $n].chunks_exact($n);
                            if s_in == 0 {
                                // A reduced row: one accumulator per row.
                                for (j, row) in rows.enumerate() {
                                    let t = o + j * q;
                                    let mut a = combine(acc[t], identity);
                                    for &v in row {
                                        a = combine(a, to(v));
                                    }
                                    acc[t] = a;
                                }
                            } else if q == 0 {
                                // Kept rows summed over the axis before
                                // them: the same accumulators for every row.
                                let mut a: [f64; $n] = std::array::from_fn(|k| acc[o + k * s_in]);
                                for row in rows {
                                    for k in 0..$n {
                                        a[k] = combine(a[k], to(row[k]));
                                    }
                                }
                                for (k, &a) in a.iter().enumerate() {
                                    acc[o + k * s_in] = a;
                                }
                            } else {
                                for (j, row) in rows.enumerate() {
                                    for (k, &v) in row.iter().enumerate() {
                                        let t = o + j * q + k * s_in;
                                        acc[t] = combine(acc[t], to(v));
                                    }
                                }
                            }
                        },
                    )
                };
            }
            match inner {
                1 => rows!(1),
                2 => rows!(2),
                3 => rows!(3),
                4 => rows!(4),
                _ => unreachable!("short rows have 1 to SHORT_ROW elements"),
            }
            return;
        }
        // Runs along the innermost axis: the first may start mid-row, the
        // others start a row.
        let mut pos = start % inner;
        for_runs(
            &self.dims,
            &self.out_strides,
            start,
            vals.len(),
            idx,
            |done, o, run| {
                let seg = &vals[done..done + run];
                if s_in == 1 {
                    // A kept contiguous axis: accumulators side by side,
                    // combined a vector at a time.
                    acc[o..o + run]
                        .iter_mut()
                        .zip(seg)
                        .for_each(|(a, &v)| *a = combine(*a, to(v)));
                } else if s_in != 0 {
                    for (j, &v) in seg.iter().enumerate() {
                        let t = o + j * s_in;
                        acc[t] = combine(acc[t], to(v));
                    }
                } else {
                    if pos == 0 && full > 0 {
                        lanes.fill(identity);
                    }
                    let in_lanes = full.saturating_sub(pos).min(run);
                    into_lanes(lanes, pos, &seg[..in_lanes], &to, &combine);
                    let end = pos + run;
                    let mut a = acc[o];
                    // The partial results join the accumulator once per row,
                    // where the row's remainder starts (or at its end). A row
                    // shorter than the lanes has only identities there, and
                    // combining the identity a second time changes nothing.
                    if pos <= full && (full < end || end == inner) {
                        if full == 0 {
                            a = combine(a, identity);
                        } else {
                            for &l in lanes.iter() {
                                a = combine(a, l);
                            }
                        }
                    }
                    for &v in &seg[in_lanes..] {
                        a = combine(a, to(v));
                    }
                    acc[o] = a;
                }
                pos = 0;
            },
        );
    }

    /// Writes the result (after the loop).
    pub(crate) fn finish(&self, acc: &mut [f64], out: &mut Storage) {
        let a = &mut acc[self.acc_off..self.acc_off + self.out_numel];
        if let ReduceOp::Mean = self.op {
            let c = self.count as f64;
            a.iter_mut().for_each(|x| *x /= c);
        }
        write_f64(a, out, 0);
    }
}
