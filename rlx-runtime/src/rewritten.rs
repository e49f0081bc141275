//! The runtime side of the body rewrites of `#[differentiable]` that make
//! a body written for numbers compile over tensors (see
//! `rlx-macros/src/rewrite.rs`; reached through `rlx::__private`).
//!
//! - [`operand`]: a traced name used as an operand of `+ - * /` is
//!   borrowed when it is a `Tensor` (not `Copy`) and copied otherwise, so
//!   `x * x - x` compiles as it does for `f64`;
//! - [`pass_number`]: a name written as a number (an `f64` parameter,
//!   arithmetic on one) passed to a call is cloned when it is a `Tensor`,
//!   so `f(k); f(k)` compiles as it does for `k: f64`;
//! - [`scalar_param`]: a closure parameter written `r: f64` takes a
//!   `Tensor` (inside traced code a number is a 0-d tensor) or a number;
//! - [`NumberArg`] and [`Kind`]: the plain call of a `#[differentiable]`
//!   function takes a number or a tensor for each `f64`/`f32` parameter,
//!   and its float results are numbers when every such argument is a
//!   number, tensors otherwise, so that a scalar helper written once works
//!   on numbers and inside traced code.

use crate::function::{Output, Take};
use crate::tensor::Tensor;
use crate::value::Arg;

/// What an operand of a rewritten `+ - * /` becomes: a `Tensor` is
/// borrowed, any `Copy` value (a number, a `&Tensor`) is copied.
///
/// ```
/// use rlx::runtime::rewritten::operand;
/// use rlx::Tensor;
/// let x = Tensor::scalar(3.0f64);
/// let y = operand(&x) * operand(&x) - operand(&x); // `x` is not moved
/// assert_eq!(y.item::<f64>().unwrap(), 6.0);
/// assert_eq!(operand(&2.0f64) * operand(&4.0f64), 8.0);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is used as an operand of an arithmetic operator in a `#[differentiable]` body, but it is neither a `Tensor` nor `Copy`",
    note = "the macro borrows traced operands of `+ - * /` so that tensors are not moved; write `&x` (or `x.clone()`) for other types"
)]
pub trait Operand {
    /// `&Tensor` for a tensor, the value itself for a `Copy` value.
    type Out<'a>
    where
        Self: 'a;
    /// The operand.
    fn operand(&self) -> Self::Out<'_>;
}

impl Operand for Tensor {
    type Out<'a> = &'a Tensor;
    #[inline]
    fn operand(&self) -> &Tensor {
        self
    }
}

impl<T: Copy> Operand for T {
    type Out<'a>
        = T
    where
        T: 'a;
    #[inline]
    fn operand(&self) -> T {
        *self
    }
}

/// The rewritten operand `x` of `+ - * /` (see [`Operand`]).
#[inline]
pub fn operand<T: Operand>(t: &T) -> T::Out<'_> {
    t.operand()
}

/// What a name written as a number becomes when it is passed to a call in
/// a `#[differentiable]` body: a `Tensor` is cloned (a cheap handle for a
/// traced value), any `Copy` value is copied, so `f(k); f(k)` compiles as
/// it does for `k: f64`.
///
/// ```
/// use rlx::runtime::rewritten::pass_number;
/// use rlx::Tensor;
/// fn twice(k: Tensor) -> Tensor {
///     &k + &k
/// }
/// let k = Tensor::scalar(1.5f64);
/// let a = twice(pass_number(&k));
/// let b = twice(pass_number(&k)); // `k` is not moved
/// assert_eq!((a + b).item::<f64>().unwrap(), 6.0);
/// assert_eq!(pass_number(&2.0f64), 2.0);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is passed to a call in a `#[differentiable]` body as a number, but it is neither a `Tensor` nor `Copy`",
    note = "the macro passes names written as numbers by value without moving them; write `x.clone()` for other types"
)]
pub trait PassNumber {
    /// The value passed: a clone of a `Tensor`, a copy of a `Copy` value.
    type Out;
    /// The argument.
    fn pass_number(&self) -> Self::Out;
}

impl PassNumber for Tensor {
    type Out = Tensor;
    #[inline]
    fn pass_number(&self) -> Tensor {
        self.clone()
    }
}

impl<T: Copy> PassNumber for T {
    type Out = T;
    #[inline]
    fn pass_number(&self) -> T {
        *self
    }
}

/// The rewritten argument `k` of a call (see [`PassNumber`]).
#[inline]
pub fn pass_number<T: PassNumber>(t: &T) -> T::Out {
    t.pass_number()
}

/// A value passed for a closure parameter declared `f64` (or `f32`) in a
/// `#[differentiable]` body: a tensor (traced or not) or a number of type
/// `F`, which becomes a 0-d tensor.
#[diagnostic::on_unimplemented(
    message = "a closure parameter declared `{F}` in a `#[differentiable]` body takes a `Tensor`, `&Tensor` or `{F}`, not `{Self}`",
    note = "inside traced code a number is a 0-d `Tensor`; the macro rewrites `|r: {F}|` to take one"
)]
pub trait ScalarParam<F> {
    /// The value as a tensor.
    fn into_tensor(self) -> Tensor;
}

impl ScalarParam<f64> for f64 {
    fn into_tensor(self) -> Tensor {
        Tensor::scalar(self)
    }
}

impl ScalarParam<f32> for f32 {
    fn into_tensor(self) -> Tensor {
        Tensor::scalar(self)
    }
}

impl<F> ScalarParam<F> for Tensor {
    fn into_tensor(self) -> Tensor {
        self
    }
}

impl<F> ScalarParam<F> for &Tensor {
    fn into_tensor(self) -> Tensor {
        self.clone()
    }
}

/// The rewritten parameter of a closure declared `|r: F|` (see [`ScalarParam`]).
///
/// ```
/// use rlx::runtime::rewritten::scalar_param;
/// use rlx::Tensor;
/// let lj = |r| {
///     let r: Tensor = scalar_param::<f64, _>(r);
///     4.0 * (r.powi(-12) - r.powi(-6))
/// };
/// assert_eq!(lj(1.0).item::<f64>().unwrap(), 0.0);
/// ```
#[inline]
pub fn scalar_param<F, T: ScalarParam<F>>(v: T) -> Tensor {
    v.into_tensor()
}

/// Whether the arguments of a plain call carry tensors: [`Plain`] (all
/// numbers) or [`Traced`] (some tensor). Picks the type of the call's
/// float results, so that a `#[differentiable]` function of numbers called
/// with tensors (inside another traced body, say) returns tensors.
pub trait Kind {
    /// `Self` or `K`, whichever holds tensors ([`Traced`] wins).
    type Or<K: Kind>: Kind;
    /// What an `f64` result is: `f64` or `Tensor`.
    type F64: Output + Take;
    /// What an `f32` result is: `f32` or `Tensor`.
    type F32: Output + Take;
    /// An `f64` result from the number path (`run_numbers`, which only
    /// serves calls whose arguments are all numbers).
    fn f64_out(v: f64) -> Self::F64;
    /// An `f32` result from the number path (stored widened).
    fn f32_out(v: f64) -> Self::F32;
}

/// Every argument is a number: float results are numbers.
pub struct Plain;

/// Some argument is a tensor: float results are (0-d) tensors.
pub struct Traced;

impl Kind for Plain {
    type Or<K: Kind> = K;
    type F64 = f64;
    type F32 = f32;
    #[inline]
    fn f64_out(v: f64) -> f64 {
        v
    }
    #[inline]
    fn f32_out(v: f64) -> f32 {
        v as f32
    }
}

impl Kind for Traced {
    type Or<K: Kind> = Traced;
    type F64 = Tensor;
    type F32 = Tensor;
    fn f64_out(v: f64) -> Tensor {
        Tensor::scalar(v)
    }
    fn f32_out(v: f64) -> Tensor {
        Tensor::scalar(v as f32)
    }
}

/// An argument passed for an `f64` (`F = f64`) or `f32` parameter of a
/// `#[differentiable]` function's plain call: a number of that type, or a
/// tensor (a traced 0-d tensor inside another traced body; any tensor of
/// that dtype, computed element-wise, outside).
///
/// ```
/// use rlx::runtime::rewritten::NumberArg;
/// use rlx::Tensor;
/// assert_eq!(NumberArg::<f64>::number(&2.0f64), Some(2.0));
/// assert_eq!(NumberArg::<f64>::number(&Tensor::scalar(2.0f64)), None);
/// ```
#[diagnostic::on_unimplemented(
    message = "a `{F}` parameter of a `#[differentiable]` function takes a `{F}`, a `Tensor` or a `&Tensor`, not `{Self}`"
)]
pub trait NumberArg<F> {
    /// [`Plain`] for a number, [`Traced`] for a tensor.
    type Kind: Kind;
    /// The argument as the plan takes it.
    fn arg(&self) -> Arg<'_>;
    /// The number, widened to `f64` (`None` for a tensor).
    fn number(&self) -> Option<f64>;
}

impl NumberArg<f64> for f64 {
    type Kind = Plain;
    #[inline]
    fn arg(&self) -> Arg<'_> {
        Arg::F64(*self)
    }
    #[inline]
    fn number(&self) -> Option<f64> {
        Some(*self)
    }
}

impl NumberArg<f32> for f32 {
    type Kind = Plain;
    #[inline]
    fn arg(&self) -> Arg<'_> {
        Arg::F32(*self)
    }
    #[inline]
    fn number(&self) -> Option<f64> {
        Some(f64::from(*self))
    }
}

impl<F> NumberArg<F> for Tensor {
    type Kind = Traced;
    fn arg(&self) -> Arg<'_> {
        Arg::Tensor(self)
    }
    fn number(&self) -> Option<f64> {
        None
    }
}

impl<F> NumberArg<F> for &Tensor {
    type Kind = Traced;
    fn arg(&self) -> Arg<'_> {
        Arg::Tensor(self)
    }
    fn number(&self) -> Option<f64> {
        None
    }
}

/// The argument of a generic number parameter as the plan takes it.
#[inline]
pub fn number_arg<F, T: NumberArg<F>>(t: &T) -> Arg<'_> {
    t.arg()
}

/// The number of a generic number parameter, if it is one.
#[inline]
pub fn number_of<F, T: NumberArg<F>>(t: &T) -> Option<f64> {
    t.number()
}
