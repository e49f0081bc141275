//! `SparseLu` against a dense reference (Gaussian elimination with
//! partial pivoting, written here): solves with `A` and `Aᵀ` from the same
//! factors, refactorisation with new values, and the errors of `factor`
//! (singular, structurally singular, NaN and infinite entries), each
//! naming the column in the user's numbering, followed by a good matrix
//! that factors again.

use rlx_core::sparsity::Pattern;
use rlx_core::Error;
use rlx_runtime::{SparseLu, SparseMatrix};

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 100_000) as f64 / 100_000.0 - 0.5
    }
}

/// A nonsymmetric `n × n` matrix: the 5-point pattern of a `k × k` grid
/// (n = k²) plus one long-range entry per column, random values, a
/// dominant diagonal (so that every solve is well conditioned).
fn matrix(k: usize, seed: u64) -> SparseMatrix {
    let n = k * k;
    let mut entries = Vec::new();
    for c in 0..n {
        let (i, j) = (c / k, c % k);
        entries.push((c, c));
        if i > 0 {
            entries.push((c - k, c));
        }
        if j > 0 {
            entries.push((c - 1, c));
        }
        if j + 1 < k {
            entries.push((c + 1, c));
        }
        if i + 1 < k {
            entries.push((c + k, c));
        }
        entries.push(((c * 7 + 3) % n, c));
    }
    entries.sort_unstable_by_key(|&(r, c)| (c, r));
    entries.dedup();
    let p = Pattern::from_entries(n, n, &entries).unwrap();
    let mut rng = Rng(seed);
    let values = entries
        .iter()
        .map(|&(r, c)| if r == c { 8.0 + rng.unit() } else { rng.unit() })
        .collect();
    SparseMatrix::new(p, values).unwrap()
}

/// `x` with `A x = b` (or `Aᵀ x = b`), by dense elimination with partial pivoting.
fn dense_solve(a: &SparseMatrix, b: &[f64], transpose: bool) -> Vec<f64> {
    let n = a.nrows();
    let mut m: Vec<Vec<f64>> = (0..n)
        .map(|r| {
            (0..n)
                .map(|c| if transpose { a.get(c, r) } else { a.get(r, c) })
                .collect()
        })
        .collect();
    let mut x = b.to_vec();
    for j in 0..n {
        let p = (j..n)
            .max_by(|&r, &s| m[r][j].abs().total_cmp(&m[s][j].abs()))
            .unwrap();
        m.swap(j, p);
        x.swap(j, p);
        for r in j + 1..n {
            let f = m[r][j] / m[j][j];
            let (top, bottom) = m.split_at_mut(r);
            for (x, p) in bottom[0][j..].iter_mut().zip(&top[j][j..]) {
                *x -= f * p;
            }
            x[r] -= f * x[j];
        }
    }
    for j in (0..n).rev() {
        let s: f64 = (j + 1..n).map(|c| m[j][c] * x[c]).sum();
        x[j] = (x[j] - s) / m[j][j];
    }
    x
}

fn assert_close(a: &[f64], b: &[f64]) {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-11 * (1.0 + y.abs()),
            "entry {i}: {x} vs {y}"
        );
    }
}

fn rhs(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.unit()).collect()
}

#[test]
fn solves_and_transposed_solves_agree_with_dense_elimination() {
    for (k, seed) in [(1, 1), (3, 2), (6, 3), (9, 4)] {
        let a = matrix(k, seed);
        let n = a.nrows();
        let mut lu = SparseLu::new(a.pattern()).unwrap();
        // Two refactorisations of one pattern, new values each time.
        for round in 0..2 {
            let a = matrix(k, seed + 10 * round);
            lu.factor(&a).unwrap();
            let b = rhs(n, seed + 100 * round);
            let mut x = b.clone();
            lu.solve_in_place(&mut x).unwrap();
            assert_close(&x, &dense_solve(&a, &b, false));
            let mut xt = b.clone();
            lu.solve_transpose_in_place(&mut xt).unwrap();
            assert_close(&xt, &dense_solve(&a, &b, true));
            // A nonsymmetric matrix: the two solutions differ.
            assert!(n == 1 || x != xt);
        }
    }
}

/// `a` with every entry of column `col` set to `v`.
fn with_column(a: &SparseMatrix, col: usize, v: f64) -> SparseMatrix {
    let mut a = a.clone();
    let (start, end) = (a.pattern().col_ptr()[col], a.pattern().col_ptr()[col + 1]);
    a.values_mut()[start..end].fill(v);
    a
}

fn singular_column(e: &Error) -> usize {
    match e {
        Error::SingularMatrix { op, shape, column } => {
            assert_eq!(*op, "sparse_lu");
            assert_eq!(shape.dims()[0], shape.dims()[1]);
            *column
        }
        e => panic!("expected SingularMatrix, got {e:?}"),
    }
}

/// After an error, the factorisation refuses to solve and then factors a
/// good matrix again.
fn recovers(lu: &mut SparseLu, good: &SparseMatrix) {
    let n = good.nrows();
    assert!(lu.solve_in_place(&mut vec![1.0; n]).is_err());
    lu.factor(good).unwrap();
    let b = rhs(n, 7);
    let mut x = b.clone();
    lu.solve_in_place(&mut x).unwrap();
    assert_close(&x, &dense_solve(good, &b, false));
}

#[test]
fn a_numerically_singular_matrix_fails_in_factor_naming_the_users_column() {
    let good = matrix(6, 5);
    let n = good.nrows();
    let mut lu = SparseLu::new(good.pattern()).unwrap();
    // A zero column: the only column in the span of the others, wherever
    // the fill-reducing order puts it.
    for col in [0, 17, n - 1] {
        let e = lu.factor(&with_column(&good, col, 0.0)).unwrap_err();
        assert_eq!(singular_column(&e), col, "{e}");
        assert!(e.to_string().contains(&format!("column {col}")), "{e}");
        recovers(&mut lu, &good);
    }
    // Column 20 a copy of column 9 (same pattern in this 2 × 2 block
    // sense: the dense 2 × 2 `[[1, 2], [1, 2]]`): one of the two is named.
    let p = Pattern::dense(2, 2);
    let a = SparseMatrix::new(p.clone(), vec![1.0, 1.0, 2.0, 2.0]).unwrap();
    let mut lu2 = SparseLu::new(&p).unwrap();
    let e = lu2.factor(&a).unwrap_err();
    assert!(singular_column(&e) < 2, "{e}");
    // A dependent pair inside a larger matrix: column 20 = 2 · column 9 on
    // a pattern where both columns have the same rows.
    let mut entries: Vec<(usize, usize)> = (0..30).map(|i| (i, i)).collect();
    entries.extend([(20, 9), (9, 20), (3, 9), (3, 20)]);
    entries.sort_unstable_by_key(|&(r, c)| (c, r));
    let p = Pattern::from_entries(30, 30, &entries).unwrap();
    let values: Vec<f64> = p
        .entries()
        .map(|(r, c)| match (r, c) {
            (9, 9) | (20, 9) => 1.0,
            (3, 9) => 0.5,
            (9, 20) | (20, 20) => 2.0,
            (3, 20) => 1.0,
            _ => 3.0,
        })
        .collect();
    let a = SparseMatrix::new(p.clone(), values).unwrap();
    let mut lu3 = SparseLu::new(&p).unwrap();
    let col = singular_column(&lu3.factor(&a).unwrap_err());
    assert!(col == 9 || col == 20, "named column {col}");
}

#[test]
fn a_structurally_singular_matrix_fails_in_factor_naming_its_empty_column() {
    let good = matrix(6, 8);
    let n = good.nrows();
    for col in [0, 13, n - 1] {
        // The pattern without column `col`'s entries.
        let entries: Vec<(usize, usize)> = good
            .pattern()
            .entries()
            .filter(|&(_, c)| c != col)
            .collect();
        let p = Pattern::from_entries(n, n, &entries).unwrap();
        let a = SparseMatrix::new(
            p.clone(),
            entries.iter().map(|&(r, c)| good.get(r, c)).collect(),
        )
        .unwrap();
        let mut lu = SparseLu::new(&p).unwrap();
        let e = lu.factor(&a).unwrap_err();
        assert_eq!(singular_column(&e), col, "{e}");
    }
}

#[test]
fn nan_and_infinite_entries_fail_in_factor_naming_row_and_column() {
    let good = matrix(6, 9);
    let mut lu = SparseLu::new(good.pattern()).unwrap();
    for (v, name) in [
        (f64::NAN, "NaN"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
    ] {
        for col in [0, 22, 35] {
            let mut a = good.clone();
            // The last entry of the column: the row below the diagonal or
            // the long-range one.
            let k = a.pattern().col_ptr()[col + 1] - 1;
            let row = a.pattern().row_idx()[k];
            a.values_mut()[k] = v;
            let e = lu.factor(&a).unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(
                    e,
                    Error::InvalidArgument {
                        op: "sparse_lu",
                        ..
                    }
                ),
                "{e:?}"
            );
            assert!(
                msg.contains(&format!("(row {row}, column {col})"))
                    && msg.contains(&format!("is {name}:")),
                "{msg}"
            );
            recovers(&mut lu, &good);
        }
    }
}

#[test]
fn misuse_is_an_error() {
    let a = matrix(3, 1);
    let lu = SparseLu::new(a.pattern()).unwrap();
    let e = lu.solve_in_place(&mut [1.0; 9]).unwrap_err();
    assert!(
        e.to_string().contains("before a successful `factor`"),
        "{e}"
    );
    let mut lu = lu;
    lu.factor(&a).unwrap();
    let e = lu.solve_transpose_in_place(&mut [1.0; 8]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::CountMismatch {
                expected: 9,
                got: 8,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(SparseLu::new(&Pattern::dense(2, 3)).is_err());
}
