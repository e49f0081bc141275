//! Derivatives of holomorphic complex-valued functions (JAX's
//! `holomorphic=True`): for `f` complex-differentiable in its complex
//! inputs, the bilinear VJP with cotangent `1` is `f′(z)` itself (no
//! conjugation: `vjp(z ↦ a·z)(1) = a`), so the gradient is one reverse
//! pass seeded with `1 + 0i`, and row `i` of the Jacobian the VJP seeded
//! with the unit `e_i`. Whether `f` *is* holomorphic is the caller's
//! promise, as in JAX: for a non-holomorphic `f` (`conj`, `abs`, `real`
//! inside) these return the VJP's value, which is not a complex derivative.

use crate::{DType, Error, Graph, NodeId, Result};

use super::{basis, batched_vjp, finish, out0, set_outputs, wrt_nodes, zero_block};
use crate::autodiff::vjp_nodes;

/// A complex output and complex inputs, or an error saying what the
/// holomorphic option needs.
fn check(g: &Graph, nodes: &[NodeId], o: NodeId, op: &'static str) -> Result<()> {
    let dt = g.dtype(o);
    if !dt.is_complex() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: dt,
            expected: "a complex output: the holomorphic option is for complex-valued functions (drop it for a real-valued one)",
        });
    }
    for &w in nodes {
        let wt = g.dtype(w);
        if !wt.is_complex() {
            return Err(Error::UnsupportedDType {
                op,
                dtype: wt,
                expected: "complex inputs: a holomorphic derivative is with respect to complex parameters (cast a real one to c64, or leave it out of `wrt`)",
            });
        }
    }
    Ok(())
}

/// `f′(z)` per `wrt` input of the holomorphic, complex scalar output 0.
/// Outputs: the original outputs, then one derivative per `wrt`, shaped
/// like its input.
///
/// ```
/// use rlx::core::{autodiff::grad_holomorphic, DType, Graph};
/// let mut g = Graph::new();
/// let z = g.input("z", [], DType::C64);
/// let y = g.square(z).unwrap();
/// g.set_outputs(vec![y]);
/// let d = grad_holomorphic(&g, &[0]).unwrap();
/// assert_eq!(d.dtype(d.outputs()[1]), DType::C64);
/// ```
pub fn grad_holomorphic(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    const OP: &str = "grad (holomorphic)";
    let nodes = wrt_nodes(g, wrt, OP)?;
    let o = out0(g, OP)?;
    check(g, &nodes, o, OP)?;
    if g.shape(o).numel() != 1 {
        return Err(Error::NotScalar {
            op: OP,
            shape: g.shape(o).clone(),
        });
    }
    let mut h = g.clone();
    let ct = h.ones_like(o);
    let d = vjp_nodes(&mut h, &[o], &[ct], &nodes)?;
    set_outputs(&mut h, g, d);
    finish(h)
}

/// The complex Jacobian `∂f/∂z` of the holomorphic output 0, one block
/// `[out..., in...]` per `wrt` (reverse mode, one batched VJP over the
/// output's unit vectors). Outputs: the original outputs, then the blocks.
pub fn jacobian_holomorphic(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    const OP: &str = "jacobian (holomorphic)";
    let nodes = wrt_nodes(g, wrt, OP)?;
    let o = out0(g, OP)?;
    check(g, &nodes, o, OP)?;
    let os = g.shape(o).clone();
    let dt: DType = g.dtype(o);
    let p = os.numel();
    let mut r = g.clone();
    let mut blocks = Vec::with_capacity(nodes.len());
    let dims = |w: NodeId| {
        let mut d = os.dims().to_vec();
        d.extend_from_slice(g.shape(w).dims());
        d
    };
    if p == 0 {
        for &w in &nodes {
            blocks.push(zero_block(&mut r, dims(w), dt, OP)?);
        }
    } else {
        let seed = basis(&mut r, p, 0, &os, dt)?;
        let bo = batched_vjp(&mut r, g, &nodes, o, seed, p)?; // each [p, in...]
        for (&w, &y) in nodes.iter().zip(&bo) {
            blocks.push(r.reshape(y, dims(w))?);
        }
    }
    set_outputs(&mut r, g, blocks);
    finish(r)
}
