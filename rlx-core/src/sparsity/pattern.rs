//! [`Pattern`]: the symbolic part of a sparse matrix in compressed sparse
//! column (CSC) form, without values.
//!
//! Invariants (checked by [`Pattern::new`]): `col_ptr` has `ncols + 1`
//! non-decreasing entries starting at 0 and ending at `nnz`; within each
//! column the row indices are strictly increasing and below `nrows`.

use crate::{Error, Result};

/// Where the nonzeros of an `nrows × ncols` matrix may be, column by column.
///
/// For a Jacobian of `f: x ↦ y`, rows are the elements of `y` and columns
/// the elements of `x` (each tensor flattened row-major; several inputs are
/// concatenated in parameter order): entry `(i, j)` is `∂y_i/∂x_j`.
///
/// ```
/// use rlx::core::sparsity::Pattern;
/// // [[a, 0],
/// //  [b, c]]
/// let p = Pattern::from_entries(2, 2, &[(0, 0), (1, 0), (1, 1)]).unwrap();
/// assert_eq!(p.nnz(), 3);
/// assert_eq!(p.col(0), &[0, 1]);
/// assert_eq!(p.position(1, 1), Some(2));
/// assert_eq!(p.position(0, 1), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    nrows: usize,
    ncols: usize,
    col_ptr: Vec<usize>,
    row_idx: Vec<usize>,
}

impl Pattern {
    /// A pattern from its CSC arrays, checked against the invariants in the
    /// module docs.
    pub fn new(
        nrows: usize,
        ncols: usize,
        col_ptr: Vec<usize>,
        row_idx: Vec<usize>,
    ) -> Result<Pattern> {
        let bad = |message: String| {
            Err(Error::InvalidArgument {
                op: "pattern",
                message,
            })
        };
        if col_ptr.len() != ncols + 1 || col_ptr[0] != 0 || col_ptr[ncols] != row_idx.len() {
            return bad(format!(
                "expected {} column pointers from 0 to the number of row indices ({}), got {:?}",
                ncols + 1,
                row_idx.len(),
                ends(&col_ptr)
            ));
        }
        for j in 0..ncols {
            if col_ptr[j] > col_ptr[j + 1] {
                return bad(format!("column pointers decrease at column {j}"));
            }
            let rows = &row_idx[col_ptr[j]..col_ptr[j + 1]];
            if rows.windows(2).any(|w| w[0] >= w[1]) || rows.last().is_some_and(|&r| r >= nrows) {
                return bad(format!(
                    "the row indices of column {j} must be strictly increasing and below {nrows}, got {rows:?}"
                ));
            }
        }
        Ok(Pattern {
            nrows,
            ncols,
            col_ptr,
            row_idx,
        })
    }

    /// A pattern with nonzeros at the `(row, col)` positions `entries`
    /// (any order, repeats merged).
    pub fn from_entries(nrows: usize, ncols: usize, entries: &[(usize, usize)]) -> Result<Pattern> {
        if let Some(&(r, c)) = entries.iter().find(|&&(r, c)| r >= nrows || c >= ncols) {
            return Err(Error::InvalidArgument {
                op: "pattern",
                message: format!("entry ({r}, {c}) is outside a {nrows} × {ncols} matrix"),
            });
        }
        let mut e: Vec<(usize, usize)> = entries.iter().map(|&(r, c)| (c, r)).collect();
        e.sort_unstable();
        e.dedup();
        let mut col_ptr = vec![0; ncols + 1];
        for &(c, _) in &e {
            col_ptr[c + 1] += 1;
        }
        for j in 0..ncols {
            col_ptr[j + 1] += col_ptr[j];
        }
        let row_idx = e.into_iter().map(|(_, r)| r).collect();
        Ok(Pattern {
            nrows,
            ncols,
            col_ptr,
            row_idx,
        })
    }

    /// The pattern whose row `i` holds the columns `rows[i]` (each sorted
    /// and without repeats, all below `ncols`), given as one flat list
    /// `cols` split by `row_ptr` (compressed sparse row form).
    pub(crate) fn from_csr(nrows: usize, ncols: usize, row_ptr: &[usize], cols: &[u32]) -> Pattern {
        let t = Pattern {
            nrows: ncols,
            ncols: nrows,
            col_ptr: row_ptr.to_vec(),
            row_idx: cols.iter().map(|&c| c as usize).collect(),
        };
        t.transpose()
    }

    /// The fully dense `nrows × ncols` pattern.
    pub fn dense(nrows: usize, ncols: usize) -> Pattern {
        Pattern {
            nrows,
            ncols,
            col_ptr: (0..=ncols).map(|j| j * nrows).collect(),
            row_idx: (0..ncols).flat_map(|_| 0..nrows).collect(),
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Number of structural nonzeros.
    pub fn nnz(&self) -> usize {
        self.row_idx.len()
    }

    /// Column pointers: column `j` holds entries `col_ptr[j]..col_ptr[j + 1]`.
    pub fn col_ptr(&self) -> &[usize] {
        &self.col_ptr
    }

    /// Row index of every entry, column by column.
    pub fn row_idx(&self) -> &[usize] {
        &self.row_idx
    }

    /// The rows of column `j`'s nonzeros, increasing.
    pub fn col(&self, j: usize) -> &[usize] {
        &self.row_idx[self.col_ptr[j]..self.col_ptr[j + 1]]
    }

    /// The position of entry `(row, col)` among the nonzeros (the index into
    /// a value array), if it is structurally nonzero.
    pub fn position(&self, row: usize, col: usize) -> Option<usize> {
        if col >= self.ncols {
            return None;
        }
        let start = self.col_ptr[col];
        self.col(col).binary_search(&row).ok().map(|k| start + k)
    }

    /// Every entry as `(row, col)`, in storage order.
    pub fn entries(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.ncols).flat_map(move |j| self.col(j).iter().map(move |&r| (r, j)))
    }

    /// The transposed pattern (equivalently: this one in compressed sparse row form).
    pub fn transpose(&self) -> Pattern {
        let mut col_ptr = vec![0; self.nrows + 1];
        for &r in &self.row_idx {
            col_ptr[r + 1] += 1;
        }
        for i in 0..self.nrows {
            col_ptr[i + 1] += col_ptr[i];
        }
        let mut next = col_ptr.clone();
        let mut row_idx = vec![0; self.nnz()];
        for j in 0..self.ncols {
            for &r in self.col(j) {
                row_idx[next[r]] = j;
                next[r] += 1;
            }
        }
        Pattern {
            nrows: self.ncols,
            ncols: self.nrows,
            col_ptr,
            row_idx,
        }
    }

    /// The largest number of nonzeros in one column.
    pub fn max_col_nnz(&self) -> usize {
        self.col_ptr
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// The largest number of nonzeros in one row.
    pub fn max_row_nnz(&self) -> usize {
        let mut count = vec![0usize; self.nrows];
        for &r in &self.row_idx {
            count[r] += 1;
        }
        count.into_iter().max().unwrap_or(0)
    }

    /// Whether the pattern is square and equal to its transpose.
    pub fn is_symmetric(&self) -> bool {
        self.nrows == self.ncols && *self == self.transpose()
    }

    /// Whether every nonzero of `other` (same size) is also in `self`.
    pub fn contains(&self, other: &Pattern) -> bool {
        self.nrows == other.nrows
            && self.ncols == other.ncols
            && other.entries().all(|(r, c)| self.position(r, c).is_some())
    }
}

/// The first and last few entries of a long list, for messages.
fn ends(v: &[usize]) -> String {
    if v.len() <= 8 {
        format!("{v:?}")
    } else {
        format!(
            "[{}, {}, .., {}] ({} entries)",
            v[0],
            v[1],
            v[v.len() - 1],
            v.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_and_positions() {
        let p = Pattern::from_entries(3, 2, &[(2, 1), (0, 0), (1, 1), (0, 0)]).unwrap();
        assert_eq!(p.col_ptr(), &[0, 1, 3]);
        assert_eq!(p.row_idx(), &[0, 1, 2]);
        let t = p.transpose();
        assert_eq!((t.nrows(), t.ncols()), (2, 3));
        assert_eq!(
            t.entries().collect::<Vec<_>>(),
            vec![(0, 0), (1, 1), (1, 2)]
        );
        assert_eq!(t.transpose(), p);
        assert_eq!((p.max_col_nnz(), p.max_row_nnz()), (2, 1));
        assert!(Pattern::dense(3, 2).contains(&p));
        assert!(!p.contains(&Pattern::dense(3, 2)));
    }

    #[test]
    fn bad_arrays_are_errors_that_say_what_was_expected() {
        let e = Pattern::new(2, 2, vec![0, 1], vec![0]).unwrap_err();
        assert!(e.to_string().contains("3 column pointers"), "{e}");
        let e = Pattern::new(2, 1, vec![0, 2], vec![1, 0]).unwrap_err();
        assert!(e.to_string().contains("strictly increasing"), "{e}");
        let e = Pattern::from_entries(2, 2, &[(2, 0)]).unwrap_err();
        assert!(e.to_string().contains("outside a 2 × 2"), "{e}");
    }
}
