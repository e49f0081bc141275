//! [`Flat`]: the results of a warm call of a scalarised plan, as the code
//! a `#[differentiable]` companion generates reads them, one output at a
//! time, in the type the companion returns (see
//! [`Function::run_small`](crate::function::Function::run_small)).

use std::mem::ManuallyDrop;

use rlx_core::{DType, TensorType};

use crate::buffer::{Buffer, OWNED_MAX};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::{is_number, Value, Values};

/// The outputs of one warm call of a scalarised plan, not yet taken: their
/// elements widened to `f64` (on the caller's stack) and their types.
/// Each output becomes a number or a new tensor only when taken, so a
/// companion builds exactly the values it returns: one heap allocation per
/// tensor result, none per number.
///
/// ```
/// use rlx::runtime::function::{Function, Transform};
/// use rlx::TensorType;
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
/// // The first call of a transform takes the general path and pins its entry.
/// SQUARES.run(Transform::Grad, &[Arg::from(&x)], &[], &(), trace).unwrap();
/// let (value, grad) = SQUARES
///     .run_small(Transform::Grad, &[Arg::from(&x)], &[], &(), 0, |it| {
///         Some((it.number(rlx::DType::F64)?, it.tensor()?))
///     })
///     .expect("a warm call over the pinned signature");
/// assert_eq!(value, 14.0);
/// assert_eq!(grad.to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
/// ```
pub struct Flat<'a> {
    /// The elements of the outputs not yet taken, flat.
    vals: &'a [f64],
    /// Their types, in order.
    types: &'a [TensorType],
    /// Their element counts.
    lens: &'a [usize],
    /// The first output's values, when the run wrote them straight into
    /// their own buffer (then not in `vals`). Dropped by hand, out of line
    /// (`Flat`'s `Drop`): the inline drop of a buffer passes its address
    /// to its out-of-line part, and a `Flat` whose address is taken
    /// anywhere is kept in memory, each take loading and storing its
    /// slices (the warm companion's `Flat` is otherwise held in registers).
    ready: Option<ManuallyDrop<Buffer>>,
    /// The trace the tensors are created in (0: none).
    origin: u64,
}

impl<'a> Flat<'a> {
    /// Outputs of `types` (with `lens` elements each) whose elements are
    /// `vals`, after `ready` (the first output's own values) if given;
    /// tensors are created in the trace `origin` (which the caller read
    /// from `context::current_id`).
    pub(crate) fn new(
        vals: &'a [f64],
        types: &'a [TensorType],
        lens: &'a [usize],
        ready: Option<Buffer>,
        origin: u64,
    ) -> Flat<'a> {
        Flat {
            vals,
            types,
            lens,
            ready: ready.map(ManuallyDrop::new),
            origin,
        }
    }

    /// Pushes every output not yet taken onto `values`: 0-d `F32`/`F64`
    /// outputs as numbers, the others as new tensors (what
    /// [`Executable::run_args`](crate::Executable::run_args) returns).
    pub(crate) fn push_values(&mut self, values: &mut Values) {
        while let Some(t) = self.types.first() {
            let v = match t.dtype {
                DType::F64 if is_number(t) => self.number(DType::F64).map(Value::F64),
                DType::F32 if is_number(t) => self.number(DType::F32).map(|v| Value::F32(v as f32)),
                _ => self.tensor().map(Value::Tensor),
            };
            let Some(v) = v else { return };
            values.push(v);
        }
    }

    /// Takes the next output as a new concrete tensor of its type (an
    /// `f32` output rounded back from its widened values, which are exact).
    /// `None` when no output is left. Always inlined: a companion takes
    /// each result once, and an outlined call (its frame, and the `Option<Tensor>`
    /// returned through memory, then 80 bytes) cost more than the body.
    /// Only the common buffer is made inline (the values of a small `f64`
    /// output, in a pooled vector); `other_buffer` makes the others out
    /// of line, so that the companion's code stays short.
    #[inline(always)]
    pub fn tensor(&mut self) -> Option<Tensor> {
        let (t, types) = self.types.split_first()?;
        let (&n, lens) = self.lens.split_first()?;
        self.types = types;
        self.lens = lens;
        if self.ready.is_none() {
            let (vals, rest) = self.vals.split_at_checked(n)?;
            self.vals = rest;
            if t.dtype == DType::F64 && n <= OWNED_MAX {
                let b = Buffer::owned(Storage::F64(crate::pool::from_slice(vals)));
                return Some(Tensor::from_buffer_in(b, t.shape.clone(), self.origin));
            }
            // Made out of line into `ready`, not into a buffer the common
            // case above also writes (a buffer either case may write was
            // kept in memory, the out-of-line call writing it there, and
            // the common case's 8-byte stores were moved on by a 16-byte
            // load that cannot be forwarded from them). Measured on the LJ
            // `value_and_grad_` of a `[6]` tensor: 2-4% faster, 14 fewer
            // instructions. LLVM still merges the two tails below, so one
            // such load remains per result (see `perf annotate`).
            // Nothing to drop: `ready` is empty here.
            self.ready = Some(ManuallyDrop::new(other_buffer(t.dtype, vals)));
        }
        let b = ManuallyDrop::into_inner(self.ready.take()?);
        Some(Tensor::from_buffer_in(b, t.shape.clone(), self.origin))
    }

    /// Takes the next output as a number, widened to `f64`, if it is one
    /// element of `dtype` (`F32` or `F64`); `None`, taking nothing, for
    /// any other output (the companion then takes the general path, which
    /// reports the mismatch).
    #[inline]
    pub fn number(&mut self, dtype: DType) -> Option<f64> {
        match (self.types.first(), self.lens.first(), &self.ready) {
            (Some(t), Some(1), None) if t.dtype == dtype => {
                let (&v, rest) = self.vals.split_first()?;
                self.vals = rest;
                self.types = &self.types[1..];
                self.lens = &self.lens[1..];
                Some(v)
            }
            _ => None,
        }
    }
}

/// An output of a warm call located by [`Take::locate`], not yet built:
/// its type and, unless it is the buffer the run wrote straight
/// ([`Flat`]'s `ready`), its `f64` values (at most `OWNED_MAX`).
pub struct Located<'a> {
    vals: &'a [f64],
    ty: &'a TensorType,
}

impl<'a> Flat<'a> {
    /// Locates the next output as an `f64` tensor that a warm companion
    /// builds without a call that may fail or unwind: the buffer the run
    /// wrote straight, or at most `OWNED_MAX` values (copied into a
    /// pooled vector). `None`, taking nothing, for any other output (the
    /// companion then takes the general path; `Function::small_direct`
    /// serves no call with other tensors, which `run_small` serves).
    #[inline(always)]
    pub fn locate_tensor(&mut self) -> Option<Located<'a>> {
        let (t, types) = self.types.split_first()?;
        let (&n, lens) = self.lens.split_first()?;
        let vals = match self.ready {
            Some(_) => &[][..],
            None if t.dtype == DType::F64 && n <= OWNED_MAX => {
                let (vals, rest) = self.vals.split_at_checked(n)?;
                self.vals = rest;
                vals
            }
            None => return None,
        };
        self.types = types;
        self.lens = lens;
        Some(Located { vals, ty: t })
    }

    /// Builds the tensor `at` located ([`Flat::locate_tensor`]) once every
    /// output the companion returns was located: nothing here fails or
    /// unwinds (a new pooled vector comes from an `extern "C"` function),
    /// so the tensors built before it need no landing pad and stay in
    /// registers, written once, where the companion returns them (a
    /// tensor built before a take that could still decline was built on
    /// the stack, its address passed to its drop on that path, then
    /// copied into the result).
    #[inline(always)]
    pub fn build_tensor(&mut self, at: Located<'a>) -> Tensor {
        let b = match self.ready.take() {
            // The buffer the run wrote straight is the first output's, and
            // a call that writes one returns only it.
            Some(b) => ManuallyDrop::into_inner(b),
            None => Buffer::owned(Storage::F64(crate::pool::from_slice(at.vals))),
        };
        Tensor::from_buffer_in(b, at.ty.shape.clone(), self.origin)
    }
}

/// A result of a warm companion, built from a warm call's outputs in two
/// steps: every result is located and checked first ([`Take::locate`]),
/// then all are built ([`Take::build`]), which cannot fail. So a declined
/// result (the companion then takes the general path) is found before any
/// tensor exists, and no tensor is dropped on the way out.
pub trait Take: Sized {
    /// A located output, not yet built.
    type Located<'a>;

    /// Locates the next output as a `Self`, or `None`, taking nothing.
    fn locate<'a>(flat: &mut Flat<'a>) -> Option<Self::Located<'a>>;

    /// Builds a located output.
    fn build<'a>(at: Self::Located<'a>, flat: &mut Flat<'a>) -> Self;
}

impl Take for Tensor {
    type Located<'a> = Located<'a>;

    #[inline(always)]
    fn locate<'a>(flat: &mut Flat<'a>) -> Option<Located<'a>> {
        flat.locate_tensor()
    }

    #[inline(always)]
    fn build<'a>(at: Located<'a>, flat: &mut Flat<'a>) -> Tensor {
        flat.build_tensor(at)
    }
}

macro_rules! take_number {
    ($($f:ty => $dtype:ident),*) => {$(
        impl Take for $f {
            type Located<'a> = $f;

            #[inline(always)]
            fn locate<'a>(flat: &mut Flat<'a>) -> Option<$f> {
                // Widened from this type: exact.
                flat.number(DType::$dtype).map(|v| v as $f)
            }

            #[inline(always)]
            fn build<'a>(at: $f, _: &mut Flat<'a>) -> $f {
                at
            }
        }
    )*};
}
take_number!(f32 => F32, f64 => F64);

/// Locates the next output of a warm call as a `T` ([`Take::locate`]);
/// generated code calls it for every result of the closure it passes to
/// [`SmallRun::run`](crate::compile::small::call::SmallRun::run), then [`flat_build`] for each.
#[inline(always)]
pub fn flat_locate<'a, T: Take>(it: &mut Flat<'a>) -> Option<T::Located<'a>> {
    T::locate(it)
}

/// Builds an output located by [`flat_locate`] ([`Take::build`]).
#[inline(always)]
pub fn flat_build<'a, T: Take>(at: T::Located<'a>, it: &mut Flat<'a>) -> T {
    T::build(at, it)
}

impl Drop for Flat<'_> {
    /// Drops the first output's buffer if it was not taken, out of line
    /// (see `ready`): the buffer is moved out, so that no address of the
    /// `Flat` is passed on.
    #[inline]
    fn drop(&mut self) {
        if let Some(b) = self.ready.take() {
            drop_buffer(ManuallyDrop::into_inner(b));
        }
    }
}

/// Drops `b` (a `Flat`'s untaken buffer), out of line.
#[inline(never)]
fn drop_buffer(b: Buffer) {
    drop(b);
}

/// The buffer of an output of `dtype` with the (widened) values `vals`,
/// other than a small `f64` one ([`Flat::tensor`]): `f32` values rounded
/// back (exact: they were widened), larger `f64` values shared.
#[inline(never)]
fn other_buffer(dtype: DType, vals: &[f64]) -> Buffer {
    match dtype {
        DType::F32 => Buffer::new(Storage::F32(vals.iter().map(|&v| v as f32).collect())),
        _ => crate::buffer::buffer_from_slice(vals),
    }
}
