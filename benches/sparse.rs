//! Sparse Jacobian benchmarks, each against a hand-written baseline in the
//! same run (values checked equal before timing):
//! (a) `ladder_200`: the sparse Jacobian of the 200-node diode-ladder
//!     residual (`sparse_jacobian_into_ladder`, warm, into caller storage)
//!     vs filling the analytic tridiagonal Jacobian into the same CSC arrays;
//! (b) `stencil_100x100`: the sparse Jacobian of a 5-point-stencil
//!     nonlinear residual `Δu - u³` on a 100 × 100 grid vs the hand fill;
//! (c) `newton_196`, `newton_2025`, `newton_20164`: one Newton step on the
//!     k × k resistor–diode grid of `examples/circuit.rs` (k = 14, 45, 142):
//!     residual and sparse Jacobian from one execution, `SparseLu`
//!     refactorisation and solve, vs the hand-written residual and analytic
//!     Jacobian solved by hand-written faer (`HandLu`: faer's low-level LU,
//!     everything reused); `lu_196` .. `lu_20164`: the factor + solve
//!     alone, `SparseLu` vs `HandLu`;
//! (d) `first_call_20000`: the first call of `sparse_jacobian_grid` for a
//!     new signature (trace, pattern, colouring, compressed program,
//!     compile, run), each iteration with a fresh signature;
//! (e) `arrow_2000`: an arrow Jacobian (one dense row, one dense column, the
//!     diagonal), which either one-sided colouring needs 2000 colours for
//!     and the bicolouring 3 (forward and reverse passes in one
//!     execution), vs the hand fill.
//!
//! (f) `dc_sensitivities_196` .. `_20164`: the power's gradient with
//!     respect to every source current and diode `Is` through `rlx::root`
//!     (`value_and_grad_dc_power` of `examples/circuit.rs`) vs the same
//!     Newton iteration and adjoint written by hand over faer.
//!
//! The colour counts (by columns, by rows, bidirectional) and the lower
//! bounds (the most nonzeros in a row / column) are printed before timing.
//!
//! Run: `cargo bench --bench sparse -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use faer_baseline as faer;

use criterion::{criterion_group, criterion_main, Criterion};
use rlx::prelude::*;
use rlx::sparse::Pattern;
use rlx::SparseMatrix;

#[path = "common/arrow.rs"]
mod arrow;
/// The circuits of `examples/circuit.rs` (its model; its `main` is not run here).
#[path = "../examples/circuit.rs"]
#[allow(dead_code)]
mod circuit;
#[path = "common/stencil.rs"]
mod stencil;
use arrow::{sparse_jacobian_arrow, sparse_jacobian_into_arrow};
use circuit::{
    sparse_jacobian_into_ladder, sparse_jacobian_ladder, I_SAT, R, R_LEAK, R_LOAD, R_SOURCE, V_T,
};
use stencil::{sparse_jacobian_into_stencil, sparse_jacobian_stencil, stencil_hand, stencil_rows};

/// The analytic ladder Jacobian written into `values` (the CSC order of
/// the tridiagonal pattern: column j holds rows j-1, j, j+1).
fn ladder_hand(v: &[f64], values: &mut [f64]) {
    let n = v.len();
    let mut k = 0;
    for (j, &vj) in v.iter().enumerate() {
        if j > 0 {
            values[k] = -1.0 / R;
            k += 1;
        }
        let g_left = if j == 0 { 1.0 / R_SOURCE } else { 1.0 / R };
        let g_right = if j + 1 < n { 1.0 / R } else { 1.0 / R_LOAD };
        values[k] = g_left + g_right + I_SAT / V_T * (vj / V_T).exp();
        k += 1;
        if j + 1 < n {
            values[k] = -1.0 / R;
            k += 1;
        }
    }
}

/// The grid residual of `examples/circuit.rs`, traced through its call;
/// `_tag` only makes a new signature (for the first-call benchmark).
#[differentiable(wrt(v))]
fn grid(v: &Tensor, vs: f64, i_src: &Tensor, k: usize, _tag: usize) -> Tensor {
    circuit::grid(v, vs, i_src, k)
}

/// The grid residual and its analytic Jacobian (CSC values), by hand.
fn grid_hand(v: &[f64], vs: f64, i_src: &[f64], k: usize, f: &mut [f64], values: &mut [f64]) {
    let mut p = 0;
    for c in 0..k * k {
        let i = c / k;
        let e = (v[c] / V_T).exp();
        let mut fc = I_SAT * (e - 1.0) + v[c] / R_LEAK - i_src[c];
        let mut d = I_SAT / V_T * e + 1.0 / R_LEAK;
        if i == 0 {
            fc += (v[c] - vs) / R_SOURCE;
            d += 1.0 / R_SOURCE;
        }
        stencil_rows(k, c, |r| {
            if r != c {
                fc += (v[c] - v[r]) / R;
                d += 1.0 / R;
            }
        });
        f[c] = fc;
        stencil_rows(k, c, |r| {
            values[p] = if r == c { d } else { -1.0 / R };
            p += 1;
        });
    }
}

fn assert_close(a: &[f64], b: &[f64]) {
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
    }
}

fn report(name: &str, p: &Pattern) {
    let b = rlx::core::colouring::bicolouring(p);
    eprintln!(
        "{name}: {} × {}, {} nonzeros; colours: {} by columns, {} by rows, {} + {} bidirectional; lower bounds (most nonzeros in a row / column): {} / {}",
        p.nrows(),
        p.ncols(),
        p.nnz(),
        rlx::core::colouring::columns(p).count(),
        rlx::core::colouring::rows(p).count(),
        b.forward(),
        b.reverse(),
        p.max_row_nnz(),
        p.max_col_nnz()
    );
}

fn bench_ladder(c: &mut Criterion) {
    let n = 200;
    let v: Vec<f64> = (0..n).map(|i| 0.6 + 0.01 * (i as f64).sin()).collect();
    let i_src = Tensor::from_slice(
        &(0..n)
            .map(|k| 1e-3 * (1.0 + (k % 7) as f64 / 7.0))
            .collect::<Vec<_>>(),
        [n],
    );
    let vt = Tensor::from_slice(&v, [n]);
    let mut jac = sparse_jacobian_ladder(&vt, 5.0, &i_src, n).unwrap();
    report("ladder_200", jac.pattern());
    let mut hand = jac.values().to_vec();
    ladder_hand(&v, &mut hand);
    assert_close(jac.values(), &hand);
    let mut group = c.benchmark_group("ladder_200");
    group.bench_function("rlx sparse_jacobian_into", |b| {
        b.iter(|| sparse_jacobian_into_ladder(black_box(&vt), 5.0, &i_src, n, &mut jac).unwrap())
    });
    group.bench_function("hand tridiagonal fill", |b| {
        b.iter(|| ladder_hand(black_box(&v), &mut hand))
    });
    group.finish();
}

fn bench_stencil(c: &mut Criterion) {
    let k = 100;
    let u: Vec<f64> = (0..k * k).map(|i| 0.3 * (i as f64 * 0.37).sin()).collect();
    let ut = Tensor::from_slice(&u, [k, k]);
    let mut jac = sparse_jacobian_stencil(&ut, k).unwrap();
    report("stencil_100x100", jac.pattern());
    let mut hand = jac.values().to_vec();
    stencil_hand(&u, k, &mut hand);
    assert_close(jac.values(), &hand);
    let mut group = c.benchmark_group("stencil_100x100");
    group.bench_function("rlx sparse_jacobian_into", |b| {
        b.iter(|| sparse_jacobian_into_stencil(black_box(&ut), k, &mut jac).unwrap())
    });
    group.bench_function("hand 5-point fill", |b| {
        b.iter(|| stencil_hand(black_box(&u), k, &mut hand))
    });
    group.finish();
}

/// The analytic arrow Jacobian in CSC order: column 0 holds rows `0..n`,
/// column `j > 0` rows 0 and `j`.
fn arrow_hand(x: &[f64], values: &mut [f64]) {
    let e = x[0].exp();
    values[0] = 2.0 * x[0];
    for (v, &xi) in values[1..x.len()].iter_mut().zip(&x[1..]) {
        *v = xi * e;
    }
    let mut p = x.len();
    for &xj in &x[1..] {
        values[p] = 2.0 * xj;
        values[p + 1] = e + xj.cos();
        p += 2;
    }
}

fn bench_arrow(c: &mut Criterion) {
    let n = 2000;
    let x: Vec<f64> = (0..n).map(|i| 0.3 * (i as f64 * 0.37).sin()).collect();
    let xt = Tensor::from_slice(&x, [n]);
    let mut jac = sparse_jacobian_arrow(&xt, n).unwrap();
    report("arrow_2000", jac.pattern());
    eprintln!("arrow_2000: least possible passes: 3 (1 dense row + 1 dense column + 1)");
    let mut hand = jac.values().to_vec();
    arrow_hand(&x, &mut hand);
    assert_close(jac.values(), &hand);
    let mut group = c.benchmark_group("arrow_2000");
    group.bench_function("rlx sparse_jacobian_into", |b| {
        b.iter(|| sparse_jacobian_into_arrow(black_box(&xt), n, &mut jac).unwrap())
    });
    group.bench_function("hand arrow fill", |b| {
        b.iter(|| arrow_hand(black_box(&x), &mut hand))
    });
    group.finish();
}

/// The fastest straightforward hand-written faer factor + solve: faer's
/// low-level sparse LU with everything reused across calls (the symbolic
/// factorisation, the `NumericLu` storage, one scratch buffer sized from
/// the symbolic's requirements), faer's default choice between its
/// simplicial and supernodal factorisations, sequential (this build has
/// no rayon). faer's high-level `Lu::try_new_with_symbolic`, which builds a
/// new numeric factor each call, measured 1.2–1.3x slower on these grids.
struct HandLu {
    symbolic: faer::sparse::linalg::lu::SymbolicLu<usize>,
    numeric: faer::sparse::linalg::lu::NumericLu<usize, f64>,
    scratch: faer::dyn_stack::MemBuffer,
}

impl HandLu {
    fn new(a: &SparseMatrix) -> HandLu {
        use faer::sparse::linalg::lu::{factorize_symbolic_lu, NumericLu};
        let symbolic = factorize_symbolic_lu(a.as_faer().symbolic(), Default::default()).unwrap();
        let req = symbolic
            .factorize_numeric_lu_scratch::<f64>(faer::Par::Seq, Default::default())
            .or(symbolic.solve_in_place_scratch::<f64>(1, faer::Par::Seq))
            .or(symbolic.solve_transpose_in_place_scratch::<f64>(1, faer::Par::Seq));
        HandLu {
            symbolic,
            numeric: NumericLu::new(),
            scratch: faer::dyn_stack::MemBuffer::new(req),
        }
    }

    fn factor_and_solve(&mut self, a: &SparseMatrix, b: &mut [f64]) {
        use faer::dyn_stack::MemStack;
        let lu = self
            .symbolic
            .factorize_numeric_lu(
                &mut self.numeric,
                a.as_faer(),
                faer::Par::Seq,
                MemStack::new(&mut self.scratch),
                Default::default(),
            )
            .unwrap();
        let n = b.len();
        lu.solve_in_place_with_conj(
            faer::Conj::No,
            faer::MatMut::from_column_major_slice_mut(b, n, 1),
            faer::Par::Seq,
            MemStack::new(&mut self.scratch),
        );
    }
}

impl HandLu {
    /// Factors `a` (numeric only).
    fn factor(&mut self, a: &SparseMatrix) {
        use faer::dyn_stack::MemStack;
        self.symbolic
            .factorize_numeric_lu(
                &mut self.numeric,
                a.as_faer(),
                faer::Par::Seq,
                MemStack::new(&mut self.scratch),
                Default::default(),
            )
            .unwrap();
    }

    /// Solves `A x = b` (or `Aᵀ x = b`) in place with the last factors.
    fn solve(&mut self, b: &mut [f64], transpose: bool) {
        use faer::dyn_stack::MemStack;
        use faer::sparse::linalg::lu::LuRef;
        // SAFETY-free: the numeric factors come from `factor` of this symbolic.
        let lu = LuRef::new_unchecked(&self.symbolic, &self.numeric);
        let n = b.len();
        let rhs = faer::MatMut::from_column_major_slice_mut(b, n, 1);
        let stack = MemStack::new(&mut self.scratch);
        if transpose {
            lu.solve_transpose_in_place_with_conj(faer::Conj::No, rhs, faer::Par::Seq, stack);
        } else {
            lu.solve_in_place_with_conj(faer::Conj::No, rhs, faer::Par::Seq, stack);
        }
    }
}

/// The grid residual alone, by hand (the line search's evaluations).
fn grid_residual(v: &[f64], vs: f64, i_src: &[f64], k: usize, f: &mut [f64]) {
    for (c, fc) in f.iter_mut().enumerate() {
        let mut out = I_SAT * ((v[c] / V_T).exp() - 1.0) + v[c] / R_LEAK - i_src[c];
        if c < k {
            out += (v[c] - vs) / R_SOURCE;
        }
        stencil_rows(k, c, |r| {
            if r != c {
                out += (v[c] - v[r]) / R;
            }
        });
        *fc = out;
    }
}

/// The hand-written DC sensitivities of `circuit::dc_power`: the Newton
/// iteration of `rlx::root` (full steps, Armijo backtracking on `‖F‖₂`,
/// stop at `max|F| <= 1e-12`, the Jacobian factored at the solution) with
/// the analytic Jacobian and [`HandLu`], then the adjoint with the same
/// factors: `λ = J⁻ᵀ ∂P/∂v` (one transposed solve) and `p̄ = −J_pᵀ λ` (`J_p`
/// is diagonal here: `−1` for a source current, `e^{v/V_T} − 1` for an
/// `Is`). Returns `(P, dP/d i_src, dP/d Is)`.
fn hand_dc(
    k: usize,
    vs: f64,
    src: &[f64],
    lu: &mut HandLu,
    jac: &mut SparseMatrix,
) -> (f64, Vec<f64>, Vec<f64>) {
    let n = k * k;
    let mut v = vec![0.6; n];
    let (mut f, mut ft, mut d, mut vt) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    grid_residual(&v, vs, src, k, &mut f);
    let two = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>().sqrt();
    for _ in 0..50 {
        grid_hand(&v, vs, src, k, &mut ft, jac.values_mut());
        lu.factor(jac);
        if f.iter().all(|x| x.abs() <= 1e-12) {
            break;
        }
        d.copy_from_slice(&f);
        lu.solve(&mut d, false);
        let norm = two(&f);
        let mut t = 1.0;
        for _ in 0..=30 {
            for ((x, a), b) in vt.iter_mut().zip(&v).zip(&d) {
                *x = a - t * b;
            }
            grid_residual(&vt, vs, src, k, &mut ft);
            if ft.iter().all(|x| x.is_finite()) && two(&ft) <= (1.0 - 1e-4 * t) * norm {
                break;
            }
            t *= 0.5;
        }
        std::mem::swap(&mut v, &mut vt);
        std::mem::swap(&mut f, &mut ft);
    }
    let p = vs * v[..k].iter().map(|x| (vs - x) / R_SOURCE).sum::<f64>();
    let mut lambda = vec![0.0; n];
    lambda[..k].fill(-vs / R_SOURCE);
    lu.solve(&mut lambda, true);
    let d_sat = lambda
        .iter()
        .zip(&v)
        .map(|(l, x)| -l * ((x / V_T).exp() - 1.0))
        .collect();
    (p, lambda, d_sat)
}

/// DC sensitivities on the `k × k` grid (k = 14, 45, 142): `rlx`'s
/// `value_and_grad_dc_power` (Newton by `rlx::root` on the sparse path,
/// then the implicit reverse pass) vs [`hand_dc`], the same Newton and
/// adjoint by hand with faer; the gradients checked equal first.
fn bench_dc_sensitivities(c: &mut Criterion) {
    for k in [14, 45, 142] {
        let n = k * k;
        let vs = 5.0;
        let src: Vec<f64> = (0..n)
            .map(|m| 2e-4 * (1.0 + (m % 7) as f64 / 7.0))
            .collect();
        let (src_t, sat_t) = (
            Tensor::from_slice(&src, [k, k]),
            Tensor::full([k, k], I_SAT, DType::F64),
        );
        let v0 = Tensor::full([k, k], 0.6, DType::F64);
        let (p, (g_src, g_sat)) = dc_power(&v0, vs, &src_t, &sat_t, k);
        let mut jac = sparse_jacobian_grid(&v0, vs, &src_t, k, 0).unwrap();
        let mut lu = HandLu::new(&jac);
        let (hp, h_src, h_sat) = hand_dc(k, vs, &src, &mut lu, &mut jac);
        assert!((p - hp).abs() <= 1e-10 * p.abs(), "power {p} vs {hp}");
        for (a, b) in [(g_src, h_src), (g_sat, h_sat)] {
            let a = a.to_vec::<f64>().unwrap();
            let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() <= 1e-8 * scale, "gradient {x} vs {y}");
            }
        }
        let mut group = c.benchmark_group(format!("dc_sensitivities_{n}"));
        group.sample_size(if n > 10_000 { 10 } else { 30 });
        group.bench_function("rlx value_and_grad through rlx::root", |b| {
            b.iter(|| dc_power(black_box(&v0), vs, &src_t, &sat_t, k))
        });
        group.bench_function("hand Newton + faer LU + transposed solve", |b| {
            b.iter(|| hand_dc(k, vs, black_box(&src), &mut lu, &mut jac))
        });
        group.finish();
    }
}

/// `circuit::dc_power`'s value and gradient.
fn dc_power(v0: &Tensor, vs: f64, src: &Tensor, sat: &Tensor, k: usize) -> (f64, (Tensor, Tensor)) {
    circuit::value_and_grad_dc_power(v0, vs, src, sat, k).unwrap()
}

/// One Newton step on the `k × k` resistor–diode grid of
/// `examples/circuit.rs` (k = 14, 45, 142: 196, 2 025, 20 164 unknowns):
/// residual and sparse Jacobian from one execution, `SparseLu` factor and
/// solve, vs the hand-written residual and analytic Jacobian solved by
/// hand-written faer ([`HandLu`]); then factor + solve alone, `SparseLu`
/// vs [`HandLu`], on the same matrix.
fn bench_newton(c: &mut Criterion) {
    for k in [14, 45, 142] {
        let n = k * k;
        let vs = 5.0;
        let src: Vec<f64> = (0..n)
            .map(|m| 2e-4 * (1.0 + (m % 7) as f64 / 7.0))
            .collect();
        let i_src = Tensor::from_slice(&src, [k, k]);
        let v: Vec<f64> = (0..n)
            .map(|m| 0.55 + 0.05 * (m as f64 * 0.1).sin())
            .collect();
        let vt = Tensor::from_slice(&v, [k, k]);
        let mut jac = sparse_jacobian_grid(&vt, vs, &i_src, k, 0).unwrap();
        report(&format!("newton_{n}"), jac.pattern());
        let mut lu = SparseLu::new(jac.pattern()).unwrap();
        let mut hand_lu = HandLu::new(&jac);
        let (mut f, mut dv) = (vec![0.0; n], vec![0.0; n]);
        let mut hand_j = jac.clone();
        let (mut hand_f, mut hand_dv) = (vec![0.0; n], vec![0.0; n]);
        value_and_sparse_jacobian_into_grid(&vt, vs, &i_src, k, 0, &mut f, &mut jac).unwrap();
        grid_hand(&v, vs, &src, k, &mut hand_f, hand_j.values_mut());
        assert_close(jac.values(), hand_j.values());
        assert_close(&f, &hand_f);
        lu.factor(&jac).unwrap();
        dv.copy_from_slice(&f);
        lu.solve_in_place(&mut dv).unwrap();
        hand_dv.copy_from_slice(&f);
        hand_lu.factor_and_solve(&jac, &mut hand_dv);
        assert_eq!(dv, hand_dv, "SparseLu and hand faer differ");
        let mut group = c.benchmark_group(format!("newton_{n}"));
        group.sample_size(if n > 10_000 { 20 } else { 50 });
        group.bench_function("rlx residual + sparse Jacobian + SparseLu", |b| {
            b.iter(|| {
                value_and_sparse_jacobian_into_grid(
                    black_box(&vt),
                    vs,
                    &i_src,
                    k,
                    0,
                    &mut f,
                    &mut jac,
                )
                .unwrap();
                lu.factor(&jac).unwrap();
                dv.copy_from_slice(&f);
                lu.solve_in_place(&mut dv).unwrap();
            })
        });
        group.bench_function("hand residual + analytic Jacobian + faer LU", |b| {
            b.iter(|| {
                grid_hand(black_box(&v), vs, &src, k, &mut hand_f, hand_j.values_mut());
                hand_dv.copy_from_slice(&hand_f);
                hand_lu.factor_and_solve(&hand_j, &mut hand_dv);
            })
        });
        group.finish();
        let mut group = c.benchmark_group(format!("lu_{n}"));
        group.sample_size(if n > 10_000 { 20 } else { 50 });
        group.bench_function("SparseLu factor + solve", |b| {
            b.iter(|| {
                lu.factor(black_box(&jac)).unwrap();
                dv.copy_from_slice(&f);
                lu.solve_in_place(&mut dv).unwrap();
            })
        });
        group.bench_function("hand faer factor + solve", |b| {
            b.iter(|| {
                hand_dv.copy_from_slice(&f);
                hand_lu.factor_and_solve(black_box(&jac), &mut hand_dv);
            })
        });
        group.finish();
    }
}

fn bench_first_call(c: &mut Criterion) {
    let k = 142;
    let i_src = Tensor::full([k, k], 2e-4, DType::F64);
    let vt = Tensor::full([k, k], 0.6, DType::F64);
    static TAG: AtomicUsize = AtomicUsize::new(1);
    let mut group = c.benchmark_group("first_call_20000");
    group.sample_size(10);
    group.bench_function("rlx sparse_jacobian (new signature)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let tag = TAG.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                black_box(sparse_jacobian_grid(&vt, 5.0, &i_src, k, tag).unwrap());
                total += t.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_ladder,
    bench_stencil,
    bench_newton,
    bench_first_call,
    bench_arrow,
    bench_dc_sensitivities
);
criterion_main!(benches);
