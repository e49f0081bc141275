//! Cotangents of slices, gathered per sliced value.
//!
//! The reverse rule of one `slice` pads its cotangent with zeros to the
//! operand's shape, so a value read through `k` slices would receive `k`
//! full-size cotangents and `k - 1` full-size adds: `O(k · n)` for a value
//! of `n` elements (an LSTM that computes every step's input at once and
//! slices one step at a time). The reverse walk instead collects the
//! cotangents of all slices of a value and, when it reaches the value,
//! writes them into as few zero-padded concatenations as the overlaps
//! allow: slices along one axis are sorted by start and placed greedily in
//! layers of non-overlapping windows (the fewest layers possible for
//! intervals), and each layer is one `concat` of the cotangents with zero
//! gaps between them. Disjoint slices (the LSTM, a split into columns) cost
//! `O(n + Σ slice sizes)`; two overlapping slices (Rosenbrock's `x[1:]` and
//! `x[:-1]`) cost what the plain rule costs.

use crate::{Graph, NodeId, Result};

/// The cotangent of one slice of a value: `ct` fills `start..start + len`
/// along `axis`.
#[derive(Clone, Copy, Debug)]
pub(super) struct SliceCt {
    pub(super) axis: usize,
    pub(super) start: usize,
    pub(super) ct: NodeId,
}

/// The cotangents of `x` from its slices `parts`, as one full-size term per
/// layer of non-overlapping windows (see the module docs).
pub(super) fn gather(g: &mut Graph, x: NodeId, mut parts: Vec<SliceCt>) -> Result<Vec<NodeId>> {
    let shape = g.shape(x).clone();
    let dt = g.dtype(x);
    parts.sort_by_key(|p| (p.axis, p.start));
    // Layers per axis: each layer is a list of windows sorted by start.
    let mut layers: Vec<(usize, Vec<SliceCt>)> = Vec::new();
    for p in parts {
        let fits = layers.iter_mut().find(|(axis, l)| {
            *axis == p.axis
                && l.last()
                    .is_none_or(|q| q.start + g.shape(q.ct).dim(q.axis) <= p.start)
        });
        match fits {
            Some((_, l)) => l.push(p),
            None => layers.push((p.axis, vec![p])),
        }
    }
    let mut terms = Vec::with_capacity(layers.len());
    for (axis, l) in layers {
        let size = shape.dim(axis);
        let mut pieces = Vec::with_capacity(2 * l.len() + 1);
        let mut at = 0;
        let zeros = |g: &mut Graph, k: usize| {
            let mut d = shape.dims().to_vec();
            d[axis] = k;
            g.full(d, 0.0, dt)
        };
        for p in &l {
            if p.start > at {
                pieces.push(zeros(g, p.start - at));
            }
            pieces.push(p.ct);
            at = p.start + g.shape(p.ct).dim(axis);
        }
        if at < size {
            pieces.push(zeros(g, size - at));
        }
        terms.push(g.concat(&pieces, axis)?);
    }
    Ok(terms)
}
