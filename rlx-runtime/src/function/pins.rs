//! What a transform pins for its warm calls, below the plan cache that
//! holds it ([`NumberPin`], [`SmallPin`]), and the `f32` mask that keys
//! the number path. The calls that use them are methods of `Function`, in
//! `numbers.rs` and `tensors.rs`.

use std::any::TypeId;

use rlx_core::{DType, TensorType};

use crate::compile::{DirectCall, SmallCall};
use crate::storage::Storage;
use crate::tensor::Repr;
use crate::value::{is_number, Arg};

/// For types that are all 0-d `f32`/`f64` (at most 64), the mask with bit
/// `i` set where type `i` is `f32`.
pub(super) fn f32_mask<'a>(types: impl IntoIterator<Item = &'a TensorType>) -> Option<u64> {
    let mut mask = 0u64;
    for (i, t) in types.into_iter().enumerate() {
        if i >= 64 || !is_number(t) {
            return None;
        }
        mask |= u64::from(t.dtype == DType::F32) << i;
    }
    Some(mask)
}

/// The warm number path of one transform ([`Function::direct`]): the
/// pinned entry's types and the native code of its plan when that plan is
/// one function over the numbers in order (with no extras), so that a warm
/// call compares one mask and calls it: no entry, plan or executable to
/// reach and check on every call. Only an entry whose static arguments are
/// `()` has one (a function without static parameters, as
/// `#[differentiable]` calls it): a caller's `()` is then checked when it
/// is compiled, not on every call.
pub(super) struct NumberPin {
    /// The pinned entry's `f32` mask.
    pub(super) f32s: u64,
    pub(super) call: DirectCall,
}

/// Whether `a` is a concrete argument of type `ty` (one match on the
/// tensor's representation, then its dtype and dimensions).
#[inline]
pub(super) fn fits(a: &Arg<'_>, ty: &TensorType) -> bool {
    match a {
        Arg::Tensor(t) => match &t.repr {
            Repr::Concrete(c) => c.storage.dtype() == ty.dtype && c.shape == ty.shape,
            Repr::Traced(_) => false,
        },
        Arg::F64(_) | Arg::F32(_) => a.matches(ty),
    }
}

/// The warm small-tensor path of one transform ([`Function::run_small`]):
/// the pinned entry's argument types and the native code of its plan
/// ([`SmallCall`]), so that a warm call compares its arguments' types and
/// calls the code: no entry, plan or executable to reach and check.
pub(super) struct SmallPin {
    pub(super) args: Box<[TensorType]>,
    pub(super) extras: Box<[TensorType]>,
    /// The type of the entry's static arguments (a zero-sized type).
    pub(super) statics: TypeId,
    pub(super) call: SmallCall,
    /// Whether the pinned signature is one `f64` tensor argument and no
    /// extras: then a warm call checks it and reads its values in one
    /// step ([`SmallPin::in_place`]).
    pub(super) single_f64: bool,
}

impl SmallPin {
    /// Whether `args` and `extras` are concrete and of the pinned types.
    #[inline]
    pub(super) fn fits(&self, args: &[Arg<'_>], extras: &[Arg<'_>]) -> bool {
        if args.len() != self.args.len() || extras.len() != self.extras.len() {
            return false;
        }
        // Plain loops (see `Function::run_small`).
        for (a, ty) in args.iter().zip(&self.args[..]) {
            if !fits(a, ty) {
                return false;
            }
        }
        for (a, ty) in extras.iter().zip(&self.extras[..]) {
            if !fits(a, ty) {
                return false;
            }
        }
        true
    }

    /// The values of the single `f64` tensor argument of a signature that
    /// has one (`single_f64`), when `args` and `extras` are concrete and of
    /// the pinned types: the check of [`SmallPin::fits`] and the read of
    /// `SmallCall`'s in-place path in one match. `None` for everything
    /// else (the caller then checks with [`SmallPin::fits`]).
    #[inline(always)]
    pub(super) fn in_place<'a>(
        &self,
        args: &'a [Arg<'_>],
        extras: &[Arg<'_>],
    ) -> Option<&'a [f64]> {
        if !self.single_f64 {
            return None;
        }
        if let ([Arg::Tensor(t)], [], [ty]) = (args, extras, &self.args[..]) {
            if let Repr::Concrete(c) = &t.repr {
                if let Storage::F64(v) = &*c.storage {
                    if c.shape == ty.shape {
                        return Some(v);
                    }
                }
            }
        }
        None
    }
}
