//! Movement and kernel ops, size-0 values, inlined custom ops.

use super::*;

#[test]
fn size_zero_values() {
    let mut g = Graph::new();
    let x = g.input("x", [0, 3], DType::F64);
    let b = g.input("b", [3], DType::F64);
    let y = g.mul(x, b).unwrap();
    let e = g.exp(y).unwrap();
    let s = g.sum(e, &[0]).unwrap();
    let p = g.reduce(ReduceOp::Prod, e, &[0]).unwrap();
    let mx = g.reduce(ReduceOp::Max, e, &[0]).unwrap();
    let mn = g.reduce(ReduceOp::Mean, e, &[0, 1]).unwrap();
    g.set_outputs(vec![e, s, p, mx, mn]);
    let xv = tensor(&[], &[0, 3], DType::F64);
    let bv = tensor(&[1.0, 2.0, 3.0], &[3], DType::F64);
    let exe = compile(&g).unwrap();
    let out = exe.run(&[&xv, &bv]).unwrap();
    assert_eq!(out[0].shape().dims(), &[0, 3]);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![0.0; 3]);
    assert_eq!(out[2].to_vec::<f64>().unwrap(), vec![1.0; 3]);
    assert_eq!(out[3].to_vec::<f64>().unwrap(), vec![f64::NEG_INFINITY; 3]);
    assert!(out[4].item::<f64>().unwrap().is_nan());
}

#[test]
fn movement_and_kernel_ops() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3, 4], DType::F64);
    let idx = g.input("idx", [5], DType::I64);
    let t = g.transpose(x, &[2, 0, 1]).unwrap();
    let s = g.slice_range(x, 1..3, 2).unwrap();
    let c = g.concat(&[x, x, s], 2).unwrap();
    let r = g.reshape(t, [4, 6]).unwrap();
    let bb = g.broadcast(s, [3, 2, 3, 2]).unwrap();
    let e = g.exp(bb).unwrap();
    let ga = g.gather(x, idx, 1).unwrap();
    let upd = g.input("upd", [2, 5, 4], DType::F64);
    let sc = g.scatter_add(x, idx, upd, 1).unwrap();
    let sm = g.softmax(x, 1).unwrap();
    let lsm = g.log_softmax(x, 2).unwrap();
    let sg = g.stop_gradient(sm).unwrap();
    let sgr = g.reshape(sg, [6, 4]).unwrap();
    g.set_outputs(vec![t, s, c, r, e, ga, sc, sm, lsm, sgr, x]);
    let xv = tensor(&values(24, 41, -2.0, 2.0), &[2, 3, 4], DType::F64);
    let iv = tensor(&[2.0, 0.0, 1.0, 2.0, 2.0], &[5], DType::I64);
    let uv = tensor(&values(40, 42, -1.0, 1.0), &[2, 5, 4], DType::F64);
    check(&g, &[&xv, &iv, &uv], 1e-12, "movement");
    // Out-of-range indices are an error naming the op and the node.
    let bad = tensor(&[0.0, 3.0, 0.0, 0.0, 0.0], &[5], DType::I64);
    let err = run_err(&compile(&g).unwrap(), &[&xv, &bad, &uv]);
    assert!(
        matches!(
            err,
            Error::AtNode {
                node,
                op: "gather",
                ..
            } if node == ga.0
        ),
        "{err}"
    );
    assert!(
        matches!(
            err.root(),
            Error::IndexOutOfRange {
                op: "gather",
                index: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("node {ga} (`gather`)")),
        "{err}"
    );
}

#[test]
fn custom_ops_are_inlined() {
    let mut f = Graph::new();
    let a = f.input("a", [2], DType::F64);
    let b = f.square(a).unwrap();
    f.set_outputs(vec![b]);
    let op = std::sync::Arc::new(rlx_core::CustomOp {
        name: "sq".into(),
        forward: f,
        vjp: None,
        jvp: None,
    });
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    let y = g.custom(op, &[x]).unwrap();
    g.set_outputs(vec![y]);
    let out = compile(&g)
        .unwrap()
        .run(&[&tensor(&[3.0, -2.0], &[2], DType::F64)])
        .unwrap();
    assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![9.0, 4.0]);
}

/// The shapes of a batched Jacobian (issue #16): column slices `[N, 1]` of
/// an `[N, 3]` value, a concat on the last axis, a `[3, N, 3]` to
/// `[N, 3, 3]` transpose (inner axis of 3), and fused loops over
/// `[3, N, 1]` reading `[N, 1]` and `[3, 1, 1]` operands. Copies merge and
/// reorder axes and broadcast reads merge axes, which must not change a
/// single bit.
#[test]
fn column_slices_and_short_axes_are_exact() {
    let n = 70; // longer than the copy's short-run threshold
    let mut g = Graph::new();
    let u = g.input("u", [n, 3], DType::F64);
    let cols: Vec<_> = (0..3)
        .map(|k| g.slice_range(u, k..k + 1, 1).unwrap())
        .collect();
    let c = crate::common::constant(&mut g, vec![0.5, -2.0, 3.0], &[3, 1, 1]);
    // `square`, not a transcendental op: the reference evaluator uses std
    // math, rlx its own (within a few ulp), and this test wants exact bits.
    let e = g.square(cols[0]).unwrap();
    let p = g.mul(c, e).unwrap(); // [3, n, 1]
    let q = g.mul(p, cols[2]).unwrap();
    let cc = g.concat(&[p, q, p], 2).unwrap(); // [3, n, 3]
    let t = g.transpose(cc, &[1, 2, 0]).unwrap(); // [n, 3, 3]
    let back = g.concat(&[cols[2], cols[1], cols[0]], 1).unwrap();
    g.set_outputs(vec![t, back, cols[1]]);
    let uv = tensor(&values(3 * n, 7, -1.0, 1.0), &[n, 3], DType::F64);
    check(&g, &[&uv], 0.0, "column slices");
}
