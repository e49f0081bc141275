//! The derivative rules of a root (see [`crate::solvers`]): the implicit
//! function theorem at the solution, never the Newton iterations.
//!
//! For `y = x*(p)` with `F(y, p) = 0`, `J_x = ∂F/∂x` and `J_p = ∂F/∂p` at
//! `(y, p)`:
//!
//! ```text
//! jvp:  ẏ = −J_x⁻¹ (J_p ṗ)        vjp:  λ = J_x⁻ᵀ ȳ,  p̄ = −J_pᵀ λ,  x̄0 = 0
//! ```
//!
//! `J_p ṗ` is the forward mode of the residual inlined at `(y, p)`, `J_pᵀ μ`
//! its reverse mode, `J_x` the residual's Jacobian graph
//! ([`RootOp::jacobian`]) inlined at `(y, p)`, and the solves are the dense
//! `solve` op (its transpose for reverse mode), or for a sparse Jacobian
//! its `[nnz]` values and a [`SparseSolveOp`] (transposed in reverse mode):
//! no dense `J_x` or `J_p` is ever formed on the sparse path. Every node is an ordinary
//! op with rules of its own, and `y` is the root node itself, so the rules
//! compose: the derivative of a rule differentiates the root again (second
//! order: `hvp`, `hessian`).
//!
//! `J_x` is evaluated and factored again at `(y, p)` instead of reusing
//! the LU of Newton's last iteration: reusing it would make the factors a
//! value of the graph (`n² + n` per root, and per step inside a `#[scan]`,
//! where the checkpoint budget bounds what a step may keep), and second
//! order differentiates `J_x` itself, which a factorisation value would
//! need a rule for. The cost is one Jacobian and one LU per root and
//! derivative pass, the cost of one more Newton iteration. On the sparse
//! path the runtime saves the factorisation: the Jacobian's values are
//! evaluated again in the graph, but a sparse solve whose values equal
//! (bit for bit) those Newton factored last takes that factorisation from
//! the pattern's solver pool instead of factoring again.

use super::{backward, forward, proxy};
use crate::solvers::RootJacobian;
use crate::{Graph, NodeId, Result, RootOp, SparseSolveOp};

/// `J_x` at the root `node` (operands `x`: `[x0, p..]`): an `[n, n]` node
/// (dense), or the `[nnz]` values of its pattern (sparse).
fn jacobian_at(g: &mut Graph, r: &RootOp, node: NodeId, x: &[NodeId]) -> Result<NodeId> {
    let mut args = vec![node];
    args.extend_from_slice(&x[1..]);
    let graph = match &r.jacobian {
        RootJacobian::Dense(j) => j,
        RootJacobian::Sparse { values, .. } => values,
    };
    Ok(g.inline(graph, &args)?[0])
}

/// `J_x⁻¹ b` (or `J_x⁻ᵀ b` when `transpose`) for a flat `[n]` node `b`,
/// with `j` from [`jacobian_at`]: a dense `solve` or a sparse one.
fn solve_with(g: &mut Graph, r: &RootOp, j: NodeId, b: NodeId, transpose: bool) -> Result<NodeId> {
    let n = g.shape(b).numel();
    match &r.jacobian {
        RootJacobian::Dense(_) => {
            let a = if transpose { g.transpose_last2(j)? } else { j };
            let rhs = g.reshape(b, [n, 1])?;
            let s = g.solve(a, rhs)?;
            g.reshape(s, [n])
        }
        RootJacobian::Sparse { pattern, .. } => {
            let op = SparseSolveOp {
                pattern: pattern.clone(),
                transpose,
            };
            g.sparse_solve(op, j, b)
        }
    }
}

/// The residual inlined at `(node, p)` over distinct proxies of its
/// arguments (so that a parameter passed twice gets two tangents): the
/// proxies and the residual's value.
fn residual_at(
    g: &mut Graph,
    r: &RootOp,
    node: NodeId,
    x: &[NodeId],
) -> Result<(Vec<NodeId>, NodeId)> {
    let mut proxies = vec![proxy(g, node)];
    proxies.extend(x[1..].iter().map(|&p| proxy(g, p)));
    let f = g.inline(&r.residual, &proxies)?[0];
    Ok((proxies, f))
}

/// The JVP rule of root `node` with operands `x` and their `tangents`.
pub(crate) fn jvp(
    g: &mut Graph,
    r: &RootOp,
    node: NodeId,
    x: &[NodeId],
    tangents: &[Option<NodeId>],
) -> Result<Option<NodeId>> {
    if tangents.iter().skip(1).all(Option::is_none) {
        return Ok(None);
    }
    let (proxies, f) = residual_at(g, r, node, x)?;
    let mut tans = vec![None];
    tans.extend(tangents.iter().skip(1).copied());
    let Some(fp) = forward(g, &proxies, &tans, &[f])?[0] else {
        return Ok(None);
    };
    let shape = g.shape(node).clone();
    let n = shape.numel();
    let j = jacobian_at(g, r, node, x)?;
    let rhs = g.reshape(fp, [n])?;
    let s = solve_with(g, r, j, rhs, false)?;
    let s = g.neg(s)?;
    Ok(Some(g.reshape(s, shape)?))
}

/// The VJP rule of root `node` with operands `x` for cotangent `ct`: one
/// cotangent per operand (none for the guess).
pub(crate) fn vjp(
    g: &mut Graph,
    r: &RootOp,
    node: NodeId,
    x: &[NodeId],
    ct: NodeId,
    needs: &[bool],
) -> Result<Vec<Option<NodeId>>> {
    let need = |i: usize| needs.get(i).copied().unwrap_or(false);
    let mut out = vec![None; x.len()];
    if !(1..x.len()).any(need) {
        return Ok(out);
    }
    let shape = g.shape(node).clone();
    let n = shape.numel();
    let j = jacobian_at(g, r, node, x)?;
    let c = g.reshape(ct, [n])?;
    let lambda = solve_with(g, r, j, c, true)?;
    let mu = g.neg(lambda)?;
    let mu = g.reshape(mu, shape)?;
    let lo = g.len();
    let (proxies, f) = residual_at(g, r, node, x)?;
    let cts = backward(g, &[f], &[mu], &proxies, lo)?;
    for (i, c) in cts.into_iter().enumerate().skip(1) {
        out[i] = c.filter(|_| need(i));
    }
    Ok(out)
}
