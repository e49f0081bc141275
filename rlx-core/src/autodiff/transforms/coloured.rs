//! Dense Jacobians and Hessians from a few coloured products.
//!
//! A dense Jacobian by basis vectors costs one product per input element
//! (forward) or per output element (reverse), whatever the structure; a
//! tridiagonal residual of 200 unknowns takes 200 products though three
//! colours cover its columns. When the graph's structural pattern (as for
//! the sparse companions) admits far fewer colours than the dense basis
//! has vectors, `jacobian` and `hessian` build the compressed program
//! of [`sparse`](super::sparse) and add its values into dense blocks of
//! zeros by one `scatter_add` with constant indices (as CasADi computes
//! every Jacobian).
//!
//! Entries inside the pattern are computed by the same operations as in
//! the dense products: the columns sharing a colour reach disjoint rows,
//! so each entry's tangent (or cotangent) meets the same values in the
//! same order. Entries outside the pattern are exactly zero: the output
//! element does not depend on the input element at all (the dense product
//! would give `0 · x'` there, NaN when `x'` is; the sparse companions also
//! give zero).
//!
//! The pattern is looked for only when the dense basis has at least
//! `MIN_PASSES` vectors, and given up when its dependency sets grow past
//! a few times the element count of the dense product (see `limit`), so
//! a dense problem pays a bounded search and keeps its basis products.

use super::finish;
use super::sparse::{choose, compressed_hessian, compressed_jacobian};
use crate::colouring;
use crate::sparsity::{hessian_pattern_within, jacobian_pattern_within, Pattern};
use crate::{DType, Graph, Literal, NodeId, Result};

/// The fewest basis vectors for which colouring is tried.
pub(crate) const MIN_PASSES: usize = 8;

/// Dependency entries (and Hessian pairs) the pattern search may hold: four
/// times the element count of the dense product over `passes` vectors,
/// between 2¹⁶ and `MAX_ENTRIES`.
fn limit(g: &Graph, passes: usize) -> usize {
    let elements = g
        .nodes()
        .iter()
        .fold(0usize, |t, n| t.saturating_add(n.shape.numel()));
    elements
        .saturating_mul(passes)
        .saturating_mul(4)
        .clamp(1 << 16, MAX_ENTRIES)
}

/// The most entries a pattern search holds (a few hundred megabytes), so
/// that a dense companion of a huge graph never spends more on looking for
/// structure than a bounded amount.
const MAX_ENTRIES: usize = 1 << 25;

/// One dense block: its row elements (shape, offset among the pattern's
/// rows) by its column elements (shape, offset among the columns).
struct Block {
    rows: Vec<usize>,
    row0: usize,
    cols: Vec<usize>,
    col0: usize,
}

/// The Jacobian of output 0 as `jacobian`(super::jacobian) lays it out,
/// by coloured products, when they number at most half of `passes` (the
/// dense basis products); else `None`.
pub(crate) fn jacobian(
    g: &Graph,
    wrt: &[usize],
    nodes: &[NodeId],
    o: NodeId,
    passes: usize,
) -> Result<Option<Graph>> {
    let cols = nodes
        .iter()
        .fold(0usize, |t, &w| t.saturating_add(g.shape(w).numel()));
    if passes < MIN_PASSES || !real(g, nodes, o) || too_large(g.shape(o).numel(), cols) {
        return Ok(None);
    }
    let Some(pattern) = jacobian_pattern_within(g, wrt, limit(g, passes))? else {
        return Ok(None);
    };
    let (mode, b) = choose(&pattern, None)?;
    if 2 * b.count() > passes {
        return Ok(None);
    }
    let out = g.shape(o).dims().to_vec();
    let blocks: Vec<Block> = offsets(g, nodes)
        .map(|(w, col0)| Block {
            rows: out.clone(),
            row0: 0,
            cols: g.shape(w).dims().to_vec(),
            col0,
        })
        .collect();
    let program = compressed_jacobian(g, wrt, pattern.clone(), mode, &b)?;
    spread(program.graph, g, &pattern, g.dtype(o), &blocks).map(Some)
}

/// The Hessian of the scalar output 0 as `hessian`(super::hessian) lays
/// it out (one block per pair of `wrt`, row-major), from `gg` (the
/// gradient graph) by a star colouring, when it needs at most half of
/// `passes` products; else `None`.
pub(crate) fn hessian(
    g: &Graph,
    gg: &Graph,
    wrt: &[usize],
    nodes: &[NodeId],
    passes: usize,
) -> Result<Option<Graph>> {
    let o = g.outputs()[0];
    if passes < MIN_PASSES || !real(g, nodes, o) || too_large(passes, passes) {
        return Ok(None);
    }
    let Some(pattern) = hessian_pattern_within(g, wrt, limit(gg, passes))? else {
        return Ok(None);
    };
    let c = colouring::star(&pattern);
    if 2 * c.count() > passes {
        return Ok(None);
    }
    let mut blocks = Vec::with_capacity(nodes.len() * nodes.len());
    for (a, row0) in offsets(g, nodes) {
        for (b, col0) in offsets(g, nodes) {
            blocks.push(Block {
                rows: g.shape(a).dims().to_vec(),
                row0,
                cols: g.shape(b).dims().to_vec(),
                col0,
            });
        }
    }
    let program = compressed_hessian(g, gg, wrt, pattern.clone(), &c)?;
    spread(program.graph, g, &pattern, g.dtype(o), &blocks).map(Some)
}

/// Each node with the offset of its first element among `nodes`' elements
/// laid end to end.
fn offsets<'a>(g: &'a Graph, nodes: &'a [NodeId]) -> impl Iterator<Item = (NodeId, usize)> + 'a {
    nodes.iter().scan(0, move |off, &w| {
        let at = *off;
        *off += g.shape(w).numel();
        Some((w, at))
    })
}

/// `r` (a compressed program: `g`'s outputs, then the `[nnz]` values of
/// `pattern`) with the values replaced by the dense `blocks`. Each block is
/// a constant holding `-0.0` at the pattern's entries and `+0.0` elsewhere,
/// into which one `scatter_add` adds the entries' values: `-0.0 + v` is `v`
/// for every `v` (−0.0 and NaN included), so the values keep their bits
/// and the entries outside the pattern are `+0.0`. Writing the block costs
/// a copy of it and `nnz` scattered additions (a gather over every dense
/// entry would also read an index per entry).
fn spread(
    mut r: Graph,
    g: &Graph,
    pattern: &Pattern,
    dt: DType,
    blocks: &[Block],
) -> Result<Graph> {
    let values = *r.outputs().last().expect("the values output");
    let mut dense = Vec::with_capacity(blocks.len());
    for b in blocks {
        let (m, n) = (
            b.rows.iter().product::<usize>(),
            b.cols.iter().product::<usize>(),
        );
        // The pattern's entries inside the block: (value index, dense position).
        let inside: Vec<(usize, usize)> = pattern
            .entries()
            .enumerate()
            .filter(|&(_, (i, j))| {
                (b.row0..b.row0 + m).contains(&i) && (b.col0..b.col0 + n).contains(&j)
            })
            .map(|(k, (i, j))| (k, (i - b.row0) * n + (j - b.col0)))
            .collect();
        let mut base = vec![0.0; m * n];
        for &(_, at) in &inside {
            base[at] = -0.0;
        }
        let base = r.constant(Literal::F64(base.into()), [m * n], dt)?;
        let flat = if inside.is_empty() {
            base
        } else {
            let updates = if inside.len() == pattern.nnz() {
                values
            } else {
                let ks: Vec<i64> = inside.iter().map(|&(k, _)| k as i64).collect();
                let ks = r.constant(Literal::I64(ks.into()), [inside.len()], DType::I64)?;
                r.gather(values, ks, 0)?
            };
            let at: Vec<i64> = inside.iter().map(|&(_, at)| at as i64).collect();
            let at = r.constant(Literal::I64(at.into()), [inside.len()], DType::I64)?;
            r.scatter_add(base, at, updates, 0)?
        };
        let mut dims = b.rows.clone();
        dims.extend_from_slice(&b.cols);
        dense.push(r.reshape(flat, dims)?);
    }
    // `r` was optimised: `g`'s outputs are its first ones, not `g`'s ids.
    let mut outs = r.outputs()[..g.outputs().len()].to_vec();
    outs.extend(dense);
    r.set_outputs(outs);
    finish(r)
}

/// Whether a `rows × cols` pattern's arrays alone would pass
/// `MAX_ENTRIES`.
fn too_large(rows: usize, cols: usize) -> bool {
    rows.saturating_add(cols) > MAX_ENTRIES
}

/// Whether the output and every differentiated input are real floats (the
/// compressed programs' domain).
fn real(g: &Graph, nodes: &[NodeId], o: NodeId) -> bool {
    g.dtype(o).is_float() && nodes.iter().all(|&w| g.dtype(w).is_float())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autodiff::transforms::{grad_graph, wrt_nodes};
    use crate::test_graphs::tridiagonal;

    fn jac(g: &Graph) -> Option<Graph> {
        let nodes = wrt_nodes(g, &[0], "t").unwrap();
        let n = g.shape(nodes[0]).numel();
        jacobian(g, &[0], &nodes, g.outputs()[0], n).unwrap()
    }

    #[test]
    fn a_tridiagonal_jacobian_takes_the_coloured_products() {
        let g = tridiagonal(200);
        let h = jac(&g).expect("three colours, not 200 products");
        assert_eq!(h.shape(h.outputs()[2]).dims(), &[200, 200]);
        // Its Hessian (of Σ y², pentadiagonal) too.
        let mut s = g.clone();
        s.set_outputs(vec![g.outputs()[1]]);
        let gg = grad_graph(&s, &[0], "t").unwrap();
        let nodes = wrt_nodes(&s, &[0], "t").unwrap();
        assert!(hessian(&s, &gg, &[0], &nodes, 200).unwrap().is_some());
    }

    #[test]
    fn a_dense_coupling_keeps_the_basis_products() {
        // y = x · Σ x: every output depends on every input.
        let mut g = Graph::new();
        let x = g.input("x", [40], DType::F64);
        let s = g.sum_all(x).unwrap();
        let y = g.mul(x, s).unwrap();
        g.set_outputs(vec![y]);
        assert!(jac(&g).is_none());
        // Too few basis products to gain anything.
        assert!(jac(&tridiagonal(MIN_PASSES - 1)).is_none());
    }

    #[test]
    fn a_huge_graph_is_not_searched() {
        // 2⁴⁰ elements: the pattern's arrays alone would not fit in memory.
        let mut g = Graph::new();
        let x = g.input("x", [1 << 40], DType::F64);
        let y = g.exp(x).unwrap();
        g.set_outputs(vec![y]);
        assert!(jac(&g).is_none());
        let mut h = g.clone();
        let f = h.sum_all(y).unwrap();
        h.set_outputs(vec![f]);
        let gg = grad_graph(&h, &[0], "t").unwrap();
        let nodes = wrt_nodes(&h, &[0], "t").unwrap();
        assert!(hessian(&h, &gg, &[0], &nodes, 1 << 40).unwrap().is_none());
    }

    #[test]
    fn the_pattern_search_gives_up_past_its_limit() {
        // Each of the 40 outputs depends on all 40 inputs: 1600 entries
        // per node, above a limit of 1000.
        let mut g = Graph::new();
        let x = g.input("x", [40], DType::F64);
        let s = g.sum_all(x).unwrap();
        let y = g.mul(x, s).unwrap();
        g.set_outputs(vec![y]);
        assert!(jacobian_pattern_within(&g, &[0], 1000).unwrap().is_none());
        assert!(jacobian_pattern_within(&g, &[0], 10_000).unwrap().is_some());
        let mut h = g.clone();
        let f = h.sum_all(y).unwrap();
        h.set_outputs(vec![f]);
        assert!(hessian_pattern_within(&h, &[0], 1000).unwrap().is_none());
    }
}
