//! The plan cache of a `#[differentiable]` function ([`Function`]): one
//! entry per input signature, holding the traced graph and, per
//! [`Transform`], the compiled plan; the thread-local hot table; the number
//! path ([`Function::run_numbers`]). See the module docs of
//! [`crate::function`].

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use rlx_core::autodiff;
use rlx_core::autodiff::transforms::sparse::{sparse_hessian, sparse_jacobian, SparseProgram};
use rlx_core::sparsity::Pattern;
use rlx_core::{DType, Error, Graph, Result, Shape, TensorType};

use super::nth::NthPlan;
use crate::compile::{compile, Executable};
use crate::tensor::Tensor;
use crate::trace;
use crate::value::{is_number, Arg, Value, Values};

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
    /// Sparse Jacobian values alone (`sparse_jacobian_*`; see [`crate::sparse`]).
    SparseJacobian,
    /// The function's outputs and the sparse Jacobian's values
    /// (`value_and_sparse_jacobian_*`).
    ValueAndSparseJacobian,
    /// Sparse Hessian values (`sparse_hessian_*`).
    SparseHessian,
}

const TRANSFORMS: usize = 11;

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
            Transform::SparseJacobian => 8,
            Transform::ValueAndSparseJacobian => 9,
            Transform::SparseHessian => 10,
        }
    }

    /// The transformed graph and, for the sparse transforms, the pattern
    /// of the values it computes.
    fn apply(self, g: &Graph, wrt: &[usize]) -> Result<(Graph, Option<Arc<Pattern>>)> {
        let dense = |r: Result<Graph>| r.map(|g| (g, None));
        let sparse = |r: Result<SparseProgram>| r.map(|p| (p.graph, Some(Arc::new(p.pattern))));
        // Without the function's own outputs, what only they need is dropped.
        let values_only = |r: Result<SparseProgram>| {
            let (mut g, p) = sparse(r)?;
            let last = g.outputs().last().copied();
            g.set_outputs(last.into_iter().collect());
            Ok((rlx_core::optimize(&g)?, p))
        };
        match self {
            Transform::Call => Ok((g.clone(), None)),
            Transform::Grad => dense(autodiff::value_and_grad(g, wrt)),
            Transform::Jvp => dense(autodiff::jvp(g, wrt)),
            Transform::Vjp => dense(autodiff::vjp(g, wrt)),
            Transform::Jacobian => dense(autodiff::jacobian(g, wrt)),
            Transform::Hessian => dense(autodiff::hessian(g, wrt)),
            Transform::Hvp => dense(autodiff::hvp(g, wrt)),
            Transform::BatchJacobian => dense(autodiff::batch_jacobian(g, wrt)),
            Transform::SparseJacobian => values_only(sparse_jacobian(g, wrt, None)),
            Transform::ValueAndSparseJacobian => sparse(sparse_jacobian(g, wrt, None)),
            Transform::SparseHessian => values_only(sparse_hessian(g, wrt)),
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
    pub(super) params: &'static [&'static str],
    pub(super) wrt: &'static [usize],
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
pub(super) struct Entry {
    types: Vec<TensorType>,
    /// When every type is a 0-d `f32`/`f64` (and there are at most 64):
    /// bit `i` set where type `i` is `f32` (see [`Function::run_numbers`]).
    f32s: Option<u64>,
    statics: Box<dyn Any + Send + Sync>,
    /// The type of `statics`.
    statics_type: TypeId,
    pub(super) graph: Graph,
    plans: [OnceLock<Plan>; TRANSFORMS],
    /// The cache's clock when this entry was last found there.
    last_used: AtomicU64,
    /// Executables of `n`-th derivatives (see [`Function::run_nth`]).
    pub(super) nth: Mutex<Vec<Arc<NthPlan>>>,
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
    /// For the sparse transforms: the pattern of the values output.
    sparse: Option<Arc<Pattern>>,
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
        Function::with_bound(name, params, wrt, 0)
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
        Function::with_bound(name, params, wrt, if capacity == 0 { 1 } else { capacity })
    }

    /// The function with bound `capacity` (0: the global one).
    const fn with_bound(
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
            capacity: AtomicUsize::new(capacity),
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
    ) -> Result<Values> {
        let mut values = Values::new();
        self.run_to(t, args, extras, statics, tracer, &mut values)?;
        Ok(values)
    }

    /// [`Function::run`] pushing the outputs onto `values`: the warm call
    /// of a companion over tensors and numbers. Warm, it takes no lock and
    /// hashes nothing (the arguments' shapes and dtypes are compared with
    /// this thread's last entry); a scalarised plan reads the arguments'
    /// storage into its native code and builds the results directly, so
    /// with `values` on the caller's stack the call allocates only its
    /// tensor results (one allocation each when small, see
    /// [`Tensor`]). `values` is passed in rather than returned: it is a
    /// few hundred bytes, which a return would copy at every level.
    pub fn run_to<S: StaticArg>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
        values: &mut Values,
    ) -> Result<()> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let mut run = |e: &Entry| self.run_entry(e, t, args, extras, &mut *values);
        if let Some(r) = self.hot(|e| e.matches(args, statics), &mut run) {
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

    /// Calls `f` with the executable of transform `t` for `args` (traced,
    /// transformed and compiled on first use, as [`Function::run`] does)
    /// and, for the sparse transforms, the pattern of its values output:
    /// the building block of companions written in other modules
    /// ([`crate::sparse`]). Runs nothing itself; warm, it takes no lock.
    pub(crate) fn with_plan<S: StaticArg, R>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
        f: impl FnOnce(&Executable, Option<&Arc<Pattern>>) -> Result<R>,
    ) -> Result<R> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let mut f = Some(f);
        let mut run = |e: &Entry| -> Result<R> {
            let plan = self.plan(e, t)?;
            let exe = self.executable(plan)?;
            match f.take() {
                Some(f) => f(exe, plan.sparse.as_ref()),
                None => Err(Error::Unsupported("a plan callback ran twice".into())),
            }
        };
        if let Some(r) = self.hot(|e| e.matches(args, statics), &mut run) {
            return r;
        }
        let entry = self.miss(args, statics, tracer)?;
        run(&entry)
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
    pub(super) fn miss<S: StaticArg>(
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

    /// The way of the thread-local table a function's entry goes to: the
    /// address in units of `size_of::<Function>()`, so that functions whose
    /// statics lie side by side (those of one crate) take different ways.
    /// (In units of the alignment, every function went to one way whenever
    /// the size was a multiple of `HOT_WAYS` times the alignment; a hash of
    /// the address would collide at random under address randomisation.)
    fn way(key: usize) -> usize {
        (key / std::mem::size_of::<Function>()) % HOT_WAYS
    }

    #[cold]
    pub(super) fn count_mismatch(&self, got: usize) -> Error {
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
        values: &mut Values,
    ) -> Result<()> {
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
            values.extend(outs.into_iter().map(Value::Tensor));
            return Ok(());
        }
        // `entry` and `check_extras` checked every argument's type.
        self.executable(plan)?
            .run_arg_lists(args, extras, false, values)
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
        let (graph, sparse) = t.apply(&entry.graph, self.wrt).map_err(|e| match (t, e.root()) {
            (Transform::Grad | Transform::Hessian | Transform::Hvp | Transform::SparseHessian, Error::NotScalar { shape, .. }) => {
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
            | Transform::BatchJacobian
            | Transform::SparseJacobian
            | Transform::ValueAndSparseJacobian
            | Transform::SparseHessian => Vec::new(),
        };
        let plan = Plan {
            graph,
            sparse,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;

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
