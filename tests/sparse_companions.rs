//! The sparse companions (`sparse_jacobian_f`, `value_and_sparse_jacobian_f`,
//! `sparse_hessian_f`, the `*_into` forms, `value_and_jacobian_f`): equal to
//! the dense companions, to central finite differences, and their errors.

use rlx::prelude::*;

#[path = "../benches/common/arrow.rs"]
mod arrow;
#[path = "../benches/common/stencil.rs"]
mod stencil;
use arrow::{
    arrow, jacobian_arrow, sparse_jacobian_arrow, sparse_jacobian_into_arrow,
    value_and_sparse_jacobian_arrow,
};
use stencil::{jacobian_stencil, sparse_jacobian_stencil, stencil, stencil_hand};

const R: f64 = 50.0;
const I_SAT: f64 = 1e-14;
const V_T: f64 = 0.025_85;

/// The diode ladder of `examples/circuit.rs`: a tridiagonal Jacobian.
#[differentiable(wrt(v))]
fn ladder(v: &Tensor, vs: f64, n: usize) -> Tensor {
    let left = Tensor::concat(&[&vs.reshape([1]), &v.slice_range(0..n - 1, 0)], 0);
    let right = Tensor::concat(
        &[&v.slice_range(1..n, 0), &Tensor::zeros([1], DType::F64)],
        0,
    );
    let diode = ((v / V_T).exp() - 1.0) * I_SAT;
    (v - &left) / R + (v - &right) / R + diode
}

/// One dense row (`y_0 = Σ x²`) and a diagonal: reverse mode needs two
/// colours where forward mode needs one per column.
#[differentiable]
fn dense_row(x: &Tensor, n: usize) -> Tensor {
    let head = x.square().sum_all().reshape([1]);
    Tensor::concat(&[&head, &x.slice_range(1..n, 0).sin()], 0)
}

/// A dense Jacobian: `y_i = sin(x_i) · Σ x`.
#[differentiable]
fn dense(x: &Tensor) -> Tensor {
    x.sin() * x.sum_all()
}

/// Two parameters: `y_i = a_i · b_{i+1} + exp(a_i)`, and a scalar.
#[differentiable]
fn two(a: &Tensor, b: &Tensor, s: f64, n: usize) -> Tensor {
    a * b.slice_range(1..1 + n, 0) + a.exp() * &s
}

/// A chain energy with a tridiagonal Hessian.
#[differentiable]
fn chain(x: &Tensor, n: usize) -> f64 {
    let d = x.slice_range(1..n, 0) - x.slice_range(0..n - 1, 0);
    d.powi(4).sum_all() + x.cos().sum_all()
}

fn points(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 10_000) as f64 / 10_000.0 - 0.5
        })
        .collect()
}

fn assert_close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "element {i}: {x} vs {y}"
        );
    }
}

/// Column `j` of `∂f/∂x` by central differences.
fn fd_column(f: &dyn Fn(&[f64]) -> Vec<f64>, x: &[f64], j: usize) -> Vec<f64> {
    let h = 1e-6;
    let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
    xp[j] += h;
    xm[j] -= h;
    let (fp, fm) = (f(&xp), f(&xm));
    fp.iter()
        .zip(&fm)
        .map(|(p, m)| (p - m) / (2.0 * h))
        .collect()
}

/// Checks a sparse Jacobian against the dense one and finite differences,
/// and that every entry outside its pattern is exactly zero in the dense one.
fn check(j: &SparseMatrix, dense: &Tensor, f: &dyn Fn(&[f64]) -> Vec<f64>, x: &[f64]) {
    let d = dense.to_vec::<f64>().unwrap();
    assert_eq!(j.to_dense().to_vec::<f64>().unwrap(), d, "sparse vs dense");
    for c in 0..j.ncols() {
        let col: Vec<f64> = (0..j.nrows()).map(|r| j.get(r, c)).collect();
        assert_close(&col, &fd_column(f, x, c), 1e-6);
    }
}

#[test]
fn ladder_sparse_jacobian_is_tridiagonal_and_exact() {
    let n = 30;
    let v: Vec<f64> = points(n, 1).iter().map(|p| 0.6 + 0.1 * p).collect();
    let vt = Tensor::from_slice(&v, [n]);
    let j = sparse_jacobian_ladder(&vt, 5.0, n).unwrap();
    assert_eq!((j.nrows(), j.ncols(), j.nnz()), (n, n, 3 * n - 2));
    let dense = jacobian_ladder(&vt, 5.0, n).unwrap();
    let f = |x: &[f64]| {
        ladder(&Tensor::from_slice(x, [n]), 5.0, n)
            .to_vec::<f64>()
            .unwrap()
    };
    check(&j, &dense, &f, &v);
    // Value and Jacobian from one execution agree with the separate calls.
    let (r, j2) = value_and_sparse_jacobian_ladder(&vt, 5.0, n).unwrap();
    assert_eq!(r.to_vec::<f64>().unwrap(), f(&v));
    assert_eq!(j2, j);
    let (r3, d3) = value_and_jacobian_ladder(&vt, 5.0, n).unwrap();
    assert_eq!(r3.to_vec::<f64>().unwrap(), f(&v));
    assert_eq!(d3.to_vec::<f64>().unwrap(), dense.to_vec::<f64>().unwrap());
}

#[test]
fn stencil_pattern_is_the_five_point_stencil() {
    let k = 6;
    let u = points(k * k, 2);
    let ut = Tensor::from_slice(&u, [k, k]);
    let j = sparse_jacobian_stencil(&ut, k).unwrap();
    // 5 per interior row, fewer at the boundary: 5k² - 4k.
    assert_eq!(j.nnz(), 5 * k * k - 4 * k);
    let dense = jacobian_stencil(&ut, k).unwrap();
    let f = |x: &[f64]| {
        stencil(&Tensor::from_slice(x, [k, k]), k)
            .to_vec::<f64>()
            .unwrap()
    };
    check(&j, &dense.reshape([k * k, k * k]), &f, &u);
    // Its linear part's entries are constants of the compressed program:
    // the values still equal the analytic Jacobian.
    let mut hand = vec![0.0; j.nnz()];
    stencil_hand(&u, k, &mut hand);
    for (a, b) in j.values().iter().zip(&hand) {
        assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
    }
}

#[test]
fn dense_rows_columns_and_several_parameters() {
    let n = 12;
    let x = points(n, 3);
    let xt = Tensor::from_slice(&x, [n]);
    // One dense row (reverse mode is picked).
    let j = sparse_jacobian_dense_row(&xt, n).unwrap();
    assert_eq!(j.nnz(), n + n - 1);
    let f = |x: &[f64]| {
        dense_row(&Tensor::from_slice(x, [n]), n)
            .to_vec::<f64>()
            .unwrap()
    };
    check(&j, &jacobian_dense_row(&xt, n).unwrap(), &f, &x);
    // A dense Jacobian gets a dense pattern.
    let j = sparse_jacobian_dense(&xt).unwrap();
    assert_eq!(j.nnz(), n * n);
    let f = |x: &[f64]| dense(&Tensor::from_slice(x, [n])).to_vec::<f64>().unwrap();
    check(&j, &jacobian_dense(&xt).unwrap(), &f, &x);
    // Two tensors and a scalar: columns are a, then b, then s.
    let (a, b) = (points(n, 4), points(n + 1, 5));
    let (at, bt) = (Tensor::from_slice(&a, [n]), Tensor::from_slice(&b, [n + 1]));
    let j = sparse_jacobian_two(&at, &bt, 0.7, n).unwrap();
    assert_eq!((j.nrows(), j.ncols()), (n, 2 * n + 2));
    assert_eq!(j.nnz(), 3 * n);
    let (ja, jb, js) = jacobian_two(&at, &bt, 0.7, n).unwrap();
    let (ja, jb, js) = (
        ja.to_vec::<f64>().unwrap(),
        jb.to_vec::<f64>().unwrap(),
        js.to_vec::<f64>().unwrap(),
    );
    let mut joined = Vec::new();
    for r in 0..n {
        joined.extend_from_slice(&ja[r * n..(r + 1) * n]);
        joined.extend_from_slice(&jb[r * (n + 1)..(r + 1) * (n + 1)]);
        joined.push(js[r]);
    }
    assert_eq!(j.to_dense().to_vec::<f64>().unwrap(), joined);
}

#[test]
fn sparse_hessian_equals_the_dense_one_and_is_symmetric() {
    let n = 15;
    let x = points(n, 6);
    let xt = Tensor::from_slice(&x, [n]);
    let h = sparse_hessian_chain(&xt, n).unwrap();
    assert_eq!(h.nnz(), 3 * n - 2);
    assert!(h.pattern().is_symmetric());
    let d = hessian_chain(&xt, n).unwrap().to_vec::<f64>().unwrap();
    assert_close(&h.to_dense().to_vec::<f64>().unwrap(), &d, 1e-12);
    for (r, c) in h.pattern().entries() {
        assert_eq!(h.get(r, c), h.get(c, r));
    }
    // Against finite differences of the gradient.
    let g = |x: &[f64]| {
        grad_chain(&Tensor::from_slice(x, [n]), n)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    for c in 0..n {
        let col: Vec<f64> = (0..n).map(|r| h.get(r, c)).collect();
        assert_close(&col, &fd_column(&g, &x, c), 1e-6);
    }
}

#[test]
fn an_arrow_from_forward_and_reverse_passes_equals_dense_and_finite_differences() {
    let n = 25;
    let x = points(n, 9);
    let xt = Tensor::from_slice(&x, [n]);
    let j = sparse_jacobian_arrow(&xt, n).unwrap();
    // Row 0, column 0 below it, the diagonal below it.
    assert_eq!(j.nnz(), n + 2 * (n - 1));
    let dense = jacobian_arrow(&xt, n).unwrap().to_vec::<f64>().unwrap();
    // Entries read from reverse passes may differ from the dense
    // (forward) Jacobian in the last bit.
    assert_close(&j.to_dense().to_vec::<f64>().unwrap(), &dense, 1e-14);
    let f = |x: &[f64]| {
        arrow(&Tensor::from_slice(x, [n]), n)
            .to_vec::<f64>()
            .unwrap()
    };
    for c in 0..n {
        let col: Vec<f64> = (0..n).map(|r| j.get(r, c)).collect();
        assert_close(&col, &fd_column(&f, &x, c), 1e-6);
    }
    // The value from the same execution, and the caller-storage form.
    let (r, j2) = value_and_sparse_jacobian_arrow(&xt, n).unwrap();
    assert_eq!(r.to_vec::<f64>().unwrap(), f(&x));
    assert_eq!(j2, j);
    let mut j3 = SparseMatrix::zeros(j.pattern().clone());
    sparse_jacobian_into_arrow(&xt, n, &mut j3).unwrap();
    assert_eq!(j3, j);
}

#[test]
fn into_forms_write_the_same_values() {
    let n = 20;
    let v: Vec<f64> = points(n, 7).iter().map(|p| 0.5 + 0.1 * p).collect();
    let vt = Tensor::from_slice(&v, [n]);
    let want = sparse_jacobian_ladder(&vt, 5.0, n).unwrap();
    let mut j = SparseMatrix::zeros(want.pattern().clone());
    sparse_jacobian_into_ladder(&vt, 5.0, n, &mut j).unwrap();
    assert_eq!(j, want);
    let mut r = vec![0.0; n];
    let mut j2 = want.clone();
    j2.values_mut().fill(0.0);
    value_and_sparse_jacobian_into_ladder(&vt, 5.0, n, &mut r, &mut j2).unwrap();
    assert_eq!(j2, want);
    assert_eq!(r, ladder(&vt, 5.0, n).to_vec::<f64>().unwrap());
    // The Hessian's caller-storage form.
    let x = Tensor::from_slice(&points(n, 10), [n]);
    let want = sparse_hessian_chain(&x, n).unwrap();
    let mut h = SparseMatrix::zeros(want.pattern().clone());
    sparse_hessian_into_chain(&x, n, &mut h).unwrap();
    assert_eq!(h, want);
}

#[test]
fn bad_input_is_an_error_that_says_what_was_expected() {
    let n = 10;
    let vt = Tensor::full([n], 0.5, DType::F64);
    // Storage of another signature's pattern.
    let other =
        sparse_jacobian_ladder(&Tensor::full([n + 1], 0.5, DType::F64), 5.0, n + 1).unwrap();
    let mut wrong = other.clone();
    let e = sparse_jacobian_into_ladder(&vt, 5.0, n, &mut wrong).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("11 × 11") && msg.contains("10 × 10"), "{msg}");
    assert!(msg.contains("sparse_jacobian_ladder"), "{msg}");
    // Same size and count, other positions.
    let good = sparse_jacobian_ladder(&vt, 5.0, n).unwrap();
    let mut e = good.pattern().entries().collect::<Vec<_>>();
    e[1] = (e[1].0 + 2, e[1].1);
    let shifted = rlx::sparse::Pattern::from_entries(n, n, &e).unwrap();
    let mut wrong = SparseMatrix::zeros(shifted);
    let msg = sparse_jacobian_into_ladder(&vt, 5.0, n, &mut wrong)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("at other positions"), "{msg}");
    // A value buffer of the wrong length.
    let mut j = good.clone();
    let msg = value_and_sparse_jacobian_into_ladder(&vt, 5.0, n, &mut [0.0; 3], &mut j)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("expected 10, got 3"), "{msg}");
    // A non-scalar output given to sparse_hessian_.
    let msg = sparse_hessian_ladder(&vt, 5.0, n).unwrap_err().to_string();
    assert!(
        msg.contains("shape [10]") && msg.contains("scalar"),
        "{msg}"
    );
    // Hessian storage of another pattern (an 11-node ladder's Jacobian;
    // the 10-node one has the Hessian's pattern, and is accepted).
    let x = Tensor::full([n], 0.5, DType::F64);
    let msg = sparse_hessian_into_chain(&x, n, &mut other.clone())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("sparse_hessian_into")
            && msg.contains("Hessian of `chain`")
            && msg.contains("is 10 × 10 with 28 nonzeros")
            && msg.contains("sparse_hessian_chain"),
        "{msg}"
    );
    // A wrong argument shape: the usual input error.
    let msg = sparse_jacobian_stencil(&vt, 3).unwrap_err().to_string();
    assert!(msg.contains("stencil"), "{msg}");
}

#[test]
fn sparse_lu_solves_and_reports_singular_matrices() {
    let n = 40;
    let v: Vec<f64> = points(n, 8).iter().map(|p| 0.6 + 0.05 * p).collect();
    let vt = Tensor::from_slice(&v, [n]);
    let (r, j) = value_and_sparse_jacobian_ladder(&vt, 5.0, n).unwrap();
    let mut lu = SparseLu::new(j.pattern()).unwrap();
    lu.factor(&j).unwrap();
    let mut x = r.to_vec::<f64>().unwrap();
    lu.solve_in_place(&mut x).unwrap();
    let back = j.mul_vec(&x).unwrap();
    assert_close(&back, &r.to_vec::<f64>().unwrap(), 1e-10);
    // Same as the dense solve.
    let dense = jacobian_ladder(&vt, 5.0, n).unwrap();
    let xd = dense
        .try_solve(&r.reshape([n, 1]))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_close(&x, &xd, 1e-9);
    // faer round trip.
    let f = j.to_faer();
    assert_eq!(SparseMatrix::from_faer(f.as_ref()).unwrap(), j);
    // Numerically singular: two equal rows.
    let p = rlx::sparse::Pattern::dense(2, 2);
    let a = SparseMatrix::new(p.clone(), vec![1.0, 1.0, 2.0, 2.0]).unwrap();
    let mut lu = SparseLu::new(&p).unwrap();
    let e = lu
        .factor(&a)
        .and_then(|()| lu.solve_in_place(&mut [1.0, 2.0]))
        .unwrap_err();
    assert!(e.to_string().contains("singular"), "{e}");
    // Structurally singular: an empty column.
    let p = rlx::sparse::Pattern::from_entries(2, 2, &[(0, 0), (1, 0)]).unwrap();
    let a = SparseMatrix::new(p.clone(), vec![1.0, 2.0]).unwrap();
    let e = SparseLu::new(&p)
        .and_then(|mut lu| lu.factor(&a))
        .unwrap_err();
    assert!(e.to_string().contains("singular"), "{e}");
    // A matrix of another pattern.
    let mut lu = SparseLu::new(j.pattern()).unwrap();
    let e = lu.factor(&a).unwrap_err();
    assert!(e.to_string().contains("not the one"), "{e}");
}

/// A time loop: `x ← x + 0.1·sin(x)·x_{i+1}` (cyclic neighbour) for 3 steps.
#[differentiable]
fn looped(x: &Tensor, n: usize) -> Tensor {
    rlx::iterate(x.clone(), 3, |x| {
        let next = Tensor::concat(&[&x.slice_range(1..n, 0), &x.slice_range(0..1, 0)], 0);
        &x + x.sin() * next * 0.1
    })
}

#[test]
fn a_loop_gets_a_conservative_pattern_and_exact_values() {
    let n = 6;
    let x = points(n, 9);
    let xt = Tensor::from_slice(&x, [n]);
    let j = sparse_jacobian_looped(&xt, n).unwrap();
    // The loop node is propagated conservatively: every output depends on
    // every input, so the pattern is dense (never missing a nonzero).
    assert_eq!(j.nnz(), n * n);
    let f = |x: &[f64]| {
        looped(&Tensor::from_slice(x, [n]), n)
            .to_vec::<f64>()
            .unwrap()
    };
    let d = jacobian_looped(&xt, n).unwrap();
    assert_close(
        &j.to_dense().to_vec::<f64>().unwrap(),
        &d.to_vec::<f64>().unwrap(),
        1e-14,
    );
    for c in 0..n {
        let col: Vec<f64> = (0..n).map(|r| j.get(r, c)).collect();
        assert_close(&col, &fd_column(&f, &x, c), 1e-6);
    }
}
