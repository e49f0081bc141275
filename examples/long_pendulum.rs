//! 64 pendula integrated for 10⁵ steps, differentiated through the whole
//! trajectory in bounded memory.
//!
//! The time loop is a `for` loop marked `#[scan]` (its carries `theta` and
//! `omega` are the variables it assigns), so it is traced once, into one
//! `rlx::scan` (the first call costs the same for 10 or 10⁵ steps), and
//! reverse mode runs it backwards with binomial checkpointing: ⌈√T⌉ = 317
//! stored states instead of 10⁵. The gradient of the final mean angle with respect to every initial
//! angle and the pendulum length is checked against central differences.
//!
//! Run with `cargo run --release --example long_pendulum` (or `-- --ci` for 10⁴ steps).

use std::time::Instant;

use rlx::prelude::*;

const G: f64 = 9.81;
const DT: f64 = 1e-3;

/// Mean final angle of pendula started at rest at `theta0`, of length
/// `length`, after `steps` steps of symplectic Euler:
/// `ω ← ω − dt (g / L) sin θ`, `θ ← θ + dt ω`.
#[differentiable]
fn final_angle(theta0: &Tensor, length: f64, steps: usize) -> f64 {
    let mut theta = theta0.clone();
    let mut omega = theta0 * 0.0;
    let rate = length.recip() * (G * DT);
    #[scan]
    for _ in 0..steps {
        omega = &omega - theta.sin() * &rate;
        theta = &theta + &omega * DT;
    }
    theta.mean_all()
}

fn main() -> rlx::Result<()> {
    let ci = std::env::args().any(|a| a == "--ci");
    let steps = if ci { 10_000 } else { 100_000 };
    let n = 64;
    let theta0: Vec<f64> = (0..n).map(|i| 0.1 + 2.9 * i as f64 / n as f64).collect();
    let t0 = Tensor::from_slice(&theta0, [n]);
    let length = 1.3;

    let start = Instant::now();
    let (mean, (d_theta0, d_length)) = value_and_grad_final_angle(&t0, length, steps)?;
    let first = start.elapsed();
    let start = Instant::now();
    value_and_grad_final_angle(&t0, length, steps)?;
    let warm = start.elapsed();
    println!(
        "{n} pendula, {steps} steps of {DT} s: mean final angle {mean:.6}, d/dlength {d_length:.6}"
    );
    println!(
        "value_and_grad: first call {first:.2?} (trace + differentiate + compile + run), warm {warm:.2?} ({:.0} ns per step)",
        warm.as_nanos() as f64 / steps as f64
    );
    // The default budget: every state if the T states fit in 16 MiB
    // (10⁴ steps), else ⌈√T⌉ (10⁵ steps: 317).
    let state_bytes = 2 * n * 8;
    let budget = rlx::core::loops::default_budget(steps, state_bytes);
    if budget < steps {
        println!(
            "reverse mode stored at most {budget} states ({} KiB) instead of {steps} ({} KiB)",
            budget * state_bytes / 1024,
            steps * state_bytes / 1024
        );
    } else {
        println!(
            "reverse mode stored all {steps} states ({} KiB: under the 16 MiB the default stores whole)",
            steps * state_bytes / 1024
        );
    }

    // Central differences in a few coordinates.
    let d = d_theta0.to_vec::<f64>()?;
    let h = 1e-6;
    for i in [0, n / 2, n - 1] {
        let at = |e: f64| {
            let mut v = theta0.clone();
            v[i] += e;
            final_angle(&Tensor::from_slice(&v, [n]), length, steps)
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        println!("d/dtheta0[{i}]: {:.9} (central differences {fd:.9})", d[i]);
        assert!(
            (fd - d[i]).abs() < 1e-6 * (1.0 + fd.abs()),
            "{fd} vs {}",
            d[i]
        );
    }
    let fd =
        (final_angle(&t0, length + h, steps) - final_angle(&t0, length - h, steps)) / (2.0 * h);
    println!("d/dlength: {d_length:.9} (central differences {fd:.9})");
    assert!((fd - d_length).abs() < 1e-6 * (1.0 + fd.abs()));
    Ok(())
}
