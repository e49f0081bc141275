//! Patterns of known structures, equal to the expected ones exactly (the
//! comparison with dense Jacobians at random points is in the runtime's
//! tests, which can evaluate graphs).

use super::*;
use crate::test_graphs::tridiagonal;
use crate::{DType, Literal};

fn entries(p: &Pattern) -> Vec<(usize, usize)> {
    let mut e: Vec<_> = p.entries().collect();
    e.sort_unstable();
    e
}

fn sorted(mut e: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    e.sort_unstable();
    e.dedup();
    e
}

fn band(n: usize, w: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|i| (i.saturating_sub(w)..(i + w + 1).min(n)).map(move |j| (i, j)))
        .collect()
}

#[test]
fn tridiagonal_residual_and_its_energy() {
    let g = tridiagonal(7);
    let p = jacobian_pattern(&g, &[0]).unwrap();
    assert_eq!(entries(&p), band(7, 1));
    // The Hessian of Σ y_i² couples nodes two apart (through y_i).
    let mut e = g.clone();
    e.set_outputs(vec![g.outputs()[1]]);
    let h = hessian_pattern(&e, &[0]).unwrap();
    assert_eq!(entries(&h), band(7, 2));
}

/// The 5-point Laplacian of `u: [k, k]` plus `u³`, written with 2-D
/// padding (concat of zero rows and columns) and slices.
fn stencil(k: usize) -> Graph {
    let mut g = Graph::new();
    let u = g.input("u", [k, k], DType::F64);
    let zr = g.full([1, k], 0.0, DType::F64);
    let rows = g.concat(&[zr, u, zr], 0).unwrap();
    let zc = g.full([k + 2, 1], 0.0, DType::F64);
    let p = g.concat(&[zc, rows, zc], 1).unwrap();
    let mut acc = g.powi(u, 3).unwrap();
    for (di, dj) in [(0, 1), (2, 1), (1, 0), (1, 2)] {
        let a = g.slice_range(p, di..di + k, 0).unwrap();
        let b = g.slice_range(a, dj..dj + k, 1).unwrap();
        let d = g.sub(b, u).unwrap();
        acc = g.add(acc, d).unwrap();
    }
    g.set_outputs(vec![acc]);
    g
}

#[test]
fn five_point_stencil() {
    let k = 5;
    let p = jacobian_pattern(&stencil(k), &[0]).unwrap();
    let mut want = Vec::new();
    for i in 0..k {
        for j in 0..k {
            let r = i * k + j;
            want.push((r, r));
            if i > 0 {
                want.push((r, r - k));
            }
            if i + 1 < k {
                want.push((r, r + k));
            }
            if j > 0 {
                want.push((r, r - 1));
            }
            if j + 1 < k {
                want.push((r, r + 1));
            }
        }
    }
    assert_eq!(entries(&p), sorted(want));
}

#[test]
fn block_diagonal_through_a_batched_matmul_and_transpose() {
    // x: [4, 3] blocks; y[b] = tanh(x[b] @ A) with a constant A, transposed
    // and transposed back: a Jacobian of 4 dense 3 × 3 blocks.
    let mut g = Graph::new();
    let x = g.input("x", [4, 1, 3], DType::F64);
    let a = g
        .constant(
            Literal::F64((0..9).map(f64::from).collect::<Vec<_>>().into()),
            [3, 3],
            DType::F64,
        )
        .unwrap();
    let y = g.matmul(x, a).unwrap();
    let t = g.tanh(y).unwrap();
    let tt = g.transpose(t, &[2, 1, 0]).unwrap();
    let back = g.transpose(tt, &[2, 1, 0]).unwrap();
    g.set_outputs(vec![back]);
    let p = jacobian_pattern(&g, &[0]).unwrap();
    let want: Vec<(usize, usize)> = (0..12)
        .flat_map(|r| (0..3).map(move |c| (r, (r / 3) * 3 + c)))
        .collect();
    assert_eq!(entries(&p), sorted(want));
}

#[test]
fn arrow_and_its_hessian() {
    // y_0 = Σ x, y_i = x_i · x_0: dense first row and first column.
    let n = 6;
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let s = g.sum(x, &[0]).unwrap();
    let s = g.reshape(s, [1]).unwrap();
    let x0 = g.slice_range(x, 0..1, 0).unwrap();
    let rest = g.slice_range(x, 1..n, 0).unwrap();
    let prod = g.mul(rest, x0).unwrap();
    let y = g.concat(&[s, prod], 0).unwrap();
    g.set_outputs(vec![y]);
    let p = jacobian_pattern(&g, &[0]).unwrap();
    let mut want: Vec<(usize, usize)> = (0..n).flat_map(|i| [(0, i), (i, 0), (i, i)]).collect();
    want = sorted(want);
    assert_eq!(entries(&p), want);
    // Σ y: the products x_0 x_i give an arrow Hessian without a diagonal
    // (except nothing at (0, 0): no x_0² term).
    let f = g.sum_all(y).unwrap();
    g.set_outputs(vec![f]);
    let h = hessian_pattern(&g, &[0]).unwrap();
    let want: Vec<(usize, usize)> = (1..n).flat_map(|i| [(0, i), (i, 0)]).collect();
    assert_eq!(entries(&h), sorted(want));
}

#[test]
fn gather_with_constant_indices_is_exact_and_traced_indices_conservative() {
    let mut g = Graph::new();
    let x = g.input("x", [5], DType::F64);
    let idx = g
        .constant(Literal::I64(vec![4, 0, 0].into()), [3], DType::I64)
        .unwrap();
    let y = g.gather(x, idx, 0).unwrap();
    g.set_outputs(vec![y]);
    let p = jacobian_pattern(&g, &[0]).unwrap();
    assert_eq!(entries(&p), vec![(0, 4), (1, 0), (2, 0)]);
    // The same with indices from an input: every row may read any element.
    let mut g = Graph::new();
    let x = g.input("x", [5], DType::F64);
    let idx = g.input("idx", [3], DType::I64);
    let y = g.gather(x, idx, 0).unwrap();
    g.set_outputs(vec![y]);
    let p = jacobian_pattern(&g, &[0]).unwrap();
    assert_eq!(p.nnz(), 15);
}

#[test]
fn zero_derivative_ops_and_unused_inputs_give_empty_columns() {
    // y = floor(x) + exp(z): nothing depends on x.
    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F64);
    let z = g.input("z", [3], DType::F64);
    let f = g.unary(crate::UnaryOp::Floor, x).unwrap();
    let e = g.exp(z).unwrap();
    let y = g.add(f, e).unwrap();
    g.set_outputs(vec![y]);
    let p = jacobian_pattern(&g, &[0, 1]).unwrap();
    assert_eq!((p.nrows(), p.ncols()), (3, 6));
    assert_eq!(entries(&p), vec![(0, 3), (1, 4), (2, 5)]);
    let e = hessian_pattern(&g, &[0]).unwrap_err();
    assert!(e.to_string().contains("sparse_hessian"), "{e}");
}
