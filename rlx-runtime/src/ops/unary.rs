//! Element-wise unary functions.

use rlx_core::{Op, UnaryOp};

use crate::tensor::Tensor;

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                #[track_caller]
                pub fn $name(&self) -> Tensor {
                    self.op1(Op::Unary($op))
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// assert_eq!(Tensor::scalar(2.0f64).neg().item::<f64>().unwrap(), -2.0);
    /// ```
    neg => UnaryOp::Neg;
    /// `e^x`.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// assert_eq!(Tensor::scalar(0.0f64).exp().item::<f64>().unwrap(), 1.0);
    /// ```
    exp => UnaryOp::Exp;
    /// `e^x - 1`, accurate for small `x`.
    expm1 => UnaryOp::Expm1;
    /// Natural logarithm (`ln 0 = -∞`, negative numbers give NaN).
    ln => UnaryOp::Ln;
    /// `ln(1 + x)`, accurate for small `x`.
    log1p => UnaryOp::Log1p;
    /// Sine.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let y = Tensor::from_slice(&[0.0f64, std::f64::consts::FRAC_PI_2], [2]).sin();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.0, 1.0]);
    /// ```
    sin => UnaryOp::Sin;
    /// Cosine.
    cos => UnaryOp::Cos;
    /// Tangent.
    tan => UnaryOp::Tan;
    /// Hyperbolic tangent.
    tanh => UnaryOp::Tanh;
    /// Hyperbolic sine.
    sinh => UnaryOp::Sinh;
    /// Hyperbolic cosine.
    cosh => UnaryOp::Cosh;
    /// Arcsine.
    asin => UnaryOp::Asin;
    /// Arccosine.
    acos => UnaryOp::Acos;
    /// Arctangent.
    atan => UnaryOp::Atan;
    /// Logistic sigmoid `1 / (1 + e^-x)`.
    sigmoid => UnaryOp::Sigmoid;
    /// Square root.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// assert_eq!(Tensor::scalar(9.0f64).sqrt().item::<f64>().unwrap(), 3.0);
    /// ```
    sqrt => UnaryOp::Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => UnaryOp::Rsqrt;
    /// `1 / x`.
    recip => UnaryOp::Recip;
    /// `x * x`.
    square => UnaryOp::Square;
    /// `|x|`.
    abs => UnaryOp::Abs;
    /// `-1`, `0` or `1` by the sign of `x` (NaN stays NaN).
    sign => UnaryOp::Sign;
    /// `max(x, 0)`.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let y = Tensor::from_slice(&[-1.0f64, 2.0], [2]).relu();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.0, 2.0]);
    /// ```
    relu => UnaryOp::Relu;
    /// `x Φ(x)` with the exact normal CDF (erf form, not the tanh approximation).
    gelu => UnaryOp::Gelu;
    /// `x * sigmoid(x)` (swish).
    silu => UnaryOp::Silu;
    /// The error function.
    erf => UnaryOp::Erf;
    /// Round toward -∞.
    floor => UnaryOp::Floor;
    /// Round toward +∞.
    ceil => UnaryOp::Ceil;
    /// Round half away from zero (`2.5 -> 3`, `-2.5 -> -3`).
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let y = Tensor::from_slice(&[2.5f64, -2.5, 0.4], [3]).round();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![3.0, -3.0, 0.0]);
    /// ```
    round => UnaryOp::Round;
    /// Logical not of a `bool` tensor.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let m = Tensor::from_slice(&[true, false], [2]).not();
    /// assert_eq!(m.to_vec::<bool>().unwrap(), vec![false, true]);
    /// ```
    not => UnaryOp::Not;
}

impl Tensor {
    /// `x^n` for an integer `n`.
    ///
    /// ```
    /// # use rlx_runtime::Tensor;
    /// let y = Tensor::from_slice(&[2.0f64, -3.0], [2]).powi(3);
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![8.0, -27.0]);
    /// ```
    #[track_caller]
    pub fn powi(&self, n: i32) -> Tensor {
        self.op1(Op::Unary(UnaryOp::Powi(n)))
    }

    /// Applies any unary op.
    #[track_caller]
    pub fn unary(&self, op: UnaryOp) -> Tensor {
        self.op1(Op::Unary(op))
    }
}
