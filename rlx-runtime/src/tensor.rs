//! [`Tensor`]: a concrete array of values, or a node of the active trace.
//!
//! Every op on tensors goes through [`Tensor::apply`] (defined above this
//! module, in `apply`): when an operand is traced, the op is recorded in the
//! thread's trace (see [`crate::trace`]); otherwise it is computed at once by
//! the eager kernels. Methods and
//! operators therefore work unchanged inside and outside `#[differentiable]`
//! code.
//!
//! Concrete values are contiguous and row-major, held in an `Arc` so that
//! cloning is cheap.

use std::sync::Arc;

use rlx_core::{DType, Error, NodeId, Result, Shape, TensorType};

use crate::context;
use crate::storage::{Element, Storage};

/// A tensor: concrete values, or a traced node.
///
/// ```
/// use rlx_runtime::Tensor;
/// let t = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
/// assert_eq!(t.shape().dims(), &[2, 2]);
/// assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    pub(crate) repr: Repr,
}

#[derive(Clone)]
pub(crate) enum Repr {
    Concrete(Concrete),
    Traced(Traced),
}

/// Concrete values.
#[derive(Clone)]
pub(crate) struct Concrete {
    pub(crate) storage: Arc<Storage>,
    pub(crate) shape: Shape,
    /// Id of the innermost trace active when the tensor was created (0: none).
    /// A concrete tensor may only enter the trace it was created in; see
    /// [`crate::trace`] for why.
    pub(crate) origin: u64,
}

/// A node of a trace.
#[derive(Clone)]
pub(crate) struct Traced {
    pub(crate) trace: u64,
    pub(crate) node: NodeId,
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
}

impl Tensor {
    /// A concrete tensor from storage and shape; errors if the sizes differ.
    pub fn from_storage(storage: Storage, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if storage.len() != shape.numel() {
            return Err(Error::InvalidArgument {
                op: "Tensor::from_storage",
                message: format!(
                    "{} values given for shape {shape}, which has {} elements",
                    storage.len(),
                    shape.numel()
                ),
            });
        }
        Ok(Tensor {
            repr: Repr::Concrete(Concrete {
                storage: Arc::new(storage),
                shape,
                origin: context::current_id(),
            }),
        })
    }

    /// A tensor holding `data` in `shape`; errors if the sizes differ.
    pub fn try_from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_storage(T::into_storage(data), shape)
    }

    /// A tensor holding `data` in `shape`.
    ///
    /// # Panics
    /// If `data.len()` is not the number of elements of `shape`; use
    /// [`Tensor::try_from_vec`] to get an `Error` instead.
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Tensor {
        Tensor::try_from_vec(data, shape).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A tensor holding a copy of `data` in `shape`.
    ///
    /// # Panics
    /// If `data.len()` is not the number of elements of `shape`; use
    /// [`Tensor::try_from_vec`] to get an `Error` instead.
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: impl Into<Shape>) -> Tensor {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// A 0-d tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::from_vec(vec![value], Shape::scalar())
    }

    /// A tensor of `shape` and `dtype` where every element is `value`: a
    /// number, or a 0-d tensor (an `f64` parameter inside a
    /// `#[differentiable]` body is one), broadcast and cast.
    ///
    /// ```
    /// use rlx_runtime::{DType, Tensor};
    /// let a = Tensor::full(1.5, [2], DType::F32);
    /// assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5, 1.5]);
    /// let b = Tensor::full(&Tensor::scalar(2.0f64), [2], DType::F64);
    /// assert_eq!(b.to_vec::<f64>().unwrap(), vec![2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn full(value: impl FillValue, shape: impl Into<Shape>, dtype: DType) -> Tensor {
        value.fill(shape.into(), dtype)
    }

    /// Zeros of `shape` and `dtype`.
    pub fn zeros(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        Tensor::full(0.0, shape, dtype)
    }

    /// Ones of `shape` and `dtype`.
    pub fn ones(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        Tensor::full(1.0, shape, dtype)
    }

    /// `0, 1, ..., n - 1` as a 1-d tensor of `dtype`.
    pub fn arange(n: usize, dtype: DType) -> Tensor {
        let storage = Storage::from_f64(dtype, (0..n).map(|i| i as f64));
        Tensor::from_storage(storage, [n]).expect("sizes agree by construction")
    }

    /// The `n x n` identity matrix of `dtype`.
    pub fn eye(n: usize, dtype: DType) -> Tensor {
        let storage = Storage::from_f64(dtype, (0..n * n).map(|i| (i / n == i % n) as u8 as f64));
        Tensor::from_storage(storage, [n, n]).expect("sizes agree by construction")
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        match &self.repr {
            Repr::Concrete(c) => &c.shape,
            Repr::Traced(t) => &t.shape,
        }
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        match &self.repr {
            Repr::Concrete(c) => c.storage.dtype(),
            Repr::Traced(t) => t.dtype,
        }
    }

    /// Shape and dtype.
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.shape().clone(), self.dtype())
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape().rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape().numel()
    }

    /// The node of the innermost trace this tensor stands for, if it is traced.
    pub fn traced_node(&self) -> Option<NodeId> {
        match &self.repr {
            Repr::Traced(t) => Some(t.node),
            Repr::Concrete(_) => None,
        }
    }

    /// Whether this tensor is a node of a trace rather than concrete values.
    pub fn is_traced(&self) -> bool {
        matches!(self.repr, Repr::Traced(_))
    }

    /// The values, or an error for a traced tensor.
    pub fn storage(&self) -> Result<&Storage> {
        match &self.repr {
            Repr::Concrete(c) => Ok(&c.storage),
            Repr::Traced(_) => Err(traced_read()),
        }
    }

    /// The values as a slice of `T`; errors if the dtype is not `T`'s or
    /// the tensor is traced.
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let s = self.storage()?;
        T::slice(s).ok_or_else(|| Error::ReadMismatch {
            wanted: T::DTYPE.to_string(),
            got: s.dtype(),
            shape: self.shape().clone(),
        })
    }

    /// The values copied into a `Vec<T>`; errors if the dtype is not `T`'s.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.as_slice::<T>().map(<[T]>::to_vec)
    }

    /// The single value of a one-element tensor; errors on a dtype or size mismatch.
    pub fn item<T: Element>(&self) -> Result<T> {
        let s = self.as_slice::<T>()?;
        if s.len() != 1 {
            return Err(Error::ReadMismatch {
                wanted: format!("a single {}", T::DTYPE),
                got: self.dtype(),
                shape: self.shape().clone(),
            });
        }
        Ok(s[0])
    }

    /// The values converted to `f64`, whatever the dtype.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(self.storage()?.to_f64_vec())
    }

    /// Mutable access to the values, copying them first if they are shared.
    pub fn storage_mut(&mut self) -> Result<&mut Storage> {
        match &mut self.repr {
            Repr::Concrete(c) => Ok(Arc::make_mut(&mut c.storage)),
            Repr::Traced(_) => Err(traced_read()),
        }
    }
}

fn traced_read() -> Error {
    Error::Unsupported(
        "cannot read the values of a traced tensor inside `#[differentiable]` code\n  = help: values exist only when the compiled function runs; use tensor ops instead of reading elements".into(),
    )
}

/// What [`Tensor::full`] fills with: an `f64`, or a tensor that broadcasts
/// to the shape (it is cast to the dtype; those impls live with the shape
/// ops in `ops/shape.rs`).
pub trait FillValue {
    /// A tensor of `shape` and `dtype` filled with the value.
    #[track_caller]
    fn fill(self, shape: Shape, dtype: DType) -> Tensor;
}

impl FillValue for f64 {
    fn fill(self, shape: Shape, dtype: DType) -> Tensor {
        let storage = Storage::full(dtype, shape.numel(), self);
        Tensor::from_storage(storage, shape).expect("sizes agree by construction")
    }
}
