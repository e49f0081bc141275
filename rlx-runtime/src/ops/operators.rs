//! `std::ops` operators for tensors: `+ - * /` between `Tensor`/`&Tensor`
//! on either side and with `f64` scalars on either side (a scalar becomes a
//! 0-d tensor of the tensor's dtype, so `2.0 * &x` keeps `x` in `f32` if it
//! is `f32`), unary `-`, and the compound assignments `+= -= *= /=`. All
//! broadcast with NumPy rules and, like the methods, panic on an eager shape
//! error and record it in traced code.
//!
//! Scalars are `f64` only, on purpose: with impls for both `f32` and `f64`,
//! `(r - 1.5).sqrt()` no longer compiles (the method call needs the type of
//! `r - 1.5` before Rust's float-literal fallback picks `f64`: E0282). An
//! `f32` variable converts with `f64::from(v)`.
//!
//! ```
//! use rlx::Tensor;
//! let x = Tensor::from_slice(&[1.0f64, 2.0], [2]);
//! let y = 2.0 * &x + 1.0;
//! assert_eq!(y.to_vec::<f64>().unwrap(), vec![3.0, 5.0]);
//! let z = &y - &x;
//! assert_eq!((-z).to_vec::<f64>().unwrap(), vec![-2.0, -3.0]);
//! ```

use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

use rlx_core::{BinaryOp, Op};

use crate::tensor::Tensor;

macro_rules! binop {
    ($trait:ident, $method:ident, $assign:ident, $assign_method:ident, $op:expr) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::apply_or_panic(Op::Binary($op), &[self, rhs])
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::apply_or_panic(Op::Binary($op), &[self, &rhs])
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::apply_or_panic(Op::Binary($op), &[&self, rhs])
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::apply_or_panic(Op::Binary($op), &[&self, &rhs])
            }
        }
        impl $assign<&Tensor> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: &Tensor) {
                *self = Tensor::apply_or_panic(Op::Binary($op), &[&*self, rhs]);
            }
        }
        impl $assign<Tensor> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: Tensor) {
                *self = Tensor::apply_or_panic(Op::Binary($op), &[&*self, &rhs]);
            }
        }
        binop!(@scalar $trait, $method, $assign, $assign_method, $op, f64);
    };
    (@scalar $trait:ident, $method:ident, $assign:ident, $assign_method:ident, $op:expr, $s:ty) => {
        impl $trait<$s> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                let r = self.scalar_like(rhs as f64);
                Tensor::apply_or_panic(Op::Binary($op), &[self, &r])
            }
        }
        impl $trait<$s> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                let r = self.scalar_like(rhs as f64);
                Tensor::apply_or_panic(Op::Binary($op), &[&self, &r])
            }
        }
        impl $trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                let l = rhs.scalar_like(self as f64);
                Tensor::apply_or_panic(Op::Binary($op), &[&l, rhs])
            }
        }
        impl $trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                let l = rhs.scalar_like(self as f64);
                Tensor::apply_or_panic(Op::Binary($op), &[&l, &rhs])
            }
        }
        impl $assign<$s> for Tensor {
            #[track_caller]
            fn $assign_method(&mut self, rhs: $s) {
                let r = self.scalar_like(rhs as f64);
                *self = Tensor::apply_or_panic(Op::Binary($op), &[&*self, &r]);
            }
        }
    };
}

binop!(Add, add, AddAssign, add_assign, BinaryOp::Add);
binop!(Sub, sub, SubAssign, sub_assign, BinaryOp::Sub);
binop!(Mul, mul, MulAssign, mul_assign, BinaryOp::Mul);
binop!(Div, div, DivAssign, div_assign, BinaryOp::Div);

impl Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
