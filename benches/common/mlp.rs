//! The MLP of `benches/autodiff.rs` (784-256-256-10, batch 64, `f32`,
//! `tanh`, softmax cross-entropy) as a graph and written by hand with
//! `matrixmultiply::sgemm`, shared with
//! `rlx-runtime/tests/compile/epilogues.rs` (included by `#[path]`), which
//! pins its plan.

use rlx_runtime::{DType, Graph};

pub const B: usize = 64;
pub const D_IN: usize = 784;
pub const H: usize = 256;
pub const D_OUT: usize = 10;

/// The MLP's loss as a graph: inputs x, y (one-hot), w1, b1, w2, b2, w3, b3.
pub fn mlp_graph() -> Graph {
    let mut g = Graph::new();
    let f = DType::F32;
    let x = g.input("x", [B, D_IN], f);
    let y = g.input("y", [B, D_OUT], f);
    let w1 = g.input("w1", [D_IN, H], f);
    let b1 = g.input("b1", [H], f);
    let w2 = g.input("w2", [H, H], f);
    let b2 = g.input("b2", [H], f);
    let w3 = g.input("w3", [H, D_OUT], f);
    let b3 = g.input("b3", [D_OUT], f);
    let dense = |g: &mut Graph, a, w, b| {
        let m = g.matmul(a, w).unwrap();
        g.add(m, b).unwrap()
    };
    let z1 = dense(&mut g, x, w1, b1);
    let h1 = g.tanh(z1).unwrap();
    let z2 = dense(&mut g, h1, w2, b2);
    let h2 = g.tanh(z2).unwrap();
    let logits = dense(&mut g, h2, w3, b3);
    let ls = g.log_softmax(logits, 1).unwrap();
    let picked = g.mul(y, ls).unwrap();
    let total = g.sum_all(picked).unwrap();
    let scale = g.scalar(-1.0 / B as f64, f);
    let loss = g.mul(total, scale).unwrap();
    g.set_outputs(vec![loss]);
    g
}

/// Deterministic pseudo-random values in [-scale, scale).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `c = a b` for row-major `a: [m, k]` (or `a^T` stored `[k, m]` when
/// `ta`), `b: [k, n]` (or `b^T` stored `[n, k]` when `tb`).
#[allow(clippy::too_many_arguments)]
fn gemm(m: usize, k: usize, n: usize, a: &[f32], ta: bool, b: &[f32], tb: bool, c: &mut [f32]) {
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // SAFETY: the strides describe row-major buffers of the asserted sizes,
    // and `c` does not alias `a` or `b` (distinct borrows).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        )
    }
}

/// Scratch and gradient buffers of the hand-written MLP.
pub struct HandMlp {
    h1: Vec<f32>,
    h2: Vec<f32>,
    logits: Vec<f32>,
    dz1: Vec<f32>,
    dz2: Vec<f32>,
    pub grads: [Vec<f32>; 6],
}

impl HandMlp {
    pub fn new() -> HandMlp {
        HandMlp {
            h1: vec![0.0; B * H],
            h2: vec![0.0; B * H],
            logits: vec![0.0; B * D_OUT],
            dz1: vec![0.0; B * H],
            dz2: vec![0.0; B * H],
            grads: [
                vec![0.0; D_IN * H],
                vec![0.0; H],
                vec![0.0; H * H],
                vec![0.0; H],
                vec![0.0; H * D_OUT],
                vec![0.0; D_OUT],
            ],
        }
    }

    /// Forward and backward; returns the loss and fills `grads`.
    pub fn run(&mut self, x: &[f32], y: &[f32], p: &[Vec<f32>]) -> f32 {
        let (w1, b1, w2, b2, w3, b3) = (&p[0], &p[1], &p[2], &p[3], &p[4], &p[5]);
        let bias_tanh = |z: &mut [f32], b: &[f32]| {
            for row in z.chunks_mut(b.len()) {
                for (v, bb) in row.iter_mut().zip(b) {
                    *v = (*v + bb).tanh();
                }
            }
        };
        gemm(B, D_IN, H, x, false, w1, false, &mut self.h1);
        bias_tanh(&mut self.h1, b1);
        gemm(B, H, H, &self.h1, false, w2, false, &mut self.h2);
        bias_tanh(&mut self.h2, b2);
        gemm(B, H, D_OUT, &self.h2, false, w3, false, &mut self.logits);
        // Softmax cross-entropy; `logits` becomes d loss / d logits.
        let mut loss = 0.0f32;
        for (row, yr) in self.logits.chunks_mut(D_OUT).zip(y.chunks(D_OUT)) {
            for (v, bb) in row.iter_mut().zip(b3.iter()) {
                *v += bb;
            }
            let max = row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
            let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
            let lse = max + sum.ln();
            for (v, t) in row.iter_mut().zip(yr) {
                loss -= t * (*v - lse);
                *v = ((*v - lse).exp() - t) / B as f32;
            }
        }
        let [g1, gb1, g2, gb2, g3, gb3] = &mut self.grads;
        let col_sums = |d: &[f32], out: &mut [f32]| {
            out.iter_mut().for_each(|o| *o = 0.0);
            for row in d.chunks(out.len()) {
                for (o, v) in out.iter_mut().zip(row) {
                    *o += v;
                }
            }
        };
        gemm(H, B, D_OUT, &self.h2, true, &self.logits, false, g3);
        col_sums(&self.logits, gb3);
        gemm(B, D_OUT, H, &self.logits, false, w3, true, &mut self.dz2);
        for (d, h) in self.dz2.iter_mut().zip(&self.h2) {
            *d *= 1.0 - h * h;
        }
        gemm(H, B, H, &self.h1, true, &self.dz2, false, g2);
        col_sums(&self.dz2, gb2);
        gemm(B, H, H, &self.dz2, false, w2, true, &mut self.dz1);
        for (d, h) in self.dz1.iter_mut().zip(&self.h1) {
            *d *= 1.0 - h * h;
        }
        gemm(D_IN, B, H, x, true, &self.dz1, false, g1);
        col_sums(&self.dz1, gb1);
        loss / B as f32
    }
}
