//! Rerolling: many isomorphic copies of one small computation, each
//! reading different slices of the same tensor, become one batched
//! computation over a gather (an SLP-style pass, the graph-level opposite
//! of unrolling).
//!
//! A trace-time loop such as
//!
//! ```text
//! for (i, j) in pairs { e = e + f(p.slice_range(3 * i..3 * i + 3, 0), p.slice_range(3 * j..3 * j + 3, 0)) }
//! ```
//!
//! leaves one copy of `f`'s nodes per pair that differ only in the slice
//! offsets. [`reroll`] finds such *groups*, builds `f` once over `[.., K]`
//! operands (the batch axis last) gathered by constant index tables
//! (`gather(p, idx)` with `idx[.., k] = start_k .. start_k + len`), and
//! gives each copy's result back as row `k` of the batched result. A sum of all `K` rows (the loop's
//! accumulation) becomes one reduction over the batch axis (module `sums`).
//! Every later pass, the autodiff transforms and the planner then see a
//! graph whose size does not grow with `K`.
//!
//! What a group is, exactly:
//! - a *lane leaf* is a slice along axis 0 of a node that does not itself
//!   depend on a lane leaf (an *invariant*: an input, a constant, anything
//!   computed from them only);
//! - every node computed from lane leaves by a rerollable op (element-wise
//!   ops, casts, reductions, reshapes, broadcasts, transposes and slices of
//!   such nodes) gets a structural class: the op (with every attribute,
//!   including the start of a slice of a computed value), the shape, the
//!   dtype and its operands' classes; a lane leaf's class is its source
//!   node, length and type (not its start); an invariant's is its node
//!   (a constant's, its literal and type);
//! - a group is a class with at least [`MIN_LANES`] members that are
//!   *roots* (an output, or read by a node outside every such class), each
//!   member matched node by node against the first one (the template), so
//!   a hash collision can never merge different computations.
//!
//! Rounding: each lane's arithmetic is the same ops in the same order, so
//! the rows of the batched result equal the unrolled values bit for bit.
//! Only a rerolled *sum* reassociates: `((e + t₀) + t₁) + …` becomes
//! `e + Σ_k t_k` in the reduction kernel's order, which differs from the
//! sequential sum by the usual floating-point bound (at most about
//! `K · ε · Σ|t_k|`).
//!
//! ```
//! use rlx::{core::passes::reroll, DType, Graph, Op};
//! let mut g = Graph::new();
//! let p = g.input("p", [64], DType::F64);
//! let mut e = g.scalar(0.0, DType::F64);
//! for i in 0..32 {
//!     let a = g.slice_range(p, 2 * i..2 * i + 2, 0).unwrap();
//!     let s = g.square(a).unwrap();
//!     let t = g.sum_all(s).unwrap();
//!     e = g.add(e, t).unwrap();
//! }
//! g.set_outputs(vec![e]);
//! let r = reroll(&g).unwrap();
//! // One gather, one square, one row sum, one batch sum (and the add of 0).
//! assert!(r.len() < 12, "{r}");
//! assert!(r.nodes().iter().any(|n| matches!(n.op, Op::Gather { .. })));
//! ```

mod batch;
mod sums;

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use crate::{Graph, Node, NodeId, Op, Result};

/// The fewest isomorphic copies [`reroll`] turns into one batched
/// computation. Below it, the gathers and the batch reduction cost more
/// than the straight-line copies (and small graphs keep their scalarised
/// form, bit for bit).
pub const MIN_LANES: usize = 16;

/// Rerolls every group of at least [`MIN_LANES`] isomorphic copies of a
/// computation over slices of one tensor (see the [module docs](self)).
/// Returns a copy of `g` when there is none. Inputs and outputs keep their
/// order and types; the result is dead-code free and verified.
pub fn reroll(g: &Graph) -> Result<Graph> {
    let classes = Classes::of(g);
    let groups = groups(g, &classes);
    if groups.is_empty() {
        return Ok(g.clone());
    }
    let (out, batched) = batch::rebuild(g, &groups)?;
    let out = sums::fold_sums(&out, &batched)?;
    super::dce(&out)
}

/// What a node is to rerolling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Depends on no lane leaf.
    Invariant,
    /// A slice along axis 0 of an invariant.
    Leaf,
    /// Computed from lane leaves by a rerollable op.
    Lane,
    /// Depends on a lane leaf through an op rerolling does not batch.
    Barrier,
}

/// Each node's [`Kind`] and structural class (see the module docs).
struct Classes {
    kind: Vec<Kind>,
    class: Vec<u64>,
}

impl Classes {
    fn of(g: &Graph) -> Classes {
        let n = g.len();
        let mut kind: Vec<Kind> = Vec::with_capacity(n);
        let mut class: Vec<u64> = Vec::with_capacity(n);
        for (i, node) in g.nodes().iter().enumerate() {
            let mut h = FxHasher::default();
            let varying = node
                .inputs
                .iter()
                .any(|j| kind[j.index()] != Kind::Invariant);
            let k = if !varying {
                if let (Op::Slice { axis: 0, len, .. }, [src]) = (&node.op, &node.inputs[..]) {
                    (1u8, src.0, *len, &node.shape, node.dtype).hash(&mut h);
                    Kind::Leaf
                } else {
                    match &node.op {
                        Op::Constant(_) => (2u8, &node.op, &node.shape, node.dtype).hash(&mut h),
                        _ => (3u8, i).hash(&mut h),
                    }
                    Kind::Invariant
                }
            } else if batch::rerollable(&node.op)
                && node.inputs.iter().all(|j| kind[j.index()] != Kind::Barrier)
            {
                (4u8, &node.op, &node.shape, node.dtype).hash(&mut h);
                for j in &node.inputs {
                    class[j.index()].hash(&mut h);
                }
                Kind::Lane
            } else {
                (5u8, i).hash(&mut h);
                Kind::Barrier
            };
            kind.push(k);
            class.push(h.finish());
        }
        Classes { kind, class }
    }
}

/// One group: `lanes[k]` is the root of copy `k` (the first is the
/// template), `template` the template's lane nodes in order, and for each
/// lane the node standing for each template node (`nodes[k][t]`) and the
/// start of each lane leaf (`starts[k][l]`, leaves in `leaves` order).
pub(super) struct Group {
    pub(super) lanes: Vec<NodeId>,
    pub(super) template: Vec<NodeId>,
    pub(super) leaves: Vec<NodeId>,
    pub(super) nodes: Vec<Vec<NodeId>>,
    pub(super) starts: Vec<Vec<usize>>,
}

/// The groups of `g`, each with at least [`MIN_LANES`] matched lanes.
fn groups(g: &Graph, c: &Classes) -> Vec<Group> {
    let mut count: FxHashMap<u64, usize> = FxHashMap::default();
    for (i, k) in c.kind.iter().enumerate() {
        if *k == Kind::Lane {
            *count.entry(c.class[i]).or_default() += 1;
        }
    }
    let big = |i: usize| c.kind[i] == Kind::Lane && count[&c.class[i]] >= MIN_LANES;
    // Roots: big nodes read by a node outside the big classes, or outputs.
    let mut root = vec![false; g.len()];
    for &o in g.outputs() {
        root[o.index()] = big(o.index());
    }
    for (i, node) in g.nodes().iter().enumerate() {
        if !big(i) {
            for j in &node.inputs {
                root[j.index()] |= big(j.index());
            }
        }
    }
    let mut by_class: FxHashMap<u64, Vec<NodeId>> = FxHashMap::default();
    let mut order = Vec::new();
    for (i, r) in root.iter().enumerate() {
        if *r {
            let v = by_class.entry(c.class[i]).or_default();
            if v.is_empty() {
                order.push(c.class[i]);
            }
            v.push(NodeId(i as u32));
        }
    }
    order
        .iter()
        .filter_map(|h| {
            let members = &by_class[h];
            (members.len() >= MIN_LANES)
                .then(|| group(g, c, members))
                .flatten()
        })
        .collect()
}

/// The group of `members` (roots of one class, in graph order): the
/// template is the first, the others are kept when they match it node by
/// node. `None` when fewer than [`MIN_LANES`] match.
fn group(g: &Graph, c: &Classes, members: &[NodeId]) -> Option<Group> {
    let rep = members[0];
    // The template's lane nodes and leaves, in graph order.
    let mut template = Vec::new();
    let mut leaves = Vec::new();
    let mut seen: FxHashMap<NodeId, ()> = FxHashMap::default();
    let mut stack = vec![rep];
    seen.insert(rep, ());
    while let Some(t) = stack.pop() {
        template.push(t);
        for &j in &g.node(t).inputs {
            match c.kind[j.index()] {
                Kind::Lane if seen.insert(j, ()).is_none() => stack.push(j),
                Kind::Leaf if seen.insert(j, ()).is_none() => leaves.push(j),
                _ => {}
            }
        }
    }
    template.sort_unstable();
    leaves.sort_unstable();
    let t_index: FxHashMap<NodeId, usize> =
        template.iter().enumerate().map(|(k, &t)| (t, k)).collect();
    let l_index: FxHashMap<NodeId, usize> =
        leaves.iter().enumerate().map(|(k, &l)| (l, k)).collect();
    let mut grp = Group {
        lanes: Vec::new(),
        template,
        leaves,
        nodes: Vec::new(),
        starts: Vec::new(),
    };
    for &m in members {
        if let Some((nodes, starts)) = matched(g, c, &grp, &t_index, &l_index, m) {
            grp.lanes.push(m);
            grp.nodes.push(nodes);
            grp.starts.push(starts);
        }
    }
    (grp.lanes.len() >= MIN_LANES).then_some(grp)
}

/// Lane `root` matched against the template of `grp`: the node standing
/// for each template node and the start of each leaf, or `None` if the
/// lane is not an exact copy.
fn matched(
    g: &Graph,
    c: &Classes,
    grp: &Group,
    t_index: &FxHashMap<NodeId, usize>,
    l_index: &FxHashMap<NodeId, usize>,
    root: NodeId,
) -> Option<(Vec<NodeId>, Vec<usize>)> {
    const UNSET: NodeId = NodeId(u32::MAX);
    let mut nodes = vec![UNSET; grp.template.len()];
    let mut starts = vec![usize::MAX; grp.leaves.len()];
    let rep = grp.root();
    nodes[t_index[&rep]] = root;
    let mut stack = vec![(rep, root)];
    while let Some((t, l)) = stack.pop() {
        let (tn, ln) = (g.node(t), g.node(l));
        if !same_op(tn, ln) || c.kind[l.index()] != Kind::Lane {
            return None;
        }
        for (&a, &b) in tn.inputs.iter().zip(&ln.inputs) {
            match c.kind[a.index()] {
                Kind::Lane => {
                    let slot = &mut nodes[t_index[&a]];
                    if *slot == UNSET {
                        *slot = b;
                        stack.push((a, b));
                    } else if *slot != b {
                        return None;
                    }
                }
                Kind::Leaf => {
                    let (an, bn) = (g.node(a), g.node(b));
                    let (
                        Op::Slice { len: la, .. },
                        Op::Slice {
                            axis: 0,
                            start,
                            len: lb,
                        },
                    ) = (&an.op, &bn.op)
                    else {
                        return None;
                    };
                    if c.kind[b.index()] != Kind::Leaf
                        || la != lb
                        || an.inputs != bn.inputs
                        || an.dtype != bn.dtype
                    {
                        return None;
                    }
                    let slot = &mut starts[l_index[&a]];
                    if *slot == usize::MAX {
                        *slot = *start;
                    } else if *slot != *start {
                        return None;
                    }
                }
                Kind::Invariant => {
                    let (an, bn) = (g.node(a), g.node(b));
                    let equal_constants = matches!(an.op, Op::Constant(_)) && same_op(an, bn);
                    if a != b && !equal_constants {
                        return None;
                    }
                }
                Kind::Barrier => return None,
            }
        }
    }
    Some((nodes, starts))
}

impl Group {
    /// The template's root: its last node (a root follows its operands).
    pub(super) fn root(&self) -> NodeId {
        *self.template.last().expect("a template holds its root")
    }
}

/// Same op (every attribute), type and operand count.
fn same_op(a: &Node, b: &Node) -> bool {
    a.op == b.op && a.shape == b.shape && a.dtype == b.dtype && a.inputs.len() == b.inputs.len()
}

#[cfg(test)]
mod tests;
