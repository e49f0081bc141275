//! Second and higher derivatives of graphs: Hessians and Hessian-vector
//! products, third and fourth derivatives by `nth_order_grad`, and
//! transforms of transforms (`grad` of `grad`, `jvp` of `grad`).

mod common;

use common::*;
use rlx_core::autodiff::{grad, hessian, hvp, jvp, nth_order_grad, value_and_grad};
use rlx_core::{Graph, NodeId};

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
