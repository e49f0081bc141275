//! Sparsity patterns of Jacobians and Hessians, derived from a graph's
//! structure without evaluating anything.
//!
//! - [`Pattern`]: a compressed-sparse-column pattern (no values);
//! - [`jacobian_pattern`]: where `∂out0/∂x` may be nonzero;
//! - [`hessian_pattern`]: where `∂²out0/∂x∂x` may be nonzero.
//!
//! Orientation: rows are the elements of output 0, columns the elements of
//! the differentiated inputs, each tensor flattened row-major and several
//! inputs concatenated in order. Patterns are supersets of the true
//! nonzeros at every point (see `propagate` for what is exact). The
//! colourings that compress them are in [`colouring`](crate::colouring).

mod pattern;
mod propagate;
pub(crate) mod sets;

pub use pattern::Pattern;
pub(crate) use propagate::{constant_indices, split};

use crate::autodiff::transforms::{scalar_out0, wrt_nodes};
use crate::{Error, Graph, NodeId, Result};

/// The Jacobian pattern of output 0 with respect to the inputs at
/// positions `wrt`: `[out0.numel(), Σ wrt numel]`.
///
/// ```
/// use rlx::{core::sparsity::jacobian_pattern, DType, Graph};
/// // y_i = x_i · x_{i+1}: two nonzeros per row.
/// let mut g = Graph::new();
/// let x = g.input("x", [4], DType::F64);
/// let a = g.slice_range(x, 0..3, 0).unwrap();
/// let b = g.slice_range(x, 1..4, 0).unwrap();
/// let y = g.mul(a, b).unwrap();
/// g.set_outputs(vec![y]);
/// let p = jacobian_pattern(&g, &[0]).unwrap();
/// assert_eq!((p.nrows(), p.ncols(), p.nnz()), (3, 4, 6));
/// assert_eq!(p.col(1), &[0, 1]);
/// ```
pub fn jacobian_pattern(g: &Graph, wrt: &[usize]) -> Result<Pattern> {
    Ok(jacobian_pattern_within(g, wrt, usize::MAX)?.expect("no limit"))
}

/// [`jacobian_pattern`], or `None` when finding it would hold more than
/// `limit` dependency entries over the graph's nodes.
pub(crate) fn jacobian_pattern_within(
    g: &Graph,
    wrt: &[usize],
    limit: usize,
) -> Result<Option<Pattern>> {
    let nodes = wrt_nodes(g, wrt, "sparse_jacobian")?;
    let o = out0(g)?;
    let Some(sets) = propagate::propagate(g, &nodes, o, None, limit)? else {
        return Ok(None);
    };
    Ok(Some(Pattern::from_csr(
        sets.len(),
        total(g, &nodes),
        &sets.ptr,
        &sets.idx,
    )))
}

/// The (symmetric) Hessian pattern of the scalar output 0 with respect to
/// the inputs at positions `wrt`: `[n, n]` with `n = Σ wrt numel`.
///
/// ```
/// use rlx::{core::sparsity::hessian_pattern, DType, Graph};
/// // f = Σ_i x_i · x_{i+1}: only neighbours interact.
/// let mut g = Graph::new();
/// let x = g.input("x", [4], DType::F64);
/// let a = g.slice_range(x, 0..3, 0).unwrap();
/// let b = g.slice_range(x, 1..4, 0).unwrap();
/// let y = g.mul(a, b).unwrap();
/// let f = g.sum_all(y).unwrap();
/// g.set_outputs(vec![f]);
/// let p = hessian_pattern(&g, &[0]).unwrap();
/// assert_eq!(p.nnz(), 6); // (i, i+1) and (i+1, i); no diagonal
/// assert!(p.is_symmetric());
/// ```
pub fn hessian_pattern(g: &Graph, wrt: &[usize]) -> Result<Pattern> {
    Ok(hessian_pattern_within(g, wrt, usize::MAX)?.expect("no limit"))
}

/// [`hessian_pattern`], or `None` when finding it would hold more than
/// `limit` dependency entries, or more than `limit` interaction pairs.
pub(crate) fn hessian_pattern_within(
    g: &Graph,
    wrt: &[usize],
    limit: usize,
) -> Result<Option<Pattern>> {
    let nodes = wrt_nodes(g, wrt, "sparse_hessian")?;
    let o = scalar_out0(g, "sparse_hessian")?;
    let mut pairs = propagate::Pairs::within(limit);
    if propagate::propagate(g, &nodes, o, Some(&mut pairs), limit)?.is_none() {
        return Ok(None);
    }
    let mut pairs = pairs.v;
    let n = total(g, &nodes);
    pairs.sort_unstable();
    pairs.dedup();
    let entries: Vec<(usize, usize)> = pairs
        .into_iter()
        .map(|(r, c)| (r as usize, c as usize))
        .collect();
    Pattern::from_entries(n, n, &entries).map(Some)
}

fn total(g: &Graph, nodes: &[NodeId]) -> usize {
    nodes.iter().map(|&w| g.shape(w).numel()).sum()
}

fn out0(g: &Graph) -> Result<NodeId> {
    g.outputs().first().copied().ok_or(Error::CountMismatch {
        what: "outputs of the graph given to `sparse_jacobian`".into(),
        expected: 1,
        got: 0,
    })
}

#[cfg(test)]
mod tests;
