//! The kernel of a sparse solve ([`SparseSolveOp`]): faer's sparse LU
//! ([`SparseLu`]) over the op's pattern, one factorisation per matrix and a
//! solve (or a transposed solve, with the same factors) per right-hand side.
//!
//! A [`SparseSolver`] keeps the symbolic analysis, the numeric storage and
//! the values' buffer, so a plan step that keeps one (`compile::steps::
//! sparse_solve`) only refactors on a call.

use std::sync::Arc;

use rlx_core::sparsity::Pattern;
use rlx_core::{Result, Shape, SparseSolveOp};

use crate::sparse::{SparseLu, SparseMatrix};
use crate::storage::Storage;

/// A sparse LU of one pattern with its buffers.
#[derive(Debug)]
pub(crate) struct SparseSolver {
    pub(crate) lu: SparseLu,
    /// The values of the last factorisation (when `factored`).
    pub(crate) matrix: SparseMatrix,
    /// Whether `lu` holds the factors of `matrix`.
    pub(crate) factored: bool,
    rhs: Vec<f64>,
}

impl SparseSolver {
    /// The symbolic analysis of `pattern` (square).
    pub(crate) fn new(pattern: &Arc<Pattern>) -> Result<SparseSolver> {
        Ok(SparseSolver {
            lu: SparseLu::new(pattern)?,
            matrix: SparseMatrix::zeros(pattern.clone()),
            factored: false,
            rhs: vec![0.0; pattern.nrows()],
        })
    }

    /// Whether the solver holds the factors of the matrix whose values are
    /// `src[off..off + nnz]` (bit for bit): a root's solver at its solution,
    /// met again by the sparse solve of the root's derivative.
    pub(crate) fn holds(&self, src: &Storage, off: usize) -> bool {
        let mine = self.matrix.values();
        self.factored
            && match src {
                Storage::F64(v) => v
                    .get(off..off + mine.len())
                    .is_some_and(|v| v.iter().zip(mine).all(|(a, b)| a.to_bits() == b.to_bits())),
                _ => (0..mine.len()).all(|i| src.get_f64(off + i).to_bits() == mine[i].to_bits()),
            }
    }

    /// Factors `matrix` with its values as they are now.
    pub(crate) fn factor(&mut self) -> Result<()> {
        self.factored = false;
        self.lu.factor(&self.matrix)?;
        self.factored = true;
        Ok(())
    }

    /// Factors the matrix whose values are `src[off..off + nnz]`, unless
    /// the solver [`holds`](SparseSolver::holds) its factors already.
    pub(crate) fn factor_from(&mut self, src: &Storage, off: usize) -> Result<()> {
        if self.holds(src, off) {
            return Ok(());
        }
        for (i, v) in self.matrix.values_mut().iter_mut().enumerate() {
            *v = src.get_f64(off + i);
        }
        self.factor()
    }
}

/// Runs sparse solve `op` on `values` (`[.., nnz]`) and `b` (`[.., n]`,
/// `bshape`) into `out` (`b`'s type) with `solver` (of `op`'s pattern).
pub(crate) fn run_sparse_solve(
    op: &SparseSolveOp,
    solver: &mut SparseSolver,
    values: (&Storage, &Shape),
    b: (&Storage, &Shape),
    out_orig: &mut Storage,
) -> Result<()> {
    let (n, nnz) = (op.pattern.nrows(), op.pattern.nnz());
    let items = b.1.numel().checked_div(n).unwrap_or(0);
    let shared = values.1.rank() <= 1;
    let dtype = b.0.dtype();
    let direct =
        matches!(out_orig, Storage::F64(_) | Storage::F32(_)) && out_orig.len() == b.1.numel();
    let mut wide = Storage::F64(Vec::new());
    let out: &mut Storage = if direct {
        &mut *out_orig
    } else {
        wide = Storage::zeros(rlx_core::DType::F64, b.1.numel());
        &mut wide
    };
    for item in 0..items {
        if item == 0 || !shared {
            let off = if shared { 0 } else { item * nnz };
            solver.factor_from(values.0, off)?;
        }
        for (i, r) in solver.rhs.iter_mut().enumerate() {
            *r = b.0.get_f64(item * n + i);
        }
        if op.transpose {
            solver.lu.solve_transpose_in_place(&mut solver.rhs)?;
        } else {
            solver.lu.solve_in_place(&mut solver.rhs)?;
        }
        let dst = item * n..(item + 1) * n;
        match out {
            Storage::F64(v) => v[dst].copy_from_slice(&solver.rhs),
            Storage::F32(v) => v[dst]
                .iter_mut()
                .zip(&solver.rhs)
                .for_each(|(o, &s)| *o = s as f32),
            _ => unreachable!("an f64 or f32 target"),
        }
    }
    if !direct {
        *out_orig = Storage::from_f64(dtype, wide.to_f64_vec());
    }
    Ok(())
}
