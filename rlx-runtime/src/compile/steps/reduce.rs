//! Reductions over any set of axes, without allocation.
//!
//! The input is walked once in row-major order. `out_strides[d]` is the
//! output stride of input axis `d` (0 on reduced axes), so the output
//! element of an input index is `Σ idx[d]·out_strides[d]`. The innermost
//! axis is a tight loop: a fold into one accumulator when it is reduced,
//! an element-wise combine with a row of accumulators when it is kept.
//!
//! Floats accumulate in `f64` scratch (more accurate than the element
//! type for `f32` and half precision), a reduced innermost axis in eight
//! interleaved partial results; integers accumulate in `i64` with
//! wrapping arithmetic. Large float reductions are split across threads
//! by a partition fixed by their shape (see `ReduceStep::split`), so
//! every thread count gives the same bits. Over zero elements: sum 0, product 1, mean NaN,
//! max -∞ and min +∞ (`i64::MIN`/`i64::MAX` for integers). NaN propagates
//! through max and min.

use rlx_core::ReduceOp;

use crate::compile::base::env::{Env, Val};
use crate::compile::base::parallel;
use crate::storage::{Element, Storage};

/// A compiled reduction.
#[derive(Clone, Debug)]
pub(crate) struct ReduceStep {
    pub(crate) x: Val,
    pub(crate) op: ReduceOp,
    /// Input dimensions.
    pub(crate) dims: Vec<usize>,
    /// Output stride per input axis (0 on reduced axes).
    pub(crate) out_strides: Vec<usize>,
    /// Number of output elements.
    pub(crate) out_numel: usize,
    /// Number of input elements folded into each output.
    pub(crate) count: usize,
}

/// An accumulator type: the identity of each reduction and its combine.
pub(crate) trait Acc: Copy {
    fn identity(op: ReduceOp) -> Self;
    fn combine(op: ReduceOp, a: Self, x: Self) -> Self;
}

impl Acc for f64 {
    #[inline(always)]
    fn identity(op: ReduceOp) -> f64 {
        match op {
            ReduceOp::Sum | ReduceOp::Mean => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        }
    }
    #[inline(always)]
    fn combine(op: ReduceOp, a: f64, x: f64) -> f64 {
        match op {
            ReduceOp::Sum | ReduceOp::Mean => a + x,
            ReduceOp::Prod => a * x,
            // NaN wins: once the accumulator is NaN it stays NaN.
            ReduceOp::Max => {
                if a.is_nan() {
                    a
                } else if x > a || x.is_nan() {
                    x
                } else {
                    a
                }
            }
            ReduceOp::Min => {
                if a.is_nan() {
                    a
                } else if x < a || x.is_nan() {
                    x
                } else {
                    a
                }
            }
        }
    }
}

impl Acc for i64 {
    #[inline(always)]
    fn identity(op: ReduceOp) -> i64 {
        match op {
            ReduceOp::Sum | ReduceOp::Mean => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => i64::MIN,
            ReduceOp::Min => i64::MAX,
        }
    }
    #[inline(always)]
    fn combine(op: ReduceOp, a: i64, x: i64) -> i64 {
        match op {
            ReduceOp::Sum | ReduceOp::Mean => a.wrapping_add(x),
            ReduceOp::Prod => a.wrapping_mul(x),
            ReduceOp::Max => a.max(x),
            ReduceOp::Min => a.min(x),
        }
    }
}

impl ReduceStep {
    /// Folds `x`, of dimensions `dims` (this step's, or fewer rows of the
    /// first axis), into `acc` (already holding the identity).
    fn fold<S: Copy, A: Acc>(
        &self,
        dims: &[usize],
        x: &[S],
        to: impl Fn(S) -> A,
        acc: &mut [A],
        idx: &mut [usize],
    ) {
        let op = self.op;
        let r = dims.len();
        if x.is_empty() {
            return;
        }
        if r == 0 {
            acc[0] = A::combine(op, acc[0], to(x[0]));
            return;
        }
        let inner = dims[r - 1];
        let s_in = self.out_strides[r - 1];
        let idx = &mut idx[..r - 1];
        idx.fill(0);
        let mut off = 0;
        loop {
            let o: usize = idx
                .iter()
                .zip(&self.out_strides[..r - 1])
                .map(|(i, s)| i * s)
                .sum();
            let row = &x[off..off + inner];
            if s_in == 0 {
                // Eight independent partial results, so the fold is not one
                // long dependency chain (the order is fixed: deterministic).
                let mut lanes = [A::identity(op); 8];
                let chunks = row.chunks_exact(8);
                let rest = chunks.remainder();
                for c in chunks {
                    for (l, &v) in lanes.iter_mut().zip(c) {
                        *l = A::combine(op, *l, to(v));
                    }
                }
                let mut a = acc[o];
                for l in lanes {
                    a = A::combine(op, a, l);
                }
                for &v in rest {
                    a = A::combine(op, a, to(v));
                }
                acc[o] = a;
            } else if s_in == 1 {
                // A kept contiguous row (a sum over the first axis of a
                // matrix, a bias gradient): one combine per accumulator,
                // in the same order, with the op matched once per row so
                // that the loop vectorises.
                let accs = &mut acc[o..o + inner];
                match op {
                    ReduceOp::Sum | ReduceOp::Mean => {
                        for (a, &v) in accs.iter_mut().zip(row) {
                            *a = A::combine(ReduceOp::Sum, *a, to(v));
                        }
                    }
                    ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min => {
                        for (a, &v) in accs.iter_mut().zip(row) {
                            *a = A::combine(op, *a, to(v));
                        }
                    }
                }
            } else {
                for (j, &v) in row.iter().enumerate() {
                    let t = o + j * s_in;
                    acc[t] = A::combine(op, acc[t], to(v));
                }
            }
            off += inner;
            // Advance the outer multi-index.
            let mut d = r - 1;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    /// `f64` scratch the step needs: the accumulators and, for a large
    /// reduction over its first axis, one row of partial results per
    /// block of that axis (see [`split`](Self::split)).
    pub(crate) fn scratch_len(&self) -> usize {
        let blocks = match self.split() {
            Split::Blocks { blocks, .. } => blocks,
            Split::Serial | Split::Rows { .. } => 0,
        };
        self.out_numel * (1 + blocks)
    }

    /// How the step is cut into parts, from its shape alone (never the
    /// thread count, so every count gives the same bits):
    ///
    /// - small steps, and those of rank 0 or above [`MAX_SPLIT_RANK`], run
    ///   whole;
    /// - when the first axis is kept, its rows are independent outputs:
    ///   parts take whole rows, each output folded exactly as by one
    ///   thread;
    /// - when it is reduced, its rows are cut into fixed blocks of about
    ///   [`BLOCK_ELEMENTS`] inputs, each folded into its own row of
    ///   partial results, which are then combined in block order. Only
    ///   while the partial rows take at most a quarter of the input's
    ///   size; else the step runs whole.
    fn split(&self) -> Split {
        let numel: usize = self.dims.iter().product();
        let r = self.dims.len();
        if r == 0 || r > MAX_SPLIT_RANK || numel < 2 * parallel::MIN_PER_PART || self.dims[0] < 2 {
            return Split::Serial;
        }
        let row = numel / self.dims[0];
        if self.out_strides[0] != 0 {
            return Split::Rows { row };
        }
        let rows_per_block = (BLOCK_ELEMENTS / row).max(1);
        let blocks = self.dims[0].div_ceil(rows_per_block);
        if blocks < 2 || blocks * self.out_numel > numel / 4 {
            return Split::Serial;
        }
        Split::Blocks {
            row,
            rows_per_block,
            blocks,
        }
    }

    /// Folds `x` into `acc` (the accumulators, then the partial rows),
    /// split across threads as [`split`](Self::split) says.
    fn fold_split<S: Copy + Sync>(
        &self,
        x: &[S],
        to: impl Fn(S) -> f64 + Sync,
        acc: &mut [f64],
        idx: &mut [usize],
    ) {
        let op = self.op;
        let out = self.out_numel;
        let numel: usize = self.dims.iter().product();
        let with_dims = |rows: usize| {
            let mut d = [0; MAX_SPLIT_RANK];
            d[..self.dims.len()].copy_from_slice(&self.dims);
            d[0] = rows;
            d
        };
        let r = self.dims.len();
        match self.split() {
            Split::Serial => self.fold(&self.dims, x, to, &mut acc[..out], idx),
            Split::Rows { row } => {
                let rows = self.dims[0];
                let parts = parallel::parts_for(numel).min(rows);
                let bound = |p: usize| rows * p / parts;
                let per_row = self.out_strides[0];
                parallel::for_each_chunk_mut(
                    &mut acc[..out],
                    parts,
                    &|p| bound(p) * per_row,
                    &|p, acc| {
                        let (lo, hi) = (bound(p), bound(p + 1));
                        let mut idx = [0; MAX_SPLIT_RANK];
                        self.fold(
                            &with_dims(hi - lo)[..r],
                            &x[lo * row..hi * row],
                            &to,
                            acc,
                            &mut idx,
                        );
                    },
                );
            }
            Split::Blocks {
                row,
                rows_per_block,
                blocks,
            } => {
                let (acc, partials) = acc[..out * (1 + blocks)].split_at_mut(out);
                partials.fill(f64::identity(op));
                let parts = parallel::parts_for(numel).min(blocks);
                let first = |p: usize| blocks * p / parts;
                parallel::for_each_chunk_mut(partials, parts, &|p| first(p) * out, &|p, rows| {
                    let mut idx = [0; MAX_SPLIT_RANK];
                    for (b, partial) in (first(p)..first(p + 1)).zip(rows.chunks_exact_mut(out)) {
                        let lo = b * rows_per_block;
                        let hi = (lo + rows_per_block).min(self.dims[0]);
                        let dims = with_dims(hi - lo);
                        self.fold(&dims[..r], &x[lo * row..hi * row], &to, partial, &mut idx);
                    }
                });
                for partial in partials.chunks_exact(out) {
                    for (a, &v) in acc.iter_mut().zip(partial) {
                        *a = f64::combine(op, *a, v);
                    }
                }
            }
        }
    }

    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage, acc: &mut [f64], idx: &mut [usize]) {
        let x = env.get(self.x);
        if let (Storage::I64(x), Storage::I64(o)) = (x, &mut *out) {
            o.fill(i64::identity(self.op));
            self.fold(&self.dims, x, |v| v, o, idx);
            return;
        }
        acc[..self.out_numel].fill(f64::identity(self.op));
        match x {
            Storage::F32(v) => self.fold_split(v, |v| v as f64, acc, idx),
            Storage::F64(v) => self.fold_split(v, |v| v, acc, idx),
            Storage::F16(v) => self.fold_split(v, |v| v.to_f64(), acc, idx),
            Storage::BF16(v) => self.fold_split(v, |v| v.to_f64(), acc, idx),
            Storage::I64(v) => self.fold_split(v, |v| v as f64, acc, idx),
            Storage::Bool(v) => self.fold_split(v, |v| v as u8 as f64, acc, idx),
            Storage::C32(_) | Storage::C64(_) => {
                unreachable!("complex values run through kernel steps")
            }
        }
        let acc = &mut acc[..self.out_numel];
        if let ReduceOp::Mean = self.op {
            let c = self.count as f64;
            acc.iter_mut().for_each(|a| *a /= c);
        }
        write_f64(acc, out, 0);
    }
}

/// Largest rank a reduction is split across threads at (its index
/// scratch lives on each part's stack).
const MAX_SPLIT_RANK: usize = 8;

/// Inputs per block of a reduction over its first axis (see
/// [`ReduceStep::split`]).
const BLOCK_ELEMENTS: usize = parallel::MIN_PER_PART;

/// How a reduction is cut into parts.
#[derive(Clone, Copy, Debug)]
enum Split {
    Serial,
    /// Whole rows of the first (kept) axis per part; `row` inputs each.
    Rows {
        row: usize,
    },
    /// Fixed blocks of `rows_per_block` rows of the first (reduced) axis.
    Blocks {
        row: usize,
        rows_per_block: usize,
        blocks: usize,
    },
}

/// Writes `f64` values into `out` from element `off` on, converting to its
/// dtype. An empty `out` (a target given room without zeros, see the
/// planner's `fills`) is extended by the values instead (`off` is then 0).
pub(crate) fn write_f64(src: &[f64], out: &mut Storage, off: usize) {
    fn put<T: Element>(src: &[f64], dst: &mut Vec<T>, off: usize) {
        if dst.is_empty() && off == 0 {
            dst.extend(src.iter().map(|&v| T::from_f64(v)));
            return;
        }
        for (o, &v) in dst[off..off + src.len()].iter_mut().zip(src) {
            *o = T::from_f64(v);
        }
    }
    match out {
        Storage::F32(v) => put(src, v, off),
        Storage::F64(v) => put(src, v, off),
        Storage::F16(v) => put(src, v, off),
        Storage::BF16(v) => put(src, v, off),
        Storage::I64(v) => put(src, v, off),
        Storage::Bool(v) => put(src, v, off),
        Storage::C32(_) | Storage::C64(_) => {
            unreachable!("complex values run through kernel steps")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept contiguous innermost axis (its fast path) folds each
    /// accumulator in the order of the plain element loop: the same bits.
    #[test]
    fn a_kept_contiguous_row_folds_as_the_element_loop() {
        let (rows, cols) = (5, 37);
        let x: Vec<f64> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
            .collect();
        for op in [
            ReduceOp::Sum,
            ReduceOp::Mean,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
        ] {
            let step = ReduceStep {
                x: 0,
                op,
                dims: vec![rows, cols],
                out_strides: vec![0, 1],
                out_numel: cols,
                count: rows,
            };
            let mut acc = vec![f64::identity(op); cols];
            step.fold(&step.dims, &x, |v| v, &mut acc, &mut [0; 2]);
            let mut want = vec![f64::identity(op); cols];
            for r in 0..rows {
                for (j, w) in want.iter_mut().enumerate() {
                    *w = f64::combine(op, *w, x[r * cols + j]);
                }
            }
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&acc), bits(&want), "{op:?}");
        }
    }
}
