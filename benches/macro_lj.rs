//! `grad_` of a small `#[differentiable]` energy on a warm plan cache versus
//! a hand-written analytic gradient: three particles in 2-D, Lennard-Jones
//! pairs (ε = σ = 1) plus one spring between particles 0 and 2
//! (k = 10, rest length 1.5), f64, six scalar inputs.
//!
//! Prints the cold cost (trace + differentiate + compile + first run) once,
//! then criterion times the warm calls. With `RLX_BENCH_BATCHES=macro_lj`
//! the warm `grad_` and the analytic gradient are also timed by the
//! fastest of many alternating batches (`common/batches.rs`), which holds
//! still on a loaded machine.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[path = "common/batches.rs"]
mod batches;
#[path = "common/lj.rs"]
mod lj;
use lj::lj_grad;
use rlx::prelude::*;
use rlx::runtime::Arg;

/// 4 (s⁶ − s³) with s = 1 / r²  (the LJ pair energy with ε = σ = 1)
fn lj(xa: &Tensor, ya: &Tensor, xb: &Tensor, yb: &Tensor) -> Tensor {
    let r2 = (xa - xb).square() + (ya - yb).square();
    let s3 = r2.recip().powi(3);
    (s3.square() - &s3) * 4.0
}

#[differentiable]
fn energy(x0: f64, y0: f64, x1: f64, y1: f64, x2: f64, y2: f64) -> f64 {
    let pairs = lj(&x0, &y0, &x1, &y1) + lj(&x0, &y0, &x2, &y2) + lj(&x1, &y1, &x2, &y2);
    let r = ((&x0 - &x2).square() + (&y0 - &y2).square()).sqrt();
    pairs + (r - 1.5).square() * 5.0
}

fn analytic(p: [f64; 6]) -> [f64; 6] {
    let mut g = [0.0; 6];
    for (a, b) in [(0usize, 1usize), (0, 2), (1, 2)] {
        let (gx, gy) = lj_grad(p[2 * a] - p[2 * b], p[2 * a + 1] - p[2 * b + 1]);
        g[2 * a] += gx;
        g[2 * a + 1] += gy;
        g[2 * b] -= gx;
        g[2 * b + 1] -= gy;
    }
    let (dx, dy) = (p[0] - p[4], p[1] - p[5]);
    let r = (dx * dx + dy * dy).sqrt();
    let f = 10.0 * (r - 1.5) / r;
    g[0] += f * dx;
    g[1] += f * dy;
    g[4] -= f * dx;
    g[5] -= f * dy;
    g
}

/// The value-and-gradient plan of `energy`, traced and compiled by hand.
fn value_and_grad_plan() -> rlx::Executable {
    let t = rlx::trace::Trace::enter();
    let x: Vec<Tensor> = (0..6)
        .map(|i| t.input(&format!("x{i}"), Shape::scalar(), DType::F64))
        .collect();
    let pairs = lj(&x[0], &x[1], &x[2], &x[3])
        + lj(&x[0], &x[1], &x[4], &x[5])
        + lj(&x[2], &x[3], &x[4], &x[5]);
    let r = ((&x[0] - &x[4]).square() + (&x[1] - &x[5]).square()).sqrt();
    let e = pairs + (r - 1.5).square() * 5.0;
    let g = t.finish(&[&e]).unwrap();
    let vg = rlx::core::autodiff::value_and_grad(&g, &[0, 1, 2, 3, 4, 5]).unwrap();
    rlx::compile(&vg).unwrap()
}

const P: [f64; 6] = [0.0, 0.0, 1.1, 0.1, 0.4, 1.2];

fn bench(c: &mut Criterion) {
    let t0 = Instant::now();
    let g = grad_energy(P[0], P[1], P[2], P[3], P[4], P[5]).unwrap();
    let cold = t0.elapsed();
    let want = analytic(P);
    let got = [g.0, g.1, g.2, g.3, g.4, g.5];
    for (a, b) in got.iter().zip(&want) {
        assert!(
            (a - b).abs() <= 1e-9 * (1.0 + b.abs()),
            "{got:?} vs {want:?}"
        );
    }
    println!(
        "macro_lj: first call of grad_energy (trace + differentiate + compile + run): {cold:?}"
    );

    batches::compare(
        "macro_lj",
        || {
            let p = black_box(P);
            black_box(grad_energy(p[0], p[1], p[2], p[3], p[4], p[5]).unwrap());
        },
        || {
            black_box(analytic(black_box(P)));
        },
    );
    let mut group = c.benchmark_group("macro_lj");
    group.bench_function("grad_energy (warm)", |b| {
        b.iter(|| {
            let p = black_box(P);
            grad_energy(p[0], p[1], p[2], p[3], p[4], p[5]).unwrap()
        })
    });
    // The same computation without the companion: the value-and-gradient
    // plan called directly, to separate plan-cache overhead from execution.
    let exe = value_and_grad_plan();
    group.bench_function("plan only (Executable::run_args)", |b| {
        b.iter(|| {
            let p = black_box(P);
            let args = p.map(Arg::F64);
            exe.run_args(&args).unwrap()
        })
    });
    group.bench_function("analytic gradient", |b| b.iter(|| analytic(black_box(P))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
