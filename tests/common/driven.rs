//! Shared by `tests/loops.rs` and `tests/loops_marked.rs`: the inputs of
//! the driven-springs loop (`T` steps of three springs), one direction
//! through them for central differences, and the comparison helpers.

#![allow(dead_code)]

use rlx::Tensor;

/// The time step.
pub const H: f64 = 0.05;
/// The number of steps.
pub const T: usize = 6;

pub fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}

pub fn v(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}

/// Values agree within 1e-12 of their size.
pub fn close(what: &str, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{what}");
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-12 * scale, "{what}[{i}]: {x} vs {y}");
    }
}

/// `(q0, forces, k)`.
pub fn inputs() -> (Tensor, Tensor, f64) {
    let q0 = t(&[0.3, -0.7, 1.1]);
    let f: Vec<f64> = (0..T * 3)
        .map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.3)
        .collect();
    (q0, Tensor::from_slice(&f, [T, 3]), 1.7)
}

/// A fixed direction `(dq, dforces, dk)` through the inputs.
pub struct Direction {
    pub dq: Tensor,
    pub df: Tensor,
    pub dk: f64,
}

pub fn direction() -> Direction {
    let df: Vec<f64> = (0..T * 3)
        .map(|i| ((i * 5 % 7) as f64 - 3.0) * 0.1)
        .collect();
    Direction {
        dq: t(&[0.3, -0.1, 0.7]),
        df: Tensor::from_slice(&df, [T, 3]),
        dk: -0.4,
    }
}

impl Direction {
    /// The inputs moved by `e` along the direction.
    pub fn at(&self, e: f64) -> (Tensor, Tensor, f64) {
        let (q0, f, k) = inputs();
        let shift = |x: &Tensor, d: &Tensor| {
            let moved: Vec<f64> = v(x).iter().zip(v(d)).map(|(a, d)| a + e * d).collect();
            Tensor::from_vec(moved, x.shape().clone())
        };
        (shift(&q0, &self.dq), shift(&f, &self.df), k + e * self.dk)
    }

    /// `⟨g, d⟩` for a gradient `g = (gq, gforces, gk)`.
    pub fn dot(&self, g: &(Tensor, Tensor, f64)) -> f64 {
        let dot = |a: &Tensor, b: &Tensor| v(a).iter().zip(v(b)).map(|(x, y)| x * y).sum::<f64>();
        dot(&g.0, &self.dq) + dot(&g.1, &self.df) + g.2 * self.dk
    }

    /// Central differences of `f` along the direction, step `1e-5`.
    pub fn central(&self, f: impl Fn(&Tensor, &Tensor, f64) -> f64) -> f64 {
        let e = 1e-5;
        let (qp, fp, kp) = self.at(e);
        let (qm, fm, km) = self.at(-e);
        (f(&qp, &fp, kp) - f(&qm, &fm, km)) / (2.0 * e)
    }

    /// Checks a gradient `grad` and a JVP `jvp` (along the direction), both
    /// at the inputs, against central differences of `value` and each other.
    pub fn check_first_order(
        &self,
        value: impl Fn(&Tensor, &Tensor, f64) -> f64,
        grad: (Tensor, Tensor, f64),
        jvp: f64,
    ) {
        let fd = self.central(value);
        let dot = self.dot(&grad);
        assert!((fd - dot).abs() < 1e-7 * fd.abs().max(1.0), "{fd} vs {dot}");
        // forward mode agrees with reverse mode
        assert!(
            (jvp - dot).abs() < 1e-12 * dot.abs().max(1.0),
            "{jvp} vs {dot}"
        );
    }
}
