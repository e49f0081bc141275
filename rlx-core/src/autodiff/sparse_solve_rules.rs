//! The derivative rules of a sparse solve ([`SparseSolveOp`]): solves with
//! the same matrix, never a dense one.
//!
//! Write `M` for the solved matrix (`A`, or `Aᵀ` for a transposed solve),
//! so entry `k` of the values sits at `(u_k, w_k)` of `M` (`(row_k, col_k)`
//! of the pattern, swapped for `Aᵀ`). For `x = M⁻¹ b`:
//!
//! ```text
//! jvp:  ẋ = M⁻¹ (ḃ − Ṁ x),   (Ṁ x)[u_k] += v̇_k x[w_k]
//! vjp:  b̄ = M⁻ᵀ x̄,           v̄_k = −b̄[u_k] x[w_k]   (summed over a batch
//!                                                    of right-hand sides)
//! ```
//!
//! The gathers and the scatter-add take constant indices; every node is an
//! ordinary op, so the rules compose (second order differentiates them).

use crate::{DType, Graph, Literal, NodeId, Result, SparseSolveOp};

/// The constant `[nnz]` indices `(u, w)` of the solved matrix's entries.
fn entry_indices(g: &mut Graph, s: &SparseSolveOp) -> Result<(NodeId, NodeId)> {
    let p = &s.pattern;
    let nnz = p.nnz();
    let (mut rows, mut cols) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
    for (r, c) in p.entries() {
        rows.push(r as i64);
        cols.push(c as i64);
    }
    let (u, w) = if s.transpose {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let u = g.constant(Literal::I64(u.into()), [nnz], DType::I64)?;
    let w = g.constant(Literal::I64(w.into()), [nnz], DType::I64)?;
    Ok((u, w))
}

/// The JVP rule of sparse solve `node` (operands `x = [values, b]`).
pub(crate) fn jvp(
    g: &mut Graph,
    s: &SparseSolveOp,
    node: NodeId,
    x: &[NodeId],
    t_values: Option<NodeId>,
    t_b: Option<NodeId>,
) -> Result<Option<NodeId>> {
    let mx = match t_values {
        Some(tv) => {
            let axis = g.shape(node).rank() - 1;
            let (u, w) = entry_indices(g, s)?;
            let xw = g.gather(node, w, axis)?;
            let prod = g.mul(tv, xw)?;
            let zero = g.zeros_like(node);
            Some(g.scatter_add(zero, u, prod, axis)?)
        }
        None => None,
    };
    let rhs = match (t_b, mx) {
        (Some(tb), Some(mx)) => g.sub(tb, mx)?,
        (Some(tb), None) => tb,
        (None, Some(mx)) => g.neg(mx)?,
        (None, None) => return Ok(None),
    };
    Ok(Some(g.sparse_solve(s.clone(), x[0], rhs)?))
}

/// The VJP rule of sparse solve `node` (operands `x = [values, b]`) for
/// cotangent `ct`: `[v̄, b̄]` where needed.
pub(crate) fn vjp(
    g: &mut Graph,
    s: &SparseSolveOp,
    node: NodeId,
    x: &[NodeId],
    ct: NodeId,
    need_values: bool,
    need_b: bool,
) -> Result<Vec<Option<NodeId>>> {
    let transposed = SparseSolveOp {
        pattern: s.pattern.clone(),
        transpose: !s.transpose,
    };
    let bbar = g.sparse_solve(transposed, x[0], ct)?;
    let vbar = if need_values {
        let rank = g.shape(node).rank();
        let (u, w) = entry_indices(g, s)?;
        let bu = g.gather(bbar, u, rank - 1)?;
        let xw = g.gather(node, w, rank - 1)?;
        let p = g.mul(bu, xw)?;
        let mut p = g.neg(p)?;
        let vrank = g.shape(x[0]).rank();
        if vrank < rank {
            let axes: Vec<usize> = (0..rank - vrank).collect();
            p = g.sum(p, &axes)?;
        }
        Some(p)
    } else {
        None
    };
    Ok(vec![vbar, need_b.then_some(bbar)])
}
