//! The plan step of a loop node: its body (and, for an adjoint, the body's
//! reverse-mode step) compiled once into [`Executable`]s when the plan is
//! built, then run once per step by [`crate::looping`] on storages, with
//! one warm per-call state per body taken for the whole loop (no plan is
//! built and no state is created per step), and the loop's own storages
//! (carries, checkpoint slots, step buffers) kept between calls.

use std::sync::{Arc, Mutex};

use rlx_core::{LoopRef, Result};

use super::env::{Env, Inputs, Outputs, Val};
use super::exec;
use super::{compile_with, Executable, Options};
use crate::kernels::looping::{run_loop, LoopBuffers, RunGraph};
use crate::storage::Storage;

/// A loop node in a plan.
#[derive(Clone, Debug)]
pub(crate) struct LoopStep {
    pub(crate) l: LoopRef,
    /// The first of [`LoopOp::step_graphs`](rlx_core::LoopOp::step_graphs), compiled; `vjp` the second.
    body: Arc<Executable>,
    vjp: Option<Arc<Executable>>,
    /// The finishing graph of hoisted products (see
    /// [`hoist`](rlx_core::loops::hoist)), compiled.
    finish: Option<Arc<Executable>>,
    /// `schedule::spine(T, checkpoints)` for a loop with a spine, else empty.
    spine: Vec<usize>,
    /// The operands, in order.
    pub(crate) args: Vec<Val>,
    /// Storages of earlier calls, for the next ones.
    buffers: Pool,
}

/// Up to [`POOL`] [`LoopBuffers`] of finished calls (one per call running
/// at once); a clone of a plan starts with none.
#[derive(Debug)]
struct Pool(Mutex<Vec<LoopBuffers>>);

/// Calls whose buffers a loop step keeps.
const POOL: usize = 4;

impl Clone for Pool {
    fn clone(&self) -> Pool {
        Pool::default()
    }
}

impl Default for Pool {
    fn default() -> Pool {
        Pool(Mutex::new(Vec::with_capacity(POOL)))
    }
}

impl Pool {
    fn take(&self) -> LoopBuffers {
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        pool.pop().unwrap_or_default()
    }

    fn put(&self, b: LoopBuffers) {
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(b);
        }
    }
}

impl LoopStep {
    /// Compiles the body (and reverse step) of `l`.
    pub(crate) fn new(l: LoopRef, args: Vec<Val>, options: &Options) -> Result<LoopStep> {
        // Bodies are not scalarised: the steps run the bodies' general
        // plans on storages (`Warm`), which a scalarised executable does not
        // have, and generating the native element program of a small body
        // (64 pendula) cost ~50 ms at every first call (the loop's target is
        // 10 ms), while its plan runs a step about as fast.
        let options = Options {
            scalarize: false,
            ..options.clone()
        };
        let (body, vjp) = l.step_graphs();
        let body = Arc::new(compile_with(body, &options)?);
        let vjp = match vjp {
            None => None,
            Some(vjp) => Some(Arc::new(compile_with(vjp, &options)?)),
        };
        let finish = match l.residuals.as_ref().and_then(|r| r.hoisted.as_ref()) {
            None => None,
            Some(h) => Some(Arc::new(compile_with(&h.finish, &options)?)),
        };
        let spine = match l.spine {
            0 => vec![],
            _ => rlx_core::loops::schedule::spine(l.length, l.checkpoints),
        };
        Ok(LoopStep {
            l,
            body,
            vjp,
            finish,
            spine,
            args,
            buffers: Pool::default(),
        })
    }

    /// Runs the loop on the values of `env` into `out`.
    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage) -> Result<()> {
        let operands: Vec<&Storage> = self.args.iter().map(|&v| env.get(v)).collect();
        let mut body = Warm::new(&self.body)?;
        let mut vjp = self.vjp.as_deref().map(Warm::new).transpose()?;
        let mut finish = self.finish.as_deref().map(Warm::new).transpose()?;
        let mut bufs = self.buffers.take();
        let res = run_loop(
            &self.l,
            &mut body,
            vjp.as_mut().map(|v| v as &mut dyn RunGraph),
            finish.as_mut().map(|f| f as &mut dyn RunGraph),
            &self.spine,
            &operands,
            out,
            &mut bufs,
        );
        self.buffers.put(bufs);
        for w in [Some(body), vjp, finish].into_iter().flatten() {
            w.finish();
        }
        res
    }
}

/// An executable with one of its states taken for many runs.
struct Warm<'a> {
    exe: &'a Executable,
    state: Option<Box<exec::State>>,
}

impl<'a> Warm<'a> {
    fn new(exe: &'a Executable) -> Result<Warm<'a>> {
        Ok(Warm {
            exe,
            state: Some(exe.take_state()?),
        })
    }

    fn finish(mut self) {
        if let Some(s) = self.state.take() {
            self.exe.put_state(s);
        }
    }
}

impl RunGraph for Warm<'_> {
    fn run(&mut self, inputs: &[&Storage], outputs: &mut [Storage]) -> Result<()> {
        let state = self.state.as_mut().expect("taken until finish");
        exec::run(
            &self.exe.plan,
            state,
            &Inputs::Storages(inputs),
            &mut Outputs::Storages(outputs),
        )
    }
}
