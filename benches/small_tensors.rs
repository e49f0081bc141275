//! Small tensors at native speed (issue #15): `#[differentiable]` functions
//! over small `Tensor`s, each against a hand-written implementation of the
//! same computation in the same run.
//!
//! - `lj_tensor`: the Lennard-Jones energy of three particles in 2-D (plus
//!   a spring between particles 0 and 2) over one `[6]` tensor, warm
//!   `value_and_grad_`, against the analytic gradient;
//! - `rosenbrock`: the extended Rosenbrock function at n = 10, warm
//!   `hessian_`, against the analytic (tridiagonal) Hessian;
//! - `van_der_pol`: one Newton iteration of implicit Euler on Van der Pol
//!   (mu = 1000): plain call of the residual, `jacobian_`, `try_solve`,
//!   update, against the hand-written 2×2 Newton step;
//! - `eager_ops`: the eager ops of that iteration (and `exp`) on 2-element
//!   tensors, each against the same arithmetic on a stack array;
//! - `pair_loop`: the all-pairs LJ energy of 64 particles in 3-D written as
//!   a double loop over pairs (2016 pairs unrolled at trace time), warm
//!   `grad_`, against the hand-written pair loop; `pair_loop_first_call`:
//!   its first `grad_` for a new signature (trace, differentiate, optimise,
//!   scalarise, compile to native code, run), each iteration with a fresh
//!   signature.
//!
//! Each first call (trace + differentiate + compile + run) is printed once.
//! With `RLX_BENCH_BATCHES=pair_loop` (or `lj_tensor`, `rosenbrock`) that group is also timed by the
//! fastest of many alternating batches (`common/batches.rs`), which holds
//! still on a loaded machine.
//!
//! Run one group with
//! `cargo bench --bench small_tensors -- lj_tensor --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "common/batches.rs"]
mod batches;
#[path = "common/lj.rs"]
mod lj;
use lj::lj_grad;
use rlx::prelude::*;

/// `|a − b|` for particles `i`, `j` of a flat 2-D coordinate vector.
fn distance(p: &Tensor, i: usize, j: usize) -> Tensor {
    (p.slice_range(2 * i..2 * i + 2, 0) - p.slice_range(2 * j..2 * j + 2, 0))
        .square()
        .sum_all()
        .sqrt()
}

/// 4 (s⁶ − s³) with s = 1 / r²  (LJ with ε = σ = 1).
fn lj_of_r(r: &Tensor) -> Tensor {
    let s3 = r.square().recip().powi(3);
    (s3.square() - &s3) * 4.0
}

#[differentiable]
fn energy(p: &Tensor) -> Tensor {
    let pairs =
        lj_of_r(&distance(p, 0, 1)) + lj_of_r(&distance(p, 0, 2)) + lj_of_r(&distance(p, 1, 2));
    pairs + (distance(p, 0, 2) - 1.5).square() * 5.0
}

/// Energy and analytic gradient of `energy`.
fn lj_analytic(p: [f64; 6]) -> (f64, [f64; 6]) {
    let mut e = 0.0;
    let mut g = [0.0; 6];
    for (a, b) in [(0usize, 1usize), (0, 2), (1, 2)] {
        let (dx, dy) = (p[2 * a] - p[2 * b], p[2 * a + 1] - p[2 * b + 1]);
        let s3 = (1.0 / (dx * dx + dy * dy)).powi(3);
        e += 4.0 * (s3 * s3 - s3);
        let (gx, gy) = lj_grad(dx, dy);
        g[2 * a] += gx;
        g[2 * a + 1] += gy;
        g[2 * b] -= gx;
        g[2 * b + 1] -= gy;
    }
    let (dx, dy) = (p[0] - p[4], p[1] - p[5]);
    let r = (dx * dx + dy * dy).sqrt();
    e += 5.0 * (r - 1.5) * (r - 1.5);
    let f = 10.0 * (r - 1.5) / r;
    g[0] += f * dx;
    g[1] += f * dy;
    g[4] -= f * dx;
    g[5] -= f * dy;
    (e, g)
}

/// Σ 100 (x_{i+1} − x_i²)² + (1 − x_i)².
#[differentiable]
fn rosenbrock(x: &Tensor) -> Tensor {
    let n = x.shape().dims()[0];
    let head = x.slice_range(0..n - 1, 0);
    let tail = x.slice_range(1..n, 0);
    ((tail - head.square()).square() * 100.0 + (1.0 - head).square()).sum_all()
}

/// The analytic Hessian of `rosenbrock` (tridiagonal), row-major `n × n`.
fn rosenbrock_hessian(x: &[f64; 10], h: &mut [f64; 100]) {
    let n = 10;
    h.fill(0.0);
    for i in 0..n - 1 {
        // Terms of pair (i, i+1): 100 (x_{i+1} − x_i²)² + (1 − x_i)².
        h[i * n + i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0;
        h[i * n + i + 1] += -400.0 * x[i];
        h[(i + 1) * n + i] += -400.0 * x[i];
        h[(i + 1) * n + i + 1] += 200.0;
    }
}

/// Implicit Euler residual of Van der Pol: `y − y_prev − h f(y)` with
/// `f(y) = (y₁, mu ((1 − y₀²) y₁ − y₀))`.
#[differentiable(wrt(y))]
fn residual(y: &Tensor, y_prev: &Tensor, h: f64) -> Tensor {
    let mu = 1000.0;
    let y0 = y.slice_range(0..1, 0);
    let y1 = y.slice_range(1..2, 0);
    let f0 = y1.clone();
    let f1 = ((1.0 - y0.square()) * &y1 - &y0) * mu;
    y - y_prev - Tensor::concat(&[&f0, &f1], 0) * h
}

/// One hand-written Newton iteration of the same residual.
fn newton_by_hand(y: [f64; 2], yp: [f64; 2], h: f64) -> [f64; 2] {
    let mu = 1000.0;
    let r0 = y[0] - yp[0] - h * y[1];
    let r1 = y[1] - yp[1] - h * mu * ((1.0 - y[0] * y[0]) * y[1] - y[0]);
    let (a, b) = (1.0, -h);
    let (c, d) = (
        -h * mu * (-2.0 * y[0] * y[1] - 1.0),
        1.0 - h * mu * (1.0 - y[0] * y[0]),
    );
    let det = a * d - b * c;
    let dx0 = (d * r0 - b * r1) / det;
    let dx1 = (a * r1 - c * r0) / det;
    [y[0] - dx0, y[1] - dx1]
}

/// One Newton iteration through the companions.
fn newton(y: &Tensor, yp: &Tensor, h: f64) -> Tensor {
    let r = residual(y, yp, h);
    let j = jacobian_residual(y, yp, h).unwrap();
    let dx = j.try_solve(&r.reshape([2, 1])).unwrap();
    y - dx.reshape([2])
}

/// Particles of the pair-loop benchmark.
const N: usize = 64;

/// All-pairs LJ energy over `[N * 3]` coordinates, one term per pair
/// (`_tag` only makes a new signature for the first-call benchmark).
#[differentiable(wrt(p))]
fn pair_energy(p: &Tensor, _tag: usize) -> Tensor {
    let mut e = p.slice_range(0..1, 0).sum_all() * 0.0;
    for i in 0..N {
        for j in i + 1..N {
            let d = p.slice_range(3 * i..3 * i + 3, 0) - p.slice_range(3 * j..3 * j + 3, 0);
            let s3 = d.square().sum_all().recip().powi(3);
            e = e + (s3.square() - &s3) * 4.0;
        }
    }
    e
}

/// The gradient of `pair_energy` by hand.
fn pair_grad_by_hand(p: &[f64], g: &mut [f64]) {
    g.fill(0.0);
    for i in 0..N {
        for j in i + 1..N {
            let d = [
                p[3 * i] - p[3 * j],
                p[3 * i + 1] - p[3 * j + 1],
                p[3 * i + 2] - p[3 * j + 2],
            ];
            let s = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            let s2 = s * s;
            let s4 = s2 * s2;
            let de = 4.0 * (-6.0 * s4 * s2 * s + 3.0 * s4);
            for k in 0..3 {
                g[3 * i + k] += 2.0 * d[k] * de;
                g[3 * j + k] -= 2.0 * d[k] * de;
            }
        }
    }
}

/// A 4×4×4 lattice (spacing 1.1) with a small deterministic jitter.
fn lattice() -> Vec<f64> {
    (0..N * 3)
        .map(|k| {
            let (i, axis) = (k / 3, k % 3);
            let c = [i % 4, (i / 4) % 4, i / 16][axis] as f64;
            1.1 * c + 0.01 * ((k * 7919 % 13) as f64 - 6.0)
        })
        .collect()
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-8 * (1.0 + b.abs()),
        "{what}: {a} vs {b}"
    );
}

const P: [f64; 6] = [0.0, 0.0, 1.1, 0.1, 0.4, 1.2];

fn lj_tensor(c: &mut Criterion) {
    let p = Tensor::from_slice(&P, [6]);
    let t0 = Instant::now();
    let (e, g) = value_and_grad_energy(&p).unwrap();
    println!("lj_tensor: first value_and_grad_energy: {:?}", t0.elapsed());
    let (we, wg) = lj_analytic(P);
    close(e.item::<f64>().unwrap(), we, "energy");
    for (a, b) in g.to_vec::<f64>().unwrap().iter().zip(&wg) {
        close(*a, *b, "gradient");
    }
    batches::compare(
        "lj_tensor",
        || drop(black_box(value_and_grad_energy(black_box(&p)).unwrap())),
        || {
            black_box(lj_analytic(black_box(P)));
        },
    );
    let mut group = c.benchmark_group("lj_tensor");
    group.bench_function("value_and_grad_ over one [6] tensor (warm)", |b| {
        b.iter(|| value_and_grad_energy(black_box(&p)).unwrap())
    });
    group.bench_function("analytic", |b| b.iter(|| lj_analytic(black_box(P))));
    group.finish();
}

fn rosenbrock_bench(c: &mut Criterion) {
    let xs: [f64; 10] = std::array::from_fn(|i| 0.5 + 0.1 * i as f64);
    let x = Tensor::from_slice(&xs, [10]);
    let t0 = Instant::now();
    let h = hessian_rosenbrock(&x).unwrap();
    println!("rosenbrock: first hessian_rosenbrock: {:?}", t0.elapsed());
    let mut want = [0.0; 100];
    rosenbrock_hessian(&xs, &mut want);
    for (a, b) in h.to_vec::<f64>().unwrap().iter().zip(&want) {
        close(*a, *b, "hessian");
    }
    let mut hand = [0.0; 100];
    batches::compare(
        "rosenbrock",
        || drop(black_box(hessian_rosenbrock(black_box(&x)).unwrap())),
        || rosenbrock_hessian(black_box(&xs), black_box(&mut hand)),
    );
    let mut group = c.benchmark_group("rosenbrock");
    group.bench_function("hessian_ n = 10 (warm)", |b| {
        b.iter(|| hessian_rosenbrock(black_box(&x)).unwrap())
    });
    group.bench_function("analytic", |b| {
        let mut h = [0.0; 100];
        b.iter(|| {
            rosenbrock_hessian(black_box(&xs), &mut h);
            h[0]
        })
    });
    group.finish();
}

fn van_der_pol(c: &mut Criterion) {
    let (y0, h) = ([2.0, 0.0], 1e-3);
    let y = Tensor::from_slice(&y0, [2]);
    let t0 = Instant::now();
    let next = newton(&y, &y, h);
    println!("van_der_pol: first Newton iteration: {:?}", t0.elapsed());
    let want = newton_by_hand(y0, y0, h);
    for (a, b) in next.to_vec::<f64>().unwrap().iter().zip(&want) {
        close(*a, *b, "newton step");
    }
    let mut group = c.benchmark_group("van_der_pol");
    group.bench_function(
        "Newton iteration (residual, jacobian_, try_solve, update)",
        |b| b.iter(|| newton(black_box(&y), &y, h)),
    );
    group.bench_function("by hand", |b| {
        b.iter(|| newton_by_hand(black_box(y0), y0, h))
    });
    group.finish();
}

/// The eager ops of the Newton iteration (and a unary op) on 2-element
/// tensors, each against the same arithmetic on a stack array.
fn eager_ops(c: &mut Criterion) {
    let (y, v) = ([2.0, 0.5], [0.25, -1.0]);
    let (ty, tv) = (Tensor::from_slice(&y, [2]), Tensor::from_slice(&v, [2]));
    let a = Tensor::from_slice(&[4.0, 1.0, 2.0, 3.0], [2, 2]);
    let b = Tensor::from_slice(&v, [2, 1]);
    let mut group = c.benchmark_group("eager_ops");
    group.bench_function("[2] - [2]", |bn| bn.iter(|| black_box(&ty) - &tv));
    group.bench_function("[2] - [2] by hand", |bn| {
        bn.iter(|| {
            let (p, q) = (black_box(y), black_box(v));
            [p[0] - q[0], p[1] - q[1]]
        })
    });
    group.bench_function("exp [2]", |bn| bn.iter(|| black_box(&ty).exp()));
    group.bench_function("exp [2] by hand", |bn| {
        bn.iter(|| black_box(y).map(f64::exp))
    });
    group.bench_function("reshape [2, 1] -> [2]", |bn| {
        bn.iter(|| black_box(&b).reshape([2]))
    });
    group.bench_function("try_solve [2, 2] [2, 1]", |bn| {
        bn.iter(|| black_box(&a).try_solve(&b).unwrap())
    });
    group.bench_function("solve 2×2 by hand", |bn| {
        bn.iter(|| {
            let ([p, q, r, s], [e, f]) = (black_box([4.0, 1.0, 2.0, 3.0]), black_box(v));
            let det = p * s - q * r;
            [(s * e - q * f) / det, (p * f - r * e) / det]
        })
    });
    group.bench_function("to_vec [2]", |bn| {
        bn.iter(|| black_box(&ty).to_vec::<f64>().unwrap())
    });
    group.bench_function("from_slice [2]", |bn| {
        bn.iter(|| Tensor::from_slice(black_box(&y), [2]))
    });
    group.finish();
}

fn pair_loop(c: &mut Criterion) {
    let ps = lattice();
    let p = Tensor::from_slice(&ps, [N * 3]);
    let t0 = Instant::now();
    let g = grad_pair_energy(&p, 0).unwrap();
    println!("pair_loop: first grad_pair_energy: {:?}", t0.elapsed());
    let mut want = vec![0.0; N * 3];
    pair_grad_by_hand(&ps, &mut want);
    for (a, b) in g.to_vec::<f64>().unwrap().iter().zip(&want) {
        close(*a, *b, "pair gradient");
    }
    let mut g = vec![0.0; N * 3];
    batches::compare(
        "pair_loop",
        || drop(black_box(grad_pair_energy(black_box(&p), 0).unwrap())),
        || pair_grad_by_hand(black_box(&ps), black_box(&mut g)),
    );
    let mut group = c.benchmark_group("pair_loop");
    group.bench_function("grad_ 64 particles (warm)", |b| {
        b.iter(|| grad_pair_energy(black_box(&p), 0).unwrap())
    });
    group.bench_function("by hand", |b| {
        let mut g = vec![0.0; N * 3];
        b.iter(|| {
            pair_grad_by_hand(black_box(&ps), &mut g);
            g[0]
        })
    });
    group.finish();
}

fn pair_loop_first_call(c: &mut Criterion) {
    let p = Tensor::from_slice(&lattice(), [N * 3]);
    static TAG: AtomicUsize = AtomicUsize::new(1);
    let mut group = c.benchmark_group("pair_loop_first_call");
    group.sample_size(10);
    group.bench_function("grad_ 64 particles (new signature)", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let tag = TAG.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                black_box(grad_pair_energy(&p, tag).unwrap());
                total += t.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    lj_tensor,
    rosenbrock_bench,
    van_der_pol,
    eager_ops,
    pair_loop,
    pair_loop_first_call
);
criterion_main!(benches);
