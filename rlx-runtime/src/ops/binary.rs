//! Element-wise binary arithmetic and comparisons, with NumPy broadcasting.
//! Each comes as a method taking a tensor, a `try_` form returning
//! `Result`, and (for arithmetic and comparisons) a `_scalar` form taking an
//! `f64` that becomes a 0-d tensor of the operand's dtype.

use rlx_core::{BinaryOp, CmpOp, Op, Result};

use crate::tensor::Tensor;

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident, $try_name:ident, $scalar:ident => $op:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    self.op2($op, other)
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] returning an error instead of panicking (shape or dtype mismatch).")]
                #[track_caller]
                pub fn $try_name(&self, other: &Tensor) -> Result<Tensor> {
                    self.try_op2($op, other)
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] with a scalar right operand (a 0-d tensor of this tensor's dtype).")]
                #[track_caller]
                pub fn $scalar(&self, value: f64) -> Tensor {
                    self.op2($op, &self.scalar_like(value))
                }
            )*
        }
    };
}

binary_methods! {
    /// `a + b` with broadcasting.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// let b = Tensor::from_slice(&[10.0f64, 20.0], [2]);
    /// assert_eq!(a.add(&b).to_vec::<f64>().unwrap(), vec![11.0, 22.0, 13.0, 24.0]);
    /// assert_eq!(a.add_scalar(1.0).to_vec::<f64>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
    /// ```
    add, try_add, add_scalar => Op::Binary(BinaryOp::Add);
    /// `a - b` with broadcasting (exact: correctly rounded).
    sub, try_sub, sub_scalar => Op::Binary(BinaryOp::Sub);
    /// `a * b` with broadcasting (exact: correctly rounded).
    mul, try_mul, mul_scalar => Op::Binary(BinaryOp::Mul);
    /// `a / b` with broadcasting (exact: correctly rounded).
    div, try_div, div_scalar => Op::Binary(BinaryOp::Div);
    /// `a ^ b` (real power) with broadcasting: libm's `pow` (`f32`:
    /// within 1 ulp), with its special cases (`0^0 = 1`, NaN for a
    /// negative base and a non-integer exponent, ...).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[4.0f64, 9.0], [2]).pow_scalar(0.5);
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![2.0, 3.0]);
    /// ```
    pow, try_pow, pow_scalar => Op::Binary(BinaryOp::Pow);
    /// Element-wise minimum (NaN if either is NaN, as IEEE 754-2019
    /// `minimum` and unlike `f64::min`; exact).
    minimum, try_minimum, minimum_scalar => Op::Binary(BinaryOp::Min);
    /// Element-wise maximum (NaN if either is NaN, as IEEE 754-2019
    /// `maximum` and unlike `f64::max`; exact).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[-1.0f64, 2.0], [2]).maximum_scalar(0.5);
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.5, 2.0]);
    /// ```
    maximum, try_maximum, maximum_scalar => Op::Binary(BinaryOp::Max);
    /// `a * b`, except that `0 * anything` (even NaN or ∞) is 0.
    mul_zero, try_mul_zero, mul_zero_scalar => Op::Binary(BinaryOp::MulZero);
    /// Element-wise `a < b`, a `bool` mask.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let m = Tensor::from_slice(&[1.0f64, 3.0], [2]).lt_scalar(2.0);
    /// assert_eq!(m.to_vec::<bool>().unwrap(), vec![true, false]);
    /// ```
    lt, try_lt, lt_scalar => Op::Compare(CmpOp::Lt);
    /// Element-wise `a <= b`, a `bool` mask.
    le, try_le, le_scalar => Op::Compare(CmpOp::Le);
    /// Element-wise `a > b`, a `bool` mask.
    gt, try_gt, gt_scalar => Op::Compare(CmpOp::Gt);
    /// Element-wise `a >= b`, a `bool` mask.
    ge, try_ge, ge_scalar => Op::Compare(CmpOp::Ge);
    /// Element-wise `a == b`, a `bool` mask (named `eq_t` so as not to
    /// shadow `PartialEq::eq`).
    eq_t, try_eq_t, eq_scalar => Op::Compare(CmpOp::Eq);
    /// Element-wise `a != b`, a `bool` mask.
    ne_t, try_ne_t, ne_scalar => Op::Compare(CmpOp::Ne);
}

impl Tensor {
    /// Logical and of two `bool` tensors.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let a = Tensor::from_slice(&[true, true, false], [3]);
    /// let b = Tensor::from_slice(&[true, false, false], [3]);
    /// assert_eq!(a.and(&b).to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn and(&self, other: &Tensor) -> Tensor {
        self.op2(Op::Binary(BinaryOp::And), other)
    }

    /// Logical or of two `bool` tensors.
    #[track_caller]
    pub fn or(&self, other: &Tensor) -> Tensor {
        self.op2(Op::Binary(BinaryOp::Or), other)
    }

    /// Applies any binary op.
    #[track_caller]
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Tensor {
        self.op2(Op::Binary(op), other)
    }

    /// [`Tensor::binary`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        self.try_op2(Op::Binary(op), other)
    }

    /// Applies any comparison.
    #[track_caller]
    pub fn compare(&self, op: CmpOp, other: &Tensor) -> Tensor {
        self.op2(Op::Compare(op), other)
    }
}
