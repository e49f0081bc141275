//! The element-wise methods of `f64` under their std names, so that math
//! written for numbers reads the same on tensors: `x.powf(2.5)`,
//! `y.atan2(x)`, `x.ln_1p()`, `x.hypot(y)`, `x.max(0.0)`, ... Each has
//! the meaning of the `f64` method applied to every element (with NumPy
//! broadcasting for two operands); those without a primitive are built
//! from primitives, so they differentiate (forward and reverse) like any
//! other code.
//!
//! A second operand is a number or a tensor ([`Operand2`]).
//!
//! `f64` methods left out: `rem_euclid`/`div_euclid` (no remainder
//! primitive), `round_ties_even`, `abs_sub` (deprecated in std),
//! `total_cmp`/`to_bits` (no element-wise tensor meaning). `max`/`min`
//! taking axes are the reductions (see [`MaxArg`]).

use rlx_core::{BinaryOp, CmpOp, Result};

use crate::tensor::Tensor;

/// The second operand of an element-wise method: an `f64` (a 0-d tensor of
/// the receiver's dtype), a `Tensor` or a `&Tensor`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the second operand of an element-wise tensor method",
    note = "pass an `f64`, a `Tensor` or a `&Tensor`"
)]
pub trait Operand2 {
    /// The operand as a tensor like `like` (for a number: a 0-d tensor of
    /// its dtype).
    fn operand_like(self, like: &Tensor) -> Tensor;
}

impl Operand2 for f64 {
    fn operand_like(self, like: &Tensor) -> Tensor {
        like.scalar_like(self)
    }
}

impl Operand2 for &Tensor {
    fn operand_like(self, _: &Tensor) -> Tensor {
        self.clone()
    }
}

impl Operand2 for Tensor {
    fn operand_like(self, _: &Tensor) -> Tensor {
        self
    }
}

/// What [`Tensor::max`] and [`Tensor::min`] take: axes (`&[usize]`,
/// `&[usize; N]`, `&Vec<usize>`) for the reduction, or a second operand (`f64`,
/// `Tensor`, `&Tensor`) for the element-wise `f64::max`/`f64::min`.
pub trait MaxArg {
    /// `max` (`true`) or `min` of `x` with this argument.
    #[track_caller]
    fn max_or_min(self, x: &Tensor, max: bool) -> Tensor;
}

macro_rules! axes_arg {
    ($([$($g:tt)*] $t:ty),*) => {$(
        impl<$($g)*> MaxArg for $t {
            #[track_caller]
            fn max_or_min(self, x: &Tensor, max: bool) -> Tensor {
                if max {
                    x.reduce_max(&self[..])
                } else {
                    x.reduce_min(&self[..])
                }
            }
        }
    )*};
}
// Axes by reference only: `x.max(&[1])` reads as the reduction always has,
// and clippy does not ask to drop the `&`.
axes_arg!([] &[usize], [] &Vec<usize>, [const N: usize] &[usize; N]);

macro_rules! operand_arg {
    ($($t:ty),*) => {$(
        impl MaxArg for $t {
            #[track_caller]
            fn max_or_min(self, x: &Tensor, max: bool) -> Tensor {
                let y = self.operand_like(x);
                if max {
                    x.maximum(&y)
                } else {
                    x.minimum(&y)
                }
            }
        }
    )*};
}
operand_arg!(f64, Tensor, &Tensor);

/// Where [`Tensor::asinh`] and [`Tensor::acosh`] switch to `ln(x) + ln 2`:
/// above it `sqrt(x² ± 1) = x` to every bit, in `f32` and `f64`, and below
/// it `x²` does not overflow.
const LARGE: f64 = (1u64 << 28) as f64;

impl Tensor {
    /// `x^n` for a real `n` (a number or a tensor), as `f64::powf` (the
    /// same bits; `f32`: within 1 ulp).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[4.0f64, 9.0], [2]).powf(1.5);
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![8.0, 27.0]);
    /// ```
    #[track_caller]
    pub fn powf(&self, n: impl Operand2) -> Tensor {
        self.pow(&n.operand_like(self))
    }

    /// The four-quadrant arctangent of `self / other` (`other` a number or
    /// a tensor), as `f64::atan2`: `y.atan2(x)` is the angle of `(x, y)`
    /// (the same bits; `f32`: within 1 ulp).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[1.0f64, -1.0], [2]);
    /// let a = y.atan2(-1.0).to_vec::<f64>().unwrap();
    /// assert_eq!(a, vec![1.0f64.atan2(-1.0), (-1.0f64).atan2(-1.0)]);
    /// ```
    #[track_caller]
    pub fn atan2(&self, other: impl Operand2) -> Tensor {
        self.binary(BinaryOp::Atan2, &other.operand_like(self))
    }

    /// [`Tensor::atan2`] returning an error instead of panicking (shape or
    /// dtype mismatch).
    #[track_caller]
    pub fn try_atan2(&self, other: impl Operand2) -> Result<Tensor> {
        self.try_binary(BinaryOp::Atan2, &other.operand_like(self))
    }

    /// [`Tensor::atan2`] with a number (kept for code written before
    /// `atan2` took one).
    #[track_caller]
    pub fn atan2_scalar(&self, other: f64) -> Tensor {
        self.atan2(other)
    }

    /// Element-wise maximum with `other` (`f64::max`, but a NaN operand
    /// gives NaN, as [`Tensor::maximum`]), or, given axes, the maximum
    /// over them (a reduction; see [`Tensor::reduce_max`]).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[-1.0f64, 5.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.max(0.0).to_vec::<f64>().unwrap(), vec![0.0, 5.0, 3.0, 4.0]);
    /// assert_eq!(x.max(&[1]).to_vec::<f64>().unwrap(), vec![5.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn max(&self, arg: impl MaxArg) -> Tensor {
        arg.max_or_min(self, true)
    }

    /// Element-wise minimum with `other` (`f64::min`, but a NaN operand
    /// gives NaN, as [`Tensor::minimum`]), or, given axes, the minimum
    /// over them (a reduction; see [`Tensor::reduce_min`]).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[-1.0f64, 5.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(x.min(0.0).to_vec::<f64>().unwrap(), vec![-1.0, 0.0, 0.0, 0.0]);
    /// assert_eq!(x.min(&[0]).to_vec::<f64>().unwrap(), vec![-1.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn min(&self, arg: impl MaxArg) -> Tensor {
        arg.max_or_min(self, false)
    }

    /// `sqrt(x² + y²)` without overflow or underflow, as `f64::hypot`:
    /// `m sqrt(1 + (n/m)²)` with `m`, `n` the larger and smaller of `|x|`,
    /// `|y|`; `∞` if either is infinite (even if the other is NaN).
    /// Within 2 ulp of `f64::hypot` everywhere (`f32`: 2 ulp).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// assert_eq!(Tensor::scalar(3.0f64).hypot(4.0).item::<f64>().unwrap(), 5.0);
    /// let big = Tensor::scalar(3e300f64).hypot(4e300).item::<f64>().unwrap();
    /// assert!((big - 5e300).abs() <= 2e284);
    /// ```
    #[track_caller]
    pub fn hypot(&self, other: impl Operand2) -> Tensor {
        let (ax, ay) = (self.abs(), other.operand_like(self).abs());
        // One comparison for both picks, so that at |x| = |y| the larger and
        // the smaller are different operands (their derivatives add up).
        let x_larger = ax.ge(&ay);
        let m = x_larger.select(&ax, &ay);
        let n = x_larger.select(&ay, &ax);
        let scaled = &m * (n.div(&m).square() + 1.0).sqrt();
        // n = 0 covers m = 0, where n/m is NaN.
        let finite = n.eq_scalar(0.0).select(&m, &scaled);
        let inf = f64::INFINITY;
        let infinite = ax.eq_scalar(inf).or(&ay.eq_scalar(inf));
        infinite.select(&self.scalar_like(inf), &finite)
    }

    /// `self * a + b`, as `f64::mul_add`, but not fused: one rounding per
    /// op, so the error is at most `u (|self a| + |self a + b|)` (`u` the
    /// unit roundoff, `2^-53` for `f64`), not half an ulp of the result:
    /// where `self a` and `b` cancel, the relative error is unbounded.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::scalar(2.0f64).mul_add(3.0, 1.0);
    /// assert_eq!(y.item::<f64>().unwrap(), 7.0);
    /// ```
    #[track_caller]
    pub fn mul_add(&self, a: impl Operand2, b: impl Operand2) -> Tensor {
        let (a, b) = (a.operand_like(self), b.operand_like(self));
        self.mul(&a).add(&b)
    }

    /// Logarithm in `base` (a number or a tensor), as `f64::log`:
    /// `ln(x) / ln(base)`, the formula of std, within 4 ulp of it (`f32`:
    /// 3; each logarithm is within 1 ulp of std's).
    #[track_caller]
    pub fn log(&self, base: impl Operand2) -> Tensor {
        self.ln() / base.operand_like(self).ln()
    }

    /// Base-10 logarithm, as `f64::log10`: `ln(x) · log10(e)`, within
    /// 2 ulp of `f64::log10` over the whole range (not exact at powers of
    /// 10: `log10(1000)` may be 1 ulp off 3).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[1.0f64, 100.0], [2]).log10();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn log10(&self) -> Tensor {
        self.ln() * std::f64::consts::LOG10_E
    }

    /// Base-2 logarithm, as `f64::log2`: `ln(x) · log2(e)`, within 2 ulp
    /// of `f64::log2` over the whole range (not exact at powers of 2).
    #[track_caller]
    pub fn log2(&self) -> Tensor {
        self.ln() * std::f64::consts::LOG2_E
    }

    /// `2^x`, as `f64::exp2`: the power `2^x` (`e^(x ln 2)` would lose
    /// `|x ln 2|` ulp to the rounding of its argument), within 1 ulp of
    /// `f64::exp2`, exact at integers.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[3.0f64, -1074.0, 0.5], [3]).exp2();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![8.0, 5e-324, 2f64.sqrt()]);
    /// ```
    #[track_caller]
    pub fn exp2(&self) -> Tensor {
        self.scalar_like(2.0).pow(self)
    }

    /// `e^x - 1`, accurate for small `x` (`f64::exp_m1`; also
    /// [`Tensor::expm1`]): within 2 ulp of `f64::exp_m1`.
    #[track_caller]
    pub fn exp_m1(&self) -> Tensor {
        self.expm1()
    }

    /// `ln(1 + x)`, accurate for small `x` (`f64::ln_1p`; also
    /// [`Tensor::log1p`]): within 2 ulp of `f64::ln_1p`.
    #[track_caller]
    pub fn ln_1p(&self) -> Tensor {
        self.log1p()
    }

    /// Cube root, real for negative `x` (`f64::cbrt`): `y = |x|^(1/3)`
    /// refined by one Newton step `y + (|x|/y² - y)/3` (the exponent `1/3`
    /// is rounded, which alone costs up to `|ln x| · 2^-55` relative, 60
    /// ulp near the ends of the range), with the sign of `x`. Within 1 ulp
    /// of `f64::cbrt` everywhere; `±0`, `±∞` and NaN as std.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[8.0f64, -27.0, 1e300], [3]).cbrt();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![2.0, -3.0, 1e100]);
    /// ```
    #[track_caller]
    pub fn cbrt(&self) -> Tensor {
        // ±1 by the sign bit (-0 too), with a zero derivative.
        let s = self.signum();
        let a = self * &s;
        let y0 = a.pow_scalar(1.0 / 3.0);
        let newton = &y0 + (a.div(&y0.square()) - &y0) * (1.0 / 3.0);
        // At 0 and ∞ the step is 0/0 or ∞/∞; y0 is exact there.
        let exact = a.eq_scalar(0.0).or(&a.eq_scalar(f64::INFINITY));
        s * exact.select(&y0, &newton)
    }

    /// Degrees to radians, as `f64::to_radians` (its formula: exact).
    #[track_caller]
    pub fn to_radians(&self) -> Tensor {
        self * (std::f64::consts::PI / 180.0)
    }

    /// Radians to degrees, as `f64::to_degrees` (its formula: exact).
    #[track_caller]
    pub fn to_degrees(&self) -> Tensor {
        self * (180.0 / std::f64::consts::PI)
    }

    /// `1.0` for `+0.0` and positive numbers, `-1.0` for `-0.0` and
    /// negative ones, NaN for NaN, as `f64::signum` (unlike
    /// [`Tensor::sign`], which gives 0 at zero). Its derivative is 0.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[0.0f64, -0.0, -2.0], [3]).signum();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![1.0, -1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn signum(&self) -> Tensor {
        // The sign of ±0 is that of 1/±0 = ±∞.
        let zero = self.eq_scalar(0.0);
        zero.select(&self.recip().sign(), &self.sign())
    }

    /// `|self|` with the sign of `sign` (`f64::copysign`), exact; a NaN
    /// `sign` gives NaN (std takes the NaN's sign bit, which no tensor op
    /// reads).
    #[track_caller]
    pub fn copysign(&self, sign: impl Operand2) -> Tensor {
        self.abs() * sign.operand_like(self).signum()
    }

    /// Rounds toward zero, as `f64::trunc` (exact, `-0.0` for `-0.5`).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[2.7f64, -2.7], [2]).trunc();
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![2.0, -2.0]);
    /// ```
    #[track_caller]
    pub fn trunc(&self) -> Tensor {
        self.sign() * self.abs().floor()
    }

    /// `x - trunc(x)`, as `f64::fract` (the formula of std, exact).
    #[track_caller]
    pub fn fract(&self) -> Tensor {
        self - self.trunc()
    }

    /// `(sin x, cos x)`, as `f64::sin_cos` (the bounds of
    /// [`Tensor::sin`] and [`Tensor::cos`]).
    #[track_caller]
    pub fn sin_cos(&self) -> (Tensor, Tensor) {
        (self.sin(), self.cos())
    }

    /// Inverse hyperbolic sine, as `f64::asinh`, odd, for `a = |x|`:
    /// `ln_1p(a (1 + a / (1 + sqrt(1 + a²))))` (`ln(a + sqrt(a² + 1))`
    /// rewritten so that nothing cancels near 0), and `ln(a) + ln 2`
    /// above `2^28`, where `a²` could overflow and `sqrt(a² + 1) = a`.
    /// Within 3 ulp of `f64::asinh` everywhere (`f32`: 3 ulp); `±0`, `±∞`
    /// and NaN as std; the derivative is `1/sqrt(1 + x²)`, 1 at 0.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[1e-10f64, 1e200], [2]).asinh().to_vec::<f64>().unwrap();
    /// assert_eq!(y[0], 1e-10);
    /// assert!((y[1] - 1e200f64.asinh()).abs() <= 1e-13);
    /// ```
    #[track_caller]
    pub fn asinh(&self) -> Tensor {
        // s = ±1 (+1 for -0, so that a keeps the sign of zero), a = |x|.
        let s = self
            .lt_scalar(0.0)
            .select(&self.scalar_like(-1.0), &self.scalar_like(1.0));
        let a = self * &s;
        let near = (&a * (&a / ((a.square() + 1.0).sqrt() + 1.0) + 1.0)).log1p();
        let far = a.ln() + std::f64::consts::LN_2;
        s * a.gt_scalar(LARGE).select(&far, &near)
    }

    /// Inverse hyperbolic cosine, as `f64::acosh` (NaN below 1): for
    /// `t = x - 1` (exact), `ln_1p(t + sqrt(t) sqrt(t + 2))`
    /// (`ln(x + sqrt(x² - 1))` rewritten so that nothing cancels near 1),
    /// and `ln(x) + ln 2` from `2^28` on, where `x²` could overflow.
    /// Within 3 ulp of `f64::acosh` everywhere (`f32`: 3 ulp); ±∞ and NaN
    /// as std.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[1.0f64, 1e300], [2]).acosh().to_vec::<f64>().unwrap();
    /// assert_eq!(y[0], 0.0);
    /// // ln(2x); std's `f64::acosh` overflows to ∞ here.
    /// assert!((y[1] - (1e300f64.ln() + std::f64::consts::LN_2)).abs() <= 1e-13);
    /// ```
    #[track_caller]
    pub fn acosh(&self) -> Tensor {
        let t = self - 1.0;
        // sqrt(t) is NaN below 1 (sqrt(t (t + 2)) is not, below -1).
        let near = (&t + t.sqrt() * (&t + 2.0).sqrt()).log1p();
        let far = self.ln() + std::f64::consts::LN_2;
        self.ge_scalar(LARGE).select(&far, &near)
    }

    /// Inverse hyperbolic tangent, as `f64::atanh`:
    /// `(ln_1p(x) - ln_1p(-x)) / 2` (the two terms have opposite signs,
    /// so nothing cancels), within 3 ulp of `f64::atanh` everywhere
    /// (`f32`: 3 ulp); `±1` give `±∞`.
    #[track_caller]
    pub fn atanh(&self) -> Tensor {
        (self.log1p() - self.neg().log1p()) * 0.5
    }

    /// A `bool` mask of NaN elements, as `f64::is_nan`.
    #[track_caller]
    pub fn is_nan(&self) -> Tensor {
        self.compare(CmpOp::Ne, self)
    }

    /// A `bool` mask of ±∞ elements, as `f64::is_infinite`.
    #[track_caller]
    pub fn is_infinite(&self) -> Tensor {
        self.abs().eq_scalar(f64::INFINITY)
    }

    /// A `bool` mask of finite elements (neither NaN nor ±∞), as
    /// `f64::is_finite`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let m = Tensor::from_slice(&[1.0f64, f64::NAN, f64::INFINITY], [3]).is_finite();
    /// assert_eq!(m.to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn is_finite(&self) -> Tensor {
        // x - x is 0 for finite x, NaN for NaN and ±∞.
        self.sub(self).eq_scalar(0.0)
    }
}
