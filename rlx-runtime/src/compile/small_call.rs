//! [`SmallCall`]: the native code of a scalarised plan as a handle, for
//! the warm calls of a companion over small tensors.
//!
//! [`Executable::run_small`](super::Executable::run_small) reaches the
//! code through the executable, its scalarised plan and that plan's
//! element program, deciding on every call which of them runs (a direct
//! program, placed code, the general fill) and checking lengths at each
//! step. A pinned signature always takes the same way, so the function
//! keeps that way as a [`SmallCall`], made once with every length
//! checked: a warm call reads its arguments, calls the code and builds
//! its results. The code is the code `run_small` calls, on the same
//! inputs, so the results are the same bits.

use rlx_core::{DType, TensorType};

use super::small::{in_place, with_inputs, with_stack};
use super::{DirectCall, Flat};
use crate::pool;
use crate::value::{is_number, Arg};

/// The most output elements a warm call writes into a buffer in its own
/// frame ([`SmallCall::run`]); larger windows take `with_stack`.
const SMALL_WINDOW: usize = 16;

/// Native code writing a window of a scalarised plan's flat outputs (all
/// of them for a direct program, the last output for placed code), with
/// what a warm call needs to read its arguments and build its results.
pub(crate) struct SmallCall {
    call: DirectCall,
    /// Input elements, over all arguments.
    n_in: usize,
    /// Where the window starts in the flat outputs (it ends with them).
    start: usize,
    /// The window's constants (zeros where the code writes).
    template: Box<[f64]>,
    /// Whether `template` is copied before the code runs (placed code
    /// writes only the computed and input elements; a direct program
    /// writes every element).
    prefill: bool,
    /// The plan's output types and element counts, and where each output
    /// starts in the flat outputs (one more: their total).
    types: Box<[TensorType]>,
    lens: Box<[usize]>,
    offsets: Box<[usize]>,
    /// Whether the last output is an `f64` tensor (not a number): a call
    /// returning only it writes straight into its own buffer.
    last_f64: bool,
}

impl SmallCall {
    /// The handle of `call`, which reads `n_in` elements and writes the
    /// window of `template.len()` elements at `start` of the flat outputs
    /// (of `types`, `lens` elements each); `None` if the window does not
    /// end with the outputs or `call` takes other lengths.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(super) fn new(
        call: DirectCall,
        n_in: usize,
        start: usize,
        template: &[f64],
        prefill: bool,
        types: &[TensorType],
        lens: &[usize],
    ) -> Option<SmallCall> {
        let mut offsets = Vec::with_capacity(lens.len() + 1);
        let mut at = 0;
        for &n in lens {
            offsets.push(at);
            at += n;
        }
        offsets.push(at);
        if start + template.len() != at || !call.takes(n_in, template.len()) {
            return None;
        }
        Some(SmallCall {
            call,
            n_in,
            start,
            template: template.into(),
            prefill,
            types: types.into(),
            lens: lens.into(),
            offsets: offsets.into(),
            last_f64: types
                .last()
                .is_some_and(|t| t.dtype == DType::F64 && !is_number(t)),
        })
    }

    /// Whether a call returning the outputs after the first `skip` can be
    /// served: they lie in the window.
    #[inline]
    pub(crate) fn serves(&self, skip: usize) -> bool {
        self.offsets.get(skip).is_some_and(|&o| o >= self.start)
    }

    /// Runs on checked arguments (`head` then `tail`, concrete, of the
    /// pinned types) and returns what `build` makes of the outputs after
    /// the first `skip` (which [`SmallCall::serves`]). A single `f64`
    /// tensor argument is read in place; a single `f64` tensor result
    /// is written straight into its own values, the others are built
    /// from a buffer on the stack.
    ///
    /// The common call (one `f64` tensor argument, at most
    /// [`SMALL_WINDOW`] output elements) runs in this one frame: no
    /// closure per buffer, so the results `build` returns are not moved
    /// through more frames than the caller's.
    #[inline]
    pub(crate) fn run<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        skip: usize,
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        let at = self.offsets.get(skip)?.checked_sub(self.start)?;
        let (types, lens) = (&self.types[skip..], &self.lens[skip..]);
        match in_place(self.n_in, head, tail) {
            Some(ins) => self.run_on(ins, at, types, lens, build),
            None => self.run_read(head, tail, at, types, lens, build),
        }
    }

    /// [`SmallCall::run`] for the values `ins` of a single `f64` tensor
    /// argument, already checked to be of the pinned type (the caller's
    /// check of the type and the read in one step); `None` if `ins` does
    /// not have the elements the code reads.
    #[inline]
    pub(crate) fn run_in_place<R>(
        &self,
        ins: &[f64],
        skip: usize,
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        if ins.len() != self.n_in {
            return None;
        }
        let at = self.offsets.get(skip)?.checked_sub(self.start)?;
        let (types, lens) = (&self.types[skip..], &self.lens[skip..]);
        self.run_on(ins, at, types, lens, build)
    }

    /// [`SmallCall::run`] for arguments read into a buffer first (not a
    /// single `f64` tensor). Out of line, with [`SmallCall::run_large`]:
    /// their stack buffers (up to `small_io::STACK` elements) would otherwise
    /// make every warm call's frame several KiB.
    #[inline(never)]
    fn run_read<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        at: usize,
        types: &[TensorType],
        lens: &[usize],
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        with_inputs(self.n_in, head, tail, |ins| {
            self.run_on(ins, at, types, lens, build)
        })
    }

    /// [`SmallCall::run`] on the inputs `ins`, for the outputs of `types`
    /// (`lens` elements each) from `at` in the window.
    #[inline(always)]
    fn run_on<R>(
        &self,
        ins: &[f64],
        at: usize,
        types: &[TensorType],
        lens: &[usize],
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        if self.last_f64 && at == 0 && types.len() == 1 {
            let mut b = match self.prefill {
                true => pool::buffer_from_slice(&self.template),
                false => pool::buffer_zeroed(self.template.len()),
            };
            // A new buffer is unique; the lengths were checked when the
            // handle was made.
            self.call.call(ins, b.unique_f64_mut()?);
            return build(&mut Flat::new(&[], types, lens, Some(b), 0));
        }
        let n = self.template.len();
        if n <= SMALL_WINDOW {
            let mut buf = [0.0; SMALL_WINDOW];
            let out = &mut buf[..n];
            if self.prefill {
                out.copy_from_slice(&self.template);
            }
            self.call.call(ins, out);
            return build(&mut Flat::new(out.get(at..)?, types, lens, None, 0));
        }
        self.run_large(ins, at, types, lens, build)
    }

    /// [`SmallCall::run_on`] for a window of more than [`SMALL_WINDOW`]
    /// elements, in a buffer from `with_stack` (see [`SmallCall::run_read`]).
    #[inline(never)]
    fn run_large<R>(
        &self,
        ins: &[f64],
        at: usize,
        types: &[TensorType],
        lens: &[usize],
        build: impl FnOnce(&mut Flat<'_>) -> Option<R>,
    ) -> Option<R> {
        with_stack(self.template.len(), |out| {
            if self.prefill {
                out.copy_from_slice(&self.template);
            }
            self.call.call(ins, out);
            build(&mut Flat::new(out.get(at..)?, types, lens, None, 0))
        })
    }
}
