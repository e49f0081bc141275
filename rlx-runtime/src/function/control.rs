//! Rewritten control flow (see rlx-macros/src/rewrite.rs): comparisons
//! ([`lt`] ... [`ne`]), `&&`/`||` ([`and`], [`or`]) and `if` ([`select`])
//! in a traced body work on plain values as usual and on tensors
//! element-wise.

use rlx_core::{BinaryOp, CmpOp, DType, Op, Shape};

use crate::tensor::Tensor;

/// Operands of a rewritten comparison: tensors compare element-wise into a
/// `Bool` mask; plain values compare as usual into a `bool`.
#[diagnostic::on_unimplemented(
    message = "cannot compare `{Self}` with `{Rhs}` in traced code",
    note = "traced comparisons take `Tensor`/`&Tensor` on one side and a `Tensor`, `&Tensor`, `f32` or `f64` on the other"
)]
pub trait Compare<Rhs: ?Sized> {
    /// `bool` or a mask `Tensor`.
    type Output;
    /// Compares `self` with `rhs`.
    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: &Rhs) -> Self::Output;
}

impl<T: PartialOrd> Compare<T> for T {
    type Output = bool;
    fn compare(&self, op: CmpOp, rhs: &T) -> bool {
        match op {
            CmpOp::Lt => self < rhs,
            CmpOp::Le => self <= rhs,
            CmpOp::Gt => self > rhs,
            CmpOp::Ge => self >= rhs,
            CmpOp::Eq => self == rhs,
            CmpOp::Ne => self != rhs,
        }
    }
}

/// A tensor operand of a traced comparison, select or logic op.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tensor operand in traced code",
    label = "an `if` on a traced condition selects element-wise, so each branch must give a `Tensor`, `&Tensor`, `f32` or `f64`",
    note = "select tuple elements one by one: `let a = if c {{ a1 }} else {{ a2 }};`"
)]
pub trait TracedOperand {
    /// The operand as a tensor; `like` gives the dtype for a bare scalar.
    fn operand(&self, like: Option<DType>) -> Tensor;
    /// The dtype if the operand is a tensor.
    fn tensor_dtype(&self) -> Option<DType>;
}

impl TracedOperand for Tensor {
    fn operand(&self, _: Option<DType>) -> Tensor {
        self.clone()
    }
    fn tensor_dtype(&self) -> Option<DType> {
        Some(self.dtype())
    }
}

impl TracedOperand for &Tensor {
    fn operand(&self, _: Option<DType>) -> Tensor {
        (*self).clone()
    }
    fn tensor_dtype(&self) -> Option<DType> {
        Some(self.dtype())
    }
}

macro_rules! scalar_operand {
    ($($f:ty => $d:expr),*) => {$(
        impl TracedOperand for $f {
            fn operand(&self, like: Option<DType>) -> Tensor {
                Tensor::full(Shape::scalar(), *self as f64, like.unwrap_or($d))
            }
            fn tensor_dtype(&self) -> Option<DType> {
                None
            }
        }
    )*};
}
scalar_operand!(f32 => DType::F32, f64 => DType::F64);

#[track_caller]
fn tensor_pair(a: &impl TracedOperand, b: &impl TracedOperand) -> (Tensor, Tensor) {
    let like = a.tensor_dtype().or(b.tensor_dtype());
    (a.operand(like), b.operand(like))
}

// One impl per tensor side, generic over the other operand, so that the
// result type (`Tensor`) is known before a float literal's type is: `let m
// = x > 0.0; m.not()` needs no annotation.
impl<R: TracedOperand> Compare<R> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: &R) -> Tensor {
        let (a, b) = tensor_pair(self, rhs);
        Tensor::apply_or_panic(Op::Compare(op), &[&a, &b])
    }
}

impl<R: TracedOperand> Compare<R> for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: &R) -> Tensor {
        let (a, b) = tensor_pair(self, rhs);
        Tensor::apply_or_panic(Op::Compare(op), &[&a, &b])
    }
}

/// A number on the left of a traced comparison (`0.5 <= x`).
pub trait ScalarOperand: TracedOperand {}
impl ScalarOperand for f64 {}
impl ScalarOperand for f32 {}

macro_rules! scalar_compare {
    ($($r:ty),*) => {$(
        impl<L: ScalarOperand> Compare<$r> for L {
            type Output = Tensor;
            #[track_caller]
            fn compare(&self, op: CmpOp, rhs: &$r) -> Tensor {
                let (a, b) = tensor_pair(self, rhs);
                Tensor::apply_or_panic(Op::Compare(op), &[&a, &b])
            }
        }
    )*};
}
scalar_compare!(Tensor, &Tensor);

macro_rules! cmp_fns {
    ($($name:ident => $op:ident),*) => {$(
        #[doc = concat!("The rewritten `", stringify!($name), "` comparison.")]
        #[track_caller]
        pub fn $name<A: Compare<B> + ?Sized, B: ?Sized>(a: &A, b: &B) -> A::Output {
            a.compare(CmpOp::$op, b)
        }
    )*};
}
cmp_fns!(lt => Lt, le => Le, gt => Gt, ge => Ge, eq => Eq, ne => Ne);

/// Operands of a rewritten `&&`/`||`: element-wise on masks, as usual on
/// `bool`s (both sides are evaluated).
#[diagnostic::on_unimplemented(
    message = "cannot combine `{Self}` and `{Rhs}` with `&&`/`||` in traced code",
    note = "combine two masks (traced comparisons) or two `bool`s"
)]
pub trait Logic<Rhs> {
    /// `bool` or a mask `Tensor`.
    type Output;
    /// `self && rhs` (`and = true`) or `self || rhs`.
    fn logic(self, and: bool, rhs: Rhs) -> Self::Output;
}

impl Logic<bool> for bool {
    type Output = bool;
    fn logic(self, and: bool, rhs: bool) -> bool {
        if and {
            self && rhs
        } else {
            self || rhs
        }
    }
}

impl Logic<Tensor> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn logic(self, and: bool, rhs: Tensor) -> Tensor {
        let op = if and { BinaryOp::And } else { BinaryOp::Or };
        Tensor::apply_or_panic(Op::Binary(op), &[&self, &rhs])
    }
}

/// The rewritten `a && b`.
#[track_caller]
pub fn and<A: Logic<B>, B>(a: A, b: B) -> A::Output {
    a.logic(true, b)
}

/// The rewritten `a || b`.
#[track_caller]
pub fn or<A: Logic<B>, B>(a: A, b: B) -> A::Output {
    a.logic(false, b)
}

/// Conditions of a rewritten `if`/`else`: a `bool` picks one branch value;
/// a mask selects element-wise (`Tensor::select`).
#[diagnostic::on_unimplemented(
    message = "an `if` on a traced condition selects element-wise between tensors, but its branches produce `{A}` and `{B}`",
    note = "on a traced condition both branches must give a `Tensor`, `&Tensor`, `f32` or `f64`"
)]
pub trait Cond<A, B> {
    /// The selected value's type.
    type Output;
    /// Picks between `a` (where true) and `b`.
    fn pick(self, a: A, b: B) -> Self::Output;
}

impl<T> Cond<T, T> for bool {
    type Output = T;
    fn pick(self, a: T, b: T) -> T {
        if self {
            a
        } else {
            b
        }
    }
}

impl<A: TracedOperand, B: TracedOperand> Cond<A, B> for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn pick(self, a: A, b: B) -> Tensor {
        let (a, b) = tensor_pair(&a, &b);
        Tensor::apply_or_panic(Op::Select, &[&self, &a, &b])
    }
}

/// The rewritten `if cond { a } else { b }`.
#[track_caller]
pub fn select<C: Cond<A, B>, A, B>(cond: C, a: A, b: B) -> C::Output {
    cond.pick(a, b)
}
