//! The camera-reprojection residual of bundle adjustment (the BAL camera
//! model), shared by `benches/reprojection.rs` and `tests/reprojection.rs`:
//! the rlx version, a hand-written version generic over the number type
//! (plain `f64` for the objective, a forward-mode dual number carrying all
//! 15 partial derivatives for the Jacobian), and the gathered test data.
//!
//! One observation has 15 inputs, gathered from the camera, point and
//! weight arrays and the measured feature:
//!
//! | columns | meaning |
//! |---|---|
//! | 0..3 | camera rotation `r` (Rodrigues vector, angle `θ = |r|`) |
//! | 3..6 | camera translation `t` |
//! | 6, 7, 8 | focal length `f`, radial distortion `k1`, `k2` |
//! | 9..12 | point `X` |
//! | 12 | weight `w` |
//! | 13, 14 | measured feature `(u, v)` |
//!
//! and 3 residuals:
//!
//! ```text
//! Y = R(r) X + t,   R(r) X = X cos θ + (r × X) sin θ / θ + r (r·X) (1 − cos θ) / θ²
//!                   (X + r × X when θ² ≤ 1e-12)
//! p = −(Y0, Y1) / Y2,   d = 1 + k1 |p|² + k2 |p|⁴
//! e = (w (f d p0 − u), w (f d p1 − v), 1 − w²)
//! ```
#![allow(dead_code)]

use std::ops::{Add, Div, Mul, Neg, Sub};

use rlx::prelude::*;

/// Inputs per observation.
pub const INPUTS: usize = 15;
/// Residuals per observation.
pub const OUTPUTS: usize = 3;

/// Below this `θ²` the rotation is its first-order form `X + r × X`.
const SMALL_ANGLE: f64 = 1e-12;

/// Column `j` of `x: [N, 15]`, as `[N, 1]`.
fn col(x: &Tensor, j: usize) -> Tensor {
    x.slice_range(j..j + 1, 1)
}

/// The residuals `[N, 3]` of `N` observations `x: [N, 15]` (see the module
/// doc), each row from its own row of `x`.
#[differentiable]
pub fn reprojection(x: &Tensor) -> Tensor {
    let (r0, r1, r2) = (col(x, 0), col(x, 1), col(x, 2));
    let (t0, t1, t2) = (col(x, 3), col(x, 4), col(x, 5));
    let (f, k1, k2) = (col(x, 6), col(x, 7), col(x, 8));
    let (x0, x1, x2) = (col(x, 9), col(x, 10), col(x, 11));
    let (w, u, v) = (col(x, 12), col(x, 13), col(x, 14));
    // Rodrigues: X cos θ + (r × X) a + r (r·X) b.
    let theta2 = &r0 * &r0 + &r1 * &r1 + &r2 * &r2;
    let theta = theta2.sqrt();
    let c = if theta2 > SMALL_ANGLE {
        theta.cos()
    } else {
        1.0
    };
    let a = if theta2 > SMALL_ANGLE {
        theta.sin() / &theta
    } else {
        1.0
    };
    let b = if theta2 > SMALL_ANGLE {
        (1.0 - theta.cos()) / &theta2
    } else {
        0.0
    };
    let rx = (&r0 * &x0 + &r1 * &x1 + &r2 * &x2) * &b;
    let y0 = &x0 * &c + (&r1 * &x2 - &r2 * &x1) * &a + &r0 * &rx + &t0;
    let y1 = &x1 * &c + (&r2 * &x0 - &r0 * &x2) * &a + &r1 * &rx + &t1;
    let y2 = &x2 * &c + (&r0 * &x1 - &r1 * &x0) * &a + &r2 * &rx + &t2;
    // Projection and radial distortion.
    let p0 = -(&y0 / &y2);
    let p1 = -(&y1 / &y2);
    let q = &p0 * &p0 + &p1 * &p1;
    let fd = (1.0 + &k1 * &q + &k2 * &q * &q) * &f;
    let e0 = (&fd * &p0 - &u) * &w;
    let e1 = (&fd * &p1 - &v) * &w;
    let e2 = 1.0 - &w * &w;
    Tensor::concat(&[&e0, &e1, &e2], 1)
}

/// The numbers the hand-written residual is written over.
pub trait Number:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    fn constant(v: f64) -> Self;
    fn value(self) -> f64;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
}

impl Number for f64 {
    fn constant(v: f64) -> f64 {
        v
    }
    fn value(self) -> f64 {
        self
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn sin(self) -> f64 {
        f64::sin(self)
    }
    fn cos(self) -> f64 {
        f64::cos(self)
    }
}

/// A forward-mode dual number: a value and its 15 partial derivatives.
#[derive(Clone, Copy, Debug)]
pub struct Dual {
    pub v: f64,
    pub d: [f64; INPUTS],
}

impl Dual {
    /// Input `k` with value `v` (its own derivative 1).
    pub fn seed(v: f64, k: usize) -> Dual {
        let mut d = [0.0; INPUTS];
        d[k] = 1.0;
        Dual { v, d }
    }

    /// `f(v)` with derivative `df · d` (the chain rule).
    fn chain(self, v: f64, df: f64) -> Dual {
        Dual {
            v,
            d: self.d.map(|x| df * x),
        }
    }
}

impl Add for Dual {
    type Output = Dual;
    fn add(self, o: Dual) -> Dual {
        Dual {
            v: self.v + o.v,
            d: std::array::from_fn(|k| self.d[k] + o.d[k]),
        }
    }
}

impl Sub for Dual {
    type Output = Dual;
    fn sub(self, o: Dual) -> Dual {
        Dual {
            v: self.v - o.v,
            d: std::array::from_fn(|k| self.d[k] - o.d[k]),
        }
    }
}

// The product and quotient rules use `+`, `-` and `*` inside `Mul`/`Div`.
#[allow(clippy::suspicious_arithmetic_impl)]
impl Mul for Dual {
    type Output = Dual;
    fn mul(self, o: Dual) -> Dual {
        Dual {
            v: self.v * o.v,
            d: std::array::from_fn(|k| self.d[k] * o.v + self.v * o.d[k]),
        }
    }
}

#[allow(clippy::suspicious_arithmetic_impl)]
impl Div for Dual {
    type Output = Dual;
    fn div(self, o: Dual) -> Dual {
        let q = self.v / o.v;
        Dual {
            v: q,
            d: std::array::from_fn(|k| (self.d[k] - q * o.d[k]) / o.v),
        }
    }
}

impl Neg for Dual {
    type Output = Dual;
    fn neg(self) -> Dual {
        self.chain(-self.v, -1.0)
    }
}

impl Number for Dual {
    fn constant(v: f64) -> Dual {
        Dual {
            v,
            d: [0.0; INPUTS],
        }
    }
    fn value(self) -> f64 {
        self.v
    }
    fn sqrt(self) -> Dual {
        let s = self.v.sqrt();
        self.chain(s, 0.5 / s)
    }
    fn sin(self) -> Dual {
        self.chain(self.v.sin(), self.v.cos())
    }
    fn cos(self) -> Dual {
        self.chain(self.v.cos(), -self.v.sin())
    }
}

/// The residuals of one observation, by hand (the same formulas as
/// [`reprojection`]).
pub fn residual<T: Number>(x: &[T; INPUTS]) -> [T; OUTPUTS] {
    let one = T::constant(1.0);
    let [r0, r1, r2, t0, t1, t2, f, k1, k2, x0, x1, x2, w, u, v] = *x;
    let theta2 = r0 * r0 + r1 * r1 + r2 * r2;
    let (c, a, b) = if theta2.value() > SMALL_ANGLE {
        let theta = theta2.sqrt();
        let c = theta.cos();
        (c, theta.sin() / theta, (one - c) / theta2)
    } else {
        (one, one, T::constant(0.0))
    };
    let rx = (r0 * x0 + r1 * x1 + r2 * x2) * b;
    let y0 = x0 * c + (r1 * x2 - r2 * x1) * a + r0 * rx + t0;
    let y1 = x1 * c + (r2 * x0 - r0 * x2) * a + r1 * rx + t1;
    let y2 = x2 * c + (r0 * x1 - r1 * x0) * a + r2 * rx + t2;
    let p0 = -(y0 / y2);
    let p1 = -(y1 / y2);
    let q = p0 * p0 + p1 * p1;
    let fd = (one + k1 * q + k2 * q * q) * f;
    [(fd * p0 - u) * w, (fd * p1 - v) * w, one - w * w]
}

/// The objective by hand: `out[3 i..3 i + 3]` are the residuals of row `i`.
pub fn residuals_by_hand(x: &[f64], out: &mut [f64]) {
    for (xi, o) in x.chunks_exact(INPUTS).zip(out.chunks_exact_mut(OUTPUTS)) {
        let xi: &[f64; INPUTS] = xi.try_into().expect("15 inputs");
        o.copy_from_slice(&residual(xi));
    }
}

/// The per-observation Jacobians `[N, 3, 15]` by hand-written forward mode
/// (one dual evaluation per observation).
pub fn jacobians_by_hand(x: &[f64], jac: &mut [f64]) {
    for (xi, j) in x
        .chunks_exact(INPUTS)
        .zip(jac.chunks_exact_mut(OUTPUTS * INPUTS))
    {
        let duals: [Dual; INPUTS] = std::array::from_fn(|k| Dual::seed(xi[k], k));
        for (row, e) in j.chunks_exact_mut(INPUTS).zip(residual(&duals)) {
            row.copy_from_slice(&e.d);
        }
    }
}

/// `n` deterministic values in `[lo, hi)`, well spread.
fn spread(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    const P: u64 = 1_000_003;
    (0..n as u64)
        .map(|i| lo + (hi - lo) * ((i * 7919 + seed * 104_729) % P) as f64 / P as f64)
        .collect()
}

/// A problem of `n` observations, gathered into rows of 15 inputs: 16
/// cameras and `n / 4 + 1` points, observation `i` seeing point
/// `i mod points` from camera `(7 i) mod 16`. Rotations are 0.05–0.4 rad
/// and the points lie in front of the cameras (`Y2 < 0`).
pub fn observations(n: usize) -> Vec<f64> {
    const CAMERAS: usize = 16;
    let points = n / 4 + 1;
    let rot = spread(3 * CAMERAS, 1, -0.23, 0.23);
    let trans = spread(3 * CAMERAS, 2, -0.5, 0.5);
    let intr = spread(3 * CAMERAS, 3, 0.0, 1.0);
    let pts = spread(3 * points, 4, -1.0, 1.0);
    let weights = spread(n, 5, 0.5, 1.5);
    let feats = spread(2 * n, 6, -300.0, 300.0);
    let mut x = Vec::with_capacity(INPUTS * n);
    for i in 0..n {
        let (c, p) = ((7 * i) % CAMERAS, i % points);
        x.extend_from_slice(&rot[3 * c..3 * c + 3]);
        x.extend_from_slice(&[trans[3 * c], trans[3 * c + 1], trans[3 * c + 2] - 4.0]);
        let k = &intr[3 * c..3 * c + 3];
        x.extend_from_slice(&[400.0 + 200.0 * k[0], 0.1 * k[1] - 0.05, 0.02 * k[2] - 0.01]);
        x.extend_from_slice(&[pts[3 * p], pts[3 * p + 1], pts[3 * p + 2] - 1.0]);
        x.push(weights[i]);
        x.extend_from_slice(&feats[2 * i..2 * i + 2]);
    }
    x
}
