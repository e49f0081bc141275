//! Star colouring of a symmetric pattern for Hessians, and the direct
//! decompression it allows.
//!
//! The greedy rule colours each vertex `v` with the smallest colour that
//! keeps the partial colouring a star colouring, checking every path on
//! four vertices through `v` (as an end or an inner vertex): with `v`
//! coloured `a`, a path `v - w - x - y` coloured `a b a b` or a path
//! `z - v - w - x` coloured `b a b a` is forbidden. Paths through
//! uncoloured vertices are checked when those are coloured, so the result
//! is a star colouring by construction.
//!
//! Decompression: in a star colouring, for each edge `(i, j)` one of `i`,
//! `j` is the only neighbour of the other with its colour; then
//! `H[i, j] = (H · S)[i, colour(j)]` if `i` has no other neighbour coloured
//! like `j`, else `(H · S)[j, colour(i)]`. The diagonal comes from
//! `(H · S)[i, colour(i)]`.

use super::{count, first_free, vertex_order, Colouring, ORDERS};
use crate::sparsity::Pattern;

/// A star colouring of the symmetric pattern `p` (the diagonal may be
/// present or not). Sources index the compressed product `H · S` laid out
/// `[count, n]` (product `c` is row `c`).
///
/// ```
/// use rlx::core::{colouring, sparsity::Pattern};
/// // Tridiagonal Hessian: star colouring needs 3 colours, like the
/// // column colouring; on an arrow (dense first row and column) it needs 2
/// // where a column colouring needs one per column.
/// let n = 8;
/// let mut e: Vec<(usize, usize)> = (0..n).flat_map(|i| [(0, i), (i, 0), (i, i)]).collect();
/// e.sort();
/// let p = Pattern::from_entries(n, n, &e).unwrap();
/// let c = colouring::star(&p);
/// assert_eq!(c.count(), 2);
/// assert!(colouring::is_star(&p, c.colours()));
/// ```
pub fn star(p: &Pattern) -> Colouring {
    let n = p.ncols();
    let mut best: Option<Vec<u32>> = None;
    for order in ORDERS {
        let c = colour(p, order);
        let k = count(&c);
        if best.as_ref().is_none_or(|b| k < count(b)) {
            best = Some(c);
        }
    }
    let colours = best.unwrap_or_default();
    let count = count(&colours);
    // Per vertex, how many of its neighbours have each colour (stamped).
    let mut seen = vec![(usize::MAX, 0u32); count];
    let mut sources = Vec::with_capacity(p.nnz());
    for j in 0..n {
        for &w in p.col(j) {
            if w != j {
                let s = &mut seen[colours[w] as usize];
                *s = if s.0 == j { (j, s.1 + 1) } else { (j, 1) };
            }
        }
        for &i in p.col(j) {
            // Entry (i, j) of column j; by symmetry `H[i, j] = H[j, i]` and
            // vertex j's neighbours are column j's rows.
            let cj = colours[j] as usize;
            let ci = colours[i] as usize;
            let unique_for_j = i == j || {
                let s = seen[ci];
                s.0 == j && s.1 == 1
            };
            // `(H S)[j, colour(i)] = H[j, i]` when i is j's only neighbour
            // coloured ci; else `(H S)[i, colour(j)]`.
            sources.push(if unique_for_j { ci * n + j } else { cj * n + i });
        }
    }
    Colouring {
        colours,
        count,
        sources,
    }
}

fn colour(p: &Pattern, order: super::Order) -> Vec<u32> {
    let n = p.ncols();
    const NONE: u32 = u32::MAX;
    let nb = |v: usize| p.col(v).iter().copied().filter(move |&w| w != v);
    let neighbours = |v: usize| -> Box<dyn Iterator<Item = usize> + '_> { Box::new(nb(v)) };
    let mut colours = vec![NONE; n];
    let mut forbidden: Vec<usize> = Vec::new();
    // Per colour, how many coloured neighbours of v have it (stamped by v).
    let mut twice: Vec<(usize, u32)> = Vec::new();
    for v in vertex_order(n, order, neighbours) {
        let forbid = |c: u32, forbidden: &mut Vec<usize>| {
            if c != NONE {
                if forbidden.len() <= c as usize {
                    forbidden.resize(c as usize + 1, usize::MAX);
                }
                forbidden[c as usize] = v;
            }
        };
        for w in nb(v) {
            let cw = colours[w];
            if cw == NONE {
                continue;
            }
            forbid(cw, &mut forbidden);
            if twice.len() <= cw as usize {
                twice.resize(cw as usize + 1, (usize::MAX, 0));
            }
            let t = &mut twice[cw as usize];
            *t = if t.0 == v { (v, t.1 + 1) } else { (v, 1) };
            // v as an end: v - w - x - y coloured a b a b forbids a = colour(x).
            for x in nb(w).filter(|&x| x != v && colours[x] != NONE) {
                if nb(x).any(|y| y != w && colours[y] == cw) {
                    forbid(colours[x], &mut forbidden);
                }
            }
        }
        // v inside: z - v - w - x with colour(z) = colour(w) forbids colour(x).
        for w in nb(v) {
            let cw = colours[w];
            if cw != NONE && twice[cw as usize].0 == v && twice[cw as usize].1 >= 2 {
                for x in nb(w).filter(|&x| x != v) {
                    forbid(colours[x], &mut forbidden);
                }
            }
        }
        colours[v] = first_free(&mut forbidden, v);
    }
    colours
}
