//! The number path of a function's plan cache ([`Function::run_numbers`]):
//! companions of functions of a few scalars, run on `f64` slices without
//! allocating.

use std::any::TypeId;
use std::sync::Arc;

use rlx_core::Result;

use crate::compile::on_copy;
use crate::debug_nans::{debug_nans, known_off};
use crate::function::cache::{Entry, Function, StaticArg, Tracer};
use crate::function::pins::NumberPin;
use crate::function::transform::Transform;
use crate::value::Arg;

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

/// Whether `S` is `()`, the static arguments of a function without static
/// parameters (a constant once `S` is known).
fn no_statics<S: StaticArg>() -> bool {
    TypeId::of::<S>() == TypeId::of::<()>()
}

/// The arguments of [`Function::run_numbers`], for its general path.
struct Numbers<'a> {
    args: &'a [f64],
    arg_f32s: u64,
    extras: &'a [f64],
    extra_f32s: u64,
}

impl Function {
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
    /// use rlx::TensorType;
    /// use rlx::runtime::function::{Function, Transform};
    /// use rlx::{Graph, Result};
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
    #[inline]
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
        // (A wrong argument count is declined there: the code takes exactly
        // its plan's inputs, the parameters; the general path reports it.)
        if extras.is_empty() && self.run_pinned::<S>(t, args, arg_f32s, out) {
            return Ok(true);
        }
        // The general path on a copy: `args` is usually the caller's local
        // array, and the direct call above takes its elements in registers
        // only if no reference to it goes further (see `on_copy`).
        on_copy(args, |args| {
            let numbers = Numbers {
                args,
                arg_f32s,
                extras,
                extra_f32s,
            };
            self.run_numbers_general(t, &numbers, statics, tracer, out)
        })
    }

    /// [`Function::run_numbers`] through the plan cache (what the pinned
    /// entry does not serve).
    #[inline(never)]
    fn run_numbers_general<S: StaticArg>(
        &self,
        t: Transform,
        numbers: &Numbers<'_>,
        statics: &S,
        tracer: Tracer<S>,
        out: &mut [f64],
    ) -> Result<bool> {
        let &Numbers {
            args,
            arg_f32s,
            extras,
            extra_f32s,
        } = numbers;
        let n = args.len();
        if n != self.params.len() {
            return Err(self.count_mismatch(n));
        }
        // The closure returns a byte and leaves an error in `failed`: a full
        // `Result<bool>` would be copied through memory at every level.
        let mut failed = None;
        let mut run = |entry: &Arc<Entry>| -> Option<bool> {
            let ran = self.plan(entry, t).and_then(|plan| {
                // Numbers are never traced: inside a trace too, the call
                // computes its results (constants of the caller's trace).
                if plan.extras_f32s != Some((extras.len(), extra_f32s)) {
                    return Ok(false);
                }
                let exe = self.executable(plan)?;
                let ran = exe.run_scalar_into(args, extras, out);
                if ran && debug_nans() {
                    let n = plan.graph()?.outputs().len().min(out.len());
                    if out[..n].iter().any(|v| !v.is_finite()) {
                        let (args, extras) = (
                            numbers_as_args(args, arg_f32s),
                            numbers_as_args(extras, extra_f32s),
                        );
                        return Err(self.non_finite(entry, t, plan, &args, &extras));
                    }
                }
                Ok(ran)
            });
            if ran.is_ok() {
                // Without static arguments, this is the one entry of these
                // number types: later calls go straight to it.
                self.pin::<S>(t, entry);
                self.pin_direct::<S>(t);
            }
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

    /// The first step of [`Function::run_numbers`] on its own, for a call
    /// without extras: runs the pinned entry's native code on `args` into
    /// `out` and returns `true`, or returns `false`, running nothing, when
    /// that cannot serve the call (no pinned native code for these number
    /// types, static arguments other than `()`, the check of non-finite
    /// values on); the caller then calls [`Function::run_numbers`], which
    /// gives the same results. `statics` only names the type of the static arguments.
    ///
    /// A companion tries this first and runs everything else out of line
    /// ([`out_of_line`](super::out_of_line)), so that its warm path keeps
    /// nothing alive across the native call but where its results go.
    ///
    /// ```
    /// use rlx::TensorType;
    /// use rlx::runtime::function::{Function, Transform};
    /// use rlx::{Graph, Result};
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
    /// let mut out = [0.0; 2];
    /// // Nothing is pinned before the first call.
    /// assert!(!SQUARE.run_pinned_numbers(Transform::Grad, &[3.0], 0, &(), &mut out));
    /// let ran = SQUARE.run_numbers(Transform::Grad, &[3.0], 0, &[], 0, &(), trace, &mut out);
    /// assert!(ran.unwrap());
    /// // Later calls may be served by the pinned native code (when the
    /// // plan compiled to one native function), with the same results.
    /// let mut again = [0.0; 2];
    /// if SQUARE.run_pinned_numbers(Transform::Grad, &[3.0], 0, &(), &mut again) {
    ///     assert_eq!(again, out);
    /// }
    /// ```
    #[inline]
    pub fn run_pinned_numbers<S: StaticArg>(
        &self,
        t: Transform,
        args: &[f64],
        arg_f32s: u64,
        statics: &S,
        out: &mut [f64],
    ) -> bool {
        let _ = statics;
        self.run_pinned::<S>(t, args, arg_f32s, out)
    }

    /// The warm number path of a call without static arguments or extras: the
    /// arguments' types are then fixed by their count and `f32` mask, so
    /// the first entry that served transform `t` is pinned
    /// ([`Function::pinned`]) and a later call with the same types runs its
    /// native code directly, with no thread-local table, no signature
    /// comparison and no lock. `false` when it cannot serve the call (no
    /// pinned entry, other types, static arguments, a plan that is not one
    /// native function over the numbers in order, the check of non-finite
    /// values on); the general path then does, with the same results.
    /// The pinned entry's plan is reached through its [`NumberPin`] record,
    /// made when it was pinned: one mask and the code's lengths are
    /// compared (the entry's, plan's and executable's checks were about a
    /// third of a warm `grad_` of six numbers outside the native code).
    /// Static arguments other than `()` always take the general path.
    ///
    /// A pinned entry stays alive as long as the function (a `static`),
    /// even if the plan cache evicts it: one signature per transform.
    #[inline]
    fn run_pinned<S: StaticArg>(
        &self,
        t: Transform,
        args: &[f64],
        arg_f32s: u64,
        out: &mut [f64],
    ) -> bool {
        if !no_statics::<S>() {
            return false;
        }
        match self.direct[t.index()].get() {
            Some(d) if d.f32s == arg_f32s && known_off() => d.call.call_local(args, out),
            _ => false,
        }
    }

    /// Records the [`Direct`] call of transform `t`'s pinned entry, once,
    /// if its plan is one native function over numbers without extras
    /// ([`crate::compile::Executable::direct_call`]) and its static
    /// arguments are `()`; otherwise nothing, and [`Function::run_pinned`]
    /// declines every call, as it did.
    #[cold]
    fn pin_direct<S: StaticArg>(&self, t: Transform) {
        let slot = &self.direct[t.index()];
        if !no_statics::<S>() || slot.get().is_some() {
            return;
        }
        let Some(entry) = self.pinned[t.index()].get() else {
            return;
        };
        let (Some(f32s), Some(plan)) = (entry.f32s, entry.plans[t.index()].get()) else {
            return;
        };
        match plan.exe.get().and_then(|e| e.direct_call()) {
            Some(call)
                if plan.extras_f32s == Some((0, 0)) && entry.statics_type == TypeId::of::<()>() =>
            {
                let _ = slot.set(NumberPin { f32s, call });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;
    use crate::value::Value;
    use rlx_core::TensorType;
    use rlx_core::{Error, Graph};

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
        // A plan with extras has no `NumberPin` record (the pinned path
        // declines calls with extras).
        assert!(F.direct[Transform::Jvp.index()].get().is_none());
    }

    static G: Function = Function::new("g", &["x", "y"], &[0, 1]);

    fn run_g(t: Transform, x: f64, y: f64, f32s: u64, out: &mut [f64]) -> bool {
        G.run_numbers(t, &[x, y], f32s, &[], 0, &(), tracer, out)
            .unwrap()
    }

    #[test]
    fn a_pinned_entry_gives_the_bits_of_the_general_path() {
        let pinned = |t: Transform| G.pinned[t.index()].get().is_some();
        assert!(!pinned(Transform::Grad));
        let mut out = [0.0; 3];
        assert!(run_g(Transform::Grad, 0.5, -2.0, 0, &mut out));
        assert!(
            pinned(Transform::Grad),
            "a call without statics pins its entry"
        );
        // The pinned plan is one native function over the numbers in order.
        #[cfg(feature = "jit")]
        {
            let entry = G.pinned[Transform::Grad.index()].get().unwrap();
            let plan = entry.plans[Transform::Grad.index()].get().unwrap();
            let exe = plan.exe.get().unwrap();
            assert!(exe.run_direct(&[0.5, -2.0], &mut [0.0; 3]));
            assert!(!exe.run_direct(&[0.5], &mut [0.0; 3]));
            // Its `NumberPin` record calls the same code, with the same checks.
            let d = G.direct[Transform::Grad.index()].get().expect("recorded");
            assert_eq!(d.f32s, 0);
            let (mut a, mut b) = ([0.0; 3], [0.0; 3]);
            assert!(d.call.call(&[0.5, -2.0], &mut a));
            assert!(exe.run_direct(&[0.5, -2.0], &mut b));
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits));
            assert!(!d.call.call(&[0.5], &mut a));
            assert!(!d.call.call(&[0.5, -2.0], &mut [0.0; 2]));
            // The companions' first step serves the call, with those bits.
            let mut c = [0.0; 3];
            assert!(G.run_pinned_numbers(Transform::Grad, &[0.5, -2.0], 0, &(), &mut c));
            assert_eq!(c.map(f64::to_bits), b.map(f64::to_bits));
            // Other number types, lengths or statics: declined, nothing run.
            assert!(!G.run_pinned_numbers(Transform::Grad, &[0.5, -2.0], 0b01, &(), &mut c));
            assert!(!G.run_pinned_numbers(Transform::Grad, &[0.5], 0, &(), &mut c));
            assert!(!G.run_pinned_numbers(Transform::Grad, &[0.5, -2.0], 0, &(1,), &mut c));
        }
        assert!(!pinned(Transform::Hessian));
        for (x, y) in [(0.5, -2.0), (1.25, 3.0), (-0.75, 0.1), (0.0, 0.0)] {
            let mut fast = [0.0; 3];
            assert!(run_g(Transform::Grad, x, y, 0, &mut fast));
            let want = G
                .run(
                    Transform::Grad,
                    &[Arg::F64(x), Arg::F64(y)],
                    &[],
                    &(),
                    tracer,
                )
                .unwrap();
            let want: Vec<f64> = want.into_iter().map(|v| v.into_f64().unwrap()).collect();
            assert_eq!(
                fast.map(f64::to_bits).to_vec(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
        // Other number types after the pin: the general path, its results.
        let mut narrow = [0.0; 3];
        assert!(run_g(Transform::Grad, 0.5, -2.0, 0b11, &mut narrow));
        let want = G
            .run(
                Transform::Grad,
                &[Arg::F32(0.5), Arg::F32(-2.0)],
                &[],
                &(),
                tracer,
            )
            .unwrap();
        for (got, want) in narrow.iter().zip(want) {
            assert_eq!(*got as f32, want.into_f32().unwrap());
        }
        // A result buffer of the wrong length is still declined, and a
        // wrong argument count after the pin is the general path's error.
        assert!(!run_g(Transform::Grad, 0.5, -2.0, 0, &mut [0.0; 2]));
        let short = G.run_numbers(
            Transform::Grad,
            &[0.5],
            0,
            &[],
            0,
            &(),
            tracer,
            &mut [0.0; 3],
        );
        assert!(matches!(
            short,
            Err(Error::CountMismatch {
                expected: 2,
                got: 1,
                ..
            })
        ));
        // The Hessian pins its own entry, on its first call.
        let mut h = [0.0; 5];
        assert!(run_g(Transform::Hessian, 0.5, -2.0, 0, &mut h));
        assert!(pinned(Transform::Hessian));
    }

    /// `sin(x · y) · s` for a static scale `s`.
    fn scaled(types: &[TensorType], s: &(i32,)) -> Result<Graph> {
        let mut g = Graph::new();
        let x = g.input("x", types[0].shape.clone(), types[0].dtype);
        let y = g.input("y", types[1].shape.clone(), types[1].dtype);
        let p = g.mul(x, y)?;
        let e = g.sin(p)?;
        let k = g.scalar(f64::from(s.0), types[0].dtype);
        let e = g.mul(e, k)?;
        g.set_outputs(vec![e]);
        Ok(g)
    }

    #[test]
    fn calls_with_static_arguments_pin_nothing() {
        static H: Function = Function::new("h", &["x", "y"], &[0, 1]);
        for s in [1, 3, 1] {
            let mut out = [0.0; 3];
            let ran = H.run_numbers(
                Transform::Grad,
                &[0.5, 2.0],
                0,
                &[],
                0,
                &(s,),
                scaled,
                &mut out,
            );
            assert!(ran.unwrap());
            assert_eq!(out[0], (0.5f64 * 2.0).sin() * f64::from(s));
        }
        assert!(H.pinned.iter().all(|p| p.get().is_none()));
        assert!(H.direct.iter().all(|d| d.get().is_none()));
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

    /// Static arguments of a zero-sized type other than `()`.
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Tag;

    fn tagged(types: &[TensorType], _: &Tag) -> Result<Graph> {
        tracer(types, &())
    }

    static H: Function = Function::new("h", &["x", "y"], &[0, 1]);

    #[test]
    fn only_unit_statics_get_a_direct_record() {
        let (x, y) = (0.75, 1.5);
        let want = general(Transform::Grad, &[Arg::F64(x), Arg::F64(y)], &[]).unwrap();
        // Zero-sized statics other than `()` pin their entry but make no
        // `NumberPin` record: every call takes the general path, with its results.
        for _ in 0..2 {
            let mut out = [0.0; 3];
            let ran = H.run_numbers(Transform::Grad, &[x, y], 0, &[], 0, &Tag, tagged, &mut out);
            assert!(ran.unwrap());
            assert_eq!(out.to_vec(), want);
        }
        assert!(H.direct[Transform::Grad.index()].get().is_none());
        // A later call with `()` still gets its own entry's results (and the
        // pinned `Tag` entry never serves it).
        let mut out = [0.0; 3];
        let ran = H.run_numbers(Transform::Grad, &[x, y], 0, &[], 0, &(), tracer, &mut out);
        assert!(ran.unwrap());
        assert_eq!(out.to_vec(), want);
        assert!(!H.run_pinned::<()>(Transform::Grad, &[x, y], 0, &mut out));
    }
}
