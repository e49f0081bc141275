//! Dense linear solve `A X = B` per batch by LU factorisation with partial
//! pivoting, computed in `f64` for every float dtype (complex dtypes in
//! `Complex<f64>`, by [`solve_complex`](super::solve_complex)).
//!
//! A matrix is reported singular when, at some column, the largest
//! remaining pivot candidate is `<= n · ε · max|A|` (ε of the operand's
//! dtype): below that, the computed solution would be noise. NaN entries are
//! not "singular"; they propagate into the result.

use rlx_core::{DType, Error, Result};

use super::operand::Operand;
use super::solve_complex::{solve_complex, Dims};
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
        DType::F64 | DType::I64 | DType::Bool | DType::C64 => f64::EPSILON,
        DType::C32 => f32::EPSILON as f64,
    }
}

/// Solves `a x = b` into `out` (shaped like `b`), using `scratch` for the
/// factorisation; `scratch` grows to [`solve_scratch_len`] once and is then
/// reused, so a caller that keeps it warm does not allocate.
///
/// ```
/// use rlx::runtime::kernels::{solve_into, Operand};
/// use rlx::{Shape, runtime::Storage};
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
    let (n, k) = solve_dims(a, b, out)?;
    let need = solve_scratch_len(n, k);
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    solve_checked(a, b, out, (n, k), &mut scratch[..need])
}

/// [`solve_into`] with its scratch on the stack for small systems (a 4×4
/// with 4 right-hand sides), so that an eager `try_solve` of a 2×2 or 3×3
/// allocates only its result.
pub(crate) fn solve_eager(a: Operand<'_>, b: Operand<'_>, out: &mut Storage) -> Result<()> {
    const STACK: usize = 32;
    let (n, k) = solve_dims(a, b, out)?;
    let need = solve_scratch_len(n, k);
    if need <= STACK {
        solve_checked(a, b, out, (n, k), &mut [0.0; STACK][..need])
    } else {
        solve_checked(a, b, out, (n, k), &mut vec![0.0; need])
    }
}

/// Checks the operands of a solve; returns `(n, k)`.
fn solve_dims(a: Operand<'_>, b: Operand<'_>, out: &Storage) -> Result<(usize, usize)> {
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
    if !dtype.is_inexact() || b.storage.dtype() != dtype || out.dtype() != dtype {
        return Err(Error::UnsupportedDType {
            op: "solve",
            dtype,
            expected: "float or complex operands of one dtype",
        });
    }
    Ok((sa[ra - 1], sb[rb - 1]))
}

/// Solves checked operands (`(n, k)` from [`solve_dims`]) with `scratch`
/// of exactly [`solve_scratch_len`] elements.
fn solve_checked(
    a: Operand<'_>,
    b: Operand<'_>,
    out: &mut Storage,
    (n, k): (usize, usize),
    scratch: &mut [f64],
) -> Result<()> {
    let sa = a.dims();
    let dtype = a.storage.dtype();
    let batches: usize = sa[..sa.len() - 2].iter().product();
    let eps = eps(dtype);
    if dtype.is_complex() {
        // The complex kernel keeps its own `Complex<f64>` scratch (one
        // allocation per call; the compiled step keeps one warm).
        let dims = Dims { batches, n, k };
        return solve_complex(
            a.storage,
            b.storage,
            out,
            dims,
            eps,
            a.shape,
            &mut Vec::new(),
        );
    }
    let (lu, x) = scratch.split_at_mut(n * n);
    for bt in 0..batches {
        load(a.storage, bt * n * n, lu);
        load(b.storage, bt * n * k, x);
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
    // The same steps, with the loop bounds of the small systems of stiff
    // ODE steps known to the compiler (a 2×2 with one right-hand side is
    // several times faster unrolled); the operations and their order are
    // the same, so are the bits.
    match (n, k) {
        (2, 1) => two_by_one(lu, x, eps),
        (3, 1) => lu_steps(3, 1, lu, x, eps),
        (2, 2) => lu_steps(2, 2, lu, x, eps),
        (3, 3) => lu_steps(3, 3, lu, x, eps),
        _ => lu_steps(n, k, lu, x, eps),
    }
}

/// [`lu_steps`] for a 2×2 with one right-hand side, written out on
/// registers: the same operations in the same order (so the same bits and
/// the same errors), without the loops' index arithmetic and bounds
/// checks, which cost more than the arithmetic in an eager `try_solve` of
/// a Newton step.
#[inline(always)]
fn two_by_one(lu: &mut [f64], x: &mut [f64], eps: f64) -> Result<(), usize> {
    let (Ok(m), Ok(rhs)) = (<&mut [f64; 4]>::try_from(lu), <&mut [f64; 2]>::try_from(x)) else {
        unreachable!("factor_and_solve is given n·n and n·k elements")
    };
    let [a, b, c, d] = *m;
    let tol = 2.0 * eps * 0.0f64.max(a.abs()).max(b.abs()).max(c.abs()).max(d.abs());
    // Column 0: the pivot is the row of larger magnitude (row 0 on a tie).
    let swap = c.abs() > a.abs();
    let ([a, b, c, mut d], [x0, mut x1]) = if swap {
        ([c, d, a, b], [rhs[1], rhs[0]])
    } else {
        ([a, b, c, d], *rhs)
    };
    if a.abs() <= tol {
        return Err(0);
    }
    let f = c / a;
    let c = if f == 0.0 {
        c
    } else {
        d -= f * b;
        x1 -= f * x0;
        c - f * a
    };
    // Column 1, then back substitution.
    if d.abs() <= tol {
        (*m, *rhs) = ([a, b, c, d], [x0, x1]);
        return Err(1);
    }
    x1 /= d;
    *rhs = [(x0 - b * x1) / a, x1];
    *m = [a, b, c, d];
    Ok(())
}

/// The body of [`factor_and_solve`].
#[inline(always)]
fn lu_steps(n: usize, k: usize, lu: &mut [f64], x: &mut [f64], eps: f64) -> Result<(), usize> {
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

/// Copies `to.len()` elements of `s` from `at`, widened to `f64`.
fn load(s: &Storage, at: usize, to: &mut [f64]) {
    match s {
        Storage::F64(v) => to.copy_from_slice(&v[at..at + to.len()]),
        _ => {
            for (i, v) in to.iter_mut().enumerate() {
                *v = s.get_f64(at + i);
            }
        }
    }
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
        Storage::C32(o) => o[dst]
            .iter_mut()
            .zip(x)
            .for_each(|(d, &v)| *d = num_complex::Complex::new(v as f32, 0.0)),
        Storage::C64(o) => o[dst]
            .iter_mut()
            .zip(x)
            .for_each(|(d, &v)| *d = num_complex::Complex::new(v, 0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Entries that exercise every branch of the 2×2: ties and swaps of
    /// the pivot, a zero multiplier, (near-)singular pivots, signed zeros,
    /// infinities and NaN.
    fn entry() -> impl Strategy<Value = f64> {
        prop_oneof![
            -4.0f64..4.0,
            Just(0.0),
            Just(-0.0),
            Just(1.0),
            Just(-1.0),
            Just(1e-300),
            Just(f64::INFINITY),
            Just(f64::NAN),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The straight-line 2×2 leaves `lu` and `x` with the loop's bits
        /// and fails at the loop's column, for `f64` and `f32` tolerances.
        #[test]
        fn the_two_by_two_is_the_loop_written_out(
            m in prop::array::uniform4(entry()),
            rhs in prop::array::uniform2(entry()),
            f32_eps in any::<bool>(),
        ) {
            let eps = if f32_eps { eps(DType::F32) } else { eps(DType::F64) };
            let (mut lu, mut x) = (m, rhs);
            let (mut lu2, mut x2) = (m, rhs);
            let want = lu_steps(2, 1, &mut lu, &mut x, eps);
            let got = two_by_one(&mut lu2, &mut x2, eps);
            prop_assert_eq!(got, want);
            let bits = |v: &[f64]| v.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&lu2), bits(&lu), "lu of {:?}", m);
            prop_assert_eq!(bits(&x2), bits(&x), "x of {:?}, {:?}", m, rhs);
        }
    }

    #[test]
    fn the_two_by_two_reports_the_singular_column() {
        let mut x = [1.0, 1.0];
        assert_eq!(two_by_one(&mut [0.0, 1.0, 0.0, 2.0], &mut x, 1e-16), Err(0));
        assert_eq!(two_by_one(&mut [1.0, 2.0, 2.0, 4.0], &mut x, 1e-16), Err(1));
        let mut x = [3.0, 5.0];
        assert_eq!(two_by_one(&mut [2.0, 1.0, 1.0, 3.0], &mut x, 1e-16), Ok(()));
        assert!((x[0] - 0.8).abs() < 1e-15 && (x[1] - 1.4).abs() < 1e-15);
    }
}
