//! [`SmallCall`]: the native code of a scalarised plan as a handle, for
//! the warm calls of a companion over small tensors.
//!
//! [`Executable::run_small`](crate::compile::executable::Executable::run_small) reaches the
//! code through the executable, its scalarised plan and that plan's
//! element program, deciding on every call which of them runs (a direct
//! program, placed code, the general fill) and checking lengths at each
//! step. A pinned signature always takes the same way, so the function
//! keeps that way as a [`SmallCall`], made once with every length
//! checked: a warm call reads its arguments, calls the code and builds
//! its results. The code is the code `run_small` calls, on the same
//! inputs, so the results are the same bits.

use rlx_core::{DType, TensorType};

use crate::buffer::OWNED_MAX;
use crate::compile::executable::DirectCall;
use crate::compile::small::flat::Flat;
use crate::compile::small::io::{in_place, with_inputs, with_stack};
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
    /// Bit `skip` set when a call for the outputs after the first `skip`
    /// is served in the caller's frame ([`SmallCall::serves`] and
    /// [`SmallCall::fits_frame`]) and its outputs are numbers and small
    /// `f64` tensors ([`Flat::locate_tensor`]), and in `own` when it writes its one
    /// result straight into its own buffer: decided once per `skip` (up
    /// to 63), so that a warm call ([`SmallCall::ready`]) tests a bit
    /// where it compared offsets, lengths and types (about a dozen
    /// instructions with its `setcc`s).
    frame: u64,
    own: u64,
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
        let mut me = SmallCall {
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
            frame: 0,
            own: 0,
        };
        for skip in 0..=types.len().min(63) {
            let Some(at) = me.offsets[skip].checked_sub(start) else {
                continue;
            };
            let rest = &types[skip..];
            // Outputs a warm companion builds with no call that may fail
            // (`Flat::locate_tensor`): numbers and small `f64` tensors, or
            // the one result written straight into its own buffer.
            let simple = rest.iter().zip(&lens[skip..]).all(|(t, &n)| {
                (is_number(t) && matches!(t.dtype, DType::F32 | DType::F64))
                    || (t.dtype == DType::F64 && n <= OWNED_MAX)
            });
            if me.fits_frame(at, rest) && (simple || me.own_buffer(at, rest)) {
                me.frame |= 1 << skip;
            }
            if me.own_buffer(at, rest) {
                me.own |= 1 << skip;
            }
        }
        Some(me)
    }

    /// The number of output elements the code writes.
    #[cfg(test)]
    pub(crate) fn window(&self) -> usize {
        self.template.len()
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
    /// their stack buffers (up to `io::STACK` elements) would otherwise
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
    /// (`lens` elements each) from `at` in the window. Returns what
    /// `build` returns, whatever its type: called in tail position, a
    /// result returned through memory is built where the caller's caller
    /// wants it (no copy on the way out). `build` gets an empty [`Flat`]
    /// (every take declines) if the outputs cannot be read, which the
    /// checks made when the handle was made rule out.
    #[inline(always)]
    fn run_on<O>(
        &self,
        ins: &[f64],
        at: usize,
        types: &[TensorType],
        lens: &[usize],
        build: impl FnOnce(&mut Flat<'_>) -> O,
    ) -> O {
        if !self.fits_frame(at, types) {
            return self.run_large(ins, at, types, lens, build);
        }
        let own = self.own_buffer(at, types);
        let mut buf = [0.0; SMALL_WINDOW];
        let mut flat = self.flat_on(ins, at, types, lens, own, &mut buf);
        build(&mut flat)
    }

    /// Whether a call for the outputs of `types` from `at` in the window
    /// runs in the caller's frame ([`SmallCall::flat_on`]): a single `f64`
    /// tensor written straight into its own values, or a window of at
    /// most [`SMALL_WINDOW`] elements.
    #[inline(always)]
    fn fits_frame(&self, at: usize, types: &[TensorType]) -> bool {
        self.own_buffer(at, types) || self.template.len() <= SMALL_WINDOW
    }

    /// Whether a call for the outputs of `types` from `at` in the window
    /// returns a single `f64` tensor, written straight into its own values
    /// ([`SmallCall::flat_on`]).
    #[inline(always)]
    fn own_buffer(&self, at: usize, types: &[TensorType]) -> bool {
        self.last_f64 && at == 0 && types.len() == 1
    }

    /// Runs the code on the inputs `ins` for the outputs of `types` (`lens`
    /// elements each) from `at` in the window, in the caller's frame
    /// (which [`SmallCall::fits_frame`]): a single `f64` tensor result
    /// (`own`, which is [`SmallCall::own_buffer`]) is written straight into
    /// its own buffer, other outputs into `buf`.
    /// An empty [`Flat`] (every take declines) if the window does not fit
    /// `buf` or the code's buffer cannot be written, which the checks made
    /// when the handle was made rule out.
    ///
    /// Its callers call `build` on the result once: a closure called from
    /// one place is inlined, so the companion's takes work on the `Flat`
    /// in registers and build its results straight in its return slot (a
    /// closure called from several places here was outlined, and read
    /// and wrote the `Flat` through memory at every take).
    #[inline(always)]
    fn flat_on<'b>(
        &'b self,
        ins: &[f64],
        at: usize,
        types: &'b [TensorType],
        lens: &'b [usize],
        own: bool,
        buf: &'b mut [f64; SMALL_WINDOW],
    ) -> Flat<'b> {
        if own {
            let mut b = match self.prefill {
                true => crate::buffer::buffer_from_slice(&self.template),
                false => crate::buffer::buffer_zeroed(self.template.len()),
            };
            // A new buffer is unique; the lengths were checked when the
            // handle was made.
            let Some(out) = b.unique_f64_mut() else {
                return Flat::new(&[], &[], &[], None, 0);
            };
            self.call.call(ins, out);
            return Flat::new(&[], types, lens, Some(b), 0);
        }
        let Some(out) = buf.get_mut(..self.template.len()) else {
            return Flat::new(&[], &[], &[], None, 0);
        };
        if self.prefill {
            out.copy_from_slice(&self.template);
        }
        self.call.call(ins, out);
        let out: &'b [f64] = out;
        Flat::new(out.get(at..).unwrap_or_default(), types, lens, None, 0)
    }

    /// [`SmallCall::run_on`] for a window of more than [`SMALL_WINDOW`]
    /// elements, in a buffer from `with_stack` (see [`SmallCall::run_read`]).
    #[inline(never)]
    fn run_large<O>(
        &self,
        ins: &[f64],
        at: usize,
        types: &[TensorType],
        lens: &[usize],
        build: impl FnOnce(&mut Flat<'_>) -> O,
    ) -> O {
        with_stack(self.template.len(), |out| {
            if self.prefill {
                out.copy_from_slice(&self.template);
            }
            self.call.call(ins, out);
            let vals = out.get(at..).unwrap_or_default();
            build(&mut Flat::new(vals, types, lens, None, 0))
        })
    }

    /// A warm call on the values `ins` of a single `f64` tensor argument
    /// (already checked to be of the pinned type), for the outputs after
    /// the first `skip`, with every other check made: `None` if `ins` does
    /// not have the elements the code reads or the outputs do not lie in
    /// the window.
    #[inline(always)]
    pub(crate) fn ready<'a>(&'a self, ins: &'a [f64], skip: usize) -> Option<SmallRun<'a>> {
        if ins.len() != self.n_in {
            return None;
        }
        // The bit says the outputs lie in the window (`at` below does not
        // wrap) and fit the frame.
        if self.frame.checked_shr(skip as u32).unwrap_or(0) & 1 == 0 {
            return None;
        }
        let at = self.offsets.get(skip)?.wrapping_sub(self.start);
        let (types, lens) = (self.types.get(skip..)?, self.lens.get(skip..)?);
        Some(SmallRun {
            call: self,
            ins,
            at,
            types,
            lens,
            own: self.own.checked_shr(skip as u32).unwrap_or(0) & 1 != 0,
        })
    }
}

/// A warm call of a companion over small tensors, checked and ready to
/// run ([`Function::small_direct`](crate::function::Function::small_direct)):
/// [`SmallRun::run`] calls the native code and returns what the
/// companion's `build` makes of the outputs.
pub struct SmallRun<'a> {
    call: &'a SmallCall,
    ins: &'a [f64],
    at: usize,
    types: &'a [TensorType],
    lens: &'a [usize],
    /// [`SmallCall::own_buffer`] for these outputs.
    own: bool,
}

impl SmallRun<'_> {
    /// Runs the native code and returns what `build` makes of the outputs
    /// ([`Flat`]), whatever its type: `build` returns the companion's own
    /// result (an `rlx::Result`, or the plain call's value), so that it
    /// is built straight where the companion returns it, with no copy of
    /// an `Option` into a `Result` on the way out (with 80-byte tensors, a
    /// 160-byte `memcpy` for a pair of them, whose wide loads waited for
    /// the narrow stores that had just built it). If a take declines (the companion returns
    /// other types than the plan's outputs), `build` itself takes the
    /// general path.
    #[inline(always)]
    pub fn run<O>(self, build: impl FnOnce(&mut Flat<'_>) -> O) -> O {
        let mut buf = [0.0; SMALL_WINDOW];
        let mut flat = self
            .call
            .flat_on(self.ins, self.at, self.types, self.lens, self.own, &mut buf);
        build(&mut flat)
    }
}
