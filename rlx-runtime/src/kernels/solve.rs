//! Dense linear solve `A X = B` per batch by LU factorisation with partial
//! pivoting, computed in `f64` for every float dtype.
//!
//! A matrix is reported singular when, at some column, the largest
//! remaining pivot candidate is `<= n · ε · max|A|` (ε of the operand's
//! dtype): below that, the computed solution would be noise. NaN entries are
//! not "singular"; they propagate into the result.

use rlx_core::{DType, Error, Result};

use super::operand::Operand;
use crate::storage::Storage;

/// Length of the `f64` scratch [`solve_into`] needs for an `n x n` system
/// with `k` right-hand sides.
pub fn solve_scratch_len(n: usize, k: usize) -> usize {
    n * n + n * k
}

/// Machine epsilon of a float dtype (the singularity tolerance is `n · ε · max|A|`).
pub(crate) fn eps(d: DType) -> f64 {
    match d {
        DType::F32 => f32::EPSILON as f64,
        DType::F16 => half::f16::EPSILON.to_f64(),
        DType::BF16 => half::bf16::EPSILON.to_f64(),
        DType::F64 | DType::I64 | DType::Bool => f64::EPSILON,
    }
}

/// Solves `a x = b` into `out` (shaped like `b`), using `scratch` for the
/// factorisation; `scratch` grows to [`solve_scratch_len`] once and is then
/// reused, so a caller that keeps it warm does not allocate.
///
/// ```
/// use rlx_runtime::kernels::{solve_into, Operand};
/// use rlx_runtime::{Shape, Storage};
/// let a = Storage::F64(vec![2.0, 0.0, 0.0, 4.0]);
/// let b = Storage::F64(vec![2.0, 8.0]);
/// let (sa, sb) = (Shape::from([2, 2]), Shape::from([2, 1]));
/// let mut out = Storage::F64(vec![0.0; 2]);
/// let mut scratch = Vec::new();
/// solve_into(Operand::new(&a, &sa), Operand::new(&b, &sb), &mut out, &mut scratch).unwrap();
/// assert_eq!(out, Storage::F64(vec![1.0, 2.0]));
/// ```
pub fn solve_into(
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut Storage,
    scratch: &mut Vec<f64>,
) -> Result<()> {
    let (sa, sb) = (a.dims(), b.dims());
    let (ra, rb) = (sa.len(), sb.len());
    let ok = ra >= 2
        && ra == rb
        && sa[ra - 1] == sa[ra - 2]
        && sb[rb - 2] == sa[ra - 1]
        && sa[..ra - 2] == sb[..rb - 2];
    if !ok {
        return Err(Error::ShapeMismatch {
            op: "solve",
            lhs: a.shape.clone(),
            rhs: b.shape.clone(),
            expected: "a square matrix [.., n, n] and a right-hand side [.., n, k] with equal batch dimensions".into(),
        });
    }
    let dtype = a.storage.dtype();
    if !dtype.is_float() || b.storage.dtype() != dtype || out.dtype() != dtype {
        return Err(Error::UnsupportedDType {
            op: "solve",
            dtype,
            expected: "float operands of one dtype",
        });
    }
    let (n, k) = (sa[ra - 1], sb[rb - 1]);
    let batches: usize = sa[..ra - 2].iter().product();
    let need = solve_scratch_len(n, k);
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (lu, x) = scratch[..need].split_at_mut(n * n);
    let eps = eps(dtype);
    for bt in 0..batches {
        for (i, v) in lu.iter_mut().enumerate() {
            *v = a.storage.get_f64(bt * n * n + i);
        }
        for (i, v) in x.iter_mut().enumerate() {
            *v = b.storage.get_f64(bt * n * k + i);
        }
        factor_and_solve(n, k, lu, x, eps).map_err(|column| Error::SingularMatrix {
            op: "solve",
            shape: a.shape.clone(),
            column,
        })?;
        store(out, bt * n * k, x);
    }
    Ok(())
}

/// Gaussian elimination with partial pivoting on `[lu | x]`, then back
/// substitution; `x` ends holding the solution. `Err(column)` if singular.
/// Shared by this kernel and the compiler's solve step.
pub(crate) fn factor_and_solve(
    n: usize,
    k: usize,
    lu: &mut [f64],
    x: &mut [f64],
    eps: f64,
) -> Result<(), usize> {
    let max = lu.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = n as f64 * eps * max;
    for c in 0..n {
        let mut p = c;
        for r in c + 1..n {
            if lu[r * n + c].abs() > lu[p * n + c].abs() {
                p = r;
            }
        }
        let piv = lu[p * n + c];
        if piv.abs() <= tol {
            return Err(c);
        }
        if p != c {
            for j in 0..n {
                lu.swap(p * n + j, c * n + j);
            }
            for j in 0..k {
                x.swap(p * k + j, c * k + j);
            }
        }
        for r in c + 1..n {
            let f = lu[r * n + c] / piv;
            if f == 0.0 {
                continue;
            }
            for j in c..n {
                lu[r * n + j] -= f * lu[c * n + j];
            }
            for j in 0..k {
                x[r * k + j] -= f * x[c * k + j];
            }
        }
    }
    for r in (0..n).rev() {
        for j in 0..k {
            let mut s = x[r * k + j];
            for q in r + 1..n {
                s -= lu[r * n + q] * x[q * k + j];
            }
            x[r * k + j] = s / lu[r * n + r];
        }
    }
    Ok(())
}

fn store(out: &mut Storage, at: usize, x: &[f64]) {
    let dst = at..at + x.len();
    match out {
        Storage::F32(o) => o[dst].iter_mut().zip(x).for_each(|(d, &v)| *d = v as f32),
        Storage::F64(o) => o[dst].copy_from_slice(x),
        Storage::F16(o) => o[dst]
            .iter_mut()
            .zip(x)
            .for_each(|(d, &v)| *d = half::f16::from_f64(v)),
        Storage::BF16(o) => o[dst]
            .iter_mut()
            .zip(x)
            .for_each(|(d, &v)| *d = half::bf16::from_f64(v)),
        Storage::I64(o) => o[dst].iter_mut().zip(x).for_each(|(d, &v)| *d = v as i64),
        Storage::Bool(o) => o[dst].iter_mut().zip(x).for_each(|(d, &v)| *d = v != 0.0),
    }
}
