//! Tensor methods and operators: one method per primitive op, named like the
//! [`Graph`](rlx_core::Graph) builders, plus a few composites built from them.
//!
//! Every method goes through [`Tensor::apply_or_panic`] (or
//! [`Tensor::apply`] for the `try_*` forms), so it computes eagerly on
//! concrete tensors and records a node on traced ones; all are
//! `#[track_caller]`, so an error names the caller's file and line.
//!
//! Files by kind: `unary` (element-wise functions), `binary` (arithmetic
//! and comparisons), `shape` (layout and indexing), `reduce` (reductions,
//! softmax, linear algebra), `composite` (built from primitives),
//! `std_names` (the `f64` method names: `powf`, `atan2` with a number,
//! `ln_1p`, `hypot`, ...), `complex` (complex tensors from parts, and
//! the ways between real and complex values) and `operators` (`std::ops`).

mod binary;
pub(crate) mod complex;
mod composite;
mod operators;
mod reduce;
mod shape;
pub mod std_names;
mod unary;

use rlx_core::{Op, Result};

use crate::tensor::Tensor;

impl Tensor {
    /// A 0-d tensor of this tensor's dtype holding `value`. Created in the
    /// current trace (if any), so traced code may use it as a constant.
    ///
    /// ```
    /// use rlx::{DType, Tensor};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    /// let two = x.scalar_like(2.0);
    /// assert_eq!(two.dtype(), DType::F32);
    /// assert!(two.shape().is_scalar());
    /// ```
    pub fn scalar_like(&self, value: f64) -> Tensor {
        Tensor::full([], value, self.dtype())
    }

    #[track_caller]
    fn op1(&self, op: Op) -> Tensor {
        Tensor::apply_or_panic(op, &[self])
    }

    #[track_caller]
    fn op2(&self, op: Op, other: &Tensor) -> Tensor {
        Tensor::apply_or_panic(op, &[self, other])
    }

    #[track_caller]
    fn try_op1(&self, op: Op) -> Result<Tensor> {
        Tensor::apply(op, &[self])
    }

    #[track_caller]
    fn try_op2(&self, op: Op, other: &Tensor) -> Result<Tensor> {
        Tensor::apply(op, &[self, other])
    }
}
