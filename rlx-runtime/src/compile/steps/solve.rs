//! Dense linear solves `A X = B` by LU with partial pivoting.
//!
//! Each batch item is copied into `f64` scratch (`n·n` for `A`, `n·k` for
//! `B`) and solved in place by the reference kernel's elimination
//! (`kernels::solve::factor_and_solve`); no allocation. As in the reference kernel, a matrix is
//! singular when at some column the largest remaining pivot candidate is
//! `<= n · ε · max|A|` (ε of the operand dtype): [`Error::SingularMatrix`]
//! names that column. NaN entries are not "singular"; they propagate.

use rlx_core::{DType, Error, Result, Shape};

use crate::compile::base::env::{Env, Val};
use crate::compile::steps::reduce::write_f64;
use crate::kernels::solve::{eps, factor_and_solve};
use crate::kernels::solve_complex::{solve_complex, Dims};
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

/// `f64` scratch for one batch item.
#[derive(Debug, Default)]
pub(crate) struct SolveScratch {
    pub(crate) lu: Vec<f64>,
    pub(crate) x: Vec<f64>,
    /// `[lu | x]` of a complex solve, grown on its first run.
    pub(crate) z: Vec<num_complex::Complex<f64>>,
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
        if self.dtype.is_complex() {
            let dims = Dims {
                batches: self.batches,
                n,
                k,
            };
            let eps = eps(self.dtype);
            return solve_complex(a, b, out, dims, eps, &self.a_shape, &mut s.z);
        }
        let lu = &mut s.lu[..n * n];
        let x = &mut s.x[..n * k];
        for bi in 0..self.batches {
            read(a, bi * n * n, lu);
            read(b, bi * n * k, x);
            factor_and_solve(n, k, lu, x, eps(self.dtype)).map_err(|column| {
                Error::SingularMatrix {
                    op: "solve",
                    shape: self.a_shape.clone(),
                    column,
                }
            })?;
            write_f64(x, out, bi * n * k);
        }
        Ok(())
    }
}
