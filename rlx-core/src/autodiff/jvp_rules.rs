//! The forward-mode table: one JVP rule per [`Op`], one exhaustive `match`.
//!
//! `jvp_rule(g, node, tangents)` gets one tangent per operand (`None` =
//! zero) and returns the tangent of `node` shaped like it, or `None` for
//! zero. Rules only append nodes to `g`.
//!
//! Non-element-wise formulas (`y` the node, `ẋ` tangents):
//! - reductions: `sum(ẋ)`, `mean(ẋ)`, `sum(ẋ ⊙ w)` with the extremum weights
//!   of `reduce_max`/`reduce_min` (ties split evenly), `sum(ẋ ⊙ ∏_{j≠i} x_j)`
//!   for `prod`;
//! - `matmul`: `Ȧ B + A Ḃ`; `solve`: `Ẋ = solve(A, Ḃ − Ȧ X)`;
//! - `softmax`: `y ⊙ (ẋ − Σ y ⊙ ẋ)`; `log_softmax`: `ẋ − Σ eʸ ⊙ ẋ`;
//! - data movement ops (transpose, reshape, broadcast, slice, concat, gather,
//!   scatter_add) apply themselves to the tangents;
//! - `custom`: the op's `jvp` graph, inlined; without one, its `forward`
//!   graph is inlined and differentiated in place.
//! - `loop`: see [`loop_rules`](super::loop_rules) (a loop of the JVP).
//! - `root`: `ẋ* = −J_x⁻¹ (J_p ṗ)`, see [`root_rules`](super::root_rules).

use super::vjp_rules::{extremum_weights, prod_others};
use super::{complex, derivs};
use super::{expand, fit, proxy};
use crate::{BinaryOp, Graph, NodeId, Op, ReduceOp, Result};

/// The JVP rule of `node` for operand `tangents`; see the module docs.
pub fn jvp_rule(
    g: &mut Graph,
    node: NodeId,
    tangents: &[Option<NodeId>],
) -> Result<Option<NodeId>> {
    let n = g.try_node(node)?.clone();
    if !n.dtype.is_inexact() {
        return Ok(None);
    }
    let x = &n.inputs;
    let t = |i: usize| tangents.get(i).copied().flatten();
    // Zeros for a missing tangent of operand `i`, where a rule needs all of them.
    let t_or_zero = |g: &mut Graph, i: usize| t(i).unwrap_or_else(|| g.zeros_like(x[i]));
    let out = match &n.op {
        Op::Input { .. } | Op::Constant(_) => None,
        Op::Unary(u) if complex::crosses(g, *u, x[0]) => match t(0) {
            Some(tx) => Some(complex::jvp_unary(g, *u, x[0], node, tx)?),
            None => None,
        },
        Op::Binary(BinaryOp::Complex) => complex::jvp_complex(g, (x[0], x[1]), (t(0), t(1)))?,
        Op::Unary(u) => match t(0) {
            Some(tx) => derivs::unary(g, *u, x[0], node)?.apply(g, tx)?,
            None => None,
        },
        Op::Binary(b) => {
            let (fa, fb) =
                derivs::binary(g, *b, (x[0], x[1], node), (t(0).is_some(), t(1).is_some()))?;
            let da = match t(0) {
                Some(ta) => fa.apply(g, ta)?,
                None => None,
            };
            let db = match t(1) {
                Some(tb) => fb.apply(g, tb)?,
                None => None,
            };
            sum_opt(g, da, db)?
        }
        Op::Compare(_) => None,
        Op::Select => {
            if t(1).is_none() && t(2).is_none() {
                None
            } else {
                let ta = t_or_zero(g, 1);
                let tb = t_or_zero(g, 2);
                Some(g.select(x[0], ta, tb)?)
            }
        }
        Op::Cast(d) => match t(0) {
            Some(tx) if g.dtype(x[0]).is_inexact() => Some(g.cast(tx, *d)?),
            _ => None,
        },
        Op::Reduce { op, axes } => match t(0) {
            Some(tx) => {
                let xs = g.shape(x[0]).clone();
                Some(match op {
                    ReduceOp::Sum => g.sum(tx, axes)?,
                    ReduceOp::Mean => g.reduce(ReduceOp::Mean, tx, axes)?,
                    ReduceOp::Max | ReduceOp::Min => {
                        let w = extremum_weights(g, axes, x[0], node, &xs)?;
                        let p = g.mul(tx, w)?;
                        g.sum(p, axes)?
                    }
                    ReduceOp::Prod => {
                        let o = prod_others(g, axes, x[0], &xs)?;
                        let p = g.mul(tx, o)?;
                        g.sum(p, axes)?
                    }
                })
            }
            None => None,
        },
        Op::MatMul => {
            let da = match t(0) {
                Some(ta) => Some(g.matmul(ta, x[1])?),
                None => None,
            };
            let db = match t(1) {
                Some(tb) => Some(g.matmul(x[0], tb)?),
                None => None,
            };
            sum_opt(g, da, db)?
        }
        Op::Transpose { perm } => match t(0) {
            Some(tx) => Some(g.transpose(tx, perm)?),
            None => None,
        },
        Op::Reshape { shape } => match t(0) {
            Some(tx) => Some(g.reshape(tx, shape.clone())?),
            None => None,
        },
        Op::Broadcast { shape } => match t(0) {
            Some(tx) => Some(g.broadcast(tx, shape.clone())?),
            None => None,
        },
        Op::Concat { axis } => {
            let parts: Vec<NodeId> = (0..x.len()).map(|i| t_or_zero(g, i)).collect();
            Some(g.concat(&parts, *axis)?)
        }
        Op::Slice { axis, start, len } => match t(0) {
            Some(tx) => Some(g.slice_range(tx, *start..*start + *len, *axis)?),
            None => None,
        },
        Op::Gather { axis } => match t(0) {
            Some(tx) => Some(g.gather(tx, x[1], *axis)?),
            None => None,
        },
        Op::ScatterAdd { axis } => {
            if t(0).is_none() && t(2).is_none() {
                None
            } else {
                let to = t_or_zero(g, 0);
                let tu = t_or_zero(g, 2);
                Some(g.scatter_add(to, x[1], tu, *axis)?)
            }
        }
        Op::Softmax { axis } => match t(0) {
            Some(tx) => {
                let xs = g.shape(x[0]).clone();
                let yt = g.mul(node, tx)?;
                let s = g.sum(yt, &[*axis])?;
                let sb = expand(g, s, &xs, &[*axis])?;
                let d = g.sub(tx, sb)?;
                Some(g.mul(node, d)?)
            }
            None => None,
        },
        Op::LogSoftmax { axis } => match t(0) {
            Some(tx) => {
                let xs = g.shape(x[0]).clone();
                let p = g.exp(node)?;
                let pt = g.mul(p, tx)?;
                let s = g.sum(pt, &[*axis])?;
                let sb = expand(g, s, &xs, &[*axis])?;
                Some(g.sub(tx, sb)?)
            }
            None => None,
        },
        Op::Solve => {
            // Ẋ = solve(A, Ḃ − Ȧ X)
            let ax = match t(0) {
                Some(ta) => Some(g.matmul(ta, node)?),
                None => None,
            };
            let rhs = match (t(1), ax) {
                (Some(tb), Some(ax)) => Some(g.sub(tb, ax)?),
                (Some(tb), None) => Some(tb),
                (None, Some(ax)) => Some(g.neg(ax)?),
                (None, None) => None,
            };
            match rhs {
                Some(r) => Some(g.solve(x[0], r)?),
                None => None,
            }
        }
        Op::StopGradient => None,
        Op::Custom(c) => match &c.jvp {
            Some(rule) => {
                let mut args = x.clone();
                for i in 0..x.len() {
                    let ti = t_or_zero(g, i);
                    args.push(ti);
                }
                Some(g.inline(rule, &args)?[0])
            }
            None => {
                // Differentiate the body: inline it over distinct proxies of
                // the operands and push the tangents through it.
                let inner = c.forward.inline_custom()?;
                let proxies: Vec<NodeId> = x.iter().map(|&xi| proxy(g, xi)).collect();
                let out = g.inline(&inner, &proxies)?[0];
                let tans: Vec<Option<NodeId>> = (0..x.len()).map(t).collect();
                super::forward(g, &proxies, &tans, &[out])?[0]
            }
        },
        Op::Loop(l) => {
            let tans: Vec<Option<NodeId>> = (0..x.len()).map(t).collect();
            super::loop_rules::jvp(g, l, x, &tans)?
        }
        Op::Root(r) => {
            let tans: Vec<Option<NodeId>> = (0..x.len()).map(t).collect();
            super::root_rules::jvp(g, r, node, x, &tans)?
        }
        Op::SparseSolve(s) => super::sparse_solve_rules::jvp(g, s, node, x, t(0), t(1))?,
    };
    match out {
        Some(v) => Ok(Some(fit(g, v, &n.shape)?)),
        None => Ok(None),
    }
}

fn sum_opt(g: &mut Graph, a: Option<NodeId>, b: Option<NodeId>) -> Result<Option<NodeId>> {
    Ok(match (a, b) {
        (Some(a), Some(b)) => Some(g.add(a, b)?),
        (a, None) => a,
        (None, b) => b,
    })
}
