//! Softmax and log-softmax along one axis, numerically stable:
//! `softmax(x)_i = e^(x_i - m) / Σ_j e^(x_j - m)` and
//! `log_softmax(x)_i = x_i - m - ln Σ_j e^(x_j - m)` with `m = max_j x_j`,
//! so no exponential overflows. Computed in `f32` for `f16`/`bf16`.

use rlx_core::{Error, Result};

use super::iter::split_at_axis;
use super::operand::{dtype_error, same_float, Operand};
use super::scalar::{max_nan, Float, Real};
use super::vmath::VFloat;
use crate::storage::Storage;

fn run<T: Float>(log: bool, dims: &[usize], axis: usize, x: &[T], out: &mut [T]) {
    let (outer, n, inner) = split_at_axis(dims, axis);
    for o in 0..outer {
        for q in 0..inner {
            let base = o * n * inner + q;
            let at = |i: usize| base + i * inner;
            let mut m = <T::C as VFloat>::NEG_INFINITY;
            for i in 0..n {
                m = max_nan(m, x[at(i)].load());
            }
            let mut sum = <T::C as VFloat>::ZERO;
            for i in 0..n {
                sum += (x[at(i)].load() - m).exp();
            }
            if log {
                let lse = sum.ln();
                for i in 0..n {
                    out[at(i)] = T::store(x[at(i)].load() - m - lse);
                }
            } else {
                for i in 0..n {
                    out[at(i)] = T::store((x[at(i)].load() - m).exp() / sum);
                }
            }
        }
    }
}

pub(super) fn softmax(axis: usize, log: bool, x: Operand<'_>, out: &mut Storage) -> Result<()> {
    let name = if log { "log_softmax" } else { "softmax" };
    let dims = x.dims();
    if axis >= dims.len() {
        return Err(Error::InvalidArgument {
            op: name,
            message: format!("axis {axis} is out of range for shape {}", x.shape),
        });
    }
    let err = dtype_error(name, x.storage.dtype(), out.dtype());
    same_float!(Err(err); (x.storage, out) => |v, o| {
        run(log, dims, axis, v, o);
        Ok(())
    })
}
