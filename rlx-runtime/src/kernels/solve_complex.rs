//! Dense complex linear solve `A X = B` per batch by LU factorisation with
//! partial pivoting, computed in `Complex<f64>` for `c32` and `c64`.
//!
//! The pivot of a column is the remaining candidate of largest modulus
//! `|z|` (the first on a tie), and the singularity test is the real
//! kernel's: singular when that modulus is `<= n · ε · max|A|` (ε of the
//! operand's real part dtype). NaN entries propagate.

use num_complex::Complex;
use rlx_core::{Error, Result, Shape};

use crate::storage::Storage;

type C = Complex<f64>;

/// The dimensions of a batched complex solve: `batches` systems of `n x n`
/// with `k` right-hand sides each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    pub(crate) batches: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

/// Solves every batch of `a x = b` (complex storages of one dtype, checked
/// by the caller) into `out`, with `scratch` grown once to `n·n + n·k`
/// elements and reused. `a_shape` names the matrix in the singular error.
pub(crate) fn solve_complex(
    a: &Storage,
    b: &Storage,
    out: &mut Storage,
    Dims { batches, n, k }: Dims,
    eps: f64,
    a_shape: &Shape,
    scratch: &mut Vec<C>,
) -> Result<()> {
    let need = n * n + n * k;
    if scratch.len() < need {
        scratch.resize(need, C::new(0.0, 0.0));
    }
    let (lu, x) = scratch[..need].split_at_mut(n * n);
    for bt in 0..batches {
        load(a, bt * n * n, lu)?;
        load(b, bt * n * k, x)?;
        lu_steps(n, k, lu, x, eps).map_err(|column| Error::SingularMatrix {
            op: "solve",
            shape: a_shape.clone(),
            column,
        })?;
        store(out, bt * n * k, x)?;
    }
    Ok(())
}

fn not_complex(s: &Storage) -> Error {
    Error::UnsupportedDType {
        op: "solve",
        dtype: s.dtype(),
        expected: "complex operands of one dtype (c32, c64)",
    }
}

/// Copies `to.len()` elements of `s` from `at`, widened to `Complex<f64>`.
fn load(s: &Storage, at: usize, to: &mut [C]) -> Result<()> {
    let end = at + to.len();
    match s {
        Storage::C64(v) => to.copy_from_slice(&v[at..end]),
        Storage::C32(v) => {
            for (d, z) in to.iter_mut().zip(&v[at..end]) {
                *d = C::new(z.re as f64, z.im as f64);
            }
        }
        _ => return Err(not_complex(s)),
    }
    Ok(())
}

fn store(out: &mut Storage, at: usize, x: &[C]) -> Result<()> {
    match out {
        Storage::C64(o) => o[at..at + x.len()].copy_from_slice(x),
        Storage::C32(o) => {
            for (d, z) in o[at..at + x.len()].iter_mut().zip(x) {
                *d = Complex::new(z.re as f32, z.im as f32);
            }
        }
        _ => return Err(not_complex(out)),
    }
    Ok(())
}

/// Gaussian elimination with partial pivoting (by modulus) on `[lu | x]`,
/// then back substitution; `x` ends holding the solution. `Err(column)`
/// if singular.
fn lu_steps(n: usize, k: usize, lu: &mut [C], x: &mut [C], eps: f64) -> Result<(), usize> {
    let max = lu.iter().fold(0.0f64, |m, v| m.max(v.norm()));
    let tol = n as f64 * eps * max;
    for c in 0..n {
        let (mut p, mut pmod) = (c, lu[c * n + c].norm());
        for r in c + 1..n {
            let m = lu[r * n + c].norm();
            if m > pmod {
                (p, pmod) = (r, m);
            }
        }
        // A NaN modulus compares false: not singular, it propagates.
        if pmod <= tol {
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
        let piv = lu[c * n + c];
        for r in c + 1..n {
            let f = lu[r * n + c] / piv;
            if f == C::new(0.0, 0.0) {
                continue;
            }
            for j in c..n {
                let u = lu[c * n + j];
                lu[r * n + j] -= f * u;
            }
            for j in 0..k {
                let u = x[c * k + j];
                x[r * k + j] -= f * u;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_complex_two_by_two_that_needs_a_pivot() {
        // [[0, i], [2, 1]] x = [i, 3]: x = [1, 1]; column 0 pivots on row 1.
        let i = C::new(0.0, 1.0);
        let one = C::new(1.0, 0.0);
        let a = Storage::C64(vec![C::new(0.0, 0.0), i, C::new(2.0, 0.0), one]);
        let b = Storage::C64(vec![i, C::new(3.0, 0.0)]);
        let mut out = Storage::C64(vec![C::new(0.0, 0.0); 2]);
        let dims = Dims {
            batches: 1,
            n: 2,
            k: 1,
        };
        let shape = Shape::from([2, 2]);
        solve_complex(
            &a,
            &b,
            &mut out,
            dims,
            f64::EPSILON,
            &shape,
            &mut Vec::new(),
        )
        .unwrap();
        let Storage::C64(x) = out else { unreachable!() };
        assert!(
            (x[0] - one).norm() < 1e-15 && (x[1] - one).norm() < 1e-15,
            "{x:?}"
        );
    }

    #[test]
    fn a_rank_one_complex_matrix_is_singular_in_its_second_column() {
        let (a0, a1) = (C::new(1.0, 2.0), C::new(3.0, -1.0));
        let s = C::new(0.5, 0.5);
        let a = Storage::C64(vec![a0, a1, s * a0, s * a1]);
        let b = Storage::C64(vec![C::new(1.0, 0.0); 2]);
        let mut out = Storage::C64(vec![C::new(0.0, 0.0); 2]);
        let dims = Dims {
            batches: 1,
            n: 2,
            k: 1,
        };
        let shape = Shape::from([2, 2]);
        let e = solve_complex(
            &a,
            &b,
            &mut out,
            dims,
            f64::EPSILON,
            &shape,
            &mut Vec::new(),
        );
        assert!(
            matches!(e, Err(Error::SingularMatrix { column: 1, .. })),
            "{e:?}"
        );
    }
}
