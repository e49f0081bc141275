//! Custom rules (`custom_op`): a numerically stable VJP, a JVP used in
//! forward and reverse mode, and the checks of the rules' signatures.

mod common;

use common::*;
use rlx_core::autodiff::{custom_op, grad, hessian, jacfwd, jvp, vjp};
use rlx_core::{Graph, Op};

/// softplus(x) = ln(1 + e^x), naive forward; overflows its naive derivative at large x.
fn softplus_forward() -> Graph {
    let mut f = Graph::new();
    let x = input(&mut f, "x", &[3]);
    let e = f.exp(x).unwrap();
    let y = f.unary(rlx_core::UnaryOp::Log1p, e).unwrap();
    f.set_outputs(vec![y]);
    f
}

#[test]
fn custom_vjp_gives_a_numerically_stable_rule() {
    // the stable rule: x̄ = ȳ · sigmoid(x)
    let mut r = Graph::new();
    let x = input(&mut r, "x", &[3]);
    let _y = input(&mut r, "y", &[3]);
    let ct = input(&mut r, "ct", &[3]);
    let s = r.sigmoid(x).unwrap();
    let d = r.mul(ct, s).unwrap();
    r.set_outputs(vec![d]);
    let op = custom_op("softplus", softplus_forward(), Some(r), None).unwrap();
    let xs = vec![-800.0, 0.0, 800.0];

    let naive = grad(&sum_of(&softplus_forward()), &[0]).unwrap();
    let out = run(&naive, std::slice::from_ref(&xs));
    // e^800 overflows: the naive chain rule gives 1/(1 + inf) · inf, guarded to 0
    assert!(
        out[1][2] == 0.0,
        "the naive rule loses the gradient: {:?}",
        out[1]
    );

    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let y = g.custom(op.clone(), &[x]).unwrap();
    let s = g.sum_all(y).unwrap();
    g.set_outputs(vec![s]);
    let out = run(&grad(&g, &[0]).unwrap(), std::slice::from_ref(&xs));
    assert_close(&out[1], &[0.0, 0.5, 1.0], 1e-15, "custom vjp");
    // the rule graph is differentiated for second order: sigmoid' = s(1 - s)
    let h = run(&hessian(&g, &[0]).unwrap(), &[vec![0.0, 1.0, -1.0]]);
    let sd = |v: f64| {
        let s = 1.0 / (1.0 + (-v).exp());
        s * (1.0 - s)
    };
    let want = [sd(0.0), 0.0, 0.0, 0.0, sd(1.0), 0.0, 0.0, 0.0, sd(-1.0)];
    assert_close(&h[1], &want, 1e-12, "hessian through the custom vjp rule");
    // forward mode without a jvp rule differentiates the forward graph
    let out = run(
        &jvp(&g, &[0]).unwrap(),
        &[vec![0.0, 1.0, -1.0], vec![1.0, 1.0, 1.0]],
    );
    let sg = |v: f64| 1.0 / (1.0 + (-v).exp());
    assert_close(
        &out[1],
        &[sg(0.0) + sg(1.0) + sg(-1.0)],
        1e-12,
        "jvp from forward",
    );
}

fn sum_of(f: &Graph) -> Graph {
    let mut g = f.clone();
    let s = g.sum_all(f.outputs()[0]).unwrap();
    g.set_outputs(vec![s]);
    g
}

#[test]
fn custom_jvp_is_used_in_forward_and_reverse_mode() {
    // jvp rule: ẏ = ẋ · sigmoid(x)
    let mut r = Graph::new();
    let x = input(&mut r, "x", &[3]);
    let t = input(&mut r, "t", &[3]);
    let s = r.sigmoid(x).unwrap();
    let d = r.mul(t, s).unwrap();
    r.set_outputs(vec![d]);
    let op = custom_op("softplus", softplus_forward(), None, Some(r)).unwrap();
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let y = g.custom(op, &[x]).unwrap();
    g.set_outputs(vec![y]);
    let xs = vec![-800.0, 0.0, 800.0];
    let out = run(&jvp(&g, &[0]).unwrap(), &[xs.clone(), vec![1.0, 2.0, 3.0]]);
    assert_close(&out[1], &[0.0, 1.0, 3.0], 1e-15, "custom jvp");
    // reverse mode without a vjp rule differentiates the forward graph
    let out = run(
        &vjp(&g, &[0]).unwrap(),
        &[vec![0.0, 1.0, 2.0], vec![1.0, 1.0, 1.0]],
    );
    let sg = |v: f64| 1.0 / (1.0 + (-v).exp());
    assert_close(
        &out[1],
        &[sg(0.0), sg(1.0), sg(2.0)],
        1e-12,
        "vjp from forward",
    );
    // a jacobian through the custom jvp rule
    let j = run(&jacfwd(&g, &[0]).unwrap(), &[vec![0.0, 1.0, 2.0]]);
    let want = [sg(0.0), 0.0, 0.0, 0.0, sg(1.0), 0.0, 0.0, 0.0, sg(2.0)];
    assert_close(&j[1], &want, 1e-12, "jacfwd through custom jvp");
}

#[test]
fn custom_op_checks_rule_signatures() {
    let mut bad = Graph::new();
    let x = input(&mut bad, "x", &[3]);
    let ct = input(&mut bad, "ct", &[3]);
    let d = bad.mul(x, ct).unwrap();
    bad.set_outputs(vec![d]);
    let e = custom_op("softplus", softplus_forward(), Some(bad.clone()), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("softplus") && e.contains("vjp") && e.contains("f64[3]"),
        "{e}"
    );
    let mut two = softplus_forward();
    let o = two.outputs()[0];
    two.add_output(o);
    assert!(custom_op("two", two, None, None).is_err());
    // the same custom op used on one operand twice, through the body
    let mut f = Graph::new();
    let a = input(&mut f, "a", &[]);
    let b = input(&mut f, "b", &[]);
    let p = f.mul(a, b).unwrap();
    let q = f.sin(p).unwrap();
    f.set_outputs(vec![q]);
    let op = custom_op("sinmul", f, None, None).unwrap();
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[]);
    let y = g.custom(op, &[x, x]).unwrap();
    g.set_outputs(vec![y]);
    let out = run(&grad(&g, &[0]).unwrap(), &[vec![0.7]]);
    assert_close(
        &out[1],
        &[2.0 * 0.7 * (0.49f64).cos()],
        1e-12,
        "d/dx sin(x x)",
    );
    assert!(matches!(g.node(y).op, Op::Custom(_)));
}
