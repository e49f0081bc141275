//! Building the rerolled graph: each group's template over `[.., K]`
//! operands (the batch axis last; leaves gathered by constant index
//! tables), and each lane's value read back as row `k` of the batched node
//! where something outside the group reads it.
//!
//! The batch axis is the last one so that NumPy broadcasting aligns the
//! lane axes of batched operands of different ranks by itself, and a
//! reduction over a lane's own (short) axis runs over long contiguous rows
//! of the batch.

use rustc_hash::FxHashMap;

use super::{Group, Kind};
use crate::{DType, Graph, Literal, Node, NodeId, Op, Result, Shape};

/// Whether rerolling batches `op`: the ops whose batched form is the same
/// op over one more leading axis.
pub(super) fn rerollable(op: &Op) -> bool {
    match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Cast(_)
        | Op::Reduce { .. }
        | Op::Transpose { .. }
        | Op::Reshape { .. }
        | Op::Broadcast { .. }
        | Op::Slice { .. }
        | Op::StopGradient => true,
        Op::Input { .. }
        | Op::Constant(_)
        | Op::MatMul
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::ScatterAdd { .. }
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Solve
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => false,
    }
}

/// The rows of batched nodes the rebuilt graph reads: `row[n] = (b, k)`
/// when node `n` is row `k` of batched node `b`, and `lanes[b]` is `b`'s
/// batch size.
#[derive(Default)]
pub(super) struct Rows {
    pub(super) row: FxHashMap<NodeId, (NodeId, usize)>,
    pub(super) lanes: FxHashMap<NodeId, usize>,
    memo: FxHashMap<(NodeId, usize), NodeId>,
}

impl Rows {
    /// Row `k` (along the last axis) of batched node `b`, shaped `shape`.
    fn get(&mut self, out: &mut Graph, b: NodeId, k: usize, shape: &Shape) -> Result<NodeId> {
        if let Some(&r) = self.memo.get(&(b, k)) {
            return Ok(r);
        }
        let s = out.slice_range(b, k..k + 1, shape.rank())?;
        let r = out.reshape(s, shape.clone())?;
        self.memo.insert((b, k), r);
        self.row.insert(r, (b, k));
        Ok(r)
    }
}

/// `g` with each group computed once, batched, where its first lane was;
/// a lane node read from outside its group becomes a row of the batched
/// node. Not yet dead-code free.
pub(super) fn rebuild(g: &Graph, groups: &[Group]) -> Result<(Graph, Rows)> {
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    for inp in g.inputs() {
        let n = g.try_node(inp.node)?;
        map[inp.node.index()] = Some(out.input(inp.name.clone(), n.shape.clone(), n.dtype));
    }
    // (group, lane, template index) of every lane node, first claim kept.
    let mut claim: Vec<Option<(usize, usize, usize)>> = vec![None; g.len()];
    for (gi, grp) in groups.iter().enumerate() {
        for (k, nodes) in grp.nodes.iter().enumerate() {
            for (t, n) in nodes.iter().enumerate() {
                claim[n.index()].get_or_insert((gi, k, t));
            }
        }
    }
    let mut built: Vec<Option<Vec<NodeId>>> = vec![None; groups.len()];
    let mut rows = Rows::default();
    for (i, node) in g.nodes().iter().enumerate() {
        if map[i].is_some() {
            continue;
        }
        if let Some((gi, _, t)) = claim[i] {
            let grp = &groups[gi];
            if built[gi].is_none() && t + 1 == grp.template.len() {
                built[gi] = Some(build(g, &mut out, &map, grp, &mut rows)?);
            }
            if built[gi].is_some() {
                continue; // read as a row where needed
            }
        }
        let mut args = Vec::with_capacity(node.inputs.len());
        for j in &node.inputs {
            let a = match (map[j.index()], claim[j.index()]) {
                (Some(a), _) => a,
                (None, Some((gi, k, t))) => {
                    let b = built[gi]
                        .as_ref()
                        .expect("a skipped lane node's group is built")[t];
                    let a = rows.get(&mut out, b, k, &g.node(*j).shape)?;
                    map[j.index()] = Some(a);
                    a
                }
                (None, None) => unreachable!("operands precede their users"),
            };
            args.push(a);
        }
        map[i] = Some(super::super::copy(&mut out, node, &args));
    }
    let outputs = g
        .outputs()
        .iter()
        .map(|o| match (map[o.index()], claim[o.index()]) {
            (Some(a), _) => Ok(a),
            (None, Some((gi, k, t))) => {
                let b = built[gi]
                    .as_ref()
                    .expect("a skipped lane node's group is built")[t];
                rows.get(&mut out, b, k, &g.node(*o).shape)
            }
            (None, None) => unreachable!("every node is visited"),
        })
        .collect::<Result<Vec<_>>>()?;
    out.set_outputs(outputs);
    Ok((out, rows))
}

/// Group `grp` over `K` lanes, built in `out` (whose `map` holds every
/// invariant the template reads): the batched node of each template node.
fn build(
    g: &Graph,
    out: &mut Graph,
    map: &[Option<NodeId>],
    grp: &Group,
    rows: &mut Rows,
) -> Result<Vec<NodeId>> {
    let lanes = grp.lanes.len();
    let kind_of = |a: NodeId| {
        if grp.template.binary_search(&a).is_ok() {
            Kind::Lane
        } else if grp.leaves.binary_search(&a).is_ok() {
            Kind::Leaf
        } else {
            Kind::Invariant
        }
    };
    let mut gathered: Vec<Option<NodeId>> = vec![None; grp.leaves.len()];
    let mut batched: Vec<NodeId> = Vec::with_capacity(grp.template.len());
    for &t in &grp.template {
        let tn = g.node(t);
        let mut args = Vec::with_capacity(tn.inputs.len());
        for &a in &tn.inputs {
            let arg = match kind_of(a) {
                Kind::Lane => {
                    Operand::Batched(batched[grp.template.binary_search(&a).unwrap_or(0)])
                }
                Kind::Leaf => {
                    let l = grp.leaves.binary_search(&a).unwrap_or(0);
                    let node = match gathered[l] {
                        Some(n) => n,
                        None => {
                            let n = gather(g, out, map, grp, l)?;
                            gathered[l] = Some(n);
                            n
                        }
                    };
                    Operand::Batched(node)
                }
                Kind::Invariant | Kind::Barrier => {
                    Operand::Plain(map[a.index()].expect("invariants precede the group"))
                }
            };
            args.push(arg);
        }
        batched.push(batched_op(out, tn, &args, lanes)?);
    }
    rows.lanes
        .insert(*batched.last().expect("a template is not empty"), lanes);
    for &b in &batched {
        rows.lanes.insert(b, lanes);
    }
    Ok(batched)
}

/// Leaf `l` of every lane: `gather(source, idx)` along axis 0 with
/// `idx[.., k] = start_k .. start_k + len`, shaped `[len, .., K]`.
fn gather(
    g: &Graph,
    out: &mut Graph,
    map: &[Option<NodeId>],
    grp: &Group,
    l: usize,
) -> Result<NodeId> {
    let leaf = g.node(grp.leaves[l]);
    let Op::Slice { len, .. } = leaf.op else {
        unreachable!("a lane leaf is a slice")
    };
    let src = map[leaf.inputs[0].index()].expect("a leaf's source precedes the group");
    let lanes = grp.lanes.len();
    let idx: Vec<i64> = (0..len)
        .flat_map(|m| grp.starts.iter().map(move |s| (s[l] + m) as i64))
        .collect();
    let idx = out.constant(Literal::I64(idx.into()), [len, lanes], DType::I64)?;
    let x = out.gather(src, idx, 0)?;
    // `[len, K, rest..]`: the batch axis to the end.
    let rank = out.shape(x).rank();
    if rank == 2 {
        return Ok(x);
    }
    let perm: Vec<usize> = std::iter::once(0).chain(2..rank).chain([1]).collect();
    out.transpose(x, &perm)
}

/// An operand of a batched op: batched (`lane shape ++ [K]`) or read by
/// every lane as it is.
#[derive(Clone, Copy)]
enum Operand {
    Batched(NodeId),
    Plain(NodeId),
}

/// `node`'s op over `lanes` lanes: the same op with one more trailing axis.
fn batched_op(out: &mut Graph, node: &Node, args: &[Operand], lanes: usize) -> Result<NodeId> {
    let with_lanes = |s: &[usize]| -> Shape {
        let mut d = Vec::with_capacity(s.len() + 1);
        d.extend_from_slice(s);
        d.push(lanes);
        Shape::new(d)
    };
    // A plain operand of rank ≥ 1: a trailing 1 for the batch axis, so
    // that broadcasting aligns its axes with the lane axes. Batched ones
    // align by themselves (batch axis last).
    let aligned = |out: &mut Graph, a: Operand| -> Result<NodeId> {
        match a {
            Operand::Batched(n) => Ok(n),
            Operand::Plain(n) if out.shape(n).rank() == 0 => Ok(n),
            Operand::Plain(n) => {
                let mut d = out.shape(n).dims().to_vec();
                d.push(1);
                out.reshape(n, d)
            }
        }
    };
    let only = |a: &Operand| match a {
        Operand::Batched(n) => *n,
        Operand::Plain(n) => *n,
    };
    match &node.op {
        Op::Unary(_) | Op::Cast(_) | Op::StopGradient => {
            out.push(node.op.clone(), &[only(&args[0])])
        }
        Op::Binary(_) | Op::Compare(_) | Op::Select => {
            let mut xs = Vec::with_capacity(args.len());
            for &a in args {
                xs.push(aligned(out, a)?);
            }
            out.push(node.op.clone(), &xs)
        }
        Op::Reduce { op, axes } => out.reduce(*op, only(&args[0]), axes),
        Op::Transpose { perm } => {
            let perm: Vec<usize> = perm.iter().copied().chain([perm.len()]).collect();
            out.transpose(only(&args[0]), &perm)
        }
        Op::Reshape { shape } => out.reshape(only(&args[0]), with_lanes(shape.dims())),
        Op::Broadcast { shape } => out.broadcast(only(&args[0]), with_lanes(shape.dims())),
        Op::Slice { axis, start, len } => {
            out.slice_range(only(&args[0]), *start..*start + *len, *axis)
        }
        Op::Input { .. }
        | Op::Constant(_)
        | Op::MatMul
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::ScatterAdd { .. }
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Solve
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => unreachable!("only rerollable ops are batched"),
    }
}
