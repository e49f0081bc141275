//! The plan step of a root node: its residual and Jacobian graphs compiled
//! once into [`Executable`]s when the plan is built, then run by Newton's
//! method ([`crate::kernels::root`]) with one warm per-call state each,
//! taken for the whole solve. A sparse Jacobian's solver (faer's symbolic
//! analysis of the pattern, the numeric storage) is kept in the pattern's
//! pool (`compile::steps::sparse_solve`), so it is built on the first call
//! and reused by every later iteration and call; put back holding the
//! factors at the solution, it serves the sparse solve of the root's
//! implicit derivative without a second factorisation.

use std::sync::Arc;

use rlx_core::solvers::RootJacobian;
use rlx_core::{Result, RootRef};

use crate::compile::base::env::{Env, Val};
use crate::compile::driver::compile_with;
use crate::compile::executable::Executable;
use crate::compile::options::Options;
use crate::compile::steps::looping::Warm;
use crate::compile::steps::sparse_solve::SolverPool;
use crate::kernels::root::{run_root, Linear};
use crate::storage::Storage;

/// A root node in a plan.
#[derive(Clone, Debug)]
pub(crate) struct RootStep {
    r: RootRef,
    residual: Arc<Executable>,
    jacobian: Arc<Executable>,
    /// The sparse solvers of the Jacobian's pattern (none for a dense one).
    solvers: Option<Arc<SolverPool>>,
    /// The operands `[x0, p..]`, in order.
    pub(crate) args: Vec<Val>,
}

/// A root's residual and Jacobian graphs, compiled.
pub(crate) struct Compiled {
    residual: Arc<Executable>,
    jacobian: Arc<Executable>,
}

impl Compiled {
    /// Compiles the graphs of `r` (not scalarised: the solver runs them on
    /// storages, which a scalarised executable does not have).
    pub(crate) fn new(r: &RootRef, options: &Options) -> Result<Compiled> {
        let options = Options {
            scalarize: false,
            ..options.clone()
        };
        let jacobian = match &r.jacobian {
            RootJacobian::Dense(j) => j,
            RootJacobian::Sparse { values, .. } => values,
        };
        Ok(Compiled {
            residual: Arc::new(compile_with(&r.residual, &options)?),
            jacobian: Arc::new(compile_with(jacobian, &options)?),
        })
    }
}

impl RootStep {
    /// The step of root `r` over `args`, with its graphs `compiled`.
    pub(crate) fn new(r: RootRef, args: Vec<Val>, compiled: Compiled) -> RootStep {
        let Compiled { residual, jacobian } = compiled;
        let solvers = match &r.jacobian {
            RootJacobian::Dense(_) => None,
            RootJacobian::Sparse { pattern, .. } => Some(SolverPool::of(&pattern.0)),
        };
        RootStep {
            r,
            residual,
            jacobian,
            solvers,
            args,
        }
    }

    /// Solves on the values of `env` into `out`.
    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage) -> Result<()> {
        let operands: Vec<&Storage> = self.args.iter().map(|&v| env.get(v)).collect();
        let mut residual = Warm::new(&self.residual)?;
        let mut jacobian = Warm::new(&self.jacobian)?;
        let res = match &self.solvers {
            None => run_root(
                &self.r,
                &mut residual,
                &mut Linear::Dense(&mut jacobian),
                &operands,
                out,
            ),
            Some(pool) => pool.with(|solver| {
                run_root(
                    &self.r,
                    &mut residual,
                    &mut Linear::Sparse(&mut jacobian, solver),
                    &operands,
                    out,
                )
            }),
        };
        residual.finish();
        jacobian.finish();
        res
    }
}
