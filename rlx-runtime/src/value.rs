//! Arguments and results that may be plain numbers instead of tensors.
//!
//! A physics energy of a few `f64` coordinates should not pay for a
//! heap-allocated 0-d tensor per argument and per result. [`Arg`] and
//! [`Value`] carry an `f32`/`f64` directly; [`Executable::run_args`]
//! takes and returns them, so a call of a compiled graph over 0-d inputs
//! and outputs allocates only the result vector.
//!
//! [`Executable::run_args`]: crate::Executable::run_args

use rlx_core::{DType, Error, Result, Shape, TensorType};
use smallvec::SmallVec;

use crate::tensor::Tensor;

/// One argument of a run: a tensor, or a number standing for a 0-d tensor
/// of its type.
///
/// ```
/// use rlx::{Arg, DType, Tensor};
/// let t = Tensor::from_slice(&[1.0f32, 2.0], [2]);
/// let args = [Arg::from(&t), Arg::from(3.0f64)];
/// assert_eq!(args[1].dtype(), DType::F64);
/// assert!(args[1].dims().is_empty());
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A tensor.
    Tensor(&'a Tensor),
    /// A 0-d `F32` value.
    F32(f32),
    /// A 0-d `F64` value.
    F64(f64),
}

impl<'a> From<&'a Tensor> for Arg<'a> {
    fn from(t: &'a Tensor) -> Self {
        Arg::Tensor(t)
    }
}

impl From<f32> for Arg<'_> {
    fn from(v: f32) -> Self {
        Arg::F32(v)
    }
}

impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::F64(v)
    }
}

impl Arg<'_> {
    /// The dimensions of the argument (empty for a number).
    #[inline]
    pub fn dims(&self) -> &[usize] {
        match self {
            Arg::Tensor(t) => t.shape().dims(),
            Arg::F32(_) | Arg::F64(_) => &[],
        }
    }

    /// The element type of the argument.
    #[inline]
    pub fn dtype(&self) -> DType {
        match self {
            Arg::Tensor(t) => t.dtype(),
            Arg::F32(_) => DType::F32,
            Arg::F64(_) => DType::F64,
        }
    }

    /// Shape and dtype.
    pub fn ty(&self) -> TensorType {
        TensorType::new(Shape::new(self.dims()), self.dtype())
    }

    /// Whether the argument has exactly type `ty`.
    ///
    /// Compares dimensions element by element: on the warm path of a small
    /// function a `memcmp` call per comparison is a measurable cost.
    #[inline]
    pub fn matches(&self, ty: &TensorType) -> bool {
        match self {
            Arg::F64(_) => ty.dtype == DType::F64 && ty.shape.rank() == 0,
            Arg::F32(_) => ty.dtype == DType::F32 && ty.shape.rank() == 0,
            Arg::Tensor(t) => t.dtype() == ty.dtype && same_dims(t.shape().dims(), ty.shape.dims()),
        }
    }

    /// Whether the argument is a traced tensor (inside an active trace).
    #[inline]
    pub fn is_traced(&self) -> bool {
        matches!(self, Arg::Tensor(t) if t.is_traced())
    }

    /// The argument as a tensor (a new 0-d tensor for a number; inside a
    /// trace it becomes a constant of that trace).
    pub fn to_tensor(self) -> Tensor {
        match self {
            Arg::Tensor(t) => t.clone(),
            Arg::F32(v) => Tensor::scalar(v),
            Arg::F64(v) => Tensor::scalar(v),
        }
    }
}

/// Argument `i` of the list `head` followed by `tail`.
#[inline]
pub(crate) fn arg_at<'a, 'b>(head: &'a [Arg<'b>], tail: &'a [Arg<'b>], i: usize) -> &'a Arg<'b> {
    head.get(i).unwrap_or_else(|| &tail[i - head.len()])
}

/// Whether values of type `t` travel as plain numbers ([`Arg::F32`],
/// [`Arg::F64`], [`Value::F32`], [`Value::F64`]): 0-d `F32` or `F64`.
pub(crate) fn is_number(t: &TensorType) -> bool {
    t.shape.rank() == 0 && matches!(t.dtype, DType::F32 | DType::F64)
}

/// `a == b` for short dimension lists, without a `memcmp` call.
#[inline]
pub(crate) fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// One result of [`Executable::run_args`]: 0-d `F32`/`F64` outputs come back
/// as numbers, every other output as a tensor.
///
/// ```
/// use rlx::{Tensor, Value};
/// assert_eq!(Value::F64(2.5).into_f64().unwrap(), 2.5);
/// let t = Value::F32(1.5).into_tensor();
/// assert_eq!(t.item::<f32>().unwrap(), 1.5);
/// ```
///
/// [`Executable::run_args`]: crate::Executable::run_args
#[derive(Clone, Debug)]
pub enum Value {
    /// A tensor result.
    Tensor(Tensor),
    /// A 0-d `F32` result.
    F32(f32),
    /// A 0-d `F64` result.
    F64(f64),
}

impl Value {
    /// The result as a tensor (a new 0-d tensor for a number).
    #[inline]
    pub fn into_tensor(self) -> Tensor {
        match self {
            Value::Tensor(t) => t,
            Value::F32(v) => Tensor::scalar(v),
            Value::F64(v) => Tensor::scalar(v),
        }
    }

    /// The result as an `f64`: a number of type `F64`, or a concrete
    /// one-element `F64` tensor.
    #[inline]
    pub fn into_f64(self) -> Result<f64> {
        match self {
            Value::F64(v) => Ok(v),
            Value::Tensor(t) => t.item::<f64>(),
            Value::F32(_) => Err(wrong_type("f64", DType::F32)),
        }
    }

    /// The result as an `f32`: a number of type `F32`, or a concrete
    /// one-element `F32` tensor.
    #[inline]
    pub fn into_f32(self) -> Result<f32> {
        match self {
            Value::F32(v) => Ok(v),
            Value::Tensor(t) => t.item::<f32>(),
            Value::F64(_) => Err(wrong_type("f32", DType::F64)),
        }
    }

    /// Whether the result is a traced tensor (inside an active trace).
    #[inline]
    pub fn is_traced(&self) -> bool {
        matches!(self, Value::Tensor(t) if t.is_traced())
    }
}

/// The results of one run: on the stack for up to six (a value and the
/// four Hessian blocks of two parameters, say), so that a warm call of a
/// small function allocates only its tensor results.
///
/// ```
/// use rlx::{Value, runtime::Values};
/// let vs: Values = [Value::F64(1.0), Value::F64(2.0)].into_iter().collect();
/// assert!(!vs.spilled());
/// ```
pub type Values = SmallVec<[Value; 6]>;

fn wrong_type(wanted: &str, got: DType) -> Error {
    Error::ReadMismatch {
        wanted: format!("a single {wanted}"),
        got,
        shape: Shape::scalar(),
    }
}
