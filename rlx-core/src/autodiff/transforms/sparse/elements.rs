//! Sparse Hessians of sums of element terms, assembled element by element.
//!
//! Objectives in physics and finite elements are sums over elements
//! (triangles, bonds, pairs) of a small function of a few unknowns:
//! `f(x) = Σ_p φ(u₁[p], …, u_k[p])`, where each `u_i` is a *selection* of
//! `x`: each of its elements is one element of `x`, or does not depend on
//! `x` at all (gathers by constant index tables, slices, reshapes,
//! broadcasts, transposes and concatenations with other values make
//! selections). Element `p` of the sum reads element `p` of each `u_i`
//! and nothing else of `x`, so the Hessian is `Σ_p P_pᵀ h_p P_p`, with
//! `h_p` the `k × k` Hessian of `φ` at element `p` and `P_p` picking the
//! elements of `x` it reads.
//!
//! All the `h_p` come from `k` forward-over-reverse products of the
//! *local* function: the element-wise graph between the selections and
//! the sum, with the selections as its inputs. The product seeded by
//! `u_i = 1` (every element at once) has `h_p[i][j]` as element `p` of its
//! `j`-th gradient, because element `p` of the gradient depends on element
//! `p` of the `u`s alone. One `scatter_add` with a constant index table
//! then adds the `k² · |p|` values into the pattern's slots. The products
//! run over the element-wise graph only, without the gathers and scatters
//! of the coloured products of the whole graph, and there are `k` of them
//! however many colours the pattern needs (the minimal-surface triangles:
//! 3 products against 9 star colours).
//!
//! The output may add and subtract several such sums, each scaled by
//! values that do not depend on `x` (a reduction chain of sums and means,
//! products with and quotients by `x`-free scalars, negation); the terms
//! it adds that have no such form (the rest) are differentiated by the
//! coloured products of [`compressed_hessian`] over their own pattern and
//! added in by the same `scatter_add`.
//!
//! Exactness: each element's contribution is computed by the same
//! derivative rules as the coloured products; the sum over elements
//! meeting in one entry is formed in element order (a reassociation of
//! the coloured products' sums, as the reroll pass also makes). A NaN in
//! one element's Hessian stays in the entries that element touches.

use std::collections::{HashMap, HashSet};

use super::{compressed_hessian, SparseMode, SparseProgram};
use crate::autodiff::jvp_nodes;
use crate::autodiff::transforms::{finish, grad_graph, out0, set_outputs, wrt_nodes};
use crate::colouring;
use crate::sparsity::sets::{broadcast_map, strided};
use crate::sparsity::{constant_indices, hessian_pattern, split, Pattern};
use crate::{BinaryOp, DType, Graph, Literal, NodeId, Op, ReduceOp, Result, Shape, UnaryOp};

/// The most selections an element may read: `k` products and `k²` values
/// per element; beyond this the coloured products are kept.
const MAX_K: usize = 16;

/// Where one element's value of a selection comes from: the column (the
/// element of the concatenated `wrt` inputs) or `NONE` when it does not
/// depend on them.
type Map = Vec<i64>;
const NONE: i64 = -1;

/// One sum of element terms: `root` (a scalar node of `g`) is an affine
/// chain over a sum of the element-wise graph `nodes` of shape `batch`,
/// which reads the selections `leaves` (with their maps, over the batch's
/// elements), and `outside` and `constants`, nodes that do not depend on
/// the `wrt` inputs (the constants are copied into the local graph, the
/// others are its inputs).
struct Term {
    root: NodeId,
    negate: bool,
    batch: Shape,
    leaves: Vec<NodeId>,
    maps: Vec<Map>,
    nodes: Vec<NodeId>,
    outside: Vec<NodeId>,
    constants: Vec<NodeId>,
}

/// The facts about `g` the search reads.
struct Facts<'a> {
    g: &'a Graph,
    /// Whether a node's value depends on a `wrt` input (through anything
    /// but `StopGradient`).
    dep: Vec<bool>,
    /// The first column of each `wrt` input node.
    offsets: HashMap<NodeId, usize>,
    selections: HashMap<NodeId, Option<Map>>,
}

/// The sparse Hessian of `g`'s scalar output 0 with respect to the inputs
/// at `wrt` by element assembly, when the output adds at least one sum of
/// element terms; `None` otherwise (the caller colours the whole graph).
pub(crate) fn assembled(
    g: &Graph,
    wrt: &[usize],
    pattern: &Pattern,
) -> Result<Option<SparseProgram>> {
    const OP: &str = "sparse_hessian";
    let nodes = wrt_nodes(g, wrt, OP)?;
    let o = out0(g, OP)?;
    if g.shape(o).numel() != 1 || !g.dtype(o).is_float() || g.dtype(o).is_complex() {
        return Ok(None);
    }
    let mut facts = Facts::new(g, &nodes);
    let mut split_terms = Vec::new();
    facts.split(o, false, &mut split_terms);
    let mut terms = Vec::new();
    let mut rest = Vec::new();
    for (t, negate) in split_terms {
        match facts.term(t, negate) {
            Some(term) => terms.push(term),
            None => rest.push((t, negate)),
        }
    }
    if terms.is_empty() {
        return Ok(None);
    }
    let dt = g.dtype(o);
    let mut r = g.clone();
    let mut updates = Vec::new();
    let mut slots: Vec<i64> = Vec::new();
    let mut products = 0;
    for term in &terms {
        let Some((vals, at)) = term.values(&mut r, g, pattern)? else {
            continue;
        };
        products += term.leaves.len();
        updates.push(vals);
        slots.extend(at);
    }
    if !rest.is_empty() {
        // A pattern of the rest not inside the output's: colour it all.
        let Some((vals, at, colours)) = rest_values(&mut r, g, wrt, &rest, pattern)? else {
            return Ok(None);
        };
        products += colours;
        if let Some(vals) = vals {
            updates.push(vals);
            slots.extend(at);
        }
    }
    let values = scatter(&mut r, pattern, &updates, &slots, dt)?;
    set_outputs(&mut r, g, vec![values]);
    Ok(Some(SparseProgram {
        graph: finish(r)?,
        pattern: pattern.clone(),
        mode: SparseMode::Elements,
        colours: products,
    }))
}

/// `[nnz]` values: `updates` (flat, concatenated) added at `slots` into a
/// base holding `-0.0` where some update lands (so that a single update
/// keeps its bits, `-0.0` and NaN included) and `+0.0` elsewhere. A slot
/// `nnz` drops its update (an element's entry with a vertex that is not an
/// unknown): the scatter runs over one extra slot, sliced off.
fn scatter(
    r: &mut Graph,
    pattern: &Pattern,
    updates: &[NodeId],
    slots: &[i64],
    dt: DType,
) -> Result<NodeId> {
    let nnz = pattern.nnz();
    let dump = slots.contains(&(nnz as i64));
    let len = nnz + usize::from(dump);
    let mut base = vec![0.0; len];
    for &s in slots {
        base[s as usize] = -0.0;
    }
    let base = r.constant(Literal::F64(base.into()), [len], dt)?;
    if updates.is_empty() {
        return Ok(base);
    }
    let all = match updates {
        [one] => *one,
        _ => r.concat(updates, 0)?,
    };
    let at = r.constant(
        Literal::I64(slots.to_vec().into()),
        [slots.len()],
        DType::I64,
    )?;
    let values = r.scatter_add(base, at, all, 0)?;
    if dump {
        r.slice_range(values, 0..nnz, 0)
    } else {
        Ok(values)
    }
}

/// The rest's Hessian values in `r` (`None` when structurally zero),
/// their slots, and the colours used.
type Rest = (Option<NodeId>, Vec<i64>, usize);

/// The rest of the output (`± rest` terms, added) differentiated by the
/// coloured products over its own pattern, as nodes of `r`: its values
/// (`None` when its Hessian is structurally zero), their slots in
/// `pattern`, and the colours used; `None` when an entry of its pattern is
/// not in `pattern`.
fn rest_values(
    r: &mut Graph,
    g: &Graph,
    wrt: &[usize],
    rest: &[(NodeId, bool)],
    pattern: &Pattern,
) -> Result<Option<Rest>> {
    let mut h = g.clone();
    let mut sum: Option<NodeId> = None;
    for &(t, negate) in rest {
        let t = h.reshape(t, Shape::scalar())?;
        sum = Some(match (sum, negate) {
            (None, false) => t,
            (None, true) => h.unary(UnaryOp::Neg, t)?,
            (Some(s), false) => h.binary(BinaryOp::Add, s, t)?,
            (Some(s), true) => h.binary(BinaryOp::Sub, s, t)?,
        });
    }
    let sum = sum.expect("a rest term");
    h.set_outputs(vec![sum]);
    let h = finish(h)?;
    let own = hessian_pattern(&h, wrt)?;
    if own.nnz() == 0 {
        return Ok(Some((None, Vec::new(), 0)));
    }
    let Some(at) = own
        .entries()
        .map(|(i, j)| pattern.position(i, j).map(|s| s as i64))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let gg = grad_graph(&h, wrt, "sparse_hessian")?;
    let c = colouring::star(&own);
    let program = compressed_hessian(&h, &gg, wrt, own, &c)?;
    let args = r.input_ids();
    let outs = r.inline(&program.graph, &args)?;
    let vals = *outs.last().expect("the values output");
    Ok(Some((Some(vals), at, c.count())))
}

impl Term {
    /// The term's Hessian values as a flat node of `r` (a copy of `g`) and
    /// the slot of each in `pattern` (`nnz` for those outside it); `None`
    /// when none lands in it.
    fn values(
        &self,
        r: &mut Graph,
        g: &Graph,
        pattern: &Pattern,
    ) -> Result<Option<(NodeId, Vec<i64>)>> {
        let k = self.leaves.len();
        let m = self.batch.numel();
        let dump = pattern.nnz() as i64;
        // Where each of the k² · m local values lands, element by element.
        let mut at = Vec::with_capacity(k * k * m);
        for p in 0..m {
            for i in 0..k {
                for j in 0..k {
                    let (a, b) = (self.maps[i][p], self.maps[j][p]);
                    let slot = match (a, b) {
                        (NONE, _) | (_, NONE) => None,
                        _ => pattern.position(a as usize, b as usize),
                    };
                    at.push(slot.map_or(dump, |s| s as i64));
                }
            }
        }
        if at.iter().all(|&s| s == dump) {
            return Ok(None);
        }
        let local = self.local_hessian(g)?;
        let mut args = Vec::with_capacity(k + self.outside.len());
        for &l in &self.leaves {
            args.push(r.broadcast(l, self.batch.clone())?);
        }
        args.extend_from_slice(&self.outside);
        let mut flat = r.inline(&local, &args)?[0];
        if self.negate {
            flat = r.unary(UnaryOp::Neg, flat)?;
        }
        Ok(Some((flat, at)))
    }

    /// The local graph: inputs `u_1..u_k` (shaped like the batch), then one
    /// per outside node; output the `[m · k · k]` values `h[i][j][p]`,
    /// element by element (so that the scatter adds each element's entries
    /// together, near each other in the pattern).
    fn local_hessian(&self, g: &Graph) -> Result<Graph> {
        let mut lg = Graph::new();
        let mut map: HashMap<NodeId, NodeId> = HashMap::new();
        let mut us = Vec::with_capacity(self.leaves.len());
        for (i, &l) in self.leaves.iter().enumerate() {
            let u = lg.input(format!("u{i}"), self.batch.clone(), g.dtype(l));
            map.insert(l, u);
            us.push(u);
        }
        for (i, &o) in self.outside.iter().enumerate() {
            let ty = g.ty(o);
            map.insert(o, lg.input(format!("c{i}"), ty.shape, ty.dtype));
        }
        // Constants stay constants, for the cleanup to fold.
        for &o in &self.constants {
            map.insert(o, lg.push_copy(g, o.index(), Vec::new()));
        }
        for &n in &self.nodes {
            let inputs = g.node(n).inputs.iter().map(|j| map[j]).collect();
            map.insert(n, lg.push_copy(g, n.index(), inputs));
        }
        let root = lg.reshape(map[&self.root], Shape::scalar())?;
        lg.set_outputs(vec![root]);
        let k = us.len();
        let gg = grad_graph(&lg, &(0..k).collect::<Vec<_>>(), "sparse_hessian")?;
        let grads = gg.outputs()[1..].to_vec();
        let mut t = gg;
        let m = self.batch.numel();
        // Every entry from its own product (entry (i, j) from the product
        // seeded by u_i): a concat reading one value twice would not be
        // written by the fused loop in place.
        let mut parts = Vec::with_capacity(k * k);
        for &u in &us {
            let one = t.full(self.batch.clone(), 1.0, t.dtype(u));
            for d in jvp_nodes(&mut t, &[u], &[one], &grads)? {
                parts.push(t.reshape(d, [m, 1])?);
            }
        }
        let joined = match parts.as_slice() {
            [one] => *one,
            _ => t.concat(&parts, 1)?,
        };
        let flat = t.reshape(joined, [m * k * k])?;
        t.set_outputs(vec![flat]);
        finish(t)
    }
}

impl<'a> Facts<'a> {
    fn new(g: &'a Graph, wrt: &[NodeId]) -> Self {
        let mut dep = vec![false; g.len()];
        let mut offsets = HashMap::new();
        let mut off = 0;
        for &w in wrt {
            dep[w.index()] = true;
            offsets.insert(w, off);
            off += g.shape(w).numel();
        }
        for (i, node) in g.nodes().iter().enumerate() {
            if !matches!(node.op, Op::StopGradient) && node.inputs.iter().any(|j| dep[j.index()]) {
                dep[i] = true;
            }
        }
        Facts {
            g,
            dep,
            offsets,
            selections: HashMap::new(),
        }
    }

    fn dep(&self, n: NodeId) -> bool {
        self.dep[n.index()]
    }

    /// The additive terms of the scalar `n` (each with its sign) that
    /// depend on the `wrt` inputs.
    fn split(&self, n: NodeId, negate: bool, out: &mut Vec<(NodeId, bool)>) {
        if !self.dep(n) {
            return;
        }
        let node = self.g.node(n);
        let scalar = |j: &NodeId| self.g.shape(*j).numel() == 1;
        match (&node.op, node.inputs.as_slice()) {
            (Op::Binary(BinaryOp::Add), [a, b]) if scalar(a) && scalar(b) => {
                self.split(*a, negate, out);
                self.split(*b, negate, out);
            }
            (Op::Binary(BinaryOp::Sub), [a, b]) if scalar(a) && scalar(b) => {
                self.split(*a, negate, out);
                self.split(*b, !negate, out);
            }
            (Op::Unary(UnaryOp::Neg), [a]) => self.split(*a, !negate, out),
            (Op::Reshape { .. }, [a]) => self.split(*a, negate, out),
            _ => out.push((n, negate)),
        }
    }

    /// `root` as a sum of element terms, if it is one.
    fn term(&mut self, root: NodeId, negate: bool) -> Option<Term> {
        let g = self.g;
        let mut nodes = Vec::new();
        let mut outside = Vec::new();
        // The affine chain down to the sum.
        let mut n = root;
        loop {
            let node = g.node(n);
            let free = |j: &NodeId| !self.dep(*j) && g.shape(*j).numel() == 1;
            let next = match (&node.op, node.inputs.as_slice()) {
                (Op::Binary(BinaryOp::Mul), [a, b]) if free(a) => {
                    outside.push(*a);
                    *b
                }
                (Op::Binary(BinaryOp::Mul), [a, b]) if free(b) => {
                    outside.push(*b);
                    *a
                }
                (Op::Binary(BinaryOp::Div), [a, b]) if free(b) => {
                    outside.push(*b);
                    *a
                }
                (Op::Unary(UnaryOp::Neg), [a]) | (Op::Reshape { .. }, [a]) => *a,
                (
                    Op::Reduce {
                        op: ReduceOp::Sum | ReduceOp::Mean,
                        ..
                    },
                    [_],
                ) => {
                    break;
                }
                _ => return None,
            };
            nodes.push(n);
            n = next;
        }
        // Sums and means of sums: the batch is the first operand that is not one.
        loop {
            let node = g.node(n);
            match (&node.op, node.inputs.as_slice()) {
                (
                    Op::Reduce {
                        op: ReduceOp::Sum | ReduceOp::Mean,
                        ..
                    },
                    [a],
                ) => {
                    nodes.push(n);
                    n = *a;
                }
                (Op::Reshape { .. }, [a]) if !nodes.is_empty() => {
                    nodes.push(n);
                    n = *a;
                }
                _ => break,
            }
        }
        let batch = g.shape(n).clone();
        // The element-wise graph over the batch, back to its selections.
        let mut leaves: Vec<NodeId> = Vec::new();
        let mut maps = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![n];
        while let Some(m) = stack.pop() {
            if !seen.insert(m) {
                continue;
            }
            let node = g.node(m);
            if !self.dep(m) {
                outside.push(m);
                continue;
            }
            let elementwise = matches!(
                node.op,
                Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast(_)
            );
            if elementwise && node.shape == batch {
                nodes.push(m);
                stack.extend(node.inputs.iter().copied());
                continue;
            }
            let sel = self.selection(m)?;
            let dims = g.shape(m).dims();
            if !broadcasts(dims, batch.dims()) || !g.dtype(m).is_float() {
                return None;
            }
            let map = if dims == batch.dims() {
                sel
            } else {
                broadcast_map(dims, batch.dims())
                    .into_iter()
                    .map(|i| sel[i])
                    .collect()
            };
            leaves.push(m);
            maps.push(map);
        }
        if leaves.is_empty() || leaves.len() > MAX_K {
            return None;
        }
        nodes.sort_unstable();
        nodes.dedup();
        outside.sort_unstable();
        outside.dedup();
        let (constants, outside) = outside
            .into_iter()
            .partition(|&o| matches!(g.node(o).op, Op::Constant(_)));
        Some(Term {
            root,
            negate,
            batch,
            leaves,
            maps,
            nodes,
            outside,
            constants,
        })
    }

    /// For each element of `n`, the column it copies, or `NONE` when it
    /// does not depend on the `wrt` inputs; `None` when `n` is not a
    /// selection.
    fn selection(&mut self, n: NodeId) -> Option<Map> {
        if let Some(s) = self.selections.get(&n) {
            return s.clone();
        }
        let s = self.compute_selection(n);
        self.selections.insert(n, s.clone());
        s
    }

    fn compute_selection(&mut self, n: NodeId) -> Option<Map> {
        let g = self.g;
        let node = g.node(n);
        let numel = node.shape.numel();
        if !self.dep(n) {
            return Some(vec![NONE; numel]);
        }
        if let Some(&off) = self.offsets.get(&n) {
            return Some((off..off + numel).map(|c| c as i64).collect());
        }
        let dims = node.shape.dims();
        let x = node.inputs.as_slice();
        let xdims = |i: usize| g.shape(x[i]).dims();
        let pick = |s: &Map, idx: Vec<usize>| idx.into_iter().map(|i| s[i]).collect();
        match &node.op {
            Op::Reshape { .. } => self.selection(x[0]),
            Op::Broadcast { .. } => {
                let s = self.selection(x[0])?;
                Some(pick(&s, broadcast_map(xdims(0), dims)))
            }
            Op::Transpose { perm } => {
                let s = self.selection(x[0])?;
                let own = Shape::new(xdims(0)).strides();
                let strides: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
                Some(pick(&s, strided(dims, &strides, 0)))
            }
            Op::Slice { axis, start, .. } => {
                let s = self.selection(x[0])?;
                let own = Shape::new(xdims(0)).strides();
                Some(pick(&s, strided(dims, &own, start * own[*axis])))
            }
            Op::Concat { axis } => {
                let parts: Vec<Map> = x
                    .iter()
                    .map(|&a| self.selection(a))
                    .collect::<Option<_>>()?;
                let (outer, _, inner) = split(dims, *axis);
                let mut out = Vec::with_capacity(numel);
                for o in 0..outer {
                    for (p, &a) in parts.iter().zip(x) {
                        let len = g.shape(a).dim(*axis) * inner;
                        out.extend_from_slice(&p[o * len..(o + 1) * len]);
                    }
                }
                Some(out)
            }
            Op::Gather { axis } => {
                let (outer, len, inner) = split(xdims(0), *axis);
                let idx = constant_indices(g, x[1], len)?;
                let s = self.selection(x[0])?;
                let mut out = Vec::with_capacity(numel);
                for o in 0..outer {
                    for &t in &idx {
                        let at = (o * len + t) * inner;
                        out.extend_from_slice(&s[at..at + inner]);
                    }
                }
                Some(out)
            }
            _ => None,
        }
    }
}

/// Whether `from` broadcasts to `to` (NumPy rules).
fn broadcasts(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}
