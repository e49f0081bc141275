//! The plan step of a loop node: its body (and, for an adjoint, the body's
//! reverse-mode step) compiled once into [`Executable`]s when the plan is
//! built, then run once per step by [`crate::looping`] on storages, with
//! one warm per-call state per body taken for the whole loop (no plan is
//! built and no state is created per step), and the loop's own storages
//! (carries, checkpoint slots, step buffers) kept between calls.

use std::sync::{Arc, Mutex};

use rlx_core::{Graph, LoopKind, LoopOp, LoopRef, Result};

use crate::compile::base::env::{Env, Inputs, Outputs, Val};
use crate::compile::base::parallel;
use crate::compile::driver::compile_with;
use crate::compile::exec;
use crate::compile::executable::Executable;
use crate::compile::options::Options;
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
    /// The step of loop `l` over `args`, with its step graphs `compiled`
    /// (by [`compile_all`]).
    pub(crate) fn new(l: LoopRef, args: Vec<Val>, compiled: Compiled) -> LoopStep {
        let spine = match l.spine {
            0 => vec![],
            _ => rlx_core::loops::schedule::spine(l.length, l.checkpoints),
        };
        let Compiled { body, vjp, finish } = compiled;
        LoopStep {
            l,
            body,
            vjp,
            finish,
            spine,
            args,
            buffers: Pool::default(),
        }
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

/// The graphs a loop's plan step runs, in the order of [`Compiled`]'s
/// fields: the first of [`LoopOp::step_graphs`](rlx_core::LoopOp::step_graphs),
/// the second, and for an adjoint with hoisted products their finishing
/// graph (a scan shares its adjoint's split step, but never finishes).
fn step_graphs(l: &LoopOp) -> [Option<&Graph>; 3] {
    let (body, vjp) = l.step_graphs();
    let finish = match l.kind {
        LoopKind::Scan => None,
        LoopKind::Adjoint { .. } => l
            .residuals
            .as_ref()
            .and_then(|r| r.hoisted.as_ref())
            .map(|h| &h.finish),
    };
    [Some(body), vjp, finish]
}

/// A loop's step graphs, compiled.
pub(crate) struct Compiled {
    body: Arc<Executable>,
    vjp: Option<Arc<Executable>>,
    finish: Option<Arc<Executable>>,
}

impl Compiled {
    /// The executables of [`step_graphs`] (`None` where a loop has no
    /// such graph), or the first error among them.
    fn from_parts(parts: [Option<Result<Executable>>; 3]) -> Result<Compiled> {
        let [body, vjp, finish] = parts.map(|e| e.transpose().map(|e| e.map(Arc::new)));
        Ok(Compiled {
            body: body?.expect("every loop has a body graph (`step_graphs`)"),
            vjp: vjp?,
            finish: finish?,
        })
    }
}

/// The step graphs of every loop of `loops` compiled (each loop's
/// executables, or the first error among them), with the graphs shared
/// among the pool's threads ([`parallel::run`]): a gradient's forward scan
/// and reverse sweep compile at once (their bodies are most of the compile
/// time of an LSTM's gradient). One thread compiles them in order.
///
/// Bodies are not scalarised: the steps run the bodies' general plans on
/// storages (`Warm`), which a scalarised executable does not have, and
/// generating the native element program of a small body (64 pendula)
/// cost ~50 ms at every first call (the loop's target is 10 ms), while its
/// plan runs a step about as fast.
pub(crate) fn compile_all(loops: &[&LoopOp], options: &Options) -> Vec<Result<Compiled>> {
    let options = Options {
        scalarize: false,
        ..options.clone()
    };
    let jobs: Vec<(usize, usize, &Graph)> = loops
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            step_graphs(l)
                .into_iter()
                .enumerate()
                .filter_map(move |(k, g)| g.map(|g| (i, k, g)))
        })
        .collect();
    // Largest first, so that the last graph taken is a small one.
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&j| std::cmp::Reverse(jobs[j].2.len()));
    let done: Vec<Mutex<Option<Result<Executable>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let parts = parallel::num_threads().min(jobs.len()).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    parallel::run(parts, &|_| loop {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(&j) = order.get(n) else { break };
        let exe = compile_with(jobs[j].2, &options);
        *done[j].lock().unwrap_or_else(|e| e.into_inner()) = Some(exe);
    });
    let mut by_loop: Vec<[Option<Result<Executable>>; 3]> =
        loops.iter().map(|_| [None, None, None]).collect();
    for ((i, k, _), d) in jobs.iter().zip(done) {
        by_loop[*i][*k] = d.into_inner().unwrap_or_else(|e| e.into_inner());
    }
    by_loop.into_iter().map(Compiled::from_parts).collect()
}

/// An executable with one of its states taken for many runs (also the
/// runner of a root step's graphs, `compile::root`).
pub(super) struct Warm<'a> {
    exe: &'a Executable,
    state: Option<Box<exec::State>>,
}

impl<'a> Warm<'a> {
    pub(super) fn new(exe: &'a Executable) -> Result<Warm<'a>> {
        Ok(Warm {
            exe,
            state: Some(exe.take_state()?),
        })
    }

    pub(super) fn finish(mut self) {
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
        .map_err(|e| self.exe.with_line(e))
    }
}
