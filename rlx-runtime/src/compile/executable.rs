//! The graph compiler: [`compile`] turns a [`Graph`] into an [`Executable`].
//!
//! Compilation is split from running (tract's `SimplePlan`/`SimpleState`):
//! the immutable plan (schedule, buffer slots, last uses, fused
//! instruction lists) is built once; each call borrows a mutable state that
//! owns the buffers. The executable keeps a small pool of warm states, so
//! concurrent calls each get their own and a warm call allocates nothing.
//!
//! Modules, bottom to top; each imports only modules of the lines above
//! its own:
//! - shared types, importing nothing of `compile`: `env` (value numbers,
//!   their locations, the per-call `Env` a step reads through),
//!   `regs` (the register banks of fused loops), `scalar_code` (the
//!   instruction set of scalar regions), `math` (the block loops, over the
//!   one definition of each op, [`crate::kernels::scalar`]), `options`
//!   ([`Options`]), `flat` ([`Flat`], the results of a scalarised plan as
//!   a companion takes them);
//! - steps: `chain` (register-resident runs of cheap float ops), `fused`
//!   (block-wise fused loops), `jit` (feature `jit`, on by default: scalar
//!   regions to native code with Cranelift, bit-identical to the
//!   interpreter), `scalar` (0-d scalar regions), `matmul`, `reduce`,
//!   `solve`, `movement`, `scatter` (scatter-adds with constant indices,
//!   checked once); the remaining ops (gather, other scatter-adds,
//!   softmax, log-softmax) call the reference kernels,
//!   [`crate::kernels::eval_into`];
//! - `chain_form`: forms the chains of a fused loop; `plan`: the immutable
//!   plan, a schedule of steps;
//! - `planner`: grouping of element-wise chains, step selection, buffer
//!   planning by liveness; `exec`: the per-call state and the step loop;
//! - `looping`: the step of a loop node, which holds its body compiled
//!   into an [`Executable`] of this module (a plan inside a plan: nesting
//!   makes this and `small`, below, the imports that point up) and runs it
//!   once per step; `root`: the step of a root node, its residual and
//!   Jacobian compiled the same way and run by Newton's method;
//! - `small`: a graph of small values lowered to one scalar program over
//!   its elements (built on `planner`), with `small_io` reading its
//!   arguments and writing its results as flat `f64` elements and
//!   `small_call` the warm call of a pinned signature; `small_region`: the step running
//!   one inside a general plan (a region of small values of a mixed
//!   graph, found by `planner`); `items`: the program of one item of a
//!   batched graph whose items are independent, run over the items;
//! - this module: [`compile`], [`Executable`]; `run`: its ways of
//!   running (the input checks, the state pool, the scalar-program paths).
//!
//! Invariants: a plan is only built from a graph that passes
//! [`Graph::verify`], so shapes and dtypes seen by the steps are the
//! inferred ones; inputs and outputs are checked against the declared types
//! before every run, so the executor does not panic on any accepted input.

mod absorb;
mod chain;
mod chain_form;
mod env;
mod epilogue;
mod exec;
mod flat;
mod fold;
mod fused;
mod fused_io;
mod interleave;
mod items;
#[cfg(feature = "jit")]
mod jit;
mod looping;
#[macro_use]
mod math;
mod matmul;
mod movement;
mod options;
mod panel;
mod panel_avx2;
#[cfg(feature = "avx512")]
mod panel_avx512;
mod parallel;
mod plan;
mod planner;
mod reduce;
mod regs;
mod root;
mod row_sums;
mod run;
mod scalar;
mod scalar_code;
mod scatter;
mod small;
mod small_call;
mod small_io;
mod small_region;
mod solve;

use std::sync::{Arc, Mutex};

use rlx_core::{Graph, NodeId, Result, Source, TensorType};

use crate::value::Arg;
pub use flat::{flat_build, flat_locate, Flat, Located, Take};
pub use items::compile_items;
pub(crate) use items::{compile_items_owned, Batched, PAYS_FROM};
pub use options::Options;
pub use parallel::{num_threads, set_num_threads};
pub use plan::PlanStats;
pub(crate) use small_call::SmallCall;
pub use small_call::SmallRun;

/// Warm states kept per executable (more concurrent calls still work; their
/// extra states are dropped afterwards).
const POOL: usize = 4;

/// A compiled graph, ready to run many times (from many threads).
///
/// ```
/// use rlx_runtime::{compile, DType, Graph, Tensor};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let y = g.sin(x).unwrap();
/// let two = g.scalar(2.0, DType::F64);
/// let z = g.mul(y, two).unwrap();
/// g.set_outputs(vec![z]);
/// let exe = compile(&g).unwrap();
/// let out = exe.run(&[&Tensor::from_slice(&[0.0, 1.0, 2.0], [3])]).unwrap();
/// assert_eq!(out[0].to_vec::<f64>().unwrap()[1], 2.0 * 1f64.sin());
/// ```
#[derive(Debug)]
pub struct Executable {
    plan: plan::Plan,
    /// Warm states. Boxed so that taking one out and putting it back moves
    /// a pointer, not the ~340-byte state (that copy showed up in profiles
    /// of small scalar graphs).
    #[allow(clippy::vec_box)]
    pool: Mutex<Vec<Box<exec::State>>>,
    /// The scalarised plan, when every value is small (`compile::small`):
    /// calls run it instead of `plan`, which is kept for its types.
    small: Option<Box<small::Small>>,
    /// The item plan, when the graph is one item's graph run over a
    /// batch (`compile::items`): calls run it instead of `plan`, which is
    /// kept for the batched types.
    items: Option<Box<items::Items>>,
    /// The graph given to [`compile`], for the check of non-finite
    /// results ([`crate::set_debug_nans`]; `None` for the executables a
    /// plan builds for itself).
    source: Option<Arc<Graph>>,
    /// Where each node of the graph given to [`compile`] was traced (by
    /// node index; empty for a graph without source lines): a run-time
    /// error of a node gets its line ([`Executable::with_line`]).
    lines: Arc<[Option<Source>]>,
    /// The native code of a plan that is one scalar program reading its
    /// inputs and writing its `F64` outputs in order, in one function
    /// (see [`Executable::run_direct`]).
    #[cfg(feature = "jit")]
    direct: Option<Arc<jit::Native>>,
}

/// How many numbers [`on_copy`] copies to the stack.
const STACK_NUMBERS: usize = 64;

/// `f` run on a copy of `values`, on the stack when they are at most
/// [`STACK_NUMBERS`] (as many as the number path takes).
///
/// For numbers a caller holds in a local array, such as a companion's
/// arguments: once a reference to that array reaches code the compiler
/// cannot see (native code, a function not inlined) on any path, it keeps
/// the array in memory on every path, and reads it back after each atomic
/// load, even where only its elements are used (the direct call that takes
/// them in registers). Those paths go through a copy instead.
#[inline(always)]
pub(crate) fn on_copy<R>(values: &[f64], f: impl FnOnce(&[f64]) -> R) -> R {
    let n = values.len();
    if n > STACK_NUMBERS {
        // A heap copy, for the same reason (not `values` itself).
        let copy: Vec<f64> = values.to_vec();
        return f(&copy);
    }
    let mut stack = [std::mem::MaybeUninit::<f64>::uninit(); STACK_NUMBERS];
    // SAFETY: `n <= STACK_NUMBERS`: the first `n` slots of `stack` are
    // written from `values` (which cannot overlap a new local), then read
    // as `n` initialised `f64`s.
    let copy = unsafe {
        std::ptr::copy_nonoverlapping(values.as_ptr(), stack.as_mut_ptr().cast::<f64>(), n);
        std::slice::from_raw_parts(stack.as_ptr().cast::<f64>(), n)
    };
    f(copy)
}

/// [`Executable::run_direct`] without the executable: its native function
/// over a few numbers, with the checks of every call made once (see
/// [`Executable::direct_call`]; the number path keeps one per pinned
/// plan).
#[derive(Clone)]
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) struct DirectCall {
    #[cfg(feature = "jit")]
    whole: jit::Whole,
}

#[cfg_attr(not(feature = "jit"), allow(dead_code))]
impl DirectCall {
    /// [`Executable::run_direct`]: the same code, the same results.
    #[cfg(feature = "jit")]
    #[inline]
    pub(crate) fn call(&self, ins: &[f64], out: &mut [f64]) -> bool {
        self.whole.call(ins, out)
    }

    /// Without native code there is no direct call (never constructed).
    #[cfg(not(feature = "jit"))]
    #[inline]
    pub(crate) fn call(&self, ins: &[f64], out: &mut [f64]) -> bool {
        let _ = (ins, out);
        false
    }

    /// [`DirectCall::call`] on numbers the caller holds in a local array
    /// (a companion's arguments; see [`on_copy`]).
    #[cfg(feature = "jit")]
    #[inline]
    pub(crate) fn call_local(&self, ins: &[f64], out: &mut [f64]) -> bool {
        self.whole.call_local(ins, out)
    }

    /// Without native code there is no direct call (never constructed).
    #[cfg(not(feature = "jit"))]
    #[inline]
    pub(crate) fn call_local(&self, ins: &[f64], out: &mut [f64]) -> bool {
        let _ = (ins, out);
        false
    }

    /// `native` as a direct call, if it is one function with no spill
    /// buffer.
    #[cfg(feature = "jit")]
    pub(crate) fn whole_of(native: &Arc<jit::Native>) -> Option<DirectCall> {
        jit::Whole::of(native).map(|whole| DirectCall { whole })
    }

    /// Whether [`DirectCall::call`] runs on `ins` inputs and `outs`
    /// outputs.
    pub(crate) fn takes(&self, ins: usize, outs: usize) -> bool {
        #[cfg(feature = "jit")]
        return self.whole.takes(ins, outs);
        #[cfg(not(feature = "jit"))]
        {
            let _ = (ins, outs);
            false
        }
    }
}

/// Compiles `g`: inlines custom ops, optimises, plans the schedule and buffers.
///
/// Errors if the graph violates its invariants ([`Graph::verify`]).
pub fn compile(g: &Graph) -> Result<Executable> {
    compile_with(g, &Options::default())
}

/// [`compile`] with explicit [`Options`].
pub fn compile_with(g: &Graph, options: &Options) -> Result<Executable> {
    let mut exe = compile_owned(g, options)?;
    exe.source = Some(Arc::new(g.clone()));
    Ok(exe)
}

/// [`compile_with`] keeping no copy of `g`: for callers that run the
/// executable only through the crate's own entry points and check
/// non-finite results themselves (the plan caches of `function`, which
/// keep the graph).
pub(crate) fn compile_owned(g: &Graph, options: &Options) -> Result<Executable> {
    let mut exe = compile_plan(g, options)?;
    if (0..g.len()).any(|i| g.source(NodeId(i as u32)).is_some()) {
        exe.lines = (0..g.len()).map(|i| g.source(NodeId(i as u32))).collect();
    }
    Ok(exe)
}

/// [`compile_owned`] without the source lines.
fn compile_plan(g: &Graph, options: &Options) -> Result<Executable> {
    let (g, origins) = prepare(g)?;
    // A graph of small values runs as one scalar program over its elements
    // (`small`); the general plan is then never built. A graph whose values
    // are all 0-d is already one scalar program in the general plan.
    if options.scalarize && !all_scalar(&g) && !planner::has_complex(&g) {
        if let Some(small) = small::Small::build(&g, options) {
            let mut exe = Executable::from_plan(plan::Plan::types_only(&g))?;
            exe.small = Some(Box::new(small));
            return Ok(exe);
        }
    }
    // `prepare` verified `g` (or built it with checked pushes).
    let plan = planner::build_verified(&g, &origins, options)?;
    Executable::from_plan(plan)
}

/// Whether every live value of `g` is 0-d.
fn all_scalar(g: &Graph) -> bool {
    let live = g.live_nodes();
    g.nodes()
        .iter()
        .zip(live)
        .all(|(n, l)| !l || n.shape.rank() == 0)
}

/// The graph-level passes run before planning, and the origin of each node
/// of the result in `g` (so that run-time errors name the caller's nodes).
fn prepare(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    let (g, inlined) = g.inline_custom_with_origins()?;
    let (g, optimized) = optimize(g)?;
    let origins: Vec<NodeId> = optimized.iter().map(|k| inlined[k.index()]).collect();
    // A loop's value and its reverse sweep share one forward pass.
    match rlx_core::loops::spine::fuse_spines(&g)? {
        Some((fused, from)) => Ok((fused, from.iter().map(|k| origins[k.index()]).collect())),
        None => Ok((g, origins)),
    }
}

/// The optimisation pipeline: `stop_gradient` only matters to autodiff, then
/// the fixed-point pipeline of `rlx_core::passes` (CSE, constant folding,
/// algebraic simplification, DCE). Returns origins as `prepare` does.
fn optimize(g: Graph) -> Result<(Graph, Vec<NodeId>)> {
    // A graph with no `stop_gradient` (every element graph of a scalarised
    // plan) goes straight to the pipeline: stripping would copy it whole.
    if !g
        .nodes()
        .iter()
        .any(|n| matches!(n.op, rlx_core::Op::StopGradient))
    {
        return rlx_core::passes::optimize_with_origins(&g);
    }
    let (g, stripped) = rlx_core::passes::strip_stop_gradient_with_origins(&g)?;
    let (g, optimized) = rlx_core::passes::optimize_with_origins(&g)?;
    Ok((g, optimized.iter().map(|k| stripped[k.index()]).collect()))
}

impl Executable {
    fn from_plan(plan: plan::Plan) -> Result<Executable> {
        let first = Box::new(exec::State::new(&plan)?);
        let mut pool = Vec::with_capacity(POOL);
        pool.push(first);
        #[cfg(feature = "jit")]
        let direct = match (&plan.scalar_program, plan.steps.first().map(|s| &s.kind)) {
            (Some(prog), Some(plan::StepKind::Scalar(region)))
                if prog.loads_are_inputs && prog.stores_are_outputs =>
            {
                region.native.clone()
            }
            _ => None,
        };
        Ok(Executable {
            plan,
            pool: Mutex::new(pool),
            small: None,
            items: None,
            source: None,
            lines: Arc::from([]),
            #[cfg(feature = "jit")]
            direct,
        })
    }

    /// Runs a plan that is one scalar program compiled to one native
    /// function reading its inputs and writing its `F64` outputs in order
    /// (a function of a few `f64`s): `ins` one number per input, `out` one
    /// per output. Returns `false`, running nothing, for any other plan or
    /// other lengths; the caller then takes [`Executable::run_scalar_into`].
    /// The results are those of `run_scalar_into`, bit for bit (the same
    /// code runs).
    #[inline]
    pub(crate) fn run_direct(&self, ins: &[f64], out: &mut [f64]) -> bool {
        #[cfg(feature = "jit")]
        if let Some(n) = &self.direct {
            return n.call_whole(ins, out);
        }
        let _ = (ins, out);
        false
    }

    /// The native code [`Executable::run_direct`] calls, as a handle that
    /// outlives the borrow of the executable; `None` when `run_direct`
    /// serves no call.
    pub(crate) fn direct_call(&self) -> Option<DirectCall> {
        #[cfg(feature = "jit")]
        if let Some(whole) = self.direct.as_ref().and_then(jit::Whole::of) {
            return Some(DirectCall { whole });
        }
        None
    }

    /// Runs a scalarised plan (see [`Options::scalarize`]) on `head` then
    /// `tail`, whose types and concreteness the caller has checked,
    /// outside any trace, and returns what `build` makes of the outputs
    /// after the first `skip` ([`Flat`]): the warm call of a companion over
    /// small tensors ([`crate::function::Function::run_small`]). `None`
    /// for a plan that is not scalarised, or when `build` declines.
    #[inline]
    pub(crate) fn run_small<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        skip: usize,
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        let types = &self.plan.output_types;
        self.small
            .as_deref()?
            .run_built(head, tail, types, skip, 0, build)
    }

    /// The native code [`Executable::run_small`] runs for a scalarised
    /// plan, as a handle that outlives the borrow of the executable, with
    /// the same results; `None` for other plans, or when that code is not
    /// one native function.
    pub(crate) fn small_call(&self) -> Option<SmallCall> {
        self.small.as_deref()?.call_handle(&self.plan.output_types)
    }

    /// Declared input types, in order.
    pub fn input_types(&self) -> &[TensorType] {
        &self.plan.input_types
    }

    /// Declared input names, in order.
    pub fn input_names(&self) -> &[String] {
        &self.plan.input_names
    }

    /// Output types, in order.
    pub fn output_types(&self) -> &[TensorType] {
        &self.plan.output_types
    }

    /// Counts describing the compiled plan (steps, fused loops, buffers).
    ///
    /// A scalarised plan (every value small, see [`Options::scalarize`])
    /// reports the counts of its element program, with
    /// [`PlanStats::scalarized_nodes`] the graph nodes lowered to it.
    /// A plan mixing small and large values reports its scalar regions of
    /// small values and their boundary: [`PlanStats::small_regions`],
    /// [`PlanStats::small_region_nodes`], and the values crossing into
    /// and out of them, [`PlanStats::small_region_inputs`] and
    /// [`PlanStats::small_region_outputs`].
    ///
    /// ```
    /// use rlx_runtime::{compile, DType, Graph};
    /// let mut g = Graph::new();
    /// let p = g.input("p", [4], DType::F64);
    /// let big = g.input("big", [1000], DType::F64);
    /// let s = g.sin(p).unwrap();
    /// let s = g.sum_all(s).unwrap(); // small: one region of two ops
    /// let y = g.mul(big, s).unwrap(); // large: a fused loop
    /// g.set_outputs(vec![y]);
    /// let st = compile(&g).unwrap().stats();
    /// assert_eq!((st.small_regions, st.small_region_nodes), (1, 2));
    /// assert_eq!((st.small_region_inputs, st.small_region_outputs), (1, 1));
    /// assert_eq!(st.steps, 2);
    /// ```
    pub fn stats(&self) -> PlanStats {
        match (&self.small, &self.items) {
            (Some(s), _) => s.stats(),
            (_, Some(i)) => i.stats(),
            _ => self.plan.stats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{on_copy, STACK_NUMBERS};

    #[test]
    fn on_copy_passes_the_same_values_at_every_length() {
        for n in [0, 1, 6, STACK_NUMBERS, STACK_NUMBERS + 1, 3 * STACK_NUMBERS] {
            let values: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 3.0).collect();
            let seen = on_copy(&values, |copy| {
                assert_ne!(
                    copy.as_ptr(),
                    values.as_ptr(),
                    "a copy, not the caller's values"
                );
                copy.to_vec()
            });
            assert_eq!(seen, values, "{n} values");
        }
    }
}
