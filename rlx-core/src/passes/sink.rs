//! Broadcast sinking: element-wise ops and slices of broadcast values are
//! computed on the unbroadcast operands, and the result is broadcast.
//!
//! Batched Jacobians feed a basis of unit vectors broadcast over the batch
//! (`[m, 1, ..]` to `[m, N, ..]`) into the tangent graph; without this rule
//! every tangent op touching the basis alone would run over `m · N`
//! elements (and constant folding would materialise batch-sized
//! constants). The rules, for `B(x)` a broadcast of `x`:
//! - `op(B(a), b, ..)` (unary, binary, compare, select, cast, with at least
//!   one broadcast operand) becomes `op(a, b, ..)`, broadcast to the node's
//!   shape when the operands' own shapes give a smaller one;
//! - `slice(B(x))` becomes `B(x)` at the slice's shape when the axis is a
//!   broadcast one, else `B(slice(x))`.
//!
//! Both compute the same elements by the same operations (only fewer
//! times), so results are bit-identical.

use crate::{Graph, Node, NodeId, Op, Result, Shape};

/// The replacement for `node` (operands mapped to `args`), if a rule applies.
pub(super) fn rule(out: &mut Graph, node: &Node, args: &[NodeId]) -> Result<Option<NodeId>> {
    match &node.op {
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast(_) => {
            if !args.iter().any(|&a| is_broadcast(out, a)) {
                return Ok(None);
            }
            let inner: Vec<NodeId> = args.iter().map(|&a| unbroadcast(out, a)).collect();
            let r = out.push(node.op.clone(), &inner)?;
            widen(out, r, &node.shape)
        }
        Op::Slice { axis, start, len } => {
            let b = args[0];
            if !is_broadcast(out, b) {
                return Ok(None);
            }
            let x = unbroadcast(out, b);
            let xs = out.shape(x).clone();
            let lead = node.shape.rank() - xs.rank();
            let r = if *axis < lead || xs.dim(axis - lead) == 1 {
                x
            } else {
                out.slice_range(x, *start..*start + *len, axis - lead)?
            };
            widen(out, r, &node.shape)
        }
        _ => Ok(None),
    }
}

fn is_broadcast(g: &Graph, id: NodeId) -> bool {
    matches!(g.node(id).op, Op::Broadcast { .. })
}

/// The operand of `id` if it is a broadcast, else `id`.
fn unbroadcast(g: &Graph, id: NodeId) -> NodeId {
    match g.node(id).op {
        Op::Broadcast { .. } => g.node(id).inputs[0],
        _ => id,
    }
}

/// `r` broadcast to `shape` unless it has that shape already.
fn widen(out: &mut Graph, r: NodeId, shape: &Shape) -> Result<Option<NodeId>> {
    if out.shape(r) == shape {
        Ok(Some(r))
    } else {
        out.broadcast(r, shape.clone()).map(Some)
    }
}
