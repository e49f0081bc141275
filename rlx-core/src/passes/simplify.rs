//! Algebraic simplification.
//!
//! Each rule replaces a node by a cheaper node of exactly the same shape and
//! dtype. When the simpler value has a smaller shape (the `-0.0` in
//! `x + (-0.0)` broadcast `x` to a bigger shape), it is broadcast back to the
//! node's shape; a rule that cannot produce the node's type does not fire.
//!
//! Exactness contract: every rule gives, for every input, the bits the
//! original node gives with the runtime's kernels, NaN, ±inf, −0.0 and
//! subnormals included (NaN payloads aside: any NaN stands for any NaN).
//! An identity that fails for some input (`x * 0 = 0` fails for NaN, ±inf
//! and negative `x`; `x + 0 = x` fails for `x = −0.0`; `x − x = 0` and
//! `x / x = 1` fail for NaN and ±inf) is not a rule, whatever the graph
//! around it. Constants are folded separately ([`fold`](super::fold)),
//! where the operand's value is known, so `c * 0` of a constant `c` still
//! becomes a constant.
//!
//! Rules (a constant *is* a value when every element has it; for floats,
//! `+0.0` and `-0.0` are told apart by their sign bit):
//! - floats: `x + (-0.0)`, `(-0.0) + x`, `x - (+0.0)` → `x` (`-0.0` is the
//!   additive identity: `+0.0 + -0.0 = +0.0`); `(-0.0) - x` → `-x`;
//! - `i64`, where every zero is the identity: `x + 0`, `0 + x`, `x - 0` → `x`;
//!   `0 - x` → `-x`; `x * 0`, `0 * x` → zeros;
//! - `x * 1`, `1 * x`, `x / 1`, `x ^ 1`, `powi(x, 1)`, `mul_zero(1, x)` → `x`;
//!   `x * -1`, `-1 * x` → `-x`;
//! - `mul_zero(0, x)` → zeros (`+0.0`: the op, float only, is defined as
//!   `+0.0` wherever its first operand is a zero of either sign, whatever `x`);
//! - `mul_zero(c, x)` → `c * x` for an `f32`/`f64` constant `c` with no zero
//!   element (the two ops differ only where `c` is 0);
//! - `x + (-y)`, `(-y) + x` → `x - y`; `x - (-y)` → `x + y` (IEEE defines
//!   `a - b` as `a + (-b)`);
//! - `x and true`, `x or false` → `x`; `x and false` → false, `x or true` → true;
//! - `neg(neg(x))` → `x`; `cast` to the operand's dtype → `x`; a round trip
//!   through a wider type (`f32 -> f64 -> f32`, `f16 -> f32 -> f16`,
//!   `bool -> any -> bool`) → `x`;
//! - `reshape(reshape(x))` → one reshape, reshape or broadcast to the
//!   operand's own shape → `x`; `broadcast(broadcast(x))` → one broadcast;
//! - `transpose(transpose(x))` → one transpose, or `x` when the permutations
//!   cancel; identity transposes → `x`;
//! - reductions over no axes: `prod`, `max`, `min` (and every reduction of
//!   an `i64`) → `x`; a float `sum` or `mean` → `x + (+0.0)` (the kernels
//!   accumulate onto `+0.0`, so a `-0.0` element gives `+0.0`);
//! - full-range slices, one-operand concats → `x`;
//! - `select(c, a, b)` with a constant all-true / all-false `c` → `a` / `b`;
//!   `select(c, a, a)` → `a`;
//! - `stop_gradient` is kept (the autodiff rules need it; see
//!   [`strip_stop_gradient`](super::strip_stop_gradient)).
//!
//! Not rules, because they are not exact: `x * 0`, `0 * x`, `mul_zero(x, 0)`
//! for floats (NaN and ±inf give NaN, negative `x` gives `-0.0`); `x + (+0.0)`
//! and `x - (-0.0)` (`-0.0` gives `+0.0`); `(+0.0) - x` (`+0.0` gives `+0.0`,
//! not `-0.0`); `mul_zero(x, 1)` for floats (`-0.0` gives `+0.0`); `x - x`,
//! `x / x`, `0 / x` (NaN and ±inf).

use super::{copy, rewrite, verified};
use crate::{BinaryOp, DType, Graph, Literal, Node, NodeId, Op, ReduceOp, Result, UnaryOp};

/// Applies the algebraic identities listed in the module docs.
///
/// ```
/// use rlx::{core::passes::simplify, DType, Graph, Op};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let zero = g.full([2, 3], -0.0, DType::F64);
/// let y = g.add(x, zero).unwrap(); // [3] + [2, 3] -> broadcast of x
/// g.set_outputs(vec![y]);
/// let s = simplify(&g).unwrap();
/// let out = s.node(s.outputs()[0]);
/// assert!(matches!(out.op, Op::Broadcast { .. }));
/// assert_eq!(out.shape.dims(), &[2, 3]);
/// ```
pub fn simplify(g: &Graph) -> Result<Graph> {
    verified(traced(g)?.0)
}

/// [`simplify()`] and the origins of the result's nodes.
pub(super) fn traced(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    rewrite(g, |out, node, args| match rule(out, node, args)? {
        Some(id) => Ok(id),
        None => Ok(copy(out, node, args)),
    })
}

/// The value every element of constant node `id` has, if it is one.
fn splat_value(g: &Graph, id: NodeId) -> Option<f64> {
    match &g.node(id).op {
        Op::Constant(lit) => match lit {
            Literal::Splat(v) => Some(*v),
            Literal::SplatI64(v) => Some(*v as f64),
            Literal::F64(d) => {
                let first = *d.first()?;
                d.iter()
                    .all(|x| x.to_bits() == first.to_bits())
                    .then_some(first)
            }
            Literal::I64(d) => {
                let first = *d.first()?;
                d.iter().all(|&x| x == first).then_some(first as f64)
            }
        },
        _ => None,
    }
}

/// Whether constant `id` has value `v` everywhere (`==`: for `v = 0` both
/// zeros match; use [`is_zero`] where the sign matters).
fn is_value(g: &Graph, id: NodeId, v: f64) -> bool {
    splat_value(g, id).is_some_and(|x| x == v)
}

/// Whether constant `id` is a zero of the given sign everywhere (told
/// apart by the sign bit, as IEEE addition does).
fn is_zero(g: &Graph, id: NodeId, negative: bool) -> bool {
    splat_value(g, id).is_some_and(|x| x == 0.0 && x.is_sign_negative() == negative)
}

/// `cand` given `node`'s type: itself when the shapes agree, a broadcast
/// when it has a smaller shape that broadcasts, `None` otherwise.
fn fit(out: &mut Graph, node: &Node, cand: NodeId) -> Result<Option<NodeId>> {
    let c = out.node(cand);
    if c.dtype != node.dtype {
        return Ok(None);
    }
    if c.shape == node.shape {
        return Ok(Some(cand));
    }
    if !c.shape.broadcasts_to(&node.shape) {
        return Ok(None);
    }
    out.broadcast(cand, node.shape.clone()).map(Some)
}

/// Whether `id` is a constant none of whose elements is zero in its dtype
/// (`f32`/`f64` only: a small `f64` literal may round to zero in `f16`).
fn nowhere_zero(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    let nonzero = |v: f64| match n.dtype {
        DType::F64 => v != 0.0,
        DType::F32 => v as f32 != 0.0,
        _ => false,
    };
    match &n.op {
        Op::Constant(Literal::Splat(v)) => nonzero(*v),
        Op::Constant(Literal::F64(d)) => d.iter().all(|&v| nonzero(v)),
        _ => false,
    }
}

fn filled(out: &mut Graph, node: &Node, v: f64) -> Option<NodeId> {
    Some(out.full(node.shape.clone(), v, node.dtype))
}

/// The replacement for `node` (operands already mapped to `args`), if a rule applies.
fn rule(out: &mut Graph, node: &Node, args: &[NodeId]) -> Result<Option<NodeId>> {
    if let Some(r) = super::sink::rule(out, node, args)? {
        return Ok(Some(r));
    }
    match &node.op {
        Op::Input { .. } | Op::Constant(_) => Ok(None),
        Op::Binary(b) => binary_rule(out, node, *b, args[0], args[1]),
        Op::Unary(u) => {
            let x = args[0];
            match u {
                UnaryOp::Neg => match &out.node(x).op {
                    Op::Unary(UnaryOp::Neg) => {
                        let inner = out.node(x).inputs[0];
                        fit(out, node, inner)
                    }
                    _ => Ok(None),
                },
                UnaryOp::Powi(1) => fit(out, node, x),
                UnaryOp::Exp
                | UnaryOp::Expm1
                | UnaryOp::Ln
                | UnaryOp::Log1p
                | UnaryOp::Sin
                | UnaryOp::Cos
                | UnaryOp::Tan
                | UnaryOp::Tanh
                | UnaryOp::Sinh
                | UnaryOp::Cosh
                | UnaryOp::Asin
                | UnaryOp::Acos
                | UnaryOp::Atan
                | UnaryOp::Sigmoid
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
                | UnaryOp::Recip
                | UnaryOp::Square
                | UnaryOp::Powi(_)
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Relu
                | UnaryOp::Gelu
                | UnaryOp::Silu
                | UnaryOp::Erf
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Not
                | UnaryOp::Conj
                | UnaryOp::Real
                | UnaryOp::Imag => Ok(None),
            }
        }
        Op::Compare(_) => Ok(None),
        Op::Select => {
            let (c, a, b) = (args[0], args[1], args[2]);
            if a == b {
                return fit(out, node, a);
            }
            match splat_value(out, c) {
                Some(v) if v != 0.0 => fit(out, node, a),
                Some(_) => fit(out, node, b),
                None => Ok(None),
            }
        }
        Op::Cast(d) => {
            let x = args[0];
            if out.dtype(x) == *d {
                return fit(out, node, x);
            }
            // cast(cast(y, wide), y.dtype) -> y when `wide` holds every value of y's dtype.
            if let Op::Cast(mid) = out.node(x).op {
                let y = out.node(x).inputs[0];
                if out.dtype(y) == *d && lossless(*d, mid) {
                    return fit(out, node, y);
                }
            }
            Ok(None)
        }
        Op::Reduce { op, axes } => {
            let x = args[0];
            if !axes.is_empty() {
                return Ok(None);
            }
            match op {
                // The kernels accumulate sums onto +0.0: `-0.0` gives `+0.0`.
                ReduceOp::Sum | ReduceOp::Mean if node.dtype.is_float() => {
                    let z = out.scalar(0.0, node.dtype);
                    out.add(x, z).map(Some)
                }
                _ => fit(out, node, x),
            }
        }
        Op::Transpose { perm } => {
            let x = args[0];
            let (src, perm) = match &out.node(x).op {
                // out axis i = x axis perm[i] = src axis p1[perm[i]]
                Op::Transpose { perm: p1 } => (
                    out.node(x).inputs[0],
                    perm.iter().map(|&p| p1[p]).collect::<Vec<usize>>(),
                ),
                _ => (x, perm.clone()),
            };
            if perm.iter().enumerate().all(|(i, &p)| i == p) {
                return fit(out, node, src);
            }
            if src == x {
                return Ok(None);
            }
            out.transpose(src, &perm).map(Some)
        }
        Op::Reshape { shape } => {
            let x = args[0];
            let src = match &out.node(x).op {
                Op::Reshape { .. } => out.node(x).inputs[0],
                _ => x,
            };
            if out.shape(src) == shape {
                return fit(out, node, src);
            }
            if src == x {
                return Ok(None);
            }
            out.reshape(src, shape.clone()).map(Some)
        }
        Op::Broadcast { shape } => {
            let x = args[0];
            let src = match &out.node(x).op {
                Op::Broadcast { .. } => out.node(x).inputs[0],
                _ => x,
            };
            if out.shape(src) == shape {
                return fit(out, node, src);
            }
            if src == x {
                return Ok(None);
            }
            out.broadcast(src, shape.clone()).map(Some)
        }
        Op::Slice { axis, start, len } => {
            let x = args[0];
            if *start == 0 && out.shape(x).dims().get(*axis) == Some(len) {
                fit(out, node, x)
            } else {
                Ok(None)
            }
        }
        Op::Concat { .. } => {
            if args.len() == 1 {
                fit(out, node, args[0])
            } else {
                Ok(None)
            }
        }
        Op::MatMul
        | Op::Gather { .. }
        | Op::ScatterAdd { .. }
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Solve
        | Op::StopGradient
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => Ok(None),
    }
}

/// Whether every value of dtype `from` converts to `to` and back unchanged.
fn lossless(from: DType, to: DType) -> bool {
    match from {
        DType::Bool => true,
        DType::F16 | DType::BF16 => matches!(to, DType::F32 | DType::F64),
        DType::F32 => to == DType::F64,
        DType::F64 | DType::I64 => false,
        DType::C32 => to == DType::C64,
        DType::C64 => false,
    }
}

/// `y` if `id` is `neg(y)`.
fn negated(g: &Graph, id: NodeId) -> Option<NodeId> {
    match g.node(id).op {
        Op::Unary(UnaryOp::Neg) => Some(g.node(id).inputs[0]),
        _ => None,
    }
}

fn binary_rule(
    out: &mut Graph,
    node: &Node,
    b: BinaryOp,
    x: NodeId,
    y: NodeId,
) -> Result<Option<NodeId>> {
    // Every zero is an identity of `i64` arithmetic; float rules must say
    // which zero they mean.
    let int = node.dtype == DType::I64;
    let is = |out: &Graph, id: NodeId, v: f64| is_value(out, id, v);
    // The additive identity: `-0.0` for floats (`+0.0 + -0.0 = +0.0`, while
    // `-0.0 + +0.0 = +0.0` would lose the sign), any zero for `i64`.
    let add_identity = |out: &Graph, id: NodeId| {
        if int {
            is(out, id, 0.0)
        } else {
            is_zero(out, id, true)
        }
    };
    match b {
        BinaryOp::Add => {
            if add_identity(out, y) {
                fit(out, node, x)
            } else if add_identity(out, x) {
                fit(out, node, y)
            } else if let Some(ny) = negated(out, y) {
                out.sub(x, ny).map(Some)
            } else if let Some(nx) = negated(out, x) {
                out.sub(y, nx).map(Some)
            } else {
                Ok(None)
            }
        }
        BinaryOp::Sub => {
            // `x - (+0.0)` is `x + (-0.0)`; `(-0.0) - x` is `-(0.0 + x)`
            // with the zero of the sign that keeps `x`.
            if (int && is(out, y, 0.0)) || is_zero(out, y, false) {
                fit(out, node, x)
            } else if (int && is(out, x, 0.0)) || is_zero(out, x, true) {
                let n = out.neg(y)?;
                fit(out, node, n)
            } else if let Some(ny) = negated(out, y) {
                out.add(x, ny).map(Some)
            } else {
                Ok(None)
            }
        }
        BinaryOp::Mul | BinaryOp::MulZero => {
            let mul_zero = b == BinaryOp::MulZero;
            if (int && (is(out, x, 0.0) || is(out, y, 0.0))) || (mul_zero && is(out, x, 0.0)) {
                // `mul_zero(0, x)` is +0.0 for every `x` (and either zero).
                Ok(filled(out, node, 0.0))
            } else if is(out, y, 1.0) && !mul_zero {
                // Not `mul_zero(x, 1)` of floats: `x = -0.0` gives `+0.0`.
                fit(out, node, x)
            } else if is(out, x, 1.0) {
                fit(out, node, y)
            } else if !mul_zero && is(out, y, -1.0) {
                let n = out.neg(x)?;
                fit(out, node, n)
            } else if !mul_zero && is(out, x, -1.0) {
                let n = out.neg(y)?;
                fit(out, node, n)
            } else if mul_zero && nowhere_zero(out, x) {
                // `mul_zero` differs from `mul` only where `x` is 0.
                out.mul(x, y).map(Some)
            } else {
                Ok(None)
            }
        }
        BinaryOp::Div | BinaryOp::Pow => {
            if is(out, y, 1.0) {
                fit(out, node, x)
            } else {
                Ok(None)
            }
        }
        BinaryOp::And => match (splat_value(out, x), splat_value(out, y)) {
            (_, Some(v)) if v != 0.0 => fit(out, node, x),
            (Some(v), _) if v != 0.0 => fit(out, node, y),
            (_, Some(_)) | (Some(_), _) => Ok(filled(out, node, 0.0)),
            (None, None) => Ok(None),
        },
        BinaryOp::Or => match (splat_value(out, x), splat_value(out, y)) {
            (_, Some(0.0)) => fit(out, node, x),
            (Some(0.0), _) => fit(out, node, y),
            (_, Some(_)) | (Some(_), _) => Ok(filled(out, node, 1.0)),
            (None, None) => Ok(None),
        },
        BinaryOp::Min | BinaryOp::Max | BinaryOp::Atan2 | BinaryOp::Complex => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Shape, UnaryOp};

    fn ops(g: &Graph) -> Vec<String> {
        g.nodes().iter().map(|n| n.op.to_string()).collect()
    }

    #[test]
    fn add_zero_and_mul_one_return_x() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F32);
        let nz = g.scalar(-0.0, DType::F32);
        let z = g.scalar(0.0, DType::F32);
        let one = g.full([3], 1.0, DType::F32);
        let a = g.add(x, nz).unwrap();
        let b = g.mul(one, a).unwrap();
        let c = g.div(b, one).unwrap();
        let d = g.sub(c, z).unwrap();
        g.set_outputs(vec![d]);
        assert_eq!(g.len(), 8);
        let s = crate::passes::dce(&simplify(&g).unwrap()).unwrap();
        assert_eq!(s.to_string(), "%0 = input#0 \"x\"() : f32[3]\nreturn (%0)");
    }

    #[test]
    fn add_zero_that_broadcasts_becomes_a_broadcast() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let z = g.full([2, 1], -0.0, DType::F64);
        let y = g.add(z, x).unwrap();
        g.set_outputs(vec![y]);
        let s = crate::passes::dce(&simplify(&g).unwrap()).unwrap();
        assert_eq!(
            s.to_string(),
            "%0 = input#0 \"x\"() : f64[3]\n%1 = broadcast [2, 3](%0) : f64[2, 3]\nreturn (%1)"
        );
    }

    #[test]
    fn mul_zero_by_a_nowhere_zero_constant_becomes_mul() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let c = g.scalar(4.0, DType::F64);
        let w = g.mul_zero(c, x).unwrap();
        // Not rewritten: the constant is the second operand, or has a zero,
        // or underflows to zero in f16.
        let v = g.mul_zero(x, c).unwrap();
        let cz = g
            .constant(Literal::F64(vec![1.0, 0.0, 2.0].into()), [3], DType::F64)
            .unwrap();
        let u = g.mul_zero(cz, x).unwrap();
        let xh = g.input("xh", [], DType::F16);
        let tiny = g.scalar(1e-30, DType::F16);
        let h = g.mul_zero(tiny, xh).unwrap();
        g.set_outputs(vec![w, v, u, h]);
        let s = simplify(&g).unwrap();
        let ops: Vec<&Op> = s.outputs().iter().map(|&o| &s.node(o).op).collect();
        assert_eq!(ops[0], &Op::Binary(BinaryOp::Mul), "{s}");
        for op in &ops[1..] {
            assert_eq!(*op, &Op::Binary(BinaryOp::MulZero), "{s}");
        }
    }

    #[test]
    fn mul_zero_of_a_zero_gives_zeros_of_the_broadcast_shape_and_dtype() {
        let mut g = Graph::new();
        let x = g.input("x", [2, 3], DType::BF16);
        let z = g.scalar(-0.0, DType::BF16);
        let w = g.mul_zero(z, x).unwrap();
        g.set_outputs(vec![w]);
        let s = crate::passes::dce(&simplify(&g).unwrap()).unwrap();
        let n = s.node(s.outputs()[0]);
        // +0.0, as the kernel gives for a zero first operand of either sign.
        assert!(
            matches!(n.op, Op::Constant(Literal::Splat(v)) if v.to_bits() == 0),
            "{s}"
        );
        assert_eq!(
            (n.shape.clone(), n.dtype),
            (Shape::from([2, 3]), DType::BF16)
        );
        // x * 0 of an i64 is 0 for every x.
        let mut g = Graph::new();
        let x = g.input("x", [4], DType::I64);
        let z = g.scalar(0.0, DType::I64);
        let y = g.mul(z, x).unwrap();
        let v = g.mul(x, z).unwrap();
        g.set_outputs(vec![y, v]);
        let s = simplify(&g).unwrap();
        for o in s.outputs() {
            assert_eq!(s.node(*o).op, Op::Constant(Literal::SplatI64(0)));
        }
    }

    /// The float identities that IEEE arithmetic does not have are kept as
    /// computations: `x * 0` (NaN, inf, the sign of zero), `x + (+0.0)`
    /// and `x - (-0.0)` (`-0.0` gives `+0.0`), `(+0.0) - x` (`+0.0` gives
    /// `+0.0`), `mul_zero(x, 0)` and `mul_zero(x, 1)` (`-0.0` gives `+0.0`),
    /// `x - x`, `x / x`, `0 / x` (NaN, inf).
    #[test]
    fn identities_that_fail_for_some_float_are_not_applied() {
        for dt in [DType::F64, DType::F32, DType::F16, DType::BF16] {
            let mut g = Graph::new();
            let x = g.input("x", [3], dt);
            let (pz, nz, one) = (g.scalar(0.0, dt), g.scalar(-0.0, dt), g.scalar(1.0, dt));
            let outs = vec![
                g.mul(x, pz).unwrap(),
                g.mul(nz, x).unwrap(),
                g.mul_zero(x, pz).unwrap(),
                g.mul_zero(x, one).unwrap(),
                g.add(x, pz).unwrap(),
                g.add(pz, x).unwrap(),
                g.sub(x, nz).unwrap(),
                g.sub(pz, x).unwrap(),
                g.sub(x, x).unwrap(),
                g.div(x, x).unwrap(),
                g.div(pz, x).unwrap(),
            ];
            g.set_outputs(outs.clone());
            let s = crate::passes::optimize(&g).unwrap();
            for (k, (&o, &before)) in s.outputs().iter().zip(&outs).enumerate() {
                assert_eq!(s.node(o).op, g.node(before).op, "{dt} output {k}:\n{s}");
            }
        }
    }

    #[test]
    fn reductions_over_no_axes_keep_the_sum_onto_positive_zero() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let k = g.input("k", [3], DType::I64);
        let red = |g: &mut Graph, op, v| {
            g.push(
                Op::Reduce {
                    op,
                    axes: Vec::new(),
                },
                &[v],
            )
            .unwrap()
        };
        let outs = vec![
            red(&mut g, crate::ReduceOp::Sum, x),
            red(&mut g, crate::ReduceOp::Mean, x),
            red(&mut g, crate::ReduceOp::Max, x),
            red(&mut g, crate::ReduceOp::Prod, x),
            red(&mut g, crate::ReduceOp::Sum, k),
        ];
        g.set_outputs(outs);
        let s = simplify(&g).unwrap();
        let (o, ins) = (s.outputs(), s.input_ids());
        for &sum in &o[..2] {
            let n = s.node(sum);
            assert_eq!(n.op, Op::Binary(BinaryOp::Add), "{s}");
            assert_eq!(n.inputs[0], ins[0]);
            assert_eq!(s.node(n.inputs[1]).op, Op::Constant(Literal::Splat(0.0)));
        }
        assert_eq!(&o[2..], &[ins[0], ins[0], ins[1]]);
    }

    #[test]
    fn negative_zero_minus_x_is_neg_and_double_neg_cancels() {
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::F64);
        let z = g.scalar(-0.0, DType::F64);
        let y = g.sub(z, x).unwrap();
        let n = g.neg(y).unwrap();
        g.set_outputs(vec![y, n]);
        let s = crate::passes::dce(&simplify(&g).unwrap()).unwrap();
        assert_eq!(ops(&s), vec!["input #0", "neg"]);
        assert_eq!(s.outputs()[1], s.input_ids()[0]);
        // i64: 0 - x is -x.
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::I64);
        let z = g.scalar(0.0, DType::I64);
        let y = g.sub(z, x).unwrap();
        g.set_outputs(vec![y]);
        let s = simplify(&g).unwrap();
        assert_eq!(s.node(s.outputs()[0]).op, Op::Unary(UnaryOp::Neg));
    }

    #[test]
    fn lossless_cast_round_trips_cancel() {
        let mut g = Graph::new();
        let h = g.input("h", [2], DType::F16);
        let d = g.input("d", [2], DType::F64);
        let h32 = g.cast(h, DType::F32).unwrap();
        let h16 = g.cast(h32, DType::F16).unwrap(); // == h
        let d32 = g.cast(d, DType::F32).unwrap();
        let d64 = g.cast(d32, DType::F64).unwrap(); // rounds: kept
        g.set_outputs(vec![h16, d64]);
        let s = simplify(&g).unwrap();
        assert_eq!(s.outputs()[0], s.input_ids()[0]);
        assert_eq!(s.node(s.outputs()[1]).op, Op::Cast(DType::F64));
        assert_eq!(s.len(), 4, "{s}");
    }

    #[test]
    fn negations_fold_into_add_and_sub() {
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::F64);
        let y = g.input("y", [2, 2], DType::F64);
        let ny = g.neg(y).unwrap();
        let a = g.add(x, ny).unwrap(); // x - y
        let b = g.add(ny, x).unwrap(); // x - y
        let c = g.sub(x, ny).unwrap(); // x + y
        let m1 = g.scalar(-1.0, DType::F64);
        let d = g.mul(m1, x).unwrap(); // -x
        g.set_outputs(vec![a, b, c, d]);
        let s = crate::passes::optimize(&g).unwrap();
        assert_eq!(
            s.to_string(),
            "%0 = input#0 \"x\"() : f64[2]\n%1 = input#1 \"y\"() : f64[2, 2]\n\
             %2 = sub(%0, %1) : f64[2, 2]\n%3 = add(%0, %1) : f64[2, 2]\n\
             %4 = neg(%0) : f64[2]\nreturn (%2, %2, %3, %4)"
        );
    }

    #[test]
    fn reshape_transpose_broadcast_chains_collapse() {
        let mut g = Graph::new();
        let x = g.input("x", [2, 3, 4], DType::F32);
        let t1 = g.transpose(x, &[1, 2, 0]).unwrap(); // [3, 4, 2]
        let t2 = g.transpose(t1, &[2, 0, 1]).unwrap(); // back to [2, 3, 4]
        let t3 = g.transpose(t1, &[1, 0, 2]).unwrap(); // [4, 3, 2]
        let r1 = g.reshape(x, [6, 4]).unwrap();
        let r2 = g.reshape(r1, [24]).unwrap();
        let r3 = g.reshape(r2, [2, 3, 4]).unwrap();
        let y = g.input("y", [4], DType::F32);
        let b1 = g.broadcast(y, [3, 4]).unwrap();
        let b2 = g.broadcast(b1, [2, 3, 4]).unwrap();
        g.set_outputs(vec![t2, t3, r2, r3, b2]);
        let s = crate::passes::dce(&simplify(&g).unwrap()).unwrap();
        let o = s.outputs();
        let x2 = s.input_ids()[0];
        assert_eq!(o[0], x2, "{s}");
        assert_eq!(
            s.node(o[1]).op,
            Op::Transpose {
                perm: vec![2, 1, 0]
            }
        );
        assert_eq!(s.node(o[1]).inputs, vec![x2]);
        assert_eq!(
            s.node(o[2]).op,
            Op::Reshape {
                shape: Shape::from([24])
            }
        );
        assert_eq!(s.node(o[2]).inputs, vec![x2]);
        assert_eq!(o[3], x2);
        assert_eq!(s.node(o[4]).inputs, s.input_ids()[1..].to_vec());
        assert!(matches!(s.node(o[4]).op, Op::Broadcast { .. }));
        assert_eq!(s.len(), 5, "{s}");
    }

    #[test]
    fn identity_ops_pushed_without_the_builder_are_removed() {
        // The builder already skips these, but other passes push them raw.
        let mut g = Graph::new();
        let x = g.input("x", [2, 3], DType::F64);
        let r = g
            .push(
                Op::Reduce {
                    op: crate::ReduceOp::Max,
                    axes: vec![],
                },
                &[x],
            )
            .unwrap();
        let c = g.push(Op::Cast(DType::F64), &[r]).unwrap();
        let sl = g
            .push(
                Op::Slice {
                    axis: 1,
                    start: 0,
                    len: 3,
                },
                &[c],
            )
            .unwrap();
        let cc = g.push(Op::Concat { axis: 0 }, &[sl]).unwrap();
        let b = g
            .push(
                Op::Broadcast {
                    shape: Shape::from([2, 3]),
                },
                &[cc],
            )
            .unwrap();
        let p = g.push(Op::Unary(UnaryOp::Powi(1)), &[b]).unwrap();
        let sg = g.stop_gradient(p).unwrap();
        g.set_outputs(vec![sg]);
        let s = crate::passes::optimize(&g).unwrap();
        assert_eq!(ops(&s), vec!["input #0", "stop_gradient"], "{s}");
        let t = crate::passes::strip_stop_gradient(&s).unwrap();
        assert_eq!(t.outputs(), &t.input_ids()[..]);
    }

    #[test]
    fn select_with_constant_condition_or_equal_branches() {
        let mut g = Graph::new();
        let a = g.input("a", [3], DType::F64);
        let b = g.input("b", [2, 3], DType::F64);
        let t = g.full([2, 3], 1.0, DType::Bool);
        let f = g.scalar(0.0, DType::Bool);
        let m = g.input("m", [3], DType::Bool);
        let s1 = g.select(t, a, b).unwrap();
        let s2 = g.select(f, a, b).unwrap();
        let s3 = g.select(m, a, a).unwrap();
        g.set_outputs(vec![s1, s2, s3]);
        let s = crate::passes::dce(&simplify(&g).unwrap()).unwrap();
        let ins = s.input_ids();
        assert!(matches!(s.node(s.outputs()[0]).op, Op::Broadcast { .. }));
        assert_eq!(s.node(s.outputs()[0]).inputs, vec![ins[0]]);
        assert_eq!(s.outputs()[1], ins[1]);
        assert_eq!(s.outputs()[2], ins[0]);
    }

    #[test]
    fn logical_identities() {
        let mut g = Graph::new();
        let m = g.input("m", [2], DType::Bool);
        let t = g.scalar(1.0, DType::Bool);
        let f = g.scalar(0.0, DType::Bool);
        let a = g.and(m, t).unwrap();
        let b = g.or(f, m).unwrap();
        let c = g.and(f, m).unwrap();
        let d = g.or(m, t).unwrap();
        g.set_outputs(vec![a, b, c, d]);
        let s = simplify(&g).unwrap();
        let o = s.outputs();
        assert_eq!((o[0], o[1]), (s.input_ids()[0], s.input_ids()[0]));
        assert_eq!(s.node(o[2]).op, Op::Constant(Literal::Splat(0.0)));
        assert_eq!(s.node(o[3]).op, Op::Constant(Literal::Splat(1.0)));
        assert_eq!(s.shape(o[3]), &Shape::from([2]));
    }

    #[test]
    fn rules_never_change_the_node_type() {
        // x: [3] f64; 1: [2, 3] f32 -- not combinable, so no rule can fire on
        // a dtype mismatch; and `x * 1` with a bigger `1` broadcasts `x`.
        let mut g = Graph::new();
        let x = g.input("x", [1, 3], DType::F64);
        let one = g.full([4, 1, 1], 1.0, DType::F64);
        let y = g.mul(x, one).unwrap();
        g.set_outputs(vec![y]);
        let s = simplify(&g).unwrap();
        let o = s.node(s.outputs()[0]);
        assert_eq!(o.shape, Shape::from([4, 1, 3]));
        assert!(matches!(o.op, Op::Broadcast { .. }));
    }
}
