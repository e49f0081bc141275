//! The plan step of a root node: its residual and Jacobian graphs compiled
//! once into [`Executable`]s when the plan is built, then run by Newton's
//! method ([`crate::kernels::root`]) with one warm per-call state each,
//! taken for the whole solve.

use std::sync::Arc;

use rlx_core::{Result, RootRef};

use crate::compile::base::env::{Env, Val};
use crate::compile::driver::compile_with;
use crate::compile::executable::Executable;
use crate::compile::options::Options;
use crate::compile::steps::looping::Warm;
use crate::kernels::root::run_root;
use crate::storage::Storage;

/// A root node in a plan.
#[derive(Clone, Debug)]
pub(crate) struct RootStep {
    r: RootRef,
    residual: Arc<Executable>,
    jacobian: Arc<Executable>,
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
        Ok(Compiled {
            residual: Arc::new(compile_with(&r.residual, &options)?),
            jacobian: Arc::new(compile_with(&r.jacobian, &options)?),
        })
    }
}

impl RootStep {
    /// The step of root `r` over `args`, with its graphs `compiled`.
    pub(crate) fn new(r: RootRef, args: Vec<Val>, compiled: Compiled) -> RootStep {
        let Compiled { residual, jacobian } = compiled;
        RootStep {
            r,
            residual,
            jacobian,
            args,
        }
    }

    /// Solves on the values of `env` into `out`.
    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage) -> Result<()> {
        let operands: Vec<&Storage> = self.args.iter().map(|&v| env.get(v)).collect();
        let mut residual = Warm::new(&self.residual)?;
        let mut jacobian = Warm::new(&self.jacobian)?;
        let res = run_root(&self.r, &mut residual, &mut jacobian, &operands, out);
        residual.finish();
        jacobian.finish();
        res
    }
}
