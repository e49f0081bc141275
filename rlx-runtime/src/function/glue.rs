//! Tracing glue: what generated code calls around a trace and a run:
//! declaring the parameters as inputs ([`inputs`]), collecting the body's
//! results ([`outputs`], [`Returns`]), reading a run's results back
//! ([`take`], [`number`], [`skip`], [`flat`]), and recording errors met inside a trace
//! ([`companion`], [`plain`]).

use std::panic::Location;

use rlx_core::{DType, Error, Graph, Result, TensorType};

use crate::compile::Flat;
use crate::tensor::Tensor;
use crate::trace::{self, Trace};
use crate::value::Value;

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
    /// Takes the next output of a warm small call
    /// ([`Function::run_small`](super::Function::run_small)), or `None`
    /// if it is not of this type (the companion then takes the general
    /// path, which converts it with [`Output::from_value`] or reports why
    /// it cannot).
    fn from_flat(flat: &mut Flat<'_>) -> Option<Self>;
    /// A stand-in returned inside a trace after an error was recorded there.
    fn placeholder() -> Self;
}

impl Output for Tensor {
    fn from_value(v: Value) -> Result<Self> {
        Ok(v.into_tensor())
    }

    #[inline]
    fn from_flat(flat: &mut Flat<'_>) -> Option<Self> {
        flat.tensor()
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
    ($($f:ty => $into:ident, $dtype:ident),*) => {$(
        impl Output for $f {
            #[inline]
            fn from_value(v: Value) -> Result<Self> {
                if v.is_traced() {
                    return Err(float_in_trace(stringify!($f)));
                }
                v.$into()
            }

            #[inline]
            fn from_flat(flat: &mut Flat<'_>) -> Option<Self> {
                // Widened from this type: exact.
                flat.number(DType::$dtype).map(|v| v as $f)
            }

            fn placeholder() -> Self {
                <$f>::NAN
            }
        }
    )*};
}
float_output!(f32 => into_f32, F32, f64 => into_f64, F64);

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

/// Takes the next output of a warm small call as a `T`
/// ([`Output::from_flat`]); generated code calls it with `?` inside the
/// closure it passes to [`Function::run_small`](super::Function::run_small).
#[inline]
pub fn flat<T: Output>(it: &mut Flat<'_>) -> Option<T> {
    T::from_flat(it)
}

/// A number type a companion can return from [`Function::run_numbers`](super::Function::run_numbers).
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

/// Takes the next result written by [`Function::run_numbers`](super::Function::run_numbers). The
/// generated code sizes the buffer to the plan's outputs (`run_numbers`
/// refuses any other size), so the `NaN` fallback is never read.
///
/// ```
/// use rlx::runtime::function::number;
/// let results = [1.5, 2.0];
/// let mut it = results.iter();
/// let (a, b): (f64, f32) = (number(&mut it), number(&mut it));
/// assert_eq!((a, b), (1.5, 2.0));
/// ```
///
/// Each result is read on its own, 8 bytes wide: the native code has just
/// stored it with an 8-byte store, and a wider load that spans two such
/// stores (what the compiler makes of copying neighbouring results into a
/// tuple) cannot take its bytes from the store buffer. It waits until
/// both stores reach the cache, a stall of tens of cycles per load on a
/// call of tens of nanoseconds.
#[inline]
pub fn number<T: Number>(it: &mut std::slice::Iter<'_, f64>) -> T {
    T::from_f64(match it.next() {
        // SAFETY: `v` is a reference to an initialised, aligned `f64`.
        Some(v) => unsafe { std::ptr::read_volatile(v) },
        None => f64::NAN,
    })
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

/// Runs `f` in a function of its own that is never inlined: a
/// companion's paths after its number path, so that the warm number path
/// neither saves the arguments for them nor sets up their stack frame (a
/// tenth of a warm `grad_` of six numbers).
///
/// ```
/// use rlx::runtime::function::out_of_line;
/// let (x, y) = (1.5, 2.0);
/// assert_eq!(out_of_line(move || x * y), 3.0);
/// ```
#[inline(never)]
#[cold]
pub fn out_of_line<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// A companion's result: outside a trace, as is; inside a trace an error is
/// recorded in the trace (the outermost companion returns it, naming the
/// caller's line) and a stand-in is returned, so that tracing can go on.
#[track_caller]
pub fn companion<T: Placeholder>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    companion_at(Location::caller(), f)
}

/// [`companion`] naming `loc` as the caller's line: for a companion's
/// general path taken inside a closure, where `#[track_caller]` does not
/// reach (the companion reads its caller's line before the closure).
///
/// ```
/// use rlx::runtime::function::companion_at;
/// use rlx::{Error, Result};
/// let here = std::panic::Location::caller();
/// // Outside a trace an error comes back as it is (the check of
/// // non-finite results would add the line).
/// let r: Result<f64> = companion_at(here, || Err(Error::Unsupported("no".into())));
/// assert_eq!(r.unwrap_err().to_string(), Error::Unsupported("no".into()).to_string());
/// assert_eq!(companion_at(here, || Ok(1.5f64)).unwrap(), 1.5);
/// ```
pub fn companion_at<T: Placeholder>(
    loc: &'static Location<'static>,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match settled(loc, f) {
        // The check of non-finite results names the caller's line too.
        Err(e) if matches!(e.root(), Error::NonFinite(_)) => Err(located(e, loc)),
        r => r,
    }
}

/// A plain call's result: the value, or a panic with the error's message
/// naming the caller's line (inside a trace: the error is recorded and a
/// stand-in returned).
#[track_caller]
pub fn plain<T: Placeholder>(f: impl FnOnce() -> Result<T>) -> T {
    match settled(Location::caller(), f) {
        Ok(v) => v,
        // The panic's location is the caller's (`#[track_caller]`).
        Err(e) => panic!("{e}"),
    }
}

/// [`plain`] naming `loc` as the caller's line (see [`companion_at`]): the
/// panic's message names it, as its location cannot.
///
/// ```
/// use rlx::runtime::function::plain_at;
/// let here = std::panic::Location::caller();
/// assert_eq!(plain_at(here, || Ok(2.0f64)), 2.0);
/// ```
pub fn plain_at<T: Placeholder>(
    loc: &'static Location<'static>,
    f: impl FnOnce() -> Result<T>,
) -> T {
    match settled(loc, f) {
        Ok(v) => v,
        Err(e) => panic!("{}", located(e, loc)),
    }
}

/// `f()`, or inside a trace its error recorded there (naming `loc`) and a
/// stand-in: what a companion does before it names its line in a
/// non-finite error, and a plain call before it panics on an error.
fn settled<T: Placeholder>(
    loc: &'static Location<'static>,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match f() {
        Err(e) if trace::is_tracing() => {
            record(located(e, loc));
            Ok(T::placeholder())
        }
        r => r,
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
