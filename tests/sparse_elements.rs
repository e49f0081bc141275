//! Sparse Hessians of sums of element terms, assembled element by element
//! (`SparseMode::Elements`), against the dense Hessian, the star colouring
//! of the same graph, central differences of the gradient and, for the
//! minimal-surface objective, the Hessian assembled by hand (the
//! benchmark's baseline).

use rlx::autodiff::transforms::sparse::{sparse_hessian, sparse_hessian_by, SparseMode};
use rlx::prelude::*;
use rlx::SparseMatrix;

#[path = "../benches/common/msa.rs"]
mod msa;
use msa::{
    grad_msa_area, graph_msa_area, hessian_msa_area, msa_hessian_hand, msa_slots,
    sparse_hessian_into_msa_area, sparse_hessian_msa_area, Msa,
};

fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}: entry {k}: {x} vs {y}"
        );
    }
}

/// Column `c` of the Hessian by central differences of the gradient.
fn fd_column(grad: &dyn Fn(&[f64]) -> Vec<f64>, x: &[f64], c: usize) -> Vec<f64> {
    let h = 1e-5 * (1.0 + x[c].abs());
    let (mut up, mut dn) = (x.to_vec(), x.to_vec());
    up[c] += h;
    dn[c] -= h;
    let (gu, gd) = (grad(&up), grad(&dn));
    gu.iter()
        .zip(&gd)
        .map(|(u, d)| (u - d) / (2.0 * h))
        .collect()
}

fn dense(h: &SparseMatrix) -> Vec<f64> {
    h.to_dense().to_vec::<f64>().unwrap()
}

/// Every column of `h` against central differences of `grad` at `x`.
fn columns_match_differences(
    h: &SparseMatrix,
    grad: &dyn Fn(&[f64]) -> Vec<f64>,
    x: &[f64],
    tol: f64,
) {
    let n = x.len();
    let full = dense(h);
    for c in 0..n {
        let col: Vec<f64> = (0..n).map(|r| full[r * n + c]).collect();
        assert_close(&col, &fd_column(grad, x, c), tol, &format!("column {c}"));
    }
}

#[test]
fn the_minimal_surface_hessian_is_assembled_from_three_products_per_triangle() {
    let (nx, ny) = (6, 5);
    let m = Msa::new(nx, ny);
    let v = Tensor::from_slice(&m.start(), [nx * ny]);
    // The traced graph takes the element path: 3 products (one per vertex
    // of a triangle), where the star colouring needs 9 colours.
    let g = rlx::core::passes::reroll(&graph_msa_area(&v, nx, ny).unwrap()).unwrap();
    let e = sparse_hessian(&g, &[0]).unwrap();
    let s = sparse_hessian_by(&g, &[0], SparseMode::Star).unwrap();
    assert_eq!((e.mode, e.colours), (SparseMode::Elements, 3));
    assert_eq!(s.mode, SparseMode::Star);
    assert!(s.colours >= 7, "{}", s.colours);
    assert_eq!(e.pattern, s.pattern);
    let run = |p: &rlx::autodiff::transforms::sparse::SparseProgram| {
        rlx::compile(&p.graph).unwrap().run(&[&v]).unwrap()[1]
            .to_vec::<f64>()
            .unwrap()
    };
    assert_close(&run(&e), &run(&s), 1e-12, "elements vs star");

    // The companion: against the dense Hessian, the hand assembly and
    // central differences of the gradient.
    let h = sparse_hessian_msa_area(&v, nx, ny).unwrap();
    assert_eq!(h.pattern(), &e.pattern);
    let d = hessian_msa_area(&v, nx, ny)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_close(&dense(&h), &d, 1e-12, "sparse vs dense");
    let slots = msa_slots(&m, h.pattern());
    let mut hand = vec![0.0; h.nnz()];
    msa_hessian_hand(&m, &slots, &v.to_vec::<f64>().unwrap(), &mut hand);
    assert_close(h.values(), &hand, 1e-12, "rlx vs hand");
    let grad = |x: &[f64]| {
        grad_msa_area(&Tensor::from_slice(x, [nx * ny]), nx, ny)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    let x = m.start();
    columns_match_differences(&h, &grad, &x, 1e-6);
    // The into form writes the same values, into the same storage.
    let mut into = h.clone();
    into.values_mut().fill(f64::NAN);
    sparse_hessian_into_msa_area(&v, nx, ny, &mut into).unwrap();
    assert_eq!(into.values(), h.values());
}

/// Extended Rosenbrock (the terms on slices of `x`), plus terms the
/// assembly does not cover (a coupling through `(Σ x)²`, a product of two
/// unknowns), minus a scaled mean of element terms weighted by an input.
#[differentiable(wrt(x))]
fn mixed(x: &Tensor, w: &Tensor, n: usize) -> f64 {
    let a = x.slice_range(1..n, 0);
    let b = x.slice_range(0..n - 1, 0);
    let rosen = (100.0 * (&a - b.square()).square() + (1.0 - &b).square()).sum_all();
    let coupling = x.sum_all().square() * 0.01;
    let ends = x.slice_range(0..1, 0).sum_all() * x.slice_range(n - 1..n, 0).sum_all();
    let mean = (x.sin() * w).mean_all();
    rosen + coupling - ends - 0.5 * mean
}

#[test]
fn element_sums_with_other_terms_equal_the_dense_hessian_and_finite_differences() {
    let n = 12;
    let x: Vec<f64> = (0..n).map(|i| 0.3 + 0.1 * (i as f64 * 1.7).sin()).collect();
    let xt = Tensor::from_slice(&x, [n]);
    let w = Tensor::from_slice(&(0..n).map(|i| 1.0 + i as f64).collect::<Vec<_>>(), [n]);
    let g = rlx::core::passes::reroll(&graph_mixed(&xt, &w, n).unwrap()).unwrap();
    let e = sparse_hessian(&g, &[0]).unwrap();
    // Two element sums (Rosenbrock's terms read 2 unknowns, the mean's 1)
    // and the rest by a star colouring of its (dense) pattern.
    assert_eq!((e.mode, e.colours), (SparseMode::Elements, 2 + 1 + n));
    // The coupling makes the pattern dense.
    assert_eq!(e.pattern.nnz(), n * n);
    let h = sparse_hessian_mixed(&xt, &w, n).unwrap();
    let d = hessian_mixed(&xt, &w, n).unwrap().to_vec::<f64>().unwrap();
    assert_close(&dense(&h), &d, 1e-12, "sparse vs dense");
    let grad = |x: &[f64]| {
        grad_mixed(&Tensor::from_slice(x, [n]), &w, n)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    columns_match_differences(&h, &grad, &x, 1e-5);
}

/// A 2-D P1 finite-element energy on the MSA grid's triangles:
/// `Σ_T |T| (½ |∇u|² + ū⁴/4 − ū)`, with `∇u` constant on each triangle
/// (its legs run along x and y) and `ū` the mean of its vertex values.
#[differentiable(wrt(v))]
fn p1_energy(v: &Tensor, nx: usize, ny: usize) -> f64 {
    let m = Msa::new(nx, ny);
    let (a, b, c) = m.vertices(v);
    let p = (&b - &a) / m.hx;
    let q = (&c - &a) / m.hy;
    let mean = (a + b + c) / 3.0;
    let density = 0.5 * (p.square() + q.square()) + mean.powi(4) / 4.0 - mean;
    density.sum_all() * (m.hx * m.hy / 2.0)
}

#[test]
fn a_p1_finite_element_energy_is_assembled_per_triangle() {
    let (nx, ny) = (7, 4);
    let m = Msa::new(nx, ny);
    let x = m.start();
    let n = nx * ny;
    let v = Tensor::from_slice(&x, [n]);
    let g = rlx::core::passes::reroll(&graph_p1_energy(&v, nx, ny).unwrap()).unwrap();
    let e = sparse_hessian(&g, &[0]).unwrap();
    assert_eq!((e.mode, e.colours), (SparseMode::Elements, 3));
    let h = sparse_hessian_p1_energy(&v, nx, ny).unwrap();
    let d = hessian_p1_energy(&v, nx, ny)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_close(&dense(&h), &d, 1e-12, "sparse vs dense");
    let grad = |x: &[f64]| {
        grad_p1_energy(&Tensor::from_slice(x, [n]), nx, ny)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    columns_match_differences(&h, &grad, &x, 1e-6);
}

#[test]
fn a_nan_in_one_element_stays_in_the_entries_it_touches() {
    let (nx, ny) = (5, 5);
    let m = Msa::new(nx, ny);
    let mut x = m.start();
    let v = Tensor::from_slice(&x, [nx * ny]);
    let clean = sparse_hessian_msa_area(&v, nx, ny).unwrap();
    // Unknown 0 (grid point (1, 1)) is NaN: every entry in its row and
    // column is NaN; an entry between unknowns far from it is unchanged.
    x[0] = f64::NAN;
    let h = sparse_hessian_msa_area(&Tensor::from_slice(&x, [nx * ny]), nx, ny).unwrap();
    for (r, c) in h.pattern().entries() {
        let (got, want) = (h.get(r, c), clean.get(r, c));
        if r == 0 || c == 0 {
            assert!(got.is_nan(), "({r}, {c}): {got}");
        } else if r >= 2 * ny && c >= 2 * ny {
            assert_eq!(got.to_bits(), want.to_bits(), "({r}, {c})");
        }
    }
}

#[test]
fn element_assembly_is_an_error_where_there_are_no_element_sums() {
    // f = (Σ x)²: no element term.
    let mut g = rlx::Graph::new();
    let x = g.input("x", [10], DType::F64);
    let s = g.sum_all(x).unwrap();
    let f = g.square(s).unwrap();
    g.set_outputs(vec![f]);
    let e = sparse_hessian_by(&g, &[0], SparseMode::Elements).unwrap_err();
    assert!(e.to_string().contains("SparseMode::Star"), "{e}");
    assert_eq!(sparse_hessian(&g, &[0]).unwrap().mode, SparseMode::Star);
    let e = sparse_hessian_by(&g, &[0], SparseMode::Forward).unwrap_err();
    assert!(e.to_string().contains("`Star` or `Elements`"), "{e}");
}
