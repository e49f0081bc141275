//! Splitting a loop's reverse-mode step into a forward half that records
//! residuals and a backward half that reads them.
//!
//! An adjoint's reverse-mode step `vjp: [c, x, k, c̄', ȳ] → [c̄, x̄, k̄]`
//! computes the body's forward values again before it propagates
//! cotangents. When the forward scan records, per step, the values of that
//! forward part which the cotangent part reads (the *residuals* `r`), the
//! reverse sweep needs neither carries nor recomputation:
//!
//! ```text
//! forward:  [c, x, k] → [c', y, r]            (the body, also returning r)
//! backward: [x, k, c̄', ȳ, r] → [c̄, x̄, k̄]      (the cotangent part of vjp)
//! ```
//!
//! A node of `vjp` belongs to the backward half when it depends on a
//! cotangent input, or on no per-step value at all (a loop invariant,
//! recomputed there). The others are forward values; those the backward
//! half reads (or `vjp` returns) are residuals, except per-step inputs,
//! which the backward half reads from `xs`. A reshape, broadcast or
//! transpose of a forward value is recomputed from its operand rather than
//! stored (a product reads a transpose in place), and so
//! is a sum, difference or product of stored values (`s·(1 − s)` from a
//! stored sigmoid `s`): memory for a few element-wise operations.
//!
//! The compiler makes this split after differentiation, for a scan and its
//! adjoint that store every carry anyway, when all `T` steps' residuals fit
//! in [`RESIDUAL_BYTES`] (see [`spine`](super::spine)): the gradient then
//! runs the body once forward and the cotangent part once backward, as a
//! hand-written backpropagation through time does.

use super::lower::declare_like;
use super::{LoopKind, LoopOp};
use crate::{BinaryOp, Error, Graph, NodeId, Op, Result, TensorType, UnaryOp};

/// The bytes of residuals (over all steps) a loop may store: a scan and
/// its adjoint that store every carry also store every step's residuals
/// when those take at most 64 MiB, else the adjoint recomputes each step.
pub const RESIDUAL_BYTES: usize = 64 << 20;

/// A loop's reverse-mode step split in two (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Residuals {
    /// `[c, x, k] → [c', y, r]`: the body, also returning the residuals.
    pub forward: Graph,
    /// `[x, k, c̄', ȳ, r] → [c̄, x̄ (float x), k̄ (float k)]`, or with
    /// `hoisted` products `[c̄, x̄, k̄ (those with a per-step part),
    /// factors]`.
    pub backward: Graph,
    /// The weight-gradient products taken out of `backward` and computed
    /// once after the sweep ([`hoist`](super::hoist)), if any.
    pub hoisted: Option<super::hoist::Hoisted>,
}

impl Residuals {
    /// The residuals' types (one step's values), given the number of the
    /// body's outputs.
    pub fn types(&self, body_outputs: usize) -> Vec<TensorType> {
        let f = &self.forward;
        let outs = f.outputs();
        outs[body_outputs.min(outs.len())..]
            .iter()
            .map(|&o| f.ty(o))
            .collect()
    }
}

/// Splits the reverse-mode step of adjoint `adj` (see the module docs).
///
/// ```
/// use rlx::{autodiff, DType, Graph, core::{LoopKind, LoopOp}, Op};
/// use rlx::core::loops::residuals::split;
/// // c' = sin(c): the reverse step needs cos(c), one residual
/// let mut b = Graph::new();
/// let c = b.input("c", [3], DType::F64);
/// let s = b.sin(c).unwrap();
/// b.set_outputs(vec![s]);
/// let l = LoopOp::scan("l", b, 1, 0, 4, false, None).unwrap();
/// let mut g = Graph::new();
/// let c0 = g.input("c0", [3], DType::F64);
/// let p = g.looped(l, &[c0]).unwrap();
/// let y = g.sum_all(p).unwrap();
/// g.set_outputs(vec![y]);
/// let gr = autodiff::grad(&g, &[0]).unwrap();
/// let adj = gr.nodes().iter().find_map(|n| match &n.op {
///     Op::Loop(a) if matches!(a.kind, LoopKind::Adjoint { .. }) => Some(a.clone()),
///     _ => None,
/// }).unwrap();
/// let r = split(&adj).unwrap();
/// assert_eq!(r.types(1).len(), 1);
/// ```
pub fn split(adj: &LoopOp) -> Result<Residuals> {
    let LoopKind::Adjoint { vjp: v, .. } = &adj.kind else {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!("{}: only an adjoint's reverse step is split", adj.name),
        });
    };
    let (c, k) = (adj.carries, adj.xs);
    let n_in = adj.body.inputs().len();
    let nodes = v.nodes();
    let ins = v.input_ids();
    let live = v.live_nodes();
    // Whether a node depends on a carry or per-step input (`step`), on a
    // cotangent (`cot`); which input a node is.
    let (mut step, mut cot) = (vec![false; nodes.len()], vec![false; nodes.len()]);
    let mut input_of: Vec<Option<usize>> = vec![None; nodes.len()];
    for (i, id) in ins.iter().enumerate() {
        input_of[id.index()] = Some(i);
        step[id.index()] = i < c + k;
        cot[id.index()] = i >= n_in;
    }
    for (i, n) in nodes.iter().enumerate() {
        if input_of[i].is_none() {
            step[i] = n.inputs.iter().any(|j| step[j.index()]);
            cot[i] = n.inputs.iter().any(|j| cot[j.index()]);
        }
    }
    let is_x = |i: usize| matches!(input_of[i], Some(j) if j >= c && j < c + k);
    // Forward values the backward half reads or returns, in node order;
    // views of forward values are recomputed from their operand.
    let mut residual = vec![false; nodes.len()];
    let mut recompute = vec![false; nodes.len()];
    let mut wanted: Vec<usize> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if live[i] && cot[i] {
            wanted.extend(n.inputs.iter().map(|j| j.index()));
        }
    }
    wanted.extend(v.outputs().iter().map(|o| o.index()));
    while let Some(j) = wanted.pop() {
        if cot[j] || !step[j] || is_x(j) || residual[j] || recompute[j] {
            continue;
        }
        let n = &nodes[j];
        let view = matches!(
            n.op,
            Op::Reshape { .. } | Op::Broadcast { .. } | Op::Transpose { .. }
        );
        if view && input_of[j].is_none() {
            recompute[j] = true;
            wanted.push(n.inputs[0].index());
        } else {
            residual[j] = true;
        }
    }
    // A residual that a few additions and products make from other
    // residuals (`s·(1 − s)` from a stored `s`) is recomputed from them.
    let cheap = |op: &Op| {
        matches!(
            op,
            Op::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::MulZero)
                | Op::Unary(UnaryOp::Neg | UnaryOp::Square)
        )
    };
    // 0 unknown, 1 derivable from stored values, 2 not.
    let mut derivable = vec![0u8; nodes.len()];
    for j in 0..nodes.len() {
        if !residual[j] || !cheap(&nodes[j].op) {
            continue;
        }
        let mut stack = nodes[j]
            .inputs
            .iter()
            .map(|o| o.index())
            .collect::<Vec<_>>();
        let mut reached = Vec::new();
        let mut ok = true;
        while let Some(o) = stack.pop() {
            if !step[o] || is_x(o) || residual[o] || derivable[o] == 1 {
                continue;
            }
            if derivable[o] == 2 || input_of[o].is_some() || !cheap(&nodes[o].op) {
                derivable[o] = 2;
                ok = false;
                break;
            }
            reached.push(o);
            stack.extend(nodes[o].inputs.iter().map(|i| i.index()));
        }
        if ok {
            residual[j] = false;
            for o in reached.into_iter().chain([j]) {
                derivable[o] = 1;
                recompute[o] = true;
            }
        }
    }
    let residuals: Vec<usize> = (0..nodes.len()).filter(|&i| residual[i]).collect();

    // forward: the body, then the forward nodes the residuals need.
    let mut f = Graph::new();
    let f_ins = declare_like(&mut f, &adj.body);
    let mut f_outs = f.inline(&adj.body, &f_ins)?;
    let mut need = residual.clone();
    for i in (0..nodes.len()).rev() {
        if need[i] && input_of[i].is_none() {
            for j in &nodes[i].inputs {
                need[j.index()] = true;
            }
        }
    }
    let mut map: Vec<Option<NodeId>> = vec![None; nodes.len()];
    for (i, id) in ins[..n_in].iter().enumerate() {
        map[id.index()] = Some(f_ins[i]);
    }
    copy_nodes(&mut f, v, &mut map, |i| need[i] && input_of[i].is_none())?;
    for &r in &residuals {
        f_outs.push(map[r].ok_or_else(|| internal(adj, "a residual"))?);
    }
    f.set_outputs(f_outs);

    // backward: inputs [x, k, c̄', ȳ, r], then the cotangent and invariant nodes.
    let mut b = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; nodes.len()];
    for (i, id) in ins.iter().enumerate().skip(c) {
        let t = v.ty(*id);
        map[id.index()] = Some(b.input(v.inputs()[i].name.clone(), t.shape, t.dtype));
    }
    for (n, &r) in residuals.iter().enumerate() {
        let t = v.ty(NodeId(r as u32));
        map[r] = Some(b.input(format!("residual{n}"), t.shape, t.dtype));
    }
    let mut need = vec![false; nodes.len()];
    for o in v.outputs() {
        need[o.index()] = true;
    }
    for i in (0..nodes.len()).rev() {
        if need[i] && !residual[i] && input_of[i].is_none() {
            for j in &nodes[i].inputs {
                need[j.index()] = true;
            }
        }
    }
    copy_nodes(&mut b, v, &mut map, |i| {
        need[i] && input_of[i].is_none() && !residual[i] && (cot[i] || !step[i] || recompute[i])
    })?;
    let outs = v
        .outputs()
        .iter()
        .map(|o| map[o.index()].ok_or_else(|| internal(adj, "an output")))
        .collect::<Result<Vec<_>>>()?;
    b.set_outputs(outs);
    f.verify()?;
    b.verify()?;
    Ok(Residuals {
        forward: f,
        backward: b,
        hoisted: None,
    })
}

/// Copies the nodes `i` of `from` with `take(i)` into `to` (in order),
/// recording their ids in `map`, with their source lines.
fn copy_nodes(
    to: &mut Graph,
    from: &Graph,
    map: &mut [Option<NodeId>],
    take: impl Fn(usize) -> bool,
) -> Result<()> {
    for (i, n) in from.nodes().iter().enumerate() {
        if !take(i) {
            continue;
        }
        let inputs = n
            .inputs
            .iter()
            .map(|j| map[j.index()])
            .collect::<Option<Vec<NodeId>>>()
            .ok_or_else(|| Error::InvalidArgument {
                op: "loop",
                message: format!(
                    "splitting a reverse step: node %{i} reads a value of neither half"
                ),
            })?;
        map[i] = Some(to.push_copy(from, i, inputs));
    }
    Ok(())
}

fn internal(adj: &LoopOp, what: &str) -> Error {
    Error::InvalidArgument {
        op: "loop",
        message: format!(
            "{}: splitting its reverse step left {what} uncomputed",
            adj.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::spine::fuse_spines;
    use crate::{autodiff, DType, LoopRef, UnaryOp};
    use std::sync::Arc;

    /// `Σ c(T)` of `c' = c + sin(c·k) x`, `y = c·x` summed, over `[n]`
    /// values for `steps` steps with the given budget: its gradient graph
    /// and the loop.
    fn gradient(n: usize, steps: usize, budget: Option<usize>) -> (Graph, LoopRef) {
        let mut b = Graph::new();
        let c = b.input("c", [n], DType::F64);
        let x = b.input("x", [n], DType::F64);
        let k = b.input("k", [n], DType::F64);
        let ck = b.mul(c, k).unwrap();
        let s = b.sin(ck).unwrap();
        let sx = b.mul(s, x).unwrap();
        let c2 = b.add(c, sx).unwrap();
        let y = b.mul(c, x).unwrap();
        b.set_outputs(vec![c2, y]);
        let l = LoopOp::scan("l", b, 1, 1, steps, false, budget).unwrap();
        let mut g = Graph::new();
        let c0 = g.input("c0", [n], DType::F64);
        let xs = g.input("xs", [steps, n], DType::F64);
        let k = g.input("k", [n], DType::F64);
        let p = g.looped(l.clone(), &[c0, xs, k]).unwrap();
        let y = g.sum_all(p).unwrap();
        g.set_outputs(vec![y]);
        (autodiff::value_and_grad(&g, &[0, 1, 2]).unwrap(), l)
    }

    fn adjoint_of(g: &Graph) -> LoopRef {
        g.nodes()
            .iter()
            .find_map(|n| match &n.op {
                Op::Loop(a) if matches!(a.kind, LoopKind::Adjoint { .. }) => Some(a.clone()),
                _ => None,
            })
            .expect("an adjoint")
    }

    #[test]
    fn the_backward_half_reads_residuals_and_recomputes_nothing() {
        let (g, l) = gradient(3, 4, None);
        let adj = adjoint_of(&g);
        let r = split(&adj).unwrap();
        // The forward half is the body plus residuals.
        let f_out = r.forward.outputs();
        assert_eq!(f_out.len(), 2 + r.types(2).len());
        assert!(!r.types(2).is_empty());
        // The backward half takes [x, k, c̄', ȳ, r]: no carry.
        let b_in: Vec<&str> = r
            .backward
            .inputs()
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(&b_in[..2], &["x", "k"], "{b_in:?}");
        assert_eq!(b_in.len(), 4 + r.types(2).len(), "{b_in:?}");
        // No sine is computed again going backwards, and the split step
        // validates against the loop.
        let trig = |g: &Graph| {
            g.nodes()
                .iter()
                .any(|n| matches!(n.op, Op::Unary(UnaryOp::Sin | UnaryOp::Cos)))
        };
        assert!(trig(&r.forward) && !trig(&r.backward));
        let with = LoopOp {
            residuals: Some(Arc::new(r)),
            ..(*adj).clone()
        };
        with.validate().unwrap();
        assert_eq!(
            with.operand_types().len(),
            l.body.inputs().len() + 1 + 1 + 1
        );
        // A scan's split step must match its body.
        let mut other = split(&adj).unwrap();
        other.forward.set_outputs(vec![]);
        let bad = LoopOp {
            residuals: Some(Arc::new(other)),
            ..(*l).clone()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("split"));
    }

    #[test]
    fn residuals_replace_the_spine_only_when_every_carry_is_stored_and_they_fit() {
        let fused = |n: usize, steps: usize, budget: Option<usize>| {
            let (g, _) = gradient(n, steps, budget);
            fuse_spines(&g).unwrap().expect("fused").0.to_string()
        };
        // default budget: every carry (small), residuals stored
        let s = fused(3, 10, None);
        assert!(s.contains("residuals") && !s.contains("spine"), "{s}");
        // a smaller budget keeps the checkpointed sweep
        let s = fused(3, 10, Some(4));
        assert!(s.contains("spine") && !s.contains("residuals"), "{s}");
        // every carry stored, but 5000 steps of [2048] residuals exceed
        // RESIDUAL_BYTES: the spine again
        let (g, _) = gradient(2048, 5000, Some(5000));
        let per_step: usize = split(&adjoint_of(&g))
            .unwrap()
            .types(2)
            .iter()
            .map(|t| t.shape.numel() * 8)
            .sum();
        assert!(per_step * 5000 > RESIDUAL_BYTES);
        let s = fused(2048, 5000, Some(5000));
        assert!(s.contains("spine") && !s.contains("residuals"), "{s}");
    }
}
