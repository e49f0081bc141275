//! Zero tangents recognised by structure.
//!
//! A tangent computed from constants alone whose every element is a zero
//! (a slice of a Jacobian's unit basis vector where it is 0, broadcast over
//! the batch) is no tangent: the forward driver treats it as the rules'
//! `None`, so the derivative graph adds no term for it. Materialised, such
//! a zero would stay in the graph: `(+0.0) + t` is not `t` in IEEE
//! arithmetic (`t = -0.0` gives `+0.0`), so the optimiser, which applies
//! only exact identities, may not remove it.
//!
//! The check is conservative: `true` only when every element of the value
//! is ±0 by construction (a constant, moved by broadcasts, reshapes,
//! transposes, slices, negations or `stop_gradient`).

use crate::{Graph, Literal, NodeId, Op, Shape, UnaryOp};

/// A region of a value: elements `start..start + len` along `axis`.
type Region = (usize, usize, usize);

/// Whether every element of node `id` is ±0 by construction.
pub(crate) fn is_zero(g: &Graph, id: NodeId) -> bool {
    zero_in(g, id, None)
}

/// Whether every element of `id` in `region` (all of it for `None`) is ±0.
fn zero_in(g: &Graph, id: NodeId, region: Option<Region>) -> bool {
    let n = g.node(id);
    match &n.op {
        Op::Constant(lit) => constant_zero(lit, &n.shape, region),
        Op::Broadcast { .. } => {
            let x = n.inputs[0];
            let xs = g.shape(x);
            let lead = n.shape.rank() - xs.rank();
            match region {
                // Along an axis `x` has (not broadcast), the region is a
                // slice of `x`; along a broadcast axis, it reads all of `x`.
                Some((axis, start, len)) if axis >= lead && xs.dim(axis - lead) != 1 => {
                    zero_in(g, x, Some((axis - lead, start, len)))
                }
                _ => zero_in(g, x, None),
            }
        }
        Op::Slice { axis, start, len } => {
            let x = n.inputs[0];
            match region {
                None => zero_in(g, x, Some((*axis, *start, *len))),
                Some((a, s, l)) if a == *axis => zero_in(g, x, Some((a, start + s, l))),
                // A region of the slice lies inside the slice.
                Some(_) => zero_in(g, x, Some((*axis, *start, *len))),
            }
        }
        // A region of these lies inside (the image of) their operand.
        Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::StopGradient
        | Op::Unary(UnaryOp::Neg)
        | Op::Cast(_) => zero_in(g, n.inputs[0], None),
        _ => false,
    }
}

/// Whether the elements of a constant of shape `shape` in `region` are ±0.
fn constant_zero(lit: &Literal, shape: &Shape, region: Option<Region>) -> bool {
    let zero = |i: usize| lit.get_f64(i) == 0.0;
    match lit {
        Literal::Splat(v) => *v == 0.0,
        Literal::SplatI64(v) => *v == 0,
        Literal::F64(_) | Literal::I64(_) => {
            let numel = shape.numel();
            match region {
                None => (0..numel).all(zero),
                Some((axis, start, len)) => {
                    let stride: usize = shape.dims()[axis + 1..].iter().product();
                    let dim = shape.dim(axis);
                    (0..numel).all(|i| {
                        let k = (i / stride.max(1)) % dim.max(1);
                        !(start..start + len).contains(&k) || zero(i)
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn slices_of_broadcast_unit_vectors_are_zero_where_the_vector_is() {
        let mut g = Graph::new();
        let e = g
            .constant(
                Literal::F64(vec![0.0, -0.0, 1.0].into()),
                [1, 3],
                DType::F64,
            )
            .unwrap();
        let b = g.broadcast(e, [5, 3]).unwrap();
        let s01 = g.slice_range(b, 0..2, 1).unwrap();
        let s2 = g.slice_range(b, 2..3, 1).unwrap();
        let rows = g.slice_range(b, 1..3, 0).unwrap(); // a broadcast axis: all of `e`
        let r = g.reshape(s01, [10]).unwrap();
        let n = g.neg(r).unwrap();
        let inner = g.slice_range(s01, 1..2, 1).unwrap();
        let x = g.input("x", [5, 3], DType::F64);
        let z = g.full([5, 3], 0.0, DType::F64);
        let m = g.mul_zero(z, x).unwrap();
        assert!(is_zero(&g, s01) && is_zero(&g, r) && is_zero(&g, n) && is_zero(&g, inner));
        assert!(is_zero(&g, z));
        assert!(!is_zero(&g, s2) && !is_zero(&g, rows) && !is_zero(&g, b));
        // Not a constant: not recognised, whatever it computes.
        assert!(!is_zero(&g, m) && !is_zero(&g, x));
    }
}
