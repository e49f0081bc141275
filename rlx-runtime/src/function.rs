//! The runtime side of `#[differentiable]`: per-function plan caches and
//! the helpers that generated code calls (through `rlx::__private`).
//!
//! # Plan cache
//!
//! Each differentiable function owns one [`Function`] (a `static` in the
//! generated code). Its cache maps an input *signature* — the shape and
//! dtype of every runtime argument, plus the static (configuration)
//! arguments, compared with `Eq` after a hash — to an entry holding the
//! traced graph and, per [`Transform`], the transformed graph and its
//! compiled [`Executable`]. Entries are built lazily: the first call with a
//! new signature traces the function; the first call of each transform
//! differentiates and compiles.
//!
//! Invariants:
//! - entries and plans are immutable once built and shared as `Arc`s, so
//!   any number of threads may call the same function at once; each thread
//!   also remembers the entry it used last per function (a small
//!   direct-mapped thread-local table), so a warm call with an unchanged
//!   signature takes no lock and hashes nothing (executables keep per-call
//!   scratch in their own pool; scalar programs need none);
//! - at most a bounded number of signatures are kept per function
//!   ([`MAX_ENTRIES`] unless set with [`set_plan_cache_capacity`], or per
//!   function with `#[differentiable(cache = N)]`); inserting one more
//!   evicts the least recently used (a program that keeps one hot shape and
//!   meets many one-off shapes keeps its hot plan; one cycling through more
//!   signatures than the bound retraces, it does not grow without bound).
//!   "Used" is counted at the shared cache: a thread that keeps calling one
//!   signature is served from its own table and holds that entry alive even
//!   if the shared cache drops it;
//! - errors are not cached: a failing call fails again, the same way.
//!
//! # Functions of numbers
//!
//! When every runtime parameter is an `f32`/`f64` and every result of a
//! companion is a number (`grad_f` of a scalar energy of coordinates, say),
//! the generated code first calls [`Function::run_numbers`]: the arguments
//! go in as a slice of `f64`s, the results come back in a stack array, and
//! a plan that is one scalar region runs its native code directly on those
//! slices. A warm call allocates nothing. Whatever that path cannot serve
//! (a plan that is not one scalar region) it declines, and the companion
//! takes the general path. Numbers are never traced, so inside a trace
//! such a call computes its results too (constants of the caller's trace).
//!
//! # Traced calls
//!
//! Inside an active trace (a differentiable function calling another, or a
//! companion), [`Function::run`] does not execute anything: it inlines the
//! (transformed) graph into the caller's trace. Errors met there are
//! recorded in the caller's trace ([`companion`], [`plain`]) and come back
//! as the outermost companion's `Err`.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use rlx_core::autodiff;
use rlx_core::{BinaryOp, CmpOp, DType, Error, Graph, Op, Result, Shape, TensorType};

use crate::compile::{compile, Executable};
use crate::tensor::Tensor;
use crate::trace::{self, Trace};
use crate::value::is_number;
pub use crate::value::{Arg, Value};

/// The default number of signatures cached per function (see the module docs).
pub const MAX_ENTRIES: usize = 64;

/// The bound of functions without one of their own.
static CAPACITY: AtomicUsize = AtomicUsize::new(MAX_ENTRIES);

/// Sets how many signatures (shapes, dtypes and static arguments) each
/// `#[differentiable]` function keeps compiled plans for, at least 1
/// (default [`MAX_ENTRIES`]); beyond it the least recently used is evicted.
/// A function declared `#[differentiable(cache = N)]` keeps its own bound.
///
/// ```
/// use rlx_runtime::function::{plan_cache_capacity, set_plan_cache_capacity};
/// set_plan_cache_capacity(256);
/// assert_eq!(plan_cache_capacity(), 256);
/// # set_plan_cache_capacity(rlx_runtime::function::MAX_ENTRIES);
/// ```
pub fn set_plan_cache_capacity(n: usize) {
    CAPACITY.store(n.max(1), Ordering::Relaxed);
}

/// The bound set by [`set_plan_cache_capacity`].
pub fn plan_cache_capacity() -> usize {
    CAPACITY.load(Ordering::Relaxed)
}

/// The transforms a companion can ask for; one cached plan each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transform {
    /// The function itself (plain call).
    Call,
    /// Value and gradient (`grad_*`, `value_and_grad_*`).
    Grad,
    /// Jacobian-vector product (`jvp_*`): one tangent per differentiated input.
    Jvp,
    /// Vector-Jacobian product (`vjp_*`): one cotangent for output 0.
    Vjp,
    /// Full Jacobian (`jacobian_*`), mode picked by size.
    Jacobian,
    /// Full Hessian (`hessian_*`).
    Hessian,
    /// Hessian-vector product (`hvp_*`): one vector per differentiated input.
    Hvp,
    /// Per-item Jacobians of a batched function (`batch_jacobian_*`).
    BatchJacobian,
}

const TRANSFORMS: usize = 8;

impl Transform {
    fn index(self) -> usize {
        match self {
            Transform::Call => 0,
            Transform::Grad => 1,
            Transform::Jvp => 2,
            Transform::Vjp => 3,
            Transform::Jacobian => 4,
            Transform::Hessian => 5,
            Transform::Hvp => 6,
            Transform::BatchJacobian => 7,
        }
    }

    fn apply(self, g: &Graph, wrt: &[usize]) -> Result<Graph> {
        match self {
            Transform::Call => Ok(g.clone()),
            Transform::Grad => autodiff::value_and_grad(g, wrt),
            Transform::Jvp => autodiff::jvp(g, wrt),
            Transform::Vjp => autodiff::vjp(g, wrt),
            Transform::Jacobian => autodiff::jacobian(g, wrt),
            Transform::Hessian => autodiff::hessian(g, wrt),
            Transform::Hvp => autodiff::hvp(g, wrt),
            Transform::BatchJacobian => autodiff::batch_jacobian(g, wrt),
        }
    }
}

/// The static (configuration) arguments of a differentiable function, as a
/// tuple: part of the plan-cache key.
#[diagnostic::on_unimplemented(
    message = "static parameters of a `#[differentiable]` function must be `Clone + Eq + Hash + Send + Sync + 'static`",
    label = "this parameter is not a `Tensor`, `&Tensor`, `f32` or `f64`, so it is static configuration and part of the plan-cache key",
    note = "take tensors as `Tensor`/`&Tensor`, runtime scalars as `f32`/`f64`; other parameters must be hashable values such as integers, `bool` or enums"
)]
pub trait StaticArg: Any + Clone + Eq + Hash + Send + Sync {}

impl<T: Any + Clone + Eq + Hash + Send + Sync> StaticArg for T {}

/// Compile-time check generated for each static parameter's type.
pub fn assert_static<T: StaticArg>() {}

/// Traces the function body for input types and static arguments.
pub type Tracer<S> = fn(&[TensorType], &S) -> Result<Graph>;

/// The plan cache of one differentiable function (see the module docs).
pub struct Function {
    name: &'static str,
    params: &'static [&'static str],
    wrt: &'static [usize],
    cache: OnceLock<RwLock<Cache>>,
    /// This function's bound on cached signatures (0: [`plan_cache_capacity`]).
    capacity: AtomicUsize,
}

#[derive(Default)]
struct Cache {
    /// Keyed by the signature's hash.
    map: HashMap<u64, Vec<Arc<Entry>>, rustc_hash::FxBuildHasher>,
    len: usize,
    /// Counts uses, to stamp [`Entry::last_used`].
    clock: AtomicU64,
}

impl Cache {
    /// Stamps `e` as used now.
    fn touch(&self, e: &Entry) {
        e.last_used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// Drops the least recently used entry.
    fn evict_lru(&mut self) {
        let oldest = self
            .map
            .iter()
            .flat_map(|(&h, v)| v.iter().enumerate().map(move |(i, e)| (h, i, e)))
            .min_by_key(|(_, _, e)| e.last_used.load(Ordering::Relaxed))
            .map(|(h, i, _)| (h, i));
        let Some((h, i)) = oldest else { return };
        if let Some(v) = self.map.get_mut(&h) {
            v.swap_remove(i);
            if v.is_empty() {
                self.map.remove(&h);
            }
            self.len -= 1;
        }
    }
}

/// The traced graph of one signature and its per-transform plans.
struct Entry {
    types: Vec<TensorType>,
    /// When every type is a 0-d `f32`/`f64` (and there are at most 64):
    /// bit `i` set where type `i` is `f32` (see [`Function::run_numbers`]).
    f32s: Option<u64>,
    statics: Box<dyn Any + Send + Sync>,
    /// The type of `statics`.
    statics_type: TypeId,
    graph: Graph,
    plans: [OnceLock<Plan>; TRANSFORMS],
    /// The cache's clock when this entry was last found there.
    last_used: AtomicU64,
    /// Executables of `n`-th derivatives, keyed by (position in `wrt`, `n`)
    /// (see [`Function::run_nth`]).
    nth: std::sync::Mutex<Vec<Arc<NthPlan>>>,
}

impl Entry {
    /// Whether this entry was traced for `args`' types and `statics`.
    fn matches<S: StaticArg>(&self, args: &[Arg<'_>], statics: &S) -> bool {
        self.types.len() == args.len()
            && args.iter().zip(&self.types).all(|(a, t)| a.matches(t))
            && self.same_statics(statics)
    }

    /// Whether the entry was traced for `statics`. All values of a
    /// zero-sized type (such as `()`, no static parameters) are the same
    /// value, so for those the type alone decides (which also saves a
    /// virtual call on the warm path).
    #[inline]
    fn same_statics<S: StaticArg>(&self, statics: &S) -> bool {
        if std::mem::size_of::<S>() == 0 {
            return self.statics_type == TypeId::of::<S>();
        }
        self.statics.downcast_ref::<S>() == Some(statics)
    }
}

/// The graph and executable of an `n`-th derivative (see [`Function::run_nth`]).
struct NthPlan {
    /// (position in `wrt`, order).
    key: (usize, usize),
    graph: Graph,
    exe: Executable,
}

/// Ways of the per-thread cache of recently used entries.
const HOT_WAYS: usize = 8;

thread_local! {
    /// Per thread, the entry each function used last (direct-mapped on the
    /// function's address; a collision only costs a trip to the shared
    /// cache). Warm calls with an unchanged signature take no lock.
    #[allow(clippy::type_complexity)]
    static HOT: RefCell<[Option<(usize, Arc<Entry>)>; HOT_WAYS]> =
        const { RefCell::new([const { None }; HOT_WAYS]) };
}

/// A transformed graph and, once compiled, its executable.
struct Plan {
    graph: Graph,
    /// The extra arguments the transform takes (tangents, cotangent or
    /// Hessian vectors), each named as its companion's parameter.
    extras: Vec<(String, TensorType)>,
    /// The number of extra arguments and their [`f32_mask`], when they
    /// are all numbers (see [`Function::run_numbers`]).
    extras_f32s: Option<(usize, u64)>,
    exe: OnceLock<Executable>,
}

/// For types that are all 0-d `f32`/`f64` (at most 64), the mask with bit
/// `i` set where type `i` is `f32`.
fn f32_mask<'a>(types: impl IntoIterator<Item = &'a TensorType>) -> Option<u64> {
    let mut mask = 0u64;
    for (i, t) in types.into_iter().enumerate() {
        if i >= 64 || !is_number(t) {
            return None;
        }
        mask |= u64::from(t.dtype == DType::F32) << i;
    }
    Some(mask)
}

/// Numbers as arguments of their types (`f32` where bit `i` of `f32s` is
/// set, see [`Function::run_numbers`]).
#[cold]
fn numbers_as_args(values: &[f64], f32s: u64) -> Vec<Arg<'static>> {
    let arg = |(i, &v): (usize, &f64)| match f32s >> i & 1 {
        1 => Arg::F32(v as f32),
        _ => Arg::F64(v),
    };
    values.iter().enumerate().map(arg).collect()
}

impl Function {
    /// A function named `name` whose runtime parameters (in order) are
    /// `params`, differentiated with respect to the positions `wrt` among them.
    pub const fn new(
        name: &'static str,
        params: &'static [&'static str],
        wrt: &'static [usize],
    ) -> Function {
        Function {
            name,
            params,
            wrt,
            cache: OnceLock::new(),
            capacity: AtomicUsize::new(0),
        }
    }

    /// [`Function::new`] keeping at most `capacity` signatures (at least 1)
    /// whatever [`set_plan_cache_capacity`] says (`#[differentiable(cache =
    /// N)]`).
    pub const fn with_capacity(
        name: &'static str,
        params: &'static [&'static str],
        wrt: &'static [usize],
        capacity: usize,
    ) -> Function {
        Function {
            name,
            params,
            wrt,
            cache: OnceLock::new(),
            capacity: AtomicUsize::new(if capacity == 0 { 1 } else { capacity }),
        }
    }

    /// Sets this function's bound on cached signatures (at least 1); the
    /// cache shrinks to it at the next insertion.
    pub fn set_capacity(&self, n: usize) {
        self.capacity.store(n.max(1), Ordering::Relaxed);
    }

    /// This function's bound on cached signatures.
    pub fn capacity(&self) -> usize {
        match self.capacity.load(Ordering::Relaxed) {
            0 => plan_cache_capacity(),
            n => n,
        }
    }

    /// The function's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Number of signatures currently cached.
    pub fn cached_signatures(&self) -> usize {
        self.cache
            .get()
            .map_or(0, |c| c.read().unwrap_or_else(PoisonError::into_inner).len)
    }

    /// Runs transform `t` on `args` (the runtime arguments, in parameter
    /// order) and `extras` (tangents, cotangent or Hessian vectors), tracing
    /// and compiling on the first call with this signature. Returns the
    /// transformed graph's outputs: the function's outputs, then the
    /// derivatives. Inside an active trace, inlines the transformed graph
    /// into it instead and returns traced tensors.
    pub fn run<S: StaticArg>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Vec<Value>> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let run = |e: &Entry| self.run_entry(e, t, args, extras);
        if let Some(r) = self.hot(|e| e.matches(args, statics), run) {
            return r;
        }
        run(&*self.miss(args, statics, tracer)?)
    }

    /// [`Function::run`] for arguments that are all numbers and a
    /// transformed graph whose outputs are all 0-d `f32`/`f64` and which
    /// compiles to one scalar program: writes the outputs into `out` (one
    /// slot each; an `f32` result is stored widened, so `as f32` gives it
    /// back exactly) and returns `true`. Returns `false`, leaving `out`
    /// unspecified, when the call cannot be served that way (other output
    /// types or count, extras of other types, a plan
    /// that is not a scalar program); the caller then uses
    /// [`Function::run`], which also reports errors in the extras. Other
    /// errors are those [`Function::run`] would return.
    ///
    /// `args` and `extras` hold the numbers widened to `f64` (at most 64
    /// each); bit `i` of `arg_f32s` (`extra_f32s`) marks `args[i]`
    /// (`extras[i]`) as an `f32`. (Slices and masks are separate
    /// parameters: a struct of them would be copied through memory.)
    ///
    /// This is the warm path of a companion of a function of a few
    /// scalars: no allocation, no enum per argument or result, no lock.
    ///
    /// ```
    /// use rlx_core::TensorType;
    /// use rlx_runtime::function::{Function, Transform};
    /// use rlx_runtime::{Graph, Result};
    ///
    /// fn trace(types: &[TensorType], _: &()) -> Result<Graph> {
    ///     let mut g = Graph::new();
    ///     let x = g.input("x", types[0].shape.clone(), types[0].dtype);
    ///     let y = g.mul(x, x)?;
    ///     g.set_outputs(vec![y]);
    ///     Ok(g)
    /// }
    /// static SQUARE: Function = Function::new("square", &["x"], &[0]);
    ///
    /// let mut out = [0.0; 2]; // the value, then d/dx
    /// let ran = SQUARE.run_numbers(Transform::Grad, &[3.0], 0, &[], 0, &(), trace, &mut out);
    /// assert!(ran.unwrap());
    /// assert_eq!(out, [9.0, 6.0]);
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn run_numbers<S: StaticArg>(
        &self,
        t: Transform,
        args: &[f64],
        arg_f32s: u64,
        extras: &[f64],
        extra_f32s: u64,
        statics: &S,
        tracer: Tracer<S>,
        out: &mut [f64],
    ) -> Result<bool> {
        let n = args.len();
        if n != self.params.len() {
            return Err(self.count_mismatch(n));
        }
        // The closure returns a byte and leaves an error in `failed`: a full
        // `Result<bool>` would be copied through memory at every level.
        let mut failed = None;
        let mut run = |entry: &Entry| -> Option<bool> {
            let ran = self.plan(entry, t).and_then(|plan| {
                // Numbers are never traced: inside a trace too, the call
                // computes its results (constants of the caller's trace).
                if plan.extras_f32s != Some((extras.len(), extra_f32s)) {
                    return Ok(false);
                }
                let exe = self.executable(plan)?;
                Ok(exe.run_scalar_into(args, extras, out))
            });
            ran.map_err(|e| failed = Some(e)).ok()
        };
        let matches =
            |e: &Entry| e.f32s == Some(arg_f32s) && e.types.len() == n && e.same_statics(statics);
        let ran = match self.hot(matches, &mut run) {
            Some(ran) => ran,
            None => match self.miss(&numbers_as_args(args, arg_f32s), statics, tracer) {
                Ok(entry) => run(&entry),
                Err(e) => return Err(e),
            },
        };
        match (ran, failed) {
            (Some(ran), _) => Ok(ran),
            (None, Some(e)) => Err(e),
            // Not reached (a failed run leaves its error); `run` would retry.
            (None, None) => Ok(false),
        }
    }

    /// Calls `f` with this thread's last entry for this function, if
    /// `matches` accepts it: no hashing, no lock, no reference count.
    /// Running under the shared borrow is fine: nothing `f` does re-enters
    /// a `Function` (a nested borrow would still be allowed; only the update
    /// after a miss needs exclusive access, and it is skipped if that fails).
    #[inline]
    fn hot<R>(&self, matches: impl Fn(&Entry) -> bool, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        let key = self as *const Function as usize;
        HOT.with(|h| match &h.try_borrow().ok()?[Self::way(key)] {
            Some((k, e)) if *k == key && matches(e) => Some(f(e)),
            _ => None,
        })
    }

    /// The entry for `args` and `statics` from the shared cache (traced on
    /// a miss there), remembered as this thread's last entry.
    fn miss<S: StaticArg>(
        &self,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Arc<Entry>> {
        let entry = self.shared_entry(args, statics, tracer)?;
        let key = self as *const Function as usize;
        HOT.with(|h| {
            if let Ok(mut h) = h.try_borrow_mut() {
                h[Self::way(key)] = Some((key, entry.clone()));
            }
        });
        Ok(entry)
    }

    /// The way of the thread-local table a function's entry goes to.
    fn way(key: usize) -> usize {
        (key / std::mem::align_of::<Function>()) % HOT_WAYS
    }

    #[cold]
    fn count_mismatch(&self, got: usize) -> Error {
        Error::CountMismatch {
            what: format!("arguments of `{}`", self.name),
            expected: self.params.len(),
            got,
        }
    }

    /// Runs transform `t` of a signature's entry (see [`Function::run`]).
    fn run_entry(
        &self,
        entry: &Entry,
        t: Transform,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
    ) -> Result<Vec<Value>> {
        let plan = self.plan(entry, t)?;
        self.check_extras(plan, t, extras)?;
        // Inside a trace the graph is inlined, unless every argument is a
        // number: then nothing depends on the trace, and the results are
        // computed (as constants of the caller's trace), so that a float
        // result can exist. (A concrete tensor argument is inlined, so that
        // one captured from outside the trace is refused there.)
        let numbers = || {
            args.iter()
                .chain(extras)
                .all(|a| !matches!(a, Arg::Tensor(_)))
        };
        if trace::is_tracing() && !numbers() {
            let tensors: Vec<Tensor> = args.iter().chain(extras).map(|a| a.to_tensor()).collect();
            let refs: Vec<&Tensor> = tensors.iter().collect();
            let outs = trace::inline(&plan.graph, &refs)?;
            return Ok(outs.into_iter().map(Value::Tensor).collect());
        }
        // `entry` and `check_extras` checked every argument's type.
        self.executable(plan)?.run_arg_lists(args, extras, false)
    }

    /// The graph traced for `args` and `statics` (from the cache; traced on
    /// a miss): what the companions differentiate, to print or to pass to
    /// the transforms of `rlx::autodiff`. Its inputs are the runtime
    /// parameters, named and ordered as in the function.
    pub fn graph<S: StaticArg>(
        &self,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Graph> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        Ok(self.miss(args, statics, tracer)?.graph.clone())
    }

    /// The `n`-th derivative of the scalar (first) output with respect to
    /// each differentiated parameter on its own (`∂ⁿf/∂x_iⁿ`, shaped like
    /// `x_i` repeated `n` times; [`autodiff::nth_order_grad`]), one result
    /// per parameter after the function's outputs. Each (parameter, `n`)
    /// is differentiated and compiled once per signature. Inside a trace
    /// the derivative graphs are inlined.
    pub fn run_nth<S: StaticArg>(
        &self,
        args: &[Arg<'_>],
        n: usize,
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Vec<Value>> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let entry = self.miss(args, statics, tracer)?;
        let n_out = entry.graph.outputs().len();
        let mut outs = Vec::new();
        for (k, &i) in self.wrt.iter().enumerate() {
            let plan = self.nth_plan(&entry, k, i, n)?;
            let mut got = if trace::is_tracing() {
                let tensors: Vec<Tensor> = args.iter().map(|a| a.to_tensor()).collect();
                let refs: Vec<&Tensor> = tensors.iter().collect();
                trace::inline(&plan.graph, &refs)?
                    .into_iter()
                    .map(Value::Tensor)
                    .collect()
            } else {
                plan.exe.run_arg_lists(args, &[], false)?
            };
            let d = got.pop().expect("nth_order_grad adds one output");
            if k == 0 {
                got.truncate(n_out);
                outs.extend(got);
            }
            outs.push(d);
        }
        Ok(outs)
    }

    /// The graph and executable of the `n`-th derivative with respect to
    /// parameter `i` (position `k` in `wrt`), built on first use.
    fn nth_plan(&self, entry: &Entry, k: usize, i: usize, n: usize) -> Result<Arc<NthPlan>> {
        let lock = || entry.nth.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = lock().iter().find(|p| p.key == (k, n)) {
            return Ok(p.clone());
        }
        let mut g = autodiff::nth_order_grad(&entry.graph, i, n)?;
        if n == 0 {
            // The 0-th derivative is the value itself.
            let mut outs = g.outputs().to_vec();
            outs.push(outs[0]);
            g.set_outputs(outs);
        }
        let exe = compile(&g)?;
        let p = Arc::new(NthPlan {
            key: (k, n),
            graph: g,
            exe,
        });
        lock().push(p.clone());
        Ok(p)
    }

    /// A plan's executable, compiled on first use.
    #[inline]
    fn executable<'p>(&self, plan: &'p Plan) -> Result<&'p Executable> {
        match plan.exe.get() {
            Some(e) => Ok(e),
            None => {
                let e = compile(&plan.graph)?;
                Ok(plan.exe.get_or_init(|| e))
            }
        }
    }

    fn signature(&self, types: &[TensorType]) -> String {
        self.params
            .iter()
            .zip(types)
            .map(|(n, t)| format!("{n}: {}{}", t.dtype, t.shape))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The entry for a signature from the shared cache, traced on a miss.
    fn shared_entry<S: StaticArg>(
        &self,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Arc<Entry>> {
        // FxHash: the key is a few small integers, hashed on every call.
        let mut h = rustc_hash::FxHasher::default();
        for a in args {
            a.dims().hash(&mut h);
            a.dtype().hash(&mut h);
        }
        statics.hash(&mut h);
        let hash = h.finish();
        let matches = |e: &Entry| e.matches(args, statics);
        let cache = self.cache.get_or_init(Default::default);
        {
            let c = cache.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = c.map.get(&hash).and_then(|v| v.iter().find(|e| matches(e))) {
                c.touch(e);
                return Ok(e.clone());
            }
        }
        let types: Vec<TensorType> = args.iter().map(Arg::ty).collect();
        let graph = self.trace(&types, statics, tracer)?;
        let entry = Arc::new(Entry {
            f32s: f32_mask(&types),
            types,
            statics: Box::new(statics.clone()),
            statics_type: TypeId::of::<S>(),
            graph,
            plans: Default::default(),
            last_used: AtomicU64::new(0),
            nth: Default::default(),
        });
        let mut c = cache.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = c.map.get(&hash).and_then(|v| v.iter().find(|e| matches(e))) {
            return Ok(e.clone());
        }
        let capacity = self.capacity();
        while c.len >= capacity {
            c.evict_lru();
        }
        c.touch(&entry);
        c.map.entry(hash).or_default().push(entry.clone());
        c.len += 1;
        Ok(entry)
    }

    fn trace<S: StaticArg>(
        &self,
        types: &[TensorType],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Graph> {
        let wrap = |e: Error| Error::Trace {
            function: self.name.to_string(),
            signature: self.signature(types),
            source: Box::new(e),
        };
        match catch_unwind(AssertUnwindSafe(|| tracer(types, statics))) {
            Ok(r) => r.map_err(wrap),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                Err(wrap(Error::Unsupported(format!(
                    "`{}` panicked while being traced: {msg}",
                    self.name
                ))))
            }
        }
    }

    fn plan<'e>(&self, entry: &'e Entry, t: Transform) -> Result<&'e Plan> {
        let slot = &entry.plans[t.index()];
        if let Some(p) = slot.get() {
            return Ok(p);
        }
        let graph = t.apply(&entry.graph, self.wrt).map_err(|e| match (t, e.root()) {
            (Transform::Grad | Transform::Hessian | Transform::Hvp, Error::NotScalar { shape, .. }) => {
                Error::Unsupported(format!(
                    "`{}` returns a value of shape {shape}, but gradients and Hessians need a scalar (0-d or one-element) output\n  = help: use `vjp_{0}` with a cotangent, or `jacobian_{0}`",
                    self.name
                ))
            }
            _ => e,
        })?;
        let extras: Vec<(String, TensorType)> = match t {
            Transform::Jvp | Transform::Hvp => {
                let prefix = if t == Transform::Jvp {
                    "tangent_"
                } else {
                    "v_"
                };
                // As the macro names them (`tangent_y` for `_y`; see
                // `extra_name` in rlx-macros).
                let param = |&i: &usize| {
                    let name = self.params[i].trim_start_matches('_');
                    let clash = self
                        .params
                        .iter()
                        .enumerate()
                        .any(|(j, p)| j != i && p.trim_start_matches('_') == name);
                    let name = if name.is_empty() || clash {
                        self.params[i]
                    } else {
                        name
                    };
                    (format!("{prefix}{name}"), entry.types[i].clone())
                };
                self.wrt.iter().map(param).collect()
            }
            Transform::Vjp => vec![("cotangent".into(), entry.graph.ty(entry.graph.outputs()[0]))],
            Transform::Call
            | Transform::Grad
            | Transform::Jacobian
            | Transform::Hessian
            | Transform::BatchJacobian => Vec::new(),
        };
        let plan = Plan {
            graph,
            extras_f32s: f32_mask(extras.iter().map(|(_, t)| t)).map(|m| (extras.len(), m)),
            extras,
            exe: OnceLock::new(),
        };
        Ok(slot.get_or_init(|| plan))
    }

    /// Checks the extra arguments against those `plan`'s transform `t` takes.
    fn check_extras(&self, plan: &Plan, t: Transform, extras: &[Arg<'_>]) -> Result<()> {
        if extras.len() != plan.extras.len() {
            return Err(Error::CountMismatch {
                what: match t {
                    Transform::Vjp => "`cotangent` arguments".into(),
                    _ => format!("extra arguments of a `{}` companion", self.name),
                },
                expected: plan.extras.len(),
                got: extras.len(),
            });
        }
        for (a, (name, ty)) in extras.iter().zip(&plan.extras) {
            if !a.matches(ty) {
                return Err(mismatch(name.clone(), ty, a));
            }
        }
        Ok(())
    }
}

fn mismatch(name: String, ty: &TensorType, a: &Arg<'_>) -> Error {
    Error::InputMismatch {
        name,
        expected_shape: ty.shape.clone(),
        expected_dtype: ty.dtype,
        got_shape: Shape::new(a.dims()),
        got_dtype: a.dtype(),
    }
}

// ---------------------------------------------------------------------------
// Tracing glue.

/// Declares the runtime parameters `names` with `types` as inputs of `trace`.
pub fn inputs<const N: usize>(
    trace: &Trace,
    names: [&str; N],
    types: &[TensorType],
) -> Result<[Tensor; N]> {
    if types.len() != N {
        return Err(Error::CountMismatch {
            what: "traced inputs".into(),
            expected: N,
            got: types.len(),
        });
    }
    Ok(std::array::from_fn(|i| {
        trace.input(names[i], types[i].shape.clone(), types[i].dtype)
    }))
}

/// Ends `trace` with the body's outputs.
pub fn finish(trace: Trace, outputs: Vec<Tensor>) -> Result<Graph> {
    let refs: Vec<&Tensor> = outputs.iter().collect();
    trace.finish(&refs)
}

/// What the body of a function declared to return `D` may produce.
#[diagnostic::on_unimplemented(
    message = "the body of this `#[differentiable]` function produces `{Self}`, which does not fit its declared return type `{D}`",
    label = "declared `{D}`",
    note = "a `Tensor` output is produced by a `Tensor`; an `f32`/`f64` output by a 0-d `Tensor` or a float; a tuple element by element"
)]
pub trait Returns<D> {
    /// Appends the outputs as tensors.
    fn push_outputs(self, out: &mut Vec<Tensor>);
}

impl Returns<Tensor> for Tensor {
    fn push_outputs(self, out: &mut Vec<Tensor>) {
        out.push(self);
    }
}

macro_rules! float_returns {
    ($($f:ty),*) => {$(
        impl Returns<$f> for Tensor {
            fn push_outputs(self, out: &mut Vec<Tensor>) {
                out.push(self);
            }
        }
        impl Returns<$f> for $f {
            fn push_outputs(self, out: &mut Vec<Tensor>) {
                out.push(Tensor::scalar(self));
            }
        }
    )*};
}
float_returns!(f32, f64);

macro_rules! tuple_returns {
    ($(($($d:ident $r:ident $i:tt),+)),*) => {$(
        impl<$($d, $r: Returns<$d>),+> Returns<($($d,)+)> for ($($r,)+) {
            fn push_outputs(self, out: &mut Vec<Tensor>) {
                $(self.$i.push_outputs(out);)+
            }
        }
    )*};
}
tuple_returns!(
    (D0 R0 0, D1 R1 1),
    (D0 R0 0, D1 R1 1, D2 R2 2),
    (D0 R0 0, D1 R1 1, D2 R2 2, D3 R3 3),
    (D0 R0 0, D1 R1 1, D2 R2 2, D3 R3 3, D4 R4 4),
    (D0 R0 0, D1 R1 1, D2 R2 2, D3 R3 3, D4 R4 4, D5 R5 5)
);

/// The body's result as the graph's outputs, checked against the declared type `D`.
pub fn outputs<D, R: Returns<D>>(r: R) -> Vec<Tensor> {
    let mut out = Vec::new();
    r.push_outputs(&mut out);
    out
}

// ---------------------------------------------------------------------------
// Results.

/// A value a companion or plain call can return, built from one output.
pub trait Output: Sized {
    /// Converts one output.
    fn from_value(v: Value) -> Result<Self>;
    /// A stand-in returned inside a trace after an error was recorded there.
    fn placeholder() -> Self;
}

impl Output for Tensor {
    fn from_value(v: Value) -> Result<Self> {
        Ok(v.into_tensor())
    }

    fn placeholder() -> Self {
        traced_zero().unwrap_or_else(|| Tensor::scalar(0.0f64))
    }
}

#[cold]
fn float_in_trace(ty: &str) -> Error {
    Error::Unsupported(format!(
        "a `{ty}` result cannot be produced inside traced code: values exist only when the compiled function runs\n  = help: pass a traced value (a `Tensor`) for one of the called function's `f32`/`f64` parameters (its float results are then tensors), or make it return `Tensor`"
    ))
}

macro_rules! float_output {
    ($($f:ty => $into:ident),*) => {$(
        impl Output for $f {
            #[inline]
            fn from_value(v: Value) -> Result<Self> {
                if v.is_traced() {
                    return Err(float_in_trace(stringify!($f)));
                }
                v.$into()
            }

            fn placeholder() -> Self {
                <$f>::NAN
            }
        }
    )*};
}
float_output!(f32 => into_f32, f64 => into_f64);

/// Takes the next output and converts it.
#[inline]
pub fn take<T: Output>(it: &mut impl Iterator<Item = Value>) -> Result<T> {
    match it.next() {
        Some(v) => T::from_value(v),
        None => Err(Error::Unsupported(
            "a transformed graph has fewer outputs than its companion expects".into(),
        )),
    }
}

/// A number type a companion can return from [`Function::run_numbers`].
pub trait Number: Copy {
    /// The number from its widened `f64` (exact for what `run_numbers` stores).
    fn from_f64(v: f64) -> Self;
}

impl Number for f64 {
    #[inline]
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl Number for f32 {
    #[inline]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

/// Takes the next result written by [`Function::run_numbers`]. The
/// generated code sizes the buffer to the plan's outputs (`run_numbers`
/// refuses any other size), so the `NaN` fallback is never read.
///
/// ```
/// use rlx_runtime::function::number;
/// let results = [1.5, 2.0];
/// let mut it = results.iter();
/// let (a, b): (f64, f32) = (number(&mut it), number(&mut it));
/// assert_eq!((a, b), (1.5, 2.0));
/// ```
#[inline]
pub fn number<T: Number>(it: &mut std::slice::Iter<'_, f64>) -> T {
    T::from_f64(it.next().copied().unwrap_or(f64::NAN))
}

/// Skips the function's own outputs to reach the derivatives.
pub fn skip(it: &mut impl Iterator, n: usize) {
    for _ in 0..n {
        it.next();
    }
}

/// Stand-ins for every part of a result (see [`Output::placeholder`]).
pub trait Placeholder {
    /// The stand-in.
    fn placeholder() -> Self;
}

impl<T: Output> Placeholder for T {
    fn placeholder() -> Self {
        <T as Output>::placeholder()
    }
}

macro_rules! tuple_placeholder {
    ($(($($t:ident),+)),*) => {$(
        impl<$($t: Placeholder),+> Placeholder for ($($t,)+) {
            fn placeholder() -> Self {
                ($($t::placeholder(),)+)
            }
        }
    )*};
}
tuple_placeholder!(
    (A, B),
    (A, B, C),
    (A, B, C, D),
    (A, B, C, D, E),
    (A, B, C, D, E, F)
);

/// A companion's result: outside a trace, as is; inside a trace an error is
/// recorded in the trace (the outermost companion returns it, naming the
/// caller's line) and a stand-in is returned, so that tracing can go on.
#[track_caller]
pub fn companion<T: Placeholder>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match f() {
        Err(e) if trace::is_tracing() => {
            record(located(e, Location::caller()));
            Ok(T::placeholder())
        }
        r => r,
    }
}

/// A plain call's result: the value, or a panic with the error's message
/// naming the caller's line (inside a trace: the error is recorded and a
/// stand-in returned).
#[track_caller]
pub fn plain<T: Placeholder>(f: impl FnOnce() -> Result<T>) -> T {
    match f() {
        Ok(v) => v,
        Err(e) if trace::is_tracing() => {
            record(located(e, Location::caller()));
            T::placeholder()
        }
        Err(e) => panic!("{e}"),
    }
}

/// `e` at the caller's `loc`, unless it already names a source line (an
/// error met in the called function's own traced code).
fn located(e: Error, loc: &Location<'_>) -> Error {
    fn has_line(e: &Error) -> bool {
        match e {
            Error::At { .. } => true,
            Error::Trace { source, .. } | Error::AtNode { source, .. } => has_line(source),
            _ => false,
        }
    }
    if has_line(&e) {
        return e;
    }
    Error::At {
        source: Box::new(e),
        file: loc.file().to_string(),
        line: loc.line(),
        column: loc.column(),
    }
}

/// A traced 0-d zero in the innermost trace, if one is active.
fn traced_zero() -> Option<Tensor> {
    if !trace::is_tracing() {
        return None;
    }
    let mut g = Graph::new();
    let z = g.scalar(0.0, DType::F64);
    g.set_outputs(vec![z]);
    trace::inline(&g, &[]).ok()?.pop()
}

/// Records `e` as the innermost trace's error (its first error wins).
fn record(e: Error) {
    if let Some(t) = traced_zero() {
        trace::poison(&[&t], e);
    }
}

// ---------------------------------------------------------------------------
// Rewritten control flow (see rlx-macros/src/rewrite.rs).

/// Operands of a rewritten comparison: tensors compare element-wise into a
/// `Bool` mask; plain values compare as usual into a `bool`.
#[diagnostic::on_unimplemented(
    message = "cannot compare `{Self}` with `{Rhs}` in traced code",
    note = "traced comparisons take `Tensor`/`&Tensor` on one side and a `Tensor`, `&Tensor`, `f32` or `f64` on the other"
)]
pub trait Compare<Rhs: ?Sized> {
    /// `bool` or a mask `Tensor`.
    type Output;
    /// Compares `self` with `rhs`.
    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: &Rhs) -> Self::Output;
}

impl<T: PartialOrd> Compare<T> for T {
    type Output = bool;
    fn compare(&self, op: CmpOp, rhs: &T) -> bool {
        match op {
            CmpOp::Lt => self < rhs,
            CmpOp::Le => self <= rhs,
            CmpOp::Gt => self > rhs,
            CmpOp::Ge => self >= rhs,
            CmpOp::Eq => self == rhs,
            CmpOp::Ne => self != rhs,
        }
    }
}

/// A tensor operand of a traced comparison, select or logic op.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tensor operand in traced code",
    label = "an `if` on a traced condition selects element-wise, so each branch must give a `Tensor`, `&Tensor`, `f32` or `f64`",
    note = "select tuple elements one by one: `let a = if c {{ a1 }} else {{ a2 }};`"
)]
pub trait TracedOperand {
    /// The operand as a tensor; `like` gives the dtype for a bare scalar.
    fn operand(&self, like: Option<DType>) -> Tensor;
    /// The dtype if the operand is a tensor.
    fn tensor_dtype(&self) -> Option<DType>;
}

impl TracedOperand for Tensor {
    fn operand(&self, _: Option<DType>) -> Tensor {
        self.clone()
    }
    fn tensor_dtype(&self) -> Option<DType> {
        Some(self.dtype())
    }
}

impl TracedOperand for &Tensor {
    fn operand(&self, _: Option<DType>) -> Tensor {
        (*self).clone()
    }
    fn tensor_dtype(&self) -> Option<DType> {
        Some(self.dtype())
    }
}

macro_rules! scalar_operand {
    ($($f:ty => $d:expr),*) => {$(
        impl TracedOperand for $f {
            fn operand(&self, like: Option<DType>) -> Tensor {
                Tensor::full(*self as f64, Shape::scalar(), like.unwrap_or($d))
            }
            fn tensor_dtype(&self) -> Option<DType> {
                None
            }
        }
    )*};
}
scalar_operand!(f32 => DType::F32, f64 => DType::F64);

#[track_caller]
fn tensor_pair(a: &impl TracedOperand, b: &impl TracedOperand) -> (Tensor, Tensor) {
    let like = a.tensor_dtype().or(b.tensor_dtype());
    (a.operand(like), b.operand(like))
}

// One impl per tensor side, generic over the other operand, so that the
// result type (`Tensor`) is known before a float literal's type is: `let m
// = x > 0.0; m.not()` needs no annotation.
impl<R: TracedOperand> Compare<R> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: &R) -> Tensor {
        let (a, b) = tensor_pair(self, rhs);
        Tensor::apply_or_panic(Op::Compare(op), &[&a, &b])
    }
}

impl<R: TracedOperand> Compare<R> for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: &R) -> Tensor {
        let (a, b) = tensor_pair(self, rhs);
        Tensor::apply_or_panic(Op::Compare(op), &[&a, &b])
    }
}

/// A number on the left of a traced comparison (`0.5 <= x`).
pub trait ScalarOperand: TracedOperand {}
impl ScalarOperand for f64 {}
impl ScalarOperand for f32 {}

macro_rules! scalar_compare {
    ($($r:ty),*) => {$(
        impl<L: ScalarOperand> Compare<$r> for L {
            type Output = Tensor;
            #[track_caller]
            fn compare(&self, op: CmpOp, rhs: &$r) -> Tensor {
                let (a, b) = tensor_pair(self, rhs);
                Tensor::apply_or_panic(Op::Compare(op), &[&a, &b])
            }
        }
    )*};
}
scalar_compare!(Tensor, &Tensor);

macro_rules! cmp_fns {
    ($($name:ident => $op:ident),*) => {$(
        #[doc = concat!("The rewritten `", stringify!($name), "` comparison.")]
        #[track_caller]
        pub fn $name<A: Compare<B> + ?Sized, B: ?Sized>(a: &A, b: &B) -> A::Output {
            a.compare(CmpOp::$op, b)
        }
    )*};
}
cmp_fns!(lt => Lt, le => Le, gt => Gt, ge => Ge, eq => Eq, ne => Ne);

/// Operands of a rewritten `&&`/`||`: element-wise on masks, as usual on
/// `bool`s (both sides are evaluated).
#[diagnostic::on_unimplemented(
    message = "cannot combine `{Self}` and `{Rhs}` with `&&`/`||` in traced code",
    note = "combine two masks (traced comparisons) or two `bool`s"
)]
pub trait Logic<Rhs> {
    /// `bool` or a mask `Tensor`.
    type Output;
    /// `self && rhs` (`and = true`) or `self || rhs`.
    fn logic(self, and: bool, rhs: Rhs) -> Self::Output;
}

impl Logic<bool> for bool {
    type Output = bool;
    fn logic(self, and: bool, rhs: bool) -> bool {
        if and {
            self && rhs
        } else {
            self || rhs
        }
    }
}

impl Logic<Tensor> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn logic(self, and: bool, rhs: Tensor) -> Tensor {
        let op = if and { BinaryOp::And } else { BinaryOp::Or };
        Tensor::apply_or_panic(Op::Binary(op), &[&self, &rhs])
    }
}

/// The rewritten `a && b`.
#[track_caller]
pub fn and<A: Logic<B>, B>(a: A, b: B) -> A::Output {
    a.logic(true, b)
}

/// The rewritten `a || b`.
#[track_caller]
pub fn or<A: Logic<B>, B>(a: A, b: B) -> A::Output {
    a.logic(false, b)
}

/// Conditions of a rewritten `if`/`else`: a `bool` picks one branch value;
/// a mask selects element-wise (`Tensor::select`).
#[diagnostic::on_unimplemented(
    message = "an `if` on a traced condition selects element-wise between tensors, but its branches produce `{A}` and `{B}`",
    note = "on a traced condition both branches must give a `Tensor`, `&Tensor`, `f32` or `f64`"
)]
pub trait Cond<A, B> {
    /// The selected value's type.
    type Output;
    /// Picks between `a` (where true) and `b`.
    fn pick(self, a: A, b: B) -> Self::Output;
}

impl<T> Cond<T, T> for bool {
    type Output = T;
    fn pick(self, a: T, b: T) -> T {
        if self {
            a
        } else {
            b
        }
    }
}

impl<A: TracedOperand, B: TracedOperand> Cond<A, B> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn pick(self, a: A, b: B) -> Tensor {
        let (a, b) = tensor_pair(&a, &b);
        Tensor::apply_or_panic(Op::Select, &[&self, &a, &b])
    }
}

/// The rewritten `if cond { a } else { b }`.
#[track_caller]
pub fn select<C: Cond<A, B>, A, B>(cond: C, a: A, b: B) -> C::Output {
    cond.pick(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sin(x · y) + x`, for inputs of any types.
    fn tracer(types: &[TensorType], _: &()) -> Result<Graph> {
        let mut g = Graph::new();
        let x = g.input("x", types[0].shape.clone(), types[0].dtype);
        let y = g.input("y", types[1].shape.clone(), types[1].dtype);
        let p = g.mul(x, y)?;
        let s = g.sin(p)?;
        let e = g.add(s, x)?;
        g.set_outputs(vec![e]);
        Ok(g)
    }

    static F: Function = Function::new("f", &["x", "y"], &[0, 1]);

    fn general(t: Transform, args: &[Arg<'_>], extras: &[Arg<'_>]) -> Result<Vec<f64>> {
        let outs = F.run(t, args, extras, &(), tracer)?;
        outs.into_iter().map(Value::into_f64).collect()
    }

    #[test]
    fn run_numbers_gives_the_bits_of_run() {
        let (x, y) = (0.5, -2.0);
        let mut out = [0.0; 3];
        assert!(F
            .run_numbers(Transform::Grad, &[x, y], 0, &[], 0, &(), tracer, &mut out)
            .unwrap());
        let want = general(Transform::Grad, &[Arg::F64(x), Arg::F64(y)], &[]).unwrap();
        assert_eq!(out.to_vec(), want);
        assert_eq!(out[1], (x * y).cos() * y + 1.0);

        let mut out = [0.0; 2];
        let ok = F.run_numbers(
            Transform::Jvp,
            &[x, y],
            0,
            &[1.0, 0.5],
            0,
            &(),
            tracer,
            &mut out,
        );
        assert!(ok.unwrap());
        let want = general(
            Transform::Jvp,
            &[Arg::F64(x), Arg::F64(y)],
            &[Arg::F64(1.0), Arg::F64(0.5)],
        );
        assert_eq!(out.to_vec(), want.unwrap());
    }

    #[test]
    fn run_numbers_declines_what_it_cannot_serve() {
        let args = [0.5, -2.0];
        // A result buffer of the wrong length.
        let mut short = [0.0; 2];
        assert!(!F
            .run_numbers(Transform::Grad, &args, 0, &[], 0, &(), tracer, &mut short)
            .unwrap());
        // Extras of the wrong type or count: `run` then names the problem.
        let mut out = [0.0; 2];
        assert!(!F
            .run_numbers(
                Transform::Jvp,
                &args,
                0,
                &[1.0, 0.5],
                0b01,
                &(),
                tracer,
                &mut out
            )
            .unwrap());
        assert!(!F
            .run_numbers(Transform::Jvp, &args, 0, &[1.0], 0, &(), tracer, &mut out)
            .unwrap());
        let e = F
            .run(
                Transform::Jvp,
                &[Arg::F64(0.5), Arg::F64(-2.0)],
                &[Arg::F32(1.0), Arg::F64(0.5)],
                &(),
                tracer,
            )
            .unwrap_err();
        assert!(e.to_string().contains("tangent_x"), "{e}");
        // Numbers are never traced: inside a trace the call computes its
        // value (a constant of that trace), as outside.
        let t = Trace::enter();
        let mut value = [0.0];
        assert!(F
            .run_numbers(Transform::Call, &args, 0, &[], 0, &(), tracer, &mut value)
            .unwrap());
        assert_eq!(value[0], (0.5f64 * -2.0).sin() + 0.5);
        drop(t);
        // A wrong argument count is an error, as with `run`.
        let e = F
            .run_numbers(Transform::Call, &[1.0], 0, &[], 0, &(), tracer, &mut [0.0])
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::CountMismatch {
                    expected: 2,
                    got: 1,
                    ..
                }
            ),
            "{e}"
        );
    }
}
