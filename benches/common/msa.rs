//! The minimal-surface objective (MINPACK-2's MSA) on an `nx × ny`
//! interior grid of the unit square: the area of the piecewise-linear
//! surface over the grid's triangles, as a `#[differentiable]` sum of
//! element terms, and its Hessian assembled by hand.
//!
//! Each cell `(i, j)` of the `(nx + 2) × (ny + 2)` grid (boundary
//! included) gives a lower triangle `(i, j), (i + 1, j), (i, j + 1)` and
//! an upper one `(i + 1, j + 1), (i, j + 1), (i + 1, j)`; a triangle with
//! vertices `a` (the right angle), `b` (along x) and `c` (along y) has
//! area `hx hy / 2 · √(1 + ((b − a)/hx)² + ((c − a)/hy)²)`. The boundary
//! holds `b(s, t) = s² − t²` (MINPACK-2 uses Enneper's surface; any
//! smooth boundary gives the same structure and cost).

use rlx::prelude::*;

/// The grid's index tables: for each triangle, its vertices `a`, `b`, `c`
/// as positions in `[v, boundary]` (the unknowns first), and the boundary
/// values.
pub struct Msa {
    pub nx: usize,
    pub ny: usize,
    pub hx: f64,
    pub hy: f64,
    pub a: Vec<i64>,
    pub b: Vec<i64>,
    pub c: Vec<i64>,
    pub boundary: Vec<f64>,
}

impl Msa {
    pub fn new(nx: usize, ny: usize) -> Msa {
        let (hx, hy) = (1.0 / (nx + 1) as f64, 1.0 / (ny + 1) as f64);
        let n = nx * ny;
        let mut boundary = Vec::new();
        // Position of grid point (i, j) in [v, boundary].
        let mut at = vec![0i64; (nx + 2) * (ny + 2)];
        for i in 0..nx + 2 {
            for j in 0..ny + 2 {
                at[i * (ny + 2) + j] = if (1..=nx).contains(&i) && (1..=ny).contains(&j) {
                    ((i - 1) * ny + (j - 1)) as i64
                } else {
                    let (s, t) = (i as f64 * hx, j as f64 * hy);
                    boundary.push(s * s - t * t);
                    (n + boundary.len() - 1) as i64
                };
            }
        }
        let p = |i: usize, j: usize| at[i * (ny + 2) + j];
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..=nx {
            for j in 0..=ny {
                a.extend([p(i, j), p(i + 1, j + 1)]);
                b.extend([p(i + 1, j), p(i, j + 1)]);
                c.extend([p(i, j + 1), p(i + 1, j)]);
            }
        }
        Msa {
            nx,
            ny,
            hx,
            hy,
            a,
            b,
            c,
            boundary,
        }
    }

    /// Each triangle's vertex values `(a, b, c)` (`[triangles]` each) from
    /// the unknowns `v` and the boundary, by gathers with constant indices.
    pub fn vertices(&self, v: &Tensor) -> (Tensor, Tensor, Tensor) {
        let nb = self.boundary.len();
        let z = Tensor::concat(&[v.clone(), Tensor::from_slice(&self.boundary, [nb])], 0);
        let e = self.a.len();
        let pick = |idx: &[i64]| z.gather(&Tensor::from_slice(idx, [e]), 0);
        (pick(&self.a), pick(&self.b), pick(&self.c))
    }

    /// A starting surface: the boundary's function inside, perturbed.
    pub fn start(&self) -> Vec<f64> {
        (0..self.nx * self.ny)
            .map(|k| {
                let (i, j) = (k / self.ny + 1, k % self.ny + 1);
                let (s, t) = (i as f64 * self.hx, j as f64 * self.hy);
                s * s - t * t + 0.1 * (7.0 * s).sin() * (5.0 * t).cos()
            })
            .collect()
    }
}

/// The surface's area over the grid of `nx × ny` unknowns `v`.
#[differentiable(wrt(v))]
pub fn msa_area(v: &Tensor, nx: usize, ny: usize) -> f64 {
    let m = Msa::new(nx, ny);
    let (a, b, c) = m.vertices(v);
    let p = (&b - &a) / m.hx;
    let q = (&c - &a) / m.hy;
    let s = (p.square() + q.square() + 1.0).sqrt();
    s.sum_all() * (m.hx * m.hy / 2.0)
}

/// Each triangle's 9 slots in the CSC values of the Hessian's pattern
/// (`-1` where a vertex is on the boundary), found once.
pub fn msa_slots(m: &Msa, pattern: &rlx::sparse::Pattern) -> Vec<[i64; 9]> {
    let n = (m.nx * m.ny) as i64;
    (0..m.a.len())
        .map(|t| {
            let v = [m.a[t], m.b[t], m.c[t]];
            let mut s = [-1i64; 9];
            for i in 0..3 {
                for j in 0..3 {
                    if v[i] < n && v[j] < n {
                        s[i * 3 + j] = pattern
                            .position(v[i] as usize, v[j] as usize)
                            .expect("a triangle's entry in the pattern")
                            as i64;
                    }
                }
            }
            s
        })
        .collect()
}

/// The Hessian's CSC values by hand: one pass over the triangles, each
/// triangle's 3 × 3 Hessian from the closed form of `√(1 + p² + q²)`
/// (`∂²/∂(p, q)² = (I − g gᵀ) / s` with `g = (p, q) / s`) through the
/// constant map `(a, b, c) ↦ (p, q)`, added at its precomputed slots. No
/// allocation, no search: the fastest straightforward form we found (a
/// per-vertex gather form recomputes each triangle three times).
pub fn msa_hessian_hand(m: &Msa, slots: &[[i64; 9]], v: &[f64], values: &mut [f64]) {
    values.fill(0.0);
    let n = v.len();
    let w = m.hx * m.hy / 2.0;
    let gp = [-1.0 / m.hx, 1.0 / m.hx, 0.0];
    let gq = [-1.0 / m.hy, 0.0, 1.0 / m.hy];
    let at = |k: i64| {
        let k = k as usize;
        if k < n {
            v[k]
        } else {
            m.boundary[k - n]
        }
    };
    for (t, s) in slots.iter().enumerate() {
        let a = at(m.a[t]);
        let p = (at(m.b[t]) - a) / m.hx;
        let q = (at(m.c[t]) - a) / m.hy;
        let r = 1.0 / (1.0 + p * p + q * q).sqrt();
        let r3 = r * r * r;
        let (hpp, hpq, hqq) = (w * (r - p * p * r3), -w * p * q * r3, w * (r - q * q * r3));
        for i in 0..3 {
            for j in 0..3 {
                let k = s[i * 3 + j];
                if k >= 0 {
                    values[k as usize] += hpp * gp[i] * gp[j]
                        + hpq * (gp[i] * gq[j] + gq[i] * gp[j])
                        + hqq * gq[i] * gq[j];
                }
            }
        }
    }
}
