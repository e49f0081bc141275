//! Hoisting the products that make a weight's cotangent out of a reverse
//! sweep: one product over all steps after the sweep instead of one small
//! product per step.
//!
//! The cotangent of a weight that a step multiplies by is, per step, a
//! product of two of the step's values: `W̄ += Xᵀ·Z̄`, with `X: [b, m]` the
//! step's input and `Z̄: [b, n]` the cotangent of its output (an LSTM
//! layer: `b = 4` rows, `m·n = 8 192` elements). Each step writes all `m·n`
//! elements of the product and the sweep adds them up, for `T·b·m·n`
//! multiply-adds done at the speed of memory. Summed over the steps, the
//! products are one product over all of them:
//!
//! ```text
//! Σ_t A_t·B_t = [A_0 … A_{T-1}] · [B_0; …; B_{T-1}]    (A_t: [m, b], B_t: [b, n])
//! ```
//!
//! which runs at the speed of the arithmetic. So when the backward half's
//! cotangent of an invariant is a *linear* function `L` of such products
//! and of other values (sums, reshapes, transposes, concatenations, with
//! each product used by nothing else), [`hoist`] rewrites the backward
//! half to return, per step, the factors `A_t`, `B_t` and only the rest of
//! the cotangent, `L(0, rest_t)` (nothing, when the products are all of
//! it); the runtime stacks the factors (`[T, ..]` each) and, after the
//! sweep, runs the [`Hoisted::finish`] graph, `L(Σ_t A_t B_t, 0)`, and adds
//! its results to the summed cotangents. By linearity the sum is the same,
//! with the additions in another order (see the tests for the bound).
//!
//! A product is hoisted when both its factors change from step to step and
//! storing them takes less than the product itself (`b·(m + n) < m·n`).
//! So is a sum over the rows of a matrix that is already a factor (a
//! bias's cotangent, `b̄ += Σ_rows Z̄`): after the sweep it is one sum over
//! the rows of the group's stack, `Σ_t Σ_rows Z̄_t`, again linear.
//!
//! The factors are not stacked over all `T` steps at once: that would be
//! memory of the stored residuals' size (17 MB for a 1024-step LSTM in
//! `f32`), touched once, which costs more than the products save. The sweep
//! stacks [`Hoisted::steps`] steps at a time (their factors take at most
//! [`STACK_BYTES`]), runs `finish` on them and adds its results to the
//! summed cotangents, then starts the next group; a last, shorter group
//! has its unused rows set to zeros, which add `+0` to each sum (so only
//! the sign of an exactly zero sum can differ from a product without
//! them). A loop whose factors all fit takes one group of `T` steps.

use super::LoopOp;
use crate::{BinaryOp, Error, Graph, NodeId, Op, ReduceOp, Result, Shape, TensorType};

/// The bytes of stacked factors a reverse sweep keeps at once (see the
/// module docs): 512 KiB, about a core's second-level cache.
pub const STACK_BYTES: usize = 512 << 10;

/// What the reverse sweep does for hoisted products, every
/// [`steps`](Self::steps) steps and after its last (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Hoisted {
    /// For each floating-point invariant, whether the backward half still
    /// returns a per-step part of its cotangent (in order, after `x̄`).
    pub per_step: Vec<bool>,
    /// How many factors the backward half returns per step, after those
    /// cotangents.
    pub factors: usize,
    /// How many steps' factors `finish` takes at once (`S`, at most the
    /// loop's length `T`; `T` when all steps' factors fit in
    /// [`STACK_BYTES`]).
    pub steps: usize,
    /// `[F_1: [S, ..f_1], …, F_h]` (each factor of a group of `S` steps,
    /// stacked) `→` the hoisted part of the group's cotangents of the
    /// invariants [`targets`](Self::targets) names.
    pub finish: Graph,
    /// For each output of `finish`, the floating-point invariant (its
    /// position among them) whose summed cotangent it is added to.
    pub targets: Vec<usize>,
}

/// Whether `n` sums a matrix over its rows (`sum axes=[0]`).
fn row_sum(n: &crate::Node) -> bool {
    matches!(&n.op, Op::Reduce { op: ReduceOp::Sum, axes } if axes[..] == [0])
}

/// Ops through which a product's contribution stays linear and separable.
fn linear(op: &Op) -> bool {
    matches!(
        op,
        Op::Binary(BinaryOp::Add) | Op::Reshape { .. } | Op::Transpose { .. } | Op::Concat { .. }
    )
}

/// The backward half `b` of adjoint `adj`'s split step (inputs `[x, k, c̄',
/// ȳ, r]`, outputs `[c̄, x̄, k̄]`) with its weight-gradient products hoisted,
/// and what the sweep does with them; `None` when no product qualifies.
///
/// ```
/// use rlx::{autodiff, DType, Graph, core::{LoopKind, LoopOp}, Op};
/// use rlx::core::loops::{hoist::hoist, residuals::split};
/// // c' = tanh(c·W) over [4, 32] states: W̄ = Σ_t c_tᵀ·(c̄'_t (1 − c'_t²))
/// let mut b = Graph::new();
/// let c = b.input("c", [4, 32], DType::F64);
/// let w = b.input("w", [32, 32], DType::F64);
/// let z = b.matmul(c, w).unwrap();
/// let t = b.tanh(z).unwrap();
/// b.set_outputs(vec![t]);
/// let l = LoopOp::scan("l", b, 1, 0, 10, false, None).unwrap();
/// let mut g = Graph::new();
/// let c0 = g.input("c0", [4, 32], DType::F64);
/// let w = g.input("w", [32, 32], DType::F64);
/// let p = g.looped(l, &[c0, w]).unwrap();
/// let y = g.sum_all(p).unwrap();
/// g.set_outputs(vec![y]);
/// let gr = autodiff::grad(&g, &[1]).unwrap();
/// let adj = gr.nodes().iter().find_map(|n| match &n.op {
///     Op::Loop(a) if matches!(a.kind, LoopKind::Adjoint { .. }) => Some(a.clone()),
///     _ => None,
/// }).unwrap();
/// let r = split(&adj).unwrap();
/// let (_, h) = hoist(&adj, &r.backward).unwrap().expect("W̄ is hoisted");
/// // W̄ has no per-step part left; two factors per step; one product after.
/// assert_eq!((h.per_step, h.factors, h.targets), (vec![false], 2, vec![0]));
/// ```
pub fn hoist(adj: &LoopOp, b: &Graph) -> Result<Option<(Graph, Hoisted)>> {
    hoist_grouped(adj, b, None)
}

/// [`hoist`] with the factors stacked `steps` steps at a time (clamped to
/// `1..=T`) instead of as many as fit in [`STACK_BYTES`]: any group size
/// gives the same sums up to the order of their additions.
///
/// ```
/// use rlx::{autodiff, DType, Graph, core::{LoopKind, LoopOp}, Op};
/// use rlx::core::loops::{hoist::hoist_grouped, residuals::split};
/// let mut b = Graph::new();
/// let c = b.input("c", [4, 32], DType::F64);
/// let w = b.input("w", [32, 32], DType::F64);
/// let z = b.matmul(c, w).unwrap();
/// let t = b.tanh(z).unwrap();
/// b.set_outputs(vec![t]);
/// let l = LoopOp::scan("l", b, 1, 0, 10, false, None).unwrap();
/// let mut g = Graph::new();
/// let c0 = g.input("c0", [4, 32], DType::F64);
/// let w = g.input("w", [32, 32], DType::F64);
/// let p = g.looped(l, &[c0, w]).unwrap();
/// let y = g.sum_all(p).unwrap();
/// g.set_outputs(vec![y]);
/// let gr = autodiff::grad(&g, &[1]).unwrap();
/// let adj = gr.nodes().iter().find_map(|n| match &n.op {
///     Op::Loop(a) if matches!(a.kind, LoopKind::Adjoint { .. }) => Some(a.clone()),
///     _ => None,
/// }).unwrap();
/// let r = split(&adj).unwrap();
/// let (_, h) = hoist_grouped(&adj, &r.backward, Some(3)).unwrap().expect("hoisted");
/// // Groups of 3 steps (the last of 1): each factor stacked over 3 steps.
/// assert_eq!(h.steps, 3);
/// assert!(h.finish.input_ids().iter().all(|&i| h.finish.shape(i).dim(0) == 3));
/// ```
pub fn hoist_grouped(
    adj: &LoopOp,
    b: &Graph,
    steps: Option<usize>,
) -> Result<Option<(Graph, Hoisted)>> {
    let nodes = b.nodes();
    let (c, k, n_k) = (adj.carries, adj.xs, adj.consts());
    let fx = adj.float_xs().len();
    let n_fk = adj.float_consts().len();
    let outs = b.outputs();
    if outs.len() != c + fx + n_fk {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!(
                "{}: hoisting from a backward half of {} outputs",
                adj.name,
                outs.len()
            ),
        });
    }
    let live = b.live_nodes();
    // Whether a node changes from step to step (depends on anything but
    // the invariants), and its live users.
    let mut step = vec![false; nodes.len()];
    for (i, id) in b.input_ids().iter().enumerate() {
        step[id.index()] = !(k..k + n_k).contains(&i);
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if !matches!(n.op, Op::Input { .. }) {
            step[i] = n.inputs.iter().any(|j| step[j.index()]);
        }
        if live[i] {
            for j in &n.inputs {
                users[j.index()].push(i);
            }
        }
    }
    // Which k̄ output a node is (its first), and whether it is another output.
    let mut kbar_of: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut other_out = vec![false; nodes.len()];
    for (p, o) in outs.iter().enumerate() {
        match p.checked_sub(c + fx) {
            Some(j) if kbar_of[o.index()].is_none() => kbar_of[o.index()] = Some(j),
            _ => other_out[o.index()] = true,
        }
    }
    let matrix = |id: NodeId| b.shape(id).rank() == 2;
    let source = |x: NodeId| match &nodes[x.index()].op {
        Op::Transpose { perm } if perm[..] == [1, 0] => nodes[x.index()].inputs[0],
        _ => x,
    };
    let mut hoisted: Vec<bool> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if !live[i] || !matches!(n.op, Op::MatMul) {
                return false;
            }
            let (x, y) = (n.inputs[0], n.inputs[1]);
            if !(step[x.index()] && step[y.index()] && matrix(x) && matrix(y)) {
                return false;
            }
            let (m, kk, nn) = (b.shape(x).dim(0), b.shape(x).dim(1), b.shape(y).dim(1));
            kk.saturating_mul(m + nn) < m.saturating_mul(nn)
        })
        .collect();
    // A sum over the rows of a per-step matrix that is already a factor
    // (a bias's cotangent `Σ_rows z̄`): after the sweep, one sum over the
    // rows of its group's stack, instead of a sum and an addition per
    // step (its rows are stored anyway).
    let mut factor_rows = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if hoisted[i] {
            factor_rows[source(n.inputs[0]).index()] = true;
            factor_rows[n.inputs[1].index()] = true;
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        if live[i] && row_sum(n) && factor_rows[n.inputs[0].index()] && matrix(n.inputs[0]) {
            hoisted[i] = true;
        }
    }
    // The cone of the hoisted products: linear ops over them. A product
    // whose cone reaches anything else (a non-linear use, a carry's or a
    // per-step input's cotangent, a broadcasting sum) is not hoisted.
    let cone = loop {
        let mut cone = hoisted.clone();
        for (i, n) in nodes.iter().enumerate() {
            if !cone[i] && live[i] && linear(&n.op) && n.inputs.iter().any(|j| cone[j.index()]) {
                cone[i] = true;
            }
        }
        let bad = |i: usize| {
            other_out[i]
                || users[i].iter().any(|&u| !cone[u])
                || (cone[i]
                    && matches!(nodes[i].op, Op::Binary(_))
                    && nodes[i]
                        .inputs
                        .iter()
                        .any(|j| b.shape(*j) != &nodes[i].shape))
        };
        // Products whose cone holds a bad node, found walking back from it.
        let mut drop = vec![false; nodes.len()];
        for i in (0..nodes.len()).rev() {
            if cone[i] && (bad(i) || users[i].iter().any(|&u| drop[u])) {
                drop[i] = true;
            }
        }
        let before = hoisted.iter().filter(|&&h| h).count();
        for (h, d) in hoisted.iter_mut().zip(&drop) {
            *h &= !d;
        }
        if hoisted.iter().filter(|&&h| h).count() == before {
            break cone;
        }
    };
    if !hoisted.iter().any(|&h| h) {
        return Ok(None);
    }

    // The backward half without the products: each cone node becomes its
    // `rest` (None: zero); factors are returned after the cotangents.
    let mut nb = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; nodes.len()];
    for (inp, id) in b.inputs().iter().zip(b.input_ids()) {
        let t = b.ty(id);
        map[id.index()] = Some(nb.input(inp.name.clone(), t.shape, t.dtype));
    }
    let mut rest: Vec<Option<NodeId>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if map[i].is_some() || !live[i] || hoisted[i] {
            continue;
        }
        if !cone[i] {
            let ins = n
                .inputs
                .iter()
                .map(|j| map[j.index()].ok_or_else(|| unmapped(adj, i)))
                .collect::<Result<Vec<_>>>()?;
            map[i] = Some(nb.push_copy(b, i, ins));
            continue;
        }
        let part = |j: NodeId| {
            if cone[j.index()] {
                rest[j.index()]
            } else {
                map[j.index()]
            }
        };
        rest[i] = linear_part(&mut nb, b, i, &part)?;
    }
    let mut per_step = Vec::with_capacity(n_fk);
    let mut new_outs = Vec::with_capacity(outs.len());
    for (p, o) in outs.iter().enumerate() {
        let got = if cone[o.index()] {
            rest[o.index()]
        } else {
            map[o.index()]
        };
        if p >= c + fx {
            per_step.push(got.is_some());
            if got.is_none() {
                continue;
            }
        }
        new_outs.push(got.ok_or_else(|| unmapped(adj, o.index()))?);
    }
    // Factors: each operand of each product (and row sum) once, in node
    // order; a transposed left operand `Rᵀ` (the usual `Xᵀ·Z̄`) as its
    // `R`, which the product after the sweep reads transposed in place.
    let mut factor_of: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut factors: Vec<NodeId> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if !hoisted[i] {
            continue;
        }
        let operands = match n.op {
            Op::MatMul => vec![source(n.inputs[0]), n.inputs[1]],
            _ => vec![n.inputs[0]],
        };
        for j in operands {
            if factor_of[j.index()].is_none() {
                factor_of[j.index()] = Some(factors.len());
                factors.push(j);
                new_outs.push(map[j.index()].ok_or_else(|| unmapped(adj, j.index()))?);
            }
        }
    }
    nb.set_outputs(new_outs);

    // finish: the stacked factors of a group of steps, one product per
    // hoisted product, the cone again over the sums.
    let step_bytes = super::bytes(factors.iter().map(|&id| b.ty(id)));
    let t = match steps {
        Some(s) => s.clamp(1, adj.length.max(1)),
        None => group_steps(adj.length, step_bytes),
    };
    let mut f = Graph::new();
    let stacks: Vec<NodeId> = factors
        .iter()
        .enumerate()
        .map(|(q, &id)| {
            let s = b.ty(id);
            let mut dims = vec![t];
            dims.extend_from_slice(s.shape.dims());
            f.input(format!("factor{q}"), dims, s.dtype)
        })
        .collect();
    let mut sum: Vec<Option<NodeId>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if !cone[i] {
            continue;
        }
        let stack = |q: NodeId| stacks[factor_of[q.index()].expect("a factor")];
        if hoisted[i] && row_sum(n) {
            // Z: [T, b, n] → [T·b, n], summed over its rows.
            let z = n.inputs[0];
            let (rows, cols) = (b.shape(z).dim(0), b.shape(z).dim(1));
            let flat = f.reshape(stack(z), [t * rows, cols])?;
            sum[i] = Some(f.sum(flat, &[0])?);
            continue;
        }
        if hoisted[i] {
            let (x, y) = (n.inputs[0], n.inputs[1]);
            let (m, kk, nn) = (b.shape(x).dim(0), b.shape(x).dim(1), b.shape(y).dim(1));
            // A: [T, kk, m] (of R) → [T·kk, m] → [m, T·kk], or
            // [T, m, kk] → [m, T, kk] → [m, T·kk]; B: [T, kk, n] → [T·kk, n].
            let a = if source(x) == x {
                let a = f.transpose(stack(x), &[1, 0, 2])?;
                f.reshape(a, [m, t * kk])?
            } else {
                let r = f.reshape(stack(source(x)), [t * kk, m])?;
                f.transpose(r, &[1, 0])?
            };
            let bb = f.reshape(stack(y), [t * kk, nn])?;
            sum[i] = Some(f.matmul(a, bb)?);
            continue;
        }
        let part = |j: NodeId| sum[j.index()];
        sum[i] = linear_part(&mut f, b, i, &part)?;
    }
    let mut finish_outs = Vec::new();
    let mut targets = Vec::new();
    for (j, o) in outs[c + fx..].iter().enumerate() {
        if let Some(s) = sum[o.index()].filter(|_| cone[o.index()]) {
            finish_outs.push(s);
            targets.push(j);
        }
    }
    f.set_outputs(finish_outs);
    nb.verify()?;
    f.verify()?;
    Ok(Some((
        nb,
        Hoisted {
            per_step,
            factors: factors.len(),
            steps: t,
            finish: f,
            targets,
        },
    )))
}

/// The steps of a group of stacked factors (see the module docs): all
/// `length` when their factors, `step_bytes` a step, fit in
/// [`STACK_BYTES`], else as many as fit (at least one).
fn group_steps(length: usize, step_bytes: usize) -> usize {
    (STACK_BYTES / step_bytes.max(1)).clamp(1, length.max(1))
}

/// Node `i` of `b` (a linear op) rebuilt in `to` over the parts `part`
/// gives for its operands, `None` standing for zeros: `None` when every
/// operand's part is.
fn linear_part(
    to: &mut Graph,
    b: &Graph,
    i: usize,
    part: &dyn Fn(NodeId) -> Option<NodeId>,
) -> Result<Option<NodeId>> {
    let n = &b.nodes()[i];
    let parts: Vec<Option<NodeId>> = n.inputs.iter().map(|&j| part(j)).collect();
    if parts.iter().all(Option::is_none) {
        return Ok(None);
    }
    Ok(Some(match &n.op {
        Op::Binary(BinaryOp::Add) => match (parts[0], parts[1]) {
            (Some(x), Some(y)) => to.add(x, y)?,
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => unreachable!("checked above"),
        },
        Op::Concat { axis } => {
            let full: Vec<NodeId> = parts
                .iter()
                .zip(&n.inputs)
                .map(|(p, &j)| p.unwrap_or_else(|| to.full(b.shape(j).clone(), 0.0, b.dtype(j))))
                .collect();
            to.concat(&full, *axis)?
        }
        _ => {
            let x = parts[0].expect("a unary op's one part");
            let node = crate::Node {
                op: n.op.clone(),
                inputs: vec![x],
                shape: n.shape.clone(),
                dtype: n.dtype,
            };
            to.push_unchecked(node)
        }
    }))
}

#[cold]
fn unmapped(adj: &LoopOp, i: usize) -> Error {
    Error::InvalidArgument {
        op: "loop",
        message: format!(
            "{}: hoisting products left node %{i} of the backward half uncomputed",
            adj.name
        ),
    }
}

/// The types the backward half returns per step after hoisting: `[c̄, x̄,
/// k̄ (those with a per-step part), factors]` — checked by
/// [`LoopOp::validate`] against `finish`'s inputs.
pub(crate) fn check(adj: &LoopOp, backward: &Graph, h: &Hoisted) -> Result<()> {
    let kt = adj.const_types();
    let fk = adj.float_consts();
    let bad = |what: &str| Error::InvalidArgument {
        op: "loop",
        message: format!(
            "{}: the hoisted products do not match the loop: {what}",
            adj.name
        ),
    };
    if h.per_step.len() != fk.len() {
        return Err(bad("one flag per floating-point invariant"));
    }
    let outs: Vec<TensorType> = backward.outputs().iter().map(|&o| backward.ty(o)).collect();
    let kept = h.per_step.iter().filter(|&&p| p).count();
    let head = adj.carries + adj.float_xs().len() + kept;
    if outs.len() != head + h.factors {
        return Err(bad("the backward half's outputs"));
    }
    if h.steps == 0 || h.steps > adj.length {
        return Err(bad("the steps of a group"));
    }
    let stacked: Vec<TensorType> = outs[head..]
        .iter()
        .map(|t| {
            let mut dims = vec![h.steps];
            dims.extend_from_slice(t.shape.dims());
            TensorType::new(Shape::new(dims), t.dtype)
        })
        .collect();
    let f = &h.finish;
    let f_in: Vec<TensorType> = f.input_ids().iter().map(|&i| f.ty(i)).collect();
    let f_out: Vec<TensorType> = f.outputs().iter().map(|&o| f.ty(o)).collect();
    let want_out: Vec<TensorType> = h
        .targets
        .iter()
        .map(|&j| fk.get(j).map(|&q| kt[q].clone()))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("a target"))?;
    if f_in != stacked || f_out != want_out {
        return Err(bad("the finishing graph"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::residuals::split;
    use crate::{autodiff, DType, LoopKind, LoopRef};
    use std::sync::Arc;

    /// The adjoint of `Σ c(T)` for `c' = tanh(c·W)` over `[rows, 32]`
    /// states, and its split step.
    fn adjoint(rows: usize) -> (LoopRef, crate::loops::residuals::Residuals) {
        let mut b = Graph::new();
        let c = b.input("c", [rows, 32], DType::F64);
        let w = b.input("w", [32, 32], DType::F64);
        let z = b.matmul(c, w).unwrap();
        let t = b.tanh(z).unwrap();
        b.set_outputs(vec![t]);
        let l = LoopOp::scan("l", b, 1, 0, 6, false, None).unwrap();
        let mut g = Graph::new();
        let c0 = g.input("c0", [rows, 32], DType::F64);
        let w = g.input("w", [32, 32], DType::F64);
        let p = g.looped(l, &[c0, w]).unwrap();
        let y = g.sum_all(p).unwrap();
        g.set_outputs(vec![y]);
        let gr = autodiff::grad(&g, &[0, 1]).unwrap();
        let adj = gr
            .nodes()
            .iter()
            .find_map(|n| match &n.op {
                Op::Loop(a) if matches!(a.kind, LoopKind::Adjoint { .. }) => Some(a.clone()),
                _ => None,
            })
            .unwrap();
        let r = split(&adj).unwrap();
        (adj, r)
    }

    #[test]
    fn the_backward_half_keeps_no_weight_product_and_the_loop_validates() {
        let (adj, mut r) = adjoint(4);
        let (b, h) = hoist(&adj, &r.backward).unwrap().expect("hoisted");
        // c̄ = z̄·Wᵀ stays (a carry's cotangent); W̄ = cᵀ·z̄ leaves: one
        // product per step instead of two.
        let products = |g: &Graph| {
            g.nodes()
                .iter()
                .zip(g.live_nodes())
                .filter(|(n, l)| *l && matches!(n.op, Op::MatMul))
                .count()
        };
        assert_eq!((products(&r.backward), products(&b)), (2, 1));
        // finish: one product over the 6 steps' factors (cᵀ, a stored
        // residual, and z̄), each of 4·32 elements.
        let f = &h.finish;
        assert_eq!(products(f), 1);
        for i in f.input_ids() {
            assert_eq!(f.shape(i).numel(), 6 * 4 * 32);
        }
        r.backward = b;
        r.hoisted = Some(h.clone());
        let with = |r: &crate::loops::residuals::Residuals| LoopOp {
            residuals: Some(Arc::new(r.clone())),
            ..(*adj).clone()
        };
        with(&r).validate().unwrap();
        // A finishing graph adding to the wrong invariant, or a backward
        // half that still returns W̄ per step, is refused.
        let mut bad = r.clone();
        bad.hoisted.as_mut().unwrap().targets = vec![1];
        let e = with(&bad).validate().unwrap_err().to_string();
        assert!(e.contains("hoisted"), "{e}");
        let mut bad = r.clone();
        bad.hoisted.as_mut().unwrap().per_step = vec![true];
        let e = with(&bad).validate().unwrap_err().to_string();
        assert!(e.contains("hoisted"), "{e}");
    }

    #[test]
    fn products_that_cost_less_than_their_factors_stay_in_the_sweep() {
        // 32 rows: the factors (32·(32 + 32) per step) outweigh the
        // product (32·32).
        let (adj, r) = adjoint(32);
        assert!(hoist(&adj, &r.backward).unwrap().is_none());
    }
}
