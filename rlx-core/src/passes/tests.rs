use proptest::prelude::*;

use super::*;
use crate::{Literal, TensorType, UnaryOp};

#[test]
fn dce_keeps_inputs_in_order_and_drops_unused_nodes() {
    let mut g = Graph::new();
    let a = g.input("a", [2], DType::F64);
    let _dead = g.exp(a).unwrap();
    let b = g.input("b", [2], DType::F64);
    let y = g.add(b, b).unwrap();
    g.set_outputs(vec![y, a]);
    let before = g.to_string();
    assert_eq!(before.lines().count(), 5, "{before}");
    let d = dce(&g).unwrap();
    assert_eq!(
        d.to_string(),
        "%0 = input#0 \"a\"() : f64[2]\n%1 = input#1 \"b\"() : f64[2]\n\
         %2 = add(%1, %1) : f64[2]\nreturn (%2, %0)"
    );
}

#[test]
fn cse_merges_equal_expressions_but_not_inputs() {
    let mut g = Graph::new();
    let a = g.input("a", [3], DType::F32);
    let b = g.input("b", [3], DType::F32); // same type as a: must stay apart
    let s1 = g.sin(a).unwrap();
    let s2 = g.sin(a).unwrap();
    let s3 = g.sin(b).unwrap();
    let c1 = g.scalar(2.0, DType::F32);
    let c2 = g.scalar(2.0, DType::F32);
    let c3 = g.scalar(2.0, DType::F64); // other dtype
    let z1 = g.scalar(0.0, DType::F32);
    let z2 = g.scalar(-0.0, DType::F32); // other bits
    let m1 = g.mul(s1, c1).unwrap();
    let m2 = g.mul(s2, c2).unwrap();
    g.set_outputs(vec![m1, m2, s3, c3, z1, z2]);
    let c = cse(&g).unwrap();
    let o = c.outputs();
    assert_eq!(o[0], o[1], "{c}");
    assert_ne!(c.node(o[2]).inputs, c.node(c.node(o[0]).inputs[0]).inputs);
    assert_ne!(o[4], o[5]);
    assert_eq!(c.len(), 9, "{c}"); // a, b, sin a, 2f32, mul, sin b, 2f64, 0, -0
}

#[test]
fn cse_merges_commuted_operands_of_commutative_ops_only() {
    let mut g = Graph::new();
    let a = g.input("a", [3], DType::F64);
    let b = g.input("b", [2, 3], DType::F64);
    let s1 = g.add(a, b).unwrap();
    let s2 = g.add(b, a).unwrap();
    let d1 = g.sub(a, b).unwrap();
    let d2 = g.sub(b, a).unwrap();
    let m1 = g.max(a, b).unwrap();
    let m2 = g.max(b, a).unwrap();
    g.set_outputs(vec![s1, s2, d1, d2, m1, m2]);
    let c = cse(&g).unwrap();
    let o = c.outputs();
    assert_eq!(o[0], o[1], "{c}");
    assert_ne!(o[2], o[3]);
    assert_ne!(o[4], o[5]);
    assert_eq!(c.len(), 7, "{c}");
}

#[test]
fn cse_merges_bitwise_equal_nans_and_literal_arrays() {
    let mut g = Graph::new();
    let n1 = g.scalar(f64::NAN, DType::F64);
    let n2 = g.scalar(f64::NAN, DType::F64);
    let a1 = g
        .constant(Literal::F64(vec![1.0, 2.0].into()), [2], DType::F64)
        .unwrap();
    let a2 = g
        .constant(Literal::F64(vec![1.0, 2.0].into()), [2], DType::F64)
        .unwrap();
    let s1 = g.add(a1, n1).unwrap();
    let s2 = g.add(a2, n2).unwrap();
    g.set_outputs(vec![s1, s2]);
    let c = cse(&g).unwrap();
    assert_eq!(c.outputs()[0], c.outputs()[1]);
    assert_eq!(c.len(), 3, "{c}");
}

#[test]
fn optimize_cleans_an_autodiff_style_graph() {
    // The shape of what reverse mode emits: a unit seed times local
    // derivatives, an additive zero (-0.0, the identity of IEEE addition),
    // mul_zero guards of a zero cotangent.
    let mut g = Graph::new();
    let x = g.input("x", [4], DType::F64);
    let seed = g.scalar(1.0, DType::F64);
    let seed_b = g.broadcast(seed, [4]).unwrap();
    let c = g.cos(x).unwrap();
    let t = g.mul_zero(seed_b, c).unwrap();
    let zero = g.full([4], -0.0, DType::F64);
    let acc = g.add(zero, t).unwrap();
    let guarded = g.mul_zero(zero, c).unwrap(); // +0.0 everywhere
    let acc2 = g.add(acc, guarded).unwrap();
    g.set_outputs(vec![acc, acc2]);
    let o = optimize(&g).unwrap();
    // `acc + (+0.0)` stays: it turns a -0.0 of `acc` into +0.0.
    assert_eq!(
        o.to_string(),
        "%0 = input#0 \"x\"() : f64[4]\n%1 = cos(%0) : f64[4]\n\
         %2 = constant 0() : f64[4]\n%3 = add(%1, %2) : f64[4]\nreturn (%1, %3)"
    );
}

#[test]
fn outputs_may_become_inputs_or_constants() {
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    let z = g.scalar(-0.0, DType::F64);
    let y = g.add(x, z).unwrap();
    let two = g.scalar(2.0, DType::F64);
    let four = g.mul(two, two).unwrap();
    g.set_outputs(vec![four, y, y]);
    let o = optimize(&g).unwrap();
    assert_eq!(o.outputs()[1], o.input_ids()[0]);
    assert_eq!(o.outputs()[2], o.input_ids()[0]);
    assert_eq!(o.node(o.outputs()[0]).op, Op::Constant(Literal::Splat(4.0)));
}

#[test]
fn optimize_reaches_a_fixed_point() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F32);
    let one = g.scalar(1.0, DType::F32);
    let zero = g.scalar(0.0, DType::F32);
    // (x * (0 + 1)) reshaped twice: needs folding, then simplification, then CSE.
    let s = g.add(zero, one).unwrap();
    let m = g.mul(x, s).unwrap();
    let r = g.reshape(m, [3, 2]).unwrap();
    let r2 = g.reshape(r, [2, 3]).unwrap();
    let e1 = g.exp(r2).unwrap();
    let e2 = g.exp(x).unwrap();
    let y = g.sub(e1, e2).unwrap();
    g.set_outputs(vec![y]);
    let o = optimize(&g).unwrap();
    assert_eq!(o.len(), 3, "{o}");
    assert_eq!(o.node(o.outputs()[0]).op, Op::Binary(BinaryOp::Sub));
    assert_eq!(optimize(&o).unwrap(), o);
}

#[test]
fn optimize_keeps_stop_gradient_and_custom_ops() {
    let mut f = Graph::new();
    let fx = f.input("x", [2], DType::F64);
    let fy = f.exp(fx).unwrap();
    f.set_outputs(vec![fy]);
    let op = std::sync::Arc::new(crate::CustomOp {
        name: "e".into(),
        forward: f,
        vjp: None,
        jvp: None,
    });
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    let c1 = g.custom(op.clone(), &[x]).unwrap();
    let c2 = g.custom(op, &[x]).unwrap();
    let s = g.stop_gradient(c1).unwrap();
    let y = g.add(s, c2).unwrap();
    g.set_outputs(vec![y]);
    let o = optimize(&g).unwrap();
    let names: Vec<&str> = o.nodes().iter().map(|n| n.op.name()).collect();
    assert_eq!(
        names,
        vec!["input", "custom", "stop_gradient", "add"],
        "{o}"
    );
}

#[test]
fn origins_name_the_nodes_each_result_node_was_made_for() {
    let mut g = Graph::new();
    let c = g.scalar(2.0, DType::F64);
    let x = g.input("x", [3], DType::F64);
    let d = g.scalar(3.0, DType::F64);
    let cd = g.mul(c, d).unwrap(); // folded to a constant 6
    let s1 = g.sin(x).unwrap();
    let s2 = g.sin(x).unwrap(); // merged into s1
    let m = g.mul(s2, cd).unwrap();
    let z = g.full([3], -0.0, DType::F64);
    let a = g.add(m, z).unwrap(); // simplified to m
    let sg = g.stop_gradient(a).unwrap();
    g.set_outputs(vec![sg, s1]);
    let (h, stripped) = strip_stop_gradient_with_origins(&g).unwrap();
    assert_eq!(stripped.len(), h.len());
    let (o, origins) = optimize_with_origins(&h).unwrap();
    assert_eq!(origins.len(), o.len());
    let ops: Vec<(&str, NodeId)> = o
        .nodes()
        .iter()
        .zip(&origins)
        .map(|(n, &k)| (n.op.name(), stripped[k.index()]))
        .collect();
    assert_eq!(
        ops,
        vec![("input", x), ("constant", cd), ("sin", s1), ("mul", m)],
        "{o}"
    );
}

// ---- property test: random small graphs ----

/// Builds a graph from a list of `(opcode, a, b, param)` steps over a pool of
/// values; steps the builder rejects are skipped.
fn random_graph(steps: &[(u8, u8, u8, u8)]) -> Graph {
    let mut g = Graph::new();
    let mut pool = vec![
        g.input("x", [2, 3], DType::F64),
        g.input("y", [3], DType::F64),
        g.input("s", [], DType::F64),
        g.scalar(0.0, DType::F64),
        g.full([3], 1.0, DType::F64),
        g.full([2, 3], -0.0, DType::F64),
    ];
    pool.push(
        g.constant(Literal::F64(vec![0.5, -1.0, 2.0].into()), [3], DType::F64)
            .unwrap(),
    );
    let consts = [0.0, 1.0, -0.0, 2.0, f64::NAN];
    for &(op, a, b, p) in steps {
        let x = pool[a as usize % pool.len()];
        let y = pool[b as usize % pool.len()];
        let xs = g.shape(x).clone();
        let r = match op % 18 {
            0 => g.add(x, y),
            1 => g.sub(x, y),
            2 => g.mul(x, y),
            3 => g.div(x, y),
            4 => g.mul_zero(x, y),
            5 => g.neg(x),
            6 => g.exp(x),
            7 => g.push(
                Op::Reshape {
                    shape: Shape::from([xs.numel()]),
                },
                &[x],
            ),
            8 => {
                let perm: Vec<usize> = (0..xs.rank()).rev().collect();
                g.push(Op::Transpose { perm }, &[x])
            }
            9 => {
                let mut d = vec![2];
                d.extend_from_slice(xs.dims());
                g.push(Op::Broadcast { shape: d.into() }, &[x])
            }
            10 if xs.rank() > 0 => g.sum(x, &[p as usize % xs.rank()]),
            11 => g.compare(CmpOp::Lt, x, y).and_then(|m| g.select(m, x, y)),
            12 => g.cast(x, DType::F32).and_then(|c| g.cast(c, DType::F64)),
            13 => Ok(g.full(xs, consts[p as usize % consts.len()], DType::F64)),
            14 => g.stop_gradient(x),
            15 => g.concat(&[x, y], 0),
            16 => g.push(Op::Unary(UnaryOp::Sqrt), &[x]),
            _ => g.push(
                Op::Reduce {
                    op: crate::ReduceOp::Sum,
                    axes: vec![],
                },
                &[x],
            ),
        };
        if let Ok(id) = r {
            pool.push(id);
        }
    }
    let n = pool.len();
    g.set_outputs(vec![pool[n - 1], pool[n / 2], pool[0]]);
    g
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn optimize_keeps_types_and_verifies(
        steps in proptest::collection::vec((0u8..18, any::<u8>(), any::<u8>(), any::<u8>()), 0..14)
    ) {
        let g = random_graph(&steps);
        g.verify().unwrap();
        for pass in [dce, cse, fold_constants, simplify, strip_stop_gradient, optimize] {
            let o = pass(&g).unwrap();
            o.verify().unwrap();
            let tys = |g: &Graph| -> Vec<TensorType> { g.outputs().iter().map(|&i| g.ty(i)).collect() };
            prop_assert_eq!(tys(&o), tys(&g));
            let ins = |g: &Graph| -> Vec<(String, TensorType)> {
                g.inputs().iter().map(|i| (i.name.clone(), g.ty(i.node))).collect()
            };
            prop_assert_eq!(ins(&o), ins(&g));
            prop_assert!(o.len() <= 2 * g.len(), "grew: {}\n->\n{}", g, o);
        }
        let o = optimize(&g).unwrap();
        prop_assert_eq!(&optimize(&o).unwrap(), &o);
        // Origins: one per node, each a node of the argument; inputs come
        // from the inputs, in order.
        for (h, origins) in [optimize_with_origins(&g).unwrap(), strip_stop_gradient_with_origins(&g).unwrap()] {
            prop_assert_eq!(origins.len(), h.len());
            prop_assert!(origins.iter().all(|k| k.index() < g.len()));
            for (i, j) in h.inputs().iter().zip(g.inputs()) {
                prop_assert_eq!(origins[i.node.index()], j.node);
            }
        }
        prop_assert_eq!(optimize_with_origins(&g).unwrap().0, o);
    }
}
