//! The edges of the autodiff rules: non-differentiable points (as JAX),
//! NaN-free gradients through selects, errors naming the node and shapes,
//! unused inputs, `stop_gradient` and casts, `f32` against `f64`.

mod common;

use common::*;
use rlx_core::autodiff::{grad, hessian, hvp, jacobian, jvp, jvp_nodes, vjp, vjp_nodes};
use rlx_core::{CmpOp, DType, Error, Graph, NodeId, ReduceOp};

#[test]
fn non_differentiable_points_follow_jax() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let r = g.relu(x).unwrap();
    let a = g.abs(x).unwrap();
    let s = g.add(r, a).unwrap();
    let f = g.sum_all(s).unwrap();
    g.set_outputs(vec![f]);
    let out = run(&grad(&g, &[0]).unwrap(), &[vec![0.0, 2.0, -2.0]]);
    // relu'(0) = 0 and abs'(0) = 0; relu' + abs' = 2 at 2, -1 at -2
    assert_close(&out[1], &[0.0, 2.0, -1.0], 0.0, "relu + abs");

    // max/min ties split 0.5/0.5 (JAX's lax.max `_balanced_eq`)
    let mut g = Graph::new();
    let a = input(&mut g, "a", &[2]);
    let b = input(&mut g, "b", &[2]);
    let m = g.max(a, b).unwrap();
    let n = g.min(a, b).unwrap();
    let n2 = g.mul(n, n).unwrap();
    let s = g.add(m, n2).unwrap();
    let f = g.sum_all(s).unwrap();
    g.set_outputs(vec![f]);
    let out = run(
        &grad(&g, &[0, 1]).unwrap(),
        &[vec![1.0, 3.0], vec![1.0, 2.0]],
    );
    // element 0 tied at 1: max gives 0.5 each, min² gives 2·1·0.5 each
    // element 1: max picks a (1), min picks b (2·2 = 4)
    assert_close(&out[1], &[1.5, 1.0], 0.0, "d/da");
    assert_close(&out[2], &[1.5, 4.0], 0.0, "d/db");

    // reduce_max splits evenly over tied maxima
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4]);
    let m = g.reduce(ReduceOp::Max, x, &[0]).unwrap();
    g.set_outputs(vec![m]);
    let out = run(&grad(&g, &[0]).unwrap(), &[vec![3.0, 1.0, 3.0, 3.0]]);
    let third = 1.0 / 3.0;
    assert_close(
        &out[1],
        &[third, 0.0, third, third],
        1e-15,
        "reduce_max ties",
    );

    // prod with zeros: ∂/∂x_i = product of the others
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4]);
    let p = g.reduce(ReduceOp::Prod, x, &[0]).unwrap();
    g.set_outputs(vec![p]);
    let gp = grad(&g, &[0]).unwrap();
    let out = run(&gp, &[vec![2.0, 0.0, 3.0, 5.0]]);
    assert_close(&out[1], &[0.0, 30.0, 0.0, 0.0], 0.0, "prod, one zero");
    let out = run(&gp, &[vec![2.0, 0.0, 3.0, 0.0]]);
    assert_close(&out[1], &[0.0, 0.0, 0.0, 0.0], 0.0, "prod, two zeros");
    let out = run(&gp, &[vec![2.0, -1.0, 3.0, 0.5]]);
    assert_close(&out[1], &[-1.5, 3.0, -1.0, -6.0], 1e-15, "prod, no zero");
}

/// Builds `f(x)` into a graph.
type Build = Box<dyn Fn(&mut Graph, NodeId) -> NodeId>;

/// `select(x > 0, f(x), 0 * x)` summed.
fn guarded(f: impl Fn(&mut Graph, NodeId) -> NodeId) -> Graph {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let z = g.scalar(0.0, DType::F64);
    let c = g.compare(CmpOp::Gt, x, z).unwrap();
    let fx = f(&mut g, x);
    let zx = g.mul(z, x).unwrap();
    let y = g.select(c, fx, zx).unwrap();
    let s = g.sum_all(y).unwrap();
    g.set_outputs(vec![s]);
    g
}

#[test]
fn select_gradients_are_nan_free() {
    let xs = vec![0.0, 1.0, 4.0];
    let g = guarded(|g, x| g.sqrt(x).unwrap());
    let out = run(&grad(&g, &[0]).unwrap(), std::slice::from_ref(&xs));
    assert_close(&out[1], &[0.0, 0.5, 0.25], 1e-15, "sqrt gradient");
    let h = run(&hessian(&g, &[0]).unwrap(), std::slice::from_ref(&xs));
    // sqrt'' = -x^{-3/2}/4
    let want = [0.0, 0.0, 0.0, 0.0, -0.25, 0.0, 0.0, 0.0, -0.25 / 8.0];
    assert_close(&h[1], &want, 1e-15, "sqrt hessian");
    let out = run(&jvp(&g, &[0]).unwrap(), &[xs.clone(), vec![1.0, 1.0, 1.0]]);
    assert_close(&out[1], &[0.75], 1e-15, "sqrt jvp");

    // x ln x, 1/x, x^-2, x^0.5, asin(1 - x/4): derivatives infinite at x = 0
    let cases: Vec<(Build, &str)> = vec![
        (
            Box::new(|g: &mut Graph, x| {
                let l = g.ln(x).unwrap();
                g.mul(x, l).unwrap()
            }),
            "x ln x",
        ),
        (Box::new(|g: &mut Graph, x| g.recip(x).unwrap()), "recip"),
        (Box::new(|g: &mut Graph, x| g.rsqrt(x).unwrap()), "rsqrt"),
        (
            Box::new(|g: &mut Graph, x| g.powi(x, -2).unwrap()),
            "powi -2",
        ),
        (
            Box::new(|g: &mut Graph, x| {
                let h = g.scalar(0.5, DType::F64);
                g.pow(x, h).unwrap()
            }),
            "pow",
        ),
        (
            Box::new(|g: &mut Graph, x| {
                let o = g.scalar(1.0, DType::F64);
                g.div(o, x).unwrap()
            }),
            "div",
        ),
        (
            Box::new(|g: &mut Graph, x| {
                let o = g.scalar(1.0, DType::F64);
                let q = g.scalar(0.25, DType::F64);
                let xq = g.mul(x, q).unwrap();
                let xm = g.sub(o, xq).unwrap();
                g.asin(xm).unwrap()
            }),
            "asin",
        ),
    ];
    for (f, name) in cases {
        let g = guarded(f);
        let out = run(&grad(&g, &[0]).unwrap(), std::slice::from_ref(&xs));
        assert!(out[1].iter().all(|v| v.is_finite()), "{name}: {:?}", out[1]);
        assert_eq!(out[1][0], 0.0, "{name}");
        let h = run(&hessian(&g, &[0]).unwrap(), std::slice::from_ref(&xs));
        assert_eq!(h[1][0], 0.0, "{name}: second derivative at 0");
    }
}

#[test]
fn errors_name_the_node_and_shapes() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let y = g.sin(x).unwrap();
    g.set_outputs(vec![y]);
    // grad of a non-scalar output
    let e = grad(&g, &[0]).unwrap_err();
    assert!(matches!(e, Error::NotScalar { op: "grad", .. }), "{e}");
    assert!(e.to_string().contains("[3]"));
    // wrt position out of range
    let e = grad(&g, &[4]).unwrap_err().to_string();
    assert!(e.contains("#4") && e.contains("1 input"), "{e}");
    // wrt a node that is not an input
    let mut h = g.clone();
    let ct = h.ones_like(y);
    let e = vjp_nodes(&mut h, &[y], &[ct], &[y])
        .unwrap_err()
        .to_string();
    assert!(e.contains("%1") && e.contains("sin"), "{e}");
    // a tangent of the wrong shape
    let mut h = g.clone();
    let t = input(&mut h, "t", &[4]);
    let e = jvp_nodes(&mut h, &[x], &[t], &[y]).unwrap_err().to_string();
    assert!(
        e.contains("%0") && e.contains("[3]") && e.contains("[4]"),
        "{e}"
    );
    // a cotangent of the wrong shape
    let mut h = g.clone();
    let c = input(&mut h, "c", &[2]);
    let e = vjp_nodes(&mut h, &[y], &[c], &[x]).unwrap_err().to_string();
    assert!(
        e.contains("%1") && e.contains("[3]") && e.contains("[2]"),
        "{e}"
    );
    // hessian/hvp of a non-scalar
    assert!(matches!(hessian(&g, &[0]), Err(Error::NotScalar { .. })));
    assert!(matches!(hvp(&g, &[0]), Err(Error::NotScalar { .. })));
}

#[test]
fn unused_input_gets_zero_gradient_of_its_shape() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let _unused = input(&mut g, "u", &[2, 5]);
    let k = g.input("k", [4], DType::I64);
    let s = g.sum_all(x).unwrap();
    g.set_outputs(vec![s]);
    let d = grad(&g, &[1, 0, 2]).unwrap();
    assert_eq!(d.shape(d.outputs()[1]).dims(), &[2, 5]);
    assert_eq!(d.dtype(d.outputs()[3]), DType::I64);
    let out = run(&d, &[vec![1.0; 3], vec![2.0; 10], vec![1.0; 4]]);
    assert_close(&out[1], &[0.0; 10], 0.0, "unused");
    assert_close(&out[2], &[1.0; 3], 0.0, "used");
    assert_close(&out[3], &[0.0; 4], 0.0, "integer input");
    let _ = k;
    // the jacobian of an unused input is a zero block too
    let j = jacobian(&g, &[1]).unwrap();
    assert_eq!(j.shape(j.outputs()[1]).dims(), &[2, 5]);
}

#[test]
fn stop_gradient_and_casts() {
    // d/dx [x * stop_gradient(x)] = stop_gradient(x) = x
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[2]);
    let s = g.stop_gradient(x).unwrap();
    let p = g.mul(x, s).unwrap();
    let f = g.sum_all(p).unwrap();
    g.set_outputs(vec![f]);
    let out = run(&grad(&g, &[0]).unwrap(), &[vec![3.0, -2.0]]);
    assert_close(&out[1], &[3.0, -2.0], 0.0, "stop_gradient");
    // cast f64 -> f32 -> f64 passes the tangent through (rounded to f32)
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[2]);
    let a = g.cast(x, DType::F32).unwrap();
    let a = g.sin(a).unwrap();
    let b = g.cast(a, DType::F64).unwrap();
    g.set_outputs(vec![b]);
    let out = run(&jvp(&g, &[0]).unwrap(), &[vec![0.5, 1.0], vec![1.0, 2.0]]);
    assert_close(
        &out[1],
        &[0.5f64.cos(), 2.0 * 1.0f64.cos()],
        1e-6,
        "cast jvp",
    );
    let out = run(&vjp(&g, &[0]).unwrap(), &[vec![0.5, 1.0], vec![1.0, 2.0]]);
    assert_close(
        &out[1],
        &[0.5f64.cos(), 2.0 * 1.0f64.cos()],
        1e-6,
        "cast vjp",
    );
}

#[test]
fn f32_gradients_match_f64_within_f32_precision() {
    let build = |dt: DType| {
        let mut g = Graph::new();
        let x = g.input("x", [5], dt);
        let s = g.sin(x).unwrap();
        let e = g.exp(s).unwrap();
        let t = g.tanh(e).unwrap();
        let l = g.log_softmax(t, 0).unwrap();
        let f = g.sum_all(l).unwrap();
        let f = g.add(f, f).unwrap();
        g.set_outputs(vec![f]);
        g
    };
    let xs = vec![0.1, -0.4, 0.9, 1.3, -1.1];
    let d64 = run(
        &grad(&build(DType::F64), &[0]).unwrap(),
        std::slice::from_ref(&xs),
    );
    let d32 = run(
        &grad(&build(DType::F32), &[0]).unwrap(),
        std::slice::from_ref(&xs),
    );
    assert_close(&d32[1], &d64[1], 1e-5, "f32 vs f64 gradient");
}
