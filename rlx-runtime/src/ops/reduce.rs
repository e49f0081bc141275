//! Reductions, softmax and linear algebra.

use rlx_core::{Op, ReduceOp, Result};

use crate::tensor::Tensor;

fn reduce_op(op: ReduceOp, axes: &[usize]) -> Op {
    let mut axes = axes.to_vec();
    axes.sort_unstable();
    Op::Reduce { op, axes }
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident, $try_name:ident, $all:ident => $op:expr;)*) => {
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
    /// Sum over `axes` (any order), which are removed from the shape. The sum
    /// of nothing is 0.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.sum(&[0]).to_vec::<f64>().unwrap(), vec![4.0, 6.0]);
    /// assert_eq!(x.sum_all().item::<f64>().unwrap(), 10.0);
    /// ```
    sum, try_sum, sum_all => ReduceOp::Sum;
    /// Arithmetic mean over `axes` (the mean of nothing is NaN).
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.mean(&[1]).to_vec::<f64>().unwrap(), vec![1.5, 3.5]);
    /// ```
    mean, try_mean, mean_all => ReduceOp::Mean;
    /// Maximum over `axes` (NaN if any element is NaN; -∞ for nothing).
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 5.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.max(&[1]).to_vec::<f64>().unwrap(), vec![5.0, 4.0]);
    /// ```
    max, try_max, max_all => ReduceOp::Max;
    /// Minimum over `axes` (NaN if any element is NaN; +∞ for nothing).
    min, try_min, min_all => ReduceOp::Min;
    /// Product over `axes` (the product of nothing is 1).
    prod, try_prod, prod_all => ReduceOp::Prod;
}

impl Tensor {
    /// Softmax along `axis`, computed stably (`exp(x - max)` normalised).
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
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
    /// # use rlx_runtime::Tensor;
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
    /// # use rlx_runtime::{DType, Tensor};
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
    /// error.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
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
