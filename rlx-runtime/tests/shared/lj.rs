//! The all-pairs Lennard-Jones energy in the broadcast form (the graph of
//! `benches/medium.rs`'s `lj_energy`), shared by `tests/compile` and
//! `tests/no_alloc.rs`, which include this file by path.

use rlx_runtime::{DType, Graph, Storage, Tensor};

/// ½ Σ_{i≠j} 4 (r⁻¹² − r⁻⁶) over `p: [n, 3]`: `p.reshape([n, 1, 3]) -
/// p.reshape([1, n, 3])`, squares summed over the last axis, plus `eye`
/// (the identity, which keeps the diagonal finite), `powi(-3)`.
pub fn lj(n: usize) -> Graph {
    let mut g = Graph::new();
    let p = g.input("p", [n, 3], DType::F64);
    let eye = g.input("eye", [n, n], DType::F64);
    let a = g.reshape(p, [n, 1, 3]).unwrap();
    let b = g.reshape(p, [1, n, 3]).unwrap();
    let d = g.sub(a, b).unwrap();
    let d2 = g.square(d).unwrap();
    let r2 = g.sum(d2, &[2]).unwrap();
    let r2 = g.add(r2, eye).unwrap();
    let s3 = g.powi(r2, -3).unwrap();
    let s6 = g.square(s3).unwrap();
    let e = g.sub(s6, s3).unwrap();
    let two = g.scalar(2.0, DType::F64);
    let e = g.mul(e, two).unwrap();
    let f = g.sum_all(e).unwrap();
    g.set_outputs(vec![f]);
    g
}

/// Inputs of [`lj`]: `n` particles on a 4-wide lattice of spacing 1.2,
/// jittered by `jitter` (one value in [-0.1, 0.1] per coordinate), and the
/// identity.
pub fn lj_inputs(n: usize, jitter: &[f64]) -> (Tensor, Tensor) {
    let p: Vec<f64> = (0..3 * n)
        .map(|k| 1.2 * [k / 3 % 4, k / 12 % 4, k / 48][k % 3] as f64 + jitter[k])
        .collect();
    let eye = (0..n * n).map(|k| (k / n == k % n) as u8 as f64);
    let p = Tensor::from_storage(Storage::from_f64(DType::F64, p), vec![n, 3]).unwrap();
    let eye = Tensor::from_storage(Storage::from_f64(DType::F64, eye), vec![n, n]).unwrap();
    (p, eye)
}
