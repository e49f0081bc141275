//! Symbolic propagation of dependency sets through a graph, one rule per
//! op (an exhaustive `match`, as every per-op table).
//!
//! Each node gets, per element, the set of differentiated input elements
//! (columns) it depends on: exact for element-wise ops, broadcasting,
//! movement ops (transpose, reshape, broadcast, slice, concat) and
//! gather/scatter with constant indices; conservative (a superset) where
//! the structure depends on values (traced indices) or where tracking it
//! would cost more than it saves (solve, custom ops). Matrix products and
//! reductions are exact up to numerical cancellation.
//!
//! For Hessians, every node that output 0 depends on also adds the pairs of
//! columns its op combines nonlinearly (`x·y` adds `S_x × S_y`, `exp(x)`
//! adds `S_x × S_x`, linear ops nothing). The union over all nodes is a
//! superset of the Hessian's nonzeros (the global rule of
//! SparseConnectivityTracer.jl), exact when every element reaches the output.

use crate::sparsity::sets::{broadcast_map, strided, Sets};
use crate::{BinaryOp, Graph, Literal, NodeId, Op, ReduceOp, Result, Shape, UnaryOp};

/// Hessian pairs, both orders, possibly repeated, up to a limit.
pub(crate) struct Pairs {
    pub(crate) v: Vec<(u32, u32)>,
    limit: usize,
    /// A product was refused: the pairs would have passed `limit`.
    over: bool,
}

impl Pairs {
    /// No pairs yet; at most `limit` may be collected.
    pub(crate) fn within(limit: usize) -> Pairs {
        Pairs {
            v: Vec::new(),
            limit,
            over: false,
        }
    }
}

/// The dependency sets of `out`'s elements on the inputs `wrt` (whose
/// elements are numbered consecutively, in order, from 0), and, with
/// `pairs`, the nonlinear interactions of everything `out` depends on.
/// `None` when the sets of the nodes visited hold more than `limit` entries
/// in all (an element's place counting as one), or the pairs pass their own limit: the pattern would cost more
/// to find than its caller can save.
pub(crate) fn propagate(
    g: &Graph,
    wrt: &[NodeId],
    out: NodeId,
    mut pairs: Option<&mut Pairs>,
    limit: usize,
) -> Result<Option<Sets>> {
    let mut needed = vec![false; g.len()];
    needed[out.index()] = true;
    for i in (0..=out.index()).rev() {
        if needed[i] {
            for x in &g.nodes()[i].inputs {
                needed[x.index()] = true;
            }
        }
    }
    let mut offsets = vec![None; g.len()];
    let mut off = 0u32;
    for &w in wrt {
        offsets[w.index()].get_or_insert(off);
        off += g.shape(w).numel() as u32;
    }
    let mut deps: Vec<Option<Sets>> = vec![None; g.len()];
    let mut entries = 0usize;
    for i in 0..=out.index() {
        if !needed[i] {
            continue;
        }
        // A node's sets take one offset per element before any entry:
        // refuse a node that alone would pass the limit, before allocating.
        entries = entries.saturating_add(g.shape(NodeId(i as u32)).numel());
        if entries > limit {
            return Ok(None);
        }
        let id = NodeId(i as u32);
        let d = node_deps(g, id, &deps, offsets[i], pairs.as_deref_mut())?;
        entries = entries.saturating_add(d.as_ref().map_or(0, |s| s.idx.len()));
        if entries > limit || pairs.as_ref().is_some_and(|p| p.over) {
            return Ok(None);
        }
        deps[i] = d.filter(|s| !s.all_empty());
    }
    Ok(Some(
        deps[out.index()]
            .take()
            .unwrap_or_else(|| empty(g.shape(out).numel())),
    ))
}

/// `n` elements depending on nothing.
fn empty(n: usize) -> Sets {
    Sets {
        ptr: vec![0; n + 1],
        idx: Vec::new(),
    }
}

/// Element `k` of an operand's sets (`None`: depends on nothing).
fn at(s: Option<&Sets>, k: usize) -> &[u32] {
    s.map_or(&[], |s| s.get(k))
}

/// Adds `a × b` and `b × a`.
fn product(pairs: &mut Pairs, a: &[u32], b: &[u32]) {
    if pairs.over
        || pairs
            .v
            .len()
            .saturating_add((2 * a.len()).saturating_mul(b.len()))
            > pairs.limit
    {
        pairs.over = true;
        return;
    }
    for &x in a {
        for &y in b {
            pairs.v.push((x, y));
            pairs.v.push((y, x));
        }
    }
}

/// How a unary op's derivatives look, for the patterns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape1 {
    /// Zero first derivative wherever it has one (rounding, sign).
    Flat,
    /// Zero second derivative (`neg`, and piecewise linear `abs`, `relu`).
    Linear,
    /// Nonzero second derivative somewhere.
    Curved,
}

fn unary_shape(u: UnaryOp) -> Shape1 {
    match u {
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Not => {
            Shape1::Flat
        }
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu => Shape1::Linear,
        UnaryOp::Conj | UnaryOp::Real | UnaryOp::Imag => Shape1::Linear,
        UnaryOp::Powi(0) => Shape1::Flat,
        UnaryOp::Powi(1) => Shape1::Linear,
        UnaryOp::Powi(_)
        | UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Ln
        | UnaryOp::Log1p
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Tanh
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sigmoid
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Recip
        | UnaryOp::Square
        | UnaryOp::Gelu
        | UnaryOp::Silu
        | UnaryOp::Erf => Shape1::Curved,
    }
}

/// The dependency sets of node `id` from those of its operands.
fn node_deps(
    g: &Graph,
    id: NodeId,
    deps: &[Option<Sets>],
    wrt_offset: Option<u32>,
    pairs: Option<&mut Pairs>,
) -> Result<Option<Sets>> {
    let n = g.node(id);
    let dims = n.shape.dims();
    let numel = n.shape.numel();
    let x = &n.inputs;
    let d = |i: usize| deps[x[i].index()].as_ref();
    let xdims = |i: usize| g.shape(x[i]).dims();
    if !n.dtype.is_inexact() {
        return Ok(None);
    }
    let out = match &n.op {
        Op::Input { .. } => wrt_offset.map(|off| Sets::identity(numel, off)),
        Op::Constant(_) | Op::Compare(_) | Op::StopGradient => None,
        Op::Unary(u) => {
            let shape = unary_shape(*u);
            let s = d(0).filter(|_| shape != Shape1::Flat).cloned();
            if let (Some(s), Some(p), Shape1::Curved) = (&s, pairs, shape) {
                for k in 0..s.len() {
                    product(p, s.get(k), s.get(k));
                }
            }
            s
        }
        Op::Binary(b) => {
            let (da, db) = (d(0), d(1));
            let ma = broadcast_map(xdims(0), dims);
            let mb = broadcast_map(xdims(1), dims);
            let mut s = Sets::with_capacity(numel);
            for k in 0..numel {
                s.push_union([at(da, ma[k]), at(db, mb[k])]);
            }
            if let Some(p) = pairs {
                for k in 0..numel {
                    let (a, bb) = (at(da, ma[k]), at(db, mb[k]));
                    match b {
                        BinaryOp::Add
                        | BinaryOp::Sub
                        | BinaryOp::Min
                        | BinaryOp::Max
                        | BinaryOp::And
                        | BinaryOp::Or
                        | BinaryOp::Complex => {}
                        BinaryOp::Mul | BinaryOp::MulZero => product(p, a, bb),
                        BinaryOp::Div => product(p, s.get(k), bb),
                        BinaryOp::Pow | BinaryOp::Atan2 => product(p, s.get(k), s.get(k)),
                    }
                }
            }
            Some(s)
        }
        Op::Select => {
            let (da, db) = (d(1), d(2));
            let ma = broadcast_map(xdims(1), dims);
            let mb = broadcast_map(xdims(2), dims);
            let mut s = Sets::with_capacity(numel);
            for k in 0..numel {
                s.push_union([at(da, ma[k]), at(db, mb[k])]);
            }
            Some(s)
        }
        Op::Cast(_) => d(0).cloned(),
        Op::Reduce { op, axes } => {
            let groups = Groups::reduce(xdims(0), axes);
            let s = groups.unions(d(0));
            if let (Some(p), ReduceOp::Prod) = (pairs, op) {
                for k in 0..s.len() {
                    product(p, s.get(k), s.get(k));
                }
            }
            match op {
                ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod => {
                    Some(s)
                }
            }
        }
        Op::MatMul => {
            let (ad, bd) = (xdims(0), xdims(1));
            let r = ad.len();
            // Row unions of `a` (shape `[.., m, 1]`), column unions of `b`
            // (shape `[.., 1, n]`), each broadcast to the output.
            let rows = Groups::reduce(ad, &[r - 1]).unions(d(0));
            let cols = Groups::reduce(bd, &[bd.len() - 2]).unions(d(1));
            let mut rd = ad.to_vec();
            rd[r - 1] = 1;
            let mut cd = bd.to_vec();
            let rb = cd.len() - 2;
            cd[rb] = 1;
            let mr = broadcast_map(&rd, dims);
            let mc = broadcast_map(&cd, dims);
            let mut s = Sets::with_capacity(numel);
            for k in 0..numel {
                s.push_union([rows.get(mr[k]), cols.get(mc[k])]);
            }
            if let Some(p) = pairs {
                for k in 0..numel {
                    product(p, rows.get(mr[k]), cols.get(mc[k]));
                }
            }
            Some(s)
        }
        Op::Transpose { perm } => {
            let own = Shape::new(xdims(0)).strides();
            let strides: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
            d(0).map(|s| s.gather(&strided(dims, &strides, 0)))
        }
        Op::Reshape { .. } | Op::Broadcast { .. } => {
            let map = match &n.op {
                Op::Broadcast { .. } => broadcast_map(xdims(0), dims),
                _ => (0..numel).collect(),
            };
            d(0).map(|s| s.gather(&map))
        }
        Op::Slice { axis, start, .. } => {
            let own = Shape::new(xdims(0)).strides();
            d(0).map(|s| s.gather(&strided(dims, &own, start * own[*axis])))
        }
        Op::Concat { axis } => {
            let outer: usize = dims[..*axis].iter().product();
            let inner: usize = dims[axis + 1..].iter().product();
            let mut s = Sets::with_capacity(numel);
            for o in 0..outer {
                for (j, &xj) in x.iter().enumerate() {
                    let len = g.shape(xj).dim(*axis);
                    for a in 0..len {
                        for i in 0..inner {
                            s.push_union([at(d(j), (o * len + a) * inner + i)]);
                        }
                    }
                }
            }
            Some(s)
        }
        Op::Gather { axis } => {
            let (outer, len, inner) = split(xdims(0), *axis);
            let nidx = g.shape(x[1]).numel();
            let idx = constant_indices(g, x[1], len);
            let all = Groups::along(outer, len, inner).unions(d(0));
            let mut s = Sets::with_capacity(numel);
            for o in 0..outer {
                for t in 0..nidx {
                    for i in 0..inner {
                        match &idx {
                            Some(v) => s.push_union([at(d(0), (o * len + v[t]) * inner + i)]),
                            None => s.push_from(&all, o * inner + i),
                        }
                    }
                }
            }
            Some(s)
        }
        Op::ScatterAdd { axis } => {
            let (outer, len, inner) = split(dims, *axis);
            let nidx = g.shape(x[1]).numel();
            let idx = constant_indices(g, x[1], len);
            let all = Groups::along(outer, nidx, inner).unions(d(2));
            // Which update positions land on each target position.
            let mut hits: Vec<Vec<usize>> = vec![Vec::new(); len];
            if let Some(v) = &idx {
                for (t, &a) in v.iter().enumerate() {
                    hits[a].push(t);
                }
            }
            let mut s = Sets::with_capacity(numel);
            let mut parts: Vec<&[u32]> = Vec::new();
            for o in 0..outer {
                for (a, hit) in hits.iter().enumerate() {
                    for i in 0..inner {
                        parts.clear();
                        parts.push(at(d(0), (o * len + a) * inner + i));
                        match &idx {
                            Some(_) => {
                                for &t in hit {
                                    parts.push(at(d(2), (o * nidx + t) * inner + i));
                                }
                            }
                            None => parts.push(all.get(o * inner + i)),
                        }
                        s.push_union(parts.iter().copied());
                    }
                }
            }
            Some(s)
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            let (outer, len, inner) = split(dims, *axis);
            let all = Groups::along(outer, len, inner).unions(d(0));
            if let Some(p) = pairs {
                for k in 0..all.len() {
                    product(p, all.get(k), all.get(k));
                }
            }
            let map: Vec<usize> = (0..numel)
                .map(|k| (k / (len * inner)) * inner + k % inner)
                .collect();
            Some(all.gather(&map))
        }
        Op::Solve => {
            // Conservative: each batch's solution depends on all of its `a` and `b`.
            let batch: usize = dims[..dims.len() - 2].iter().product();
            let per = numel / batch.max(1);
            let (pa, pb) = (
                g.shape(x[0]).numel() / batch.max(1),
                g.shape(x[1]).numel() / batch.max(1),
            );
            let mut whole = Sets::with_capacity(batch);
            for b in 0..batch {
                let sa = (b * pa..(b + 1) * pa).map(|k| at(d(0), k));
                let sb = (b * pb..(b + 1) * pb).map(|k| at(d(1), k));
                whole.push_union(sa.chain(sb));
            }
            if let Some(p) = pairs {
                for b in 0..batch {
                    product(p, whole.get(b), whole.get(b));
                }
            }
            let map: Vec<usize> = (0..numel).map(|k| k / per.max(1)).collect();
            Some(whole.gather(&map))
        }
        Op::Custom(_) | Op::Loop(_) | Op::Root(_) | Op::SparseSolve(_) => {
            // Conservative: every output element depends on every operand
            // element (a loop's packed result mixes its carries over steps;
            // a root's `dx*/dp` is dense in general).
            let mut whole = Sets::with_capacity(1);
            whole.push_union(x.iter().enumerate().flat_map(|(j, &xj)| {
                (0..g.shape(xj).numel()).map(move |k| at(deps[x[j].index()].as_ref(), k))
            }));
            if let Some(p) = pairs {
                product(p, whole.get(0), whole.get(0));
            }
            Some(whole.gather(&vec![0; numel]))
        }
    };
    Ok(out)
}

/// `(outer, dims[axis], inner)`: the sizes before, at and after `axis`.
pub(crate) fn split(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis],
        dims[axis + 1..].iter().product(),
    )
}

/// The values of an index operand known at trace time (a constant), each
/// in `0..len`; `None` for traced indices or any index out of range (the
/// run reports those).
pub(crate) fn constant_indices(g: &Graph, idx: NodeId, len: usize) -> Option<Vec<usize>> {
    let Op::Constant(lit) = &g.node(idx).op else {
        return None;
    };
    (0..g.shape(idx).numel())
        .map(|t| {
            let v = match lit {
                Literal::I64(_) | Literal::SplatI64(_) => lit.get_i64(t),
                Literal::F64(_) | Literal::Splat(_) => lit.get_f64(t) as i64,
            };
            usize::try_from(v).ok().filter(|&v| v < len)
        })
        .collect()
}

/// A partition of a node's elements into groups (the elements one
/// reduction combines), as the element list of each group.
struct Groups {
    ptr: Vec<usize>,
    members: Vec<usize>,
}

impl Groups {
    /// The groups of reducing an array of shape `dims` over `axes`
    /// (in the reduced shape's row-major order).
    fn reduce(dims: &[usize], axes: &[usize]) -> Groups {
        let kept: Vec<usize> = (0..dims.len())
            .map(|a| if axes.contains(&a) { 1 } else { dims[a] })
            .collect();
        let own = Shape::new(kept.clone()).strides();
        let strides: Vec<usize> = (0..dims.len())
            .map(|a| if axes.contains(&a) { 0 } else { own[a] })
            .collect();
        let group = strided(dims, &strides, 0);
        Groups::from_labels(&group, kept.iter().product())
    }

    /// The groups of `[outer, len, inner]` along the middle axis, in
    /// `(outer, inner)` order.
    fn along(outer: usize, len: usize, inner: usize) -> Groups {
        Groups::reduce(&[outer, len, inner], &[1])
    }

    fn from_labels(label: &[usize], n: usize) -> Groups {
        let mut ptr = vec![0; n + 1];
        for &l in label {
            ptr[l + 1] += 1;
        }
        for i in 0..n {
            ptr[i + 1] += ptr[i];
        }
        let mut next = ptr.clone();
        let mut members = vec![0; label.len()];
        for (k, &l) in label.iter().enumerate() {
            members[next[l]] = k;
            next[l] += 1;
        }
        Groups { ptr, members }
    }

    /// Per group, the union of its members' sets.
    fn unions(&self, s: Option<&Sets>) -> Sets {
        let n = self.ptr.len() - 1;
        let mut out = Sets::with_capacity(n);
        for gi in 0..n {
            let m = &self.members[self.ptr[gi]..self.ptr[gi + 1]];
            out.push_union(m.iter().map(|&k| at(s, k)));
        }
        out
    }
}
