//! Autodiff benchmarks, each against a hand-written baseline in the same run:
//! (a) `value_and_grad` of an MLP 784-256-256-10 (batch 64, f32, tanh,
//!     softmax cross-entropy averaged over the batch) w.r.t. all weights and
//!     biases, compiled and run warm into preallocated outputs, vs a
//!     hand-written forward + backward calling `matrixmultiply::sgemm`
//!     directly (transposes via strides) with hand loops for the rest;
//! (b) the dense 200x200 Jacobian of a discretised 1-D nonlinear
//!     reaction-diffusion residual in f64 via `autodiff::jacobian` (one
//!     batched execution), vs the analytic tridiagonal Jacobian written into
//!     a dense buffer.
//!
//! Both setups first check that the compiled gradient graph and the
//! hand-written code agree.
//!
//! Run: `cargo bench --bench autodiff -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use rlx_core::autodiff::{jacobian, value_and_grad};
use rlx_runtime::{compile, DType, Graph, Tensor};

const B: usize = 64;
const D_IN: usize = 784;
const H: usize = 256;
const D_OUT: usize = 10;

/// Deterministic pseudo-random values in `[-scale, scale)` (xorshift).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            (2.0 * u - 1.0) * scale
        })
        .collect()
}

/// Parameters and data of the MLP, in graph input order after `x`, `y`.
struct Mlp {
    x: Vec<f32>,
    y: Vec<f32>,
    w1: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
    b2: Vec<f32>,
    w3: Vec<f32>,
    b3: Vec<f32>,
}

impl Mlp {
    fn new() -> Mlp {
        let mut y = vec![0.0f32; B * D_OUT];
        for r in 0..B {
            y[r * D_OUT + (r * 7 + 3) % D_OUT] = 1.0;
        }
        Mlp {
            x: values(B * D_IN, 1, 1.0),
            y,
            w1: values(D_IN * H, 2, 1.0 / (D_IN as f32).sqrt()),
            b1: values(H, 3, 0.1),
            w2: values(H * H, 4, 1.0 / (H as f32).sqrt()),
            b2: values(H, 5, 0.1),
            w3: values(H * D_OUT, 6, 1.0 / (H as f32).sqrt()),
            b3: values(D_OUT, 7, 0.1),
        }
    }
}

/// The loss as a graph: inputs `x, y, w1, b1, w2, b2, w3, b3`.
fn mlp_graph() -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [B, D_IN], DType::F32);
    let y = g.input("y", [B, D_OUT], DType::F32);
    let w1 = g.input("w1", [D_IN, H], DType::F32);
    let b1 = g.input("b1", [H], DType::F32);
    let w2 = g.input("w2", [H, H], DType::F32);
    let b2 = g.input("b2", [H], DType::F32);
    let w3 = g.input("w3", [H, D_OUT], DType::F32);
    let b3 = g.input("b3", [D_OUT], DType::F32);
    let mut h = g.matmul(x, w1).unwrap();
    h = g.add(h, b1).unwrap();
    h = g.tanh(h).unwrap();
    h = g.matmul(h, w2).unwrap();
    h = g.add(h, b2).unwrap();
    h = g.tanh(h).unwrap();
    let mut z = g.matmul(h, w3).unwrap();
    z = g.add(z, b3).unwrap();
    let lp = g.log_softmax(z, 1).unwrap();
    let ylp = g.mul(y, lp).unwrap();
    let s = g.sum_all(ylp).unwrap();
    let k = g.scalar(-1.0 / B as f64, DType::F32);
    let loss = g.mul(s, k).unwrap();
    g.set_outputs(vec![loss]);
    g
}

/// `c[m x n] = a * b` (or `+=` when `beta == 1`) with explicit strides.
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    (rsa, csa): (isize, isize),
    b: &[f32],
    (rsb, csb): (isize, isize),
    beta: f32,
    c: &mut [f32],
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // SAFETY: the asserts above bound every index the strides reach: `a`
    // is read as m x k, `b` as k x n and `c` written as m x n, row-major or
    // transposed over exactly that many elements.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            beta,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Work buffers and gradients of the hand-written version.
struct HandBufs {
    h1: Vec<f32>,
    h2: Vec<f32>,
    z3: Vec<f32>,
    dz3: Vec<f32>,
    dz2: Vec<f32>,
    dz1: Vec<f32>,
    /// `[dw1, db1, dw2, db2, dw3, db3]`
    grads: [Vec<f32>; 6],
}

impl HandBufs {
    fn new() -> HandBufs {
        HandBufs {
            h1: vec![0.0; B * H],
            h2: vec![0.0; B * H],
            z3: vec![0.0; B * D_OUT],
            dz3: vec![0.0; B * D_OUT],
            dz2: vec![0.0; B * H],
            dz1: vec![0.0; B * H],
            grads: [
                vec![0.0; D_IN * H],
                vec![0.0; H],
                vec![0.0; H * H],
                vec![0.0; H],
                vec![0.0; H * D_OUT],
                vec![0.0; D_OUT],
            ],
        }
    }
}

fn bias_tanh(z: &mut [f32], b: &[f32]) {
    for row in z.chunks_exact_mut(b.len()) {
        for (v, &bb) in row.iter_mut().zip(b) {
            *v = (*v + bb).tanh();
        }
    }
}

fn col_sums(d: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    for row in d.chunks_exact(out.len()) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}

/// Forward + backward by hand; returns the loss, gradients in `w.grads`.
fn mlp_by_hand(p: &Mlp, w: &mut HandBufs) -> f32 {
    let (d, h, o) = (D_IN as isize, H as isize, D_OUT as isize);
    // Forward.
    gemm(B, D_IN, H, &p.x, (d, 1), &p.w1, (h, 1), 0.0, &mut w.h1);
    bias_tanh(&mut w.h1, &p.b1);
    gemm(B, H, H, &w.h1, (h, 1), &p.w2, (h, 1), 0.0, &mut w.h2);
    bias_tanh(&mut w.h2, &p.b2);
    gemm(B, H, D_OUT, &w.h2, (h, 1), &p.w3, (o, 1), 0.0, &mut w.z3);
    // Bias, log-softmax, cross-entropy and its gradient (softmax - y) / B.
    let mut loss = 0.0f32;
    let inv_b = 1.0 / B as f32;
    for ((z, y), dz) in
        w.z3.chunks_exact_mut(D_OUT)
            .zip(p.y.chunks_exact(D_OUT))
            .zip(w.dz3.chunks_exact_mut(D_OUT))
    {
        let mut m = f32::NEG_INFINITY;
        for (v, &bb) in z.iter_mut().zip(&p.b3) {
            *v += bb;
            m = m.max(*v);
        }
        let mut s = 0.0f32;
        for v in z.iter() {
            s += (*v - m).exp();
        }
        let lse = m + s.ln();
        for ((v, &yy), g) in z.iter().zip(y).zip(dz.iter_mut()) {
            let lp = *v - lse;
            loss -= yy * lp;
            *g = (lp.exp() - yy) * inv_b;
        }
    }
    loss *= inv_b;
    let [dw1, db1, dw2, db2, dw3, db3] = &mut w.grads;
    // Layer 3: dw3 = h2^T dz3, db3 = colsum dz3, dh2 = dz3 w3^T.
    gemm(H, B, D_OUT, &w.h2, (1, h), &w.dz3, (o, 1), 0.0, dw3);
    col_sums(&w.dz3, db3);
    gemm(B, D_OUT, H, &w.dz3, (o, 1), &p.w3, (1, o), 0.0, &mut w.dz2);
    for (g, &a) in w.dz2.iter_mut().zip(&w.h2) {
        *g *= 1.0 - a * a;
    }
    // Layer 2.
    gemm(H, B, H, &w.h1, (1, h), &w.dz2, (h, 1), 0.0, dw2);
    col_sums(&w.dz2, db2);
    gemm(B, H, H, &w.dz2, (h, 1), &p.w2, (1, h), 0.0, &mut w.dz1);
    for (g, &a) in w.dz1.iter_mut().zip(&w.h1) {
        *g *= 1.0 - a * a;
    }
    // Layer 1 (no gradient for x).
    gemm(D_IN, B, H, &p.x, (1, d), &w.dz1, (h, 1), 0.0, dw1);
    col_sums(&w.dz1, db1);
    loss
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs() / scale;
        assert!(
            err <= 1e-4,
            "{what}[{i}]: graph {g} vs hand {w} (rel {err})"
        );
    }
}

fn mlp_value_and_grad(c: &mut Criterion) {
    let g = mlp_graph();
    let vg = value_and_grad(&g, &[2, 3, 4, 5, 6, 7]).unwrap();
    if std::env::var_os("RLX_BENCH_DUMP").is_some() {
        eprintln!("{vg}");
    }
    let exe = compile(&vg).unwrap();
    let p = Mlp::new();
    let shapes: [&[usize]; 8] = [
        &[B, D_IN],
        &[B, D_OUT],
        &[D_IN, H],
        &[H],
        &[H, H],
        &[H],
        &[H, D_OUT],
        &[D_OUT],
    ];
    let data = [&p.x, &p.y, &p.w1, &p.b1, &p.w2, &p.b2, &p.w3, &p.b3];
    let ins: Vec<Tensor> = data
        .iter()
        .zip(shapes)
        .map(|(v, s)| Tensor::from_slice(v, s))
        .collect();
    let in_refs: Vec<&Tensor> = ins.iter().collect();
    let mut outs: Vec<Tensor> = exe
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    exe.run_into(&in_refs, &mut outs).unwrap();
    let mut hand = HandBufs::new();
    let loss = mlp_by_hand(&p, &mut hand);
    assert_close("loss", outs[0].as_slice::<f32>().unwrap(), &[loss]);
    let names = ["dw1", "db1", "dw2", "db2", "dw3", "db3"];
    for (k, name) in names.iter().enumerate() {
        assert_close(name, outs[k + 1].as_slice::<f32>().unwrap(), &hand.grads[k]);
    }

    let mut grp = c.benchmark_group("mlp_784_256_256_10_b64_value_and_grad");
    grp.bench_function("compiled", |b| {
        b.iter(|| exe.run_into(black_box(&in_refs), &mut outs).unwrap())
    });
    grp.bench_function("hand_sgemm", |b| {
        b.iter(|| mlp_by_hand(black_box(&p), &mut hand))
    });
    grp.finish();
}

const N: usize = 200;

/// `F_i = (x_{i-1} - 2 x_i + x_{i+1}) / h^2 - exp(x_i) + s_i` with
/// `x_{-1} = LEFT`, `x_N = RIGHT`; inputs `x`, `s`.
fn residual_graph() -> Graph {
    let h2 = 1.0 / ((N + 1) as f64).powi(2);
    let mut g = Graph::new();
    let x = g.input("x", [N], DType::F64);
    let s = g.input("s", [N], DType::F64);
    let left = g.full(LEFT, [1], DType::F64);
    let right = g.full(RIGHT, [1], DType::F64);
    let xp = g.concat(&[left, x, right], 0).unwrap();
    let xl = g.slice(xp, 0, 0, N).unwrap();
    let xr = g.slice(xp, 0, 2, N).unwrap();
    let two = g.scalar(2.0, DType::F64);
    let x2 = g.mul(x, two).unwrap();
    let mut lap = g.sub(xl, x2).unwrap();
    lap = g.add(lap, xr).unwrap();
    let inv_h2 = g.scalar(1.0 / h2, DType::F64);
    lap = g.mul(lap, inv_h2).unwrap();
    let e = g.exp(x).unwrap();
    let mut f = g.sub(lap, e).unwrap();
    f = g.add(f, s).unwrap();
    g.set_outputs(vec![f]);
    g
}

const LEFT: f64 = 0.5;
const RIGHT: f64 = -0.25;

/// Residual and dense analytic Jacobian (row-major `[N, N]`).
fn residual_by_hand(x: &[f64], s: &[f64], f: &mut [f64], jac: &mut [f64]) {
    let inv_h2 = ((N + 1) as f64).powi(2);
    jac.fill(0.0);
    for i in 0..N {
        let xl = if i == 0 { LEFT } else { x[i - 1] };
        let xr = if i + 1 == N { RIGHT } else { x[i + 1] };
        let e = x[i].exp();
        f[i] = (xl - 2.0 * x[i] + xr) * inv_h2 - e + s[i];
        let row = &mut jac[i * N..(i + 1) * N];
        row[i] = -2.0 * inv_h2 - e;
        if i > 0 {
            row[i - 1] = inv_h2;
        }
        if i + 1 < N {
            row[i + 1] = inv_h2;
        }
    }
}

fn dense_jacobian(c: &mut Criterion) {
    let g = residual_graph();
    let jg = jacobian(&g, &[0]).unwrap();
    if std::env::var_os("RLX_BENCH_DUMP").is_some() {
        eprintln!("{jg}");
    }
    let exe = compile(&jg).unwrap();
    let x: Vec<f64> = (0..N).map(|i| (i as f64 * 0.05).sin()).collect();
    let s: Vec<f64> = (0..N).map(|i| 1.0 + (i as f64 * 0.01).cos()).collect();
    let xt = Tensor::from_slice(&x, [N]);
    let st = Tensor::from_slice(&s, [N]);
    let mut outs: Vec<Tensor> = exe
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    exe.run_into(&[&xt, &st], &mut outs).unwrap();
    let mut f = vec![0.0; N];
    let mut jac = vec![0.0; N * N];
    residual_by_hand(&x, &s, &mut f, &mut jac);
    for (what, got, want) in [
        ("F", outs[0].as_slice::<f64>().unwrap(), &f[..]),
        ("J", outs[1].as_slice::<f64>().unwrap(), &jac[..]),
    ] {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "{what}[{i}]: graph {a} vs hand {b}"
            );
        }
    }

    let mut grp = c.benchmark_group("jacobian_200_reaction_diffusion_f64");
    grp.bench_function("compiled", |b| {
        b.iter(|| exe.run_into(&[black_box(&xt), &st], &mut outs).unwrap())
    });
    grp.bench_function("hand_analytic", |b| {
        b.iter(|| residual_by_hand(black_box(&x), &s, &mut f, &mut jac))
    });
    grp.finish();
}

criterion_group!(benches, mlp_value_and_grad, dense_jacobian);
criterion_main!(benches);
