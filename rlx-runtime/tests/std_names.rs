//! The `f64` method names on `Tensor` (`ops/std_names.rs`): each against
//! the `f64` method on every element, and the derivative of each composite
//! against central differences of that `f64` method (reverse mode through
//! `autodiff::grad` of the traced graph, forward mode through `jvp`).

use rlx_core::{autodiff, DType};
use rlx_runtime::trace::Trace;
use rlx_runtime::{compile, Graph, Tensor};

const H: f64 = 1e-6;

/// Traces `f` for an input of `n` `f64`s into a graph with output `sum(f(x))`.
fn traced(n: usize, f: &dyn Fn(&Tensor) -> Tensor) -> Graph {
    let t = Trace::enter();
    let x = t.input("x", [n], DType::F64);
    let y = f(&x).sum_all();
    t.finish(&[&y]).unwrap()
}

fn run(g: &Graph, inputs: &[&Tensor]) -> Vec<Vec<f64>> {
    compile(g)
        .unwrap()
        .run(inputs)
        .unwrap()
        .iter()
        .map(|t| t.to_vec::<f64>().unwrap())
        .collect()
}

/// `f` (on tensors) against `want` (on numbers) at `xs`: values, the
/// gradient (reverse) and the JVP along ones (forward) against central
/// differences.
fn check(name: &str, f: &dyn Fn(&Tensor) -> Tensor, want: &dyn Fn(f64) -> f64, xs: &[f64]) {
    let x = Tensor::from_slice(xs, [xs.len()]);
    let got = f(&x).to_vec::<f64>().unwrap();
    for (g, &xi) in got.iter().zip(xs) {
        let w = want(xi);
        assert!(
            (g - w).abs() <= 1e-14 * (1.0 + w.abs()),
            "{name}({xi}) = {g}, want {w}"
        );
    }
    let g = traced(xs.len(), f);
    let grad = &run(&autodiff::grad(&g, &[0]).unwrap(), &[&x])[1];
    let ones = Tensor::full([xs.len()], 1.0, DType::F64);
    let jvp = run(&autodiff::jvp(&g, &[0]).unwrap(), &[&x, &ones]);
    let mut fd_sum = 0.0;
    for (i, &xi) in xs.iter().enumerate() {
        let fd = (want(xi + H) - want(xi - H)) / (2.0 * H);
        fd_sum += fd;
        assert!(
            (grad[i] - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
            "{name}'({xi}) = {}, differences give {fd}",
            grad[i]
        );
    }
    let jv = jvp[1][0];
    assert!(
        (jv - fd_sum).abs() <= 1e-6 * (1.0 + fd_sum.abs()),
        "{name}: jvp {jv}, differences {fd_sum}"
    );
}

#[test]
fn unary_names_match_f64_and_their_derivatives() {
    let pos = [0.3, 1.7, 4.2];
    let any = [-2.3, -0.4, 0.6, 3.1];
    let unit = [-0.7, 0.1, 0.8];
    check("powf", &|x| x.powf(2.5), &|x| x.powf(2.5), &pos);
    check("log10", &|x| x.log10(), &|x| x.log10(), &pos);
    check("log2", &|x| x.log2(), &|x| x.log2(), &pos);
    check("log(3)", &|x| x.log(3.0), &|x| x.log(3.0), &pos);
    check("exp2", &|x| x.exp2(), &|x| x.exp2(), &any);
    check("exp_m1", &|x| x.exp_m1(), &|x| x.exp_m1(), &any);
    check("ln_1p", &|x| x.ln_1p(), &|x| x.ln_1p(), &pos);
    check("cbrt", &|x| x.cbrt(), &|x| x.cbrt(), &any);
    check("to_radians", &|x| x.to_radians(), &|x| x.to_radians(), &any);
    check("to_degrees", &|x| x.to_degrees(), &|x| x.to_degrees(), &any);
    check("asinh", &|x| x.asinh(), &|x| x.asinh(), &any);
    check("acosh", &|x| x.acosh(), &|x| x.acosh(), &[1.2, 2.5, 7.0]);
    check("atanh", &|x| x.atanh(), &|x| x.atanh(), &unit);
    check("hypot", &|x| x.hypot(1.5), &|x| x.hypot(1.5), &any);
    check("atan2", &|x| x.atan2(-0.5), &|x| x.atan2(-0.5), &any);
    check(
        "mul_add",
        &|x| x.mul_add(x, 2.0),
        &|x| x.mul_add(x, 2.0),
        &any,
    );
    check("max", &|x| x.max(0.5), &|x| x.max(0.5), &any);
    check("min", &|x| x.min(0.5), &|x| x.min(0.5), &any);
    check(
        "copysign",
        &|x| x.copysign(-1.0),
        &|x| x.copysign(-1.0),
        &any,
    );
    check("trunc", &|x| x.trunc(), &|x| x.trunc(), &any);
    check("fract", &|x| x.fract(), &|x| x.fract(), &any);
    check("signum", &|x| x.signum(), &|x| x.signum(), &any);
    check("sin_cos", &|x| x.sin_cos().1, &|x| x.sin_cos().1, &any);
}

#[test]
fn edge_values_follow_f64() {
    let xs = [0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -3.5];
    let x = Tensor::from_slice(&xs, [xs.len()]);
    let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
    let sig = x.signum().to_vec::<f64>().unwrap();
    for (s, xi) in sig.iter().zip(xs) {
        assert!(same(*s, xi.signum()), "signum({xi}) = {s}");
    }
    let masks = [
        (x.is_nan(), f64::is_nan as fn(f64) -> bool),
        (x.is_finite(), f64::is_finite),
        (x.is_infinite(), f64::is_infinite),
    ];
    for (m, f) in masks {
        let m = m.to_vec::<bool>().unwrap();
        assert_eq!(m, xs.iter().map(|&v| f(v)).collect::<Vec<_>>());
    }
}

#[test]
fn second_operands_may_be_tensors_and_broadcast() {
    let y = Tensor::from_slice(&[1.0f64, -1.0], [2]);
    let x = Tensor::from_slice(&[-2.0f64, 3.0], [2]);
    let a = y.atan2(&x).to_vec::<f64>().unwrap();
    assert_eq!(a, vec![1.0f64.atan2(-2.0), (-1.0f64).atan2(3.0)]);
    let p = x
        .abs()
        .powf(Tensor::scalar(0.5f64))
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(p, vec![2.0f64.sqrt(), 3.0f64.sqrt()]);
    // `f32` tensors stay `f32` with an `f64` operand
    let s = Tensor::from_slice(&[4.0f32], [1]).powf(0.5);
    assert_eq!(s.dtype(), DType::F32);
    // reductions still take axes
    let m = Tensor::from_slice(&[1.0f64, 5.0, 3.0, 4.0], [2, 2]);
    let axes = vec![0usize];
    assert_eq!(m.max(&axes).to_vec::<f64>().unwrap(), vec![3.0, 5.0]);
    assert_eq!(m.min(&[1]).to_vec::<f64>().unwrap(), vec![1.0, 3.0]);
    assert!(x.try_atan2(Tensor::from_slice(&[1.0f64; 3], [3])).is_err());
}
