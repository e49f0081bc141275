//! Autodiff benchmarks, each against a hand-written baseline in the same run:
//! (a) value and gradient of an MLP 784-256-256-10 (batch 64, f32, tanh,
//!     softmax cross-entropy) by `autodiff::value_and_grad`, vs a
//!     hand-written forward and backward pass calling `matrixmultiply::sgemm`;
//! (b) the dense n × n Jacobian (n = 20, 200, 2000) of a nonlinear residual
//!     (f64, tridiagonal) by `autodiff::jacobian` (three coloured products
//!     spread into the dense result), vs filling the analytic Jacobian into
//!     a dense buffer;
//! (c) the dense Hessian of extended Rosenbrock (n = 10, 100, 1000) by
//!     `autodiff::hessian`, vs filling the analytic one.
//!
//! Every pair is checked against each other before timing.
//!
//! Run: `cargo bench --bench autodiff -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use rlx_core::autodiff;
use rlx_runtime::{compile, DType, Graph, Tensor};

#[path = "common/mlp.rs"]
mod mlp_model;
use mlp_model::{mlp_graph, values, HandMlp, B, D_IN, D_OUT, H};

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    let scale = want.iter().fold(0.0f32, |a, v| a.max(v.abs())).max(1e-6);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * scale,
            "{what}[{i}]: rlx {a} vs hand-written {b} (scale {scale})"
        );
    }
}

fn mlp(c: &mut Criterion) {
    let x = values(B * D_IN, 1, 1.0);
    let mut y = vec![0.0f32; B * D_OUT];
    for i in 0..B {
        y[i * D_OUT + (i * 7) % D_OUT] = 1.0;
    }
    let shapes: [&[usize]; 6] = [&[D_IN, H], &[H], &[H, H], &[H], &[H, D_OUT], &[D_OUT]];
    let params: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            values(
                s.iter().product(),
                10 + i as u64,
                1.0 / (s[0] as f32).sqrt(),
            )
        })
        .collect();

    let g = mlp_graph();
    let vg = autodiff::value_and_grad(&g, &[2, 3, 4, 5, 6, 7]).unwrap();
    let exe = compile(&vg).unwrap();
    let xt = Tensor::from_slice(&x, [B, D_IN]);
    let yt = Tensor::from_slice(&y, [B, D_OUT]);
    let pt: Vec<Tensor> = params
        .iter()
        .zip(&shapes)
        .map(|(p, s)| Tensor::from_slice(p, *s))
        .collect();
    let mut inputs: Vec<&Tensor> = vec![&xt, &yt];
    inputs.extend(pt.iter());
    let mut outs: Vec<Tensor> = exe
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    exe.run_into(&inputs, &mut outs).unwrap();

    let mut hand = HandMlp::new();
    let loss = hand.run(&x, &y, &params);
    assert_close("loss", outs[0].as_slice::<f32>().unwrap(), &[loss]);
    for (k, name) in ["w1", "b1", "w2", "b2", "w3", "b3"].iter().enumerate() {
        assert_close(name, outs[k + 1].as_slice::<f32>().unwrap(), &hand.grads[k]);
    }
    eprintln!(
        "mlp: forward graph {} nodes, value-and-gradient graph {} nodes",
        g.len(),
        vg.len()
    );

    let mut group = c.benchmark_group("mlp_784_256_256_10_b64");
    group.bench_function("rlx value_and_grad", |b| {
        b.iter(|| exe.run_into(black_box(&inputs), &mut outs).unwrap())
    });
    // The same plan with each product and the loop reading it as two
    // steps: what the epilogues save, in the same run.
    let apart = rlx_runtime::compile::Options {
        epilogues: false,
        ..Default::default()
    };
    let apart = rlx_runtime::compile::compile_with(&vg, &apart).unwrap();
    eprintln!(
        "mlp: {} epilogues, {} steps ({} without epilogues)",
        exe.stats().epilogues,
        exe.stats().steps,
        apart.stats().steps
    );
    group.bench_function("rlx value_and_grad without epilogues", |b| {
        b.iter(|| apart.run_into(black_box(&inputs), &mut outs).unwrap())
    });
    group.bench_function("hand-written sgemm", |b| {
        b.iter(|| black_box(hand.run(black_box(&x), &y, &params)))
    });
    group.finish();
}

/// Sizes of the dense-Jacobian and dense-Hessian sweeps (two orders of
/// magnitude, as the sparse structure's gain grows with the size).
const JACOBIAN_SIZES: [usize; 3] = [20, 200, 2000];
const HESSIAN_SIZES: [usize; 3] = [10, 100, 1000];

/// `F_i = (x_{i-1} - 2 x_i + x_{i+1}) / h^2 - exp(x_i) + s_i`, `x_{-1} = x_N = 0`.
fn residual_graph(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let s = g.input("s", [n], DType::F64);
    let zero = g.full([1], 0.0, DType::F64);
    let head = g.slice_range(x, 0..n - 1, 0).unwrap();
    let tail = g.slice_range(x, 1..n, 0).unwrap();
    let left = g.concat(&[zero, head], 0).unwrap();
    let right = g.concat(&[tail, zero], 0).unwrap();
    let two = g.scalar(2.0, DType::F64);
    let inv_h2 = g.scalar(((n + 1) * (n + 1)) as f64, DType::F64);
    let twice = g.mul(x, two).unwrap();
    let lap = g.add(left, right).unwrap();
    let lap = g.sub(lap, twice).unwrap();
    let lap = g.mul(lap, inv_h2).unwrap();
    let ex = g.exp(x).unwrap();
    let r = g.sub(lap, ex).unwrap();
    let r = g.add(r, s).unwrap();
    g.set_outputs(vec![r]);
    g
}

/// The analytic tridiagonal Jacobian into the dense row-major buffer: one
/// `fill` (a memset) and one pass over the three diagonals, the fastest
/// straightforward form (nothing is computed for the zeros).
fn analytic_jacobian(x: &[f64], jac: &mut [f64]) {
    let n = x.len();
    let inv_h2 = ((n + 1) * (n + 1)) as f64;
    jac.fill(0.0);
    for i in 0..n {
        jac[i * n + i] = -2.0 * inv_h2 - x[i].exp();
        if i > 0 {
            jac[i * n + i - 1] = inv_h2;
        }
        if i + 1 < n {
            jac[i * n + i + 1] = inv_h2;
        }
    }
}

fn assert_close_f64(what: &str, got: &[f64], want: &[f64], n: usize) {
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-9 * b.abs().max(1.0),
            "{what}[{}, {}]: {a} vs {b}",
            i / n,
            i % n
        );
    }
}

fn jacobian(c: &mut Criterion) {
    for n in JACOBIAN_SIZES {
        let x: Vec<f64> = (0..n).map(|i| (i as f64 / n as f64 * 3.0).sin()).collect();
        let s: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 1e-3).collect();
        let g = residual_graph(n);
        let t0 = std::time::Instant::now();
        let jg = autodiff::jacobian(&g, &[0]).unwrap();
        let exe = compile(&jg).unwrap();
        println!("jacobian_{n}: differentiate + compile {:?}", t0.elapsed());
        let (xt, st) = (Tensor::from_slice(&x, [n]), Tensor::from_slice(&s, [n]));
        let hand = |jac: &mut [f64]| analytic_jacobian(black_box(&x), jac);
        dense_pair(
            c,
            &format!("jacobian_{n}"),
            "rlx jacobian",
            &exe,
            &[&xt, &st],
            n,
            hand,
        );
    }
}

/// Extended Rosenbrock `Σ_{i<n-1} 100 (x_{i+1} − x_i²)² + (1 − x_i)²`.
fn rosenbrock_graph(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let lo = g.slice_range(x, 0..n - 1, 0).unwrap();
    let hi = g.slice_range(x, 1..n, 0).unwrap();
    let sq = g.square(lo).unwrap();
    let d = g.sub(hi, sq).unwrap();
    let d2 = g.square(d).unwrap();
    let hundred = g.scalar(100.0, DType::F64);
    let a = g.mul(d2, hundred).unwrap();
    let one = g.scalar(1.0, DType::F64);
    let e = g.sub(one, lo).unwrap();
    let e2 = g.square(e).unwrap();
    let t = g.add(a, e2).unwrap();
    let f = g.sum_all(t).unwrap();
    g.set_outputs(vec![f]);
    g
}

/// The analytic Hessian (tridiagonal) into the dense buffer: one `fill`
/// and one pass over the pairs `(i, i+1)`, as `analytic_jacobian`.
fn analytic_rosenbrock_hessian(x: &[f64], h: &mut [f64]) {
    let n = x.len();
    h.fill(0.0);
    for i in 0..n - 1 {
        h[i * n + i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0;
        h[(i + 1) * n + i + 1] += 200.0;
        h[i * n + i + 1] = -400.0 * x[i];
        h[(i + 1) * n + i] = -400.0 * x[i];
    }
}

fn rosenbrock_hessian(c: &mut Criterion) {
    for n in HESSIAN_SIZES {
        let x: Vec<f64> = (0..n)
            .map(|i| 0.3 + 0.7 * (i as f64 * 0.37).sin())
            .collect();
        let g = rosenbrock_graph(n);
        let t0 = std::time::Instant::now();
        let exe = compile(&autodiff::hessian(&g, &[0]).unwrap()).unwrap();
        println!(
            "hessian_rosenbrock_{n}: differentiate + compile {:?}",
            t0.elapsed()
        );
        let xt = Tensor::from_slice(&x, [n]);
        let hand = |h: &mut [f64]| analytic_rosenbrock_hessian(black_box(&x), h);
        dense_pair(
            c,
            &format!("hessian_rosenbrock_{n}"),
            "rlx hessian",
            &exe,
            &[&xt],
            n,
            hand,
        );
    }
}

/// Times `exe` (whose output 1 is an `n × n` matrix) against `hand`, which
/// fills the same matrix, in one group, after checking that they agree.
fn dense_pair(
    c: &mut Criterion,
    group: &str,
    rlx: &str,
    exe: &rlx_runtime::Executable,
    inputs: &[&Tensor],
    n: usize,
    mut hand: impl FnMut(&mut [f64]),
) {
    let mut outs: Vec<Tensor> = exe
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    exe.run_into(inputs, &mut outs).unwrap();
    assert_eq!(outs[1].shape().dims(), &[n, n]);
    let mut want = vec![0.0; n * n];
    hand(&mut want);
    assert_close_f64(group, outs[1].as_slice::<f64>().unwrap(), &want, n);

    let mut group = c.benchmark_group(group);
    group.bench_function(rlx, |b| {
        b.iter(|| exe.run_into(black_box(inputs), &mut outs).unwrap())
    });
    group.bench_function("hand-written analytic", |b| b.iter(|| hand(&mut want)));
    group.finish();
}

criterion_group!(benches, mlp, jacobian, rosenbrock_hessian);
criterion_main!(benches);
