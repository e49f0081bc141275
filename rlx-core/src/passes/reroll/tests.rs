//! Structure of rerolled graphs (their values are checked against the
//! unrolled graphs in `rlx-runtime/tests/reroll.rs`).

use super::{reroll, MIN_LANES};
use crate::{DType, Graph, NodeId, Op};

fn count(g: &Graph, f: impl Fn(&Op) -> bool) -> usize {
    g.nodes().iter().filter(|n| f(&n.op)).count()
}

#[test]
fn fewer_copies_than_the_threshold_stay_unrolled() {
    let g = terms(MIN_LANES - 1, |g, _, a| g.sin(a).unwrap());
    assert_eq!(reroll(&g).unwrap(), g);
}

/// `copies` terms `f_k(p.slice_range(2k..2k + 2, 0))`, summed, where `op(k)` picks
/// each term's unary op.
fn terms(copies: usize, op: impl Fn(&mut Graph, usize, NodeId) -> NodeId) -> Graph {
    let mut g = Graph::new();
    let p = g.input("p", [2 * copies + 2], DType::F64);
    let q = g.input("q", [2 * copies + 2], DType::F64);
    let mut e = g.scalar(0.0, DType::F64);
    for k in 0..copies {
        let a = g.slice_range(p, 2 * k..2 * k + 2, 0).unwrap();
        let b = op(&mut g, k, a);
        let b = if k % 2 == 0 || copies < MIN_LANES {
            b
        } else {
            // Still the same computation, read through a second slice of q.
            let c = g.slice_range(q, 2 * k..2 * k + 2, 0).unwrap();
            let c = g.mul(c, b).unwrap();
            g.sub(c, b).unwrap()
        };
        let s = g.sum_all(b).unwrap();
        e = g.add(e, s).unwrap();
    }
    g.set_outputs(vec![e]);
    g
}

#[test]
fn copies_that_only_look_alike_are_not_merged() {
    // Four kinds of copy (sin or cos, with or without the product with a
    // slice of q), MIN_LANES of each: four groups, never one.
    let g = terms(4 * MIN_LANES, |g, k, a| {
        if k % 4 < 2 {
            g.sin(a).unwrap()
        } else {
            g.cos(a).unwrap()
        }
    });
    let r = reroll(&g).unwrap();
    assert_eq!(
        count(&r, |op| *op == Op::Unary(crate::UnaryOp::Sin)),
        2,
        "{r}"
    );
    assert_eq!(
        count(&r, |op| *op == Op::Unary(crate::UnaryOp::Cos)),
        2,
        "{r}"
    );
    assert_eq!(count(&r, |op| matches!(op, Op::Gather { .. })), 6, "{r}");
    // Odd copies are a different computation from even ones: only their
    // common part (`exp` of a slice of p) is rerolled, MIN_LANES times;
    // the products of the MIN_LANES / 2 odd copies stay unrolled.
    let g = terms(MIN_LANES, |g, _, a| g.exp(a).unwrap());
    let r = reroll(&g).unwrap();
    assert_eq!(
        count(&r, |op| *op == Op::Unary(crate::UnaryOp::Exp)),
        1,
        "{r}"
    );
    let muls = |op: &Op| *op == Op::Binary(crate::BinaryOp::Mul);
    assert_eq!(count(&r, muls), MIN_LANES / 2, "{r}");
}

#[test]
fn different_shapes_or_sources_are_not_merged() {
    // Slices of different lengths, or of different tensors: no group.
    let mut g = Graph::new();
    let p = g.input("p", [200], DType::F64);
    let q = g.input("q", [200], DType::F64);
    let mut e = g.scalar(0.0, DType::F64);
    for k in 0..2 * MIN_LANES {
        let (src, len) = match k % 3 {
            0 => (p, 2),
            1 => (p, 3),
            _ => (q, 2),
        };
        let a = g.slice_range(src, 3 * k..3 * k + len, 0).unwrap();
        let b = g.exp(a).unwrap();
        let s = g.sum_all(b).unwrap();
        e = g.add(e, s).unwrap();
    }
    g.set_outputs(vec![e]);
    assert_eq!(reroll(&g).unwrap(), g);
}

#[test]
fn lane_values_read_elsewhere_are_rows_of_the_batch() {
    // Each copy's value is also an output of its own: the outputs become
    // rows of the batched node, and nothing is summed.
    let mut g = Graph::new();
    let p = g.input("p", [64], DType::F64);
    let mut outs = Vec::new();
    for k in 0..MIN_LANES {
        let a = g.slice_range(p, 4 * k..4 * k + 4, 0).unwrap();
        let b = g.tanh(a).unwrap();
        outs.push(g.sum_all(b).unwrap());
    }
    g.set_outputs(outs.clone());
    let r = reroll(&g).unwrap();
    assert_eq!(
        count(&r, |op| *op == Op::Unary(crate::UnaryOp::Tanh)),
        1,
        "{r}"
    );
    assert_eq!(r.outputs().len(), MIN_LANES);
    for (a, b) in r.outputs().iter().zip(&outs) {
        assert_eq!(r.ty(*a), g.ty(*b));
    }
}
