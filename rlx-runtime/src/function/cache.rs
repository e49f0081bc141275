//! The plan cache of a `#[differentiable]` function ([`Function`]): one
//! entry per input signature, holding the traced graph and, per
//! [`Transform`], the compiled plan (module `plan`); the thread-local hot
//! table. The number path ([`Function::run_numbers`]) is in module
//! `numbers`. See the module docs of [`crate::function`].

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use rlx_core::{Error, Graph, Result, TensorType};

use crate::debug_nans::{all_finite, debug_nans};
use crate::function::panics;
use crate::function::pins::{f32_mask, NumberPin, SmallPin};
use crate::function::plan::{NthPlan, Plan};
use crate::function::transform::{Transform, TRANSFORMS};
use crate::tensor::Tensor;
use crate::trace;
use crate::value::{Arg, Value, Values};

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
/// use rlx::{plan_cache_capacity, set_plan_cache_capacity};
/// set_plan_cache_capacity(256);
/// assert_eq!(plan_cache_capacity(), 256);
/// # set_plan_cache_capacity(rlx::runtime::function::MAX_ENTRIES);
/// ```
pub fn set_plan_cache_capacity(n: usize) {
    CAPACITY.store(n.max(1), Ordering::Relaxed);
}

/// The bound set by [`set_plan_cache_capacity`].
pub fn plan_cache_capacity() -> usize {
    CAPACITY.load(Ordering::Relaxed)
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
    pub(super) name: &'static str,
    pub(super) params: &'static [&'static str],
    pub(super) wrt: &'static [usize],
    /// Declared holomorphic: `grad_`/`jacobian_` give `f′(z)` of a
    /// complex-valued output (see `Transform::apply_with`).
    pub(super) holomorphic: bool,
    cache: OnceLock<RwLock<Cache>>,
    /// This function's bound on cached signatures (0: [`plan_cache_capacity`]).
    capacity: AtomicUsize,
    /// Per transform, the entry its first successful run used, for a
    /// function without static arguments (see `Function::pin`): the warm
    /// paths of numbers (module `numbers`) and small tensors (module
    /// `tensors`) go straight to its plan.
    pub(super) pinned: [OnceLock<Arc<Entry>>; TRANSFORMS],
    /// Per transform, the pinned entry's native code when it serves the
    /// number path whole (see [`NumberPin`]).
    pub(super) direct: [OnceLock<NumberPin>; TRANSFORMS],
    /// Per transform, the pinned entry's native code when it serves the
    /// small-tensor path (see [`SmallPin`]).
    pub(super) small: [OnceLock<SmallPin>; TRANSFORMS],
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
    pub(super) types: Vec<TensorType>,
    /// When every type is a 0-d `f32`/`f64` (and there are at most 64):
    /// bit `i` set where type `i` is `f32` (see [`Function::run_numbers`]).
    pub(super) f32s: Option<u64>,
    statics: Box<dyn Any + Send + Sync>,
    /// The type of `statics`.
    pub(super) statics_type: TypeId,
    /// The traced graph, with the user's source line of each node (see
    /// [`crate::debug_nans`]).
    pub(super) graph: Graph,
    pub(super) plans: [OnceLock<Plan>; TRANSFORMS],
    /// The cache's clock when this entry was last found there.
    last_used: AtomicU64,
    /// Executables of `n`-th derivatives (see [`Function::run_nth`]).
    pub(super) nth: Mutex<Vec<Arc<NthPlan>>>,
}

impl Entry {
    /// Whether this entry was traced for `args`' types and `statics`.
    pub(super) fn matches<S: StaticArg>(&self, args: &[Arg<'_>], statics: &S) -> bool {
        self.types.len() == args.len()
            && args.iter().zip(&self.types).all(|(a, t)| a.matches(t))
            && self.same_statics(statics)
    }

    /// Whether the entry was traced for `statics`. All values of a
    /// zero-sized type (such as `()`, no static parameters) are the same
    /// value, so for those the type alone decides (which also saves a
    /// virtual call on the warm path).
    #[inline]
    pub(super) fn same_statics<S: StaticArg>(&self, statics: &S) -> bool {
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

impl Function {
    /// A function named `name` whose runtime parameters (in order) are
    /// `params`, differentiated with respect to the positions `wrt` among them.
    pub const fn new(
        name: &'static str,
        params: &'static [&'static str],
        wrt: &'static [usize],
    ) -> Function {
        Function::with_bound(name, params, wrt, 0, false)
    }

    /// [`Function::new`] (or, with `capacity > 0`, [`Function::with_capacity`])
    /// for a function declared holomorphic (`#[differentiable(holomorphic)]`):
    /// the gradient and Jacobian of its complex-valued output are the
    /// complex derivative `f′(z)` with respect to its complex parameters.
    pub const fn holomorphic(
        name: &'static str,
        params: &'static [&'static str],
        wrt: &'static [usize],
        capacity: usize,
    ) -> Function {
        Function::with_bound(name, params, wrt, capacity, true)
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
        let capacity = if capacity == 0 { 1 } else { capacity };
        Function::with_bound(name, params, wrt, capacity, false)
    }

    /// The function with bound `capacity` (0: the global one).
    const fn with_bound(
        name: &'static str,
        params: &'static [&'static str],
        wrt: &'static [usize],
        capacity: usize,
        holomorphic: bool,
    ) -> Function {
        Function {
            name,
            params,
            wrt,
            holomorphic,
            cache: OnceLock::new(),
            capacity: AtomicUsize::new(capacity),
            pinned: [const { OnceLock::new() }; TRANSFORMS],
            direct: [const { OnceLock::new() }; TRANSFORMS],
            small: [const { OnceLock::new() }; TRANSFORMS],
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
        self.run_to(t, args, extras, statics, tracer, 0, &mut values)?;
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
    ///
    /// The first `skip` outputs (the function's own, which `grad_`,
    /// `jacobian_` and `hessian_` do not return) are left out of `values`;
    /// a scalarised plan does not even build them.
    #[allow(clippy::too_many_arguments)]
    pub fn run_to<S: StaticArg>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
        skip: usize,
        values: &mut Values,
    ) -> Result<()> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let mut run = |e: &Arc<Entry>| {
            self.run_entry(e, t, args, extras, skip, &mut *values)?;
            self.pin::<S>(t, e);
            self.pin_small::<S>(t);
            Ok(())
        };
        if let Some(r) = self.hot(|e| e.matches(args, statics), &mut run) {
            return r;
        }
        run(&self.miss(args, statics, tracer)?)
    }

    /// Calls `f` with this thread's last entry for this function, if
    /// `matches` accepts it: no hashing, no lock, no reference count.
    /// Running under the shared borrow is fine: nothing `f` does re-enters
    /// a `Function` (a nested borrow would still be allowed; only the update
    /// after a miss needs exclusive access, and it is skipped if that fails).
    #[inline]
    pub(super) fn hot<R>(
        &self,
        matches: impl Fn(&Entry) -> bool,
        f: impl FnOnce(&Arc<Entry>) -> R,
    ) -> Option<R> {
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
        skip: usize,
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
            let outs = trace::inline(plan.graph()?, &refs)?;
            values.extend(outs.into_iter().skip(skip).map(Value::Tensor));
            return Ok(());
        }
        // `entry` and `check_extras` checked every argument's type.
        let exe = self.executable(plan)?;
        if !debug_nans() {
            return exe.run_arg_lists(args, extras, false, skip, values);
        }
        // The check covers the skipped outputs too.
        let start = values.len();
        exe.run_arg_lists(args, extras, false, 0, values)?;
        if !all_finite(&values[start..]) {
            return Err(self.non_finite(entry, t, plan, args, extras));
        }
        let skip = skip.min(values.len() - start);
        values.drain(start..start + skip);
        Ok(())
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
        // A panic (an indexing bug in the body, a panicking tensor method)
        // is this call's `Err`, naming the line that panicked, and prints
        // nothing (see `panics`).
        match panics::catch(|| tracer(types, statics)) {
            Ok(r) => r.map_err(wrap),
            Err(p) => {
                let e = Error::Unsupported(format!(
                    "`{}` panicked while being traced: {}",
                    self.name, p.message
                ));
                Err(wrap(match p.location {
                    Some((file, line, column)) => e.at(&file, line, column),
                    None => e,
                }))
            }
        }
    }
}
