//! The warm path of a companion over small tensors
//! ([`Function::run_small`]): a call whose arguments have the types of
//! the entry its transform pinned runs that entry's scalarised plan
//! directly, with no plan lookup and no list of results.

use std::any::TypeId;
use std::sync::Arc;

use rlx_core::DType;

use crate::compile::{Flat, SmallRun};
use crate::debug_nans::debug_nans;
use crate::function::cache::{Entry, Function, StaticArg};
use crate::function::pins::{fits, SmallPin};
use crate::function::transform::Transform;
use crate::trace;
use crate::value::Arg;

impl Function {
    /// The warm call of a companion (or the plain call) over small tensors
    /// and numbers: when `args` and `extras` have the shapes and dtypes of
    /// the entry transform `t` pinned (the first it ran, for a function
    /// without static arguments) and that plan is scalarised (every value
    /// small, see [`crate::compile::Options::scalarize`]), runs it and
    /// returns what `build` makes of its outputs after the first `skip`
    /// ([`Flat`]: each taken as a number or a new tensor, so a call
    /// allocates only the tensors it returns). The arguments' storage is
    /// read directly (a single `f64` tensor in place) and a single `f64`
    /// tensor result is written straight into its own values.
    ///
    /// `None`, having run nothing (or, if `build` declined, having built
    /// nothing it returns), for every call it does not serve: no pinned
    /// entry yet, other types, traced arguments, static arguments, an
    /// active trace, the check of non-finite values on, a plan that is not
    /// scalarised. The caller then takes [`Function::run`], which returns
    /// the same results, bit for bit (the same native code runs), and every
    /// error. The check costs a comparison of each argument's dtype and
    /// dimensions with the pinned types: no hashing, no thread-local
    /// table, no lock.
    ///
    /// ```
    /// use rlx::runtime::function::{Function, Transform};
    /// use rlx::TensorType;
    /// use rlx::{Arg, Graph, Result, Tensor};
    ///
    /// fn trace(types: &[TensorType], _: &()) -> Result<Graph> {
    ///     let mut g = Graph::new();
    ///     let x = g.input("x", types[0].shape.clone(), types[0].dtype);
    ///     let y = g.sin(x)?;
    ///     g.set_outputs(vec![y]);
    ///     Ok(g)
    /// }
    /// static SINE: Function = Function::new("sine", &["x"], &[0]);
    ///
    /// let x = Tensor::from_slice(&[0.0, 1.0], [2]);
    /// let call = |x: &Tensor| SINE.run_small(Transform::Call, &[Arg::from(x)], &[], &(), 0, |it| it.tensor());
    /// assert!(call(&x).is_none(), "nothing pinned before the first call");
    /// SINE.run(Transform::Call, &[Arg::from(&x)], &[], &(), trace).unwrap();
    /// let y = call(&x).unwrap();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.0, 1f64.sin()]);
    /// // Another shape: declined (the general path serves it).
    /// assert!(call(&Tensor::from_slice(&[0.0; 3], [3])).is_none());
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn run_small<S: StaticArg, R>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
        statics: &S,
        skip: usize,
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        if std::mem::size_of::<S>() != 0 {
            return None;
        }
        if let Some(d) = self.small[t.index()].get() {
            if d.call.serves(skip) {
                if d.statics != TypeId::of::<S>() || debug_nans() || trace::is_tracing() {
                    return None;
                }
                if let Some(ins) = d.in_place(args, extras) {
                    return d.call.run_in_place(ins, skip, build);
                }
                if !d.fits(args, extras) {
                    return None;
                }
                return d.call.run(args, extras, skip, build);
            }
        }
        let entry = self.pinned[t.index()].get()?;
        let plan = entry.plans[t.index()].get()?;
        let exe = plan.exe.get()?;
        if args.len() != entry.types.len()
            || extras.len() != plan.extras.len()
            || !entry.same_statics(statics)
        {
            return None;
        }
        // Plain loops: an iterator's `all` was outlined (a call and about
        // 35 instructions per list, for one argument).
        for (a, ty) in args.iter().zip(&entry.types) {
            if !fits(a, ty) {
                return None;
            }
        }
        for (a, (_, ty)) in extras.iter().zip(&plan.extras) {
            if !fits(a, ty) {
                return None;
            }
        }
        if debug_nans() || trace::is_tracing() {
            return None;
        }
        exe.run_small(args, extras, skip, build)
    }

    /// The warm call of [`Function::run_small`] as a handle, when it is
    /// served by transform `t`'s direct call on a single `f64` tensor
    /// argument (the common companion of one tensor) in the caller's
    /// frame (outputs of at most 16 elements, or a single `f64` tensor
    /// output): every check made,
    /// so that [`SmallRun::run`] returns what its `build` returns, in
    /// tail position. A companion's `build` then returns the companion's
    /// own result, built where the companion returns it (see
    /// [`SmallRun::run`]). `None` for every other call, which then takes
    /// [`Function::run_small`] or the general path.
    ///
    /// ```
    /// use rlx::runtime::function::{Function, Transform};
    /// use rlx::{DType, TensorType};
    /// use rlx::{Arg, Graph, Result, Tensor};
    ///
    /// fn trace(types: &[TensorType], _: &()) -> Result<Graph> {
    ///     let mut g = Graph::new();
    ///     let x = g.input("x", types[0].shape.clone(), types[0].dtype);
    ///     let y = g.mul(x, x)?;
    ///     let s = g.sum_all(y)?;
    ///     g.set_outputs(vec![s]);
    ///     Ok(g)
    /// }
    /// static SQUARES: Function = Function::new("squares", &["x"], &[0]);
    ///
    /// let x = Tensor::from_slice(&[1.0, 2.0, 3.0], [3]);
    /// let args = [Arg::from(&x)];
    /// let ready = |skip| SQUARES.small_direct(Transform::Grad, &args, &[], &(), skip);
    /// assert!(ready(0).is_none(), "nothing pinned before the first call");
    /// SQUARES.run(Transform::Grad, &args, &[], &(), trace).unwrap();
    /// // The value and the gradient, as the companion's own result type.
    /// let got: Result<(f64, Tensor), &str> = ready(0).unwrap().run(|it| {
    ///     let v = it.number(DType::F64).ok_or("general path")?;
    ///     Ok((v, it.tensor().ok_or("general path")?))
    /// });
    /// let (value, grad) = got.unwrap();
    /// assert_eq!(value, 14.0);
    /// assert_eq!(grad.to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
    /// ```
    #[inline(always)]
    pub fn small_direct<'a, S: StaticArg>(
        &'a self,
        t: Transform,
        args: &'a [Arg<'_>],
        extras: &[Arg<'_>],
        statics: &S,
        skip: usize,
    ) -> Option<SmallRun<'a>> {
        let _ = statics;
        if std::mem::size_of::<S>() != 0 {
            return None;
        }
        // Only `()` statics have a direct call (`pin_small`): a check the
        // compiler makes, where comparing the pinned type took six
        // instructions a call.
        if TypeId::of::<S>() != TypeId::of::<()>() {
            return None;
        }
        let d = self.small[t.index()].get()?;
        // `ready` checks that the outputs lie in the code's window.
        if debug_nans() || trace::is_tracing() {
            return None;
        }
        let ins = d.in_place(args, extras)?;
        d.call.ready(ins, skip)
    }

    /// Pins `entry` for transform `t` if nothing is pinned there yet and
    /// the function has no static arguments (then the arguments' types
    /// alone identify the entry): later calls with its types may go
    /// straight to its plan ([`Function::run_small`], and for numbers
    /// [`Function::run_numbers`]). A pinned entry lives as long as the
    /// function (a `static`), even if the plan cache evicts it: at most
    /// one per transform.
    #[inline]
    pub(super) fn pin<S: StaticArg>(&self, t: Transform, entry: &Arc<Entry>) {
        if std::mem::size_of::<S>() == 0 {
            self.pinned[t.index()].get_or_init(|| entry.clone());
        }
    }

    /// Records the [`SmallPin`] call of transform `t`'s pinned entry, once,
    /// if its static arguments are `()` (a function without any: the only
    /// ones [`Function::small_direct`] serves) and its plan is scalarised
    /// with native code a [`SmallCall`] can hold
    /// ([`crate::compile::Executable::small_call`]); otherwise nothing,
    /// and [`Function::run_small`] reaches the plan through the entry.
    #[cold]
    pub(super) fn pin_small<S: StaticArg>(&self, t: Transform) {
        let slot = &self.small[t.index()];
        if TypeId::of::<S>() != TypeId::of::<()>() || slot.get().is_some() {
            return;
        }
        let Some(entry) = self.pinned[t.index()].get() else {
            return;
        };
        if entry.statics_type != TypeId::of::<()>() {
            return;
        }
        let Some(plan) = entry.plans[t.index()].get() else {
            return;
        };
        if let Some(call) = plan.exe.get().and_then(|e| e.small_call()) {
            let single_f64 = matches!(&entry.types[..], [ty] if ty.dtype == DType::F64)
                && plan.extras.is_empty();
            let _ = slot.set(SmallPin {
                single_f64,
                args: entry.types.clone().into(),
                extras: plan.extras.iter().map(|(_, ty)| ty.clone()).collect(),
                statics: entry.statics_type,
                call,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use crate::trace::Trace;
    use crate::value::Value;
    use rlx_core::TensorType;
    use rlx_core::{DType, Graph, Result};

    /// `Σ sin(x · y) + x₀ · y` over a vector `x` and a number `y`.
    fn tracer(types: &[TensorType], _: &()) -> Result<Graph> {
        let mut g = Graph::new();
        let x = g.input("x", types[0].shape.clone(), types[0].dtype);
        let y = g.input("y", types[1].shape.clone(), types[1].dtype);
        let p = g.mul(x, y)?;
        let s = g.sin(p)?;
        let s = g.sum_all(s)?;
        let x0 = g.slice_range(x, 0..1, 0)?;
        let x0 = g.sum_all(x0)?;
        let q = g.mul(x0, y)?;
        let e = g.add(s, q)?;
        g.set_outputs(vec![e]);
        Ok(g)
    }

    /// Every output's bits (numbers as one element).
    fn bits(values: impl IntoIterator<Item = Value>) -> Vec<Vec<u64>> {
        let one = |v: Value| match v {
            Value::Tensor(t) => t.to_f64_vec().unwrap(),
            Value::F64(v) => vec![v],
            Value::F32(v) => vec![f64::from(v)],
        };
        let to_bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect();
        values.into_iter().map(one).map(to_bits).collect()
    }

    /// Every output after `skip`, each taken as a tensor.
    fn all_tensors(it: &mut Flat<'_>) -> Option<Vec<Value>> {
        let mut out = Vec::new();
        while let Some(t) = it.tensor() {
            out.push(Value::Tensor(t));
        }
        Some(out)
    }

    /// The extras transform `t` takes, for `x` of `n` elements.
    fn extras(t: Transform, n: usize) -> Vec<Arg<'static>> {
        let v = Box::leak(Box::new(Tensor::from_vec(
            (0..n).map(|i| 0.25 - 0.5 * i as f64).collect::<Vec<_>>(),
            [n],
        )));
        match t {
            Transform::Jvp | Transform::Hvp => vec![Arg::Tensor(v), Arg::F64(-0.75)],
            Transform::Vjp => vec![Arg::F64(1.5)],
            _ => vec![],
        }
    }

    const DENSE: [Transform; 8] = [
        Transform::Call,
        Transform::Grad,
        Transform::GradOnly,
        Transform::Jvp,
        Transform::Vjp,
        Transform::Jacobian,
        Transform::Hessian,
        Transform::Hvp,
    ];

    #[test]
    fn a_pinned_small_plan_gives_the_bits_of_the_general_path() {
        static F: Function = Function::new("f", &["x", "y"], &[0, 1]);
        let x = Tensor::from_slice(&[0.5, -1.25, 2.0], [3]);
        for t in DENSE {
            let ex = extras(t, 3);
            for y in [0.75, -2.5] {
                let args = [Arg::from(&x), Arg::F64(y)];
                let run = |skip| F.run_small(t, &args, &ex, &(), skip, all_tensors);
                if F.pinned[t.index()].get().is_none() {
                    assert!(run(0).is_none(), "{t:?}: nothing pinned yet");
                }
                let want = F.run(t, &args, &ex, &(), tracer).unwrap();
                let n_out = want.len();
                assert!(F.pinned[t.index()].get().is_some(), "{t:?}: pinned");
                let want = bits(want);
                let got = run(0).unwrap_or_else(|| panic!("{t:?}: served"));
                assert_eq!(bits(got), want, "{t:?}");
                // Without the function's own output (built or not).
                let got = run(1).unwrap();
                assert_eq!(bits(got), want[1..], "{t:?}, skipping the value");
                assert!(run(n_out).unwrap().is_empty());
            }
        }
    }

    /// Each output's dtype (numbers by their type).
    fn dtypes(values: &[Value]) -> Vec<DType> {
        let one = |v: &Value| match v {
            Value::Tensor(t) => t.dtype(),
            Value::F64(_) => DType::F64,
            Value::F32(_) => DType::F32,
        };
        values.iter().map(one).collect()
    }

    #[test]
    fn f32_and_shared_results_give_the_bits_of_the_general_path() {
        // `f32` results (rounded back out of line), and `f64` results too
        // large to own their values (shared, out of line, from a window
        // larger than the one a warm call keeps in its own frame).
        static F32S: Function = Function::new("f32s", &["x", "y"], &[0, 1]);
        static WIDE: Function = Function::new("wide", &["x", "y"], &[0, 1]);
        let x32 = Tensor::from_slice(&[0.5f32, -1.25, 2.0], [3]);
        let wide: Vec<f64> = (0..20).map(|i| 0.1 * f64::from(i) - 0.7).collect();
        let xw = Tensor::from_vec(wide, [20]);
        let cases = [
            (&F32S, &x32, Arg::F32(0.75), &DENSE[..]),
            (
                &WIDE,
                &xw,
                Arg::F64(0.75),
                &[Transform::Call, Transform::Grad][..],
            ),
        ];
        for (f, x, y, transforms) in cases {
            for &t in transforms {
                let ex = match t {
                    Transform::Jvp | Transform::Hvp | Transform::Vjp => continue,
                    _ => extras(t, 0),
                };
                let args = [Arg::from(x), y];
                let want = f.run(t, &args, &ex, &(), tracer).unwrap();
                let got = f.run_small(t, &args, &ex, &(), 0, all_tensors);
                let got = got.unwrap_or_else(|| panic!("{t:?}: served"));
                assert_eq!(dtypes(&got), dtypes(&want), "{t:?}");
                assert_eq!(bits(got), bits(want), "{t:?}");
            }
        }
    }

    #[test]
    fn numbers_are_taken_as_numbers_and_mismatches_decline() {
        static G: Function = Function::new("g", &["x", "y"], &[0, 1]);
        let x = Tensor::from_slice(&[0.5, -1.25], [2]);
        let args = [Arg::from(&x), Arg::F64(0.5)];
        let want = G.run(Transform::Grad, &args, &[], &(), tracer).unwrap();
        let want = bits(want);
        // The value and `∂y` are numbers, `∂x` a tensor.
        let got = G.run_small(Transform::Grad, &args, &[], &(), 0, |it| {
            let v = it.number(DType::F64)?;
            let gx = it.tensor()?;
            let gy = it.number(DType::F64)?;
            Some(vec![Value::F64(v), Value::Tensor(gx), Value::F64(gy)])
        });
        assert_eq!(bits(got.unwrap()), want);
        // A number of the wrong dtype, a tensor taken as a number: declined.
        let wrong = |it: &mut Flat<'_>| it.number(DType::F32);
        assert!(G
            .run_small(Transform::Grad, &args, &[], &(), 0, wrong)
            .is_none());
        let wrong = |it: &mut Flat<'_>| it.number(DType::F64);
        assert!(G
            .run_small(Transform::Grad, &args, &[], &(), 1, wrong)
            .is_none());
        // Past the last output.
        let past = |it: &mut Flat<'_>| {
            for _ in 0..3 {
                it.tensor()?;
            }
            it.tensor()
        };
        assert!(G
            .run_small(Transform::Grad, &args, &[], &(), 0, past)
            .is_none());
    }

    /// `Σ sin(x) · x₀` over one vector `x`.
    fn single(types: &[TensorType], _: &()) -> Result<Graph> {
        let mut g = Graph::new();
        let x = g.input("x", types[0].shape.clone(), types[0].dtype);
        let s = g.sin(x)?;
        let s = g.sum_all(s)?;
        let x0 = g.slice_range(x, 0..1, 0)?;
        let x0 = g.sum_all(x0)?;
        let e = g.mul(s, x0)?;
        g.set_outputs(vec![e]);
        Ok(g)
    }

    #[test]
    fn a_single_f64_tensor_is_checked_and_read_in_place_with_the_general_bits() {
        // One `f64` tensor and no extras: `SmallPin::in_place` checks and
        // reads it in one step (`SmallCall::run_in_place`), instead of
        // `SmallPin::fits` then `SmallCall::run`.
        static S1: Function = Function::new("s1", &["x"], &[0]);
        let x = Tensor::from_slice(&[0.5, -1.25, 2.0], [3]);
        let args = [Arg::from(&x)];
        for t in [Transform::Call, Transform::Grad, Transform::Hessian] {
            let want = S1.run(t, &args, &[], &(), single).unwrap();
            let d = S1.small[t.index()].get().expect("a direct call");
            assert!(d.single_f64, "{t:?}");
            assert!(d.in_place(&args, &[]).is_some(), "{t:?}");
            let got = S1.run_small(t, &args, &[], &(), 0, all_tensors);
            assert_eq!(bits(got.expect("served")), bits(want), "{t:?}");
        }
        // Other arguments are not read in place, and are declined.
        let longer = Tensor::from_slice(&[0.5, -1.25, 2.0, 1.0], [4]);
        let column = Tensor::from_slice(&[0.5, -1.25, 2.0], [3, 1]);
        let x32 = Tensor::from_slice(&[0.5f32, -1.25, 2.0], [3]);
        let d = S1.small[Transform::Grad.index()].get().unwrap();
        for other in [&longer, &column, &x32] {
            let args = [Arg::from(other)];
            assert!(d.in_place(&args, &[]).is_none());
            let got = S1.run_small(Transform::Grad, &args, &[], &(), 0, all_tensors);
            assert!(got.is_none());
        }
        assert!(d.in_place(&[Arg::F64(0.5)], &[]).is_none());
        assert!(d.in_place(&[Arg::from(&x), Arg::F64(0.5)], &[]).is_none());
    }

    #[test]
    fn a_ready_direct_call_gives_the_bits_of_the_general_path() {
        // `Function::small_direct` then `SmallRun::run`: the path of the
        // common companion (one `f64` tensor), whose `build` returns the
        // companion's own result type (here a `Result`).
        static S2: Function = Function::new("s2", &["x"], &[0]);
        static S5: Function = Function::new("s5", &["x"], &[0]);
        let x = Tensor::from_slice(&[0.5, -1.25, 2.0], [3]);
        let args = [Arg::from(&x)];
        // Five elements: the Hessian's outputs (1 + 5 + 25 elements) do not
        // fit the caller's frame, except its last one alone (written
        // straight into its own values); declined otherwise, and served
        // by `run_small` with the same bits.
        let x5 = Tensor::from_slice(&[0.5, -1.25, 2.0, 0.75, -0.5], [5]);
        let args5 = [Arg::from(&x5)];
        for (f, args) in [(&S2, &args[..]), (&S5, &args5[..])] {
            for t in [Transform::Call, Transform::Grad, Transform::Hessian] {
                assert!(f.small_direct(t, args, &[], &(), 0).is_none(), "{t:?}");
                let want = bits(f.run(t, args, &[], &(), single).unwrap());
                for skip in 0..=want.len() {
                    let h = f.small_direct(t, args, &[], &(), skip);
                    // Served when the outputs lie in the code's window (all
                    // of them for a direct program, the last for placed
                    // code) and fit the caller's frame.
                    let call = &f.small[t.index()].get().unwrap().call;
                    let rest: usize = want[skip..].iter().map(Vec::len).sum();
                    let alone = skip + 1 == want.len() && call.window() == rest;
                    let fits = call.window() <= 16 || alone;
                    assert_eq!(h.is_some(), call.serves(skip) && fits, "{t:?}, skip {skip}");
                    let Some(h) = h else {
                        if call.serves(skip) {
                            let got = f.run_small(t, args, &[], &(), skip, all_tensors);
                            assert_eq!(bits(got.unwrap()), want[skip..], "{t:?}, skip {skip}");
                        }
                        continue;
                    };
                    let got: std::result::Result<_, &str> =
                        h.run(|it| all_tensors(it).ok_or("declined"));
                    assert_eq!(bits(got.unwrap()), want[skip..], "{t:?}, skip {skip}");
                }
                // A take that declines leaves the result to `build` (the
                // companion's general path).
                let last = want.len() - 1;
                let h = f.small_direct(t, args, &[], &(), last).unwrap();
                let got = h.run(|it| it.number(DType::F32).ok_or("general"));
                assert_eq!(got, Err("general"), "{t:?}");
            }
        }
        // Other arguments, a trace, the check of non-finite values: no
        // handle (the caller takes `run_small` or the general path).
        let x32 = Tensor::from_slice(&[0.5f32, -1.25, 2.0], [3]);
        let x4 = Tensor::from_slice(&[0.5; 4], [4]);
        for other in [&x32, &x4] {
            let args = [Arg::from(other)];
            assert!(S2
                .small_direct(Transform::Grad, &args, &[], &(), 0)
                .is_none());
        }
        let two = [Arg::from(&x), Arg::F64(0.5)];
        assert!(S2
            .small_direct(Transform::Grad, &two, &[], &(), 0)
            .is_none());
        assert!(S2
            .small_direct(Transform::Grad, &args, &[], &(), 3)
            .is_none());
        let trace = Trace::enter();
        assert!(S2
            .small_direct(Transform::Grad, &args, &[], &(), 0)
            .is_none());
        drop(trace);
        assert!(S2
            .small_direct(Transform::Grad, &args, &[], &(1,), 0)
            .is_none());
    }

    #[test]
    fn results_located_then_built_have_the_bits_of_the_general_path() {
        // The companion's two steps (`flat_locate` for every result, then
        // `flat_build` for each), in a pooled copy or the buffer the run
        // wrote straight (the five-element Hessian alone).
        use crate::compile::{flat_build, flat_locate};
        static S3: Function = Function::new("s3", &["x"], &[0]);
        static S6: Function = Function::new("s6", &["x"], &[0]);
        let x = Tensor::from_slice(&[0.5, -1.25, 2.0], [3]);
        let x5 = Tensor::from_slice(&[0.5, -1.25, 2.0, 0.75, -0.5], [5]);
        for (f, x) in [(&S3, &x), (&S6, &x5)] {
            let args = [Arg::from(x)];
            for t in [Transform::Call, Transform::Grad, Transform::Hessian] {
                let want = bits(f.run(t, &args, &[], &(), single).unwrap());
                let n = want.len();
                let mut served = 0;
                for skip in 0..=n {
                    let Some(h) = f.small_direct(t, &args, &[], &(), skip) else {
                        continue;
                    };
                    served += 1;
                    let got: std::result::Result<Vec<Value>, &str> = h.run(|it| {
                        let mut at = Vec::new();
                        for _ in skip..n {
                            at.push(flat_locate::<Tensor>(it).ok_or("declined")?);
                        }
                        assert!(flat_locate::<Tensor>(it).is_none(), "past the last");
                        let built = at.into_iter().map(|a| flat_build::<Tensor>(a, it));
                        Ok(built.map(Value::Tensor).collect())
                    });
                    assert_eq!(bits(got.unwrap()), want[skip..], "{t:?}, skip {skip}");
                }
                assert!(served > 0, "{t:?}");
            }
        }
        // The value as a number, then the gradient; a tensor located as a
        // number declines, taking nothing.
        let args = [Arg::from(&x)];
        let want = bits(S3.run(Transform::Grad, &args, &[], &(), single).unwrap());
        let h = S3
            .small_direct(Transform::Grad, &args, &[], &(), 0)
            .unwrap();
        let got = h.run(|it| {
            let v = flat_locate::<f64>(it)?;
            assert!(flat_locate::<f32>(it).is_none());
            assert!(flat_locate::<f64>(it).is_none());
            let g = flat_locate::<Tensor>(it)?;
            let (v, g) = (flat_build::<f64>(v, it), flat_build::<Tensor>(g, it));
            Some(vec![Value::F64(v), Value::Tensor(g)])
        });
        assert_eq!(bits(got.unwrap()), want);
    }

    #[test]
    fn other_signatures_traces_and_statics_decline() {
        static H: Function = Function::new("h", &["x", "y"], &[0, 1]);
        let x = Tensor::from_slice(&[0.5, -1.25, 2.0], [3]);
        let args = [Arg::from(&x), Arg::F64(0.5)];
        H.run(Transform::Grad, &args, &[], &(), tracer).unwrap();
        let run = |args: &[Arg<'_>], extras: &[Arg<'_>]| {
            H.run_small(Transform::Grad, args, extras, &(), 0, all_tensors)
        };
        assert!(run(&args, &[]).is_some());
        // Another shape, rank, dtype; a number of another dtype; a count.
        let x4 = Tensor::from_slice(&[0.5; 4], [4]);
        let x13 = Tensor::from_slice(&[0.5; 3], [1, 3]);
        let x32 = Tensor::from_slice(&[0.5f32; 3], [3]);
        for (other, ok) in [
            ([Arg::from(&x4), Arg::F64(0.5)], true),
            ([Arg::from(&x13), Arg::F64(0.5)], true),
            ([Arg::from(&x32), Arg::F32(0.5)], true),
            // `f64 · f32`: an error of the general path.
            ([Arg::from(&x), Arg::F32(0.5)], false),
        ] {
            assert!(run(&other, &[]).is_none());
            // The general path serves it (or reports its error), and the
            // pin stays.
            let general = H.run(Transform::Grad, &other, &[], &(), tracer);
            assert_eq!(general.is_ok(), ok);
            assert!(run(&other, &[]).is_none());
        }
        assert!(run(&args[..1], &[]).is_none());
        assert!(run(&args, &[Arg::F64(1.0)]).is_none());
        assert!(run(&args, &[]).is_some());
        // Inside a trace: a concrete argument, and a traced one.
        let trace = Trace::enter();
        assert!(run(&args, &[]).is_none());
        let traced = trace.input("x", [3], DType::F64);
        assert!(run(&[Arg::from(&traced), Arg::F64(0.5)], &[]).is_none());
        drop(trace);
        // A traced tensor outside its trace is declined too (the general
        // path refuses it with an error).
        assert!(run(&[Arg::from(&traced), Arg::F64(0.5)], &[]).is_none());
        // A plan that is not scalarised: declined.
        static BIG: Function = Function::new("big", &["x", "y"], &[0, 1]);
        let big = Tensor::from_vec(vec![0.5; 4096], [4096]);
        let args = [Arg::from(&big), Arg::F64(0.5)];
        BIG.run(Transform::Grad, &args, &[], &(), tracer).unwrap();
        assert!(BIG.pinned[Transform::Grad.index()].get().is_some());
        let r = BIG.run_small(Transform::Grad, &args, &[], &(), 0, all_tensors);
        assert!(r.is_none());
    }

    /// [`tracer`] scaled by a static factor.
    fn scaled(types: &[TensorType], s: &(i32,)) -> Result<Graph> {
        let mut g = tracer(types, &())?;
        let e = g.outputs()[0];
        let k = g.scalar(f64::from(s.0), types[0].dtype);
        let e = g.mul(e, k)?;
        g.set_outputs(vec![e]);
        Ok(g)
    }

    #[test]
    fn calls_with_static_arguments_pin_nothing_and_decline() {
        static S: Function = Function::new("s", &["x", "y"], &[0, 1]);
        let x = Tensor::from_slice(&[0.5, -1.25], [2]);
        let args = [Arg::from(&x), Arg::F64(0.5)];
        for s in [1, 3, 1] {
            S.run(Transform::Grad, &args, &[], &(s,), scaled).unwrap();
            let r = S.run_small(Transform::Grad, &args, &[], &(s,), 0, all_tensors);
            assert!(r.is_none());
        }
        assert!(S.pinned.iter().all(|p| p.get().is_none()));
    }
}
