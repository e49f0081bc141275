//! The plan step of a sparse solve ([`SparseSolveOp`]), and the pool of
//! sparse solvers that it and a sparse root's step keep: faer's symbolic
//! analysis of a pattern is done on a step's first call and reused by
//! every later one (each concurrent call takes its own solver from the
//! pool, and puts it back).

use std::sync::{Arc, Mutex};

use rlx_core::sparsity::Pattern;
use rlx_core::{Result, Shape, SparseSolveOp};

use crate::compile::base::env::{Env, Val};
use crate::kernels::sparse_solve::{run_sparse_solve, SparseSolver};
use crate::storage::Storage;

/// Sparse solvers of one pattern, built on demand and kept for reuse.
#[derive(Debug)]
pub(crate) struct SolverPool {
    pattern: Arc<Pattern>,
    free: Mutex<Vec<SparseSolver>>,
}

impl SolverPool {
    /// An empty pool for `pattern`.
    pub(crate) fn new(pattern: Arc<Pattern>) -> SolverPool {
        SolverPool {
            pattern,
            free: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` with a solver of the pattern (a kept one, or a new one
    /// whose symbolic analysis is done now), then keeps it.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut SparseSolver) -> Result<T>) -> Result<T> {
        let kept = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut solver = match kept {
            Some(s) => s,
            None => SparseSolver::new(&self.pattern)?,
        };
        let res = f(&mut solver);
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(solver);
        res
    }
}

/// A sparse solve in a plan.
#[derive(Clone, Debug)]
pub(crate) struct SparseSolveStep {
    pub(crate) op: SparseSolveOp,
    pub(crate) values: (Val, Shape),
    pub(crate) b: (Val, Shape),
    pub(crate) solvers: Arc<SolverPool>,
}

impl SparseSolveStep {
    /// The step of `op` over `values` and `b` (with their shapes).
    pub(crate) fn new(op: SparseSolveOp, values: (Val, Shape), b: (Val, Shape)) -> SparseSolveStep {
        let solvers = Arc::new(SolverPool::new(op.pattern.0.clone()));
        SparseSolveStep {
            op,
            values,
            b,
            solvers,
        }
    }

    /// Solves on the values of `env` into `out`.
    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage) -> Result<()> {
        let values = (env.get(self.values.0), &self.values.1);
        let b = (env.get(self.b.0), &self.b.1);
        self.solvers
            .with(|s| run_sparse_solve(&self.op, s, values, b, out))
    }
}
