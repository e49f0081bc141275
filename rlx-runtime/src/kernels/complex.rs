//! The math of each element-wise op on complex values, over
//! `num_complex::Complex<f32>` and `Complex<f64>` (the arithmetic and
//! elementary functions of `num_complex`, principal branches).
//!
//! Only the ops [`rlx::core::infer()`](rlx_core::infer) accepts on complex operands reach
//! these functions; the others (orderings, real special functions) are
//! rejected at trace time, so their arms here are never taken and return
//! NaN.

use num_complex::Complex;
use rlx_core::{BinaryOp, UnaryOp};

macro_rules! complex_math {
    ($t:ty, $unary:ident, $binary:ident, $parts:ident) => {
        /// `op(z)` for a complex-valued unary op.
        #[inline]
        pub(crate) fn $unary(op: UnaryOp, z: Complex<$t>) -> Complex<$t> {
            let one = Complex::new(1.0, 0.0);
            match op {
                UnaryOp::Neg => -z,
                UnaryOp::Exp => z.exp(),
                UnaryOp::Ln => z.ln(),
                UnaryOp::Sin => z.sin(),
                UnaryOp::Cos => z.cos(),
                UnaryOp::Tan => z.tan(),
                UnaryOp::Tanh => z.tanh(),
                UnaryOp::Sinh => z.sinh(),
                UnaryOp::Cosh => z.cosh(),
                UnaryOp::Asin => z.asin(),
                UnaryOp::Acos => z.acos(),
                UnaryOp::Atan => z.atan(),
                UnaryOp::Sigmoid => one.fdiv(one + (-z).exp()),
                UnaryOp::Sqrt => z.sqrt(),
                UnaryOp::Rsqrt => one.fdiv(z.sqrt()),
                UnaryOp::Recip => one.fdiv(z),
                UnaryOp::Square => z * z,
                UnaryOp::Powi(n) => z.powi(n),
                UnaryOp::Conj => z.conj(),
                UnaryOp::Abs | UnaryOp::Real | UnaryOp::Imag => Complex::new($parts(op, z), 0.0),
                UnaryOp::Expm1
                | UnaryOp::Log1p
                | UnaryOp::Sign
                | UnaryOp::Relu
                | UnaryOp::Gelu
                | UnaryOp::Silu
                | UnaryOp::Erf
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Not => Complex::new(<$t>::NAN, <$t>::NAN),
            }
        }

        /// The real result of `abs` (`|z|`, without overflow), `real` or
        /// `imag` of a complex value.
        #[inline]
        pub(crate) fn $parts(op: UnaryOp, z: Complex<$t>) -> $t {
            match op {
                UnaryOp::Real => z.re,
                UnaryOp::Imag => z.im,
                _ => z.re.hypot(z.im),
            }
        }

        /// `op(a, b)` for a binary op on complex values.
        #[inline]
        pub(crate) fn $binary(op: BinaryOp, a: Complex<$t>, b: Complex<$t>) -> Complex<$t> {
            match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a.fdiv(b),
                BinaryOp::Pow => a.powc(b),
                BinaryOp::MulZero if a == Complex::new(0.0, 0.0) => Complex::new(0.0, 0.0),
                BinaryOp::MulZero => a * b,
                BinaryOp::Min
                | BinaryOp::Max
                | BinaryOp::Atan2
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Complex => Complex::new(<$t>::NAN, <$t>::NAN),
            }
        }
    };
}

complex_math!(f32, unary_c32, binary_c32, parts_c32);
complex_math!(f64, unary_c64, binary_c64, parts_c64);
