//! *Indexed* gathers: a `gather` along axis 0 of a vector with constant
//! indices, whose every reader is an element-wise node of its shape, is
//! not a step of its own. The fused loops reading it load
//! `source[idx[i]]` directly ([`Access::Indexed`]), so the gathered vector
//! is never written, and the indices, known when the plan is built, are
//! checked once here instead of on every call. A sparse derivative's
//! decompression is such a gather.

use std::sync::Arc;

use rlx_core::{DType, Graph, Literal, Op};

use crate::compile::fusion::io::Access;
use crate::compile::steps::scatter::checked_indices;

/// Per node: the checked indices when it is an indexed gather.
pub(super) fn indexed_gathers(
    g: &Graph,
    live: &[bool],
    users: &[Vec<u32>],
    is_output: &[bool],
    root: &[u32],
) -> Vec<Option<Arc<[u32]>>> {
    let nodes = g.nodes();
    let mut out: Vec<Option<Arc<[u32]>>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let (Op::Gather { axis: 0 }, [x, idx]) = (&n.op, n.inputs.as_slice()) else {
            continue;
        };
        let (x, idx) = (x.index(), idx.index());
        let Op::Constant(lit @ (Literal::I64(_) | Literal::SplatI64(_))) = &nodes[idx].op else {
            continue;
        };
        if nodes[idx].dtype != DType::I64 {
            continue;
        }
        let size = nodes[x].shape.numel();
        let count = n.shape.numel();
        // A vector source not itself indexed (its values must exist), read
        // element for element by fused loops of this shape only.
        let candidate = live[i]
            && !is_output[i]
            && count >= 2
            && nodes[x].shape.rank() == 1
            && out[root[x] as usize].is_none()
            && !users[i].is_empty()
            && users[i].iter().all(|&u| {
                let un = &nodes[u as usize];
                crate::compile::planner::facts::is_fusable(&un.op) && un.shape == n.shape
            });
        if !candidate {
            continue;
        }
        // Indices as `u32` (half the memory traffic of `usize`); a source
        // too long for them, or an index out of range, stays a kernel step
        // (which reports the bad index).
        out[i] = checked_indices(count, size, |k| lit.get_i64(k));
    }
    out
}

/// The access of a fused loop to an indexed gather.
pub(super) fn access(ix: &Arc<[u32]>) -> Access {
    Access::Indexed(Arc::clone(ix))
}
