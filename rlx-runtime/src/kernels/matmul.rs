//! Reference batched matrix product `C[.., i, j] = Σ_p A[.., i, p] B[.., p, j]`
//! with NumPy broadcasting of the batch dimensions. A plain triple loop that
//! accumulates in the compute type; the compiler routes its matmuls through
//! `matrixmultiply` instead.

use rlx_core::{Error, Result};

use super::iter::{broadcast_strides, walk};
use super::operand::{dtype_error, same_float, Operand};
use super::scalar::Float;
use super::vmath::VFloat;
use crate::storage::{Storage, C32, C64};
use matrixmultiply::CGemmOption;
use num_complex::Complex;

/// Output columns accumulated at once.
const COLS: usize = 32;

#[allow(clippy::too_many_arguments)]
fn run<T: Float>(
    so: &[usize],
    sa: &[usize],
    sb: &[usize],
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    let r = so.len();
    let batch = &so[..r - 2];
    let ta = broadcast_strides(&sa[..sa.len() - 2], batch);
    let tb = broadcast_strides(&sb[..sb.len() - 2], batch);
    let mut c0 = 0;
    walk(batch, [&ta, &tb], [0, 0], |[ia, ib]| {
        let (a0, b0) = (ia * m * k, ib * k * n);
        for i in 0..m {
            // A block of output columns accumulates on the stack, so rows of
            // `b` are read contiguously and halves still sum in f32.
            for j0 in (0..n).step_by(COLS) {
                let w = COLS.min(n - j0);
                let mut acc = [<T::C as VFloat>::ZERO; COLS];
                for p in 0..k {
                    let av = a[a0 + i * k + p].load();
                    let row = &b[b0 + p * n + j0..b0 + p * n + j0 + w];
                    for (c, bv) in acc[..w].iter_mut().zip(row) {
                        *c += av * bv.load();
                    }
                }
                for (o, c) in out[c0 + i * n + j0..c0 + i * n + j0 + w]
                    .iter_mut()
                    .zip(&acc)
                {
                    *o = T::store(*c);
                }
            }
        }
        c0 += m * n;
    });
}

/// One `m x k` by `k x n` product of contiguous row-major complex
/// matrices into `c` (`C ← A B`).
type Gemm<T> = fn((usize, usize, usize), &[Complex<T>], &[Complex<T>], &mut [Complex<T>]);

fn zgemm((m, k, n): (usize, usize, usize), a: &[C64], b: &[C64], c: &mut [C64]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let (one, zero) = ([1.0, 0.0], [0.0, 0.0]);
    let s = |v: usize| v as isize;
    // SAFETY: `Complex<f64>` is `repr(C)` `{ re, im }`, the layout of
    // matrixmultiply's `[f64; 2]`; the three matrices are row-major with
    // the lengths asserted above, so every index the strides `(k, 1)`,
    // `(n, 1)`, `(n, 1)` reach is in bounds; `c` is a unique borrow that
    // aliases neither operand; with β = 0, `c` is only written.
    unsafe {
        matrixmultiply::zgemm(
            CGemmOption::Standard,
            CGemmOption::Standard,
            m,
            k,
            n,
            one,
            a.as_ptr().cast(),
            s(k),
            1,
            b.as_ptr().cast(),
            s(n),
            1,
            zero,
            c.as_mut_ptr().cast(),
            s(n),
            1,
        )
    }
}

fn cgemm((m, k, n): (usize, usize, usize), a: &[C32], b: &[C32], c: &mut [C32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    let (one, zero) = ([1.0, 0.0], [0.0, 0.0]);
    let s = |v: usize| v as isize;
    // SAFETY: as in `zgemm`, for `Complex<f32>` and `[f32; 2]`.
    unsafe {
        matrixmultiply::cgemm(
            CGemmOption::Standard,
            CGemmOption::Standard,
            m,
            k,
            n,
            one,
            a.as_ptr().cast(),
            s(k),
            1,
            b.as_ptr().cast(),
            s(n),
            1,
            zero,
            c.as_mut_ptr().cast(),
            s(n),
            1,
        )
    }
}

/// The batched, broadcasting complex product, one `gemm` per batch item.
#[allow(clippy::too_many_arguments)]
fn run_complex<T: Copy>(
    so: &[usize],
    sa: &[usize],
    sb: &[usize],
    (m, k, n): (usize, usize, usize),
    a: &[Complex<T>],
    b: &[Complex<T>],
    out: &mut [Complex<T>],
    gemm: Gemm<T>,
) {
    let r = so.len();
    let batch = &so[..r - 2];
    let ta = broadcast_strides(&sa[..sa.len() - 2], batch);
    let tb = broadcast_strides(&sb[..sb.len() - 2], batch);
    let mut c0 = 0;
    walk(batch, [&ta, &tb], [0, 0], |[ia, ib]| {
        let (a0, b0) = (ia * m * k, ib * k * n);
        gemm(
            (m, k, n),
            &a[a0..a0 + m * k],
            &b[b0..b0 + k * n],
            &mut out[c0..c0 + m * n],
        );
        c0 += m * n;
    });
}

pub(super) fn matmul(
    a: Operand<'_>,
    b: Operand<'_>,
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let (sa, sb) = (a.dims(), b.dims());
    let (ra, rb) = (sa.len(), sb.len());
    if ra < 2 || rb < 2 || so.len() < 2 || sa[ra - 1] != sb[rb - 2] {
        return Err(Error::ShapeMismatch {
            op: "matmul",
            lhs: a.shape.clone(),
            rhs: b.shape.clone(),
            expected: "operands of shapes [.., m, k] and [.., k, n]".into(),
        });
    }
    let mkn = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    let err = dtype_error("matmul", a.storage.dtype(), b.storage.dtype());
    match (a.storage, b.storage, &mut *out) {
        (Storage::C32(x), Storage::C32(y), Storage::C32(o)) => {
            run_complex(so, sa, sb, mkn, x, y, o, cgemm);
            return Ok(());
        }
        (Storage::C64(x), Storage::C64(y), Storage::C64(o)) => {
            run_complex(so, sa, sb, mkn, x, y, o, zgemm);
            return Ok(());
        }
        _ => {}
    }
    same_float!(Err(err); (a.storage, b.storage, out) => |x, y, o| {
        run(so, sa, sb, mkn, x, y, o);
        Ok(())
    })
}
