//! The reverse-mode table: one VJP rule per [`Op`], one exhaustive `match`.
//!
//! `vjp_rule(g, node, ct, needs)` returns, for each operand of `node`, the
//! cotangent `ctᵀ · ∂node/∂operand` shaped like that operand, or `None` for
//! zero (and for operands with `needs[i] == false`, which the driver found
//! not to lead to a differentiated input). Rules only append nodes to `g`.
//!
//! Non-element-wise formulas (`y` is the node, `ȳ` the cotangent):
//! - `reduce_sum`: `x̄ = broadcast(ȳ)`; `mean`: divided by the count;
//!   `reduce_max`/`reduce_min`: `ȳ` split evenly over the positions equal to
//!   the extremum; `prod`: `ȳ · ∏_{j≠i} x_j`, computed without dividing by
//!   zero: with no zero in the slice it is `y / x_i`, with exactly one zero it
//!   is the product of the non-zeros at the zero and 0 elsewhere, with two or
//!   more zeros it is 0. (Exact first derivatives everywhere; derivatives of
//!   higher order are exact away from zeros.)
//! - `matmul`: `Ā = ȳ Bᵀ`, `B̄ = Aᵀ ȳ`, each summed to the operand's shape
//!   (batch broadcasting).
//! - `softmax`: `x̄ = y ⊙ (ȳ − Σ ȳ ⊙ y)`; `log_softmax`: `x̄ = ȳ − eʸ Σ ȳ`.
//! - `solve` (`X = A⁻¹ B`): `B̄ = solve(Aᵀ, ȳ)`, `Ā = −B̄ Xᵀ`.
//! - `gather` ↔ `scatter_add`: each is the other's transpose.
//! - `custom`: the op's `vjp` graph, inlined; without one, its `forward` graph
//!   is inlined and differentiated in place.
//! - `loop`: see [`loop_rules`](super::loop_rules) (a reverse loop).
//! - `root`: `p̄ = −J_pᵀ (J_x⁻ᵀ x̄*)`, see [`root_rules`](super::root_rules).

use super::{complex, derivs};
use super::{expand, konst, proxy};
use crate::{BinaryOp, CmpOp, Graph, NodeId, Op, ReduceOp, Result, Shape};

/// The VJP rule of `node` for cotangent `ct`; see the module docs.
pub fn vjp_rule(
    g: &mut Graph,
    node: NodeId,
    ct: NodeId,
    needs: &[bool],
) -> Result<Vec<Option<NodeId>>> {
    let n = g.try_node(node)?.clone();
    let x = &n.inputs;
    let need = |i: usize| needs.get(i).copied().unwrap_or(false);
    let shape_of = |g: &Graph, i: usize| g.shape(x[i]).clone();
    Ok(match &n.op {
        Op::Input { .. } | Op::Constant(_) => vec![],
        Op::Unary(u) if complex::crosses(g, *u, x[0]) => {
            vec![Some(complex::vjp_unary(g, *u, x[0], node, ct)?)]
        }
        Op::Unary(u) => {
            let f = derivs::unary(g, *u, x[0], node)?;
            vec![f.apply(g, ct)?]
        }
        Op::Binary(BinaryOp::Complex) => {
            let (a, b) = complex::vjp_complex(g, ct, (need(0), need(1)))?;
            let mut out = Vec::with_capacity(2);
            for (i, v) in [a, b].into_iter().enumerate() {
                out.push(match v {
                    Some(v) => {
                        let s = shape_of(g, i);
                        Some(g.sum_to(v, &s)?)
                    }
                    None => None,
                });
            }
            out
        }
        Op::Binary(b) => {
            let (fa, fb) = derivs::binary(g, *b, (x[0], x[1], node), (need(0), need(1)))?;
            let mut out = Vec::with_capacity(2);
            for (i, f) in [fa, fb].into_iter().enumerate() {
                out.push(match f.apply(g, ct)? {
                    Some(v) => {
                        let s = shape_of(g, i);
                        Some(g.sum_to(v, &s)?)
                    }
                    None => None,
                });
            }
            out
        }
        Op::Compare(_) => vec![None, None],
        Op::Select => {
            let c = x[0];
            let mut out = vec![None];
            for (i, taken) in [(1, true), (2, false)] {
                if !need(i) {
                    out.push(None);
                    continue;
                }
                let z = konst(g, 0.0, ct);
                let v = if taken {
                    g.select(c, ct, z)?
                } else {
                    g.select(c, z, ct)?
                };
                let s = shape_of(g, i);
                out.push(Some(g.sum_to(v, &s)?));
            }
            out
        }
        Op::Cast(_) => {
            if g.dtype(x[0]).is_inexact() && n.dtype.is_inexact() {
                let dt = g.dtype(x[0]);
                vec![Some(g.cast(ct, dt)?)]
            } else {
                vec![None]
            }
        }
        Op::Reduce { op, axes } => {
            let xs = shape_of(g, 0);
            vec![reduce_vjp(g, *op, axes, x[0], node, ct, &xs)?]
        }
        Op::MatMul => {
            let (a, b) = (x[0], x[1]);
            let mut out = vec![None, None];
            if need(0) {
                let bt = g.transpose_last2(b)?;
                let v = g.matmul(ct, bt)?;
                let s = shape_of(g, 0);
                out[0] = Some(g.sum_to(v, &s)?);
            }
            if need(1) {
                let at = g.transpose_last2(a)?;
                let v = g.matmul(at, ct)?;
                let s = shape_of(g, 1);
                out[1] = Some(g.sum_to(v, &s)?);
            }
            out
        }
        Op::Transpose { perm } => {
            let mut inv = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i;
            }
            vec![Some(g.transpose(ct, &inv)?)]
        }
        Op::Reshape { .. } => {
            let s = shape_of(g, 0);
            vec![Some(g.reshape(ct, s)?)]
        }
        Op::Broadcast { .. } => {
            let s = shape_of(g, 0);
            vec![Some(g.sum_to(ct, &s)?)]
        }
        Op::Concat { axis } => {
            let mut out = Vec::with_capacity(x.len());
            let mut start = 0;
            for (i, &xi) in x.iter().enumerate() {
                let len = g.shape(xi).dim(*axis);
                out.push(if need(i) {
                    Some(g.slice_range(ct, start..start + len, *axis)?)
                } else {
                    None
                });
                start += len;
            }
            out
        }
        Op::Slice { axis, start, len } => {
            let xs = shape_of(g, 0);
            let size = xs.dim(*axis);
            let mut parts = Vec::with_capacity(3);
            let dt = n.dtype;
            let pad = |g: &mut Graph, k: usize| {
                let mut d = xs.dims().to_vec();
                d[*axis] = k;
                g.full(d, 0.0, dt)
            };
            if *start > 0 {
                parts.push(pad(g, *start));
            }
            parts.push(ct);
            let after = size - start - len;
            if after > 0 {
                parts.push(pad(g, after));
            }
            vec![Some(g.concat(&parts, *axis)?)]
        }
        Op::Gather { axis } => {
            let z = g.zeros_like(x[0]);
            vec![Some(g.scatter_add(z, x[1], ct, *axis)?), None]
        }
        Op::ScatterAdd { axis } => {
            let upd = if need(2) {
                Some(g.gather(ct, x[1], *axis)?)
            } else {
                None
            };
            vec![need(0).then_some(ct), None, upd]
        }
        Op::Softmax { axis } => {
            let xs = shape_of(g, 0);
            let cy = g.mul(ct, node)?;
            let s = g.sum(cy, &[*axis])?;
            let sb = expand(g, s, &xs, &[*axis])?;
            let d = g.sub(ct, sb)?;
            vec![Some(g.mul(node, d)?)]
        }
        Op::LogSoftmax { axis } => {
            let xs = shape_of(g, 0);
            let s = g.sum(ct, &[*axis])?;
            let sb = expand(g, s, &xs, &[*axis])?;
            let p = g.exp(node)?;
            let ps = g.mul(p, sb)?;
            vec![Some(g.sub(ct, ps)?)]
        }
        Op::Solve => {
            let a = x[0];
            let at = g.transpose_last2(a)?;
            let bbar = g.solve(at, ct)?;
            let abar = if need(0) {
                let xt = g.transpose_last2(node)?;
                let p = g.matmul(bbar, xt)?;
                Some(g.neg(p)?)
            } else {
                None
            };
            vec![abar, need(1).then_some(bbar)]
        }
        Op::StopGradient => vec![None],
        Op::Custom(c) => match &c.vjp {
            Some(rule) => {
                let mut args = x.clone();
                args.push(node);
                args.push(ct);
                g.inline(rule, &args)?.into_iter().map(Some).collect()
            }
            None => {
                // Differentiate the body: inline it over distinct proxies of
                // the operands and walk back from its output to the proxies.
                let inner = c.forward.inline_custom()?;
                let proxies: Vec<NodeId> = x.iter().map(|&xi| proxy(g, xi)).collect();
                let lo = g.len();
                let out = g.inline(&inner, &proxies)?[0];
                let cts = super::backward(g, &[out], &[ct], &proxies, lo)?;
                cts.into_iter()
                    .enumerate()
                    .map(|(i, c)| c.filter(|_| need(i)))
                    .collect()
            }
        },
        Op::Root(r) => super::root_rules::vjp(g, r, node, x, ct, needs)?,
        Op::SparseSolve(s) => super::sparse_solve_rules::vjp(g, s, node, x, ct, need(0), need(1))?,
        Op::Loop(l) => super::loop_rules::vjp(g, l, x, ct)?
            .into_iter()
            .enumerate()
            .map(|(i, c)| c.filter(|_| need(i)))
            .collect(),
    })
}

/// Cotangent of the operand of a reduction (`y = reduce(x)`, cotangent `ct`).
fn reduce_vjp(
    g: &mut Graph,
    op: ReduceOp,
    axes: &[usize],
    x: NodeId,
    y: NodeId,
    ct: NodeId,
    xs: &Shape,
) -> Result<Option<NodeId>> {
    if !g.dtype(x).is_inexact() {
        return Ok(None);
    }
    Ok(Some(match op {
        ReduceOp::Sum => expand(g, ct, xs, axes)?,
        ReduceOp::Mean => {
            let count: usize = axes.iter().map(|&a| xs.dim(a)).product();
            let inv = konst(g, 1.0 / count.max(1) as f64, ct);
            let c = g.mul(ct, inv)?;
            expand(g, c, xs, axes)?
        }
        ReduceOp::Max | ReduceOp::Min => {
            let w = extremum_weights(g, axes, x, y, xs)?;
            let cb = expand(g, ct, xs, axes)?;
            g.mul(cb, w)?
        }
        ReduceOp::Prod => {
            let others = prod_others(g, axes, x, xs)?;
            let cb = expand(g, ct, xs, axes)?;
            g.mul(cb, others)?
        }
    }))
}

/// `mask / count`: 1/k at each of the k positions equal to the extremum `y`.
pub(crate) fn extremum_weights(
    g: &mut Graph,
    axes: &[usize],
    x: NodeId,
    y: NodeId,
    xs: &Shape,
) -> Result<NodeId> {
    let yb = expand(g, y, xs, axes)?;
    let mask = g.compare(CmpOp::Eq, x, yb)?;
    let dt = g.dtype(x);
    let m = g.cast(mask, dt)?;
    let cnt = g.sum(m, axes)?;
    let cb = expand(g, cnt, xs, axes)?;
    g.div(m, cb)
}

/// `∏_{j≠i} x_j` over the reduced axes, for every position `i`, without
/// dividing by zero (see the module docs).
pub(crate) fn prod_others(g: &mut Graph, axes: &[usize], x: NodeId, xs: &Shape) -> Result<NodeId> {
    let zero = konst(g, 0.0, x);
    let one = konst(g, 1.0, x);
    let is0 = g.compare(CmpOp::Eq, x, zero)?;
    let nz = g.select(is0, one, x)?;
    let p_nz = g.reduce(ReduceOp::Prod, nz, axes)?;
    let dt = g.dtype(x);
    let z = g.cast(is0, dt)?;
    let zeros = g.sum(z, axes)?;
    let pb = expand(g, p_nz, xs, axes)?;
    let zb = expand(g, zeros, xs, axes)?;
    let none = g.compare(CmpOp::Eq, zb, zero)?;
    let one_z = g.compare(CmpOp::Eq, zb, one)?;
    let q = g.div(pb, nz)?;
    let at_nonzero = g.select(none, q, zero)?;
    let at_zero = g.select(one_z, pb, zero)?;
    g.select(is0, at_zero, at_nonzero)
}
