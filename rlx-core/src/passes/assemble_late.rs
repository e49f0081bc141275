//! Assembly last: concatenations, reshapes and transposes are moved as late
//! in the node order as their users allow.
//!
//! A runtime that fuses element-wise nodes into loops in node order (as
//! rlx's planner does) must close a loop once something outside it reads
//! one of its values. A Jacobian assembled from several pieces (one per
//! basis vector, each ending in the function's own `concat`) reads the
//! first piece before the next one is computed; with the assembly moved to
//! the end, all pieces are computed first and can share one loop, which
//! writes each piece straight into the assembled result.
//!
//! Only the order changes: every node keeps its operation and operands,
//! so values are bit-identical.

use super::copy;
use crate::{Graph, NodeId, Op, Result};

/// `g` with every `Concat`, `Reshape` and `Transpose` placed just before
/// its first user that is not one of them (or at the end), other nodes in
/// their order. Inputs, outputs and source lines are kept.
///
/// ```
/// use rlx::{core::passes::assemble_late, DType, Graph, Op};
/// let mut g = Graph::new();
/// let x = g.input("x", [4, 1], DType::F64);
/// let a = g.exp(x).unwrap();
/// let c = g.concat(&[a, x], 1).unwrap(); // read before `b` is computed
/// let b = g.sin(a).unwrap();
/// g.set_outputs(vec![c, b]);
/// let h = assemble_late(&g).unwrap();
/// assert!(matches!(h.nodes().last().unwrap().op, Op::Concat { .. }), "{h}");
/// ```
pub fn assemble_late(g: &Graph) -> Result<Graph> {
    let nodes = g.nodes();
    let late = |i: usize| {
        matches!(
            nodes[i].op,
            Op::Concat { .. } | Op::Reshape { .. } | Op::Transpose { .. }
        )
    };
    let live = g.live_nodes();
    let (mut out, mut map, mut origins) = super::with_inputs(g)?;
    // Emits node `root` after its operands (an explicit stack: graphs may
    // be deep).
    let mut emit = |root: usize, out: &mut Graph, origins: &mut Vec<NodeId>| {
        let mut stack = vec![root];
        while let Some(&i) = stack.last() {
            if map[i].is_some() {
                stack.pop();
                continue;
            }
            let pending: Vec<usize> = nodes[i]
                .inputs
                .iter()
                .map(|p| p.index())
                .filter(|&p| map[p].is_none())
                .collect();
            if pending.is_empty() {
                let args: Vec<NodeId> = nodes[i]
                    .inputs
                    .iter()
                    .map(|p| map[p.index()].expect("operands first"))
                    .collect();
                map[i] = Some(copy(out, &nodes[i], &args));
                origins.resize(out.len(), NodeId(i as u32));
                stack.pop();
            } else {
                stack.extend(pending);
            }
        }
    };
    for i in (0..nodes.len()).filter(|&i| live[i] && !late(i)) {
        emit(i, &mut out, &mut origins);
    }
    for i in (0..nodes.len()).filter(|&i| live[i]) {
        emit(i, &mut out, &mut origins);
    }
    let outs = g
        .outputs()
        .iter()
        .map(|o| map[o.index()].expect("outputs are live"))
        .collect();
    out.set_outputs(outs);
    out.copy_lines(g, &origins);
    super::verified(out)
}
