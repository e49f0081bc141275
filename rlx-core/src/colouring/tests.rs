//! Validity of the colourings on random patterns (proptest) and exact
//! recovery of random values through the decompression maps.

use proptest::prelude::*;

use super::*;

mod bicolour;

/// A random `nrows × ncols` pattern with about `density` of its entries.
fn pattern(max: usize) -> impl Strategy<Value = Pattern> {
    (1..max, 1..max, 0.0f64..0.5, any::<u64>()).prop_map(|(m, n, density, seed)| {
        let mut state = seed | 1;
        let mut e = Vec::new();
        for i in 0..m {
            for j in 0..n {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                if (state % 1000) as f64 / 1000.0 < density {
                    e.push((i, j));
                }
            }
        }
        Pattern::from_entries(m, n, &e).unwrap()
    })
}

/// A random symmetric pattern with a full diagonal.
fn symmetric(max: usize) -> impl Strategy<Value = Pattern> {
    pattern(max).prop_map(|p| {
        let n = p.nrows().max(p.ncols());
        let mut e: Vec<(usize, usize)> = p.entries().flat_map(|(r, c)| [(r, c), (c, r)]).collect();
        e.extend((0..n).map(|i| (i, i)));
        Pattern::from_entries(n, n, &e).unwrap()
    })
}

/// Distinct nonzero values, one per entry of `p`.
fn values(p: &Pattern) -> Vec<f64> {
    (0..p.nnz()).map(|k| 1.0 + k as f64 * 0.37).collect()
}

/// `J · S` laid out `[count, nrows]` (product `c` is row `c`).
fn forward_products(p: &Pattern, v: &[f64], c: &Colouring) -> Vec<f64> {
    let m = p.nrows();
    let mut b = vec![0.0; c.count() * m];
    for (k, (r, j)) in p.entries().enumerate() {
        b[c.colours()[j] as usize * m + r] += v[k];
    }
    b
}

proptest! {
    #[test]
    fn column_colourings_are_structurally_orthogonal_and_recover_j(p in pattern(40)) {
        let c = columns(&p);
        prop_assert!(is_structurally_orthogonal(&p, c.colours()));
        prop_assert!(c.count() >= p.max_row_nnz());
        let v = values(&p);
        let b = forward_products(&p, &v, &c);
        let got: Vec<f64> = c.sources().iter().map(|&s| b[s]).collect();
        prop_assert_eq!(got, v);
    }

    #[test]
    fn row_colourings_are_structurally_orthogonal_and_recover_j(p in pattern(40)) {
        let c = rows(&p);
        let t = p.transpose();
        prop_assert!(is_structurally_orthogonal(&t, c.colours()));
        // Sᵀ · J laid out [count, ncols].
        let n = p.ncols();
        let v = values(&p);
        let mut b = vec![0.0; c.count() * n];
        for (k, (r, j)) in p.entries().enumerate() {
            b[c.colours()[r] as usize * n + j] += v[k];
        }
        let got: Vec<f64> = c.sources().iter().map(|&s| b[s]).collect();
        prop_assert_eq!(got, v);
    }

    #[test]
    fn star_colourings_are_star_and_recover_symmetric_h(p in symmetric(40)) {
        let c = star(&p);
        prop_assert!(is_star(&p, c.colours()));
        // Symmetric values: H[i, j] = H[j, i] = 1 + i + j + i·j / 7.
        let h = |i: usize, j: usize| 1.0 + (i + j) as f64 + (i * j) as f64 / 7.0;
        let v: Vec<f64> = p.entries().map(|(i, j)| h(i, j)).collect();
        let b = forward_products(&p, &v, &c);
        let got: Vec<f64> = c.sources().iter().map(|&s| b[s]).collect();
        prop_assert_eq!(got, v);
        // A star colouring never needs more colours than distance-2
        // (column) colouring plus slack; both are valid for H.
        prop_assert!(c.count() <= p.ncols());
    }
}

#[test]
fn checkers_reject_invalid_colourings() {
    // Tridiagonal 4 × 4.
    let e: Vec<(usize, usize)> = (0..4usize)
        .flat_map(|i| (i.saturating_sub(1)..(i + 2).min(4)).map(move |j| (i, j)))
        .collect();
    let p = Pattern::from_entries(4, 4, &e).unwrap();
    // Columns 0 and 1 share row 0.
    assert!(!is_structurally_orthogonal(&p, &[0, 0, 1, 2]));
    assert!(is_structurally_orthogonal(&p, &[0, 1, 2, 0]));
    // The path 0 - 1 - 2 - 3 coloured a b a b is not a star colouring.
    assert!(!is_star(&p, &[0, 1, 0, 1]));
    assert!(is_star(&p, &[0, 1, 0, 2]));
}

#[test]
fn counts_meet_the_lower_bound_on_banded_and_stencil_patterns() {
    // 5-point stencil on a 6 × 6 grid: at most 5 nonzeros per row (the
    // lower bound, reached by colouring (i + 2j) mod 5); greedy orders come
    // within one colour of it.
    let k = 6;
    let mut e = Vec::new();
    for i in 0..k {
        for j in 0..k {
            let r = i * k + j;
            e.push((r, r));
            if i > 0 {
                e.push((r, r - k));
            }
            if i + 1 < k {
                e.push((r, r + k));
            }
            if j > 0 {
                e.push((r, r - 1));
            }
            if j + 1 < k {
                e.push((r, r + 1));
            }
        }
    }
    let p = Pattern::from_entries(k * k, k * k, &e).unwrap();
    assert_eq!(p.max_row_nnz(), 5);
    let c = columns(&p).count();
    assert!((5..=6).contains(&c), "{c}");
    assert_eq!(
        columns(&Pattern::from_entries(9, 9, &band_entries(9)).unwrap()).count(),
        3
    );
    let s = star(&p);
    assert!(is_star(&p, s.colours()));
    assert!(s.count() <= 5, "{}", s.count());
}

fn band_entries(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|i| (i.saturating_sub(1)..(i + 2).min(n)).map(move |j| (i, j)))
        .collect()
}
