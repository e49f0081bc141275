use super::*;
use crate::UnaryOp;

#[test]
fn builder_infers_broadcast_shapes() {
    let mut g = Graph::new();
    let a = g.input("a", [4, 1], DType::F32);
    let b = g.input("b", [3], DType::F32);
    let c = g.mul(a, b).unwrap();
    assert_eq!(g.shape(c), &Shape::from([4, 3]));
    g.set_outputs(vec![c]);
    g.verify().unwrap();
}

#[test]
fn mismatch_names_op_and_shapes() {
    let mut g = Graph::new();
    let a = g.input("a", [2, 3], DType::F64);
    let b = g.input("b", [4], DType::F64);
    let msg = g.add(a, b).unwrap_err().to_string();
    assert!(
        msg.contains("`add`") && msg.contains("[2, 3]") && msg.contains("[4]"),
        "{msg}"
    );
}

#[test]
fn display_prints_one_node_per_line() {
    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F64);
    let y = g.exp(x).unwrap();
    g.set_outputs(vec![y]);
    let s = g.to_string();
    assert_eq!(s.lines().count(), 3, "{s}");
    assert!(s.contains("%1 = exp(%0) : f64[3]"), "{s}");
}

#[test]
fn sum_to_undoes_broadcast() {
    let mut g = Graph::new();
    let x = g.input("x", [5, 4, 3], DType::F64);
    let s = g.sum_to(x, &Shape::from([4, 1])).unwrap();
    assert_eq!(g.shape(s), &Shape::from([4, 1]));
    let r = g.sum_to(x, &Shape::from([4, 1, 3])).unwrap_err();
    assert!(r.to_string().contains("sum_to"));
    let ok = g.sum_to(x, &Shape::from([1, 3])).unwrap();
    assert_eq!(g.shape(ok), &Shape::from([1, 3]));
}

#[test]
fn inline_substitutes_inputs() {
    let mut f = Graph::new();
    let x = f.input("x", [2], DType::F64);
    let y = f.sin(x).unwrap();
    f.set_outputs(vec![y]);
    let mut g = Graph::new();
    let a = g.input("a", [2], DType::F64);
    let out = g.inline(&f, &[a]).unwrap();
    assert_eq!(g.node(out[0]).op, Op::Unary(UnaryOp::Sin));
    assert_eq!(g.node(out[0]).inputs, vec![a]);
    let b = g.input("b", [3], DType::F64);
    assert!(g.inline(&f, &[b]).is_err());
}

#[test]
fn inline_custom_expands_forward() {
    let mut f = Graph::new();
    let x = f.input("x", [2], DType::F64);
    let y = f.exp(x).unwrap();
    f.set_outputs(vec![y]);
    let op = std::sync::Arc::new(crate::CustomOp {
        name: "myexp".into(),
        forward: f,
        vjp: None,
        jvp: None,
    });
    let mut g = Graph::new();
    let a = g.input("a", [2], DType::F64);
    let c = g.custom(op.clone(), &[a]).unwrap();
    g.set_outputs(vec![c]);
    assert!(g.to_string().contains("custom myexp"));
    let flat = g.inline_custom().unwrap();
    flat.verify().unwrap();
    assert_eq!(flat.node(flat.outputs()[0]).op, Op::Unary(UnaryOp::Exp));
    let b = g.input("b", [3], DType::F64);
    assert!(g.custom(op, &[b]).is_err());
}

#[test]
fn verify_catches_bad_types() {
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    g.push_unchecked(Node {
        op: Op::Unary(UnaryOp::Exp),
        inputs: vec![x],
        shape: Shape::from([3]),
        dtype: DType::F64,
    });
    let e = g.verify().unwrap_err().to_string();
    assert!(e.contains("%1") && e.contains("differs"), "{e}");
}
