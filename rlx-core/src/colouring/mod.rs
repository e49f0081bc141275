//! Colourings that compress a sparse Jacobian or Hessian into a few
//! products with a dense seed matrix (Gebremedhin, Manne and Pothen, "What
//! color is your Jacobian?", SIAM Review 2005).
//!
//! - [`columns`]: a partial distance-2 colouring of the columns: columns of
//!   one colour share no row (structurally orthogonal), so one forward-mode
//!   product `J · s_c` with the indicator `s_c` of colour `c` gives every
//!   entry of those columns;
//! - [`rows`]: the same for rows (reverse mode, `s_cᵀ · J`);
//! - [`star`]: a star colouring of a symmetric pattern (a distance-1
//!   colouring in which every path on four vertices uses at least three
//!   colours), which recovers a Hessian directly from `H · S` with fewer
//!   colours than a column colouring (Gebremedhin et al., SISC 2007);
//! - [`bicolouring`]: forward and reverse products together, for a
//!   Jacobian with a few dense rows and a few dense columns, which either
//!   one-sided colouring needs a colour per column (row) for.
//!
//! Each colouring also gives the decompression map: for each nonzero, the
//! position in the compressed product to read it from (see [`Colouring::sources`]).
//! Greedy colourings depend on the vertex order; each function tries a few
//! orders ([`Order`]) and keeps the one with the fewest colours. The lower
//! bound for [`columns`] is the largest number of nonzeros in a row.
//! No crate on crates.io implements these colourings for sparse
//! differentiation, so they are written here.

mod bicolour;
mod greedy;
mod star;

pub use bicolour::{bicolouring, is_bicolouring, split, Bicolouring};
pub use greedy::{columns, rows};
pub use star::star;

use crate::sparsity::Pattern;

/// Vertex orders tried by the greedy colourings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Index order (optimal for banded matrices).
    Natural,
    /// Decreasing degree, ties by index.
    LargestFirst,
    /// Repeatedly remove a vertex of smallest remaining degree and colour in
    /// reverse removal order (Matula and Beck).
    SmallestLast,
}

/// The orders every colouring tries.
pub const ORDERS: [Order; 3] = [Order::Natural, Order::LargestFirst, Order::SmallestLast];

/// A colouring of the columns (or rows, or vertices) of a pattern and the
/// decompression map that goes with it.
///
/// ```
/// use rlx::core::colouring;
/// use rlx::core::sparsity::Pattern;
/// // Tridiagonal 5 × 5: three colours, and no row sees one colour twice.
/// let mut e = vec![];
/// for i in 0..5usize {
///     for j in i.saturating_sub(1)..(i + 2).min(5) {
///         e.push((i, j));
///     }
/// }
/// let p = Pattern::from_entries(5, 5, &e).unwrap();
/// let c = colouring::columns(&p);
/// assert_eq!(c.count(), 3);
/// assert!(colouring::is_structurally_orthogonal(&p, c.colours()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Colouring {
    colours: Vec<u32>,
    count: usize,
    sources: Vec<usize>,
}

impl Colouring {
    /// The colour of each column (row, vertex), from 0.
    pub fn colours(&self) -> &[u32] {
        &self.colours
    }

    /// Number of colours: the number of products (passes) needed.
    pub fn count(&self) -> usize {
        self.count
    }

    /// For each nonzero of the pattern (in its storage order), the position
    /// in the compressed product, laid out `[count, m]` row-major with `m` the
    /// pattern's number of rows for [`columns`] and [`star`] (`J · S`
    /// transposed: product `c` is row `c`) or its number of columns for
    /// [`rows`] (`Sᵀ · J`).
    pub fn sources(&self) -> &[usize] {
        &self.sources
    }

    /// The seed matrix, `[count, n]` row-major: row `c` is the indicator of
    /// the columns (rows, vertices) of colour `c`.
    pub fn seeds(&self) -> Vec<f64> {
        let n = self.colours.len();
        let mut s = vec![0.0; self.count * n];
        for (j, &c) in self.colours.iter().enumerate() {
            s[c as usize * n + j] = 1.0;
        }
        s
    }
}

/// Whether no two columns of one colour have a nonzero in the same row.
pub fn is_structurally_orthogonal(p: &Pattern, colours: &[u32]) -> bool {
    let t = p.transpose();
    (0..t.ncols()).all(|r| {
        let mut seen: Vec<u32> = t.col(r).iter().map(|&j| colours[j]).collect();
        let n = seen.len();
        seen.sort_unstable();
        seen.dedup();
        seen.len() == n
    })
}

/// Whether `colours` is a star colouring of the symmetric pattern `p`
/// (diagonal ignored): adjacent vertices differ, and every path on four
/// vertices uses at least three colours.
pub fn is_star(p: &Pattern, colours: &[u32]) -> bool {
    let nb = |v: usize| p.col(v).iter().copied().filter(move |&w| w != v);
    for v in 0..p.ncols() {
        for w in nb(v) {
            if colours[v] == colours[w] {
                return false;
            }
            // Paths v - w - x - y with colours a, b, a, b.
            for x in nb(w).filter(|&x| x != v && colours[x] == colours[v]) {
                if nb(x).any(|y| y != w && y != v && colours[y] == colours[w]) {
                    return false;
                }
            }
        }
    }
    true
}

/// The number of colours used (colours are numbered from 0).
pub(crate) fn count(colours: &[u32]) -> usize {
    colours.iter().max().map_or(0, |&c| c as usize + 1)
}

/// Greedy colouring with the first colour not in `forbidden`, which is
/// marked with the vertex being coloured (no clearing between vertices).
pub(crate) fn first_free(forbidden: &mut Vec<usize>, stamp: usize) -> u32 {
    match forbidden.iter().position(|&s| s != stamp) {
        Some(c) => c as u32,
        None => {
            forbidden.push(usize::MAX);
            (forbidden.len() - 1) as u32
        }
    }
}

/// The vertices `0..n` in `order`, given each vertex's neighbours.
pub(crate) fn vertex_order<'a>(
    n: usize,
    order: Order,
    neighbours: impl Fn(usize) -> Box<dyn Iterator<Item = usize> + 'a>,
) -> Vec<usize> {
    match order {
        Order::Natural => (0..n).collect(),
        Order::LargestFirst => {
            let deg: Vec<usize> = (0..n).map(|v| neighbours(v).count()).collect();
            let mut v: Vec<usize> = (0..n).collect();
            v.sort_by_key(|&i| (std::cmp::Reverse(deg[i]), i));
            v
        }
        Order::SmallestLast => {
            let mut deg: Vec<usize> = (0..n).map(|v| neighbours(v).count()).collect();
            let maxd = deg.iter().copied().max().unwrap_or(0);
            // Buckets of vertices by current degree (lazy deletion).
            let mut bucket: Vec<Vec<usize>> = vec![Vec::new(); maxd + 1];
            for (v, &d) in deg.iter().enumerate() {
                bucket[d].push(v);
            }
            let mut removed = vec![false; n];
            let mut out = Vec::with_capacity(n);
            let mut lo = 0;
            while out.len() < n {
                lo = lo.min(maxd);
                let v = loop {
                    match bucket[lo].pop() {
                        Some(v) if !removed[v] && deg[v] == lo => break v,
                        Some(_) => {}
                        None => lo += 1,
                    }
                };
                removed[v] = true;
                out.push(v);
                for w in neighbours(v) {
                    if !removed[w] {
                        deg[w] -= 1;
                        bucket[deg[w]].push(w);
                        lo = lo.min(deg[w]);
                    }
                }
            }
            out.reverse();
            out
        }
    }
}

#[cfg(test)]
mod tests;
