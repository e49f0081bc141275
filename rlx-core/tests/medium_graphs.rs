//! Structure of derivative graphs over medium tensors (issue #16): batched
//! tangents share the primal, and the reverse mode of many slices costs the
//! slices, not the tensor.

#[path = "shared/device.rs"]
mod device;

use device::device;
use rlx_core::autodiff::{batch_jacobian, grad, hessian, jacfwd, jacrev};
use rlx_core::{DType, Graph, Op, UnaryOp};

/// Elements evaluated by transcendental nodes of `g` (exp, tanh, sin, ...).
fn transcendental_elements(g: &Graph) -> usize {
    g.nodes()
        .iter()
        .filter(|n| {
            matches!(
                n.op,
                Op::Unary(UnaryOp::Exp | UnaryOp::Tanh | UnaryOp::Sin | UnaryOp::Cos)
            )
        })
        .map(|n| n.shape.numel())
        .sum()
}

/// The primal (`exp`, `tanh` of `[n, 1]`) is evaluated once per call: the
/// derivative graphs hold as many transcendental elements as the function
/// itself, whatever the number of basis vectors they batch, plus what the
/// derivative rules need beyond the primal (`tanh' = 1 - tanh²` reuses it;
/// `exp' = exp`).
#[test]
fn batched_basis_vectors_share_the_primal() {
    let n = 50;
    let f = device(n);
    let once = transcendental_elements(&f);
    assert_eq!(once, 2 * n);
    let bj = batch_jacobian(&f, &[0]).unwrap();
    assert_eq!(transcendental_elements(&bj), once, "{bj}");
    let small = device(4);
    for (name, j) in [
        ("jacfwd", jacfwd(&small, &[0]).unwrap()),
        ("jacrev", jacrev(&small, &[0]).unwrap()),
    ] {
        assert_eq!(transcendental_elements(&j), 2 * 4, "{name}: {j}");
    }
    // Hessian of a scalar energy: 12 basis vectors, exp and sin of [12]
    // once each (the Hessian of exp/sin needs no other transcendental).
    let mut g = Graph::new();
    let x = g.input("x", [12], DType::F64);
    let e = g.exp(x).unwrap();
    let s = g.sin(x).unwrap();
    let p = g.mul(e, s).unwrap();
    let y = g.sum_all(p).unwrap();
    g.set_outputs(vec![y]);
    let h = hessian(&g, &[0]).unwrap();
    let per_kind = |k: UnaryOp| {
        h.nodes()
            .iter()
            .filter(|n| n.op == Op::Unary(k))
            .map(|n| n.shape.numel())
            .sum::<usize>()
    };
    assert_eq!(per_kind(UnaryOp::Exp), 12, "{h}");
    assert_eq!(per_kind(UnaryOp::Sin), 12, "{h}");
    assert_eq!(per_kind(UnaryOp::Cos), 12, "{h}");
}

/// Elements written by the concatenations and adds of `g` (the nodes that
/// build and accumulate slice cotangents).
fn concat_and_add_elements(g: &Graph) -> usize {
    g.nodes()
        .iter()
        .filter(|n| {
            matches!(
                n.op,
                Op::Concat { .. } | Op::Binary(rlx_core::BinaryOp::Add)
            )
        })
        .map(|n| n.shape.numel())
        .sum()
}

/// A recurrence reading one row of `x: [k, m]` per step.
fn recurrence(k: usize, m: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [k, m], DType::F64);
    let half = g.scalar(0.5, DType::F64);
    let mut h = None;
    for t in 0..k {
        let r = g.slice_range(x, t..t + 1, 0).unwrap();
        let a = match h {
            None => r,
            Some(h) => {
                let hh = g.mul(h, half).unwrap();
                g.add(r, hh).unwrap()
            }
        };
        h = Some(g.tanh(a).unwrap());
    }
    let s = g.sum_all(h.unwrap()).unwrap();
    g.set_outputs(vec![s]);
    g
}

/// The gradient through `k` disjoint row slices of a tensor of `n = k·m`
/// elements builds and accumulates `O(n + Σ slice sizes)` elements (one
/// concatenation), not `k · n` (one zero-padded copy and one add per slice).
#[test]
fn the_backward_of_slices_costs_the_slices() {
    let (k, m) = (200, 8);
    let f = recurrence(k, m);
    let forward_adds = concat_and_add_elements(&f);
    let dg = grad(&f, &[0]).unwrap();
    let backward = concat_and_add_elements(&dg) - forward_adds;
    assert!(
        backward <= 2 * k * m,
        "{backward} elements for n = {}",
        k * m
    );
    // Overlapping slices (x[1:] and x[:-1]) still give the exact gradient
    // layout: two layers, each a zero-padded copy.
    let mut g = Graph::new();
    let x = g.input("x", [6], DType::F64);
    let a = g.slice_range(x, 0..5, 0).unwrap();
    let b = g.slice_range(x, 1..6, 0).unwrap();
    let c = g.slice_range(x, 2..4, 0).unwrap();
    let p = g.mul(a, b).unwrap();
    let s1 = g.sum_all(p).unwrap();
    let s2 = g.sum_all(c).unwrap();
    let y = g.add(s1, s2).unwrap();
    g.set_outputs(vec![y]);
    let dg = grad(&g, &[0]).unwrap();
    let concats = dg
        .nodes()
        .iter()
        .filter(|n| matches!(n.op, Op::Concat { .. }))
        .count();
    assert!(concats <= 2, "{dg}");
}
