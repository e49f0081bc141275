//! Element-wise unary functions.
//!
//! Each doc states the op's accuracy over its whole domain (zeros of both
//! signs, subnormals, the overflow thresholds, `±∞`, NaN) as the largest
//! distance in ulps from std's `f64` function (`f64`) and from that
//! function rounded to `f32` (`f32`): "exact" is 0 ulp, the bits of std.
//! `tests/op_accuracy.rs` checks every bound, eagerly and through a
//! compiled plan.

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
    /// `-x` (exact).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// assert_eq!(Tensor::scalar(2.0f64).neg().item::<f64>().unwrap(), -2.0);
    /// ```
    neg => UnaryOp::Neg;
    /// `e^x`, within 1 ulp (`f64` and `f32`; results below the smallest
    /// normal number may flush to 0 a little early).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// assert_eq!(Tensor::scalar(0.0f64).exp().item::<f64>().unwrap(), 1.0);
    /// ```
    exp => UnaryOp::Exp;
    /// `e^x - 1`, accurate for small `x`: within 2 ulp.
    expm1 => UnaryOp::Expm1;
    /// Natural logarithm (`ln 0 = -∞`, negative numbers give NaN), within
    /// 1 ulp.
    ln => UnaryOp::Ln;
    /// `ln(1 + x)`, accurate for small `x`: within 2 ulp.
    log1p => UnaryOp::Log1p;
    /// Sine, within 2 ulp (`f32`: 1).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[0.0f64, std::f64::consts::FRAC_PI_2], [2]).sin();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.0, 1.0]);
    /// ```
    sin => UnaryOp::Sin;
    /// Cosine, within 2 ulp (`f32`: 1).
    cos => UnaryOp::Cos;
    /// Tangent: std's (`f32`: within 1 ulp).
    tan => UnaryOp::Tan;
    /// Hyperbolic tangent, within 3 ulp.
    tanh => UnaryOp::Tanh;
    /// Hyperbolic sine: std's (`f32`: within 2 ulp).
    sinh => UnaryOp::Sinh;
    /// Hyperbolic cosine: std's (`f32`: within 1 ulp).
    cosh => UnaryOp::Cosh;
    /// Arcsine: std's (`f32`: within 1 ulp).
    asin => UnaryOp::Asin;
    /// Arccosine: std's (`f32`: within 1 ulp).
    acos => UnaryOp::Acos;
    /// Arctangent: std's (`f32`: within 1 ulp).
    atan => UnaryOp::Atan;
    /// Logistic sigmoid `1 / (1 + e^-x)`, within 3 ulp of the two-branch
    /// formula; 0 once `e^-x` overflows (`x < -709.78`, `f32`: `-88.72`),
    /// where the true value is subnormal.
    sigmoid => UnaryOp::Sigmoid;
    /// Square root (exact: correctly rounded).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// assert_eq!(Tensor::scalar(9.0f64).sqrt().item::<f64>().unwrap(), 3.0);
    /// ```
    sqrt => UnaryOp::Sqrt;
    /// `1 / sqrt(x)`, two roundings: within 1 ulp of `x^-0.5`.
    rsqrt => UnaryOp::Rsqrt;
    /// `1 / x` (exact: correctly rounded).
    recip => UnaryOp::Recip;
    /// `x * x` (exact: correctly rounded).
    square => UnaryOp::Square;
    /// `|x|` (exact).
    abs => UnaryOp::Abs;
    /// `-1`, `0` or `1` by the sign of `x` (NaN stays NaN, `-0` stays
    /// `-0`; exact).
    sign => UnaryOp::Sign;
    /// `max(x, 0)` (exact; NaN stays NaN).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[-1.0f64, 2.0], [2]).relu();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.0, 2.0]);
    /// ```
    relu => UnaryOp::Relu;
    /// `x Φ(x)` with the exact normal CDF (erf form, not the tanh
    /// approximation), computed as `x erfc(-x/√2) / 2`: within `4 + x²`
    /// ulp (the rounding of `x/√2` is amplified by the slope of `erfc` in
    /// the left tail: 4 ulp for `|x| ≤ 1`, some hundred ulp at `x = -37`,
    /// where the result is `1e-298`); `-∞` gives NaN (`-∞ · 0`).
    gelu => UnaryOp::Gelu;
    /// `x * sigmoid(x)` (swish), computed as `x / (1 + e^-x)`: within 4
    /// ulp; 0 once `e^-x` overflows (`x < -709.78`, where the true value
    /// is below `4e-306`; `f32`: `-88.72`, `3e-37`); `-∞` gives NaN.
    silu => UnaryOp::Silu;
    /// The error function: libm's (`f32`: within 1 ulp).
    erf => UnaryOp::Erf;
    /// Round toward -∞ (exact).
    floor => UnaryOp::Floor;
    /// Round toward +∞ (exact).
    ceil => UnaryOp::Ceil;
    /// Round half away from zero (`2.5 -> 3`, `-2.5 -> -3`; exact).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[2.5f64, -2.5, 0.4], [3]).round();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![3.0, -3.0, 0.0]);
    /// ```
    round => UnaryOp::Round;
    /// Logical not of a `bool` tensor.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let m = Tensor::from_slice(&[true, false], [2]).not();
    /// assert_eq!(m.to_vec::<bool>().unwrap(), vec![false, true]);
    /// ```
    not => UnaryOp::Not;
}

impl Tensor {
    /// `x^n` for an integer `n`: the algorithm of std's `powi` (square
    /// and multiply, one reciprocal for `n < 0`), the same bits as
    /// `f64::powi`; each squaring doubles the error so far, so it is
    /// within `|n|` ulp of the exact power (for `n < 0`, 0 where `x^|n|`
    /// overflows though `x^n` is subnormal).
    ///
    /// ```
    /// # use rlx::Tensor;
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
