//! Size of reverse-mode graphs: the gradient graph (which also computes the
//! value) is a small constant multiple of the forward graph, for an MLP and
//! for a pairwise physics energy. Run with `--nocapture` to see the numbers.

mod common;

use common::*;
use rlx_core::autodiff::{grad, hessian};
use rlx_core::{Graph, ReduceOp};

/// Nodes an output needs (what execution would run).
fn live(g: &Graph) -> usize {
    g.live_nodes().iter().filter(|&&l| l).count()
}

fn report(name: &str, f: &Graph, wrt: &[usize]) -> (usize, usize) {
    let d = grad(f, wrt).unwrap();
    let (nf, nd) = (live(f), live(&d));
    println!(
        "{name}: forward {nf} nodes, value+gradient {nd} nodes ({:.2}x)",
        nd as f64 / nf as f64
    );
    if std::env::var_os("RLX_PRINT_GRAPHS").is_some() {
        println!("{d}");
    }
    assert!(
        nd <= 4 * nf,
        "{name}: gradient graph {nd} > 4 x forward {nf}"
    );
    (nf, nd)
}

/// 784-256-256-10 MLP, tanh, softmax cross-entropy over a batch of 32.
fn mlp() -> Graph {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[32, 784]);
    let labels = input(&mut g, "labels", &[32, 10]);
    let mut h = x;
    let sizes = [784, 256, 256, 10];
    for (l, w) in sizes.windows(2).enumerate() {
        let wm = input(&mut g, &format!("w{l}"), &[w[0], w[1]]);
        let b = input(&mut g, &format!("b{l}"), &[w[1]]);
        let z = g.matmul(h, wm).unwrap();
        let z = g.add(z, b).unwrap();
        h = if l + 2 < sizes.len() {
            g.tanh(z).unwrap()
        } else {
            z
        };
    }
    let ls = g.log_softmax(h, 1).unwrap();
    let p = g.mul(labels, ls).unwrap();
    let s = g.sum(p, &[1]).unwrap();
    let m = g.reduce(ReduceOp::Mean, s, &[0]).unwrap();
    let loss = g.neg(m).unwrap();
    g.set_outputs(vec![loss]);
    g
}

/// Lennard-Jones energy of `n` particles, `E = ½ Σ_{i≠j} 4 (r⁻¹² − r⁻⁶)`.
fn lennard_jones(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 3]);
    let xi = g.reshape(x, [n, 1, 3]).unwrap();
    let xj = g.reshape(x, [1, n, 3]).unwrap();
    let d = g.sub(xi, xj).unwrap();
    let d2 = g.square(d).unwrap();
    let r2 = g.sum(d2, &[2]).unwrap();
    let eye: Vec<f64> = (0..n * n)
        .map(|k| if k / n == k % n { 1.0 } else { 0.0 })
        .collect();
    let off: Vec<f64> = eye.iter().map(|e| 1.0 - e).collect();
    let eye = constant(&mut g, eye, &[n, n]);
    let off = constant(&mut g, off, &[n, n]);
    let r2 = g.add(r2, eye).unwrap(); // keeps the diagonal away from 1/0
    let inv2 = g.recip(r2).unwrap();
    let inv6 = g.powi(inv2, 3).unwrap();
    let inv12 = g.square(inv6).unwrap();
    let e = g.sub(inv12, inv6).unwrap();
    let e = g.mul(e, off).unwrap();
    let s = g.sum_all(e).unwrap();
    let two = g.scalar(2.0, rlx_core::DType::F64);
    let energy = g.mul(s, two).unwrap();
    g.set_outputs(vec![energy]);
    g
}

#[test]
fn mlp_gradient_graph_is_a_small_multiple_of_forward() {
    let g = mlp();
    let (nf, nd) = report("mlp 784-256-256-10", &g, &[2, 3, 4, 5, 6, 7]);
    assert!(nf < nd);
}

#[test]
fn lennard_jones_gradient_graph_is_small_and_correct() {
    let n = 5;
    let g = lennard_jones(n);
    report("lennard-jones", &g, &[0]);
    // particles on a jittered grid, spacing ~1.2
    let mut rng = Rng::new(5);
    let x: Vec<f64> = (0..n * 3)
        .map(|k| 1.2 * (k / 3) as f64 * if k % 3 == 0 { 1.0 } else { 0.3 } + rng.uniform(-0.1, 0.1))
        .collect();
    let v = rng.vec(n * 3, -1.0, 1.0);
    let d = grad(&g, &[0]).unwrap();
    let out = run(&d, std::slice::from_ref(&x));
    let along = fd(
        &g,
        std::slice::from_ref(&x),
        std::slice::from_ref(&v),
        0,
        1e-6,
    );
    assert_close(
        &[dot(&out[1], &v)],
        &along,
        1e-6,
        "∇E · v vs finite difference",
    );
    // Newton's third law: the forces sum to zero
    for c in 0..3 {
        let s: f64 = (0..n).map(|i| out[1][i * 3 + c]).sum();
        assert!(s.abs() < 1e-9, "net force {s}");
    }
    // Hessian [n, 3, n, 3]: symmetric, and translation invariance makes
    // Σ_j H[i, a, j, b] = 0; H · v matches finite differences of ∇E
    let h = run(&hessian(&g, &[0]).unwrap(), std::slice::from_ref(&x));
    let m = n * 3;
    for p in 0..m {
        for q in 0..m {
            assert!(
                (h[1][p * m + q] - h[1][q * m + p]).abs() < 1e-9 * (1.0 + h[1][p * m + q].abs())
            );
        }
        for b in 0..3 {
            let s: f64 = (0..n).map(|j| h[1][p * m + j * 3 + b]).sum();
            assert!(
                s.abs() < 1e-8 * (1.0 + h[1][p * m + p].abs()),
                "row {p}: {s}"
            );
        }
    }
    let hv: Vec<f64> = (0..m).map(|p| dot(&h[1][p * m..(p + 1) * m], &v)).collect();
    let want = fd(
        &d,
        std::slice::from_ref(&x),
        std::slice::from_ref(&v),
        1,
        1e-6,
    );
    assert_close(&hv, &want, 1e-5, "H v vs finite difference of the gradient");
}
