//! Dense linear solves `A X = B` by LU with partial pivoting.
//!
//! Each batch item is copied into `f64` scratch (`n·n` for `A`, `n·k` for
//! `B`), eliminated with row pivoting applied to both, and back-substituted
//! in place; no allocation. As in the reference kernel, a matrix is
//! singular when at some column the largest remaining pivot candidate is
//! `<= n · ε · max|A|` (ε of the operand dtype): [`Error::SingularMatrix`]
//! names that column. NaN entries are not "singular"; they propagate.

use rlx_core::{DType, Error, Result, Shape};

use super::exec::Env;
use super::plan::Val;
use super::reduce::write_f64;
use crate::storage::Storage;

/// A compiled solve.
#[derive(Clone, Debug)]
pub(crate) struct SolveStep {
    pub(crate) a: Val,
    pub(crate) b: Val,
    /// Shape of `A`, for error messages.
    pub(crate) a_shape: Shape,
    pub(crate) batches: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) dtype: DType,
}

/// Machine epsilon of the operand dtype.
fn eps(d: DType) -> f64 {
    match d {
        DType::F32 => f32::EPSILON as f64,
        DType::F16 => half::f16::EPSILON.to_f64(),
        DType::BF16 => half::bf16::EPSILON.to_f64(),
        DType::F64 | DType::I64 | DType::Bool => f64::EPSILON,
    }
}

/// `f64` scratch for one batch item.
#[derive(Debug, Default)]
pub(crate) struct SolveScratch {
    pub(crate) lu: Vec<f64>,
    pub(crate) x: Vec<f64>,
}

fn read(src: &Storage, off: usize, dst: &mut [f64]) {
    for (i, d) in dst.iter_mut().enumerate() {
        *d = src.get_f64(off + i);
    }
}

impl SolveStep {
    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage, s: &mut SolveScratch) -> Result<()> {
        let (n, k) = (self.n, self.k);
        let (a, b) = (env.get(self.a), env.get(self.b));
        let lu = &mut s.lu[..n * n];
        let x = &mut s.x[..n * k];
        for bi in 0..self.batches {
            read(a, bi * n * n, lu);
            read(b, bi * n * k, x);
            let max = lu.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let tol = n as f64 * eps(self.dtype) * max;
            for col in 0..n {
                // Pivot: the largest magnitude in this column at or below the diagonal.
                let mut p = col;
                let mut best = lu[col * n + col].abs();
                for r in col + 1..n {
                    let v = lu[r * n + col].abs();
                    if v > best {
                        best = v;
                        p = r;
                    }
                }
                if best <= tol {
                    return Err(Error::SingularMatrix {
                        op: "solve",
                        shape: self.a_shape.clone(),
                        column: col,
                    });
                }
                if p != col {
                    for j in 0..n {
                        lu.swap(p * n + j, col * n + j);
                    }
                    for j in 0..k {
                        x.swap(p * k + j, col * k + j);
                    }
                }
                let d = lu[col * n + col];
                for r in col + 1..n {
                    let f = lu[r * n + col] / d;
                    if f == 0.0 {
                        continue;
                    }
                    for j in col..n {
                        lu[r * n + j] -= f * lu[col * n + j];
                    }
                    for j in 0..k {
                        x[r * k + j] -= f * x[col * k + j];
                    }
                }
            }
            // Back substitution.
            for r in (0..n).rev() {
                for j in 0..k {
                    let mut v = x[r * k + j];
                    for c in r + 1..n {
                        v -= lu[r * n + c] * x[c * k + j];
                    }
                    x[r * k + j] = v / lu[r * n + r];
                }
            }
            write_f64(x, out, bi * n * k);
        }
        Ok(())
    }
}
