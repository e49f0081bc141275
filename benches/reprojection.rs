//! Per-observation Jacobians of a camera-reprojection residual (issue #16;
//! the residual is in `common/reprojection.rs`): 15 inputs per observation
//! gathered from camera, point and weight arrays, Rodrigues rotation,
//! projection and radial distortion, columns taken with `slice` on the
//! last axis.
//!
//! - `reprojection_30000`: `batch_jacobian_` over 30 000 observations
//!   against the objective itself (the rlx plain call: the target is
//!   ≤ 10x) and against hand-written forward mode (a dual number carrying
//!   the 15 partials through the same formulas), plus the hand-written
//!   objective for scale;
//! - `reprojection_10`: the same at 10 observations, where the fixed cost
//!   of a call shows (target ≤ 10 µs).
//!
//! Each group first checks the rlx Jacobian against the hand-written one
//! and prints the cold cost (trace, transform, compile, first run) once,
//! then the fastest of 30 batches of each of the four, taken in turn
//! (criterion's means wander on a loaded machine; the fastest batch of
//! runs interleaved in one process gives stable ratios).
//! Threads: `RLX_NUM_THREADS` (default: every core).
//!
//! Run: `cargo bench --bench reprojection -- --warm-up-time 1 --measurement-time 3`

#[path = "common/batches.rs"]
mod batches;
#[path = "common/reprojection.rs"]
mod reprojection;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use reprojection::{
    batch_jacobian_reprojection, jacobians_by_hand, observations, reprojection, residuals_by_hand,
    INPUTS, OUTPUTS,
};
use rlx::prelude::*;

fn group(c: &mut Criterion, n: usize) {
    let x = observations(n);
    let xt = Tensor::from_slice(&x, [n, INPUTS]);
    let t0 = Instant::now();
    let got = batch_jacobian_reprojection(&xt).unwrap();
    println!(
        "reprojection batch_jacobian_ N = {n}: first call {:?}",
        t0.elapsed()
    );
    let mut jac = vec![0.0; n * OUTPUTS * INPUTS];
    jacobians_by_hand(&x, &mut jac);
    for (i, (g, w)) in got.to_vec::<f64>().unwrap().iter().zip(&jac).enumerate() {
        assert!(
            (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
            "jacobian[{i}]: {g} vs {w}"
        );
    }
    let mut res = vec![0.0; n * OUTPUTS];
    let fastest = batches::fastest(
        &mut [
            &mut || {
                drop(black_box(
                    batch_jacobian_reprojection(black_box(&xt)).unwrap(),
                ))
            },
            &mut || drop(black_box(reprojection(black_box(&xt)))),
            &mut || jacobians_by_hand(black_box(&x), black_box(&mut jac)),
            &mut || residuals_by_hand(black_box(&x), black_box(&mut res)),
        ],
        30,
        Duration::from_millis(2),
    );
    let [jac_rlx, obj_rlx, jac_hand, obj_hand] = fastest.map(|t| t * 1e6);
    println!(
        "reprojection N = {n}, fastest batch (µs a call): rlx batch_jacobian_ {jac_rlx:.2}, \
         rlx objective {obj_rlx:.2} ({:.2}x), hand-written forward mode {jac_hand:.2} ({:.2}x), \
         hand-written objective {obj_hand:.2}",
        jac_rlx / obj_rlx,
        jac_rlx / jac_hand
    );
    let mut grp = c.benchmark_group(format!("reprojection_{n}"));
    grp.bench_function("rlx batch_jacobian_", |b| {
        b.iter(|| batch_jacobian_reprojection(black_box(&xt)).unwrap())
    });
    grp.bench_function("rlx objective", |b| b.iter(|| reprojection(black_box(&xt))));
    grp.bench_function("hand-written forward mode", |b| {
        b.iter(|| jacobians_by_hand(black_box(&x), &mut jac))
    });
    grp.bench_function("hand-written objective", |b| {
        b.iter(|| residuals_by_hand(black_box(&x), &mut res))
    });
    grp.finish();
}

fn large(c: &mut Criterion) {
    group(c, 30_000);
}

fn small(c: &mut Criterion) {
    group(c, 10);
}

criterion_group!(benches, large, small);
criterion_main!(benches);
