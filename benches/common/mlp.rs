//! The MLP of `benches/autodiff.rs` (784-256-256-10, batch 64, `f32`,
//! `tanh`, softmax cross-entropy), shared with
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
