//! An adjoint loop written as two scans, a reference for its meaning.
//!
//! The runtime runs an [`LoopKind::Adjoint`] with checkpoints; its
//! derivatives and batched form are adjoints again (see
//! `autodiff::loop_rules` and `vmap`). This equivalent graph, which stores
//! every carry, is what the reference interpreter of the tests runs:
//!
//! ```text
//! F: forward scan   c(t+1), C[s(t)] = body(c(t), xs[s(t)], k), c(t)     (C stacks the carries)
//! R: reverse scan   c̄(t), k̄acc + k̄(t), x̄s[s(t)] = vjp(C[s(t)], xs[s(t)], k, c̄(t+1), ȳs[s(t)])
//! ```
//!
//! `R` runs in the opposite direction to `F`, starting from `c̄(T)` and a
//! zero accumulator for each floating-point invariant.

use super::{pack, unpack, LoopKind, LoopOp};
use crate::{Error, Graph, NodeId, Op, Result};

/// The graph of `adj` (an adjoint loop) as two scans: inputs are the
/// node's operands, the one output is its packed result.
pub fn lower_adjoint(adj: &LoopOp) -> Result<Graph> {
    let LoopKind::Adjoint { vjp, .. } = &adj.kind else {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!("{}: only an adjoint loop is lowered", adj.name),
        });
    };
    no_spine(adj)?;
    let (c, k, p) = (adj.carries, adj.xs, adj.ys());
    let n_in = adj.body.inputs().len();
    let mut g = Graph::new();
    let ops = declare(&mut g, "operand", adj.operand_types());
    let xs = &ops[c..c + k];
    let consts = &ops[c + k..n_in];
    let (ct_final, ct_ys) = (&ops[n_in..n_in + c], &ops[n_in + c..n_in + c + p]);

    // F: the carries before each step, stacked.
    let stacked_carries = if c > 0 {
        let mut bf = Graph::new();
        let ins = declare_like(&mut bf, &adj.body);
        let outs = bf.inline(&adj.body, &ins)?;
        let mut o = outs[..c].to_vec();
        o.extend_from_slice(&ins[..c]);
        bf.set_outputs(o);
        let f = forward_like(adj, format!("{}/forward", adj.name), bf, c, k)?;
        let node = g.push(Op::Loop(f.clone()), &ops[..n_in])?;
        unpack(&mut g, node, &f.segments())?[c..].to_vec()
    } else {
        vec![]
    };

    // R: carries [c̄.., k̄acc..], xs [C.., x.., ȳ..], invariants [k..].
    let fk = adj.float_consts();
    let kt = adj.const_types();
    let mut br = Graph::new();
    let ct = declare(&mut br, "ct_carry", adj.carry_types());
    let acc = declare(&mut br, "ct_invariant", fk.iter().map(|&j| kt[j].clone()));
    let body_ins = adj.input_types();
    let step_c = declare(&mut br, "carry", body_ins[..c].iter().cloned());
    let step_x = declare(&mut br, "x", body_ins[c..c + k].iter().cloned());
    let step_ct_y = declare(&mut br, "ct_y", adj.y_types());
    let inv = declare(&mut br, "invariant", body_ins[c + k..].iter().cloned());
    let mut args = step_c.clone();
    args.extend(&step_x);
    args.extend(&inv);
    args.extend(&ct);
    args.extend(&step_ct_y);
    let bars = br.inline(vjp, &args)?;
    let fx = adj.float_xs().len();
    let mut outs = bars[..c].to_vec();
    for (a, &kb) in acc.iter().zip(&bars[c + fx..]) {
        outs.push(br.add(*a, kb)?);
    }
    outs.extend_from_slice(&bars[c..c + fx]);
    if outs.is_empty() {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!(
                "{}: the loop has no floating-point value to differentiate",
                adj.name
            ),
        });
    }
    br.set_outputs(outs);
    let r = LoopOp::scan(
        format!("{}/reverse", adj.name),
        br,
        c + fk.len(),
        c + k + p,
        adj.length,
        !adj.reverse,
        Some(adj.checkpoints),
    )?;
    let mut r_ops = ct_final.to_vec();
    for &j in &fk {
        let z = g.full(kt[j].shape.clone(), 0.0, kt[j].dtype);
        r_ops.push(z);
    }
    r_ops.extend(&stacked_carries);
    r_ops.extend(xs);
    r_ops.extend(ct_ys);
    r_ops.extend(consts);
    let rnode = g.push(Op::Loop(r.clone()), &r_ops)?;
    let pieces = unpack(&mut g, rnode, &r.segments())?;
    // [c̄(0).., k̄.., x̄s..] -> [c̄(0).., x̄s.., k̄..]
    let mut ordered = pieces[..c].to_vec();
    ordered.extend_from_slice(&pieces[c + fk.len()..]);
    ordered.extend_from_slice(&pieces[c..c + fk.len()]);
    let out = pack(&mut g, &ordered)?;
    debug_assert_eq!(g.ty(out), adj.out_type());
    g.set_outputs(vec![out]);
    Ok(g)
}

/// Loops with a spine or residuals are made by the compiler after
/// differentiation: they have no derivative rules or batching.
pub fn no_spine(l: &LoopOp) -> Result<()> {
    if l.fused() {
        return Err(Error::Unsupported(format!(
            "{}: a loop fused with its adjoint by the compiler has no derivative rules or batching; transform the graph before compiling it",
            l.name
        )));
    }
    Ok(())
}

/// Declares inputs `{prefix}0, {prefix}1, ..` of the given types.
fn declare(
    g: &mut Graph,
    prefix: &str,
    types: impl IntoIterator<Item = crate::TensorType>,
) -> Vec<NodeId> {
    types
        .into_iter()
        .enumerate()
        .map(|(i, t)| g.input(format!("{prefix}{i}"), t.shape, t.dtype))
        .collect()
}

/// Declares inputs like `like`'s (names and types) and returns them.
pub fn declare_like(g: &mut Graph, like: &Graph) -> Vec<NodeId> {
    like.inputs()
        .iter()
        .map(|i| {
            let t = like.ty(i.node);
            g.input(i.name.clone(), t.shape, t.dtype)
        })
        .collect()
}

/// A scan with `l`'s length, direction and budget.
pub fn forward_like(
    l: &LoopOp,
    name: String,
    body: Graph,
    carries: usize,
    xs: usize,
) -> Result<super::LoopRef> {
    LoopOp::scan(
        name,
        body,
        carries,
        xs,
        l.length,
        l.reverse,
        Some(l.checkpoints),
    )
}
