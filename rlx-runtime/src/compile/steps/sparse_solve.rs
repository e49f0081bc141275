//! The plan step of a sparse solve ([`SparseSolveOp`]), and the pools of
//! sparse solvers that it and a sparse root's step share: one pool per
//! pattern (the same `Arc`, process-wide), so faer's symbolic analysis of a
//! pattern is done once and reused by every later iteration, call and
//! step (each concurrent call takes its own solver from the pool, and puts
//! it back).
//!
//! A solver put back keeps its last factors and their values, and a sparse
//! solve takes the one that holds the factors of its matrix when there is
//! one (compared bit for bit): the implicit derivative of a root solves
//! with the factors of Newton's last iteration, at the solution, instead
//! of factoring the same matrix again. Any other matrix is factored.

use std::sync::{Arc, Mutex, Weak};

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

/// The pools alive, by pattern.
type Registry = Vec<(Weak<Pattern>, Weak<SolverPool>)>;

static POOLS: Mutex<Registry> = Mutex::new(Vec::new());

impl SolverPool {
    /// The pool of `pattern` (shared by every step of that `Arc`), made
    /// now if there is none.
    pub(crate) fn of(pattern: &Arc<Pattern>) -> Arc<SolverPool> {
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|(p, s)| p.strong_count() > 0 && s.strong_count() > 0);
        let found = pools.iter().find_map(|(p, s)| {
            (p.as_ptr() == Arc::as_ptr(pattern))
                .then(|| s.upgrade())
                .flatten()
        });
        if let Some(pool) = found {
            return pool;
        }
        let pool = Arc::new(SolverPool {
            pattern: pattern.clone(),
            free: Mutex::new(Vec::new()),
        });
        pools.push((Arc::downgrade(pattern), Arc::downgrade(&pool)));
        pool
    }

    /// Runs `f` with a solver of the pattern (a kept one, or a new one
    /// whose symbolic analysis is done now), then keeps it.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut SparseSolver) -> Result<T>) -> Result<T> {
        self.with_preferring(|_| false, f)
    }

    /// [`SolverPool::with`], taking a kept solver for which `prefer` holds
    /// if there is one.
    pub(crate) fn with_preferring<T>(
        &self,
        prefer: impl Fn(&SparseSolver) -> bool,
        f: impl FnOnce(&mut SparseSolver) -> Result<T>,
    ) -> Result<T> {
        let kept = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            match free.iter().position(prefer) {
                Some(i) => Some(free.swap_remove(i)),
                None => free.pop(),
            }
        };
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
        let solvers = SolverPool::of(&op.pattern.0);
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
        self.solvers.with_preferring(
            |s| s.holds(values.0, 0),
            |s| run_sparse_solve(&self.op, s, values, b, out),
        )
    }
}
