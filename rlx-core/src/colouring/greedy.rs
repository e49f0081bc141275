//! Partial distance-2 colouring of the columns (or rows) of a pattern:
//! greedy over the bipartite graph rows–columns, best of a few orders.

use super::{count, first_free, vertex_order, Colouring, Order, ORDERS};
use crate::sparsity::Pattern;

/// Column colouring of `p` for forward mode: columns of one colour share no
/// row. Sources index the compressed product laid out `[count, p.nrows()]`.
///
/// ```
/// use rlx::core::{colouring, sparsity::Pattern};
/// // An arrow: a dense first row and column plus the diagonal needs all
/// // columns apart (row 0 touches them all).
/// let mut e: Vec<(usize, usize)> = (0..4).flat_map(|i| [(0, i), (i, 0), (i, i)]).collect();
/// e.sort();
/// let p = Pattern::from_entries(4, 4, &e).unwrap();
/// assert_eq!(colouring::columns(&p).count(), 4);
/// ```
pub fn columns(p: &Pattern) -> Colouring {
    let t = p.transpose();
    let colours = best(p, &t);
    let count = count(&colours);
    let m = p.nrows();
    let sources = p
        .entries()
        .map(|(r, c)| colours[c] as usize * m + r)
        .collect();
    Colouring {
        colours,
        count,
        sources,
    }
}

/// Row colouring of `p` for reverse mode: rows of one colour share no
/// column. Sources index the compressed product laid out `[count, p.ncols()]`.
///
/// ```
/// use rlx::core::{colouring, sparsity::Pattern};
/// // One dense row: forward mode needs a colour per column, reverse mode
/// // needs two passes (the dense row, then all the diagonal rows together).
/// let mut e: Vec<(usize, usize)> = (0..6).map(|j| (0, j)).collect();
/// e.extend((1..6).map(|i| (i, i)));
/// let p = Pattern::from_entries(6, 6, &e).unwrap();
/// assert_eq!(colouring::columns(&p).count(), 6);
/// assert_eq!(colouring::rows(&p).count(), 2);
/// ```
pub fn rows(p: &Pattern) -> Colouring {
    let t = p.transpose();
    let colours = best(&t, p);
    let count = count(&colours);
    let n = p.ncols();
    let sources = p
        .entries()
        .map(|(r, c)| colours[r] as usize * n + c)
        .collect();
    Colouring {
        colours,
        count,
        sources,
    }
}

/// The colouring of the columns of `p` (with `t` its transpose) with the
/// fewest colours over [`ORDERS`].
fn best(p: &Pattern, t: &Pattern) -> Vec<u32> {
    let n = p.ncols();
    // A row touching every column forces one colour per column.
    if t.max_col_nnz() == n {
        return (0..n as u32).collect();
    }
    let lower = t.max_col_nnz();
    let mut best: Option<Vec<u32>> = None;
    for order in ORDERS {
        let c = colour(p, t, order);
        let k = count(&c);
        if best.as_ref().is_none_or(|b| k < count(b)) {
            best = Some(c);
        }
        if k <= lower {
            break;
        }
    }
    best.unwrap_or_default()
}

/// Greedy partial distance-2 colouring of the columns of `p` in `order`.
fn colour(p: &Pattern, t: &Pattern, order: Order) -> Vec<u32> {
    let n = p.ncols();
    let neighbours = |j: usize| -> Box<dyn Iterator<Item = usize> + '_> {
        Box::new(
            p.col(j)
                .iter()
                .flat_map(move |&r| t.col(r).iter().copied())
                .filter(move |&k| k != j),
        )
    };
    let mut colours = vec![u32::MAX; n];
    let mut forbidden: Vec<usize> = Vec::new();
    for j in vertex_order(n, order, neighbours) {
        for &r in p.col(j) {
            for &k in t.col(r) {
                let c = colours[k];
                if c != u32::MAX {
                    forbidden[c as usize] = j;
                }
            }
        }
        colours[j] = first_free(&mut forbidden, j);
    }
    colours
}
