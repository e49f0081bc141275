//! Softmax and log-softmax along one axis, numerically stable:
//! `softmax(x)_i = e^(x_i - m) / Σ_j e^(x_j - m)` and
//! `log_softmax(x)_i = x_i - m - ln Σ_j e^(x_j - m)` with `m = max_j x_j`,
//! so no exponential overflows. Computed in `f32` for `f16`/`bf16`.
//!
//! Along the last axis (contiguous rows, an LSTM's logits every step) the
//! exponentials of a row are computed a chunk at a time into a buffer, a
//! loop LLVM vectorises (AVX-512 or AVX2 where the CPU has them), and then
//! summed in order: the same values added in the same order as the
//! element-by-element loop of the other axes, so the same bits.

use rlx_core::{Error, Result};

use super::iter::split_at_axis;
use super::operand::{dtype_error, same_float, Operand};
use super::scalar::{max_nan, Float, Real};
use super::vmath::VFloat;
use crate::storage::Storage;

/// `log_softmax` or `softmax` of `x: dims` along `axis`, element by
/// element (any axis).
#[inline(always)]
fn run_strided<T: Float>(log: bool, dims: &[usize], axis: usize, x: &[T], out: &mut [T]) {
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

/// Elements of a row whose exponentials are computed at once (a stack
/// buffer) before they are summed.
const CHUNK: usize = 64;

/// [`run_strided`] for `axis` the last one: the same operations, with
/// each row's exponentials computed a [`CHUNK`] at a time by a loop
/// without a loop-carried sum (which vectorises) and then added in order.
#[inline(always)]
fn run_rows<T: Float>(log: bool, n: usize, x: &[T], out: &mut [T]) {
    for (row, out) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let mut m = <T::C as VFloat>::NEG_INFINITY;
        for &v in row {
            m = max_nan(m, v.load());
        }
        let mut sum = <T::C as VFloat>::ZERO;
        let mut e = [<T::C as VFloat>::ZERO; CHUNK];
        for part in row.chunks(CHUNK) {
            let e = &mut e[..part.len()];
            for (e, &v) in e.iter_mut().zip(part) {
                *e = (v.load() - m).exp();
            }
            for &e in e.iter() {
                sum += e;
            }
        }
        if log {
            let lse = sum.ln();
            for (o, &v) in out.iter_mut().zip(row) {
                *o = T::store(v.load() - m - lse);
            }
        } else {
            for (o, &v) in out.iter_mut().zip(row) {
                *o = T::store((v.load() - m).exp() / sum);
            }
        }
    }
}

/// Along the last axis, the row loop ([`run_rows`], vectorised for the
/// CPU's widest registers); along another, [`run_strided`].
fn run<T: Float>(log: bool, dims: &[usize], axis: usize, x: &[T], out: &mut [T]) {
    let (_, n, inner) = split_at_axis(dims, axis);
    if inner != 1 || n == 0 {
        return run_strided(log, dims, axis, x, out);
    }
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU supports AVX-512F (checked just above).
        return unsafe { wide::rows_avx512(log, n, x, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::rows_avx2(log, n, x, out) };
    }
    run_rows(log, n, x, out)
}

/// [`run_rows`] compiled for wider registers: IEEE operations lane by
/// lane (no fused multiply-add), the bits of the portable loop.
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn rows_avx2<T: Float>(log: bool, n: usize, x: &[T], out: &mut [T]) {
        run_rows(log, n, x, out)
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[cfg(feature = "avx512")]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows_avx512<T: Float>(log: bool, n: usize, x: &[T], out: &mut [T]) {
        run_rows(log, n, x, out)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows with both signs, ties, infinities and NaN, at lengths around
    /// the chunk and the vector widths.
    fn rows(n: usize, rows: usize) -> Vec<f64> {
        (0..n * rows)
            .map(|i| match (i * 7 + rows) % 41 {
                0 => f64::NEG_INFINITY,
                1 if rows == 3 => f64::INFINITY,
                2 if rows == 5 => f64::NAN,
                k => ((i as f64) * 0.731).sin() * (1.0 + k as f64),
            })
            .collect()
    }

    fn bits<T: Float>(v: &[T]) -> Vec<u64> {
        v.iter()
            .map(|&x| {
                // NaNs as one pattern (payloads are not compared).
                let c = x.load().to_f64();
                match c.is_nan() {
                    true => u64::MAX,
                    false => c.to_bits(),
                }
            })
            .collect()
    }

    fn check<T: Float>(of: impl Fn(f64) -> T) {
        for n in [1, 3, 15, 16, 17, 63, 64, 65, 130] {
            for r in [1, 3, 4, 5] {
                let x: Vec<T> = rows(n, r).into_iter().map(&of).collect();
                for log in [false, true] {
                    let dims = [r, n];
                    let mut want = vec![of(0.0); n * r];
                    run_strided(log, &dims, 1, &x, &mut want);
                    let mut got = vec![of(0.0); n * r];
                    run(log, &dims, 1, &x, &mut got);
                    assert_eq!(bits(&got), bits(&want), "n = {n}, rows = {r}, log {log}");
                    let mut portable = vec![of(0.0); n * r];
                    run_rows(log, n, &x, &mut portable);
                    assert_eq!(bits(&portable), bits(&want), "n = {n}, rows = {r}");
                }
            }
        }
    }

    #[test]
    fn the_row_loops_give_the_bits_of_the_element_loop() {
        check::<f64>(|x| x);
        check::<f32>(|x| x as f32);
        check::<half::f16>(half::f16::from_f64);
    }
}
