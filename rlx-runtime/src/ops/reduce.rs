//! Reductions, softmax and linear algebra.

use rlx_core::{Op, ReduceOp, Result};

use crate::tensor::Tensor;

fn reduce_op(op: ReduceOp, axes: &[usize]) -> Op {
    let mut axes = axes.to_vec();
    axes.sort_unstable();
    Op::Reduce { op, axes }
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident, $try_name:ident, $all:ident, $keep:ident => $op:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, axes: &[usize]) -> Tensor {
                    self.op1(reduce_op($op, axes))
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] returning an error for invalid axes.")]
                #[track_caller]
                pub fn $try_name(&self, axes: &[usize]) -> Result<Tensor> {
                    self.try_op1(reduce_op($op, axes))
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] keeping the reduced axes with size 1 (NumPy's `keepdims=True`), so that the result broadcasts against `self`.")]
                #[track_caller]
                pub fn $keep(&self, axes: &[usize]) -> Tensor {
                    self.op1(reduce_op($op, axes)).reshape(self.kept_dims(axes))
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] over every axis, giving a 0-d tensor.")]
                #[track_caller]
                pub fn $all(&self) -> Tensor {
                    let axes: Vec<usize> = (0..self.rank()).collect();
                    self.op1(reduce_op($op, &axes))
                }
            )*
        }
    };
}

reductions! {
    /// Sum over `axes` (any order), which are removed from the shape (kept
    /// with size 1 by `sum_keepdim`). The sum of nothing is 0.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.sum(&[0]).to_vec::<f64>().unwrap(), vec![4.0, 6.0]);
    /// assert_eq!(x.sum_all().item::<f64>().unwrap(), 10.0);
    /// let share = &x / x.sum_keepdim(&[1]); // [2, 2] / [2, 1]
    /// assert_eq!(share.to_vec::<f64>().unwrap(), vec![1.0 / 3.0, 2.0 / 3.0, 3.0 / 7.0, 4.0 / 7.0]);
    /// ```
    sum, try_sum, sum_all, sum_keepdim => ReduceOp::Sum;
    /// Arithmetic mean over `axes` (the mean of nothing is NaN).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.mean(&[1]).to_vec::<f64>().unwrap(), vec![1.5, 3.5]);
    /// ```
    mean, try_mean, mean_all, mean_keepdim => ReduceOp::Mean;
    /// Maximum over `axes` (NaN if any element is NaN; -∞ for nothing).
    /// `x.max(&axes)` calls it too (see [`Tensor::max`]).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 5.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.reduce_max(&[1]).to_vec::<f64>().unwrap(), vec![5.0, 4.0]);
    /// ```
    reduce_max, try_max, max_all, max_keepdim => ReduceOp::Max;
    /// Minimum over `axes` (NaN if any element is NaN; +∞ for nothing).
    /// `x.min(&axes)` calls it too (see [`Tensor::min`]).
    reduce_min, try_min, min_all, min_keepdim => ReduceOp::Min;
    /// Product over `axes` (the product of nothing is 1).
    prod, try_prod, prod_all, prod_keepdim => ReduceOp::Prod;
}

impl Tensor {
    /// The dimensions of `self` with `axes` set to 1 (out-of-range axes are
    /// left for the reduction to report).
    fn kept_dims(&self, axes: &[usize]) -> Vec<usize> {
        let mut dims = self.shape().dims().to_vec();
        for &a in axes {
            if let Some(d) = dims.get_mut(a) {
                *d = 1;
            }
        }
        dims
    }

    /// `ln Σ exp(x)` over `axes` (removed from the shape), computed stably:
    /// `m + ln Σ exp(x - m)` with `m` the maximum, held constant for
    /// differentiation (the result does not depend on it), so the gradient
    /// is the softmax. Where every element is `-∞` the result is `-∞`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[1000.0f64, 1000.0, 0.0, f64::NEG_INFINITY], [2, 2]);
    /// let l = x.logsumexp(&[1]).to_vec::<f64>().unwrap();
    /// assert_eq!(l, vec![1000.0 + std::f64::consts::LN_2, 0.0]);
    /// ```
    #[track_caller]
    pub fn logsumexp(&self, axes: &[usize]) -> Tensor {
        let m = self.max_keepdim(axes).stop_gradient();
        // A row of -∞ (or a +∞) would give ∞ - ∞: shift by 0 there.
        let m = m.is_finite().select(&m, &m.scalar_like(0.0));
        let s = (self - &m).exp().sum(axes).ln();
        let shape = s.shape().clone();
        s + m.reshape(shape)
    }

    /// Softmax along `axis`, computed stably (`exp(x - max)` normalised).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let p = Tensor::from_slice(&[0.0f64, 0.0], [2]).softmax(0);
    /// assert_eq!(p.to_vec::<f64>().unwrap(), vec![0.5, 0.5]);
    /// ```
    #[track_caller]
    pub fn softmax(&self, axis: usize) -> Tensor {
        self.op1(Op::Softmax { axis })
    }

    /// Log-softmax along `axis`, computed stably (`x - max - ln Σ exp(x - max)`).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let l = Tensor::from_slice(&[1000.0f64, 1000.0], [2]).log_softmax(0);
    /// assert_eq!(l.to_vec::<f64>().unwrap(), vec![-std::f64::consts::LN_2; 2]);
    /// ```
    #[track_caller]
    pub fn log_softmax(&self, axis: usize) -> Tensor {
        self.op1(Op::LogSoftmax { axis })
    }

    /// Batched matrix product `[.., m, k] x [.., k, n] -> [.., m, n]`, batch
    /// dimensions broadcasting.
    ///
    /// ```
    /// # use rlx::{DType, Tensor};
    /// let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// let c = a.matmul(&Tensor::eye(2, DType::F64));
    /// assert_eq!(c.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        self.op2(Op::MatMul, other)
    }

    /// [`Tensor::matmul`] returning an error on incompatible shapes.
    #[track_caller]
    pub fn try_matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.try_op2(Op::MatMul, other)
    }

    /// Solves `self · x = b` for square `self` (`[.., n, n]`, `b: [.., n, k]`)
    /// by LU with partial pivoting. A (numerically) singular matrix is an
    /// error. Complex (`c32`/`c64`) systems pivot by modulus; their
    /// derivatives are bilinear (the reverse rule solves with `Aᵀ`, not
    /// the conjugate transpose).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let a = Tensor::from_slice(&[2.0f64, 1.0, 1.0, 3.0], [2, 2]);
    /// let b = Tensor::from_slice(&[3.0f64, 5.0], [2, 1]);
    /// let x = a.solve(&b).to_vec::<f64>().unwrap();
    /// assert!((x[0] - 0.8).abs() < 1e-15 && (x[1] - 1.4).abs() < 1e-15);
    /// ```
    #[track_caller]
    pub fn solve(&self, b: &Tensor) -> Tensor {
        self.op2(Op::Solve, b)
    }

    /// [`Tensor::solve`] returning an error (shape mismatch, singular matrix).
    #[track_caller]
    pub fn try_solve(&self, b: &Tensor) -> Result<Tensor> {
        self.try_op2(Op::Solve, b)
    }
}
