//! The sparse companions' memory: a warm `*_into` call (Jacobian or
//! Hessian) allocates nothing, a warm `SparseLu` factor + solves of a
//! 2 025-unknown grid allocate nothing, and a 20 000-unknown sparse Jacobian (first call included: tracing,
//! pattern, colouring, compiling) never allocates anything of size n².

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;
use counting::measure;

use rlx::prelude::*;

/// `y_i = x_{i-1} - 2 x_i + x_{i+1} - sinh(x_i) + c_i` with zero boundaries.
#[differentiable(wrt(x))]
fn chain(x: &Tensor, c: &Tensor, n: usize) -> Tensor {
    let z = Tensor::zeros([1], DType::F64);
    let p = Tensor::concat(&[&z, x, &z], 0);
    p.slice_range(0..n, 0) + p.slice_range(2..2 + n, 0) - x * 2.0 - x.sinh() + c
}

#[test]
fn warm_into_calls_allocate_nothing() {
    let n = 500;
    let x = Tensor::from_slice(
        &(0..n).map(|i| (i as f64 * 0.1).sin()).collect::<Vec<_>>(),
        [n],
    );
    let c = Tensor::full([n], 0.3, DType::F64);
    let mut j = sparse_jacobian_chain(&x, &c, n).unwrap();
    let mut f = vec![0.0; n];
    for _ in 0..2 {
        sparse_jacobian_into_chain(&x, &c, n, &mut j).unwrap();
        value_and_sparse_jacobian_into_chain(&x, &c, n, &mut f, &mut j).unwrap();
    }
    let (count, _) = measure(|| sparse_jacobian_into_chain(&x, &c, n, &mut j).unwrap());
    assert_eq!(count, 0, "sparse_jacobian_into_chain allocated");
    let (count, _) =
        measure(|| value_and_sparse_jacobian_into_chain(&x, &c, n, &mut f, &mut j).unwrap());
    assert_eq!(count, 0, "value_and_sparse_jacobian_into_chain allocated");
    assert_eq!(j, sparse_jacobian_chain(&x, &c, n).unwrap());
    assert_eq!(f, chain(&x, &c, n).to_vec::<f64>().unwrap());
}

/// `Σ (x_{i+1} - x_i)⁴ + Σ cos x_i`: a tridiagonal Hessian.
#[differentiable]
fn energy(x: &Tensor, n: usize) -> f64 {
    let d = x.slice_range(1..n, 0) - x.slice_range(0..n - 1, 0);
    d.powi(4).sum_all() + x.cos().sum_all()
}

#[test]
fn a_warm_sparse_hessian_into_call_allocates_nothing() {
    let n = 500;
    let x = Tensor::from_slice(
        &(0..n).map(|i| (i as f64 * 0.1).sin()).collect::<Vec<_>>(),
        [n],
    );
    let mut h = sparse_hessian_energy(&x, n).unwrap();
    for _ in 0..2 {
        sparse_hessian_into_energy(&x, n, &mut h).unwrap();
    }
    let (count, _) = measure(|| sparse_hessian_into_energy(&x, n, &mut h).unwrap());
    assert_eq!(count, 0, "sparse_hessian_into_energy allocated");
    assert_eq!(h, sparse_hessian_energy(&x, n).unwrap());
}

#[test]
fn a_20000_unknown_sparse_jacobian_never_allocates_n_squared() {
    let n = 20_000;
    let x = Tensor::full([n], 0.1, DType::F64);
    let c = Tensor::full([n], 0.3, DType::F64);
    let mut j = None;
    let (_, largest) = measure(|| j = Some(sparse_jacobian_chain(&x, &c, n).unwrap()));
    let j = j.unwrap();
    assert_eq!(j.nnz(), 3 * n - 2);
    // A dense Jacobian would be n² · 8 bytes = 3.2 GB. The largest block of
    // the sparse path is linear in n: a few f64 per unknown and colour.
    let dense = n * n * std::mem::size_of::<f64>();
    assert!(
        largest <= 64 * n * std::mem::size_of::<f64>(),
        "largest allocation: {largest} bytes"
    );
    assert!(largest * 1000 < dense);
    // Values at a few entries, by hand: ∂y_i/∂x_i = -2 - cosh(0.1), 1 off the diagonal.
    assert!((j.get(7, 7) + 2.0 + 0.1f64.cosh()).abs() < 1e-14);
    assert_eq!((j.get(7, 8), j.get(8, 7), j.get(7, 9)), (1.0, 1.0, 0.0));
}

/// The 5-point pattern of a `k × k` grid with conductance-like values
/// (the Jacobian pattern of the grid circuit): faer factors it simplicially.
fn grid_matrix(k: usize, shift: f64) -> rlx::SparseMatrix {
    let n = k * k;
    let mut entries = Vec::new();
    for c in 0..n {
        let (i, j) = (c / k, c % k);
        for (ok, r) in [
            (i > 0, c.wrapping_sub(k)),
            (j > 0, c.wrapping_sub(1)),
            (true, c),
            (j + 1 < k, c + 1),
            (i + 1 < k, c + k),
        ] {
            if ok {
                entries.push((r, c));
            }
        }
    }
    let p = rlx::sparse::Pattern::from_entries(n, n, &entries).unwrap();
    let values = entries
        .iter()
        .map(|&(r, c)| {
            if r == c {
                0.09 + shift * (c as f64).sin().abs()
            } else {
                -0.02
            }
        })
        .collect();
    rlx::SparseMatrix::new(p, values).unwrap()
}

#[test]
fn a_warm_sparse_lu_factor_and_solves_allocate_nothing() {
    let k = 45;
    let n = k * k;
    let (a, b) = (grid_matrix(k, 0.1), grid_matrix(k, 0.3));
    let mut lu = SparseLu::new(a.pattern()).unwrap();
    let mut x = vec![1.0; n];
    // Cold: the numeric storage grows to the factors' size.
    lu.factor(&a).unwrap();
    lu.solve_in_place(&mut x).unwrap();
    let (count, _) = measure(|| {
        for m in [&b, &a] {
            lu.factor(m).unwrap();
            x.fill(1.0);
            lu.solve_in_place(&mut x).unwrap();
            lu.solve_transpose_in_place(&mut x).unwrap();
        }
    });
    assert_eq!(count, 0, "a warm factor + solve allocated");
    // The last factor is `a`'s: `x` solves `a (aᵀ x) = 1`.
    let at_x: Vec<f64> = (0..n)
        .map(|c| a.pattern().col(c).iter().map(|&r| a.get(r, c) * x[r]).sum())
        .collect();
    for v in a.mul_vec(&at_x).unwrap() {
        assert!((v - 1.0).abs() < 1e-10, "{v}");
    }
}
