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
//!   once per step;
//! - `small`: a graph of small values lowered to one scalar program over
//!   its elements (built on `planner`); `small_region`: the step running
//!   one inside a general plan (a region of small values of a mixed
//!   graph, found by `planner`); `items`: the program of one item of a
//!   batched graph whose items are independent, run over the items;
//! - this module: [`compile`], [`Executable`].
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
mod parallel;
mod plan;
mod planner;
mod reduce;
mod regs;
mod scalar;
mod scalar_code;
mod scatter;
mod small;
mod small_call;
mod small_region;
mod solve;

use std::sync::{Arc, Mutex};

use rlx_core::{Error, Graph, NodeId, Result, Shape, TensorType};

use crate::debug_nans::{all_finite, debug_nans, localise};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::{is_number, same_dims, Arg, Value, Values};
pub use flat::Flat;
pub use items::compile_items;
pub(crate) use items::{compile_items_owned, Batched, PAYS_FROM};
pub use options::Options;
pub use parallel::{num_threads, set_num_threads};
pub use plan::PlanStats;
pub(crate) use small_call::SmallCall;

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
    /// The native code of a plan that is one scalar program reading its
    /// inputs and writing its `F64` outputs in order, in one function
    /// (see [`Executable::run_direct`]).
    #[cfg(feature = "jit")]
    direct: Option<Arc<jit::Native>>,
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
    let (g, origins) = prepare(g)?;
    // A graph of small values runs as one scalar program over its elements
    // (`small`); the general plan is then never built. A graph whose values
    // are all 0-d is already one scalar program in the general plan.
    if options.scalarize && !all_scalar(&g) {
        if let Some(small) = small::Small::build(&g, options) {
            let mut exe = Executable::from_plan(plan::Plan::types_only(&g))?;
            exe.small = Some(Box::new(small));
            return Ok(exe);
        }
    }
    let plan = planner::build(&g, &origins, options)?;
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

    /// Runs on `inputs`, returning freshly allocated outputs.
    ///
    /// A data error met while running (a singular matrix, an index out of
    /// range) is an [`Error::AtNode`] naming the node by its id in the graph
    /// given to [`compile`]; [`Error::root`] is the cause. The same holds
    /// for the other ways of running.
    ///
    /// With the check of non-finite values on ([`crate::set_debug_nans`]),
    /// a result holding a NaN or an infinity is an [`Error::NonFinite`]
    /// naming the first node of that graph that produced one, and its
    /// source line when it has one (a graph traced from a
    /// `#[differentiable]` function does).
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let mut outs: Vec<Tensor> = self
            .plan
            .output_types
            .iter()
            .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
            .collect();
        self.run_into(inputs, &mut outs)?;
        Ok(outs)
    }

    /// Runs on `inputs`, writing into `outputs`, which must be concrete
    /// tensors of the output types. A warm call allocates nothing, unless an
    /// output tensor's storage is shared with another tensor (it is then
    /// copied first, so the other tensor keeps its values) or a matrix
    /// product is larger than the small-product threshold (`matrixmultiply`
    /// allocates its packing buffer per call).
    pub fn run_into(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<()> {
        self.check(inputs, outputs)?;
        if let Some(s) = &self.small {
            s.run_tensors(inputs, outputs)?;
        } else if let Some(i) = &self.items {
            i.run_tensors(inputs, outputs)?;
        } else {
            let mut state = self.take_state()?;
            let res = exec::run(
                &self.plan,
                &mut state,
                &env::Inputs::Tensors(inputs),
                &mut env::Outputs::Tensors(outputs),
            );
            self.put_state(state);
            res?;
        }
        if debug_nans() {
            let outs: Vec<Value> = outputs.iter().map(|t| Value::Tensor(t.clone())).collect();
            let args: Vec<Arg<'_>> = inputs.iter().map(|&t| Arg::Tensor(t)).collect();
            self.check_finite(&args, &outs)?;
        }
        Ok(())
    }

    /// With the check of non-finite values on, `Err` naming the node of
    /// the source graph that made the first non-finite value of `outs`
    /// (the results of a run on `args`).
    fn check_finite(&self, args: &[Arg<'_>], outs: &[Value]) -> Result<()> {
        if !debug_nans() || all_finite(outs) {
            return Ok(());
        }
        let Some(g) = &self.source else {
            return Ok(());
        };
        let tensors: Vec<Tensor> = args.iter().map(|a| a.to_tensor()).collect();
        let storages = tensors
            .iter()
            .map(Tensor::storage)
            .collect::<Result<Vec<_>>>()?;
        Err(localise(g, &storages, "a compiled graph"))
    }

    /// Runs on `args`, where a number stands for a 0-d tensor of its type,
    /// and returns 0-d `F32`/`F64` outputs as numbers, the others as new
    /// tensors.
    ///
    /// This is the cheap way to call a graph over a few scalars: a warm call
    /// allocates only the result vector (and the tensor outputs, if any).
    ///
    /// ```
    /// use rlx_runtime::{compile, Arg, DType, Graph, Value};
    /// let mut g = Graph::new();
    /// let x = g.input("x", [], DType::F64);
    /// let y = g.input("y", [], DType::F64);
    /// let p = g.mul(x, y).unwrap();
    /// g.set_outputs(vec![p]);
    /// let exe = compile(&g).unwrap();
    /// let out = exe.run_args(&[Arg::F64(3.0), Arg::F64(0.5)]).unwrap();
    /// assert!(matches!(out[0], Value::F64(v) if v == 1.5));
    /// ```
    pub fn run_args(&self, args: &[Arg<'_>]) -> Result<Vec<Value>> {
        let mut values = Values::new();
        self.run_arg_lists(args, &[], true, 0, &mut values)?;
        self.check_finite(args, &values)?;
        Ok(values.into_vec())
    }

    /// [`Executable::run_args`] with the arguments given as two lists
    /// (`head` then `tail`), so that callers holding them apart need not
    /// join them, pushing the results onto `values` (passed in rather than
    /// returned: the list is a few hundred bytes, copied at every return).
    /// With `check_types` false the caller has already checked the
    /// arguments' count, shapes and dtypes (traced tensors are still
    /// refused). The first `skip` outputs are left out of `values` (a
    /// scalarised plan does not even build them).
    pub(crate) fn run_arg_lists(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        check_types: bool,
        skip: usize,
        values: &mut Values,
    ) -> Result<()> {
        if check_types {
            self.check_args(head, tail)?;
        } else {
            if let Some(i) = head.iter().chain(tail).position(Arg::is_traced) {
                return Err(traced_input(&self.plan.input_names[i]));
            }
        }
        if let Some(s) = &self.small {
            s.run_args(head, tail, &self.plan.output_types, skip, values);
            return Ok(());
        }
        let start = values.len();
        self.push_results(head, tail, values)?;
        let skip = skip.min(values.len() - start);
        values.drain(start..start + skip);
        Ok(())
    }

    /// [`Executable::run_arg_lists`] of a plan that is not scalarised.
    fn push_results(&self, head: &[Arg<'_>], tail: &[Arg<'_>], values: &mut Values) -> Result<()> {
        if self.run_scalar_program(head, tail, values) {
            return Ok(());
        }
        self.run_args_with(head, tail, |outs| {
            for (s, t) in outs.iter_mut().zip(&self.plan.output_types) {
                values.push(match s {
                    Storage::F64(v) if is_number(t) => Value::F64(v[0]),
                    Storage::F32(v) if is_number(t) => Value::F32(v[0]),
                    // Moved out; the next run allocates a fresh buffer.
                    _ => Value::Tensor(Tensor::from_storage(
                        std::mem::replace(s, Storage::zeros(t.dtype, 0)),
                        t.shape.clone(),
                    )?),
                });
            }
            Ok(())
        })
    }

    /// Runs on `head` then `tail` (types already checked by the caller) and
    /// hands the output storages to `read`. Storages left in place are
    /// reused by the next run, so a warm call that only reads them
    /// allocates nothing (the sparse companions' `*_into` forms).
    pub(crate) fn run_args_with<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        read: impl FnOnce(&mut [Storage]) -> Result<R>,
    ) -> Result<R> {
        self.run_args_into_last(head, tail, None, read)
    }

    /// [`Executable::run_args_with`], with the last output written straight
    /// into `last` when given: it is swapped in for the run and back after
    /// it, so a caller's buffer of the output's size is filled without a
    /// copy or an allocation (a sparse derivative's values).
    pub(crate) fn run_args_into_last<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        mut last: Option<&mut Storage>,
        read: impl FnOnce(&mut [Storage]) -> Result<R>,
    ) -> Result<R> {
        let mut state = self.take_state()?;
        let swap = |outs: &mut Vec<Storage>, last: &mut Option<&mut Storage>| {
            if let (Some(o), Some(l)) = (outs.last_mut(), last.as_deref_mut()) {
                std::mem::swap(o, l);
            }
        };
        if self.small.is_some() || self.items.is_some() {
            // Output storages kept in the state: sized by the first run.
            let mut outs = std::mem::take(&mut state.outs);
            for (o, t) in outs.iter_mut().zip(&self.plan.output_types) {
                if o.len() != t.shape.numel() {
                    *o = Storage::zeros(t.dtype, t.shape.numel());
                }
            }
            swap(&mut outs, &mut last);
            let args = head.iter().chain(tail).copied();
            match (&self.small, &self.items) {
                (Some(s), _) => s.run_storages(args, &mut outs),
                (_, Some(i)) => i.run_storages(args, &mut outs),
                _ => {}
            }
            let res = read(&mut outs);
            swap(&mut outs, &mut last);
            state.outs = outs;
            self.put_state(state);
            return res;
        }
        let mut numbers = std::mem::take(&mut state.numbers);
        for (i, a) in head.iter().chain(tail).enumerate() {
            match (a, &mut numbers[i]) {
                (Arg::F64(v), Storage::F64(s)) => s[0] = *v,
                (Arg::F32(v), Storage::F32(s)) => s[0] = *v,
                _ => {}
            }
        }
        let mut outs = std::mem::take(&mut state.outs);
        swap(&mut outs, &mut last);
        let res = exec::run(
            &self.plan,
            &mut state,
            &env::Inputs::Args {
                head,
                tail,
                numbers: &numbers,
            },
            &mut env::Outputs::Storages(&mut outs),
        )
        .and_then(|()| read(&mut outs));
        swap(&mut outs, &mut last);
        state.numbers = numbers;
        state.outs = outs;
        self.put_state(state);
        res
    }

    /// Runs a [`plan::ScalarProgram`], pushing its results onto `values` as
    /// [`Value`]s (`false`, pushing nothing, if the plan is not one; see
    /// [`Executable::run_scalar_into`]). The caller has checked the
    /// arguments' types.
    fn run_scalar_program(&self, head: &[Arg<'_>], tail: &[Arg<'_>], values: &mut Values) -> bool {
        /// Inputs and outputs up to this many are gathered on the stack.
        const SMALL: usize = 16;
        if self.plan.scalar_program.is_none() {
            return false;
        }
        let types = &self.plan.output_types;
        let (n_in, n_out) = (head.len() + tail.len(), types.len());
        let mut run = |ins: &mut [f64], out: &mut [f64]| {
            for (slot, a) in ins.iter_mut().zip(head.iter().chain(tail)) {
                *slot = scalar::arg_f64(a);
            }
            if !self.run_scalar_into(ins, &[], out) {
                return false;
            }
            let value = |(&v, t): (&f64, &TensorType)| match t.dtype {
                rlx_core::DType::F32 => Value::F32(v as f32),
                _ => Value::F64(v),
            };
            values.extend(out.iter().zip(types).map(value));
            true
        };
        if n_in <= SMALL && n_out <= SMALL {
            run(&mut [0.0; SMALL][..n_in], &mut [0.0; SMALL][..n_out])
        } else {
            run(&mut vec![0.0; n_in], &mut vec![0.0; n_out])
        }
    }

    /// Runs a [`plan::ScalarProgram`] on its inputs given as numbers
    /// (`head` then `tail`, each widened to `f64`), writing one number per
    /// output into `out` (an `F32` result is stored widened, so `as f32`
    /// gives it back exactly). Returns `false`, without running anything,
    /// when the plan is not a scalar program, the inputs or `out` do not
    /// have one slot per input or output, or the program's register file
    /// is too large for the stack.
    ///
    /// This is the whole warm call of a small function of a few scalars: no
    /// per-call state, no allocation.
    pub(crate) fn run_scalar_into(&self, head: &[f64], tail: &[f64], out: &mut [f64]) -> bool {
        /// Joined inputs up to this many live on the stack.
        const INPUTS: usize = 64;
        if let Some(s) = &self.small {
            return s.run_numbers(head, tail, out);
        }
        let Some(prog) = self.plan.scalar_program.as_ref() else {
            return false;
        };
        let plan::StepKind::Scalar(region) = &self.plan.steps[0].kind else {
            return false;
        };
        let types = &self.plan.output_types;
        let n_in = head.len() + tail.len();
        if out.len() != types.len() || n_in != self.plan.input_types.len() || n_in > INPUTS {
            return false;
        }
        if tail.is_empty() {
            return self.run_scalar_on(prog, region, head, out);
        }
        let mut joined = [0.0f64; INPUTS];
        joined[..head.len()].copy_from_slice(head);
        joined[head.len()..n_in].copy_from_slice(tail);
        self.run_scalar_on(prog, region, &joined[..n_in], out)
    }

    /// [`Executable::run_scalar_into`] with the inputs in one list.
    #[inline]
    fn run_scalar_on(
        &self,
        prog: &plan::ScalarProgram,
        region: &scalar::ScalarStep,
        inputs: &[f64],
        out: &mut [f64],
    ) -> bool {
        /// Register files up to these sizes live on the stack.
        const TINY: usize = 32;
        const SMALL: usize = 128;
        const LARGE: usize = 1024;
        let types = &self.plan.output_types;
        #[cfg(feature = "jit")]
        if let Some(n) = &region.native {
            if prog.loads_are_inputs && prog.stores_are_outputs {
                n.call(inputs, out);
                return true;
            }
            /// Leaves and results of native code up to this many stay on the stack.
            const NATIVE: usize = 32;
            if n.loads() + n.stores() <= NATIVE {
                let mut buf = [0.0f64; NATIVE];
                let (ins, results) = buf.split_at_mut(n.loads());
                let ins: &[f64] = if prog.loads_are_inputs {
                    inputs
                } else {
                    for (slot, &i) in ins.iter_mut().zip(&prog.input_of_load) {
                        *slot = inputs[i as usize];
                    }
                    ins
                };
                n.call(ins, results);
                for ((o, &t), ty) in out.iter_mut().zip(&prog.target_of_output).zip(types) {
                    *o = scalar::round_to(ty.dtype, results[t as usize]);
                }
                return true;
            }
        }
        let mut io = scalar::NumberIo {
            locs: &self.plan.locs,
            inputs,
            output_of_target: &prog.output_of_target,
            types,
            out,
        };
        let regs = region.scratch_len();
        if regs <= TINY {
            on_stack::<TINY>(region, &mut io);
        } else if regs <= SMALL {
            on_stack::<SMALL>(region, &mut io);
        } else if regs <= LARGE {
            on_stack::<LARGE>(region, &mut io);
        } else {
            return false;
        }
        true
    }

    fn take_state(&self) -> Result<Box<exec::State>> {
        let popped = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.pop()
        };
        match popped {
            Some(state) => Ok(state),
            None => Ok(Box::new(exec::State::new(&self.plan)?)),
        }
    }

    fn put_state(&self, state: Box<exec::State>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(state);
        }
    }

    fn check_args(&self, head: &[Arg<'_>], tail: &[Arg<'_>]) -> Result<()> {
        self.check_inputs(head.len() + tail.len(), head.iter().chain(tail).copied())
    }

    /// Checks `count` inputs (count, concreteness, shape and dtype, in order).
    fn check_inputs<'a>(&self, count: usize, inputs: impl Iterator<Item = Arg<'a>>) -> Result<()> {
        let p = &self.plan;
        if count != p.input_types.len() {
            return Err(Error::CountMismatch {
                what: "inputs".into(),
                expected: p.input_types.len(),
                got: count,
            });
        }
        for ((a, want), name) in inputs.zip(&p.input_types).zip(&p.input_names) {
            if a.is_traced() {
                return Err(traced_input(name));
            }
            if !a.matches(want) {
                return Err(Error::InputMismatch {
                    name: name.clone(),
                    expected_shape: want.shape.clone(),
                    expected_dtype: want.dtype,
                    got_shape: Shape::new(a.dims()),
                    got_dtype: a.dtype(),
                });
            }
        }
        Ok(())
    }

    fn check(&self, inputs: &[&Tensor], outputs: &[Tensor]) -> Result<()> {
        self.check_inputs(inputs.len(), inputs.iter().map(|&t| Arg::Tensor(t)))?;
        let p = &self.plan;
        if outputs.len() != p.output_types.len() {
            return Err(Error::CountMismatch {
                what: "outputs".into(),
                expected: p.output_types.len(),
                got: outputs.len(),
            });
        }
        for (j, (t, want)) in outputs.iter().zip(&p.output_types).enumerate() {
            if t.is_traced()
                || t.dtype() != want.dtype
                || !same_dims(t.shape().dims(), want.shape.dims())
            {
                return Err(Error::InvalidArgument {
                    op: "run_into",
                    message: format!(
                        "output #{j} must be a concrete {}{} tensor, got {}{}{}",
                        want.dtype,
                        want.shape,
                        if t.is_traced() { "a traced " } else { "" },
                        t.dtype(),
                        t.shape()
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cold]
fn traced_input(name: &str) -> Error {
    Error::Unsupported(format!(
        "input `{name}` is a traced tensor; a compiled graph runs on concrete values"
    ))
}

/// Runs `region` on a register file of `N` registers on the stack (a
/// separate function, so that only calls needing a large file pay for its
/// stack frame).
#[inline(never)]
fn on_stack<const N: usize>(region: &scalar::ScalarStep, io: &mut scalar::NumberIo<'_>) {
    region.exec_with_consts(&mut [0.0; N], io);
}
