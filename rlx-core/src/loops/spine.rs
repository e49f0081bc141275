//! Fusing a scan with its adjoint, after differentiation.
//!
//! Reverse mode of a loop leaves two nodes: the scan `S` (the value) and its
//! adjoint `A`, whose reverse sweep first runs the loop forward once more to
//! place its checkpoints (the *first descent* of [`revolve`](super::schedule::revolve)).
//! When `A`'s loop operands are `S`'s, `S` can record those carries as it
//! runs (the [`spine`](super::schedule::spine), `⌈√T⌉`-ish of them: memory
//! the adjoint holds anyway) and `A` start from them, skipping a whole
//! forward pass of the loop: the gradient then costs one forward sweep plus
//! the recomputations of the schedule, as a hand-written adjoint with the
//! same memory would.
//!
//! When `A` stores every carry (its budget is `T`) and all steps' residuals
//! fit in [`RESIDUAL_BYTES`], `S` records the residuals of its adjoint's
//! split reverse step instead ([`residuals`](super::residuals)), and `A`
//! runs only the cotangent half of each step: one forward sweep and one
//! backward sweep, nothing recomputed.
//!
//! Loops with a spine or residuals have no derivative rules, so this runs last, on
//! graphs about to be compiled.

use std::sync::Arc;

use super::hoist::hoist;
use super::residuals::{split, Residuals, RESIDUAL_BYTES};
use super::{bytes, schedule, LoopKind, LoopOp, LoopRef};
use crate::{Graph, Node, NodeId, Op, Result};

/// `g` with each scan that has an adjoint over the same operands fused with
/// it (see the module docs), and the origin in `g` of each node of the
/// result; `None` when there is nothing to fuse.
///
/// ```
/// use rlx::core::loops::spine::fuse_spines;
/// use rlx::{autodiff, DType, Graph, core::LoopOp};
/// // Σ c(20) of c' = sin(c), with a budget of 5 carries or the default (all 20)
/// let fused = |budget: Option<usize>| {
///     let mut b = Graph::new();
///     let c = b.input("c", [3], DType::F64);
///     let s = b.sin(c).unwrap();
///     b.set_outputs(vec![s]);
///     let l = LoopOp::scan("l", b, 1, 0, 20, false, budget).unwrap();
///     let mut g = Graph::new();
///     let c0 = g.input("c0", [3], DType::F64);
///     let p = g.looped(l, &[c0]).unwrap();
///     let y = g.sum_all(p).unwrap();
///     g.set_outputs(vec![y]);
///     let vg = autodiff::value_and_grad(&g, &[0]).unwrap();
///     let (fused, _) = fuse_spines(&vg).unwrap().expect("a scan and its adjoint");
///     fused.to_string()
/// };
/// assert!(fused(Some(5)).contains("spine"));
/// assert!(fused(None).contains("residuals"));
/// ```
pub fn fuse_spines(g: &Graph) -> Result<Option<(Graph, Vec<NodeId>)>> {
    let nodes = g.nodes();
    let live = g.live_nodes();
    // adjoint node -> its scan node
    let mut partner: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut taken = vec![false; nodes.len()];
    // scan node -> its adjoint's split reverse step, when stored residuals
    // replace the spine
    let mut split: Vec<Option<Arc<Residuals>>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let Op::Loop(a) = &n.op else { continue };
        let LoopKind::Adjoint { primal, .. } = &a.kind else {
            continue;
        };
        if !live[i] || a.spine > 0 {
            continue;
        }
        let n_in = a.body.inputs().len();
        let found = (0..i).find(|&j| {
            !taken[j]
                && live[j]
                && matches!(&nodes[j].op, Op::Loop(s) if s == primal)
                && nodes[j].inputs[..] == n.inputs[..n_in]
        });
        if let Some(j) = found {
            partner[i] = Some(j);
            taken[j] = true;
            split[j] = residuals_within_budget(a)?;
        }
    }
    if !taken.iter().any(|&t| t) {
        return Ok(None);
    }
    let mut out = Graph::new();
    let mut map: Vec<NodeId> = Vec::with_capacity(nodes.len());
    let mut origins: Vec<NodeId> = Vec::with_capacity(nodes.len());
    // scan node -> (fused scan node, its loop)
    let mut fused: Vec<Option<(NodeId, LoopRef)>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let args: Vec<NodeId> = n.inputs.iter().map(|j| map[j.index()]).collect();
        let id = match &n.op {
            Op::Input { index } => {
                out.input(g.inputs()[*index].name.clone(), n.shape.clone(), n.dtype)
            }
            Op::Loop(s) if taken[i] => {
                let l = LoopRef(Arc::new(match &split[i] {
                    Some(r) => LoopOp {
                        residuals: Some(r.clone()),
                        ..(**s).clone()
                    },
                    None => LoopOp {
                        spine: schedule::spine(s.length, s.checkpoints).len(),
                        ..(**s).clone()
                    },
                }));
                let node = out.looped(l.clone(), &args)?;
                fused[i] = Some((node, l));
                out.slice_range(node, 0..n.shape.numel(), 0)?
            }
            Op::Loop(a) if partner[i].is_some() => {
                let j = partner[i].expect("checked");
                let (node, s) = fused[j].clone().expect("scans come before their adjoints");
                // The adjoint reads the spine or the residuals in place.
                let mut ops = args;
                ops.push(node);
                let l = LoopRef(Arc::new(LoopOp {
                    spine: s.spine,
                    residuals: s.residuals.clone(),
                    ..(**a).clone()
                }));
                out.looped(l, &ops)?
            }
            op => out.push_unchecked(Node {
                op: op.clone(),
                inputs: args,
                shape: n.shape.clone(),
                dtype: n.dtype,
            }),
        };
        map.push(id);
        origins.resize(out.len(), NodeId(i as u32));
    }
    out.set_outputs(g.outputs().iter().map(|o| map[o.index()]).collect());
    Ok(Some((out, origins)))
}

/// The split reverse step of adjoint `a` when its scan should store
/// residuals instead of a spine: when `a` stores every carry anyway, every
/// residual has the loop's dtype (the packed result has one dtype, so a
/// `select`'s mask, a bool, cannot be stored there) and all steps'
/// residuals fit in [`RESIDUAL_BYTES`]; with its weight-gradient products
/// [`hoist`]ed when their stacked factors fit there too.
fn residuals_within_budget(a: &LoopOp) -> Result<Option<Arc<Residuals>>> {
    if a.checkpoints < a.length {
        return Ok(None);
    }
    let mut r = split(a)?;
    let types = r.types(a.body.outputs().len());
    if types.iter().any(|t| t.dtype != a.dtype()) {
        return Ok(None);
    }
    let stored = bytes(types).saturating_mul(a.length);
    if stored > RESIDUAL_BYTES {
        return Ok(None);
    }
    // The factors of hoisted products are stacked over a group of steps
    // too: hoisted only when they fit beside the residuals.
    if let Some((backward, h)) = hoist(a, &r.backward)? {
        let outs = backward.outputs();
        let factors = bytes(
            outs[outs.len() - h.factors..]
                .iter()
                .map(|&o| backward.ty(o)),
        )
        .saturating_mul(h.steps);
        if stored.saturating_add(factors) <= RESIDUAL_BYTES {
            r.backward = backward;
            r.hoisted = Some(h);
        }
    }
    Ok(Some(Arc::new(r)))
}
