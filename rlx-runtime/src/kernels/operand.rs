//! What every kernel shares (the bottom of `kernels`): the [`Operand`] a
//! kernel reads, the dtype-mismatch error, and the macros that match
//! storages of one dtype.

use rlx_core::{DType, Error, Shape};

use crate::storage::Storage;

/// A read-only operand of a kernel: contiguous row-major values and their shape.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The values.
    pub storage: &'a Storage,
    /// Their shape.
    pub shape: &'a Shape,
}

impl<'a> Operand<'a> {
    /// An operand from storage and shape.
    pub fn new(storage: &'a Storage, shape: &'a Shape) -> Operand<'a> {
        Operand { storage, shape }
    }

    pub(crate) fn dims(&self) -> &'a [usize] {
        self.shape.dims()
    }
}

/// The error for operand/output dtypes that do not fit together.
pub(crate) fn dtype_error(op: &'static str, got: DType, out: DType) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: got,
        rhs: out,
    }
}

/// Matches storages that all hold the same dtype and runs `$body` with the
/// slices bound to the given names; otherwise evaluates `$err`.
macro_rules! same_dtype {
    ($err:expr; ($($s:expr),+) => |$($v:ident),+| $body:expr) => {
        match ($($s,)+) {
            ($(Storage::F32($v),)+) => $body,
            ($(Storage::F64($v),)+) => $body,
            ($(Storage::F16($v),)+) => $body,
            ($(Storage::BF16($v),)+) => $body,
            ($(Storage::I64($v),)+) => $body,
            ($(Storage::Bool($v),)+) => $body,
            ($(Storage::C32($v),)+) => $body,
            ($(Storage::C64($v),)+) => $body,
            #[allow(unreachable_patterns)]
            _ => $err,
        }
    };
}

/// Like `same_dtype!` for the ordered (real and integer) dtypes: no complex.
macro_rules! same_real {
    ($err:expr; ($($s:expr),+) => |$($v:ident),+| $body:expr) => {
        match ($($s,)+) {
            ($(Storage::F32($v),)+) => $body,
            ($(Storage::F64($v),)+) => $body,
            ($(Storage::F16($v),)+) => $body,
            ($(Storage::BF16($v),)+) => $body,
            ($(Storage::I64($v),)+) => $body,
            ($(Storage::Bool($v),)+) => $body,
            #[allow(unreachable_patterns)]
            _ => $err,
        }
    };
}

/// Like `same_dtype!` for the four float dtypes only.
macro_rules! same_float {
    ($err:expr; ($($s:expr),+) => |$($v:ident),+| $body:expr) => {
        match ($($s,)+) {
            ($(Storage::F32($v),)+) => $body,
            ($(Storage::F64($v),)+) => $body,
            ($(Storage::F16($v),)+) => $body,
            ($(Storage::BF16($v),)+) => $body,
            #[allow(unreachable_patterns)]
            _ => $err,
        }
    };
}

pub(crate) use {same_dtype, same_float, same_real};
