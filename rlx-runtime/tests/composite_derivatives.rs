//! Derivatives of the composites rewritten for accuracy (`asinh`,
//! `acosh`, `atanh`, `hypot`, `cbrt`, `exp2`, `log10`, `log2`) over their
//! whole domain, branches included: reverse mode (`autodiff::grad`) and
//! forward mode (`autodiff::jvp`) against central differences of the
//! `f64` function, relative to the derivative's size; and where a select
//! discards a branch that overflows or divides 0 by 0, the gradient stays
//! finite (the `mul_zero` rule of the derivative rules).

use rlx_core::{autodiff, DType};
use rlx_runtime::trace::Trace;
use rlx_runtime::{compile, Graph, Tensor};

/// `sum(f(x, y))` traced for `n` points, with both inputs.
fn traced(n: usize, f: &dyn Fn(&Tensor, &Tensor) -> Tensor) -> Graph {
    let t = Trace::enter();
    let x = t.input("x", [n], DType::F64);
    let y = t.input("y", [n], DType::F64);
    let s = f(&x, &y).sum_all();
    t.finish(&[&s]).unwrap()
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

/// Central difference of `f` at `x`, with a step of `10^-6 |x|` (`10^-6`
/// at 0).
fn central(f: &dyn Fn(f64) -> f64, x: f64) -> f64 {
    let h = if x == 0.0 { 1e-6 } else { 1e-6 * x.abs() };
    (f(x + h) - f(x - h)) / (2.0 * h)
}

/// Agreement with a central difference: relative, and absolute below
/// `1e-300` (a derivative of 0 meets differences of 0).
fn close(got: f64, fd: f64) -> bool {
    (got - fd).abs() <= 1e-5 * fd.abs() + 1e-300
}

/// Gradient (both operands) and JVP along `(1, 1)` of `ours` at the
/// pairs `(xs, ys)` against central differences of `want`.
fn check(
    name: &str,
    ours: &dyn Fn(&Tensor, &Tensor) -> Tensor,
    want: fn(f64, f64) -> f64,
    xs: &[f64],
    ys: &[f64],
) {
    let n = xs.len();
    let (x, y) = (Tensor::from_slice(xs, [n]), Tensor::from_slice(ys, [n]));
    let g = traced(n, ours);
    let grads = run(&autodiff::grad(&g, &[0, 1]).unwrap(), &[&x, &y]);
    let ones = Tensor::full([n], 1.0, DType::F64);
    let jvp_graph = autodiff::jvp(&g, &[0, 1]).unwrap();
    for i in 0..n {
        let (xi, yi) = (xs[i], ys[i]);
        let dx = central(&|v| want(v, yi), xi);
        let dy = central(&|v| want(xi, v), yi);
        assert!(
            close(grads[1][i], dx),
            "{name}: d/dx at ({xi:e}, {yi:e}) = {:e}, differences {dx:e}",
            grads[1][i]
        );
        assert!(
            close(grads[2][i], dy),
            "{name}: d/dy at ({xi:e}, {yi:e}) = {:e}, differences {dy:e}",
            grads[2][i]
        );
        // Forward mode, one point at a time (the JVP sums over points).
        let e = |v: &[f64], k: usize| {
            let mut t = vec![0.0; n];
            t[k] = v[k];
            Tensor::from_slice(&t, [n])
        };
        let tx = e(&vec![1.0; n], i);
        let jv = run(&jvp_graph, &[&x, &y, &tx, &ones.mul_scalar(0.0)])[1][0];
        assert!(
            close(jv, dx),
            "{name}: jvp along x at ({xi:e}, {yi:e}) = {jv:e}, differences {dx:e}"
        );
    }
}

#[test]
fn asinh_derivative_everywhere() {
    let xs = [
        0.0,
        -0.0,
        1e-300,
        1e-10,
        -1e-10,
        0.5,
        -3.0,
        1e3,
        268_435_455.0,
        268_435_457.0,
        1e10,
        -1e200,
        1e200,
        1e300,
    ];
    unary_with("asinh", Tensor::asinh, libm::asinh, &xs);
}

#[test]
fn acosh_derivative_everywhere() {
    let xs = [
        1.001,
        1.5,
        3.0,
        1e3,
        268_435_455.0,
        268_435_457.0,
        1e10,
        1e200,
        1e300,
    ];
    unary_with("acosh", Tensor::acosh, libm::acosh, &xs);
}

#[test]
fn atanh_derivative_everywhere() {
    let xs = [0.0, 1e-300, 1e-10, 0.5, -0.999, 0.999];
    unary_with("atanh", Tensor::atanh, libm::atanh, &xs);
}

#[test]
fn cbrt_exp2_log10_log2_derivatives_everywhere() {
    unary_with(
        "cbrt",
        Tensor::cbrt,
        f64::cbrt,
        &[8.0, -27.0, 1e-300, -1e300, 1e-3, 1e5],
    );
    unary_with(
        "exp2",
        Tensor::exp2,
        f64::exp2,
        &[-1000.0, -10.0, 0.5, 10.0, 1000.0, 1023.5],
    );
    unary_with(
        "log10",
        Tensor::log10,
        f64::log10,
        &[1e-300, 0.5, 1.0, 1e300],
    );
    unary_with("log2", Tensor::log2, f64::log2, &[1e-300, 0.5, 1.0, 1e300]);
}

#[test]
fn hypot_derivative_everywhere() {
    // A tie (2, 2), a zero operand, both tiny, both huge.
    let xs = [3.0, 2.0, 0.0, 5.0, -3.0, 1e-200, 1e200, 1e300, -1e-300];
    let ys = [4.0, 2.0, 2.0, 0.0, 1e-300, 3e-200, 1e200, -1e300, 4e-300];
    check("hypot", &|x, y| x.hypot(y), f64::hypot, &xs, &ys);
}

/// [`check`] for a unary function.
fn unary_with(name: &str, ours: fn(&Tensor) -> Tensor, want: fn(f64) -> f64, xs: &[f64]) {
    let n = xs.len();
    let x = Tensor::from_slice(xs, [n]);
    let t = Trace::enter();
    let tx = t.input("x", [n], DType::F64);
    let s = ours(&tx).sum_all();
    let g = t.finish(&[&s]).unwrap();
    let grad = &run(&autodiff::grad(&g, &[0]).unwrap(), &[&x])[1];
    let jvp = autodiff::jvp(&g, &[0]).unwrap();
    for i in 0..n {
        let fd = central(&want, xs[i]);
        let ok = |got: f64| close(got, fd);
        assert!(
            ok(grad[i]),
            "{name}'({:e}) = {:e}, differences {fd:e}",
            xs[i],
            grad[i]
        );
        let mut e = vec![0.0; n];
        e[i] = 1.0;
        let jv = run(&jvp, &[&x, &Tensor::from_slice(&e, [n])])[1][0];
        assert!(
            ok(jv),
            "{name}: jvp at {:e} = {jv:e}, differences {fd:e}",
            xs[i]
        );
    }
}

/// Where a select discards a branch that is NaN or overflows (`hypot` at
/// `(0, 0)`: `0/0`; `asinh` at `1e300`: `x²`; `cbrt` at 0: `0/0`), the
/// gradient is the taken branch's, finite where that is.
#[test]
fn discarded_branches_leave_gradients_finite() {
    let grad_of = |f: &dyn Fn(&Tensor, &Tensor) -> Tensor, x: f64, y: f64| {
        let g = traced(1, f);
        let (x, y) = (Tensor::from_slice(&[x], [1]), Tensor::from_slice(&[y], [1]));
        let r = run(&autodiff::grad(&g, &[0, 1]).unwrap(), &[&x, &y]);
        (r[1][0], r[2][0])
    };
    assert_eq!(grad_of(&|x, y| x.hypot(y), 0.0, 0.0), (0.0, 0.0));
    let (d, _) = grad_of(&|x, _| x.asinh(), 1e300, 0.0);
    assert!((d - 1e-300).abs() <= 1e-314, "asinh'(1e300) = {d:e}");
    let (d, _) = grad_of(&|x, _| x.acosh(), 1e300, 0.0);
    assert!((d - 1e-300).abs() <= 1e-314, "acosh'(1e300) = {d:e}");
    // cbrt'(0) is +∞ (the true one-sided limit), not NaN.
    assert_eq!(grad_of(&|x, _| x.cbrt(), 0.0, 0.0).0, f64::INFINITY);
    // asinh'(0) = 1, on both zeros.
    assert_eq!(grad_of(&|x, _| x.asinh(), -0.0, 0.0).0, 1.0);
    // Second derivative: asinh'' = -x / (1 + x²)^(3/2), through both branches.
    for x in [0.5f64, 1e9] {
        let t = Trace::enter();
        let tx = t.input("x", [], DType::F64);
        let s = tx.asinh();
        let g = t.finish(&[&s]).unwrap();
        let g1 = autodiff::grad(&g, &[0]).unwrap();
        // The gradient graph's outputs are (value, gradient): keep the gradient.
        let mut only = g1.clone();
        only.set_outputs(vec![g1.outputs()[1]]);
        let h = run(&autodiff::grad(&only, &[0]).unwrap(), &[&Tensor::scalar(x)])[1][0];
        let want = -x / (1.0 + x * x).powf(1.5);
        assert!(
            (h - want).abs() <= 1e-12 * want.abs(),
            "asinh''({x}) = {h:e}, want {want:e}"
        );
    }
}

/// `norm` over the range: against a sum of squares in `f64` scaled by
/// hand, and its gradient `x / |x|` (finite at 0: the discarded `0/0`).
#[test]
fn norm_neither_overflows_nor_underflows_and_differentiates() {
    for (xs, want) in [
        (vec![3.0, 4.0], 5.0),
        (vec![3e300, -4e300], 5e300),
        (vec![3e-300, 4e-300], 5e-300),
        (vec![1e200, 1e200, 1e200, 1e200], 2e200),
        (vec![0.0, 0.0], 0.0),
        (vec![f64::INFINITY, 1.0], f64::INFINITY),
        (vec![], 0.0),
    ] {
        let x = Tensor::from_slice(&xs, [xs.len()]);
        let got = x.norm().item::<f64>().unwrap();
        assert!(
            (got - want).abs() <= 4.0 * f64::EPSILON * want || got == want,
            "norm({xs:?}) = {got:e}, want {want:e}"
        );
    }
    assert!(Tensor::from_slice(&[f64::NAN, f64::INFINITY], [2])
        .norm()
        .item::<f64>()
        .unwrap()
        .is_nan());
    for xs in [
        vec![3e200, -4e200],
        vec![0.5, -2.0, 1.5],
        vec![2.0, 2.0],
        vec![0.0, 0.0],
    ] {
        let n = xs.len();
        let t = Trace::enter();
        let tx = t.input("x", [n], DType::F64);
        let s = tx.norm();
        let g = t.finish(&[&s]).unwrap();
        let x = Tensor::from_slice(&xs, [n]);
        let grad = &run(&autodiff::grad(&g, &[0]).unwrap(), &[&x])[1];
        let m = xs.iter().fold(0.0f64, |a: f64, v: &f64| a.max(v.abs()));
        let norm = if m == 0.0 {
            0.0
        } else {
            m * xs.iter().map(|v: &f64| (v / m).powi(2)).sum::<f64>().sqrt()
        };
        for (i, &v) in xs.iter().enumerate() {
            let want = if norm == 0.0 { 0.0 } else { v / norm };
            assert!(
                (grad[i] - want).abs() <= 1e-14 * want.abs() + 1e-300,
                "norm'({xs:?})[{i}] = {:e}, want {want:e}",
                grad[i]
            );
        }
    }
}
