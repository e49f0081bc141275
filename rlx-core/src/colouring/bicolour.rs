//! Bidirectional colouring of a Jacobian: some entries from forward-mode
//! products `J · V`, the others from reverse-mode products `Wᵀ · J`, all
//! read directly (Gebremedhin, Manne and Pothen 2005, §bicolouring; Montoison
//! and Dalle, "Revisiting sparse matrix coloring and bicoloring", 2025).
//!
//! A [`Bicolouring`] gives each column a forward colour or none (a neutral
//! column is in no forward seed) and each row a reverse colour or none. The
//! entry `(i, j)` is read from the forward product of `j`'s colour at row
//! `i` when `j` is the only seeded column of that colour in row `i`, or from
//! the reverse product of `i`'s colour at column `j` when `i` is the only
//! seeded row of that colour in column `j` ([`is_bicolouring`] checks that
//! one of the two holds for every entry).
//!
//! [`split`] builds one by splitting the rows: the rows in a set `R` are read
//! in reverse, the others forward. Then the rows of `J[R, :]` need a row
//! colouring of their own (rows outside `R` are neutral) and the columns a
//! column colouring of `J[Rᶜ, :]` (forward products are read only at rows
//! of `Rᶜ`, so entries in `R` may collide there). The sets tried are "the
//! rows with more than `t` nonzeros" for each threshold `t`, and the same
//! with the roles of rows and columns exchanged.
//!
//! **Bound.** For a pattern whose rows are `r` dense rows (more nonzeros
//! than any other row) and `Rᶜ`, where `Rᶜ` consists of `c` dense columns
//! plus at most one more entry per row (an arrow: a diagonal besides),
//! the split at `R` = the dense rows needs at most `r` reverse colours
//! (one per row of `R`) and `c + 1` forward colours (largest-first
//! colours the dense columns `0..c`, after which every other column's rows
//! see only dense columns, so colour `c` is free), so [`split`] returns at
//! most `r + c + 1` passes where either one-sided colouring needs `n`.

use super::{columns, rows, Colouring};
use crate::sparsity::Pattern;

/// A bidirectional colouring and its decompression map.
///
/// ```
/// use rlx::core::colouring::{self, is_bicolouring};
/// use rlx::core::sparsity::Pattern;
/// // An arrow (dense first row and column, and the diagonal): one-sided
/// // colourings need a colour per column or row; bidirectionally, one
/// // reverse pass for row 0, then forward column 0 and all the others.
/// let n = 10;
/// let mut e: Vec<(usize, usize)> = (0..n).flat_map(|i| [(0, i), (i, 0), (i, i)]).collect();
/// e.sort();
/// let p = Pattern::from_entries(n, n, &e).unwrap();
/// assert_eq!(colouring::columns(&p).count(), n);
/// let b = colouring::bicolouring(&p);
/// assert_eq!((b.forward(), b.reverse()), (2, 1));
/// assert!(is_bicolouring(&p, b.column_colours(), b.row_colours()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bicolouring {
    columns: Vec<Option<u32>>,
    rows: Vec<Option<u32>>,
    forward: usize,
    reverse: usize,
    sources: Vec<usize>,
}

impl Bicolouring {
    /// The forward colour of each column (`None`: in no forward seed).
    pub fn column_colours(&self) -> &[Option<u32>] {
        &self.columns
    }

    /// The reverse colour of each row (`None`: in no reverse seed).
    pub fn row_colours(&self) -> &[Option<u32>] {
        &self.rows
    }

    /// Number of forward-mode products.
    pub fn forward(&self) -> usize {
        self.forward
    }

    /// Number of reverse-mode products.
    pub fn reverse(&self) -> usize {
        self.reverse
    }

    /// Total number of products (passes).
    pub fn count(&self) -> usize {
        self.forward + self.reverse
    }

    /// For each nonzero (in the pattern's storage order), its position in
    /// the products laid out as the forward ones `[forward, nrows]`
    /// row-major followed by the reverse ones `[reverse, ncols]`.
    pub fn sources(&self) -> &[usize] {
        &self.sources
    }

    /// The forward seed matrix `[forward, ncols]` row-major.
    pub fn forward_seeds(&self) -> Vec<f64> {
        indicator(&self.columns, self.forward)
    }

    /// The reverse seed matrix `[reverse, nrows]` row-major.
    pub fn reverse_seeds(&self) -> Vec<f64> {
        indicator(&self.rows, self.reverse)
    }

    /// Forward mode only, from a column colouring.
    ///
    /// ```
    /// use rlx::core::colouring::{self, Bicolouring};
    /// use rlx::core::sparsity::Pattern;
    /// let p = Pattern::from_entries(2, 2, &[(0, 0), (1, 1)]).unwrap();
    /// let b = Bicolouring::from_columns(&p, &colouring::columns(&p));
    /// assert_eq!((b.forward(), b.reverse(), b.sources()), (1, 0, &[0, 1][..]));
    /// ```
    pub fn from_columns(p: &Pattern, c: &Colouring) -> Bicolouring {
        Bicolouring {
            columns: c.colours().iter().map(|&k| Some(k)).collect(),
            rows: vec![None; p.nrows()],
            forward: c.count(),
            reverse: 0,
            sources: c.sources().to_vec(),
        }
    }

    /// Reverse mode only, from a row colouring (see
    /// [`Bicolouring::from_columns`]).
    pub fn from_rows(p: &Pattern, c: &Colouring) -> Bicolouring {
        Bicolouring {
            columns: vec![None; p.ncols()],
            rows: c.colours().iter().map(|&k| Some(k)).collect(),
            forward: 0,
            reverse: c.count(),
            sources: c.sources().to_vec(),
        }
    }
}

fn indicator(colours: &[Option<u32>], count: usize) -> Vec<f64> {
    let n = colours.len();
    let mut s = vec![0.0; count * n];
    for (j, c) in colours.iter().enumerate() {
        if let Some(c) = c {
            s[*c as usize * n + j] = 1.0;
        }
    }
    s
}

/// The bidirectional colouring of `p` with the fewest passes among the
/// one-sided colourings ([`columns`], [`rows`]) and the splits of [`split`].
/// It never needs more passes than either one-sided colouring.
pub fn bicolouring(p: &Pattern) -> Bicolouring {
    let (c, r) = (columns(p), rows(p));
    let one_sided = if c.count() <= r.count() {
        Bicolouring::from_columns(p, &c)
    } else {
        Bicolouring::from_rows(p, &r)
    };
    split(p, one_sided.count()).unwrap_or(one_sided)
}

/// Most splits coloured per side: the thresholds tried are the largest
/// degrees, where splitting off few heavy rows (columns) pays.
const MAX_SPLITS: usize = 8;

/// The split bicolouring of `p` (see the module docs) with the fewest
/// passes, if one needs fewer than `bound`. Splits whose lower bound (the
/// most nonzeros in a forward-read row plus the most in a reverse-read
/// column) is not below the best so far are not coloured, so a pattern
/// whose one-sided colouring is near its lower bound (a stencil, a band)
/// costs only a count of degrees.
pub fn split(p: &Pattern, bound: usize) -> Option<Bicolouring> {
    let t = p.transpose();
    let mut best: Option<Bicolouring> = None;
    let mut bound = bound;
    for side in [Side::Rows, Side::Columns] {
        // Splitting the columns of `p` is splitting the rows of `pᵀ`,
        // with forward and reverse exchanged.
        let (a, at) = match side {
            Side::Rows => (p, &t),
            Side::Columns => (&t, p),
        };
        if let Some(b) = split_rows(a, at, bound) {
            let b = match side {
                Side::Rows => b,
                Side::Columns => transposed(p, b),
            };
            bound = b.count();
            best = Some(b);
        }
    }
    best
}

#[derive(Clone, Copy)]
enum Side {
    Rows,
    Columns,
}

/// The best row split of `p` (`t` its transpose) with fewer than `bound`
/// passes.
fn split_rows(p: &Pattern, t: &Pattern, mut bound: usize) -> Option<Bicolouring> {
    let (m, n) = (p.nrows(), p.ncols());
    let degree: Vec<usize> = (0..m).map(|i| t.col(i).len()).collect();
    let mut levels = degree.clone();
    levels.sort_unstable_by(|a, b| b.cmp(a));
    levels.dedup();
    // Rows by decreasing degree: R grows a degree class at a time.
    let mut by_degree: Vec<usize> = (0..m).collect();
    by_degree.sort_by_key(|&i| std::cmp::Reverse(degree[i]));
    let mut in_r = vec![false; m];
    let mut col_count = vec![0usize; n];
    let mut max_col = 0;
    let mut next = 0;
    let mut best = None;
    let mut tried = 0;
    for (k, &level) in levels.iter().enumerate() {
        // R: the rows of degree >= level; the rest have at most `rest`.
        while next < m && degree[by_degree[next]] >= level {
            let i = by_degree[next];
            in_r[i] = true;
            for &j in t.col(i) {
                col_count[j] += 1;
                max_col = max_col.max(col_count[j]);
            }
            next += 1;
        }
        let rest = levels.get(k + 1).copied().unwrap_or(0);
        if rest == 0 {
            break; // every nonzero row in R: reverse mode alone
        }
        if rest + max_col >= bound {
            continue;
        }
        if tried == MAX_SPLITS {
            break;
        }
        tried += 1;
        let b = coloured_split(p, t, &in_r);
        if b.count() < bound {
            bound = b.count();
            best = Some(b);
        }
    }
    best
}

/// The rows with `in_r` read in reverse (coloured among themselves), the
/// others forward (the columns coloured over those rows only).
fn coloured_split(p: &Pattern, t: &Pattern, in_r: &[bool]) -> Bicolouring {
    let fwd = columns(&keep_rows(p, |i| !in_r[i]));
    let rev = rows(&keep_rows(p, |i| in_r[i]));
    // Colours used by the kept rows (the others' colours are dropped, and
    // the rest renumbered densely).
    let used = |colours: &[u32], keep: &dyn Fn(usize) -> bool| -> (Vec<Option<u32>>, usize) {
        let mut map = vec![u32::MAX; colours.iter().map(|&c| c as usize + 1).max().unwrap_or(0)];
        let mut count = 0u32;
        let out = colours
            .iter()
            .enumerate()
            .map(|(v, &c)| {
                if !keep(v) {
                    return None;
                }
                if map[c as usize] == u32::MAX {
                    map[c as usize] = count;
                    count += 1;
                }
                Some(map[c as usize])
            })
            .collect();
        (out, count as usize)
    };
    // A column is seeded when it has an entry in a forward-read row.
    let (columns, forward) = used(fwd.colours(), &|j| has_entry(p, j, |i| !in_r[i]));
    let (rows, reverse) = used(rev.colours(), &|i| in_r[i] && !t.col(i).is_empty());
    assemble(p, (columns, forward), (rows, reverse), |i, _| !in_r[i])
}

/// A bicolouring from its colours, reading entry `(i, j)` forward when
/// `forward_read(i, j)` (its column is then seeded) and in reverse
/// otherwise (its row is then seeded).
fn assemble(
    p: &Pattern,
    (columns, forward): (Vec<Option<u32>>, usize),
    (rows, reverse): (Vec<Option<u32>>, usize),
    forward_read: impl Fn(usize, usize) -> bool,
) -> Bicolouring {
    let (m, n) = (p.nrows(), p.ncols());
    let sources = p
        .entries()
        .map(|(i, j)| match (forward_read(i, j), columns[j], rows[i]) {
            (true, Some(c), _) => c as usize * m + i,
            (false, _, Some(c)) => forward * m + c as usize * n + j,
            _ => unreachable!("a split seeds the column or row each entry is read from"),
        })
        .collect();
    Bicolouring {
        columns,
        rows,
        forward,
        reverse,
        sources,
    }
}

/// Whether column `j` of `p` has an entry in a row with `keep`.
fn has_entry(p: &Pattern, j: usize, keep: impl Fn(usize) -> bool) -> bool {
    p.col(j).iter().any(|&i| keep(i))
}

/// `p` with the rows without `keep` emptied (same size).
fn keep_rows(p: &Pattern, keep: impl Fn(usize) -> bool) -> Pattern {
    let mut col_ptr = Vec::with_capacity(p.ncols() + 1);
    let mut row_idx = Vec::with_capacity(p.nnz());
    col_ptr.push(0);
    for j in 0..p.ncols() {
        row_idx.extend(p.col(j).iter().copied().filter(|&i| keep(i)));
        col_ptr.push(row_idx.len());
    }
    Pattern::new(p.nrows(), p.ncols(), col_ptr, row_idx).expect("a subset of a valid pattern")
}

/// A row split of `pᵀ` turned into the column split of `p`: forward and
/// reverse exchange, and the sources are recomputed for `p`'s storage order.
/// An entry is read forward exactly when its column is seeded (the split
/// columns, read in reverse in `pᵀ`).
fn transposed(p: &Pattern, b: Bicolouring) -> Bicolouring {
    let seeded: Vec<bool> = b.rows.iter().map(Option::is_some).collect();
    assemble(p, (b.rows, b.reverse), (b.columns, b.forward), |_, j| {
        seeded[j]
    })
}

/// Whether every entry of `p` can be read directly: its column is seeded
/// and no other seeded column of that colour has an entry in its row, or
/// its row is seeded and no other seeded row of that colour has an entry in
/// its column.
pub fn is_bicolouring(p: &Pattern, columns: &[Option<u32>], rows: &[Option<u32>]) -> bool {
    if columns.len() != p.ncols() || rows.len() != p.nrows() {
        return false;
    }
    let t = p.transpose();
    // How many seeded columns (rows) of colour c a row (column) sees.
    let sees = |lines: &[usize], colours: &[Option<u32>], c: u32| {
        lines.iter().filter(|&&v| colours[v] == Some(c)).count()
    };
    p.entries().all(|(i, j)| {
        let fwd = columns[j].is_some_and(|c| sees(t.col(i), columns, c) == 1);
        let rev = rows[i].is_some_and(|c| sees(p.col(j), rows, c) == 1);
        fwd || rev
    })
}
