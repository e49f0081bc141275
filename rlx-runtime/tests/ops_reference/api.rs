//! The tensor API around the kernels: composites, operators, the
//! interpreter, error messages, printing, the traced path, `eval_into`.

use super::*;

#[test]
fn composites_match_their_formulas() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 9.0], [2, 3]);
    assert_eq!(x.dot(&x).item::<f64>().unwrap(), 136.0);
    assert!((x.norm().item::<f64>().unwrap() - 136f64.sqrt()).abs() < 1e-14);
    // var of [1,2,3] = 2/3, of [4,5,9] = (4+1+... ) mean 6: (4+1+9)/3 = 14/3.
    let v = vals(&x.var(&[1]));
    assert!((v[0] - 2.0 / 3.0).abs() < 1e-15 && (v[1] - 14.0 / 3.0).abs() < 1e-14);
    let ln = x.layer_norm(0.0, 1);
    let rows = vals(&ln);
    for r in 0..2 {
        let row = &rows[r * 3..r * 3 + 3];
        let m: f64 = row.iter().sum::<f64>() / 3.0;
        let var: f64 = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 3.0;
        assert!(m.abs() < 1e-15 && (var - 1.0).abs() < 1e-14, "{row:?}");
    }
    let logits = Tensor::from_slice(&[2.0f64, 1.0, 0.0, 0.0, 0.0, 3.0], [2, 3]);
    let labels = Tensor::from_slice(&[1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0], [2, 3]);
    let ce = Tensor::cross_entropy_with_logits(&logits, &labels)
        .item::<f64>()
        .unwrap();
    let l0 = -(2.0 - (2f64.exp() + 1f64.exp() + 1.0).ln());
    let l1 = -(0.0 - (1.0 + 1.0 + 3f64.exp()).ln());
    assert!((ce - (l0 + l1) / 2.0).abs() < 1e-14);
    assert_eq!(vals(&x.clamp(2.0, 4.0)), vec![2.0, 2.0, 3.0, 4.0, 4.0, 4.0]);
    assert_eq!(vals(&x.mean_all()), vec![4.0]);
}

#[test]
fn operators_on_values_references_and_scalars() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    let b = Tensor::from_slice(&[3.0f32, 5.0], [2]);
    assert_eq!(vals(&(&a + &b)), vec![4.0, 7.0]);
    assert_eq!(vals(&(a.clone() - &b)), vec![-2.0, -3.0]);
    assert_eq!(vals(&(&a * b.clone())), vec![3.0, 10.0]);
    assert_eq!(
        vals(&(a.clone() / b.clone())),
        vec![(1.0f32 / 3.0) as f64, (2.0f32 / 5.0) as f64]
    );
    assert_eq!(vals(&(2.0 * &a)), vec![2.0, 4.0]);
    assert_eq!(vals(&(&a - 1.0)), vec![0.0, 1.0]);
    assert_eq!(vals(&(1.0 / a.clone())), vec![1.0, 0.5]);
    assert_eq!(vals(&(10.0 - b.clone())), vec![7.0, 5.0]);
    assert_eq!(vals(&-&a), vec![-1.0, -2.0]);
    assert_eq!((2.0 * &a).dtype(), DType::F32);
    let mut c = a.clone();
    c += &b;
    c *= 2.0;
    c -= Tensor::scalar(1.0f32);
    c /= 0.5;
    assert_eq!(vals(&c), vec![14.0, 26.0]);
}

// ---------- interpreter ----------

#[test]
fn interpreter_runs_graphs_and_checks_inputs() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let w = g.input("w", [3], DType::F64);
    let c = g
        .constant(
            rlx_core::Literal::F64(vec![1.0, -1.0, 0.5].into()),
            [3],
            DType::F64,
        )
        .unwrap();
    let y = g.mul(x, w).unwrap();
    let y = g.add(y, c).unwrap();
    let s = g.sum(y, &[1]).unwrap();
    let e = g.exp(s).unwrap();
    g.set_outputs(vec![e, y]);
    let xv = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let wv = Tensor::from_slice(&[1.0f64, 0.0, 2.0], [3]);
    let out = interpret(&g, &[&xv, &wv]).unwrap();
    let eager = ((&xv * &wv) + Tensor::from_slice(&[1.0f64, -1.0, 0.5], [3]))
        .sum(&[1])
        .exp();
    assert_eq!(vals(&out[0]), vals(&eager));
    assert_eq!(out[1].shape().dims(), &[2, 3]);

    let e = interpret(&g, &[&xv]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::CountMismatch {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{e}"
    );
    let bad = Tensor::from_slice(&[1.0f32, 0.0, 2.0], [3]);
    let e = interpret(&g, &[&xv, &bad]).unwrap_err();
    match &e {
        Error::InputMismatch { name, .. } => assert_eq!(name, "w"),
        other => panic!("unexpected {other}"),
    }
    assert!(e.to_string().contains("`w`"), "{e}");
}

#[test]
fn interpreter_runs_custom_ops_by_their_forward_graph() {
    let mut f = Graph::new();
    let a = f.input("a", [2], DType::F64);
    let y = f.square(a).unwrap();
    let y = f.sum(y, &[0]).unwrap();
    f.set_outputs(vec![y]);
    let op = std::sync::Arc::new(rlx_core::CustomOp {
        name: "sumsq".into(),
        forward: f,
        vjp: None,
        jvp: None,
    });
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    let c = g.custom(op, &[x]).unwrap();
    g.set_outputs(vec![c]);
    let out = interpret(&g, &[&Tensor::from_slice(&[3.0f64, 4.0], [2])]).unwrap();
    assert_eq!(out[0].item::<f64>().unwrap(), 25.0);
}

// ---------- errors, printing, tracing ----------

#[test]
fn shape_errors_name_the_op_and_both_shapes() {
    let a = Tensor::zeros([2, 3], DType::F64);
    let b = Tensor::zeros([4], DType::F64);
    let msg = a.try_add(&b).unwrap_err().to_string();
    assert!(
        msg.contains("`add`") && msg.contains("[2, 3]") && msg.contains("[4]"),
        "{msg}"
    );
    let msg = a.try_matmul(&b.reshape([4, 1])).unwrap_err().to_string();
    assert!(
        msg.contains("`matmul`") && msg.contains("[2, 3]") && msg.contains("[4, 1]"),
        "{msg}"
    );
    let msg = a.try_reshape([5]).unwrap_err().to_string();
    assert!(msg.contains("reshape") && msg.contains("[5]"), "{msg}");
    // The panicking form names this file and line.
    let line = line!() + 1;
    let err = std::panic::catch_unwind(|| a.mul(&b)).unwrap_err();
    let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        text.contains("`mul`") && text.contains(&format!("ops_reference/api.rs:{line}")),
        "{text}"
    );
}

#[test]
fn display_matches_ndarray_style() {
    let m = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    assert_eq!(m.to_string(), "[[1, 2],\n [3, 4]]");
    assert_eq!(
        format!("{m:?}"),
        "[[1.0, 2.0],\n [3.0, 4.0]], shape=[2, 2], dtype=f64"
    );
    let c = Tensor::arange(8, DType::I64).reshape([2, 2, 2]);
    assert_eq!(
        c.to_string(),
        "[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]]"
    );
    assert_eq!(Tensor::scalar(2.5f32).to_string(), "2.5");
    assert_eq!(Tensor::zeros([0], DType::F32).to_string(), "[]");
    assert_eq!(Tensor::zeros([2, 0], DType::F32).to_string(), "[[],\n []]");
    assert_eq!(
        Tensor::from_slice(&[true, false], [2]).to_string(),
        "[true, false]"
    );
    assert_eq!(
        format!("{:.2}", Tensor::from_slice(&[1.0f64, 1.0 / 3.0], [2])),
        "[1.00, 0.33]"
    );
    let h = tensor(&[1.5, -2.0], &[2], DType::F16);
    assert_eq!(format!("{h:?}"), "[1.5, -2.0], shape=[2], dtype=f16");
    let long = Tensor::arange(1000, DType::I64);
    assert_eq!(long.to_string(), "[0, 1, 2, ..., 997, 998, 999]");
}

#[test]
fn traced_tensors_record_ops_and_errors() {
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let y = (x.sin() * 2.0 + 1.0).sum_all();
    assert_eq!(
        format!("{y}"),
        format!("Tensor(traced %{}: f64[])", y.traced_node().unwrap().0)
    );
    assert!(format!("{x:?}").starts_with("Tensor(traced %0: f64[3]"));
    let g = t.finish(&[&y]).unwrap();
    g.verify().unwrap();
    let ops: Vec<&str> = g.nodes().iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops,
        ["input", "sin", "constant", "mul", "constant", "add", "sum"]
    );
    let out = interpret(&g, &[&Tensor::from_slice(&[0.0f64, 0.0, 0.0], [3])]).unwrap();
    assert_eq!(out[0].item::<f64>().unwrap(), 3.0);

    // A shape error is recorded with this file and line, and tracing goes on.
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let line = line!() + 1;
    let bad = x.add(&Tensor::zeros([2], DType::F64));
    let after = bad.exp();
    let err = t.finish(&[&after]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`add`") && msg.contains("[3]") && msg.contains("[2]"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("ops_reference/api.rs:{line}")),
        "{msg}"
    );

    // A concrete tensor created outside the trace is refused.
    let captured = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let y = &x * &captured;
    let err = t.finish(&[&y]).unwrap_err();
    assert!(err.to_string().contains("created outside"), "{err}");

    // ... also after eager arithmetic on it inside the trace, while values
    // created inside the trace are legal constants.
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let local = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]).exp() * 2.0;
    let ok = &x * &local;
    let laundered = (captured.sin() + 1.0).reshape([3]);
    let y = &ok + &laundered;
    let err = t.finish(&[&y]).unwrap_err();
    assert!(err.to_string().contains("created outside"), "{err}");
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let local = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]).exp() * 2.0;
    let g = t.finish(&[&(&x * &local)]).unwrap();
    let out = interpret(&g, &[&Tensor::from_slice(&[1.0f64, 1.0, 1.0], [3])]).unwrap();
    let want: Vec<f64> = [1.0f64, 2.0, 3.0]
        .iter()
        .map(|&v| rlx_runtime::kernels::vmath::exp(v) * 2.0)
        .collect();
    assert_eq!(vals(&out[0]), want);
}

#[test]
fn eval_into_reports_bad_calls() {
    use rlx_runtime::kernels::{eval_into, Operand};
    let s = Shape::from([2]);
    let x = Storage::F64(vec![1.0, 2.0]);
    let mut out = Storage::F64(vec![0.0; 2]);
    let e = eval_into(&Op::Input { index: 0 }, &[], &s, &mut out).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "input", .. }),
        "{e}"
    );
    let mut short = Storage::F64(vec![0.0; 1]);
    let e = eval_into(
        &Op::Unary(UnaryOp::Exp),
        &[Operand::new(&x, &s)],
        &s,
        &mut short,
    );
    assert!(e.unwrap_err().to_string().contains("output buffer"));
    let mut wrong = Storage::F32(vec![0.0; 2]);
    let e = eval_into(
        &Op::Unary(UnaryOp::Exp),
        &[Operand::new(&x, &s)],
        &s,
        &mut wrong,
    );
    assert!(matches!(
        e.unwrap_err(),
        Error::DTypeMismatch { op: "exp", .. }
    ));
    let e = eval_into(
        &Op::Binary(BinaryOp::Add),
        &[Operand::new(&x, &s)],
        &s,
        &mut out,
    );
    assert!(matches!(
        e.unwrap_err(),
        Error::Arity {
            op: "add",
            expected: 2,
            got: 1
        }
    ));
    // Shapes that do not agree with the output are refused, not indexed out of bounds.
    let s3 = Shape::from([3]);
    let mut out3 = Storage::F64(vec![0.0; 3]);
    let ops = [
        Op::Binary(BinaryOp::Mul),
        Op::Concat { axis: 0 },
        Op::MatMul,
    ];
    for op in &ops {
        let e = eval_into(
            op,
            &[Operand::new(&x, &s), Operand::new(&x, &s)],
            &s3,
            &mut out3,
        );
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("[2], [2]") && msg.contains("[3]"), "{msg}");
    }
    let e = eval_into(
        &Op::Slice {
            axis: 0,
            start: 1,
            len: 3,
        },
        &[Operand::new(&x, &s)],
        &s3,
        &mut out3,
    );
    assert!(e.is_err());
    // A constant fills its literal, converted to the output dtype.
    let mut c = Storage::I64(vec![0; 3]);
    let lit = rlx_core::Literal::F64(vec![1.9, -2.0, 3.0].into());
    eval_into(&Op::Constant(lit), &[], &Shape::from([3]), &mut c).unwrap();
    assert_eq!(c, Storage::I64(vec![1, -2, 3]));
}
