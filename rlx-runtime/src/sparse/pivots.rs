//! The column of a zero pivot, for [`SparseLu`](super::SparseLu)'s error:
//! faer keeps its chosen (simplicial or supernodal) factors private, so a
//! matrix found singular is factored again by faer's public simplicial
//! routine, whose `U` can be read. Cold: runs only on an error, and
//! allocates.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::perm::PermRef;
use faer::sparse::linalg::lu::simplicial::{
    factorize_simplicial_numeric_lu, factorize_simplicial_numeric_lu_scratch, SimplicialLu,
};
use faer::sparse::linalg::LuError;

use super::SparseMatrix;

/// The user's column of the first zero (or non-finite) pivot of `a`
/// eliminated in the column order `col_perm`, or `None` if every pivot is
/// nonzero (or the refactorisation could not run). With partial pivoting
/// the step of the first zero pivot depends only on the column order (the
/// first column in the span of those before it), not on the row choices,
/// so it is the step at which any such elimination fails.
pub(super) fn zero_pivot_column(a: &SparseMatrix, col_perm: PermRef<'_, usize>) -> Option<usize> {
    let n = a.nrows();
    let order = col_perm.arrays().0;
    let mut scratch =
        MemBuffer::try_new(factorize_simplicial_numeric_lu_scratch::<usize, f64>(n, n)).ok()?;
    let (mut row_perm, mut row_perm_inv) = (vec![0usize; n], vec![0usize; n]);
    let mut lu = SimplicialLu::<usize, f64>::new();
    match factorize_simplicial_numeric_lu(
        &mut row_perm,
        &mut row_perm_inv,
        &mut lu,
        a.as_faer(),
        col_perm,
        MemStack::new(&mut scratch),
    ) {
        Ok(()) => {}
        Err(LuError::SymbolicSingular { index }) => return Some(order[index]),
        Err(LuError::Generic(_)) => return None,
    }
    // `U`'s column j (elimination step j) holds its pivot at row j.
    let u = lu.u_factor_unsorted();
    (0..n).find_map(|j| {
        let pivot = u
            .row_idx_of_col(j)
            .zip(u.val_of_col(j))
            .find(|&(i, _)| i == j)
            .map_or(0.0, |(_, v)| *v);
        (pivot == 0.0 || !pivot.is_finite()).then_some(order[j])
    })
}
