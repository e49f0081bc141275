//! `rlx::root` on the sparse path: a 120-unknown chain whose Jacobian is
//! tridiagonal, solved with the coloured sparse Jacobian and faer's sparse
//! LU, against the dense path on the same problem (values, gradients,
//! Jacobians), against central differences of the whole solve, forward
//! against reverse, second order against differences of the gradient; the
//! rule that picks the path; errors met on the sparse path.

use rlx::prelude::*;
use rlx::{JacobianKind, Newton};

const N: usize = 120;

/// `F(x) = x³ + x + k L x + 0.1 sin(x) p − p` with `L` the 1-D Laplacian
/// (zero boundary): strictly monotone for `k >= 0`, `p ∈ (0, 5)`.
fn residual(x: &Tensor, p: &Tensor, k: &Tensor) -> Tensor {
    let z = Tensor::zeros([1], DType::F64);
    let left = Tensor::concat(&[&z, &x.slice_range(0..N - 1, 0)], 0);
    let right = Tensor::concat(&[&x.slice_range(1..N, 0), &z], 0);
    let lap = x * 2.0 - left - right;
    x * x * x + x + lap * k + x.sin() * p * 0.1 - p
}

fn newton(sparse: bool) -> Newton {
    let kind = if sparse {
        JacobianKind::Sparse
    } else {
        JacobianKind::Dense
    };
    Newton::new().tol(1e-13).jacobian(kind)
}

/// A loss at the root.
#[differentiable]
fn solved(p: &Tensor, k: f64, sparse: bool) -> f64 {
    let x0 = p * 0.0;
    let x = rlx::root(|x| residual(x, p, &k), &x0, newton(sparse))?;
    let w = Tensor::arange(N, DType::F64) / N as f64 + 1.0;
    (x.square() * w).sum_all() + x.sin().sum_all()
}

/// The root itself.
#[differentiable]
fn solution(p: &Tensor, k: f64, sparse: bool) -> Tensor {
    let x0 = p * 0.0;
    rlx::root(|x| residual(x, p, &k), &x0, newton(sparse))?
}

/// Deterministic pseudo-random numbers in `[0, 1)`.
fn rand(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

fn params(seed: u64) -> Tensor {
    let p: Vec<f64> = rand(seed, N).iter().map(|r| 0.5 + 2.0 * r).collect();
    Tensor::from_slice(&p, [N])
}

fn v(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * scale,
            "{what}[{i}]: {x} vs {y} (tol {tol} × {scale})"
        );
    }
}

#[test]
fn sparse_and_dense_paths_agree() {
    for seed in 0..3 {
        let p = params(seed);
        let k = 0.5 + seed as f64;
        let (fs, (gps, gks)) = value_and_grad_solved(&p, k, true).unwrap();
        let (fd, (gpd, gkd)) = value_and_grad_solved(&p, k, false).unwrap();
        close("value", &[fs], &[fd], 1e-12);
        close("grad p", &v(&gps), &v(&gpd), 1e-10);
        close("grad k", &[gks], &[gkd], 1e-10);
        let xs = solution(&p, k, true);
        let xd = solution(&p, k, false);
        close("root", &v(&xs), &v(&xd), 1e-12);
        // The Jacobian dx*/dp (batched tangents through the sparse solve).
        let (js, _) = jacobian_solution(&p, k, true).unwrap();
        let (jd, _) = jacobian_solution(&p, k, false).unwrap();
        assert_eq!(js.shape().dims(), &[N, N]);
        close("dx*/dp", &v(&js), &v(&jd), 1e-10);
    }
}

#[test]
fn sparse_gradient_matches_central_differences_of_the_solve() {
    for seed in 0..3 {
        let p = params(10 + seed);
        let k = 1.0;
        let (gp, gk) = grad_solved(&p, k, true).unwrap();
        let dir = rand(20 + seed, N);
        let dp = Tensor::from_slice(&dir, [N]);
        let h = 1e-5;
        let f = |e: f64| solved(&(&p + &dp * e), k + 0.5 * e, true);
        let fd = (f(h) - f(-h)) / (2.0 * h);
        let ad: f64 = v(&gp).iter().zip(&dir).map(|(g, d)| g * d).sum::<f64>() + 0.5 * gk;
        assert!(
            (fd - ad).abs() <= 1e-6 * ad.abs().max(1.0),
            "seed {seed}: central differences {fd} vs reverse {ad}"
        );
    }
}

#[test]
fn sparse_forward_matches_reverse() {
    let p = params(3);
    let k = 0.7;
    let dp = Tensor::from_slice(&rand(4, N), [N]);
    let u = Tensor::from_slice(&rand(5, N), [N]);
    let (_, jv) = jvp_solution(&p, k, true, &dp, 0.0).unwrap();
    let (_, (jtu, jtk)) = vjp_solution(&p, k, true, &u).unwrap();
    let lhs: f64 = v(&u).iter().zip(v(&jv)).map(|(a, b)| a * b).sum();
    let rhs: f64 = v(&jtu).iter().zip(v(&dp)).map(|(a, b)| a * b).sum();
    close("<u, J v> vs <Jᵀu, v>", &[lhs], &[rhs], 1e-12);
    // The k tangent alone against the k cotangent.
    let (_, jk) = jvp_solution(&p, k, true, &(&dp * 0.0), 1.0).unwrap();
    let uk: f64 = v(&u).iter().zip(v(&jk)).map(|(a, b)| a * b).sum();
    close("<u, ∂x/∂k>", &[uk], &[jtk], 1e-12);
}

#[test]
fn sparse_second_order_matches_differences_of_the_gradient() {
    let p = params(7);
    let k = 1.3;
    let dp = Tensor::from_slice(&rand(8, N), [N]);
    let (hp, hk) = hvp_solved(&p, k, true, &dp, 0.0).unwrap();
    let (hpd, hkd) = hvp_solved(&p, k, false, &dp, 0.0).unwrap();
    close("hvp sparse vs dense", &v(&hp), &v(&hpd), 1e-9);
    close("hvp k sparse vs dense", &[hk], &[hkd], 1e-9);
    let h = 1e-5;
    let (gpp, _) = grad_solved(&(&p + &dp * h), k, true).unwrap();
    let (gpm, _) = grad_solved(&(&p - &dp * h), k, true).unwrap();
    let fd: Vec<f64> = v(&gpp)
        .iter()
        .zip(v(&gpm))
        .map(|(a, b)| (a - b) / (2.0 * h))
        .collect();
    close("hvp vs differences of the gradient", &v(&hp), &fd, 1e-6);
}

#[test]
fn auto_picks_the_sparse_path_for_a_large_sparse_residual_only() {
    use rlx::core::solvers::{RootJacobian, RootRef};
    use rlx::Graph;
    let kind = |n: usize, coupled: bool| {
        let mut g = Graph::new();
        let x = g.input("x", [n], DType::F64);
        let y = if coupled {
            let s = g.sum_all(x).unwrap();
            g.add(x, s).unwrap()
        } else {
            g.exp(x).unwrap()
        };
        g.set_outputs(vec![y]);
        match RootRef::new("t", g, Newton::new()).unwrap().jacobian {
            RootJacobian::Dense(_) => "dense",
            RootJacobian::Sparse { .. } => "sparse",
        }
    };
    assert_eq!(kind(200, false), "sparse");
    assert_eq!(kind(200, true), "dense"); // every entry structurally nonzero
    assert_eq!(kind(10, false), "dense"); // too small to bother
}

/// `F(x) = x² + 1 + 0·p` from `x = 0`: `J = 2x` is singular at the guess.
#[differentiable]
fn singular(p: &Tensor) -> f64 {
    let x0 = p * 0.0;
    let x = rlx::root(|x| x * x + 1.0 + p * 0.0, &x0, newton(true))?;
    x.sum_all()
}

/// `F(x) = x³ + x − 10 p` from `x = 0` needs more than two Newton steps.
#[differentiable]
fn slow_root(p: &Tensor) -> f64 {
    let x0 = p * 0.0;
    let x = rlx::root(|x| x * x * x + x - p * 10.0, &x0, newton(true).max_iter(2))?;
    x.sum_all()
}

#[test]
fn sparse_path_errors_name_the_solver() {
    let p = params(1);
    let e = grad_singular(&p).unwrap_err().to_string();
    assert!(e.contains("rlx::root") && e.contains("singular"), "{e}");
    assert!(e.contains("at iterate 0"), "{e}");
    let e = grad_slow_root(&p).unwrap_err().to_string();
    assert!(e.contains("rlx::root") && e.contains("converge"), "{e}");
}

// ------------------------------------------------ the sparse linear solve

/// The tridiagonal `A(θ)` of `N` unknowns: `A_ii = 4 + θ_i²`,
/// `A_{i,i±1} = −1 + 0.1 θ_i` (row i), in the CSC order of the pattern.
fn tridiagonal() -> std::sync::Arc<rlx::sparse::Pattern> {
    let mut e = Vec::new();
    for j in 0..N {
        for i in j.saturating_sub(1)..(j + 2).min(N) {
            e.push((i, j));
        }
    }
    std::sync::Arc::new(rlx::sparse::Pattern::from_entries(N, N, &e).unwrap())
}

thread_local! {
    static PATTERN: std::sync::Arc<rlx::sparse::Pattern> = tridiagonal();
}

/// `Σ w x` with `A(θ) x = b` (or `A(θ)ᵀ x = b`).
#[differentiable]
fn linear(theta: &Tensor, b: &Tensor, transpose: bool) -> f64 {
    let p = PATTERN.with(|p| p.clone());
    let rows: Vec<i64> = p.entries().map(|(r, _)| r as i64).collect();
    let diag: Vec<f64> = p
        .entries()
        .map(|(r, c)| if r == c { 1.0 } else { 0.0 })
        .collect();
    let rows = Tensor::from_slice(&rows, [p.nnz()]);
    let diag = Tensor::from_slice(&diag, [p.nnz()]);
    let th = theta.gather(&rows, 0);
    let values = &diag * (th.square() + 4.0) + (1.0 - &diag) * (th * 0.1 - 1.0);
    let x = rlx::sparse_solve(&p, &values, b, transpose)?;
    let w = Tensor::arange(N, DType::F64) / N as f64 + 1.0;
    (x * w).sum_all()
}

fn theta(seed: u64) -> Tensor {
    Tensor::from_slice(&rand(seed, N), [N])
}

#[test]
fn sparse_solve_value_matches_a_dense_solve() {
    for transpose in [false, true] {
        let (th, b) = (theta(30), theta(31));
        let f = linear(&th, &b, transpose);
        let t = v(&th);
        let mut a = vec![0.0; N * N];
        for i in 0..N {
            for j in i.saturating_sub(1)..(i + 2).min(N) {
                a[i * N + j] = if i == j {
                    4.0 + t[i] * t[i]
                } else {
                    0.1 * t[i] - 1.0
                };
            }
        }
        let mut a = Tensor::from_slice(&a, [N, N]);
        if transpose {
            a = a.transpose(&[1, 0]);
        }
        let x = a.try_solve(&b.reshape([N, 1])).unwrap();
        let w: Vec<f64> = (0..N).map(|i| i as f64 / N as f64 + 1.0).collect();
        let want: f64 = v(&x).iter().zip(&w).map(|(x, w)| x * w).sum();
        close("Σ w x", &[f], &[want], 1e-13);
    }
}

#[test]
fn sparse_solve_derivatives_match_central_differences_forward_and_second_order() {
    for transpose in [false, true] {
        let (th, b) = (theta(40), theta(41));
        let (dth, db) = (theta(42), theta(43));
        let (gt, gb) = grad_linear(&th, &b, transpose).unwrap();
        let h = 1e-6;
        let f = |e: f64| linear(&(&th + &dth * e), &(&b + &db * e), transpose);
        let fd = (f(h) - f(-h)) / (2.0 * h);
        let dot =
            |a: &Tensor, b: &Tensor| -> f64 { v(a).iter().zip(v(b)).map(|(x, y)| x * y).sum() };
        let ad = dot(&gt, &dth) + dot(&gb, &db);
        close("reverse vs central differences", &[ad], &[fd], 1e-7);
        let (_, fwd) = jvp_linear(&th, &b, transpose, &dth, &db).unwrap();
        close("forward vs reverse", &[fwd], &[ad], 1e-12);
        let (ht, _) = hvp_linear(&th, &b, transpose, &dth, &(&db * 0.0)).unwrap();
        let (gp, _) = grad_linear(&(&th + &dth * 1e-5), &b, transpose).unwrap();
        let (gm, _) = grad_linear(&(&th - &dth * 1e-5), &b, transpose).unwrap();
        let fd2: Vec<f64> = v(&gp)
            .iter()
            .zip(v(&gm))
            .map(|(a, b)| (a - b) / 2e-5)
            .collect();
        close("hvp vs differences of the gradient", &v(&ht), &fd2, 1e-6);
    }
}
