//! A double pendulum from its Hamiltonian alone.
//!
//! The equations of motion `dq/dt = dH/dp`, `dp/dt = -dH/dq` come from
//! `grad_hamiltonian`; the mass matrix's inverse is the Hessian of the
//! kinetic energy in `p`, from `hessian_kinetic`. The state is integrated
//! with classical Runge–Kutta; the energy drift is printed and checked.
//!
//! Run with `cargo run --release --example pendulum` (or `-- --ci`).

use rlx::prelude::*;

const M1: f64 = 1.0;
const M2: f64 = 1.0;
const L1: f64 = 1.0;
const L2: f64 = 1.0;
const G: f64 = 9.81;

/// Kinetic energy `p^T M(q)^{-1} p / 2` with angles `q = [θ1, θ2]` and
/// conjugate momenta `p`, as a 0-d tensor. (It returns `Tensor`, not `f64`,
/// because `hamiltonian` calls it while being traced, where no `f64`
/// value exists yet.)
#[differentiable(wrt(p))]
pub fn kinetic(q: &Tensor, p: &Tensor) -> Tensor {
    let c = (q.slice(0, 0, 1) - q.slice(0, 1, 1)).cos().sum_all();
    let (p1, p2) = (p.slice(0, 0, 1).sum_all(), p.slice(0, 1, 1).sum_all());
    // M = [[a, b], [b, d]]
    let a = (M1 + M2) * L1 * L1;
    let d = M2 * L2 * L2;
    let b = &c * (M2 * L1 * L2);
    let det = b.square() * -1.0 + a * d;
    (p1.square() * d - &b * &p1 * &p2 * 2.0 + p2.square() * a) / det * 0.5
}

/// Total energy: kinetic plus gravitational potential.
#[differentiable]
pub fn hamiltonian(q: &Tensor, p: &Tensor) -> f64 {
    let potential = q.slice(0, 0, 1).cos().sum_all() * (-(M1 + M2) * G * L1)
        - q.slice(0, 1, 1).cos().sum_all() * (M2 * G * L2);
    kinetic(q, p) + potential
}

type State = ([f64; 2], [f64; 2]);

fn derivative(q: [f64; 2], p: [f64; 2]) -> rlx::Result<State> {
    let (dh_dq, dh_dp) =
        grad_hamiltonian(&Tensor::from_slice(&q, [2]), &Tensor::from_slice(&p, [2]))?;
    let (dq, dp) = (dh_dq.to_vec::<f64>()?, dh_dp.to_vec::<f64>()?);
    Ok(([dp[0], dp[1]], [-dq[0], -dq[1]]))
}

fn axpy(x: [f64; 2], h: f64, d: [f64; 2]) -> [f64; 2] {
    [x[0] + h * d[0], x[1] + h * d[1]]
}

fn rk4(q: [f64; 2], p: [f64; 2], h: f64) -> rlx::Result<State> {
    let (k1q, k1p) = derivative(q, p)?;
    let (k2q, k2p) = derivative(axpy(q, h / 2.0, k1q), axpy(p, h / 2.0, k1p))?;
    let (k3q, k3p) = derivative(axpy(q, h / 2.0, k2q), axpy(p, h / 2.0, k2p))?;
    let (k4q, k4p) = derivative(axpy(q, h, k3q), axpy(p, h, k3p))?;
    let comb = |x: [f64; 2], a: [f64; 2], b: [f64; 2], c: [f64; 2], d: [f64; 2]| {
        [
            x[0] + h / 6.0 * (a[0] + 2.0 * b[0] + 2.0 * c[0] + d[0]),
            x[1] + h / 6.0 * (a[1] + 2.0 * b[1] + 2.0 * c[1] + d[1]),
        ]
    };
    Ok((comb(q, k1q, k2q, k3q, k4q), comb(p, k1p, k2p, k3p, k4p)))
}

fn main() -> rlx::Result<()> {
    let ci = std::env::args().any(|a| a == "--ci");
    let (steps, h) = if ci { (2_000, 1e-3) } else { (20_000, 1e-3) };
    let (mut q, mut p): ([f64; 2], [f64; 2]) = ([2.0, 1.0], [0.0, 0.0]);

    // The inverse mass matrix is the Hessian of the kinetic energy in p.
    let qt = Tensor::from_slice(&q, [2]);
    let minv = hessian_kinetic(&qt, &Tensor::from_slice(&p, [2]))?.to_vec::<f64>()?;
    let c = (q[0] - q[1]).cos();
    let (a, b, d) = ((M1 + M2) * L1 * L1, M2 * L1 * L2 * c, M2 * L2 * L2);
    let det = a * d - b * b;
    let expect = [d / det, -b / det, -b / det, a / det];
    println!("M(q)^-1 from hessian_kinetic: {minv:?}");
    for (x, y) in minv.iter().zip(expect) {
        assert!((x - y).abs() < 1e-12, "Hessian {x} vs closed form {y}");
    }

    let energy = |q: [f64; 2], p: [f64; 2]| {
        hamiltonian(&Tensor::from_slice(&q, [2]), &Tensor::from_slice(&p, [2]))
    };
    let e0 = energy(q, p);
    println!("{:>8}  {:>10}  {:>10}  {:>12}", "t", "θ1", "θ2", "E - E0");
    let mut max_drift: f64 = 0.0;
    for step in 1..=steps {
        (q, p) = rk4(q, p, h)?;
        let drift = energy(q, p) - e0;
        max_drift = max_drift.max(drift.abs());
        if step % (steps / 10) == 0 {
            println!(
                "{:>8.3}  {:>10.5}  {:>10.5}  {:>12.3e}",
                step as f64 * h,
                q[0],
                q[1],
                drift
            );
        }
    }
    println!("max |E - E0| = {max_drift:.3e} (E0 = {e0:.6})");
    assert!(
        max_drift < 1e-6 * e0.abs().max(1.0),
        "energy drift too large"
    );
    println!("ok");
    Ok(())
}
