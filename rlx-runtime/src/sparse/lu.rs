//! [`SparseLu`]: sparse LU through faer, with the symbolic factorisation
//! (fill-reducing ordering, elimination structure) computed once per
//! pattern and reused for every numeric factorisation (a Newton iteration
//! refactors the same pattern with new values).

use std::sync::Arc;

use faer::linalg::solvers::Solve;
use faer::sparse::linalg::solvers::{Lu, SymbolicLu};
use faer::sparse::linalg::LuError;
use faer::MatMut;
use rlx_core::sparsity::Pattern;
use rlx_core::{Error, Result, Shape};

use super::SparseMatrix;

const OP: &str = "sparse_lu";

/// A sparse LU factorisation whose symbolic part is reused.
///
/// ```
/// use rlx_runtime::sparse::{Pattern, SparseLu, SparseMatrix};
/// // Tridiagonal [[4, 1, 0], [1, 4, 1], [0, 1, 4]].
/// let p = Pattern::from_entries(3, 3, &[(0, 0), (1, 0), (0, 1), (1, 1), (2, 1), (1, 2), (2, 2)])?;
/// let mut lu = SparseLu::new(&p)?; // symbolic, once
/// for scale in [1.0, 2.0] {
///     let a = SparseMatrix::new(p.clone(), vec![4.0, 1.0, 1.0, 4.0, 1.0, 1.0, 4.0].iter().map(|v| v * scale).collect())?;
///     lu.factor(&a)?; // numeric only
///     let mut x = vec![5.0 * scale, 6.0 * scale, 5.0 * scale];
///     lu.solve_in_place(&mut x)?;
///     assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-12));
/// }
/// # Ok::<(), rlx_runtime::Error>(())
/// ```
pub struct SparseLu {
    pattern: Arc<Pattern>,
    symbolic: SymbolicLu<usize>,
    numeric: Option<Lu<usize, f64>>,
    finite: bool,
}

impl std::fmt::Debug for SparseLu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseLu")
            .field("nrows", &self.pattern.nrows())
            .field("nnz", &self.pattern.nnz())
            .field("factored", &self.numeric.is_some())
            .finish()
    }
}

impl SparseLu {
    /// The symbolic factorisation of `pattern`, which must be square.
    pub fn new(pattern: &Pattern) -> Result<SparseLu> {
        let (m, n) = (pattern.nrows(), pattern.ncols());
        if m != n {
            return Err(Error::InvalidArgument {
                op: OP,
                message: format!("expected a square matrix, got {m} × {n}"),
            });
        }
        let zeros = SparseMatrix::zeros(pattern.clone());
        let symbolic = SymbolicLu::try_new(zeros.as_faer().symbolic()).map_err(|e| {
            Error::Unsupported(format!("`{OP}`: symbolic factorisation failed: {e:?}"))
        })?;
        Ok(SparseLu {
            pattern: zeros.pattern_arc().clone(),
            symbolic,
            numeric: None,
            finite: true,
        })
    }

    /// Factors `a`, whose pattern must be the one given to [`SparseLu::new`]
    /// (numeric factorisation only). A structurally or numerically singular
    /// matrix is an [`Error::SingularMatrix`].
    pub fn factor(&mut self, a: &SparseMatrix) -> Result<()> {
        if !Arc::ptr_eq(a.pattern_arc(), &self.pattern) && *a.pattern() != *self.pattern {
            return Err(Error::InvalidArgument {
                op: OP,
                message: format!(
                    "the matrix's pattern ({} × {}, {} nonzeros) is not the one this factorisation was built for ({} × {}, {} nonzeros)\n  = help: build a new `SparseLu` for a new pattern",
                    a.nrows(), a.ncols(), a.nnz(), self.pattern.nrows(), self.pattern.ncols(), self.pattern.nnz()
                ),
            });
        }
        self.numeric = None;
        let lu =
            Lu::try_new_with_symbolic(self.symbolic.clone(), a.as_faer()).map_err(|e| match e {
                LuError::SymbolicSingular { index } => self.singular(index),
                LuError::Generic(e) => Error::Unsupported(format!("`{OP}`: {e:?}")),
            })?;
        self.finite = a.values().iter().all(|v| v.is_finite());
        self.numeric = Some(lu);
        Ok(())
    }

    /// Solves `A x = b` in place (`b` becomes `x`) with the last factorisation.
    pub fn solve_in_place(&self, b: &mut [f64]) -> Result<()> {
        let Some(lu) = &self.numeric else {
            return Err(Error::Unsupported(format!(
                "`{OP}`: solve called before `factor`\n  = help: call `factor` with the matrix first"
            )));
        };
        let n = self.pattern.nrows();
        if b.len() != n {
            return Err(Error::CountMismatch {
                what: format!("elements of the right-hand side of a {n} × {n} sparse solve"),
                expected: n,
                got: b.len(),
            });
        }
        let finite_in = self.finite && b.iter().all(|v| v.is_finite());
        lu.solve_in_place(MatMut::from_column_major_slice_mut(b, n, 1));
        // A zero pivot that faer's pivoting let through shows as
        // non-finite values from finite inputs.
        if finite_in {
            if let Some(i) = b.iter().position(|v| !v.is_finite()) {
                return Err(self.singular(i));
            }
        }
        Ok(())
    }

    fn singular(&self, column: usize) -> Error {
        Error::SingularMatrix {
            op: OP,
            shape: Shape::new([self.pattern.nrows(), self.pattern.ncols()]),
            column,
        }
    }
}
