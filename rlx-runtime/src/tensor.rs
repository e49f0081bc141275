//! [`Tensor`]: a concrete array of values, or a node of the active trace.
//!
//! Every op on tensors goes through [`Tensor::apply`] (defined above this
//! module, in `apply`): when an operand is traced, the op is recorded in the
//! thread's trace (see [`crate::trace`]); otherwise it is computed at once by
//! the eager kernels. Methods and
//! operators therefore work unchanged inside and outside `#[differentiable]`
//! code.
//!
//! Concrete values are contiguous and row-major; a small tensor owns them
//! (one heap allocation), a larger one shares them behind an `Arc` so that
//! cloning is cheap (see `crate::buffer`).

use rlx_core::{DType, Error, NodeId, Result, Shape, TensorType};

use crate::buffer::Buffer;
use crate::context;
use crate::storage::{allocate, out_of_memory, try_copy, Element, Storage};

/// A tensor: concrete values, or a traced node.
///
/// ```
/// use rlx::Tensor;
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
///
/// `shape` is declared before `storage` so that it is dropped first: the
/// buffer's drop (which gives a small result's vector back to the pool)
/// is then the last thing a tensor's drop does, and its rare out-of-line
/// calls are tail calls, so that dropping a small tensor needs no stack
/// frame.
#[derive(Clone)]
pub(crate) struct Concrete {
    pub(crate) shape: Shape,
    pub(crate) storage: Buffer,
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
    /// A concrete tensor from storage and shape; errors if the sizes differ
    /// or the shape is too large for any tensor ([`Error::TooLarge`]).
    pub fn from_storage(storage: Storage, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_storage_in("Tensor::from_storage", storage, shape.into())
    }

    fn from_storage_in(op: &'static str, storage: Storage, shape: Shape) -> Result<Tensor> {
        shape.check_size(storage.dtype(), op, &[])?;
        if storage.len() != shape.numel() {
            return Err(length_mismatch(op, storage.len(), &shape));
        }
        Ok(Tensor::concrete(storage, shape))
    }

    /// A concrete tensor; the caller vouches that the sizes agree.
    #[inline]
    pub(crate) fn concrete(storage: Storage, shape: Shape) -> Tensor {
        Tensor::concrete_in(storage, shape, context::current_id())
    }

    /// [`Tensor::concrete`] created in the trace `origin`, which the caller
    /// read from [`context::current_id`] (once for all the results of a
    /// call: the read is a thread-local access).
    #[inline]
    pub(crate) fn concrete_in(storage: Storage, shape: Shape, origin: u64) -> Tensor {
        debug_assert_eq!(storage.len(), shape.numel());
        debug_assert_eq!(origin, context::current_id());
        Tensor {
            repr: Repr::Concrete(Concrete {
                storage: Buffer::new(storage),
                shape,
                origin,
            }),
        }
    }

    /// [`Tensor::concrete_in`] for values already in a tensor's buffer.
    #[inline]
    pub(crate) fn from_buffer_in(storage: Buffer, shape: Shape, origin: u64) -> Tensor {
        debug_assert_eq!(storage.len(), shape.numel());
        debug_assert_eq!(origin, context::current_id());
        Tensor {
            repr: Repr::Concrete(Concrete {
                storage,
                shape,
                origin,
            }),
        }
    }

    /// A tensor holding `data` in `shape`; errors if the sizes differ or
    /// the shape is too large for any tensor.
    ///
    /// ```
    /// use rlx::Tensor;
    /// assert!(Tensor::try_from_vec(vec![1.0f64, 2.0], [2]).is_ok());
    /// assert!(Tensor::try_from_vec(vec![1.0f64, 2.0], [3]).is_err());
    /// assert!(Tensor::try_from_vec(vec![1.0f64, 2.0], [usize::MAX, 2]).is_err());
    /// ```
    pub fn try_from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor> {
        Tensor::from_storage_in("Tensor::from_vec", T::into_storage(data), shape.into())
    }

    /// A tensor holding `data` in `shape`.
    ///
    /// # Panics
    /// If `data.len()` is not the number of elements of `shape`, with the
    /// caller's location; use [`Tensor::try_from_vec`] to get an `Error` instead.
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>) -> Tensor {
        unwrap_or_panic(Tensor::try_from_vec(data, shape))
    }

    /// A tensor holding a copy of `data` in `shape`; errors if the sizes
    /// differ, the shape is too large, or the copy cannot be allocated.
    ///
    /// ```
    /// use rlx::Tensor;
    /// let t = Tensor::try_from_slice(&[1i64, 2, 3, 4], [2, 2]).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4]);
    /// assert!(Tensor::try_from_slice(&[1i64], [2, 2]).is_err());
    /// ```
    pub fn try_from_slice<T: Element>(data: &[T], shape: impl Into<Shape>) -> Result<Tensor> {
        const OP: &str = "Tensor::from_slice";
        let shape = shape.into();
        shape.check_size(T::DTYPE, OP, &[])?;
        if data.len() != shape.numel() {
            return Err(length_mismatch(OP, data.len(), &shape));
        }
        let v = try_copy(data).map_err(|_| out_of_memory(OP, &shape, T::DTYPE))?;
        Ok(Tensor::concrete(T::into_storage(v), shape))
    }

    /// A tensor holding a copy of `data` in `shape`.
    ///
    /// # Panics
    /// If `data.len()` is not the number of elements of `shape`, with the
    /// caller's location; use [`Tensor::try_from_slice`] to get an `Error` instead.
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: impl Into<Shape>) -> Tensor {
        unwrap_or_panic(Tensor::try_from_slice(data, shape))
    }

    /// A 0-d tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::concrete(T::into_storage(vec![value]), Shape::scalar())
    }

    /// A tensor of `shape` and `dtype` where every element is `value`;
    /// [`Error::TooLarge`] if no tensor may have that shape,
    /// [`Error::OutOfMemory`] if the allocator refuses the memory (instead
    /// of aborting the process).
    ///
    /// ```
    /// use rlx::{DType, Error, Tensor};
    /// let t = Tensor::try_full([2, 3], 2.0, DType::F32).unwrap();
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![2.0; 6]);
    /// let e = Tensor::try_full([1usize << 32, 1 << 32], 0.0, DType::F64).unwrap_err();
    /// assert!(matches!(e, Error::TooLarge { .. }));
    /// ```
    pub fn try_full(shape: impl Into<Shape>, value: f64, dtype: DType) -> Result<Tensor> {
        Tensor::full_in("Tensor::full", value, shape.into(), dtype)
    }

    fn full_in(op: &'static str, value: f64, shape: Shape, dtype: DType) -> Result<Tensor> {
        let storage = allocate(op, &shape, dtype, value)?;
        Ok(Tensor::concrete(storage, shape))
    }

    /// A tensor of `shape` and `dtype` where every element is `value`: a
    /// number, or a 0-d tensor (an `f64` parameter inside a
    /// `#[differentiable]` body is one), broadcast and cast. The shape
    /// comes first, as in `zeros`, `ones` and NumPy's `full`.
    ///
    /// # Panics
    /// If no tensor may have that shape or the memory cannot be allocated,
    /// with the caller's location; use [`Tensor::try_full`] to get an `Error`.
    ///
    /// ```
    /// use rlx::{DType, Tensor};
    /// let a = Tensor::full([2], 1.5, DType::F32);
    /// assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.5, 1.5]);
    /// let b = Tensor::full([2], &Tensor::scalar(2.0f64), DType::F64);
    /// assert_eq!(b.to_vec::<f64>().unwrap(), vec![2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn full(shape: impl Into<Shape>, value: impl FillValue, dtype: DType) -> Tensor {
        value.fill(shape.into(), dtype)
    }

    /// Zeros of `shape` and `dtype`, or an error as [`Tensor::try_full`] gives.
    ///
    /// ```
    /// use rlx::{DType, Tensor};
    /// assert!(Tensor::try_zeros([3], DType::F64).is_ok());
    /// assert!(Tensor::try_zeros([usize::MAX, 2], DType::F64).is_err());
    /// ```
    pub fn try_zeros(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::full_in("Tensor::zeros", 0.0, shape.into(), dtype)
    }

    /// Zeros of `shape` and `dtype`.
    ///
    /// # Panics
    /// As [`Tensor::full`]; use [`Tensor::try_zeros`] to get an `Error`.
    #[track_caller]
    pub fn zeros(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        unwrap_or_panic(Tensor::try_zeros(shape, dtype))
    }

    /// Ones of `shape` and `dtype`, or an error as [`Tensor::try_full`] gives.
    ///
    /// ```
    /// use rlx::{DType, Tensor};
    /// assert_eq!(Tensor::try_ones([2], DType::I64).unwrap().to_vec::<i64>().unwrap(), vec![1, 1]);
    /// ```
    pub fn try_ones(shape: impl Into<Shape>, dtype: DType) -> Result<Tensor> {
        Tensor::full_in("Tensor::ones", 1.0, shape.into(), dtype)
    }

    /// Ones of `shape` and `dtype`.
    ///
    /// # Panics
    /// As [`Tensor::full`]; use [`Tensor::try_ones`] to get an `Error`.
    #[track_caller]
    pub fn ones(shape: impl Into<Shape>, dtype: DType) -> Tensor {
        unwrap_or_panic(Tensor::try_ones(shape, dtype))
    }

    /// `0, 1, ..., n - 1` as a 1-d tensor of `dtype`, or an error as
    /// [`Tensor::try_full`] gives.
    pub fn try_arange(n: usize, dtype: DType) -> Result<Tensor> {
        let shape = Shape::from([n]);
        let mut storage = allocate("Tensor::arange", &shape, dtype, 0.0)?;
        fill(&mut storage, |i| i as f64);
        Ok(Tensor::concrete(storage, shape))
    }

    /// `0, 1, ..., n - 1` as a 1-d tensor of `dtype`.
    ///
    /// # Panics
    /// As [`Tensor::full`]; use [`Tensor::try_arange`] to get an `Error`.
    #[track_caller]
    pub fn arange(n: usize, dtype: DType) -> Tensor {
        unwrap_or_panic(Tensor::try_arange(n, dtype))
    }

    /// The `n x n` identity matrix of `dtype`, or an error as
    /// [`Tensor::try_full`] gives.
    ///
    /// ```
    /// use rlx::{DType, Tensor};
    /// assert_eq!(Tensor::try_eye(2, DType::F64).unwrap().to_vec::<f64>().unwrap(), vec![1.0, 0.0, 0.0, 1.0]);
    /// assert!(Tensor::try_eye(1 << 32, DType::F64).is_err());
    /// ```
    pub fn try_eye(n: usize, dtype: DType) -> Result<Tensor> {
        let shape = Shape::from([n, n]);
        let mut storage = allocate("Tensor::eye", &shape, dtype, 0.0)?;
        fill(&mut storage, |i| (i / n == i % n) as u8 as f64);
        Ok(Tensor::concrete(storage, shape))
    }

    /// The `n x n` identity matrix of `dtype`.
    ///
    /// # Panics
    /// As [`Tensor::full`]; use [`Tensor::try_eye`] to get an `Error`.
    #[track_caller]
    pub fn eye(n: usize, dtype: DType) -> Tensor {
        unwrap_or_panic(Tensor::try_eye(n, dtype))
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &Shape {
        match &self.repr {
            Repr::Concrete(c) => &c.shape,
            Repr::Traced(t) => &t.shape,
        }
    }

    /// The dtype.
    #[inline]
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
    #[inline]
    pub fn is_traced(&self) -> bool {
        matches!(self.repr, Repr::Traced(_))
    }

    /// The values, or an error for a traced tensor.
    #[inline]
    pub fn storage(&self) -> Result<&Storage> {
        match &self.repr {
            Repr::Concrete(c) => Ok(&c.storage),
            Repr::Traced(_) => Err(traced_read()),
        }
    }

    /// The values as a slice of `T`; errors if the dtype is not `T`'s or
    /// the tensor is traced.
    #[inline]
    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        let s = self.storage()?;
        T::slice(s).ok_or_else(|| Error::ReadMismatch {
            wanted: T::DTYPE.to_string(),
            got: s.dtype(),
            shape: self.shape().clone(),
        })
    }

    /// The values copied into a `Vec<T>`; errors if the dtype is not `T`'s
    /// (or the copy cannot be allocated).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        try_copy(self.as_slice::<T>()?)
            .map_err(|_| out_of_memory("Tensor::to_vec", self.shape(), T::DTYPE))
    }

    /// The single value of a one-element tensor; errors on a dtype or size mismatch.
    #[inline]
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

    /// The values converted to `f64`, whatever the real dtype; a complex
    /// tensor is an error (its imaginary parts would be lost: read it with
    /// [`Tensor::to_complex_vec`], or take `real()` first).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let s = self.storage()?;
        if s.dtype().is_complex() {
            return Err(complex_read(self));
        }
        Ok(s.to_f64_vec())
    }

    /// The single value of a one-element tensor converted to `f64`,
    /// whatever the dtype (a norm, an energy); errors on a traced tensor
    /// or another size. [`Tensor::item`] reads it without converting.
    ///
    /// ```
    /// use rlx::{DType, Tensor};
    /// let r = Tensor::from_slice(&[3.0f32, 4.0], [2]).square().sum_all().sqrt();
    /// assert_eq!(r.to_f64().unwrap(), 5.0);
    /// let e = Tensor::zeros([2], DType::F64).to_f64().unwrap_err();
    /// assert!(e.to_string().contains("a single f64"), "{e}");
    /// ```
    pub fn to_f64(&self) -> Result<f64> {
        let s = self.storage()?;
        if s.dtype().is_complex() {
            return Err(complex_read(self));
        }
        if s.len() != 1 {
            return Err(Error::ReadMismatch {
                wanted: "a single f64".into(),
                got: self.dtype(),
                shape: self.shape().clone(),
            });
        }
        Ok(s.get_f64(0))
    }

    /// Mutable access to the values, copying them first if they are shared.
    pub fn storage_mut(&mut self) -> Result<&mut Storage> {
        match &mut self.repr {
            // Copy on write, fallibly: a shared buffer is copied with
            // `try_reserve`, so a refused allocation is an `Err`.
            Repr::Concrete(c) => {
                let dtype = c.storage.dtype();
                c.storage
                    .make_mut()
                    .map_err(|_| out_of_memory("storage_mut", &c.shape, dtype))
            }
            Repr::Traced(_) => Err(traced_read()),
        }
    }
}

/// The value, or a panic with the error's message at the caller's location
/// (`#[track_caller]` reaches the `panic!` because no closure is in between).
#[track_caller]
pub(crate) fn unwrap_or_panic<T>(r: Result<T>) -> T {
    match r {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    }
}

fn length_mismatch(op: &'static str, len: usize, shape: &Shape) -> Error {
    Error::InvalidArgument {
        op,
        message: format!(
            "{len} values given for shape {shape}, which has {} elements\n  = help: pass exactly {} values, in row-major order",
            shape.numel(),
            shape.numel()
        ),
    }
}

/// Sets element `i` of `s` to `f(i)` converted to its dtype.
fn fill(s: &mut Storage, f: impl Fn(usize) -> f64) {
    fn go<T: Element>(v: &mut [T], f: impl Fn(usize) -> f64) {
        for (i, x) in v.iter_mut().enumerate() {
            *x = T::from_f64(f(i));
        }
    }
    match s {
        Storage::F32(v) => go(v, f),
        Storage::F64(v) => go(v, f),
        Storage::F16(v) => go(v, f),
        Storage::BF16(v) => go(v, f),
        Storage::I64(v) => go(v, f),
        Storage::Bool(v) => go(v, f),
        Storage::C32(v) => go(v, f),
        Storage::C64(v) => go(v, f),
    }
}

/// The error for reading a complex tensor as real numbers.
fn complex_read(t: &Tensor) -> Error {
    Error::ReadMismatch {
        wanted: "real values (a complex tensor is read with `to_complex_vec` or `item::<C64>`, or made real with `real`, `imag`, `abs` or `arg`)".into(),
        got: t.dtype(),
        shape: t.shape().clone(),
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a value to fill a tensor with",
    label = "expected an `f64` or a `Tensor` here",
    note = "`Tensor::full` takes `(shape, value, dtype)`: the shape first, as `zeros(shape, dtype)` and NumPy's `full`"
)]
pub trait FillValue {
    /// A tensor of `shape` and `dtype` filled with the value.
    #[track_caller]
    fn fill(self, shape: Shape, dtype: DType) -> Tensor;
}

impl FillValue for f64 {
    #[track_caller]
    fn fill(self, shape: Shape, dtype: DType) -> Tensor {
        unwrap_or_panic(Tensor::try_full(shape, self, dtype))
    }
}
