//! The graph-level transforms: Hessians, higher orders, Jacobians (batched
//! in one execution), per-item Jacobians, non-differentiable points,
//! NaN-free selects, errors and custom rules.

mod common;

use common::*;
use rlx_core::autodiff::{
    batch_jacobian, custom_op, grad, hessian, hvp, jacfwd, jacobian, jacrev, jvp, jvp_nodes,
    nth_order_grad, value_and_grad, vjp, vjp_nodes,
};
use rlx_core::{CmpOp, DType, Error, Graph, NodeId, Op, ReduceOp};

/// f(x, y) = Σ sin(x) e^y + x² y³ with x, y of shape [3]: a scalar of two inputs.
fn two_input_scalar() -> Graph {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let y = input(&mut g, "y", &[3]);
    let s = g.sin(x).unwrap();
    let e = g.exp(y).unwrap();
    let a = g.mul(s, e).unwrap();
    let x2 = g.square(x).unwrap();
    let y3 = g.powi(y, 3).unwrap();
    let b = g.mul(x2, y3).unwrap();
    let c = g.add(a, b).unwrap();
    let f = g.sum_all(c).unwrap();
    g.set_outputs(vec![f]);
    g
}

#[test]
fn hessian_is_symmetric_and_matches_fd_of_gradient() {
    let g = two_input_scalar();
    let h = hessian(&g, &[0, 1]).unwrap();
    assert_eq!(h.outputs().len(), 1 + 4);
    let mut rng = Rng::new(7);
    let x = vec![rng.vec(3, -1.0, 1.0), rng.vec(3, -1.0, 1.0)];
    let out = run(&h, &x);
    // blocks (0,0), (0,1), (1,0), (1,1), each [3, 3]
    let full = |i: usize, j: usize| -> f64 {
        let (bi, bj) = (i / 3, j / 3);
        out[1 + bi * 2 + bj][(i % 3) * 3 + (j % 3)]
    };
    for i in 0..6 {
        for j in 0..6 {
            assert!(
                (full(i, j) - full(j, i)).abs() < 1e-12,
                "H not symmetric at ({i},{j})"
            );
        }
    }
    // column j of H = d(grad)/dx along e_j
    let gg = grad(&g, &[0, 1]).unwrap();
    for j in 0..6 {
        let mut v = vec![vec![0.0; 3], vec![0.0; 3]];
        v[j / 3][j % 3] = 1.0;
        for b in 0..2 {
            let col = fd(&gg, &x, &v, 1 + b, 1e-5);
            for (r, c) in col.iter().enumerate() {
                assert!(
                    (full(b * 3 + r, j) - c).abs() < 1e-6,
                    "H[{},{j}]",
                    b * 3 + r
                );
            }
        }
    }
    // closed form of one entry: ∂²f/∂x_0∂y_0 = cos(x0) e^{y0} + 6 x0 y0²
    let want = x[0][0].cos() * x[1][0].exp() + 6.0 * x[0][0] * x[1][0].powi(2);
    assert!((full(0, 3) - want).abs() < 1e-12);
}

#[test]
fn hvp_equals_hessian_times_vector() {
    let g = two_input_scalar();
    let mut rng = Rng::new(8);
    let x = vec![rng.vec(3, -1.0, 1.0), rng.vec(3, -1.0, 1.0)];
    let v = vec![rng.vec(3, -1.0, 1.0), rng.vec(3, -1.0, 1.0)];
    let hv = run(&hvp(&g, &[0, 1]).unwrap(), &[x.clone(), v.clone()].concat());
    let h = run(&hessian(&g, &[0, 1]).unwrap(), &x);
    for i in 0..2 {
        let mut want = vec![0.0; 3];
        for (r, w) in want.iter_mut().enumerate() {
            for j in 0..2 {
                for c in 0..3 {
                    *w += h[1 + i * 2 + j][r * 3 + c] * v[j][c];
                }
            }
        }
        assert_close(&hv[1 + i], &want, 1e-12, "hvp vs H v");
    }
}

/// Third derivatives by `nth_order_grad` of `Σ f(x_i)` are diagonal tensors
/// `[3, 3, 3]` holding `f'''(x_i)`.
fn third_derivative(build: impl Fn(&mut Graph, NodeId) -> NodeId, f3: impl Fn(f64) -> f64) {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let y = build(&mut g, x);
    let s = g.sum_all(y).unwrap();
    g.set_outputs(vec![s]);
    let d = nth_order_grad(&g, 0, 3).unwrap();
    let xs = vec![0.3, -0.7, 1.1];
    let out = run(&d, std::slice::from_ref(&xs));
    assert_eq!(d.shape(d.outputs()[1]).dims(), &[3, 3, 3]);
    for i in 0..3 {
        for j in 0..3 {
            for k in 0..3 {
                let want = if i == j && j == k { f3(xs[i]) } else { 0.0 };
                let got = out[1][i * 9 + j * 3 + k];
                assert!(
                    (got - want).abs() < 1e-10,
                    "d3[{i},{j},{k}] = {got}, want {want}"
                );
            }
        }
    }
}

#[test]
fn third_derivative_of_sin_times_exp() {
    // (sin x e^x)''' = 2 e^x (cos x - sin x)
    third_derivative(
        |g, x| {
            let s = g.sin(x).unwrap();
            let e = g.exp(x).unwrap();
            g.mul(s, e).unwrap()
        },
        |x| 2.0 * x.exp() * (x.cos() - x.sin()),
    );
}

#[test]
fn third_derivative_of_tanh() {
    // tanh''' = (1 - t²)(6t² - 2)
    third_derivative(
        |g, x| g.tanh(x).unwrap(),
        |x| {
            let t = x.tanh();
            (1.0 - t * t) * (6.0 * t * t - 2.0)
        },
    );
}

#[test]
fn third_derivative_of_powi_of_sin() {
    // (sin³ x)''' = 6 cos³ x - 21 sin² x cos x
    third_derivative(
        |g, x| {
            let s = g.sin(x).unwrap();
            g.powi(s, 3).unwrap()
        },
        |x| 6.0 * x.cos().powi(3) - 21.0 * x.sin().powi(2) * x.cos(),
    );
}

#[test]
fn fourth_derivative_of_powi() {
    // (x^5)'''' = 120 x, scalar input: shape [] all the way.
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[]);
    let y = g.powi(x, 5).unwrap();
    g.set_outputs(vec![y]);
    let d = nth_order_grad(&g, 0, 4).unwrap();
    let out = run(&d, &[vec![0.7]]);
    assert_close(&out[1], &[120.0 * 0.7], 1e-12, "x^5 4th derivative");
    let d0 = nth_order_grad(&g, 0, 0).unwrap();
    assert_eq!(d0.outputs().len(), 1);
}

/// Takes the graph made by `grad` and keeps only its gradient output, so it
/// can be differentiated again.
fn only_derivative(g: Graph) -> Graph {
    let mut h = g.clone();
    let last = *g.outputs().last().unwrap();
    h.set_outputs(vec![last]);
    h
}

#[test]
fn grad_of_grad_and_jvp_of_grad() {
    // f(x) = x³ sin x: f' = 3x² sin x + x³ cos x,
    // f'' = 6x sin x + 6x² cos x - x³ sin x
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[]);
    let c = g.powi(x, 3).unwrap();
    let s = g.sin(x).unwrap();
    let f = g.mul(c, s).unwrap();
    g.set_outputs(vec![f]);
    let x0: f64 = 0.9;
    let f2 = 6.0 * x0 * x0.sin() + 6.0 * x0 * x0 * x0.cos() - x0.powi(3) * x0.sin();
    let gg = grad(&only_derivative(grad(&g, &[0]).unwrap()), &[0]).unwrap();
    let out = run(&gg, &[vec![x0]]);
    let f1 = 3.0 * x0 * x0 * x0.sin() + x0.powi(3) * x0.cos();
    assert_close(&out[0], &[f1], 1e-12, "grad output 0 is the gradient");
    assert_close(&out[1], &[f2], 1e-12, "grad of grad");
    let jg = jvp(&only_derivative(grad(&g, &[0]).unwrap()), &[0]).unwrap();
    let out = run(&jg, &[vec![x0], vec![2.0]]);
    assert_close(&out[1], &[2.0 * f2], 1e-12, "jvp of grad");
    let vg = value_and_grad(&g, &[0]).unwrap();
    let out = run(&vg, &[vec![x0]]);
    assert_close(&out[0], &[x0.powi(3) * x0.sin()], 1e-15, "value");
    assert_close(&out[1], &[f1], 1e-12, "grad");
}

/// R(x) = A x + x³ (element-wise cube): J = A + diag(3x²).
fn residual() -> (Graph, Vec<f64>) {
    let a = vec![2.0, -1.0, 0.5, 0.0, 1.0, 3.0, -2.0, 0.25, 1.5];
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let am = constant(&mut g, a.clone(), &[3, 3]);
    let xc = g.reshape(x, [3, 1]).unwrap();
    let ax = g.matmul(am, xc).unwrap();
    let ax = g.reshape(ax, [3]).unwrap();
    let x3 = g.powi(x, 3).unwrap();
    let r = g.add(ax, x3).unwrap();
    g.set_outputs(vec![r]);
    (g, a)
}

#[test]
fn jacobian_of_nonlinear_residual_is_analytic_in_every_mode() {
    let (g, a) = residual();
    let x = vec![0.5, -1.2, 2.0];
    let mut want = a.clone();
    for i in 0..3 {
        want[i * 3 + i] += 3.0 * x[i] * x[i];
    }
    for (name, j) in [
        ("jacfwd", jacfwd(&g, &[0]).unwrap()),
        ("jacrev", jacrev(&g, &[0]).unwrap()),
        ("jacobian", jacobian(&g, &[0]).unwrap()),
    ] {
        assert_eq!(j.shape(j.outputs()[1]).dims(), &[3, 3], "{name}");
        let out = run(&j, std::slice::from_ref(&x));
        assert_close(&out[1], &want, 1e-12, name);
    }
}

#[test]
fn batched_jacobian_equals_column_by_column() {
    // y = tanh(W x) ⊙ sum(x²) with x [4], W [2, 4]: a [2] output of two inputs.
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4]);
    let w = input(&mut g, "w", &[2, 4]);
    let xc = g.reshape(x, [4, 1]).unwrap();
    let wx = g.matmul(w, xc).unwrap();
    let wx = g.reshape(wx, [2]).unwrap();
    let t = g.tanh(wx).unwrap();
    let x2 = g.square(x).unwrap();
    let s = g.sum_all(x2).unwrap();
    let y = g.mul(t, s).unwrap();
    g.set_outputs(vec![y]);
    let mut rng = Rng::new(3);
    let args = vec![rng.vec(4, -1.0, 1.0), rng.vec(8, -1.0, 1.0)];
    let jg = jvp(&g, &[0, 1]).unwrap();
    for (name, jac) in [
        ("jacfwd", jacfwd(&g, &[0, 1]).unwrap()),
        ("jacrev", jacrev(&g, &[0, 1]).unwrap()),
    ] {
        let out = run(&jac, &args); // one execution
        assert_eq!(jac.shape(jac.outputs()[1]).dims(), &[2, 4]);
        assert_eq!(jac.shape(jac.outputs()[2]).dims(), &[2, 2, 4]);
        for (wi, n) in [(0usize, 4usize), (1, 8)] {
            for col in 0..n {
                let mut t = vec![vec![0.0; 4], vec![0.0; 8]];
                t[wi][col] = 1.0;
                let ydot = run(&jg, &[args.clone(), t].concat()).remove(1);
                for (r, yd) in ydot.iter().enumerate() {
                    let got = out[1 + wi][r * n + col];
                    assert!((got - yd).abs() < 1e-12, "{name}: J{wi}[{r},{col}]");
                }
            }
        }
    }
}

/// Rows [x0, x1] ↦ [sin(x0) x1 w, x0² + e^{x1}] for a shared weight `w`.
fn per_row(g: &mut Graph, x: NodeId, w: NodeId) -> NodeId {
    let x0 = g.slice(x, 1, 0, 1).unwrap();
    let x1 = g.slice(x, 1, 1, 1).unwrap();
    let s = g.sin(x0).unwrap();
    let a = g.mul(s, x1).unwrap();
    let a = g.mul(a, w).unwrap();
    let b0 = g.square(x0).unwrap();
    let b1 = g.exp(x1).unwrap();
    let b = g.add(b0, b1).unwrap();
    g.concat(&[a, b], 1).unwrap()
}

#[test]
fn batch_jacobian_gives_per_item_jacobians() {
    let n = 5;
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2]);
    let w = input(&mut g, "w", &[]);
    let y = per_row(&mut g, x, w);
    g.set_outputs(vec![y]);
    let bj = batch_jacobian(&g, &[0]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 2, 2]);
    let mut rng = Rng::new(11);
    let xs = rng.vec(n * 2, -1.0, 1.0);
    let wv = 1.7;
    let out = run(&bj, &[xs.clone(), vec![wv]]);
    for i in 0..n {
        let (a, b) = (xs[2 * i], xs[2 * i + 1]);
        let want = [a.cos() * b * wv, a.sin() * wv, 2.0 * a, b.exp()];
        assert_close(
            &out[1][4 * i..4 * i + 4],
            &want,
            1e-12,
            &format!("item {i}"),
        );
    }
}

#[test]
fn batch_jacobian_in_reverse_mode_matches_the_full_jacobian() {
    // Items of 6 inputs (x: [2, 2] and y: [2] per item) and 2 outputs:
    // fewer outputs than inputs, so 2 cotangents instead of 6 tangents.
    // Each item's block must equal the diagonal block of the full Jacobian,
    // whose other blocks are zero.
    let n = 4;
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2, 2]);
    let y = input(&mut g, "y", &[n, 2]);
    let xs = g.sum(x, &[2]).unwrap(); // [n, 2]
    let e = g.exp(xs).unwrap();
    let p = g.mul(e, y).unwrap();
    let s = g.sin(y).unwrap();
    let xf = g.reshape(x, [n, 4]).unwrap();
    let q = g.square(xf).unwrap();
    let q = g.sum(q, &[1]).unwrap();
    let q = g.reshape(q, [n, 1]).unwrap();
    let t = g.mul(s, q).unwrap();
    let out = g.add(p, t).unwrap(); // [n, 2]
    g.set_outputs(vec![out]);
    let bj = batch_jacobian(&g, &[0, 1]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 2, 2, 2]);
    assert_eq!(bj.shape(bj.outputs()[2]).dims(), &[n, 2, 2]);
    let mut rng = Rng::new(5);
    let ins = vec![rng.vec(n * 4, -1.0, 1.0), rng.vec(n * 2, -1.0, 1.0)];
    let got = run(&bj, &ins);
    let full = run(&jacfwd(&g, &[0, 1]).unwrap(), &ins);
    assert_close(&got[0], &full[0], 0.0, "value");
    // full[1]: [n, 2, n, 2, 2]; full[2]: [n, 2, n, 2].
    for (w, k) in [(1, 4), (2, 2)] {
        for i in 0..n {
            for o in 0..2 {
                for j in 0..n {
                    let block = &full[w][((i * 2 + o) * n + j) * k..][..k];
                    if i == j {
                        let mine = &got[w][(i * 2 + o) * k..][..k];
                        assert_close(
                            mine,
                            block,
                            1e-14,
                            &format!("input {w}, item {i}, output {o}"),
                        );
                    } else {
                        assert!(block.iter().all(|&v| v == 0.0));
                    }
                }
            }
        }
    }
}

#[test]
fn batch_jacobian_rejects_functions_that_mix_rows() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let m = g.reduce(ReduceOp::Mean, x, &[0]).unwrap();
    let y = g.sub(x, m).unwrap();
    g.set_outputs(vec![y]);
    let e = batch_jacobian(&g, &[0]).unwrap_err().to_string();
    assert!(e.contains("mixes rows") && e.contains("mean"), "{e}");
    // a row mixing that carries no tangent is fine: stop_gradient of the mean
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let m = g.reduce(ReduceOp::Mean, x, &[0]).unwrap();
    let m = g.stop_gradient(m).unwrap();
    let y = g.sub(x, m).unwrap();
    g.set_outputs(vec![y]);
    let bj = batch_jacobian(&g, &[0]).unwrap();
    let out = run(&bj, &[vec![1.0; 8]]);
    let eye = [1.0, 0.0, 0.0, 1.0];
    assert_close(&out[1], &eye.repeat(4), 0.0, "identity per item");
    // matmul contracting axis 0 and transposes mix rows too
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let t = g.transpose(x, &[1, 0]).unwrap();
    let p = g.matmul(t, x).unwrap();
    let s = g.sum(p, &[1]).unwrap();
    let y = g.reshape(s, [2, 1]).unwrap();
    g.set_outputs(vec![y]);
    assert!(batch_jacobian(&g, &[0]).is_err());
}

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

#[test]
fn batch_jacobian_through_matmul_reshape_and_custom_ops() {
    // rows: y_i = tanh(x_i W) through a custom op, x [N, 2], W [2, 3] shared
    let n = 4;
    let mut f = Graph::new();
    let a = input(&mut f, "a", &[n, 3]);
    let t = f.tanh(a).unwrap();
    f.set_outputs(vec![t]);
    let op = custom_op("tanh_rows", f, None, None).unwrap();
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2]);
    let w = input(&mut g, "w", &[2, 3]);
    let xr = g.reshape(x, [n, 1, 2]).unwrap();
    let xr = g.reshape(xr, [n, 2]).unwrap();
    let z = g.matmul(xr, w).unwrap();
    let y = g.custom(op, &[z]).unwrap();
    let y = g.softmax(y, 1).unwrap();
    g.set_outputs(vec![y]);
    let bj = batch_jacobian(&g, &[0]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 3, 2]);
    let mut rng = Rng::new(21);
    let xs = rng.vec(n * 2, -1.0, 1.0);
    let ws = rng.vec(6, -1.0, 1.0);
    let out = run(&bj, &[xs.clone(), ws.clone()]);
    // against the full Jacobian [N, 3, N, 2]: its diagonal blocks
    let full = run(&jacobian(&g, &[0]).unwrap(), &[xs, ws]);
    for i in 0..n {
        for r in 0..3 {
            for c in 0..2 {
                let want = full[1][((i * 3 + r) * n + i) * 2 + c];
                let got = out[1][(i * 3 + r) * 2 + c];
                assert!((got - want).abs() < 1e-12, "item {i} [{r},{c}]");
            }
        }
    }
    // a reshape that moves elements across rows is rejected
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let y = g.reshape(x, [2, 4]).unwrap();
    let y = g.reshape(y, [4, 2]).unwrap();
    g.set_outputs(vec![y]);
    let e = batch_jacobian(&g, &[0]).unwrap_err().to_string();
    assert!(e.contains("reshape"), "{e}");
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
