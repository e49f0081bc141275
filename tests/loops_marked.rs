//! `#[scan]` loops: a marked `for` loop is the same graph as the `rlx::scan`
//! written by hand, and gives the values and derivatives (every companion)
//! of the same loop unrolled at trace time; with per-step inputs (`xs[t]`)
//! and outputs (`ys.push(..)`), budgets, reversed and empty ranges, nested
//! loops, many carries and selects in the body.

use rlx::prelude::*;
use rlx::{Graph, Op, Scan};

#[path = "common/driven.rs"]
mod driven_case;
use driven_case::{close, direction, inputs, t, v, H, T};

/// Damped springs driven by a per-step force; carries `q`, `p`, per-step
/// input `forces[t]`, per-step output `sin(q)`.
#[differentiable]
fn driven(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let mut q = q0.clone();
    let mut p = q0 * 0.0;
    let mut path = Vec::new();
    #[scan]
    for t in 0..forces.shape().dim(0) {
        p = &p + (&forces[t] - &q * &k - &p * 0.1) * H;
        q = &q + &p * H;
        path.push(q.sin());
    }
    let rows: Vec<Tensor> = path.iter().map(|y| y.reshape([1, 3])).collect();
    let path = Tensor::concat(&rows, 0);
    (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all()
}

/// `driven` without the marker: unrolled at trace time (`forces[t]` read
/// as a slice, the only difference in the source).
#[differentiable]
fn driven_unrolled(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let mut q = q0.clone();
    let mut p = q0 * 0.0;
    let mut path = Vec::new();
    for t in 0..forces.shape().dim(0) {
        p = &p + (&forces.slice_range(t..t + 1, 0).reshape([3]) - &q * &k - &p * 0.1) * H;
        q = &q + &p * H;
        path.push(q.sin());
    }
    let rows: Vec<Tensor> = path.iter().map(|y| y.reshape([1, 3])).collect();
    let path = Tensor::concat(&rows, 0);
    (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all()
}

/// `driven` with `rlx::Scan` written by hand, as the marker lowers it.
#[differentiable]
fn driven_scan(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let n = forces.shape().dim(0);
    // carries in the order the body first assigns them
    let ((p, q), ys) =
        Scan::new()
            .length(n)
            .run((q0 * 0.0, q0.clone()), (forces,), |(p, q), (f,)| {
                let p = &p + (&f - &q * &k - &p * 0.1) * H;
                let q = &q + &p * H;
                let y = q.sin();
                ((p, q), vec![y])
            });
    let path: Vec<Tensor> = (0..n)
        .map(|t| ys[0].slice_range(t..t + 1, 0).reshape([3]))
        .collect();
    let rows: Vec<Tensor> = path.iter().map(|y| y.reshape([1, 3])).collect();
    let path = Tensor::concat(&rows, 0);
    (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all()
}

/// `driven` as `rlx::scan` is usually written: the outputs used stacked.
#[differentiable]
fn driven_stacked(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let ((q, p), path) = rlx::scan((q0.clone(), q0 * 0.0), forces, |(q, p), f| {
        let p = &p + (&f - &q * &k - &p * 0.1) * H;
        let q = &q + &p * H;
        ((q.clone(), p), q.sin())
    });
    (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all()
}

/// Graph equality, loops compared field by field except their names (which
/// hold the source line of the loop).
fn same_graph(a: &Graph, b: &Graph) -> bool {
    a.len() == b.len()
        && a.inputs() == b.inputs()
        && a.outputs() == b.outputs()
        && a.nodes().iter().zip(b.nodes()).all(|(x, y)| {
            x.inputs == y.inputs
                && x.shape == y.shape
                && x.dtype == y.dtype
                && match (&x.op, &y.op) {
                    (Op::Loop(l), Op::Loop(m)) => {
                        (l.carries, l.xs, l.length, l.reverse, l.checkpoints, l.spine)
                            == (m.carries, m.xs, m.length, m.reverse, m.checkpoints, m.spine)
                            && l.kind == m.kind
                            && same_graph(&l.body, &m.body)
                    }
                    (p, q) => p == q,
                }
        })
}

fn loops(g: &Graph) -> Vec<rlx::core::LoopOp> {
    g.nodes()
        .iter()
        .filter_map(|n| match &n.op {
            Op::Loop(l) => Some((**l).clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_marked_loop_is_the_graph_of_the_scan_written_by_hand() {
    let (q0, f, k) = inputs();
    let marked = graph_driven(&q0, &f, k).unwrap();
    let by_hand = graph_driven_scan(&q0, &f, k).unwrap();
    assert!(same_graph(&marked, &by_hand), "{marked}\n\nvs\n\n{by_hand}");
    let l = loops(&marked);
    assert_eq!(l.len(), 1, "{marked}");
    assert_eq!((l[0].carries, l[0].xs, l[0].length), (2, 1, T));
    // the unrolled loop has no loop node
    assert!(loops(&graph_driven_unrolled(&q0, &f, k).unwrap()).is_empty());
}

#[test]
fn every_companion_of_a_marked_loop_matches_the_scan_and_the_unrolled_loop() {
    let (q0, f, k) = inputs();
    let tq = t(&[0.2, 0.5, -0.3]);
    let tf = Tensor::from_vec(
        (0..T * 3).map(|i| (i as f64 * 0.37).sin()).collect(),
        [T, 3],
    );
    let value = driven(&q0, &f, k);
    close("value", &[value], &[driven_unrolled(&q0, &f, k)]);
    close("value", &[value], &[driven_scan(&q0, &f, k)]);
    close("value", &[value], &[driven_stacked(&q0, &f, k)]);
    let g = grad_driven(&q0, &f, k).unwrap();
    for other in [
        grad_driven_unrolled(&q0, &f, k).unwrap(),
        grad_driven_scan(&q0, &f, k).unwrap(),
        grad_driven_stacked(&q0, &f, k).unwrap(),
    ] {
        close("grad q0", &v(&g.0), &v(&other.0));
        close("grad forces", &v(&g.1), &v(&other.1));
        close("grad k", &[g.2], &[other.2]);
    }
    let (va, ga) = value_and_grad_driven(&q0, &f, k).unwrap();
    for (vb, gb) in [
        value_and_grad_driven_unrolled(&q0, &f, k).unwrap(),
        value_and_grad_driven_scan(&q0, &f, k).unwrap(),
    ] {
        close("value_and_grad", &[va, ga.2], &[vb, gb.2]);
        close("value_and_grad q0", &v(&ga.0), &v(&gb.0));
        close("value_and_grad forces", &v(&ga.1), &v(&gb.1));
    }
    let ja = jvp_driven(&q0, &f, k, &tq, &tf, 0.4).unwrap();
    for jb in [
        jvp_driven_unrolled(&q0, &f, k, &tq, &tf, 0.4).unwrap(),
        jvp_driven_scan(&q0, &f, k, &tq, &tf, 0.4).unwrap(),
    ] {
        close("jvp", &[ja.0, ja.1], &[jb.0, jb.1]);
    }
    let (_, ca) = vjp_driven(&q0, &f, k, 1.5).unwrap();
    let (_, cb) = vjp_driven_unrolled(&q0, &f, k, 1.5).unwrap();
    close("vjp", &v(&ca.1), &v(&cb.1));
    let ja = jacobian_driven(&q0, &f, k).unwrap();
    for jb in [
        jacobian_driven_unrolled(&q0, &f, k).unwrap(),
        jacobian_driven_scan(&q0, &f, k).unwrap(),
    ] {
        close("jacobian q0", &v(&ja.0), &v(&jb.0));
        close("jacobian forces", &v(&ja.1), &v(&jb.1));
        close("jacobian k", &v(&ja.2), &v(&jb.2));
    }
    let ha = hessian_driven(&q0, &f, k).unwrap();
    for hb in [
        hessian_driven_unrolled(&q0, &f, k).unwrap(),
        hessian_driven_scan(&q0, &f, k).unwrap(),
    ] {
        close("hessian q0 q0", &v(&ha.0 .0), &v(&hb.0 .0));
        close("hessian q0 forces", &v(&ha.0 .1), &v(&hb.0 .1));
        close("hessian forces forces", &v(&ha.1 .1), &v(&hb.1 .1));
        close("hessian forces k", &v(&ha.1 .2), &v(&hb.1 .2));
        close("hessian k k", &v(&ha.2 .2), &v(&hb.2 .2));
    }
    let pa = hvp_driven(&q0, &f, k, &tq, &tf, -0.6).unwrap();
    for pb in [
        hvp_driven_unrolled(&q0, &f, k, &tq, &tf, -0.6).unwrap(),
        hvp_driven_scan(&q0, &f, k, &tq, &tf, -0.6).unwrap(),
    ] {
        close("hvp q0", &v(&pa.0), &v(&pb.0));
        close("hvp forces", &v(&pa.1), &v(&pb.1));
        close("hvp k", &[pa.2], &[pb.2]);
    }
}

#[test]
fn a_marked_loop_agrees_with_central_differences() {
    let (q0, f, k) = inputs();
    let d = direction();
    let grad = grad_driven(&q0, &f, k).unwrap();
    let (_, jv) = jvp_driven(&q0, &f, k, &d.dq, &d.df, d.dk).unwrap();
    d.check_first_order(driven, grad, jv);
}

/// The line of the marked loop in `chain`.
const CHAIN_LINE: u32 = line!() + 7;

/// A map iterated with a checkpoint budget given to the marker.
#[differentiable]
fn chain(x0: &Tensor, k: f64, steps: usize, budget: usize) -> f64 {
    let mut x = x0.clone();
    #[scan(checkpoints = budget)]
    for _ in 0..steps {
        x = &x + (&x * &k).sin() * 0.01;
    }
    x.square().sum_all()
}

#[differentiable]
fn chain_unrolled(x0: &Tensor, k: f64, steps: usize) -> f64 {
    let mut x = x0.clone();
    for _ in 0..steps {
        x = &x + (&x * &k).sin() * 0.01;
    }
    x.square().sum_all()
}

#[test]
fn the_budget_of_the_marker_is_the_loops_and_every_budget_gives_the_same_gradient() {
    let x0 = t(&[0.4, -1.2, 2.0, 0.1]);
    let steps = 9;
    let (want_x, want_k) = grad_chain_unrolled(&x0, 3.0, steps).unwrap();
    for budget in 1..=steps {
        let l = loops(&graph_chain(&x0, 3.0, steps, budget).unwrap());
        assert_eq!((l.len(), l[0].checkpoints), (1, budget));
        let (gx, gk) = grad_chain(&x0, 3.0, steps, budget).unwrap();
        close(&format!("budget {budget}"), &v(&gx), &v(&want_x));
        close(&format!("budget {budget} k"), &[gk], &[want_k]);
    }
    // one loop node whatever the number of steps
    let small = graph_chain(&x0, 3.0, 10, 3).unwrap();
    let large = graph_chain(&x0, 3.0, 10_000, 3).unwrap();
    assert_eq!(small.len(), large.len());
}

#[test]
fn a_bad_budget_is_an_error_naming_the_loop_and_its_line() {
    let x0 = t(&[0.4]);
    for budget in [0, 10] {
        let m = match grad_chain(&x0, 3.0, 9, budget) {
            Ok(_) => panic!("budget {budget} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(m.contains(&format!("checkpoint budget of {budget}")), "{m}");
        assert!(m.contains("1..=9"), "{m}");
        assert!(
            m.contains(&format!("tests/loops_marked.rs:{CHAIN_LINE}")),
            "{m}"
        );
    }
}

/// Suffix sums visited from the last row: `(a..b).rev()`, an offset range,
/// per-step inputs and outputs, no other carry than the running sum.
#[differentiable]
fn suffix(xs: &Tensor, from: usize) -> Tensor {
    let mut acc = xs.sum_all() * 0.0;
    let mut sums = Vec::new();
    #[scan]
    for i in (from..xs.shape().dim(0)).rev() {
        acc = &acc + &xs[i] * &xs[i];
        sums.push(acc.clone());
    }
    let rows: Vec<Tensor> = sums.iter().map(|s| s.reshape([1])).collect();
    Tensor::concat(&rows, 0)
}

#[differentiable]
fn suffix_unrolled(xs: &Tensor, from: usize) -> Tensor {
    let mut acc = xs.sum_all() * 0.0;
    let mut sums = Vec::new();
    for i in (from..xs.shape().dim(0)).rev() {
        let x = xs.slice_range(i..i + 1, 0).reshape(Shape::scalar());
        acc = &acc + &x * &x;
        sums.push(acc.clone());
    }
    let rows: Vec<Tensor> = sums.iter().map(|s| s.reshape([1])).collect();
    Tensor::concat(&rows, 0)
}

#[test]
fn a_reversed_range_with_an_offset_pushes_in_the_order_of_the_unrolled_loop() {
    let xs = t(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    // steps 4, 3, 2, 1 (row 0 is not read): 25, 41, 50, 54
    assert_eq!(v(&suffix(&xs, 1)), vec![25.0, 41.0, 50.0, 54.0]);
    assert_eq!(v(&suffix_unrolled(&xs, 1)), vec![25.0, 41.0, 50.0, 54.0]);
    let l = loops(&graph_suffix(&xs, 1).unwrap());
    assert!(l[0].reverse && l[0].length == 4, "{:?}", l[0].length);
    close(
        "jacobian",
        &v(&jacobian_suffix(&xs, 1).unwrap()),
        &v(&jacobian_suffix_unrolled(&xs, 1).unwrap()),
    );
}

/// Per-step outputs and no per-step inputs (the number of steps comes
/// from the range alone); an empty range leaves everything as it was.
#[differentiable]
fn powers(x: &Tensor, n: usize) -> Tensor {
    let mut p = x.clone();
    let mut all = vec![x.clone()];
    #[scan]
    for _ in 1..n {
        p = &p * x;
        all.push(p.clone());
    }
    Tensor::concat(&all, 0) + p.sum_all()
}

#[differentiable]
fn powers_unrolled(x: &Tensor, n: usize) -> Tensor {
    let mut p = x.clone();
    let mut all = vec![x.clone()];
    for _ in 1..n {
        p = &p * x;
        all.push(p.clone());
    }
    Tensor::concat(&all, 0) + p.sum_all()
}

#[test]
fn outputs_without_inputs_and_empty_ranges() {
    let x = t(&[2.0, -1.0]);
    for n in [1, 2, 4] {
        let (a, b) = (powers(&x, n), powers_unrolled(&x, n));
        close(&format!("powers {n}"), &v(&a), &v(&b));
        close(
            &format!("jacobian {n}"),
            &v(&jacobian_powers(&x, n).unwrap()),
            &v(&jacobian_powers_unrolled(&x, n).unwrap()),
        );
    }
    // 1..1 is empty: no loop node, the value of the loop not run
    assert!(loops(&graph_powers(&x, 1).unwrap()).is_empty());
    assert_eq!(v(&powers(&x, 1)), vec![3.0, 0.0]);
}

/// Marked loops nested, five carries (one a `Vec` assigned by index, one
/// a tuple), and a select on a traced comparison in the body.
#[differentiable]
fn nested(x0: &Tensor, k: f64) -> f64 {
    let mut a = x0.clone();
    let mut b = x0 * 0.5;
    let mut c = x0.sum_all();
    let mut d = vec![x0.clone(), x0 * 2.0];
    let mut e = (x0 * 0.0, x0 * 0.0);
    #[scan]
    for _ in 0..3 {
        let mut y = a.clone();
        #[scan(checkpoints = 2)]
        for _ in 0..4 {
            y = &y * 0.9 + (&b * &k).cos() * 0.1;
        }
        a = &a + y.tanh() * 0.2;
        b = if a.sum_all() > 0.5 {
            &b * 0.9
        } else {
            &b + 0.1
        };
        c = &c + a.sum_all() * 0.1;
        d[1] = &d[0] * 0.5 + &d[1] * 0.5 + &a;
        e = (&e.0 + &a, &e.1 - &b);
    }
    a.sum_all() + b.sum_all() * c + d[1].sum_all() + (&e.0 * &e.1).sum_all()
}

#[differentiable]
fn nested_unrolled(x0: &Tensor, k: f64) -> f64 {
    let mut a = x0.clone();
    let mut b = x0 * 0.5;
    let mut c = x0.sum_all();
    let mut d = vec![x0.clone(), x0 * 2.0];
    let mut e = (x0 * 0.0, x0 * 0.0);
    for _ in 0..3 {
        let mut y = a.clone();
        for _ in 0..4 {
            y = &y * 0.9 + (&b * &k).cos() * 0.1;
        }
        a = &a + y.tanh() * 0.2;
        b = if a.sum_all() > 0.5 {
            &b * 0.9
        } else {
            &b + 0.1
        };
        c = &c + a.sum_all() * 0.1;
        d[1] = &d[0] * 0.5 + &d[1] * 0.5 + &a;
        e = (&e.0 + &a, &e.1 - &b);
    }
    a.sum_all() + b.sum_all() * c + d[1].sum_all() + (&e.0 * &e.1).sum_all()
}

#[test]
fn nested_loops_with_many_carries_match_the_unrolled_loops() {
    let x0 = t(&[0.4, -1.2, 2.0]);
    let g = graph_nested(&x0, 1.3).unwrap();
    let outer = loops(&g);
    assert_eq!(outer.len(), 1);
    // a b c d[0] d[1] e.0 e.1
    assert_eq!(outer[0].carries, 7);
    let inner = loops(&outer[0].body);
    assert_eq!((inner.len(), inner[0].checkpoints), (1, 2));
    close("value", &[nested(&x0, 1.3)], &[nested_unrolled(&x0, 1.3)]);
    let (a, b) = (
        grad_nested(&x0, 1.3).unwrap(),
        grad_nested_unrolled(&x0, 1.3).unwrap(),
    );
    close("grad", &v(&a.0), &v(&b.0));
    close("grad k", &[a.1], &[b.1]);
    let (a, b) = (
        hessian_nested(&x0, 1.3).unwrap(),
        hessian_nested_unrolled(&x0, 1.3).unwrap(),
    );
    close("hessian", &v(&a.0 .0), &v(&b.0 .0));
    close("hessian k", &v(&a.1 .1), &v(&b.1 .1));
}

/// The README's second example, as written there.
#[differentiable]
fn readme_driven(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let (mut q, mut p) = (q0.clone(), q0 * 0.0);
    let mut energy = Vec::new();
    #[scan(checkpoints = 8)]
    for t in 0..forces.shape().dim(0) {
        p = &p + (&forces[t] - &q * &k) * 0.05;
        q = &q + &p * 0.05;
        energy.push((&p * &p + &q * &q * &k).sum_all());
    }
    energy.iter().fold(q.sum_all(), |acc, e| acc + e)
}

#[differentiable]
fn readme_driven_unrolled(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let (mut q, mut p) = (q0.clone(), q0 * 0.0);
    let mut energy = Vec::new();
    for t in 0..forces.shape().dim(0) {
        p = &p + (&forces.slice_range(t..t + 1, 0).reshape([3]) - &q * &k) * 0.05;
        q = &q + &p * 0.05;
        energy.push((&p * &p + &q * &q * &k).sum_all());
    }
    energy.iter().fold(q.sum_all(), |acc, e| acc + e)
}

#[test]
fn the_readme_example_matches_its_unrolled_loop() {
    let q0 = t(&[0.3, -0.7, 1.1]);
    let f = Tensor::from_vec((0..60).map(|i| (i as f64 * 0.3).sin()).collect(), [20, 3]);
    let (va, ga) = value_and_grad_readme_driven(&q0, &f, 2.0).unwrap();
    let (vb, gb) = value_and_grad_readme_driven_unrolled(&q0, &f, 2.0).unwrap();
    close("value", &[va], &[vb]);
    close("grad q0", &v(&ga.0), &v(&gb.0));
    close("grad forces", &v(&ga.1), &v(&gb.1));
    close("grad k", &[ga.2], &[gb.2]);
    assert_eq!(
        loops(&graph_readme_driven(&q0, &f, 2.0).unwrap())[0].checkpoints,
        8
    );
}
