//! A loop node's packed result as the loop writes it ([`Packed`]), and
//! the copies, zero fills and sums between storages of one dtype that the
//! loop runner makes.

use rlx_core::{Error, LoopOp, Result};

use crate::storage::{out_of_memory, Storage};

macro_rules! same {
    ($a:expr, $b:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($a, $b) {
            (Storage::F32($x), Storage::F32($y)) => $body,
            (Storage::F64($x), Storage::F64($y)) => $body,
            (Storage::F16($x), Storage::F16($y)) => $body,
            (Storage::BF16($x), Storage::BF16($y)) => $body,
            (Storage::I64($x), Storage::I64($y)) => $body,
            (Storage::Bool($x), Storage::Bool($y)) => $body,
            (Storage::C32($x), Storage::C32($y)) => $body,
            (Storage::C64($x), Storage::C64($y)) => $body,
            (a, b) => Err(mismatch(a.dtype(), b.dtype())),
        }
    };
}

#[cold]
pub(super) fn mismatch(a: rlx_core::DType, b: rlx_core::DType) -> Error {
    Error::DTypeMismatch {
        op: "loop",
        lhs: a,
        rhs: b,
    }
}

/// `dst[at..at + n] = src[from..from + n]`.
pub(super) fn copy(
    dst: &mut Storage,
    at: usize,
    src: &Storage,
    from: usize,
    n: usize,
) -> Result<()> {
    if at + n > dst.len() || from + n > src.len() {
        return Err(out_of_range(at, dst.len(), src, from, n));
    }
    same!(dst, src, |d, s| {
        d[at..at + n].copy_from_slice(&s[from..from + n]);
        Ok(())
    })
}

#[cold]
fn out_of_range(at: usize, len: usize, src: &Storage, from: usize, n: usize) -> Error {
    Error::InvalidArgument {
        op: "loop",
        message: format!(
            "a copy of {n} values from offset {from} of {} into offset {at} of {len} is out of range",
            src.len(),
        ),
    }
}

/// A loop's packed result while the loop writes it: a storage of the
/// result's length and dtype, overwritten in place, or (`room`) an empty
/// storage with room for the result (a fresh target the plan marks
/// written whole, see the planner's `fills`: no zeros are written first),
/// written into that room and set to hold its elements once all of them
/// are written.
pub(super) struct Packed<'a> {
    s: &'a mut Storage,
    want: usize,
    room: bool,
    /// Elements written into the room so far.
    written: usize,
}

impl<'a> Packed<'a> {
    /// `s` as the packed result of `want` elements of `dtype`: written
    /// into its room if it is empty with room for them, else made a
    /// storage of that type (kept if it is one, else zeros).
    pub(super) fn new(s: &'a mut Storage, dtype: rlx_core::DType, want: usize) -> Packed<'a> {
        let room = want > 0 && s.is_empty() && s.dtype() == dtype && s.capacity() >= want;
        if !room && (s.len() != want || s.dtype() != dtype) {
            *s = Storage::zeros(dtype, want);
        }
        Packed {
            s,
            want,
            room,
            written: 0,
        }
    }

    /// Writes zeros into the room (for a sweep whose writes are not
    /// counted); then the storage holds the result's length.
    pub(super) fn zeroed(&mut self) -> Result<()> {
        if self.room {
            self.s
                .try_resize(self.want)
                .map_err(|_| out_of_memory("loop", &[self.want].into(), self.s.dtype()))?;
            self.room = false;
        }
        Ok(())
    }

    /// `result[at..at + n] = src[from..from + n]`. A scan and a replay
    /// write each element of their result once (disjoint pieces: the
    /// carries, every step's outputs, spine entries and residuals at the
    /// offsets of `looping`'s `sizes`; an adjoint's `c̄`, every step's `x̄` and `k̄`).
    pub(super) fn put(&mut self, at: usize, src: &Storage, from: usize, n: usize) -> Result<()> {
        if !self.room {
            return copy(self.s, at, src, from, n);
        }
        if at + n > self.want || from + n > src.len() {
            return Err(out_of_range(at, self.want, src, from, n));
        }
        same!(&mut *self.s, src, |d, s| {
            let room = &mut d.spare_capacity_mut()[at..at + n];
            let s = &s[from..from + n];
            // One `memcpy` (an element-by-element loop of `write`s was
            // compiled to 16-byte moves: 5% of an LSTM gradient, whose
            // scan writes 17 MB of residuals this way).
            // SAFETY: `room` and `s` are `n` elements each (the slicing
            // above checked both ranges), `MaybeUninit<T>` has the layout
            // of `T` (a `Copy` element type), and they do not overlap:
            // `room` is the spare capacity of the unique borrow `*self.s`,
            // `s` the elements of the shared borrow `src`.
            unsafe {
                std::ptr::copy_nonoverlapping(s.as_ptr(), room.as_mut_ptr().cast(), n);
            }
            Ok(())
        })?;
        self.written += n;
        Ok(())
    }

    /// Ends the loop's writes: a result written into its room now holds
    /// its elements (an error, never a partly written result, if the
    /// loop wrote fewer than all of them).
    pub(super) fn finish(self, l: &LoopOp) -> Result<()> {
        if !self.room {
            return Ok(());
        }
        if self.written != self.want {
            return Err(Error::InvalidArgument {
                op: "loop",
                message: format!(
                    "{}: the loop wrote {} of the {} elements of its result",
                    l.name, self.written, self.want
                ),
            });
        }
        // SAFETY: the storage is empty with room for `want` elements
        // (`new`); `put` wrote `want` elements into that room, each once
        // (the pieces of a scan or a replay are disjoint, see `put`), so
        // all of them hold values of the type.
        unsafe { self.s.set_written(self.want) };
        Ok(())
    }
}

/// Sets every element of `s` to zero.
pub(super) fn fill_zero(s: &mut Storage) {
    let n = s.len();
    fill_zero_range(s, 0..n)
}

/// Sets the elements `r` of `s` to zero.
pub(super) fn fill_zero_range(s: &mut Storage, r: std::ops::Range<usize>) {
    match s {
        Storage::F32(v) => v[r].fill(0.0),
        Storage::F64(v) => v[r].fill(0.0),
        Storage::F16(v) => v[r].fill(half::f16::ZERO),
        Storage::BF16(v) => v[r].fill(half::bf16::ZERO),
        Storage::I64(v) => v[r].fill(0),
        Storage::Bool(v) => v[r].fill(false),
        Storage::C32(v) => v[r].fill(num_complex::Complex::new(0.0, 0.0)),
        Storage::C64(v) => v[r].fill(num_complex::Complex::new(0.0, 0.0)),
    }
}

/// `acc += v` element-wise (floating-point storages).
pub(super) fn add_into(acc: &mut Storage, v: &Storage) -> Result<()> {
    match (acc, v) {
        (Storage::F32(a), Storage::F32(b)) => a.iter_mut().zip(b).for_each(|(a, b)| *a += b),
        (Storage::F64(a), Storage::F64(b)) => a.iter_mut().zip(b).for_each(|(a, b)| *a += b),
        (Storage::F16(a), Storage::F16(b)) => a.iter_mut().zip(b).for_each(|(a, b)| *a += *b),
        (Storage::BF16(a), Storage::BF16(b)) => a.iter_mut().zip(b).for_each(|(a, b)| *a += *b),
        (Storage::C32(a), Storage::C32(b)) => a.iter_mut().zip(b).for_each(|(a, b)| *a += b),
        (Storage::C64(a), Storage::C64(b)) => a.iter_mut().zip(b).for_each(|(a, b)| *a += b),
        (a, b) => return Err(mismatch(a.dtype(), b.dtype())),
    }
    Ok(())
}
