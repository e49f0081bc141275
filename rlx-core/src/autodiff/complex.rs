//! Derivative rules of the ops that cross between real and complex values:
//! `real`, `imag`, `complex(re, im)` and `abs` of a complex value. Their
//! forward and reverse rules differ (they are real-linear, not complex
//! multiplications), so they live here instead of in the shared factors of
//! [`derivs`](super::derivs).
//!
//! Convention (JAX's): tangents and cotangents have their primal's dtype,
//! and reverse mode transposes each real-linear map for the bilinear
//! pairing `⟨u, v⟩ = Re(Σ u·v)` (no conjugation). So the cotangent of a
//! complex `z` from a real `f` is `∂f/∂x − i ∂f/∂y`. The rules:
//! - `real(z)`: JVP `real(ż)`; VJP `r̄ + 0i`;
//! - `imag(z)`: JVP `imag(ż)`; VJP `0 − i ī`;
//! - `complex(a, b)`: JVP `complex(ȧ, ḃ)`; VJP `(real(c̄), −imag(c̄))`;
//! - `abs(z)` (`r = |z|`, `u = conj(z)/r`, with `u = 0` at `z = 0`, where
//!   JAX's gradient is 0 too): JVP `real(u·ż)`; VJP `r̄·u`.
//!
//! `conj` is its own transpose in this pairing (`conj(ȳ)`); it is a factor
//! of `derivs`.

use super::konst;
use crate::{CmpOp, Graph, NodeId, Result, UnaryOp};

/// `conj(z)/|z|`, 0 where `z = 0`, for `y = |z|`.
fn unit_conj(g: &mut Graph, z: NodeId, y: NodeId) -> Result<NodeId> {
    let zero = konst(g, 0.0, y);
    let one = konst(g, 1.0, y);
    let is0 = g.compare(CmpOp::Eq, y, zero)?;
    let safe = g.select(is0, one, y)?;
    let c = g.conj(z)?;
    g.div(c, safe)
}

/// Whether unary `op` on `x` is one of this module's ops.
pub(crate) fn crosses(g: &Graph, op: UnaryOp, x: NodeId) -> bool {
    g.dtype(x).is_complex() && matches!(op, UnaryOp::Real | UnaryOp::Imag | UnaryOp::Abs)
}

/// The VJP of `y = op(x)` for a crossing op (see [`crosses`]).
pub(crate) fn vjp_unary(
    g: &mut Graph,
    op: UnaryOp,
    x: NodeId,
    y: NodeId,
    ct: NodeId,
) -> Result<NodeId> {
    let dt = g.dtype(x);
    match op {
        UnaryOp::Real => g.cast(ct, dt),
        UnaryOp::Imag => {
            let zero = g.zeros_like(ct);
            let n = g.neg(ct)?;
            g.complex(zero, n)
        }
        _ => {
            let u = unit_conj(g, x, y)?;
            let c = g.cast(ct, dt)?;
            g.mul_zero(c, u)
        }
    }
}

/// The JVP of `y = op(x)` for a crossing op (see [`crosses`]).
pub(crate) fn jvp_unary(
    g: &mut Graph,
    op: UnaryOp,
    x: NodeId,
    y: NodeId,
    t: NodeId,
) -> Result<NodeId> {
    match op {
        UnaryOp::Real => g.real(t),
        UnaryOp::Imag => g.imag(t),
        _ => {
            let u = unit_conj(g, x, y)?;
            let p = g.mul_zero(t, u)?;
            g.real(p)
        }
    }
}

/// The VJP of `complex(a, b)` for cotangent `ct`, each part only when
/// needed (shaped like `y`; the caller sums them to the operands' shapes).
pub(crate) fn vjp_complex(
    g: &mut Graph,
    ct: NodeId,
    (need_a, need_b): (bool, bool),
) -> Result<(Option<NodeId>, Option<NodeId>)> {
    let a = match need_a {
        true => Some(g.real(ct)?),
        false => None,
    };
    let b = match need_b {
        true => {
            let i = g.imag(ct)?;
            Some(g.neg(i)?)
        }
        false => None,
    };
    Ok((a, b))
}

/// The JVP of `complex(a, b)` from the operands' tangents (`None` = zero).
pub(crate) fn jvp_complex(
    g: &mut Graph,
    (a, b): (NodeId, NodeId),
    (ta, tb): (Option<NodeId>, Option<NodeId>),
) -> Result<Option<NodeId>> {
    if ta.is_none() && tb.is_none() {
        return Ok(None);
    }
    let ta = ta.unwrap_or_else(|| g.zeros_like(a));
    let tb = tb.unwrap_or_else(|| g.zeros_like(b));
    Ok(Some(g.complex(ta, tb)?))
}
