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

/// Seconds per call of each of `fs`: the fastest of `rounds` batches of
/// about `batch` each, the functions taking turns batch by batch (so all
/// of them run under the same load).
pub fn fastest<const K: usize>(
    fs: &mut [&mut dyn FnMut(); K],
    rounds: usize,
    batch: Duration,
) -> [f64; K] {
    let calls: Vec<usize> = fs
        .iter_mut()
        .map(|f| ((batch.as_secs_f64() / per_call(*f)) as usize).max(1))
        .collect();
    let mut best = [f64::MAX; K];
    for _ in 0..rounds {
        for (k, f) in fs.iter_mut().enumerate() {
            let t = Instant::now();
            for _ in 0..calls[k] {
                f();
            }
            best[k] = best[k].min(t.elapsed().as_secs_f64() / calls[k] as f64);
        }
    }
    best
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
    let [best_rlx, best_hand] = fastest(&mut [&mut rlx, &mut hand], ROUNDS, BATCH);
    println!(
        "{group}: fastest of {ROUNDS} batches: rlx {:.3} µs, hand {:.3} µs, ratio {:.3}x \
         ({} threads)",
        best_rlx * 1e6,
        best_hand * 1e6,
        best_rlx / best_hand,
        rlx::num_threads(),
    );
}
