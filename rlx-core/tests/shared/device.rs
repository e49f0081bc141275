//! A medium test graph shared by the tests of `rlx-core`
//! (`tests/medium_graphs.rs`) and `rlx-runtime`
//! (`tests/compile/fusion_movement.rs`), which include this file by path.

use rlx_core::{DType, Graph};

/// A 3-terminal device over `n` items, `u: [n, 3]` → `[n, 3]`: `exp` of
/// `v0 - v1`, `tanh` of `v1 - v2`, products; the currents concatenated on
/// the last axis (column slices, `exp`, `tanh`, products, a concat).
pub fn device(n: usize) -> Graph {
    let mut g = Graph::new();
    let u = g.input("u", [n, 3], DType::F64);
    let v: Vec<_> = (0..3)
        .map(|k| g.slice_range(u, k..k + 1, 1).unwrap())
        .collect();
    let d = g.sub(v[0], v[1]).unwrap();
    let e = g.exp(d).unwrap();
    let s = g.sub(v[1], v[2]).unwrap();
    let t = g.tanh(s).unwrap();
    let it = g.mul(t, v[0]).unwrap();
    let il = g.mul(v[0], v[2]).unwrap();
    let i0 = g.add(e, il).unwrap();
    let i1 = g.sub(it, e).unwrap();
    let i2 = g.neg(it).unwrap();
    let c = g.concat(&[i0, i1, i2], 1).unwrap();
    g.set_outputs(vec![c]);
    g
}
