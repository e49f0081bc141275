//! Reductions over any set of axes.
//!
//! For each output element (a walk over the kept axes) the kernel walks the
//! reduced axes and accumulates: sums, means and products in `f64` for every
//! float dtype (the result is rounded once), max and min in the compute type.
//! Empty reductions give the identity: sum 0, product 1, max -∞, min +∞;
//! the mean of nothing is NaN (0/0). Max and min propagate NaN.

use rlx_core::{DType, Error, ReduceOp, Result};

use super::iter::{strides, walk, Dims};
use super::operand::{same_float, Operand};
use super::scalar::{max_nan, min_nan, Float, Real};
use super::vmath::VFloat;
use crate::storage::Storage;

/// The kept and reduced axes of a reduction, with the input's strides.
struct Split {
    kept: Dims,
    kept_strides: Dims,
    red: Dims,
    red_strides: Dims,
    count: usize,
}

fn split(dims: &[usize], axes: &[usize]) -> Split {
    let st = strides(dims);
    let nred = axes.len();
    let nkept = dims.len() - nred;
    let mut s = Split {
        kept: Dims::zeros(nkept),
        kept_strides: Dims::zeros(nkept),
        red: Dims::zeros(nred),
        red_strides: Dims::zeros(nred),
        count: 1,
    };
    let (mut k, mut r) = (0, 0);
    for (i, &d) in dims.iter().enumerate() {
        if axes.contains(&i) {
            s.red[r] = d;
            s.red_strides[r] = st[i];
            s.count *= d;
            r += 1;
        } else {
            s.kept[k] = d;
            s.kept_strides[k] = st[i];
            k += 1;
        }
    }
    s
}

/// `out[o] = finish(fold(step, init, x[o, reduced...]))`.
fn fold<T: Copy, C: Copy, O>(
    s: &Split,
    x: &[T],
    out: &mut [O],
    init: C,
    step: impl Fn(C, T) -> C,
    finish: impl Fn(C) -> O,
) {
    let mut i = 0;
    walk(&s.kept, [&s.kept_strides], [0], |[base]| {
        let mut acc = init;
        walk(&s.red, [&s.red_strides], [base], |[j]| {
            acc = step(acc, x[j])
        });
        out[i] = finish(acc);
        i += 1;
    });
}

fn reduce_float<T: Float>(op: ReduceOp, s: &Split, x: &[T], out: &mut [T]) {
    type C<T> = <T as Float>::C;
    // Sums and products accumulate in f64 whatever the dtype: a long f32
    // sum then loses nothing to accumulated rounding.
    let wide = |v: T| v.load().to_f64();
    let narrow = |a: f64| T::store(C::<T>::from_f64(a));
    match op {
        ReduceOp::Sum => fold(s, x, out, 0.0, |a, v| a + wide(v), narrow),
        ReduceOp::Mean => {
            let n = s.count as f64;
            fold(s, x, out, 0.0, |a, v| a + wide(v), |a| narrow(a / n))
        }
        ReduceOp::Max => fold(
            s,
            x,
            out,
            C::<T>::NEG_INFINITY,
            |a, v| max_nan(a, v.load()),
            T::store,
        ),
        ReduceOp::Min => fold(
            s,
            x,
            out,
            C::<T>::INFINITY,
            |a, v| min_nan(a, v.load()),
            T::store,
        ),
        ReduceOp::Prod => fold(s, x, out, 1.0, |a, v| a * wide(v), narrow),
    }
}

/// Sums, means and products of complex values, accumulated in
/// `Complex<f64>` (max and min are rejected by `infer`: complex values are
/// not ordered; their arm gives NaN).
fn reduce_complex<T: crate::storage::Element>(op: ReduceOp, s: &Split, x: &[T], out: &mut [T]) {
    use num_complex::Complex;
    let zero = Complex::new(0.0, 0.0);
    match op {
        ReduceOp::Sum => fold(s, x, out, zero, |a, v| a + v.to_c64(), T::from_c64),
        ReduceOp::Mean => {
            let n = s.count as f64;
            fold(
                s,
                x,
                out,
                zero,
                |a, v| a + v.to_c64(),
                |a| T::from_c64(a / n),
            )
        }
        ReduceOp::Prod => fold(
            s,
            x,
            out,
            Complex::new(1.0, 0.0),
            |a, v| a * v.to_c64(),
            T::from_c64,
        ),
        ReduceOp::Max | ReduceOp::Min => fold(
            s,
            x,
            out,
            zero,
            |a, _| a,
            |_| T::from_c64(Complex::new(f64::NAN, f64::NAN)),
        ),
    }
}

fn reduce_i64(op: ReduceOp, s: &Split, x: &[i64], out: &mut [i64]) {
    match op {
        ReduceOp::Sum => fold(s, x, out, 0i64, i64::wrapping_add, |a| a),
        // Shape inference rejects an integer mean; truncating division keeps the table total.
        ReduceOp::Mean => {
            let n = s.count as i64;
            fold(s, x, out, 0i64, i64::wrapping_add, |a| {
                a.checked_div(n).unwrap_or(0)
            })
        }
        ReduceOp::Max => fold(s, x, out, i64::MIN, i64::max, |a| a),
        ReduceOp::Min => fold(s, x, out, i64::MAX, i64::min, |a| a),
        ReduceOp::Prod => fold(s, x, out, 1i64, i64::wrapping_mul, |a| a),
    }
}

pub(super) fn reduce(
    op: ReduceOp,
    axes: &[usize],
    x: Operand<'_>,
    out: &mut Storage,
) -> Result<()> {
    let dims = x.dims();
    if axes.windows(2).any(|w| w[0] >= w[1]) || axes.iter().any(|&a| a >= dims.len()) {
        return Err(Error::InvalidArgument {
            op: op.name(),
            message: format!(
                "axes {axes:?} must be sorted, unique and below the rank {}",
                dims.len()
            ),
        });
    }
    let s = split(dims, axes);
    match (x.storage, &mut *out) {
        (Storage::C32(v), Storage::C32(o)) => {
            reduce_complex(op, &s, v, o);
            Ok(())
        }
        (Storage::C64(v), Storage::C64(o)) => {
            reduce_complex(op, &s, v, o);
            Ok(())
        }
        (Storage::I64(v), Storage::I64(o)) => {
            reduce_i64(op, &s, v, o);
            Ok(())
        }
        (Storage::Bool(_), _) => Err(Error::UnsupportedDType {
            op: op.name(),
            dtype: DType::Bool,
            expected: "a numeric dtype",
        }),
        (xs, o) => {
            let err = super::operand::dtype_error(op.name(), xs.dtype(), o.dtype());
            same_float!(Err(err); (xs, o) => |v, w| {
                reduce_float(op, &s, v, w);
                Ok(())
            })
        }
    }
}
