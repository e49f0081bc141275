//! Shape, layout and indexing ops: reshape, broadcast, transpose, concat,
//! slice, gather, scatter-add, select, cast, stop-gradient.

use std::borrow::Borrow;
use std::ops::RangeBounds;

use rlx_core::{DType, Op, Result, Shape};

use crate::tensor::{FillValue, Tensor};

impl Tensor {
    /// The same elements in a new shape (row-major order).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::arange(6, rlx::DType::F64).reshape([2, 3]);
    /// assert_eq!(x.shape().dims(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: impl Into<Shape>) -> Tensor {
        self.op1(Op::Reshape {
            shape: shape.into(),
        })
    }

    /// [`Tensor::reshape`] returning an error if the element counts differ.
    #[track_caller]
    pub fn try_reshape(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        self.try_op1(Op::Reshape {
            shape: shape.into(),
        })
    }

    /// NumPy broadcast to `shape`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 2.0], [2]).broadcast_to([3, 2]);
    /// assert_eq!(x.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Tensor {
        self.op1(Op::Broadcast {
            shape: shape.into(),
        })
    }

    /// [`Tensor::broadcast_to`] returning an error if the shapes do not broadcast.
    #[track_caller]
    pub fn try_broadcast_to(&self, shape: impl Into<Shape>) -> Result<Tensor> {
        self.try_op1(Op::Broadcast {
            shape: shape.into(),
        })
    }

    /// Permutes the axes: output axis `i` is input axis `perm[i]`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::zeros([2, 3, 4], rlx::DType::F32).transpose(&[2, 0, 1]);
    /// assert_eq!(x.shape().dims(), &[4, 2, 3]);
    /// ```
    #[track_caller]
    pub fn transpose(&self, perm: &[usize]) -> Tensor {
        self.op1(Op::Transpose {
            perm: perm.to_vec(),
        })
    }

    /// [`Tensor::transpose`] returning an error for an invalid permutation.
    #[track_caller]
    pub fn try_transpose(&self, perm: &[usize]) -> Result<Tensor> {
        self.try_op1(Op::Transpose {
            perm: perm.to_vec(),
        })
    }

    /// Swaps the last two axes (the matrix transpose of each batch item);
    /// 0-d and 1-d tensors are returned unchanged, as NumPy's `.T` does.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// assert_eq!(a.t().to_vec::<f64>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn t(&self) -> Tensor {
        let r = self.rank();
        if r < 2 {
            return self.clone();
        }
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.transpose(&perm)
    }

    /// Joins tensors along `axis` (equal shapes elsewhere). Takes a slice of
    /// tensors or of references: `&[&a, &b]`, `&vec_of_tensors`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let a = Tensor::from_slice(&[1.0f64, 2.0], [1, 2]);
    /// let b = Tensor::from_slice(&[3.0f64, 4.0], [1, 2]);
    /// let c = Tensor::concat(&[&a, &b], 0);
    /// assert_eq!(c.shape().dims(), &[2, 2]);
    /// let rows: Vec<Tensor> = vec![a, b];
    /// assert_eq!(Tensor::concat(&rows, 1).shape().dims(), &[1, 4]);
    /// ```
    #[track_caller]
    pub fn concat<T: Borrow<Tensor>>(tensors: &[T], axis: usize) -> Tensor {
        let refs: Vec<&Tensor> = tensors.iter().map(Borrow::borrow).collect();
        Tensor::apply_or_panic(Op::Concat { axis }, &refs)
    }

    /// [`Tensor::concat`] returning an error on mismatched shapes.
    #[track_caller]
    pub fn try_concat<T: Borrow<Tensor>>(tensors: &[T], axis: usize) -> Result<Tensor> {
        let refs: Vec<&Tensor> = tensors.iter().map(Borrow::borrow).collect();
        Tensor::apply(Op::Concat { axis }, &refs)
    }

    /// The elements of `range` along `axis`: `1..3`, `2..`, `..=4` or `..`
    /// (NumPy's `x[1:3]` on that axis). The axis comes last, as in every
    /// method that takes one.
    ///
    /// # Panics
    /// If the axis is out of range or the range not within it, with the
    /// caller's location; [`Tensor::try_slice_range`] returns the error.
    ///
    /// ```
    /// use rlx::Tensor;
    /// let q = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0], [2, 2]);
    /// assert_eq!(q.slice_range(1..2, 0).to_vec::<f64>().unwrap(), vec![2.0, 3.0]);
    /// assert_eq!(q.slice_range(..1, 1).to_vec::<f64>().unwrap(), vec![0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn slice_range(&self, range: impl RangeBounds<usize>, axis: usize) -> Tensor {
        match self.shape().range_along(&range, axis) {
            Ok((start, len)) => self.op1(Op::Slice { axis, start, len }),
            Err(e) => Tensor::failed(&[self], e),
        }
    }

    /// [`Tensor::slice_range`] returning an error (naming `slice`, the axis
    /// and the shape) when the axis or the range is out of range.
    ///
    /// ```
    /// use rlx::Tensor;
    /// let q = Tensor::from_slice(&[0.0f64, 1.0, 2.0], [3]);
    /// assert!(q.try_slice_range(2.., 0).is_ok());
    /// assert!(q.try_slice_range(2..4, 0).is_err());
    /// ```
    #[track_caller]
    pub fn try_slice_range(&self, range: impl RangeBounds<usize>, axis: usize) -> Result<Tensor> {
        let (start, len) = self.shape().range_along(&range, axis).map_err(|e| {
            let loc = std::panic::Location::caller();
            match self.is_traced() {
                true => e.at(loc.file(), loc.line(), loc.column()),
                false => e,
            }
        })?;
        self.try_op1(Op::Slice { axis, start, len })
    }

    /// Elements `start..start + len` along `axis`.
    #[deprecated(
        note = "use `slice_range(start..start + len, axis)` (argument order: the range, then the axis last)"
    )]
    #[track_caller]
    pub fn slice(&self, axis: usize, start: usize, len: usize) -> Tensor {
        self.op1(Op::Slice { axis, start, len })
    }

    /// Elements `start..start + len` along `axis`, or an error when out of range.
    #[deprecated(
        note = "use `try_slice_range(start..start + len, axis)` (argument order: the range, then the axis last)"
    )]
    #[track_caller]
    pub fn try_slice(&self, axis: usize, start: usize, len: usize) -> Result<Tensor> {
        self.try_op1(Op::Slice { axis, start, len })
    }

    /// `take` along `axis` with `i64` indices: the result has shape
    /// `x.shape[..axis] ++ idx.shape ++ x.shape[axis + 1..]`. An index out of
    /// range (or negative) is an error.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[10.0f64, 20.0, 30.0], [3]);
    /// let i = Tensor::from_slice(&[2i64, 0, 2], [3]);
    /// assert_eq!(x.gather(&i, 0).to_vec::<f64>().unwrap(), vec![30.0, 10.0, 30.0]);
    /// ```
    #[track_caller]
    pub fn gather(&self, idx: &Tensor, axis: usize) -> Tensor {
        self.op2(Op::Gather { axis }, idx)
    }

    /// [`Tensor::gather`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_gather(&self, idx: &Tensor, axis: usize) -> Result<Tensor> {
        self.try_op2(Op::Gather { axis }, idx)
    }

    /// A copy of `self` with `updates` added at `idx` along `axis` (repeated
    /// indices accumulate); the transpose of [`Tensor::gather`].
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::zeros([3], rlx::DType::F64);
    /// let i = Tensor::from_slice(&[0i64, 2, 0], [3]);
    /// let u = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    /// assert_eq!(x.scatter_add(&i, &u, 0).to_vec::<f64>().unwrap(), vec![4.0, 0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn scatter_add(&self, idx: &Tensor, updates: &Tensor, axis: usize) -> Tensor {
        Tensor::apply_or_panic(Op::ScatterAdd { axis }, &[self, idx, updates])
    }

    /// [`Tensor::scatter_add`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_scatter_add(&self, idx: &Tensor, updates: &Tensor, axis: usize) -> Result<Tensor> {
        Tensor::apply(Op::ScatterAdd { axis }, &[self, idx, updates])
    }

    /// `mask ? a : b` element-wise (`self` is the `bool` mask), with
    /// broadcasting of all three. Callable as `Tensor::select(&mask, &a, &b)`
    /// or `mask.select(&a, &b)`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[-1.0f64, 2.0], [2]);
    /// let y = Tensor::select(&x.gt_scalar(0.0), &x, &x.neg());
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![1.0, 2.0]);
    /// let z = x.lt_scalar(0.0).select(&x.scalar_like(0.0), &x);
    /// assert_eq!(z.to_vec::<f64>().unwrap(), vec![0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn select(&self, a: &Tensor, b: &Tensor) -> Tensor {
        Tensor::apply_or_panic(Op::Select, &[self, a, b])
    }

    /// [`Tensor::select`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_select(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        Tensor::apply(Op::Select, &[self, a, b])
    }

    /// Converts to `dtype` (a same-dtype cast returns a clone). Floats to
    /// `i64` truncate toward zero; to `bool`, non-zero is `true`.
    ///
    /// ```
    /// # use rlx::{DType, Tensor};
    /// let x = Tensor::from_slice(&[1.7f64, -1.7], [2]).cast(DType::I64);
    /// assert_eq!(x.to_vec::<i64>().unwrap(), vec![1, -1]);
    /// ```
    #[track_caller]
    pub fn cast(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.op1(Op::Cast(dtype))
    }

    /// The same values, with a zero derivative.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::scalar(3.0f64);
    /// assert_eq!(x.stop_gradient().item::<f64>().unwrap(), 3.0);
    /// ```
    #[track_caller]
    pub fn stop_gradient(&self) -> Tensor {
        self.op1(Op::StopGradient)
    }
}

impl FillValue for &Tensor {
    #[track_caller]
    fn fill(self, shape: Shape, dtype: DType) -> Tensor {
        let t = if self.dtype() == dtype {
            self.clone()
        } else {
            self.cast(dtype)
        };
        if t.shape() == &shape {
            t
        } else {
            t.broadcast_to(shape)
        }
    }
}

impl FillValue for Tensor {
    #[track_caller]
    fn fill(self, shape: Shape, dtype: DType) -> Tensor {
        (&self).fill(shape, dtype)
    }
}
