//! Medium tensors (issue #16): element-wise math over thousands of elements
//! with slices, concatenations and broadcasts in between, through the
//! `#[differentiable]` companions on a warm plan cache, each against a
//! hand-written analytic implementation of the same derivative in the same
//! run (1 thread).
//!
//! - `rosenbrock_hvp_1000`: `hvp_` of the extended Rosenbrock function
//!   (two slices, squares, a sum) at n = 1000;
//! - `diode_batch_jacobian_10000`: per-device 3×3 Jacobians of a 3-terminal
//!   device (`exp` of one voltage difference, `tanh` of another, products;
//!   the three currents concatenated on the last axis) over 10 000 devices;
//! - `lj_broadcast_64`: `value_and_grad_` of the all-pairs Lennard-Jones
//!   energy of 64 particles in the broadcast form (the pairs done twice)
//!   against a pair loop;
//! - `slices_grad_1000`: the gradient through 1000 row slices of one
//!   `[1000, 64]` tensor (a recurrence that reads one row per step), against
//!   the hand-written forward and backward loops;
//! - `diode_fit_{1000,10000}`: `value_and_grad_` of a diode fit whose five
//!   parameters go through small scalar chains before driving the diode law
//!   over N devices (`benches/common/diode_fit.rs`), against the analytic
//!   gradient by hand; its value-and-grad plan is also run with and without
//!   scalar regions (issue #15), whose step counts are printed.
//!
//! Each group first checks that both sides agree, and prints the cold cost
//! (trace, differentiate, compile, first run) once. With
//! `RLX_BENCH_BATCHES="rosenbrock|lj_"` the named groups are also timed by
//! the fastest of many alternating batches (`common/batches.rs`), which
//! holds still on a loaded machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rlx::prelude::*;

#[path = "common/batches.rs"]
mod batches;
#[path = "common/device.rs"]
mod device;
#[path = "common/diode_fit.rs"]
mod diode_fit;

use device::{batch_jacobian_device, device_jacobian_by_hand};

/// `n` deterministic values in `[lo, hi)`, well spread (a multiplicative
/// sequence modulo a prime).
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    const P: u64 = 1_000_003;
    (0..n as u64)
        .map(|i| lo + (hi - lo) * ((i * 7919 + seed * 104_729) % P) as f64 / P as f64)
        .collect()
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-9 * (1.0 + w.abs());
        assert!((g - w).abs() <= tol, "{what}[{i}]: {g} vs {w}");
    }
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

// ---- Rosenbrock ----

/// Σ_i 100 (x_{i+1} − x_i²)² + (1 − x_i)²
#[differentiable]
fn rosenbrock(x: &Tensor) -> f64 {
    let n = x.shape().dim(0);
    let a = x.slice_range(0..n - 1, 0);
    let b = x.slice_range(1..n, 0);
    let d = b - a.square();
    ((d.square() * 100.0) + (a * -1.0 + 1.0).square()).sum_all()
}

/// The analytic Hessian-vector product of [`rosenbrock`].
fn rosenbrock_hvp_by_hand(x: &[f64], v: &[f64], hv: &mut [f64]) {
    hv.fill(0.0);
    for i in 0..x.len() - 1 {
        let (xi, xj) = (x[i], x[i + 1]);
        let d = xj - xi * xi;
        let hii = -400.0 * d + 800.0 * xi * xi + 2.0;
        let hij = -400.0 * xi;
        hv[i] += hii * v[i] + hij * v[i + 1];
        hv[i + 1] += hij * v[i] + 200.0 * v[i + 1];
    }
}

fn rosenbrock_bench(c: &mut Criterion) {
    let n = 1000;
    let x = values(n, 1, -1.2, 1.2);
    let v = values(n, 2, -1.0, 1.0);
    let (xt, vt) = (Tensor::from_slice(&x, [n]), Tensor::from_slice(&v, [n]));
    let t0 = Instant::now();
    let got = hvp_rosenbrock(&xt, &vt).unwrap();
    println!("rosenbrock hvp_ n = {n}: first call {:?}", t0.elapsed());
    let mut want = vec![0.0; n];
    rosenbrock_hvp_by_hand(&x, &v, &mut want);
    assert_close("rosenbrock hvp", &vals(&got), &want);
    batches::compare(
        "rosenbrock_hvp_1000",
        || {
            drop(black_box(
                hvp_rosenbrock(black_box(&xt), black_box(&vt)).unwrap(),
            ))
        },
        || rosenbrock_hvp_by_hand(black_box(&x), black_box(&v), black_box(&mut want)),
    );
    let mut grp = c.benchmark_group("rosenbrock_hvp_1000");
    grp.bench_function("rlx hvp_", |b| {
        b.iter(|| hvp_rosenbrock(black_box(&xt), black_box(&vt)).unwrap())
    });
    grp.bench_function("hand-written analytic", |b| {
        b.iter(|| rosenbrock_hvp_by_hand(black_box(&x), black_box(&v), &mut want))
    });
    grp.finish();
}

// ---- 3-terminal device ----

fn device_bench(c: &mut Criterion) {
    let n = 10_000;
    let u = values(3 * n, 3, -0.2, 0.2);
    let ut = Tensor::from_slice(&u, [n, 3]);
    let t0 = Instant::now();
    let got = batch_jacobian_device(&ut).unwrap();
    println!(
        "device batch_jacobian_ N = {n}: first call {:?}",
        t0.elapsed()
    );
    let mut want = vec![0.0; 9 * n];
    device_jacobian_by_hand(&u, &mut want);
    assert_close("device jacobian", &vals(&got), &want);
    // Criterion's mean moves with the load of a shared machine; the
    // fastest of many short batches, both sides in turn, moves less.
    let [rlx, hand] = batches::fastest(
        &mut [
            &mut || drop(black_box(batch_jacobian_device(black_box(&ut)).unwrap())),
            &mut || device_jacobian_by_hand(black_box(&u), black_box(&mut want)),
        ],
        40,
        Duration::from_millis(1),
    );
    println!(
        "device batch_jacobian_ N = {n}: fastest batch {:.1} µs vs hand {:.1} µs ({:.2}x)",
        rlx * 1e6,
        hand * 1e6,
        rlx / hand
    );
    let mut grp = c.benchmark_group("diode_batch_jacobian_10000");
    grp.bench_function("rlx batch_jacobian_", |b| {
        b.iter(|| batch_jacobian_device(black_box(&ut)).unwrap())
    });
    grp.bench_function("hand-written loop", |b| {
        b.iter(|| device_jacobian_by_hand(black_box(&u), &mut want))
    });
    grp.finish();
}

// ---- all-pairs Lennard-Jones, broadcast form ----

/// ½ Σ_{i≠j} 4 (r_ij⁻¹² − r_ij⁻⁶) for `p: [n, 3]`; `eye` (the identity)
/// keeps the diagonal finite (r² = 1 there, where the pair term and its
/// gradient vanish).
#[differentiable]
fn lj_energy(p: &Tensor, eye: &Tensor) -> f64 {
    let n = p.shape().dim(0);
    let d = p.reshape([n, 1, 3]) - p.reshape([1, n, 3]);
    let r2 = d.square().sum(&[2]) + eye;
    let s3 = r2.powi(-3);
    ((s3.square() - &s3) * 2.0).sum_all()
}

/// Energy and gradient of [`lj_energy`] by a pair loop over `i < j`.
fn lj_by_hand(p: &[f64], g: &mut [f64]) -> f64 {
    g.fill(0.0);
    let n = p.len() / 3;
    let mut e = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let d = [
                p[3 * i] - p[3 * j],
                p[3 * i + 1] - p[3 * j + 1],
                p[3 * i + 2] - p[3 * j + 2],
            ];
            let s = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            let s3 = s * s * s;
            e += 4.0 * (s3 * s3 - s3);
            let de = 4.0 * (-6.0 * s3 * s3 * s + 3.0 * s3 * s); // dE/dr²
            for k in 0..3 {
                g[3 * i + k] += 2.0 * d[k] * de;
                g[3 * j + k] -= 2.0 * d[k] * de;
            }
        }
    }
    e
}

fn lj_bench(c: &mut Criterion) {
    let n = 64;
    // A jittered 4×4×4 lattice with spacing 1.2.
    let jitter = values(3 * n, 4, -0.1, 0.1);
    let p: Vec<f64> = (0..3 * n)
        .map(|k| {
            let (i, a) = (k / 3, k % 3);
            let c = [i % 4, (i / 4) % 4, i / 16][a];
            1.2 * c as f64 + jitter[k]
        })
        .collect();
    let pt = Tensor::from_slice(&p, [n, 3]);
    let eye: Vec<f64> = (0..n * n)
        .map(|k| if k / n == k % n { 1.0 } else { 0.0 })
        .collect();
    let eye = Tensor::from_slice(&eye, [n, n]);
    let t0 = Instant::now();
    let (e, g) = value_and_grad_lj_energy(&pt, &eye).unwrap();
    println!("lj value_and_grad_ n = {n}: first call {:?}", t0.elapsed());
    let mut want = vec![0.0; 3 * n];
    let e_want = lj_by_hand(&p, &mut want);
    assert_close("lj energy", &[e], &[e_want]);
    assert_close("lj gradient", &vals(&g.0), &want);
    batches::compare(
        "lj_broadcast_64",
        || {
            drop(black_box(
                value_and_grad_lj_energy(black_box(&pt), black_box(&eye)).unwrap(),
            ))
        },
        || {
            black_box(lj_by_hand(black_box(&p), &mut want));
        },
    );
    let mut grp = c.benchmark_group("lj_broadcast_64");
    grp.bench_function("rlx value_and_grad_", |b| {
        b.iter(|| value_and_grad_lj_energy(black_box(&pt), black_box(&eye)).unwrap())
    });
    grp.bench_function("hand-written pair loop", |b| {
        b.iter(|| lj_by_hand(black_box(&p), &mut want))
    });
    grp.finish();
}

// ---- gradient through many slices ----

/// h_t = tanh(x_t + 0.5 h_{t−1}) over the rows `x_t` of `x: [k, m]`
/// (h_{−1} = 0), loss Σ h_{k−1}: one slice per step.
#[differentiable]
fn recurrence(x: &Tensor) -> f64 {
    let k = x.shape().dim(0);
    let mut h = x.slice_range(0..1, 0).tanh();
    for t in 1..k {
        h = (x.slice_range(t..t + 1, 0) + &h * 0.5).tanh();
    }
    h.sum_all()
}

/// The gradient of [`recurrence`] by hand: the forward loop keeping every
/// `h_t`, then the backward loop.
fn recurrence_grad_by_hand(x: &[f64], m: usize, hs: &mut [f64], g: &mut [f64]) {
    let k = x.len() / m;
    for t in 0..k {
        for j in 0..m {
            let prev = if t == 0 { 0.0 } else { hs[(t - 1) * m + j] };
            hs[t * m + j] = (x[t * m + j] + 0.5 * prev).tanh();
        }
    }
    let mut ct = vec![1.0; m];
    for t in (0..k).rev() {
        for j in 0..m {
            let h = hs[t * m + j];
            let a = ct[j] * (1.0 - h * h);
            g[t * m + j] = a;
            ct[j] = 0.5 * a;
        }
    }
}

fn slices_bench(c: &mut Criterion) {
    let (k, m) = (1000, 64);
    let x = values(k * m, 5, -1.0, 1.0);
    let xt = Tensor::from_slice(&x, [k, m]);
    let t0 = Instant::now();
    let got = grad_recurrence(&xt).unwrap();
    println!("slices grad_ k = {k}: first call {:?}", t0.elapsed());
    let (mut hs, mut want) = (vec![0.0; k * m], vec![0.0; k * m]);
    recurrence_grad_by_hand(&x, m, &mut hs, &mut want);
    assert_close("slices gradient", &vals(&got), &want);
    let mut grp = c.benchmark_group("slices_grad_1000");
    grp.bench_function("rlx grad_", |b| {
        b.iter(|| grad_recurrence(black_box(&xt)).unwrap())
    });
    grp.bench_function("hand-written loops", |b| {
        b.iter(|| recurrence_grad_by_hand(black_box(&x), m, &mut hs, &mut want))
    });
    grp.finish();
}

// ---- diode fit: small parameter chains driving a large computation ----

fn diode_fit_bench(c: &mut Criterion) {
    use diode_fit::{currents, data, diode_fit_body, START};
    use rlx::runtime::compile::{compile_with, Options};
    for n in [1000, 10_000] {
        let (v, m) = data(n);
        let (pt, vt, mt) = (
            Tensor::from_slice(&START, [5]),
            Tensor::from_slice(&v, [n]),
            Tensor::from_slice(&m, [n]),
        );
        let t0 = Instant::now();
        let (loss, grad) = diode_fit::value_and_grad_diode_fit(&pt, &vt, &mt).unwrap();
        println!("diode_fit N = {n}: first call {:?}", t0.elapsed());
        let mut i = vec![0.0; n];
        let mut want = [0.0; 5];
        let want_loss = currents(&START, &v, &m, &mut i, &mut want);
        assert_close("diode_fit loss", &[loss], &[want_loss]);
        for (k, (g, w)) in vals(&grad).iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-8 * w.abs(),
                "diode_fit grad[{k}]: {g} vs {w}"
            );
        }
        // The value-and-grad plan with and without scalar regions.
        let t = rlx::trace::Trace::enter();
        let p = t.input("p", [5], DType::F64);
        let vi = t.input("v", [n], DType::F64);
        let mi = t.input("i_meas", [n], DType::F64);
        let g = t.finish(&[&diode_fit_body(&p, &vi, &mi)]).unwrap();
        let vg = rlx::core::autodiff::value_and_grad(&g, &[0]).unwrap();
        let mixed = rlx::compile(&vg).unwrap();
        let no_regions = Options::general();
        let general = compile_with(&vg, &no_regions).unwrap();
        let (a, b) = (mixed.stats(), general.stats());
        println!(
            "diode_fit N = {n}: {} steps with {} scalar regions ({} nodes, {} values in, {} out); {} steps without",
            a.steps, a.small_regions, a.small_region_nodes, a.small_region_inputs, a.small_region_outputs, b.steps
        );
        let ins = [&pt, &vt, &mt];
        let mut outs = mixed.run(&ins).unwrap();
        let mut grp = c.benchmark_group(format!("diode_fit_{n}"));
        grp.bench_function("rlx value_and_grad_", |b| {
            b.iter(|| diode_fit::value_and_grad_diode_fit(black_box(&pt), &vt, &mt).unwrap())
        });
        grp.bench_function("plan with scalar regions", |b| {
            b.iter(|| mixed.run_into(black_box(&ins), &mut outs).unwrap())
        });
        grp.bench_function("plan without scalar regions", |b| {
            b.iter(|| general.run_into(black_box(&ins), &mut outs).unwrap())
        });
        let mut g5 = [0.0; 5];
        grp.bench_function("hand-written gradient", |b| {
            b.iter(|| currents(black_box(&START), &v, &m, &mut i, &mut g5))
        });
        grp.finish();
    }
}

criterion_group!(
    benches,
    rosenbrock_bench,
    device_bench,
    lj_bench,
    slices_bench,
    diode_fit_bench
);
criterion_main!(benches);
