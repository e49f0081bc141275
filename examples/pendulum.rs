//! A double pendulum from its Hamiltonian alone.
//!
//! The equations of motion `dq/dt = dH/dp`, `dp/dt = -dH/dq` come from
//! `grad_hamiltonian`; the mass matrix's inverse is the Hessian of the
//! kinetic energy in `p`, from `hessian_kinetic`. The state is integrated
//! with classical Runge–Kutta; the energy drift is printed and checked, and
//! the trajectories and the drift are plotted to `target/plots/pendulum.svg`.
//!
//! Run with `cargo run --release --example pendulum` (or `-- --ci`).

use std::error::Error;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
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
    let c = (q.slice_range(0..1, 0) - q.slice_range(1..2, 0))
        .cos()
        .sum_all();
    let (p1, p2) = (
        p.slice_range(0..1, 0).sum_all(),
        p.slice_range(1..2, 0).sum_all(),
    );
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
    let potential = q.slice_range(0..1, 0).cos().sum_all() * (-(M1 + M2) * G * L1)
        - q.slice_range(1..2, 0).cos().sum_all() * (M2 * G * L2);
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

/// One recorded point of the trajectory: time, angles, energy drift.
struct Sample {
    t: f64,
    q: [f64; 2],
    drift: f64,
}

/// The bobs' positions in the plane (pivot at the origin, `y` up).
fn bobs(q: [f64; 2]) -> [(f64, f64); 2] {
    let b1 = (L1 * q[0].sin(), -L1 * q[0].cos());
    [b1, (b1.0 + L2 * q[1].sin(), b1.1 - L2 * q[1].cos())]
}

/// Plots the bobs' paths, the angles over time and the energy drift.
fn plot(samples: &[Sample]) -> Result<PathBuf, Box<dyn Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/plots");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("pendulum.svg");
    draw(&path, samples)?;
    Ok(path)
}

fn draw(path: &Path, samples: &[Sample]) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (1200, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "Double pendulum from its Hamiltonian (RK4, h = 1 ms)",
        ("sans-serif", 24),
    )?;
    let (left, right) = root.split_horizontally(560);
    let (top, bottom) = right.split_vertically(280);
    let t_end = samples.last().map_or(1.0, |s| s.t);
    let legend = |c: &RGBColor| {
        let c = *c;
        move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(2))
    };

    let reach = L1 + L2;
    let mut paths = ChartBuilder::on(&left)
        .caption("paths of the bobs", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-reach..reach, -reach..reach)?;
    paths
        .configure_mesh()
        .x_desc("x (m)")
        .y_desc("y (m)")
        .draw()?;
    for (bob, colour) in [(0, BLUE), (1, RED)] {
        paths
            .draw_series(LineSeries::new(
                samples.iter().map(|s| bobs(s.q)[bob]),
                colour.mix(0.7).stroke_width(1),
            ))?
            .label(format!("bob {}", bob + 1))
            .legend(legend(&colour));
    }
    paths
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;

    let angles = samples.iter().flat_map(|s| s.q);
    let (lo, hi) = angles.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let mut theta = ChartBuilder::on(&top)
        .caption("angles", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_end, lo..hi)?;
    theta
        .configure_mesh()
        .x_desc("t (s)")
        .y_desc("angle (rad)")
        .draw()?;
    for (k, colour) in [(0, BLUE), (1, RED)] {
        theta
            .draw_series(LineSeries::new(
                samples.iter().map(|s| (s.t, s.q[k])),
                colour.stroke_width(2),
            ))?
            .label(format!("θ{}", k + 1))
            .legend(legend(&colour));
    }
    theta
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;

    let bound = samples
        .iter()
        .fold(f64::MIN_POSITIVE, |m, s| m.max(s.drift.abs()));
    let mut drift = ChartBuilder::on(&bottom)
        .caption("energy drift E(t) − E(0)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_end, -bound * 1.1..bound * 1.1)?;
    drift
        .configure_mesh()
        .x_desc("t (s)")
        .y_desc("E − E0 (J)")
        .y_label_formatter(&|y| format!("{y:.1e}"))
        .draw()?;
    drift.draw_series(LineSeries::new(
        samples.iter().map(|s| (s.t, s.drift)),
        BLACK.stroke_width(1),
    ))?;
    root.present()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
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
    let mut samples = vec![Sample {
        t: 0.0,
        q,
        drift: 0.0,
    }];
    for step in 1..=steps {
        (q, p) = rk4(q, p, h)?;
        let drift = energy(q, p) - e0;
        max_drift = max_drift.max(drift.abs());
        if step % 5 == 0 {
            samples.push(Sample {
                t: step as f64 * h,
                q,
                drift,
            });
        }
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
    let path = plot(&samples)?;
    println!(
        "trajectories and energy drift plotted to {}",
        path.display()
    );
    println!("ok");
    Ok(())
}
