//! Sums over every row of a batched node become one reduction over the
//! batch axis: `((e + t₀) + t₁) + … + t_{K-1}`, with `t_k` row `k` of `b`,
//! becomes `e + sum(b, last axis)`. This reassociates the sum (see the bound
//! in the [parent module](super)).

use rustc_hash::FxHashMap;

use super::batch::Rows;
use crate::{BinaryOp, Graph, NodeId, Op, Result};

/// `g` (the rebuilt graph, whose batched rows `rows` lists) with each sum
/// tree that adds every row of a batched node exactly once folded into a
/// reduction. Not yet dead-code free.
pub(super) fn fold_sums(g: &Graph, rows: &Rows) -> Result<Graph> {
    let n = g.len();
    let mut users = vec![0usize; n];
    let mut user = vec![NodeId(u32::MAX); n];
    for (i, node) in g.nodes().iter().enumerate() {
        for j in &node.inputs {
            users[j.index()] += 1;
            user[j.index()] = NodeId(i as u32);
        }
    }
    for o in g.outputs() {
        users[o.index()] += 2; // an output is never inside a tree
    }
    let plain_add = |i: usize| {
        let node = &g.nodes()[i];
        node.op == Op::Binary(BinaryOp::Add)
            && node
                .inputs
                .iter()
                .all(|j| g.node(*j).shape == node.shape && g.node(*j).dtype == node.dtype)
    };
    let inner = |i: usize| plain_add(i) && users[i] == 1 && plain_add(user[i].index());
    // Each tree root's replacement: its other leaves in order, then the
    // batched nodes all of whose rows it adds.
    let mut plans: FxHashMap<usize, (Vec<NodeId>, Vec<NodeId>)> = FxHashMap::default();
    for r in 0..n {
        if !plain_add(r) || inner(r) {
            continue;
        }
        let mut leaves = Vec::new();
        let mut stack = vec![NodeId(r as u32)];
        while let Some(a) = stack.pop() {
            let node = g.node(a);
            for &j in node.inputs.iter().rev() {
                if inner(j.index()) {
                    stack.push(j);
                } else {
                    leaves.push(j);
                }
            }
        }
        // `leaves` is in right-to-left order of the written sum.
        leaves.reverse();
        let mut seen: FxHashMap<NodeId, Vec<bool>> = FxHashMap::default();
        let shape = &g.nodes()[r].shape;
        let mut dup = Vec::new();
        for &l in &leaves {
            if let Some(&(b, k)) = rows.row.get(&l) {
                if g.node(l).shape != *shape {
                    continue;
                }
                let s = seen.entry(b).or_insert_with(|| vec![false; rows.lanes[&b]]);
                if std::mem::replace(&mut s[k], true) {
                    dup.push(b);
                }
            }
        }
        let mut full: Vec<NodeId> = seen
            .iter()
            .filter(|(b, s)| !dup.contains(*b) && s.iter().all(|x| *x))
            .map(|(b, _)| *b)
            .collect();
        full.sort_unstable();
        if full.is_empty() {
            continue;
        }
        let others = leaves
            .into_iter()
            .filter(|l| !rows.row.get(l).is_some_and(|(b, _)| full.contains(b)))
            .collect();
        plans.insert(r, (others, full));
    }
    if plans.is_empty() {
        return Ok(g.clone());
    }
    let mut out = Graph::new();
    let mut map: Vec<NodeId> = vec![NodeId(u32::MAX); n];
    for inp in g.inputs() {
        let node = g.try_node(inp.node)?;
        map[inp.node.index()] = out.input(inp.name.clone(), node.shape.clone(), node.dtype);
    }
    for (i, node) in g.nodes().iter().enumerate() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        map[i] = match plans.get(&i) {
            Some((others, full)) => {
                let mut terms: Vec<NodeId> = others.iter().map(|l| map[l.index()]).collect();
                for b in full {
                    let b = map[b.index()];
                    let last = out.shape(b).rank() - 1;
                    terms.push(out.sum(b, &[last])?);
                }
                let mut acc = terms[0];
                for &t in &terms[1..] {
                    acc = out.add(acc, t)?;
                }
                acc
            }
            None => {
                let args: Vec<NodeId> = node.inputs.iter().map(|j| map[j.index()]).collect();
                super::super::copy(&mut out, node, &args)
            }
        };
    }
    out.set_outputs(g.outputs().iter().map(|o| map[o.index()]).collect());
    Ok(out)
}
