//! Loops traced once: [`scan`] (JAX's `lax.scan`) and [`iterate`].
//!
//! Inside `#[differentiable]` code the closure is traced once, into the body
//! graph of one loop node ([`rlx::core::loops`](rlx_core::loops)), whatever the number of
//! steps: the first call costs the same for 10 steps or 10⁵, and the
//! companions differentiate the loop as a loop (reverse mode runs it
//! backwards with a bounded number of stored carries, see [`Scan::checkpoints`]).
//! On concrete tensors outside a trace the closure simply runs once per step.
//!
//! Carries, per-step inputs and per-step outputs are anything implementing
//! [`Tensors`]: a [`Tensor`], `()`, a tuple of up to four of them, or a `Vec`.
//! The closure may use tensors of the enclosing function (parameters,
//! earlier values): they become loop-invariant inputs of the body.
//!
//! Errors (a carry whose shape or dtype changes in the body, per-step inputs
//! of different lengths, a checkpoint budget outside `1..=T`) name the loop
//! with its source line. In traced code they are returned by the companion,
//! like every error of traced code; on concrete tensors [`scan`] panics with
//! them and [`Scan::try_run`] returns them.

use std::panic::Location;

use rlx_core::loops::{check_checkpoints, stacked};
use rlx_core::{Error, LoopOp, Op, Result, Shape, TensorType};

use crate::tensor::Tensor;
use crate::trace::{self, Trace};

/// A fixed structure of tensors: a loop's carry, per-step input or output.
pub trait Tensors: Sized {
    /// The tensors, in order.
    fn tensors(&self) -> Vec<Tensor>;
    /// A value shaped like `self` made of the next tensors of `from`.
    fn rebuild(&self, from: &mut dyn Iterator<Item = Tensor>) -> Self;
}

impl Tensors for Tensor {
    fn tensors(&self) -> Vec<Tensor> {
        vec![self.clone()]
    }
    fn rebuild(&self, from: &mut dyn Iterator<Item = Tensor>) -> Self {
        from.next().expect("one tensor per leaf")
    }
}

impl Tensors for () {
    fn tensors(&self) -> Vec<Tensor> {
        vec![]
    }
    fn rebuild(&self, _: &mut dyn Iterator<Item = Tensor>) -> Self {}
}

impl<T: Tensors> Tensors for Vec<T> {
    fn tensors(&self) -> Vec<Tensor> {
        self.iter().flat_map(Tensors::tensors).collect()
    }
    fn rebuild(&self, from: &mut dyn Iterator<Item = Tensor>) -> Self {
        self.iter().map(|t| t.rebuild(from)).collect()
    }
}

macro_rules! tuple_tensors {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Tensors),+> Tensors for ($($t,)+) {
            fn tensors(&self) -> Vec<Tensor> {
                let mut v = Vec::new();
                $(v.extend(self.$i.tensors());)+
                v
            }
            fn rebuild(&self, from: &mut dyn Iterator<Item = Tensor>) -> Self {
                ($(self.$i.rebuild(from),)+)
            }
        }
    };
}

tuple_tensors!(A 0);
tuple_tensors!(A 0, B 1);
tuple_tensors!(A 0, B 1, C 2);
tuple_tensors!(A 0, B 1, C 2, D 3);

/// Per-step inputs of a [`scan`]: tensors stacked along their first axis
/// (`Tensor` or `&Tensor`), `()`, tuples of up to four of them, or a `Vec`
/// or slice of tensors. The closure gets one step of them as [`PerStep::Step`].
pub trait PerStep {
    /// One step's slice: `Tensor` for `Tensor` and `&Tensor`, a tuple for a tuple.
    type Step: Tensors;
    /// The stacked tensors, in order.
    fn stacked(&self) -> Vec<Tensor>;
    /// One step's value made of the next tensors of `from`.
    fn step(&self, from: &mut dyn Iterator<Item = Tensor>) -> Self::Step;
}

impl PerStep for Tensor {
    type Step = Tensor;
    fn stacked(&self) -> Vec<Tensor> {
        vec![self.clone()]
    }
    fn step(&self, from: &mut dyn Iterator<Item = Tensor>) -> Tensor {
        from.next().expect("one tensor per leaf")
    }
}

impl<T: PerStep + ?Sized> PerStep for &T {
    type Step = T::Step;
    fn stacked(&self) -> Vec<Tensor> {
        (**self).stacked()
    }
    fn step(&self, from: &mut dyn Iterator<Item = Tensor>) -> T::Step {
        (**self).step(from)
    }
}

impl PerStep for () {
    type Step = ();
    fn stacked(&self) -> Vec<Tensor> {
        vec![]
    }
    fn step(&self, _: &mut dyn Iterator<Item = Tensor>) {}
}

impl<T: PerStep> PerStep for [T] {
    type Step = Vec<T::Step>;
    fn stacked(&self) -> Vec<Tensor> {
        self.iter().flat_map(PerStep::stacked).collect()
    }
    fn step(&self, from: &mut dyn Iterator<Item = Tensor>) -> Vec<T::Step> {
        self.iter().map(|t| t.step(from)).collect()
    }
}

impl<T: PerStep> PerStep for Vec<T> {
    type Step = Vec<T::Step>;
    fn stacked(&self) -> Vec<Tensor> {
        self.as_slice().stacked()
    }
    fn step(&self, from: &mut dyn Iterator<Item = Tensor>) -> Vec<T::Step> {
        self.as_slice().step(from)
    }
}

macro_rules! tuple_per_step {
    ($($t:ident $i:tt),+) => {
        impl<$($t: PerStep),+> PerStep for ($($t,)+) {
            type Step = ($($t::Step,)+);
            fn stacked(&self) -> Vec<Tensor> {
                let mut v = Vec::new();
                $(v.extend(self.$i.stacked());)+
                v
            }
            fn step(&self, from: &mut dyn Iterator<Item = Tensor>) -> Self::Step {
                ($(self.$i.step(from),)+)
            }
        }
    };
}

tuple_per_step!(A 0);
tuple_per_step!(A 0, B 1);
tuple_per_step!(A 0, B 1, C 2);
tuple_per_step!(A 0, B 1, C 2, D 3);

/// Settings of a loop: the checkpoint budget of its reverse mode and its
/// direction. [`scan`] and [`iterate`] use the defaults.
///
/// ```
/// use rlx::{Scan, Tensor};
/// // a running sum of the rows of xs, visited from the last one
/// let xs = Tensor::from_slice(&[1.0, 2.0, 3.0], [3]);
/// let (total, partial) = Scan::new()
///     .reverse(true)
///     .run(Tensor::scalar(0.0), &xs, |acc, x| {
///         let next = &acc + &x;
///         (next.clone(), next)
///     });
/// assert_eq!(total.item::<f64>().unwrap(), 6.0);
/// assert_eq!(partial.to_vec::<f64>().unwrap(), vec![6.0, 5.0, 3.0]);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Scan {
    checkpoints: Option<usize>,
    reverse: bool,
    length: Option<usize>,
}

impl Scan {
    /// The defaults: forward; every carry stored when the `T` carries take
    /// at most 16 MiB, else `⌈√T⌉` checkpoints
    /// ([`default_budget`](rlx_core::loops::default_budget)).
    pub fn new() -> Scan {
        Scan::default()
    }

    /// Reverse mode (`grad_`, `vjp_`, ...) stores at most `n` carries at once
    /// and recomputes the others from them (binomial checkpointing): `n = T`
    /// stores every carry and runs each step once more; `n = 1` stores only
    /// the first and recomputes `T²/2` steps; `⌈√T⌉` evaluates each step at
    /// most three times in the reverse sweep. The default is `T` when the
    /// carries fit in 16 MiB, else `⌈√T⌉`. Must be in `1..=T`.
    pub fn checkpoints(mut self, n: usize) -> Scan {
        self.checkpoints = Some(n);
        self
    }

    /// Visits the per-step inputs (and fills the per-step outputs) from the last.
    pub fn reverse(mut self, yes: bool) -> Scan {
        self.reverse = yes;
        self
    }

    /// The number of steps of [`Scan::run`], JAX's `length`: needed when
    /// there are no per-step inputs (`xs = ()`), which still allows per-step
    /// outputs; with per-step inputs it must equal their first axis.
    ///
    /// ```
    /// use rlx::{Scan, Tensor};
    /// // the first four powers of 2, stacked
    /// let (_, powers) = Scan::new().length(4).run(Tensor::scalar(1.0), (), |p, ()| {
    ///     let next = &p * 2.0;
    ///     (next.clone(), next)
    /// });
    /// assert_eq!(powers.to_vec::<f64>().unwrap(), vec![2.0, 4.0, 8.0, 16.0]);
    /// ```
    pub fn length(mut self, steps: usize) -> Scan {
        self.length = Some(steps);
        self
    }

    /// [`scan`] with these settings.
    #[track_caller]
    pub fn run<C: Tensors, X: PerStep, Y: Tensors>(
        &self,
        init: C,
        xs: X,
        mut f: impl FnMut(C, X::Step) -> (C, Y),
    ) -> (C, Y) {
        let loc = Location::caller();
        let mut g = |c: C, x: X::Step| Ok(f(c, x));
        unwrap(self.looped(init, xs, self.length, &mut g, loc), loc)
    }

    /// [`Scan::run`], returning errors instead of panicking on concrete tensors.
    #[track_caller]
    pub fn try_run<C: Tensors, X: PerStep, Y: Tensors>(
        &self,
        init: C,
        xs: X,
        mut f: impl FnMut(C, X::Step) -> (C, Y),
    ) -> Result<(C, Y)> {
        let loc = Location::caller();
        let mut g = |c: C, x: X::Step| Ok(f(c, x));
        let (r, _) = self.looped(init, xs, self.length, &mut g, loc);
        r.map_err(|e| e.at(loc.file(), loc.line(), loc.column()))
    }

    /// [`Scan::run`] with a fallible body (one that uses `?`, e.g. on
    /// [`root`](crate::solvers::root)): the body's first error is returned,
    /// in traced code as soon as the body is traced (the loop is then not
    /// recorded), on concrete tensors at the step that fails.
    ///
    /// ```
    /// use rlx::{root, Newton, Scan, Tensor};
    /// // backward Euler for x' = -x³: each step solves y + h y³ = x
    /// let (x, path) = Scan::new().length(3).run_fallible(Tensor::scalar(1.0), (), |x, ()| {
    ///     let y = root(|y| y + y * y * y * 0.1 - &x, &x, Newton::new().tol(1e-14))?;
    ///     Ok((y.clone(), y))
    /// }).unwrap();
    /// let y = x.item::<f64>().unwrap();
    /// assert!((y + 0.1 * y * y * y - path.to_vec::<f64>().unwrap()[1]).abs() < 1e-14);
    /// ```
    #[track_caller]
    pub fn run_fallible<C: Tensors, X: PerStep, Y: Tensors>(
        &self,
        init: C,
        xs: X,
        mut f: impl FnMut(C, X::Step) -> Result<(C, Y)>,
    ) -> Result<(C, Y)> {
        let loc = Location::caller();
        let (r, _) = self.looped(init, xs, self.length, &mut f, loc);
        r.map_err(|e| e.at(loc.file(), loc.line(), loc.column()))
    }

    /// [`iterate`] with these settings.
    #[track_caller]
    pub fn iterate<C: Tensors>(&self, init: C, steps: usize, mut f: impl FnMut(C) -> C) -> C {
        let loc = Location::caller();
        let mut g = |c: C, (): ()| Ok((f(c), ()));
        unwrap(self.looped(init, (), Some(steps), &mut g, loc), loc).0
    }

    /// [`Scan::iterate`], returning errors instead of panicking on concrete tensors.
    #[track_caller]
    pub fn try_iterate<C: Tensors>(
        &self,
        init: C,
        steps: usize,
        mut f: impl FnMut(C) -> C,
    ) -> Result<C> {
        let loc = Location::caller();
        let mut g = |c: C, (): ()| Ok((f(c), ()));
        let (r, _) = self.looped(init, (), Some(steps), &mut g, loc);
        r.map(|v| v.0)
            .map_err(|e| e.at(loc.file(), loc.line(), loc.column()))
    }

    /// The loop, and placeholders to go on tracing with after an error.
    fn looped<C: Tensors, X: PerStep, Y: Tensors>(
        &self,
        init: C,
        xs: X,
        steps: Option<usize>,
        f: &mut dyn FnMut(C, X::Step) -> Result<(C, Y)>,
        loc: &'static Location<'static>,
    ) -> Outcome<(C, Y)> {
        let api = if steps.is_some() && self.length.is_none() {
            "iterate"
        } else {
            "scan"
        };
        let name = format!(
            "`rlx::{api}` at {}:{}:{}",
            loc.file(),
            loc.line(),
            loc.column()
        );
        let carries = init.tensors();
        let xl = xs.stacked();
        let checked =
            length(&name, &xl, steps).and_then(|t| self.check_budget(&name, t).map(|()| t));
        if trace::is_tracing() {
            // Traced even after an error, for placeholders to go on tracing with.
            let call = Call {
                name: &name,
                carries: &carries,
                xl: &xl,
                length: checked.as_ref().map_or(1, |&t| t),
            };
            let (r, fallback) = self.traced(&call, init, xs, f, loc);
            match checked {
                Ok(_) => (r, fallback),
                Err(e) => {
                    let fallback = fallback.or_else(|| r.ok());
                    (Err(e), fallback)
                }
            }
        } else {
            match checked {
                Ok(length) => {
                    let call = Call {
                        name: &name,
                        carries: &carries,
                        xl: &xl,
                        length,
                    };
                    (self.eager(&call, init, xs, f), None)
                }
                Err(e) => (Err(e), None),
            }
        }
    }

    fn check_budget(&self, name: &str, length: usize) -> Result<()> {
        if length == 0 {
            return Err(Error::InvalidArgument {
                op: "scan",
                message: format!("{name}: a loop of 0 steps\n  = help: give at least one step"),
            });
        }
        match self.checkpoints {
            Some(n) => check_checkpoints(name, n, length),
            None => Ok(()),
        }
    }

    fn traced<C: Tensors, X: PerStep, Y: Tensors>(
        &self,
        call: &Call<'_>,
        init: C,
        xs: X,
        f: &mut dyn FnMut(C, X::Step) -> Result<(C, Y)>,
        loc: &'static Location<'static>,
    ) -> Outcome<(C, Y)> {
        let (name, carries, xl, length) = (call.name, call.carries, call.xl, call.length);
        let body = Trace::enter_body();
        let c_in: Vec<Tensor> = carries
            .iter()
            .enumerate()
            .map(|(i, c)| body.input(&format!("carry{i}"), c.shape().clone(), c.dtype()))
            .collect();
        let x_in: Vec<Tensor> = xl
            .iter()
            .enumerate()
            .map(|(j, x)| body.input(&format!("x{j}"), per_step(x.shape()), x.dtype()))
            .collect();
        let stepped = f(
            init.rebuild(&mut c_in.into_iter()),
            xs.step(&mut x_in.into_iter()),
        );
        // A failed body: its trace is dropped and nothing is recorded; the
        // error goes to the caller (only the fallible entry points have one).
        let (c_out, y) = match stepped {
            Ok(v) => v,
            Err(e) => {
                drop(body);
                return (Err(e), None);
            }
        };
        let mut outs = c_out.tensors();
        let y_list = y.tensors();
        let y_types: Vec<TensorType> = y_list.iter().map(|t| t.ty()).collect();
        outs.extend(y_list);
        let refs: Vec<&Tensor> = outs.iter().collect();
        let finished = body.finish_body(&refs);
        let placeholders = || {
            let c = c_out.rebuild(
                &mut carries
                    .iter()
                    .map(|c| Tensor::zeros(c.shape().clone(), c.dtype())),
            );
            let y = y.rebuild(
                &mut y_types
                    .iter()
                    .map(|t| Tensor::zeros(stacked(length, &t.shape), t.dtype)),
            );
            (c, y)
        };
        let result = (|| {
            let (graph, captured) = finished?;
            let l = LoopOp::scan(
                name,
                graph,
                carries.len(),
                xl.len(),
                length,
                self.reverse,
                self.checkpoints,
            )?;
            let segments = l.segments();
            let mut operands: Vec<&Tensor> = carries.iter().collect();
            operands.extend(xl);
            operands.extend(&captured);
            let packed = trace::record(Op::Loop(l), &operands, loc)?;
            let mut pieces = Vec::with_capacity(segments.len());
            let mut off = 0;
            for s in &segments {
                let n = s.shape.numel();
                pieces.push(
                    packed
                        .try_slice_range(off..off + n, 0)?
                        .try_reshape(s.shape.clone())?,
                );
                off += n;
            }
            let mut it = pieces.into_iter();
            Ok((c_out.rebuild(&mut it), y.rebuild(&mut it)))
        })();
        let fallback = result.is_err().then(placeholders);
        (result, fallback)
    }

    fn eager<C: Tensors, X: PerStep, Y: Tensors>(
        &self,
        call: &Call<'_>,
        init: C,
        xs: X,
        f: &mut dyn FnMut(C, X::Step) -> Result<(C, Y)>,
    ) -> Result<(C, Y)> {
        let (name, carries, xl, length) = (call.name, call.carries, call.xl, call.length);
        let types: Vec<TensorType> = carries.iter().map(|c| c.ty()).collect();
        let mut carry = init;
        let mut ys: Vec<Option<Vec<Tensor>>> = vec![None; length];
        let mut template = None;
        for t in 0..length {
            let s = if self.reverse { length - 1 - t } else { t };
            let mut x_t = Vec::with_capacity(xl.len());
            for x in xl {
                x_t.push(
                    x.try_slice_range(s..s + 1, 0)?
                        .try_reshape(per_step(x.shape()))?,
                );
            }
            let (next, y) = f(carry, xs.step(&mut x_t.into_iter()))?;
            let got: Vec<TensorType> = next.tensors().iter().map(|c| c.ty()).collect();
            if let Some(i) = (0..types.len()).find(|&i| got.get(i) != Some(&types[i])) {
                let g = got
                    .get(i)
                    .map_or("nothing".into(), |g| format!("{}{}", g.dtype, g.shape));
                return Err(Error::InvalidArgument {
                    op: "loop",
                    message: format!(
                        "{name}: carry {i} comes into the body as {}{} but the body returns it as {g}\n  = help: a carry must keep its shape and dtype from step to step; reshape or cast it in the body",
                        types[i].dtype, types[i].shape
                    ),
                });
            }
            ys[s] = Some(y.tensors());
            template = Some(y);
            carry = next;
        }
        let y = template.expect("at least one step");
        let rows: Vec<Vec<Tensor>> = ys.into_iter().map(|r| r.expect("every step ran")).collect();
        let mut stacked_ys = Vec::with_capacity(rows[0].len());
        for j in 0..rows[0].len() {
            let parts: Vec<Tensor> = rows
                .iter()
                .map(|r| r[j].try_reshape(stacked(1, r[j].shape())))
                .collect::<Result<_>>()?;
            let refs: Vec<&Tensor> = parts.iter().collect();
            stacked_ys.push(Tensor::try_concat(&refs, 0)?);
        }
        let y = y.rebuild(&mut stacked_ys.into_iter());
        Ok((carry, y))
    }
}

/// A loop's result, and after an error in traced code, placeholders to go
/// on tracing with.
type Outcome<T> = (Result<T>, Option<T>);

/// What `traced` and `eager` share: the loop's name, its initial carries and
/// per-step inputs as lists, its length.
#[derive(Clone, Copy)]
struct Call<'a> {
    name: &'a str,
    carries: &'a [Tensor],
    xl: &'a [Tensor],
    length: usize,
}

/// The shape of one step's slice of a stacked per-step input.
fn per_step(s: &Shape) -> Shape {
    Shape::new(s.dims().get(1..).unwrap_or(&[]).to_vec())
}

/// The loop's length: the common first axis of the per-step inputs, or
/// `steps`; both given, they must agree.
fn length(name: &str, xs: &[Tensor], steps: Option<usize>) -> Result<usize> {
    let bad = |message: String| Error::InvalidArgument {
        op: "scan",
        message: format!("{name}: {message}"),
    };
    let Some(first) = xs.first() else {
        return steps.ok_or_else(|| {
            bad("no per-step inputs and no step count\n  = help: use `iterate(init, steps, f)` for a loop without per-step inputs".into())
        });
    };
    for (j, x) in xs.iter().enumerate() {
        if x.rank() == 0 {
            return Err(bad(format!(
                "per-step input {j} is a 0-d tensor; per-step inputs are sliced along their first axis\n  = help: reshape it to [T, ..]"
            )));
        }
        if x.shape().dim(0) != first.shape().dim(0) {
            return Err(bad(format!(
                "per-step input {j} has shape {} but per-step input 0 has shape {}: their first axes (the loop's length) differ",
                x.shape(),
                first.shape()
            )));
        }
    }
    let t = first.shape().dim(0);
    match steps {
        Some(n) if n != t => Err(bad(format!(
            "the loop's length is {n} but its per-step inputs have {t} steps (shape {})\n  = help: give per-step inputs of {n} rows, or leave the length out",
            first.shape()
        ))),
        _ => Ok(t),
    }
}

/// A result, or in traced code the recorded error and placeholders; on
/// concrete tensors an error panics.
fn unwrap<T>(r: Outcome<T>, loc: &'static Location<'static>) -> T {
    match r {
        (Ok(v), _) => v,
        (Err(e), fallback) => {
            let e = e.at(loc.file(), loc.line(), loc.column());
            match fallback {
                Some(v) if trace::is_tracing() => {
                    trace::record_error(e);
                    v
                }
                _ => panic!("{e}"),
            }
        }
    }
}

/// Runs `f` over the steps of a loop, JAX's `lax.scan`: `f(carry, x_t)`
/// returns the next carry and the step's output `y_t`; `scan` returns the
/// last carry and the outputs stacked along a new first axis. The per-step
/// inputs `xs` are sliced along their first axis, whose length is the number
/// of steps. In `#[differentiable]` code the closure is traced once (see the
/// module docs); settings are on [`Scan`].
///
/// ```
/// use rlx::{scan, Tensor};
/// // a damped oscillator driven by a per-step force
/// let force = Tensor::from_slice(&[1.0, 0.0, -1.0, 0.5], [4]);
/// let init = (Tensor::scalar(0.0), Tensor::scalar(0.0)); // (position, velocity)
/// let ((x, v), xs) = scan(init, &force, |(x, v), f| {
///     let v = &v * 0.9 + &f * 0.1;
///     let x = &x + &v * 0.1;
///     ((x.clone(), v), x)
/// });
/// assert_eq!(xs.shape().dims(), &[4]);
/// assert_eq!(xs.to_vec::<f64>().unwrap()[3], x.item::<f64>().unwrap());
/// ```
#[track_caller]
pub fn scan<C: Tensors, X: PerStep, Y: Tensors>(
    init: C,
    xs: X,
    f: impl FnMut(C, X::Step) -> (C, Y),
) -> (C, Y) {
    let loc = Location::caller();
    let mut f = f;
    let mut g = |c: C, x: X::Step| Ok(f(c, x));
    unwrap(Scan::new().looped(init, xs, None, &mut g, loc), loc)
}

/// Runs `f` on the carry `steps` times (a [`scan`] without per-step inputs
/// or outputs): a time-stepping loop. In `#[differentiable]` code the
/// closure is traced once.
///
/// ```
/// use rlx::{iterate, Tensor};
/// // explicit Euler for x' = -x, 1000 steps of 0.001
/// let x = iterate(Tensor::scalar(1.0), 1000, |x| &x - &x * 0.001);
/// assert!((x.item::<f64>().unwrap() - (-1.0f64).exp()).abs() < 1e-3);
/// ```
#[track_caller]
pub fn iterate<C: Tensors>(init: C, steps: usize, f: impl FnMut(C) -> C) -> C {
    let loc = Location::caller();
    let mut f = f;
    let mut g = |c: C, (): ()| Ok((f(c), ()));
    unwrap(Scan::new().looped(init, (), Some(steps), &mut g, loc), loc).0
}
