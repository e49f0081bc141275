//! Complex tensors: constructors from parts, readers, and the methods that
//! cross between real and complex values (`real`, `imag`, `conj`, `arg`,
//! `norm_sqr`, `mh`).
//!
//! A real float operand of a complex one is promoted to complex by every
//! binary op and matrix product ([`Tensor::apply`]); the way back to real
//! values is explicit: `real`, `imag`, `abs`, `arg`, `norm_sqr` or
//! `cast`. On a real tensor, `real` and `conj` are the tensor itself and
//! `imag` is zeros, as NumPy's are.

use num_complex::Complex;
use rlx_core::{BinaryOp, DType, Error, Op, Result, UnaryOp};

use crate::tensor::Tensor;

impl Tensor {
    /// `re + i·im` element-wise with broadcasting, from real parts of one
    /// dtype (`f32` gives a `c32` tensor, `f64` a `c64` one).
    ///
    /// ```
    /// use rlx::{Tensor, C64};
    /// let z = Tensor::complex(&Tensor::from_slice(&[1.0, 2.0], [2]), &Tensor::scalar(3.0));
    /// assert_eq!(z.to_vec::<C64>().unwrap(), vec![C64::new(1.0, 3.0), C64::new(2.0, 3.0)]);
    /// ```
    #[track_caller]
    pub fn complex(re: &Tensor, im: &Tensor) -> Tensor {
        Tensor::apply_or_panic(Op::Binary(BinaryOp::Complex), &[re, im])
    }

    /// [`Tensor::complex`] returning an error instead of panicking.
    #[track_caller]
    pub fn try_complex(re: &Tensor, im: &Tensor) -> Result<Tensor> {
        Tensor::apply(Op::Binary(BinaryOp::Complex), &[re, im])
    }

    /// `r·e^{iθ}` element-wise with broadcasting, from a modulus and an
    /// angle of one real dtype.
    ///
    /// ```
    /// use rlx::{Tensor, C64};
    /// let z = Tensor::polar(&Tensor::scalar(2.0), &Tensor::scalar(std::f64::consts::FRAC_PI_2));
    /// let v = z.item::<C64>().unwrap();
    /// assert!((v - C64::new(0.0, 2.0)).norm() < 1e-15);
    /// ```
    #[track_caller]
    pub fn polar(r: &Tensor, theta: &Tensor) -> Tensor {
        let re = r.mul(&theta.cos());
        let im = r.mul(&theta.sin());
        Tensor::complex(&re, &im)
    }

    /// The values as `Complex<f64>`, from any float or complex dtype (a
    /// real value gets a zero imaginary part); errors on a traced tensor
    /// and on integer and boolean tensors.
    ///
    /// ```
    /// use rlx::{Tensor, C32, C64};
    /// let z = Tensor::from_slice(&[C32::new(1.0, -2.0)], [1]);
    /// assert_eq!(z.to_complex_vec().unwrap(), vec![C64::new(1.0, -2.0)]);
    /// assert!(Tensor::from_slice(&[1i64], [1]).to_complex_vec().is_err());
    /// ```
    pub fn to_complex_vec(&self) -> Result<Vec<Complex<f64>>> {
        use crate::storage::{Element, Storage};
        let s = self.storage()?;
        Ok(match s {
            Storage::C64(v) => v.clone(),
            Storage::C32(v) => v.iter().map(|z| z.to_c64()).collect(),
            Storage::F32(_) | Storage::F64(_) | Storage::F16(_) | Storage::BF16(_) => (0..s.len())
                .map(|i| Complex::new(s.get_f64(i), 0.0))
                .collect(),
            Storage::I64(_) | Storage::Bool(_) => {
                return Err(Error::ReadMismatch {
                    wanted: "complex or float values".into(),
                    got: s.dtype(),
                    shape: self.shape().clone(),
                })
            }
        })
    }

    /// The complex conjugate `x − iy` (a real tensor is its own).
    #[track_caller]
    pub fn conj(&self) -> Tensor {
        match self.dtype().is_complex() {
            true => Tensor::apply_or_panic(Op::Unary(UnaryOp::Conj), &[self]),
            false => self.clone(),
        }
    }

    /// The real part, a real tensor (`c64 -> f64`; a real tensor is its own).
    #[track_caller]
    pub fn real(&self) -> Tensor {
        match self.dtype().is_complex() {
            true => Tensor::apply_or_panic(Op::Unary(UnaryOp::Real), &[self]),
            false => self.clone(),
        }
    }

    /// The imaginary part, a real tensor (zeros for a real tensor).
    #[track_caller]
    pub fn imag(&self) -> Tensor {
        match self.dtype().is_complex() {
            true => Tensor::apply_or_panic(Op::Unary(UnaryOp::Imag), &[self]),
            false => Tensor::full(self.shape().clone(), 0.0, self.dtype()),
        }
    }

    /// The argument (phase) `atan2(imag, real)` in `(−π, π]`, a real
    /// tensor; for a real tensor, `0` or `π` by the sign (`atan2(0, x)`).
    ///
    /// ```
    /// use rlx::{Tensor, C64};
    /// let z = Tensor::from_slice(&[C64::new(0.0, 2.0)], [1]);
    /// assert_eq!(z.arg().to_vec::<f64>().unwrap(), vec![std::f64::consts::FRAC_PI_2]);
    /// ```
    #[track_caller]
    pub fn arg(&self) -> Tensor {
        let (re, im) = (self.real(), self.imag());
        Tensor::apply_or_panic(Op::Binary(BinaryOp::Atan2), &[&im, &re])
    }

    /// [`Tensor::arg`], NumPy's name.
    #[track_caller]
    pub fn angle(&self) -> Tensor {
        self.arg()
    }

    /// `|z|² = x² + y²`, a real tensor (`x²` for a real tensor).
    ///
    /// ```
    /// use rlx::{Tensor, C64};
    /// let z = Tensor::from_slice(&[C64::new(3.0, 4.0)], [1]);
    /// assert_eq!(z.norm_sqr().to_vec::<f64>().unwrap(), vec![25.0]);
    /// ```
    #[track_caller]
    pub fn norm_sqr(&self) -> Tensor {
        match self.dtype().is_complex() {
            true => self.real().square().add(&self.imag().square()),
            false => self.square(),
        }
    }

    /// The conjugate transpose of the last two axes (`A^H`; the transpose
    /// [`Tensor::t`] for a real tensor).
    ///
    /// ```
    /// use rlx::{Tensor, C64};
    /// let a = Tensor::from_slice(&[C64::new(1.0, 2.0), C64::new(3.0, -1.0)], [1, 2]);
    /// let h = a.mh();
    /// assert_eq!(h.shape().dims(), &[2, 1]);
    /// assert_eq!(h.to_vec::<C64>().unwrap(), vec![C64::new(1.0, -2.0), C64::new(3.0, 1.0)]);
    /// ```
    #[track_caller]
    pub fn mh(&self) -> Tensor {
        self.t().conj()
    }
}

/// The cast that promotes the real operand of a binary op or matrix
/// product with one complex operand, if there is one: `(k, dtype)` casts
/// operand `k` to `dtype`. `f64` with `c32` is not promoted (it would
/// round); `infer` then reports the mismatch.
#[inline]
pub(crate) fn promotion(op: &Op, inputs: &[&Tensor]) -> Option<(usize, DType)> {
    let [a, b] = inputs else { return None };
    let (da, db) = (a.dtype(), b.dtype());
    if da.is_complex() == db.is_complex() {
        return None;
    }
    if !matches!(op, Op::MatMul) && !matches!(op, Op::Binary(o) if *o != BinaryOp::Complex) {
        return None;
    }
    let (k, real, complex) = match da.is_complex() {
        true => (1, db, da),
        false => (0, da, db),
    };
    let widens = real.is_float() && (complex == DType::C64 || real.complex() == Some(complex));
    widens.then_some((k, complex))
}
