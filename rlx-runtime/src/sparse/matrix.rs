//! [`SparseMatrix`]: a compressed-sparse-column matrix of `f64` values over
//! a shared, immutable [`Pattern`], and its conversions to and from faer.

use std::sync::Arc;

use faer::sparse::{SparseColMat, SparseColMatRef, SymbolicSparseColMat, SymbolicSparseColMatRef};
use rlx_core::sparsity::Pattern;
use rlx_core::{Error, Result};

use crate::tensor::Tensor;

/// A sparse matrix in compressed sparse column (CSC) form: a [`Pattern`]
/// (shared, computed once per signature by the sparse companions) and one
/// value per structural nonzero, column by column.
///
/// Orientation, as returned by `sparse_jacobian_f`: `[out, in]`, that is
/// row `i` is element `i` of the (first) output and column `j` element `j`
/// of the differentiated inputs, every tensor flattened row-major and
/// several inputs concatenated in parameter order, so `J[i, j] = ∂y_i/∂x_j`.
/// `sparse_hessian_f` returns the symmetric `[in, in]` Hessian, both
/// triangles stored.
///
/// ```
/// use rlx::sparse::{Pattern, SparseMatrix};
/// // [[2, 0],
/// //  [1, 3]]
/// let p = Pattern::from_entries(2, 2, &[(0, 0), (1, 0), (1, 1)])?;
/// let a = SparseMatrix::new(p, vec![2.0, 1.0, 3.0])?;
/// assert_eq!(a.get(1, 0), 1.0);
/// assert_eq!(a.get(0, 1), 0.0);
/// assert_eq!(a.mul_vec(&[1.0, 1.0])?, vec![2.0, 4.0]);
/// let x = a.solve(&[2.0, 4.0])?; // sparse LU through faer
/// assert!((x[0] - 1.0).abs() < 1e-14 && (x[1] - 1.0).abs() < 1e-14);
/// # Ok::<(), rlx::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SparseMatrix {
    pattern: Arc<Pattern>,
    values: Vec<f64>,
}

impl SparseMatrix {
    /// A matrix with `values` (one per nonzero of `pattern`, in its storage order).
    pub fn new(pattern: impl Into<Arc<Pattern>>, values: Vec<f64>) -> Result<SparseMatrix> {
        let pattern = pattern.into();
        if values.len() != pattern.nnz() {
            return Err(Error::CountMismatch {
                what: format!(
                    "values of a sparse {} × {} matrix (one per structural nonzero)",
                    pattern.nrows(),
                    pattern.ncols()
                ),
                expected: pattern.nnz(),
                got: values.len(),
            });
        }
        Ok(SparseMatrix { pattern, values })
    }

    /// A matrix with every structural nonzero set to 0.
    pub fn zeros(pattern: impl Into<Arc<Pattern>>) -> SparseMatrix {
        let pattern = pattern.into();
        let values = vec![0.0; pattern.nnz()];
        SparseMatrix { pattern, values }
    }

    /// The pattern.
    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// The shared pattern (cheap to clone).
    pub fn pattern_arc(&self) -> &Arc<Pattern> {
        &self.pattern
    }

    /// The values, one per structural nonzero, column by column.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The values, mutable (the pattern stays as it is).
    pub fn values_mut(&mut self) -> &mut [f64] {
        &mut self.values
    }

    /// The value vector itself, for the companions to swap a compiled
    /// program's output buffer with (its length must stay `nnz`).
    pub(crate) fn values_vec(&mut self) -> &mut Vec<f64> {
        &mut self.values
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.pattern.nrows()
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.pattern.ncols()
    }

    /// Number of structural nonzeros.
    pub fn nnz(&self) -> usize {
        self.pattern.nnz()
    }

    /// Entry `(row, col)` (0 where the pattern has no nonzero).
    pub fn get(&self, row: usize, col: usize) -> f64 {
        self.pattern
            .position(row, col)
            .map_or(0.0, |k| self.values[k])
    }

    /// `A · x`.
    pub fn mul_vec(&self, x: &[f64]) -> Result<Vec<f64>> {
        if x.len() != self.ncols() {
            return Err(Error::CountMismatch {
                what: format!(
                    "elements of the vector multiplied by a {} × {} sparse matrix",
                    self.nrows(),
                    self.ncols()
                ),
                expected: self.ncols(),
                got: x.len(),
            });
        }
        let mut y = vec![0.0; self.nrows()];
        for (k, (r, c)) in self.pattern.entries().enumerate() {
            y[r] += self.values[k] * x[c];
        }
        Ok(y)
    }

    /// The dense `[nrows, ncols]` tensor (for small matrices and checks).
    pub fn to_dense(&self) -> Tensor {
        let (m, n) = (self.nrows(), self.ncols());
        let mut d = vec![0.0; m * n];
        for (k, (r, c)) in self.pattern.entries().enumerate() {
            d[r * n + c] = self.values[k];
        }
        Tensor::from_slice(&d, [m, n])
    }

    /// A view as faer's sparse matrix (no copy).
    pub fn as_faer(&self) -> SparseColMatRef<'_, usize, f64> {
        let p = &*self.pattern;
        // `Pattern`'s invariants are faer's (sorted, in-range rows; monotone
        // column pointers), so the checked constructor cannot panic.
        let s = SymbolicSparseColMatRef::new_checked(
            p.nrows(),
            p.ncols(),
            p.col_ptr(),
            None,
            p.row_idx(),
        );
        SparseColMatRef::new(s, &self.values)
    }

    /// A copy as faer's owned sparse matrix.
    pub fn to_faer(&self) -> SparseColMat<usize, f64> {
        let p = &*self.pattern;
        let s = SymbolicSparseColMat::new_checked(
            p.nrows(),
            p.ncols(),
            p.col_ptr().to_vec(),
            None,
            p.row_idx().to_vec(),
        );
        SparseColMat::new(s, self.values.clone())
    }

    /// From any faer sparse matrix (unsorted rows and column lengths
    /// are normalised; repeated entries are added).
    pub fn from_faer(m: SparseColMatRef<'_, usize, f64>) -> Result<SparseMatrix> {
        let (nrows, ncols) = (m.nrows(), m.ncols());
        let mut entries = Vec::new();
        for j in 0..ncols {
            let rows = m.symbolic().row_idx_of_col_raw(j);
            let vals = m.val_of_col(j);
            for (r, &v) in rows.iter().zip(vals) {
                entries.push((j, *r, v));
            }
        }
        entries.sort_by_key(|&(c, r, _)| (c, r));
        let mut values: Vec<f64> = Vec::with_capacity(entries.len());
        let mut pos = Vec::with_capacity(entries.len());
        for (c, r, v) in entries {
            if pos.last() == Some(&(r, c)) {
                *values.last_mut().expect("a value per position") += v;
            } else {
                pos.push((r, c));
                values.push(v);
            }
        }
        let pattern = Pattern::from_entries(nrows, ncols, &pos)?;
        SparseMatrix::new(pattern, values)
    }

    /// Solves `A x = b` by sparse LU (faer); for repeated solves with one
    /// pattern use [`SparseLu`](super::SparseLu), which keeps the symbolic
    /// factorisation.
    pub fn solve(&self, b: &[f64]) -> Result<Vec<f64>> {
        let mut lu = super::SparseLu::new(&self.pattern)?;
        lu.factor(self)?;
        let mut x = b.to_vec();
        lu.solve_in_place(&mut x)?;
        Ok(x)
    }
}

impl From<&SparseMatrix> for SparseColMat<usize, f64> {
    fn from(m: &SparseMatrix) -> Self {
        m.to_faer()
    }
}

impl TryFrom<SparseColMatRef<'_, usize, f64>> for SparseMatrix {
    type Error = Error;
    fn try_from(m: SparseColMatRef<'_, usize, f64>) -> Result<Self> {
        SparseMatrix::from_faer(m)
    }
}

impl crate::function::Placeholder for SparseMatrix {
    fn placeholder() -> Self {
        SparseMatrix::zeros(Pattern::dense(0, 0))
    }
}
