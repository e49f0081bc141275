//! [`Executable`]: a compiled graph, its warm states, and the accessors
//! its ways of running (`run`) and the companions' fast paths read. The
//! compiled forms it may hold sit in the rooms below: the general plan
//! (`plan`), a scalarised plan (`small`), an item plan (`items`), and the
//! native code of a plan that is one scalar program.

use std::sync::{Arc, Mutex};

use rlx_core::{Graph, Result, Source, TensorType};

use crate::compile::base::stats::PlanStats;
use crate::compile::exec;
use crate::compile::items;
use crate::compile::plan;
#[cfg(feature = "jit")]
use crate::compile::scalar::native::call::{Native, Whole};
use crate::compile::small::call::SmallCall;
use crate::compile::small::flat::Flat;
use crate::compile::small::program;
use crate::value::Arg;

/// Warm states kept per executable (more concurrent calls still work; their
/// extra states are dropped afterwards).
pub(crate) const POOL: usize = 4;

/// A compiled graph, ready to run many times (from many threads).
///
/// ```
/// use rlx::{compile, DType, Graph, Tensor};
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
    pub(crate) plan: plan::Plan,
    /// Warm states. Boxed so that taking one out and putting it back moves
    /// a pointer, not the ~340-byte state (that copy showed up in profiles
    /// of small scalar graphs).
    #[allow(clippy::vec_box)]
    pub(crate) pool: Mutex<Vec<Box<exec::State>>>,
    /// The scalarised plan, when every value is small (`compile::small`):
    /// calls run it instead of `plan`, which is kept for its types.
    pub(crate) small: Option<Box<program::Small>>,
    /// The item plan, when the graph is one item's graph run over a
    /// batch (`compile::items`): calls run it instead of `plan`, which is
    /// kept for the batched types.
    pub(crate) items: Option<Box<items::Items>>,
    /// The graph given to [`compile`], for the check of non-finite
    /// results ([`crate::set_debug_nans`]; `None` for the executables a
    /// plan builds for itself).
    pub(crate) source: Option<Arc<Graph>>,
    /// Where each node of the graph given to [`compile`] was traced (by
    /// node index; empty for a graph without source lines): a run-time
    /// error of a node gets its line ([`Executable::with_line`]).
    pub(crate) lines: Arc<[Option<Source>]>,
    /// The native code of a plan that is one scalar program reading its
    /// inputs and writing its `F64` outputs in order, in one function
    /// (see [`Executable::run_direct`]).
    #[cfg(feature = "jit")]
    pub(crate) direct: Option<Arc<Native>>,
}

/// [`Executable::run_direct`] without the executable: its native function
/// over a few numbers, with the checks of every call made once (see
/// [`Executable::direct_call`]; the number path keeps one per pinned
/// plan).
#[derive(Clone)]
#[cfg_attr(not(feature = "jit"), allow(dead_code))]
pub(crate) struct DirectCall {
    #[cfg(feature = "jit")]
    whole: Whole,
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
    pub(crate) fn whole_of(native: &Arc<Native>) -> Option<DirectCall> {
        Whole::of(native).map(|whole| DirectCall { whole })
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

impl Executable {
    pub(crate) fn from_plan(plan: plan::Plan) -> Result<Executable> {
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
        if let Some(whole) = self.direct.as_ref().and_then(Whole::of) {
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
    /// A scalarised plan (every value small, see [`Options::scalarize`](crate::compile::Options::scalarize))
    /// reports the counts of its element program, with
    /// [`PlanStats::scalarized_nodes`] the graph nodes lowered to it.
    /// A plan mixing small and large values reports its scalar regions of
    /// small values and their boundary: [`PlanStats::small_regions`],
    /// [`PlanStats::small_region_nodes`], and the values crossing into
    /// and out of them, [`PlanStats::small_region_inputs`] and
    /// [`PlanStats::small_region_outputs`].
    ///
    /// ```
    /// use rlx::{compile, DType, Graph};
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
