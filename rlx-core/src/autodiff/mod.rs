//! Automatic differentiation as graph-to-graph transforms.
//!
//! What this module owns:
//! - [`vjp_rules`] and [`jvp_rules`]: one reverse-mode and one forward-mode
//!   rule per [`Op`], each an exhaustive `match`. A rule is a pure
//!   function: a node, the incoming cotangent (or the operand tangents) and
//!   the [`Graph`] builder in, one `Option<NodeId>` per operand (or for the
//!   output) out, `None` meaning zero. Rules emit graph nodes, never numbers,
//!   so every transform composes with every other (grad of grad, jvp of grad,
//!   n-th order).
//! - the two drivers [`vjp_nodes`] and [`jvp_nodes`], which work in place on
//!   a graph: one walk over the nodes in (reverse) topological order, skipping
//!   zeros, accumulating cotangents with `add`;
//! - [`transforms`]: the graph-level transforms (`grad`, `jvp`, `hessian`,
//!   `jacobian`, ...) whose outputs are always the original outputs followed
//!   by the derivative outputs;
//! - [`loop_rules`]: the rules of loops (loops of rules);
//! - [`root_rules`]: the rules of roots (the implicit function theorem);
//! - [`custom`]: building [`CustomOp`](crate::CustomOp)s with validated rule graphs.
//!
//! Conventions shared by the rules:
//! - NaN-free selects: every element-wise rule multiplies the incoming
//!   (co)tangent with its local derivative by `mul_zero` (`0 * inf = 0`), and
//!   `Select` routes cotangents with selects (zeros in the branch not taken).
//!   So `select(x > 0, sqrt(x), 0 * x)` has derivative 0 at `x = 0`, not NaN,
//!   and so do branches whose untaken side holds `ln 0`, `1/0` or an
//!   overflowing `exp` (the derivative of sqrt, rsqrt, ln, div, pow, recip,
//!   asin, acos, atan2, powi with `n < 1` is infinite at finite inputs; a
//!   plain product would turn the zero cotangent into NaN). Matrix products
//!   are not guarded: a zero cotangent times an infinite matrix entry is NaN.
//! - Non-differentiable points follow JAX: `relu'(0) = 0`, `abs'(0) = sign(0) = 0`,
//!   `max`/`min` split a tie 0.5/0.5 (JAX's `lax.max` uses `_balanced_eq`),
//!   and `reduce_max`/`reduce_min` split the cotangent evenly over tied
//!   maxima. Rounding, sign, comparisons and casts to integer or bool have
//!   zero derivative; integer and bool values never carry a (co)tangent.
//! - Broadcasting: binary rules reduce cotangents with `sum_to` the operand's
//!   shape; forward rules broadcast tangents to the node's shape.
//! - Invariant of the drivers: a (co)tangent has exactly the shape and dtype
//!   of its primal node; rules that break it are reported as `InvalidGraph`.

pub mod custom;
pub mod jvp_rules;
pub mod loop_rules;
pub mod root_rules;
pub mod sparse_solve_rules;
pub mod transforms;
pub mod vjp_rules;

mod complex;
mod derivs;
mod slices;
mod zeros;

pub use custom::custom_op;
pub use jvp_rules::jvp_rule;
pub use transforms::{
    batch_jacobian, dense_hessian, grad, grad_holomorphic, hessian, hvp, jacfwd, jacobian,
    jacobian_holomorphic, jacrev, jvp, nth_order_grad, value_and_grad, vjp,
};
pub use vjp_rules::vjp_rule;

use crate::{Error, Graph, Node, NodeId, Op, Result, Shape};

/// Reverse mode, in place: appends to `g` the nodes computing
/// `sum_k cotangents[k]ᵀ · ∂outputs[k]/∂wrt[i]` for each `wrt[i]`, and returns
/// their ids (shaped like `wrt[i]`; zeros when no output depends on it).
///
/// Every `wrt` node must be an input of `g`; every cotangent must have the
/// shape and dtype of its output.
///
/// ```
/// use rlx::{autodiff::vjp_nodes, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let y = g.sin(x).unwrap();
/// let ct = g.ones_like(y);
/// let dx = vjp_nodes(&mut g, &[y], &[ct], &[x]).unwrap();
/// assert_eq!(g.shape(dx[0]).dims(), &[3]);
/// ```
pub fn vjp_nodes(
    g: &mut Graph,
    outputs: &[NodeId],
    cotangents: &[NodeId],
    wrt: &[NodeId],
) -> Result<Vec<NodeId>> {
    if outputs.len() != cotangents.len() {
        return Err(Error::CountMismatch {
            what: "cotangents (one per output) given to `vjp`".into(),
            expected: outputs.len(),
            got: cotangents.len(),
        });
    }
    check_wrt(g, wrt, "vjp")?;
    for (&o, &c) in outputs.iter().zip(cotangents) {
        let want = g.try_node(o)?.ty();
        let got = g.try_node(c)?.ty();
        if want != got {
            return Err(Error::ShapeMismatch {
                op: "vjp",
                lhs: want.shape,
                rhs: got.shape,
                expected: format!(
                    "a cotangent for output {o} of type {}{}, got {}{}",
                    want.dtype,
                    g.shape(o),
                    got.dtype,
                    g.shape(c)
                ),
            });
        }
    }
    let cts = backward(g, outputs, cotangents, wrt, 0)?;
    Ok(cts
        .into_iter()
        .zip(wrt)
        .map(|(c, &w)| c.unwrap_or_else(|| g.zeros_like(w)))
        .collect())
}

/// Forward mode, in place: appends to `g` the nodes computing
/// `sum_i ∂outputs[k]/∂wrt[i] · tangents[i]` for each output, and returns
/// their ids (shaped like `outputs[k]`; zeros when it does not depend on `wrt`).
///
/// Every `wrt` node must be an input of `g`; every tangent must have the
/// shape and dtype of its `wrt` node.
///
/// ```
/// use rlx::{autodiff::jvp_nodes, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let t = g.input("t", [3], DType::F64);
/// let y = g.exp(x).unwrap();
/// let ydot = jvp_nodes(&mut g, &[x], &[t], &[y]).unwrap();
/// assert_eq!(g.shape(ydot[0]).dims(), &[3]);
/// ```
pub fn jvp_nodes(
    g: &mut Graph,
    wrt: &[NodeId],
    tangents: &[NodeId],
    outputs: &[NodeId],
) -> Result<Vec<NodeId>> {
    if wrt.len() != tangents.len() {
        return Err(Error::CountMismatch {
            what: "tangents (one per wrt node) given to `jvp`".into(),
            expected: wrt.len(),
            got: tangents.len(),
        });
    }
    check_wrt(g, wrt, "jvp")?;
    for &o in outputs {
        g.try_node(o)?;
    }
    for (&w, &t) in wrt.iter().zip(tangents) {
        let want = g.ty(w);
        let got = g.try_node(t)?.ty();
        if want != got {
            return Err(Error::ShapeMismatch {
                op: "jvp",
                lhs: want.shape,
                rhs: got.shape,
                expected: format!(
                    "a tangent for {w} (input `{}`) of type {}{}, got {}{}",
                    input_name(g, w),
                    want.dtype,
                    g.shape(w),
                    got.dtype,
                    g.shape(t)
                ),
            });
        }
    }
    let tans: Vec<Option<NodeId>> = tangents.iter().map(|&t| Some(t)).collect();
    let outs = forward(g, wrt, &tans, outputs)?;
    Ok(outs
        .into_iter()
        .zip(outputs)
        .map(|(t, &o)| t.unwrap_or_else(|| g.zeros_like(o)))
        .collect())
}

fn input_name(g: &Graph, id: NodeId) -> String {
    match g.node(id).op {
        Op::Input { index } => g.inputs()[index].name.clone(),
        _ => String::new(),
    }
}

fn check_wrt(g: &Graph, wrt: &[NodeId], op: &'static str) -> Result<()> {
    for &w in wrt {
        let node = g.try_node(w)?;
        if !matches!(node.op, Op::Input { .. }) {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "can only differentiate with respect to graph inputs, but {w} is `{}`\n{}",
                    node.op,
                    g.context(w.index())
                ),
            });
        }
    }
    Ok(())
}

/// The reverse walk. `leaves` are the nodes whose cotangents are wanted; the
/// walk neither visits nodes below index `lo` nor propagates through a leaf.
/// Returns one cotangent per leaf (`None` = zero).
pub(crate) fn backward(
    g: &mut Graph,
    outputs: &[NodeId],
    cotangents: &[NodeId],
    leaves: &[NodeId],
    lo: usize,
) -> Result<Vec<Option<NodeId>>> {
    let n = g.len();
    let depends = depends_on(g, leaves, lo, n);
    let mut is_leaf = vec![false; n];
    for l in leaves {
        is_leaf[l.index()] = true;
    }
    let mut ct: Vec<Option<NodeId>> = vec![None; n];
    for (&o, &c) in outputs.iter().zip(cotangents) {
        if depends[o.index()] && g.dtype(o).is_inexact() {
            accumulate(g, &mut ct, o, c)?;
        }
    }
    let top = outputs.iter().map(|o| o.index() + 1).max().unwrap_or(0);
    // Cotangents of slices, gathered when the walk reaches the sliced value
    // (see `slices`).
    let mut sliced: Vec<Vec<slices::SliceCt>> = vec![Vec::new(); n];
    for i in (lo..top).rev() {
        flush_slices(g, &mut ct, &mut sliced, i)?;
        let Some(c) = ct[i] else { continue };
        if is_leaf[i] || !depends[i] {
            continue;
        }
        let id = NodeId(i as u32);
        let inputs = g.node(id).inputs.clone();
        let needs: Vec<bool> = inputs
            .iter()
            .map(|j| depends[j.index()] && g.dtype(*j).is_inexact())
            .collect();
        if !needs.iter().any(|&b| b) {
            continue;
        }
        if let Op::Slice { axis, start, .. } = g.node(id).op {
            check_like(g, id, c, "vjp")?;
            sliced[inputs[0].index()].push(slices::SliceCt { axis, start, ct: c });
            continue;
        }
        let before = g.len();
        let grads = vjp_rule(g, id, c, &needs)?;
        g.mark_derivatives(before, id);
        if grads.len() != inputs.len() {
            return Err(rule_error(
                g,
                id,
                "vjp",
                "returned the wrong number of cotangents",
            ));
        }
        for ((&j, gj), &need) in inputs.iter().zip(grads).zip(&needs) {
            if let (Some(gj), true) = (gj, need) {
                accumulate(g, &mut ct, j, gj)?;
            }
        }
    }
    for l in leaves {
        flush_slices(g, &mut ct, &mut sliced, l.index())?;
    }
    Ok(leaves.iter().map(|l| ct[l.index()]).collect())
}

/// Adds the gathered cotangents of the slices of node `i` to its cotangent.
fn flush_slices(
    g: &mut Graph,
    ct: &mut [Option<NodeId>],
    sliced: &mut [Vec<slices::SliceCt>],
    i: usize,
) -> Result<()> {
    if sliced[i].is_empty() {
        return Ok(());
    }
    let parts = std::mem::take(&mut sliced[i]);
    let x = NodeId(i as u32);
    for t in slices::gather(g, x, parts)? {
        accumulate(g, ct, x, t)?;
    }
    Ok(())
}

/// The forward walk: propagates `tangents` of `leaves` to `outputs`, visiting
/// nodes from the lowest leaf up to the highest output. Returns one tangent
/// per output (`None` = zero). A tangent that is zero by construction (a
/// constant, or a slice of a constant where it is 0) counts as `None`.
pub(crate) fn forward(
    g: &mut Graph,
    leaves: &[NodeId],
    tangents: &[Option<NodeId>],
    outputs: &[NodeId],
) -> Result<Vec<Option<NodeId>>> {
    let n = g.len();
    let mut tan: Vec<Option<NodeId>> = vec![None; n];
    let mut is_leaf = vec![false; n];
    for (&l, &t) in leaves.iter().zip(tangents) {
        is_leaf[l.index()] = true;
        if let Some(t) = t {
            if g.dtype(l).is_inexact() && !zeros::is_zero(g, t) {
                accumulate(g, &mut tan, l, t)?;
            }
        }
    }
    let lo = leaves.iter().map(|l| l.index()).min().unwrap_or(n);
    let top = outputs.iter().map(|o| o.index() + 1).max().unwrap_or(0);
    for i in lo..top {
        if is_leaf[i] {
            continue;
        }
        let id = NodeId(i as u32);
        let node = g.node(id);
        if !node.dtype.is_inexact() {
            continue;
        }
        let ins: Vec<Option<NodeId>> = node.inputs.iter().map(|j| tan[j.index()]).collect();
        if ins.iter().all(Option::is_none) {
            continue;
        }
        let before = g.len();
        let rule = jvp_rule(g, id, &ins)?;
        g.mark_derivatives(before, id);
        if let Some(t) = rule {
            check_like(g, id, t, "jvp")?;
            // A tangent that is zero by construction is none (see `zeros`).
            if !zeros::is_zero(g, t) {
                tan[i] = Some(t);
            }
        }
    }
    Ok(outputs.iter().map(|o| tan[o.index()]).collect())
}

/// For nodes `lo..n`: whether the node depends on one of `leaves`.
fn depends_on(g: &Graph, leaves: &[NodeId], lo: usize, n: usize) -> Vec<bool> {
    let mut dep = vec![false; n];
    for l in leaves {
        dep[l.index()] = true;
    }
    for i in lo..n {
        if !dep[i] {
            dep[i] = g.nodes()[i].inputs.iter().any(|j| dep[j.index()]);
        }
    }
    dep
}

fn accumulate(g: &mut Graph, acc: &mut [Option<NodeId>], at: NodeId, c: NodeId) -> Result<()> {
    check_like(g, at, c, "vjp")?;
    acc[at.index()] = Some(match acc[at.index()] {
        None => c,
        Some(prev) => g.add(prev, c)?,
    });
    Ok(())
}

/// A (co)tangent must have its primal's exact type.
fn check_like(g: &Graph, primal: NodeId, d: NodeId, kind: &'static str) -> Result<()> {
    let (p, t) = (g.node(primal), g.node(d));
    if p.shape != t.shape || p.dtype != t.dtype {
        return Err(rule_error(
            g,
            primal,
            kind,
            &format!(
                "derivative has type {}{} but the value has type {}{}",
                t.dtype, t.shape, p.dtype, p.shape
            ),
        ));
    }
    Ok(())
}

fn rule_error(g: &Graph, id: NodeId, kind: &str, what: &str) -> Error {
    Error::InvalidGraph {
        node: id.0,
        message: format!("the {kind} rule of `{}` {what}", g.node(id).op.name()),
        context: g.context(id.index()),
    }
}

// ---- small graph helpers shared by the rules ----

/// A 0-d constant with the dtype of `like` (broadcasts in binary ops).
pub(crate) fn konst(g: &mut Graph, v: f64, like: NodeId) -> NodeId {
    let dt = g.dtype(like);
    g.scalar(v, dt)
}

/// `x` reshaped to `full`'s rank with size-1 dims at the reduced `axes`.
pub(crate) fn keep_dims(g: &mut Graph, x: NodeId, full: &Shape, axes: &[usize]) -> Result<NodeId> {
    let dims: Vec<usize> = full
        .dims()
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    g.reshape(x, dims)
}

/// `x` (reduced over `axes`) broadcast back to `full`.
pub(crate) fn expand(g: &mut Graph, x: NodeId, full: &Shape, axes: &[usize]) -> Result<NodeId> {
    let k = keep_dims(g, x, full, axes)?;
    g.broadcast(k, full.clone())
}

/// Broadcasts `x` to `shape` when it is smaller.
pub(crate) fn fit(g: &mut Graph, x: NodeId, shape: &Shape) -> Result<NodeId> {
    g.broadcast(x, shape.clone())
}

/// A distinct identity node over `x`, so that several operands that are the
/// same node get separate (co)tangents when a sub-graph is inlined.
pub(crate) fn proxy(g: &mut Graph, x: NodeId) -> NodeId {
    let n = g.node(x);
    let node = Node {
        op: Op::Broadcast {
            shape: n.shape.clone(),
        },
        inputs: vec![x],
        shape: n.shape.clone(),
        dtype: n.dtype,
    };
    g.push_unchecked(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, CmpOp, DType, ReduceOp, UnaryOp};

    /// Every rule of every element-wise op and reduction builds a verified
    /// graph in every float dtype, for first and second order.
    #[test]
    fn every_rule_builds_valid_graphs_in_every_float_dtype() {
        for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            for u in UnaryOp::ALL {
                if u == UnaryOp::Not {
                    continue;
                }
                let mut g = Graph::new();
                let x = g.input("x", [2, 3], dt);
                let y = g.unary(u, x).unwrap();
                let s = g.sum_all(y).unwrap();
                g.set_outputs(vec![s]);
                check_all(&g, u.name());
            }
            for b in BinaryOp::ALL {
                if matches!(b, BinaryOp::And | BinaryOp::Or) {
                    continue;
                }
                let mut g = Graph::new();
                let a = g.input("a", [2, 3], dt);
                let c = g.input("c", [3], dt);
                let y = g.binary(b, a, c).unwrap();
                let s = g.sum_all(y).unwrap();
                g.set_outputs(vec![s]);
                check_all(&g, b.name());
            }
            for r in ReduceOp::ALL {
                let mut g = Graph::new();
                let a = g.input("a", [2, 3], dt);
                let y = g.reduce(r, a, &[1]).unwrap();
                let z = g.sin(y).unwrap();
                let s = g.sum_all(z).unwrap();
                g.set_outputs(vec![s]);
                check_all(&g, r.name());
            }
        }
    }

    fn check_all(g: &Graph, what: &str) {
        for (name, r) in [
            ("grad", transforms::grad(g, &[0])),
            ("jvp", transforms::jvp(g, &[0])),
            ("vjp", transforms::vjp(g, &[0])),
            ("hvp", transforms::hvp(g, &[0])),
            ("hessian", transforms::hessian(g, &[0])),
        ] {
            let h = r.unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
            h.verify().unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        }
    }

    #[test]
    fn integer_and_bool_values_carry_no_cotangent() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let k = g.input("k", [3], DType::I64);
        let kf = g.cast(k, DType::F64).unwrap();
        let c = g.compare(CmpOp::Lt, x, kf).unwrap();
        let cf = g.cast(c, DType::F64).unwrap();
        let p = g.mul(cf, x).unwrap();
        let s = g.sum_all(p).unwrap();
        let ct = g.ones_like(s);
        let before = g.len();
        let d = vjp_nodes(&mut g, &[s], &[ct], &[x, k]).unwrap();
        // the i64 input gets an i64 zero; nothing was differentiated through the compare
        assert_eq!(g.dtype(d[1]), DType::I64);
        assert!(g.nodes()[before..]
            .iter()
            .all(|n| !matches!(n.op, Op::Compare(_))));
    }

    #[test]
    fn reverse_mode_skips_branches_that_do_not_reach_wrt() {
        // d/dx of (x * w) with w an input not differentiated: no matmul-like
        // work for w's cotangent is emitted.
        let mut g = Graph::new();
        let x = g.input("x", [4, 3], DType::F32);
        let w = g.input("w", [3, 5], DType::F32);
        let y = g.matmul(x, w).unwrap();
        let s = g.sum_all(y).unwrap();
        let ct = g.ones_like(s);
        let before = g.len();
        vjp_nodes(&mut g, &[s], &[ct], &[x]).unwrap();
        let matmuls = g.nodes()[before..]
            .iter()
            .filter(|n| n.op == Op::MatMul)
            .count();
        assert_eq!(matmuls, 1);
    }
}
