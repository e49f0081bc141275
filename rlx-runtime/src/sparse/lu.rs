//! [`SparseLu`]: sparse LU through faer's low-level API, with everything a
//! refactorisation of one pattern needs kept across calls: the symbolic
//! factorisation (fill-reducing column order, elimination structure), the
//! numeric factor's storage and the scratch memory, sized once from the
//! symbolic's requirements (a Newton iteration refactors one pattern with
//! new values).
//!
//! Invariants: `factored` is true only after a `factor` that returned `Ok`,
//! and then `numeric` holds the factors of that matrix, which is finite
//! and has no zero pivot; every error is reported in the user's numbering
//! (faer's column order and row pivoting undone).

use std::sync::{Arc, Mutex};

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::sparse::linalg::lu::{
    factorize_symbolic_lu, LuRef, LuSymbolicParams, NumericLu, SymbolicLu,
};
use faer::sparse::linalg::LuError;
use faer::{Conj, MatMut, Par};
use rlx_core::sparsity::Pattern;
use rlx_core::{Error, Result, Shape};

use super::pivots::zero_pivot_column;
use super::SparseMatrix;

const OP: &str = "sparse_lu";

/// A sparse LU factorisation that reuses its symbolic part, its numeric
/// storage and its scratch memory across refactorisations.
///
/// A warm [`factor`](SparseLu::factor) and [`solve_in_place`](SparseLu::solve_in_place)
/// allocate nothing when faer chooses its simplicial factorisation (very
/// sparse factors: chains, small or narrow grids); faer 0.24's supernodal
/// factorisation (chosen for factors with dense blocks, e.g. 2-D grids of
/// ~10⁴ unknowns) allocates its per-supernode update blocks inside faer on
/// every call and frees them before returning (memory stays flat).
///
/// ```
/// use rlx::sparse::{Pattern, SparseLu, SparseMatrix};
/// // Tridiagonal [[4, 1, 0], [1, 4, 1], [0, 1, 4]].
/// let p = Pattern::from_entries(3, 3, &[(0, 0), (1, 0), (0, 1), (1, 1), (2, 1), (1, 2), (2, 2)])?;
/// let mut lu = SparseLu::new(&p)?; // symbolic, once
/// for scale in [1.0, 2.0] {
///     let a = SparseMatrix::new(p.clone(), vec![4.0, 1.0, 1.0, 4.0, 1.0, 1.0, 4.0].iter().map(|v| v * scale).collect())?;
///     lu.factor(&a)?; // numeric only, into the kept storage
///     let mut x = vec![5.0 * scale, 6.0 * scale, 5.0 * scale];
///     lu.solve_in_place(&mut x)?;
///     assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-12));
/// }
/// # Ok::<(), rlx::Error>(())
/// ```
pub struct SparseLu {
    pattern: Arc<Pattern>,
    symbolic: SymbolicLu<usize>,
    numeric: NumericLu<usize, f64>,
    /// Scratch for the numeric factorisation and both solves (a lock so
    /// that solves take `&self`; uncontended, it neither waits nor allocates).
    scratch: Mutex<MemBuffer>,
    /// The zero-pivot probe's right-hand side (see [`SparseLu::factor`]).
    probe: Vec<f64>,
    factored: bool,
}

impl std::fmt::Debug for SparseLu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseLu")
            .field("nrows", &self.pattern.nrows())
            .field("nnz", &self.pattern.nnz())
            .field("factored", &self.factored)
            .finish()
    }
}

impl SparseLu {
    /// The symbolic factorisation of `pattern`, which must be square, and
    /// the storage every later [`factor`](SparseLu::factor) and solve uses.
    pub fn new(pattern: &Pattern) -> Result<SparseLu> {
        let (m, n) = (pattern.nrows(), pattern.ncols());
        if m != n {
            return Err(Error::InvalidArgument {
                op: OP,
                message: format!("expected a square matrix, got {m} × {n}"),
            });
        }
        let zeros = SparseMatrix::zeros(pattern.clone());
        let symbolic =
            factorize_symbolic_lu(zeros.as_faer().symbolic(), LuSymbolicParams::default())
                .map_err(|e| {
                    Error::Unsupported(format!("`{OP}`: symbolic factorisation failed: {e:?}"))
                })?;
        let req = StackReq::any_of(&[
            symbolic.factorize_numeric_lu_scratch::<f64>(Par::Seq, Default::default()),
            symbolic.solve_in_place_scratch::<f64>(1, Par::Seq),
            symbolic.solve_transpose_in_place_scratch::<f64>(1, Par::Seq),
        ]);
        let scratch = MemBuffer::try_new(req).map_err(|_| {
            Error::Unsupported(format!(
                "`{OP}`: out of memory for the {n} × {n} factorisation's scratch ({req:?})"
            ))
        })?;
        Ok(SparseLu {
            pattern: zeros.pattern_arc().clone(),
            symbolic,
            numeric: NumericLu::new(),
            scratch: Mutex::new(scratch),
            probe: vec![0.0; n],
            factored: false,
        })
    }

    /// Factors `a`, whose pattern must be the one given to [`SparseLu::new`]
    /// (numeric factorisation only, into the kept storage).
    ///
    /// Errors, each naming the entry in the user's numbering:
    /// - a NaN or infinite entry: [`Error::InvalidArgument`] naming its row
    ///   and column;
    /// - a structurally or numerically singular matrix:
    ///   [`Error::SingularMatrix`], whose `column` is the first column (in
    ///   elimination order) that is a linear combination of the columns
    ///   eliminated before it, so that elimination found no nonzero pivot.
    ///
    /// A zero pivot is found by one solve with the new factors (finite
    /// input gives a non-finite solution exactly when a pivot is zero,
    /// whatever the right-hand side): faer keeps its factors private.
    ///
    /// After an error the factorisation holds no factors; a later `factor`
    /// of a good matrix works.
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
        self.factored = false;
        if let Some(k) = a.values().iter().position(|v| !v.is_finite()) {
            let col = self.pattern.col_ptr().partition_point(|&p| p <= k) - 1;
            let row = self.pattern.row_idx()[k];
            return Err(Error::InvalidArgument {
                op: OP,
                message: format!(
                    "entry (row {row}, column {col}) of the {n} × {n} matrix is {v}: a matrix with NaN or infinite entries has no LU factorisation",
                    n = self.pattern.nrows(),
                    v = a.values()[k]
                ),
            });
        }
        let symbolic = &self.symbolic;
        let scratch = self.scratch.get_mut().unwrap_or_else(|e| e.into_inner());
        let lu = symbolic
            .factorize_numeric_lu(
                &mut self.numeric,
                a.as_faer(),
                Par::Seq,
                MemStack::new(scratch),
                Default::default(),
            )
            .map_err(|e| match e {
                LuError::SymbolicSingular { index } => {
                    singular(&self.pattern, symbolic.col_perm().arrays().0[index])
                }
                LuError::Generic(e) => Error::Unsupported(format!("`{OP}`: {e:?}")),
            })?;
        self.probe.fill(1.0);
        let n = self.probe.len();
        lu.solve_in_place_with_conj(
            Conj::No,
            MatMut::from_column_major_slice_mut(&mut self.probe, n, 1),
            Par::Seq,
            MemStack::new(scratch),
        );
        if self.probe.iter().any(|v| !v.is_finite()) {
            // Cold: refactor where the pivots can be read.
            let fallback = self.probe.iter().position(|v| !v.is_finite()).unwrap_or(0);
            let column = zero_pivot_column(a, symbolic.col_perm()).unwrap_or(fallback);
            return Err(singular(&self.pattern, column));
        }
        self.factored = true;
        Ok(())
    }

    /// Solves `A x = b` in place (`b` becomes `x`) with the last factorisation.
    pub fn solve_in_place(&self, b: &mut [f64]) -> Result<()> {
        self.solve(b, false)
    }

    /// Solves `Aᵀ x = b` in place (`b` becomes `x`) with the factors of the
    /// last factorisation of `A` (no transposed factorisation is built).
    ///
    /// ```
    /// use rlx::sparse::{Pattern, SparseLu, SparseMatrix};
    /// // [[2, 1], [0, 3]]: Aᵀ x = [2, 4] gives x = [1, 1].
    /// let p = Pattern::from_entries(2, 2, &[(0, 0), (0, 1), (1, 1)])?;
    /// let mut lu = SparseLu::new(&p)?;
    /// lu.factor(&SparseMatrix::new(p, vec![2.0, 1.0, 3.0])?)?;
    /// let mut x = vec![2.0, 4.0];
    /// lu.solve_transpose_in_place(&mut x)?;
    /// assert!((x[0] - 1.0).abs() < 1e-15 && (x[1] - 1.0).abs() < 1e-15);
    /// # Ok::<(), rlx::Error>(())
    /// ```
    pub fn solve_transpose_in_place(&self, b: &mut [f64]) -> Result<()> {
        self.solve(b, true)
    }

    fn solve(&self, b: &mut [f64], transpose: bool) -> Result<()> {
        if !self.factored {
            return Err(Error::Unsupported(format!(
                "`{OP}`: solve called before a successful `factor`\n  = help: call `factor` with the matrix first"
            )));
        }
        let n = self.pattern.nrows();
        if b.len() != n {
            return Err(Error::CountMismatch {
                what: format!("elements of the right-hand side of a {n} × {n} sparse solve"),
                expected: n,
                got: b.len(),
            });
        }
        let finite_in = b.iter().all(|v| v.is_finite());
        let lu = LuRef::new_unchecked(&self.symbolic, &self.numeric);
        let rhs = MatMut::from_column_major_slice_mut(b, n, 1);
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let stack = MemStack::new(&mut scratch);
        if transpose {
            lu.solve_transpose_in_place_with_conj(Conj::No, rhs, Par::Seq, stack);
        } else {
            lu.solve_in_place_with_conj(Conj::No, rhs, Par::Seq, stack);
        }
        // The factors have no zero pivot; a non-finite value from finite
        // input is an overflow of a nearly singular matrix.
        if finite_in {
            if let Some(i) = b.iter().position(|v| !v.is_finite()) {
                return Err(singular(&self.pattern, i));
            }
        }
        Ok(())
    }
}

fn singular(pattern: &Pattern, column: usize) -> Error {
    Error::SingularMatrix {
        op: OP,
        shape: Shape::new([pattern.nrows(), pattern.ncols()]),
        column,
    }
}
