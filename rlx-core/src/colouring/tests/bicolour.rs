//! Bidirectional colourings: valid on random patterns, recovering random
//! values exactly from simulated forward and reverse products, never worse
//! than one-sided, and within the stated bound on arrows.

use proptest::prelude::*;

use super::{pattern, values};
use crate::colouring::*;
use crate::sparsity::Pattern;

/// The forward products `J · V` (`[forward, nrows]`) then the reverse
/// products `Wᵀ · J` (`[reverse, ncols]`) of the values `v` of `p`, summed
/// as the passes would (every seeded column or row contributes).
fn products(p: &Pattern, v: &[f64], b: &Bicolouring) -> Vec<f64> {
    let (m, n) = (p.nrows(), p.ncols());
    let mut out = vec![0.0; b.forward() * m + b.reverse() * n];
    for (k, (i, j)) in p.entries().enumerate() {
        if let Some(c) = b.column_colours()[j] {
            out[c as usize * m + i] += v[k];
        }
        if let Some(c) = b.row_colours()[i] {
            out[b.forward() * m + c as usize * n + j] += v[k];
        }
    }
    out
}

fn recovered(p: &Pattern, b: &Bicolouring) -> (Vec<f64>, Vec<f64>) {
    let v = values(p);
    let prod = products(p, &v, b);
    (b.sources().iter().map(|&s| prod[s]).collect(), v)
}

/// An `n × n` arrow: `dense_rows` full rows, `dense_cols` full columns (at
/// positions spread by `seed`) and the diagonal.
fn arrow(n: usize, dense_rows: usize, dense_cols: usize, seed: usize) -> Pattern {
    let pick = |k: usize, salt: usize| (k * 7 + seed + salt) % n;
    let rows: Vec<usize> = (0..dense_rows).map(|k| pick(k, 0)).collect();
    let cols: Vec<usize> = (0..dense_cols).map(|k| pick(k, 3)).collect();
    let mut e: Vec<(usize, usize)> = (0..n).map(|i| (i, i)).collect();
    for i in 0..n {
        e.extend(rows.iter().map(|&r| (r, i)));
        e.extend(cols.iter().map(|&c| (i, c)));
    }
    Pattern::from_entries(n, n, &e).unwrap()
}

proptest! {
    #[test]
    fn bicolourings_are_valid_and_recover_j(p in pattern(40)) {
        let b = bicolouring(&p);
        prop_assert!(is_bicolouring(&p, b.column_colours(), b.row_colours()));
        let (got, want) = recovered(&p, &b);
        prop_assert_eq!(got, want);
        let one_sided = columns(&p).count().min(rows(&p).count());
        prop_assert!(b.count() <= one_sided, "{} > {}", b.count(), one_sided);
        // The seed matrices match the colours.
        let fs = b.forward_seeds();
        prop_assert_eq!(fs.iter().filter(|&&s| s == 1.0).count(),
            b.column_colours().iter().flatten().count());
    }

    #[test]
    fn arrows_need_at_most_dense_rows_plus_dense_columns_plus_one(
        n in 8usize..60, r in 0usize..3, c in 0usize..3, seed in 0usize..50,
    ) {
        let p = arrow(n, r, c, seed);
        let (r, c) = (distinct(n, r, 0, seed), distinct(n, c, 3, seed));
        let b = bicolouring(&p);
        prop_assert!(is_bicolouring(&p, b.column_colours(), b.row_colours()));
        prop_assert!(b.count() <= r + c + 1, "{} passes for {r} dense rows, {c} dense columns", b.count());
        let (got, want) = recovered(&p, &b);
        prop_assert_eq!(got, want);
    }
}

/// The number of distinct positions `arrow` picks.
fn distinct(n: usize, k: usize, salt: usize, seed: usize) -> usize {
    let mut v: Vec<usize> = (0..k).map(|i| (i * 7 + seed + salt) % n).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

#[test]
fn an_arrow_needs_three_passes_where_one_sided_needs_n() {
    let n = 30;
    let p = arrow(n, 1, 1, 0);
    assert_eq!((columns(&p).count(), rows(&p).count()), (n, n));
    let b = bicolouring(&p);
    assert_eq!(b.count(), 3);
    // Splitting: nothing better than the bound.
    assert!(split(&p, 3).is_none());
}

#[test]
fn the_checker_rejects_collisions_and_unread_entries() {
    // [[a, b],
    //  [c, 0]]
    let p = Pattern::from_entries(2, 2, &[(0, 0), (0, 1), (1, 0)]).unwrap();
    // Both columns forward in one colour: a and b collide in row 0.
    assert!(!is_bicolouring(&p, &[Some(0), Some(0)], &[None, None]));
    // Row 0 in reverse reads a and b; column 0 forward reads c.
    assert!(is_bicolouring(&p, &[Some(0), None], &[Some(0), None]));
    // Nothing seeded reads nothing.
    assert!(!is_bicolouring(&p, &[None, None], &[None, None]));
    // Wrong lengths.
    assert!(!is_bicolouring(&p, &[Some(0)], &[None, None]));
}

#[test]
fn a_band_is_left_to_one_sided_colouring() {
    let e: Vec<(usize, usize)> = (0..50usize)
        .flat_map(|i| (i.saturating_sub(2)..(i + 3).min(50)).map(move |j| (i, j)))
        .collect();
    let p = Pattern::from_entries(50, 50, &e).unwrap();
    assert_eq!(columns(&p).count(), 5);
    assert!(split(&p, 5).is_none());
    assert_eq!(bicolouring(&p).count(), 5);
}

proptest! {
    #[test]
    fn random_patterns_with_dense_lines_are_recovered(
        p in pattern(40), r in 0usize..3, c in 0usize..3, seed in 0usize..50,
    ) {
        // The random pattern with a few full rows and columns on top.
        let (m, n) = (p.nrows(), p.ncols());
        let mut e: Vec<(usize, usize)> = p.entries().collect();
        for k in 0..r {
            e.extend((0..n).map(|j| ((k * 7 + seed) % m, j)));
        }
        for k in 0..c {
            e.extend((0..m).map(|i| (i, (k * 7 + seed + 3) % n)));
        }
        let p = Pattern::from_entries(m, n, &e).unwrap();
        let b = bicolouring(&p);
        prop_assert!(is_bicolouring(&p, b.column_colours(), b.row_colours()));
        let (got, want) = recovered(&p, &b);
        prop_assert_eq!(got, want);
        prop_assert!(b.count() <= columns(&p).count().min(rows(&p).count()));
    }
}
