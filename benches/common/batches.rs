//! A second timing of a benchmark and its hand-written baseline for a
//! loaded machine, where criterion's means vary by 2x between runs of the
//! same build: with `RLX_BENCH_BATCHES` set to a `|`-separated list of
//! group names (or parts of them), each named group also times both sides
//! in alternating batches of about 100 µs and prints the fastest batch of
//! each, per call, and their ratio. A batch that another process
//! interrupted is only slower, so the fastest of many is close to the
//! unloaded time, and alternating keeps both sides under the same load.
//!
//! `RLX_BENCH_BATCHES="rosenbrock|lj_" cargo bench --bench medium -- "rosenbrock|lj_"`
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Batches per side.
const ROUNDS: usize = 3000;
/// The length of one batch.
const BATCH: Duration = Duration::from_micros(100);

/// Seconds per call of `f`, from calls over about 20 ms.
fn per_call(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    let mut calls = 0u32;
    while t.elapsed() < Duration::from_millis(20) {
        f();
        calls += 1;
    }
    t.elapsed().as_secs_f64() / f64::from(calls)
}

/// Seconds per call of the fastest of `ROUNDS` batches of `calls` calls.
fn batch(f: &mut dyn FnMut(), calls: usize, best: &mut f64) {
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    *best = best.min(t.elapsed().as_secs_f64() / calls as f64);
}

/// Times `rlx` and `hand` in alternating batches when `group` is selected
/// by `RLX_BENCH_BATCHES`, and prints the fastest batch of each.
pub fn compare(group: &str, mut rlx: impl FnMut(), mut hand: impl FnMut()) {
    let Ok(filter) = std::env::var("RLX_BENCH_BATCHES") else {
        return;
    };
    if !filter.split('|').any(|f| group.contains(f.trim())) {
        return;
    }
    let calls = |f: &mut dyn FnMut()| ((BATCH.as_secs_f64() / per_call(f)) as usize).max(1);
    let (n_rlx, n_hand) = (calls(&mut rlx), calls(&mut hand));
    let (mut best_rlx, mut best_hand) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        batch(&mut rlx, n_rlx, &mut best_rlx);
        batch(&mut hand, n_hand, &mut best_hand);
    }
    println!(
        "{group}: fastest of {ROUNDS} batches: rlx {:.3} µs, hand {:.3} µs, ratio {:.3}x \
         ({} threads)",
        best_rlx * 1e6,
        best_hand * 1e6,
        best_rlx / best_hand,
        rlx::num_threads(),
    );
}
