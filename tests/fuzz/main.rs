//! The fuzz and property suite: random graphs through the compiler, the
//! interpreter and every derivative transform; `#[differentiable]`
//! functions through every companion with random (often wrong) shapes and
//! static arguments; the eager API with random, often invalid, arguments.
//!
//! Properties: no panic where rlx promises an `Err`; no silent wrong result
//! (values against the naive f64 reference of `rlx-runtime/tests/common`,
//! derivatives against central finite differences and against each
//! other; with NaN, ±inf, −0.0 and subnormal inputs, optimised plans give
//! the interpreter's bits); no hang (a watchdog aborts a case that makes no progress for a
//! minute and prints it).
//!
//! `cargo test --workspace` runs a bounded number of cases from fixed seeds
//! (a few seconds). A longer run is one command; the number of cases of
//! each property comes from `RLX_FUZZ_CASES`, the seed from `RLX_FUZZ_SEED`:
//!
//! ```text
//! RLX_FUZZ_CASES=100000 cargo test --release --test fuzz -- --nocapture
//! ```
//!
//! A failure prints the shrunk (minimal) input; each one found becomes a
//! test in `regressions.rs`.

#[path = "../../rlx-runtime/tests/common/mod.rs"]
mod common;
mod companions;
mod compare;
mod eager;
mod graphs;
mod ieee;
#[allow(dead_code)]
mod panics;
mod properties;
mod regressions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed, TestRunner};

/// Cases per property in a plain `cargo test` run (debug build, seconds).
const DEFAULT_CASES: u32 = 300;

/// A case that makes no progress for this long is a hang.
const HANG: Duration = Duration::from_secs(60);

/// Cases per property: `RLX_FUZZ_CASES`, or the bounded default.
fn cases() -> u32 {
    std::env::var("RLX_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// A runner with a fixed seed (`RLX_FUZZ_SEED` to change it), so that a
/// plain test run is reproducible.
fn runner(cases: u32, salt: u64) -> TestRunner {
    let seed = std::env::var("RLX_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_2026);
    TestRunner::new(Config {
        cases,
        rng_seed: RngSeed::Fixed(seed ^ salt),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        max_shrink_iters: 2000,
        ..Config::default()
    })
}

static EPOCH: OnceLock<Instant> = OnceLock::new();
/// Milliseconds since `EPOCH` at the last case started (0: none yet).
static LAST: AtomicU64 = AtomicU64::new(0);
/// The case running last, printed if it hangs.
static CASE: Mutex<String> = Mutex::new(String::new());

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// Marks the start of a case (for the watchdog); starts the watchdog once.
fn progress(case: &dyn std::fmt::Debug) {
    static WATCHDOG: Once = Once::new();
    WATCHDOG.call_once(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_secs(1));
            let last = LAST.load(Ordering::Relaxed);
            if last != 0 && now_ms() - last > HANG.as_millis() as u64 {
                let case = CASE.lock().map(|c| c.clone()).unwrap_or_default();
                eprintln!("fuzz: no progress for {HANG:?}; the case running was:\n{case}");
                std::process::abort();
            }
        });
    });
    *CASE.lock().unwrap_or_else(|e| e.into_inner()) = format!("{case:#?}");
    LAST.store(now_ms(), Ordering::Relaxed);
}

#[test]
fn random_graphs() {
    let (n, derived, refused) = properties::run_graphs(cases());
    eprintln!(
        "fuzz: {n} random graphs compiled, interpreted and checked against the reference; \
         {derived} smooth f64 graphs through jvp, vjp, jacobian, grad and hvp; \
         {refused} builder calls refused with an error"
    );
}

#[test]
fn non_finite_inputs_through_optimised_plans() {
    let n = ieee::run_ieee(cases() / 3);
    eprintln!(
        "fuzz: {n} random graphs with NaN, inf, -0.0 and subnormal inputs (and their jvp and \
         vjp graphs) compiled under three plan kinds, bit for bit against the interpreter"
    );
}

#[test]
fn random_eager_calls() {
    let n = eager::run_eager(cases() * 4);
    eprintln!("fuzz: {n} eager calls with random, mostly invalid, arguments");
}

#[test]
fn random_companion_calls() {
    let (n, ok) = companions::run_companions(cases());
    eprintln!(
        "fuzz: {n} calls of #[differentiable] functions through all their companions \
         ({ok} valid, derivatives checked; the rest errors checked)"
    );
}

#[test]
fn hostile_graphs() {
    let n = properties::run_hostile_graphs(cases());
    eprintln!("fuzz: {n} graphs with huge dimensions through every transform and the compiler");
}
