//! Batching rules of loops.
//!
//! - A scan per item is a scan of the batched body, whose carries are all
//!   batched and whose batched per-step inputs are stepped along axis 1
//!   (`[B, T, ..] -> [T, B, ..]`).
//! - An adjoint per item is an adjoint of the batched scan whose reverse
//!   step is the batched reverse step, so a batched reverse sweep keeps its
//!   checkpoints (`checkpoints` stored batched carries). Its cotangents of
//!   the per-step inputs and invariants are per item, so every
//!   floating-point operand is batched (an adjoint's cotangents have the
//!   types of the values they belong to).
//!
//! The packed result `[c(T): [B, ..], ys: [T, B, ..]]` (or an adjoint's
//! `[c̄(0), x̄s, k̄]`) is re-packed per item into `[B, n]`.

use super::{materialize, move_axis, vmap};
use crate::loops::lower::{forward_like, no_spine};
use crate::loops::{unpack, LoopKind, LoopOp};
use crate::{Graph, NodeId, Result};

/// A loop node per item; see the module docs.
pub(super) fn batch_loop(
    out: &mut Graph,
    l: &LoopOp,
    args: &[(NodeId, bool)],
    size: usize,
) -> Result<NodeId> {
    no_spine(l)?;
    let (c, k) = (l.carries, l.xs);
    let n_in = l.body.inputs().len();
    let adjoint = matches!(l.kind, LoopKind::Adjoint { .. });
    let mut ops = Vec::with_capacity(args.len());
    let mut flags = Vec::with_capacity(args.len());
    for (i, &a) in args.iter().enumerate() {
        let float = out.dtype(a.0).is_inexact();
        // Per-step values (stepped inputs, an adjoint's output cotangents)
        // step along axis 1 once batched.
        let stepped = (c..c + k).contains(&i) || i >= n_in + c;
        let batch = i < c || (adjoint && float) || a.1;
        if !batch {
            ops.push(a.0);
            flags.push(false);
            continue;
        }
        let b = materialize(out, a, size)?;
        ops.push(if stepped { move_axis(out, b, 1, 0)? } else { b });
        flags.push(true);
    }
    let body = vmap(&l.body, &flags[..n_in], size)?;
    let scan = forward_like(l, l.name.clone(), body, c, k)?;
    let bl = match &l.kind {
        LoopKind::Scan => scan,
        LoopKind::Adjoint { vjp, .. } => {
            // [c, x, k, c̄', ȳ]: the body's flags, then batched cotangents.
            let mut vflags = flags[..n_in].to_vec();
            vflags.extend(std::iter::repeat_n(true, c + l.ys()));
            LoopOp::adjoint(&scan, vmap(vjp, &vflags, size)?)?
        }
    };
    let node = out.looped(bl.clone(), &ops)?;
    let pieces = unpack(out, node, &bl.segments())?;
    let mut rows = Vec::with_capacity(pieces.len());
    // Pieces stacked per step: a scan's ys, an adjoint's x̄s.
    let stepped_pieces = if adjoint {
        c..c + l.float_xs().len()
    } else {
        c..pieces.len()
    };
    for (i, &p) in pieces.iter().enumerate() {
        let p = if stepped_pieces.contains(&i) {
            move_axis(out, p, 1, 0)?
        } else {
            p
        };
        let n = out.shape(p).numel() / size.max(1);
        rows.push(out.reshape(p, [size, n])?);
    }
    if rows.len() == 1 {
        return Ok(rows[0]);
    }
    out.concat(&rows, 1)
}
