//! Closed-form local derivatives of the element-wise ops, shared by the VJP
//! and JVP tables (an element-wise derivative is the same factor whether it
//! multiplies a tangent or a cotangent).
//!
//! Formulas (`x` operand, `y` the op's own output, reused where natural):
//! `exp' = y`, `expm1' = y + 1`, `ln' = 1/x`, `log1p' = 1/(1+x)`, `tan' = 1 + y²`,
//! `tanh' = 1 − y²`, `sigmoid' = y(1 − y)`, `sqrt' = 0.5/y`, `rsqrt' = −0.5 y³`,
//! `recip' = −y²`, `asin' = 1/√(1 − x²)`, `acos' = −1/√(1 − x²)`,
//! `atan' = 1/(1 + x²)`, `gelu' = Φ(x) + x φ(x)`, `silu' = s(1 + x(1 − s))`,
//! `erf' = 2/√π e^{−x²}`, `powi(n)' = n x^{n−1}`; for `a/b`: `(1/b, −y/b)`,
//! for `a^b`: `(b a^{b−1}, y ln a)` (with `ln 0` replaced by 0, as JAX does),
//! for `atan2(a, b)`: `(b, −a)/(a² + b²)`.

use super::konst;
use crate::{BinaryOp, CmpOp, Graph, NodeId, Result, UnaryOp};

/// How an incoming (co)tangent `v` is turned into the outgoing one.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Factor {
    /// Zero derivative.
    Zero,
    /// `v`.
    One,
    /// `-v`.
    NegOne,
    /// `mul_zero(v, f)`: a zero `v` gives 0 even where `f` is infinite or
    /// NaN (an overflowing `exp`, `ln 0`, `1/0` in a branch a select did
    /// not take).
    Mul(NodeId),
    /// `mul_zero(f, v)`: a zero `f` gives 0 even if `v` is infinite.
    Guarding(NodeId),
    /// `select(c, v, 0)`.
    Select(NodeId),
    /// `conj(v)`: the derivative of `conj`, forward and reverse.
    Conj,
}

impl Factor {
    /// Applies the factor to `v`; `None` for a zero derivative.
    pub(crate) fn apply(self, g: &mut Graph, v: NodeId) -> Result<Option<NodeId>> {
        Ok(Some(match self {
            Factor::Zero => return Ok(None),
            Factor::One => v,
            Factor::NegOne => g.neg(v)?,
            Factor::Mul(f) => g.mul_zero(v, f)?,
            Factor::Guarding(f) => g.mul_zero(f, v)?,
            Factor::Select(c) => {
                let z = konst(g, 0.0, v);
                g.select(c, v, z)?
            }
            Factor::Conj => g.conj(v)?,
        }))
    }
}

/// `d y / d x` for `y = op(x)`, emitted into `g`.
pub(crate) fn unary(g: &mut Graph, op: UnaryOp, x: NodeId, y: NodeId) -> Result<Factor> {
    if !g.dtype(x).is_inexact() {
        return Ok(Factor::Zero);
    }
    let one = |g: &mut Graph| konst(g, 1.0, x);
    Ok(match op {
        UnaryOp::Neg => Factor::NegOne,
        UnaryOp::Exp => Factor::Mul(y),
        UnaryOp::Expm1 => {
            let o = one(g);
            Factor::Mul(g.add(y, o)?)
        }
        UnaryOp::Ln => Factor::Mul(g.recip(x)?),
        UnaryOp::Log1p => {
            let o = one(g);
            let s = g.add(x, o)?;
            Factor::Mul(g.recip(s)?)
        }
        UnaryOp::Sin => Factor::Mul(g.cos(x)?),
        UnaryOp::Cos => {
            let s = g.sin(x)?;
            Factor::Mul(g.neg(s)?)
        }
        UnaryOp::Tan => {
            let o = one(g);
            let y2 = g.square(y)?;
            Factor::Mul(g.add(o, y2)?)
        }
        UnaryOp::Tanh => {
            let o = one(g);
            let y2 = g.square(y)?;
            Factor::Mul(g.sub(o, y2)?)
        }
        UnaryOp::Sinh => Factor::Mul(g.cosh(x)?),
        UnaryOp::Cosh => Factor::Mul(g.sinh(x)?),
        UnaryOp::Asin | UnaryOp::Acos => {
            let o = one(g);
            let x2 = g.square(x)?;
            let d = g.sub(o, x2)?;
            let r = g.rsqrt(d)?;
            Factor::Mul(if matches!(op, UnaryOp::Acos) {
                g.neg(r)?
            } else {
                r
            })
        }
        UnaryOp::Atan => {
            let o = one(g);
            let x2 = g.square(x)?;
            let d = g.add(o, x2)?;
            Factor::Mul(g.recip(d)?)
        }
        UnaryOp::Sigmoid => {
            let o = one(g);
            let q = g.sub(o, y)?;
            Factor::Mul(g.mul(y, q)?)
        }
        UnaryOp::Sqrt => {
            let h = konst(g, 0.5, x);
            Factor::Mul(g.div(h, y)?)
        }
        UnaryOp::Rsqrt => {
            let h = konst(g, -0.5, x);
            let y3 = g.powi(y, 3)?;
            Factor::Mul(g.mul(h, y3)?)
        }
        UnaryOp::Recip => {
            let y2 = g.square(y)?;
            Factor::Mul(g.neg(y2)?)
        }
        UnaryOp::Square => {
            let two = konst(g, 2.0, x);
            Factor::Mul(g.mul(two, x)?)
        }
        UnaryOp::Powi(n) => match n {
            0 => Factor::Zero,
            1 => Factor::One,
            _ => {
                let c = konst(g, f64::from(n), x);
                // x² as a square: one product, where `powi` is a call.
                let p = if n == 3 {
                    g.square(x)?
                } else {
                    g.powi(x, n - 1)?
                };
                Factor::Mul(g.mul(c, p)?)
            }
        },
        UnaryOp::Abs => Factor::Mul(g.sign(x)?),
        UnaryOp::Relu => {
            let z = konst(g, 0.0, x);
            Factor::Select(g.compare(CmpOp::Gt, x, z)?)
        }
        UnaryOp::Gelu => {
            // Φ(x) = (1 + erf(x/√2))/2, φ(x) = e^{-x²/2}/√(2π)
            let inv_sqrt2 = konst(g, std::f64::consts::FRAC_1_SQRT_2, x);
            let xs = g.mul(x, inv_sqrt2)?;
            let e = g.erf(xs)?;
            let o = one(g);
            let h = konst(g, 0.5, x);
            let e1 = g.add(o, e)?;
            let cdf = g.mul(h, e1)?;
            let x2 = g.square(x)?;
            let mh = konst(g, -0.5, x);
            let ex = g.mul(x2, mh)?;
            let ee = g.exp(ex)?;
            let c = konst(g, 1.0 / (2.0 * std::f64::consts::PI).sqrt(), x);
            let pdf = g.mul(ee, c)?;
            let xpdf = g.mul(x, pdf)?;
            Factor::Mul(g.add(cdf, xpdf)?)
        }
        UnaryOp::Silu => {
            let s = g.sigmoid(x)?;
            let o = one(g);
            let q = g.sub(o, s)?;
            let xq = g.mul(x, q)?;
            let o2 = one(g);
            let t = g.add(o2, xq)?;
            Factor::Mul(g.mul(s, t)?)
        }
        UnaryOp::Erf => {
            let x2 = g.square(x)?;
            let n = g.neg(x2)?;
            let e = g.exp(n)?;
            let c = konst(g, std::f64::consts::FRAC_2_SQRT_PI, x);
            Factor::Mul(g.mul(c, e)?)
        }
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Not => {
            Factor::Zero
        }
        UnaryOp::Conj => Factor::Conj,
        UnaryOp::Real | UnaryOp::Imag => {
            return Err(crate::Error::Unsupported(format!(
                "`{}` has separate forward and reverse rules (autodiff::complex)",
                op.name()
            )))
        }
    })
}

/// `(∂y/∂a, ∂y/∂b)` for `y = op(a, b)`, each emitted only when `need_*`.
/// The factors have the broadcast shape of `y` (or are scalars).
pub(crate) fn binary(
    g: &mut Graph,
    op: BinaryOp,
    (a, b, y): (NodeId, NodeId, NodeId),
    (need_a, need_b): (bool, bool),
) -> Result<(Factor, Factor)> {
    if !g.dtype(y).is_inexact() {
        return Ok((Factor::Zero, Factor::Zero));
    }
    let when = |need: bool, f: Factor| if need { f } else { Factor::Zero };
    Ok(match op {
        BinaryOp::Add => (when(need_a, Factor::One), when(need_b, Factor::One)),
        BinaryOp::Sub => (when(need_a, Factor::One), when(need_b, Factor::NegOne)),
        BinaryOp::Mul => (when(need_a, Factor::Mul(b)), when(need_b, Factor::Mul(a))),
        BinaryOp::Div => {
            let fa = if need_a {
                Factor::Mul(g.recip(b)?)
            } else {
                Factor::Zero
            };
            let fb = if need_b {
                let q = g.div(y, b)?;
                Factor::Mul(g.neg(q)?)
            } else {
                Factor::Zero
            };
            (fa, fb)
        }
        BinaryOp::Pow => {
            let fa = if need_a {
                // b * a^(b-1), with 0 * inf = 0 where b = 0.
                let o = konst(g, 1.0, a);
                let bm1 = g.sub(b, o)?;
                let p = g.pow(a, bm1)?;
                Factor::Mul(g.mul_zero(b, p)?)
            } else {
                Factor::Zero
            };
            let fb = if need_b {
                // y * ln(a), with ln(0) replaced by 0 (0^b is flat in b for b > 0).
                let z = konst(g, 0.0, a);
                let o = konst(g, 1.0, a);
                let is0 = g.compare(CmpOp::Eq, a, z)?;
                let safe = g.select(is0, o, a)?;
                let l = g.ln(safe)?;
                Factor::Mul(g.mul(y, l)?)
            } else {
                Factor::Zero
            };
            (fa, fb)
        }
        BinaryOp::Max | BinaryOp::Min => {
            let fa = if need_a {
                Factor::Mul(balanced_eq(g, a, y, b)?)
            } else {
                Factor::Zero
            };
            let fb = if need_b {
                Factor::Mul(balanced_eq(g, b, y, a)?)
            } else {
                Factor::Zero
            };
            (fa, fb)
        }
        BinaryOp::Atan2 => {
            let a2 = g.square(a)?;
            let b2 = g.square(b)?;
            let r2 = g.add(a2, b2)?;
            let fa = if need_a {
                Factor::Mul(g.div(b, r2)?)
            } else {
                Factor::Zero
            };
            let fb = if need_b {
                let na = g.neg(a)?;
                Factor::Mul(g.div(na, r2)?)
            } else {
                Factor::Zero
            };
            (fa, fb)
        }
        BinaryOp::MulZero => (
            when(need_a, Factor::Mul(b)),
            when(need_b, Factor::Guarding(a)),
        ),
        BinaryOp::And | BinaryOp::Or => (Factor::Zero, Factor::Zero),
        BinaryOp::Complex => {
            return Err(crate::Error::Unsupported(
                "`complex` has separate forward and reverse rules (autodiff::complex)".into(),
            ))
        }
    })
}

/// JAX's `_balanced_eq(x, z, y)`: 1 where `x == z` and `y != z`, 0.5 where
/// both equal `z` (a tie splits the derivative), 0 elsewhere.
fn balanced_eq(g: &mut Graph, x: NodeId, z: NodeId, y: NodeId) -> Result<NodeId> {
    let xz = g.compare(CmpOp::Eq, x, z)?;
    let yz = g.compare(CmpOp::Eq, y, z)?;
    let half = konst(g, 0.5, z);
    let one = konst(g, 1.0, z);
    let zero = konst(g, 0.0, z);
    let w = g.select(yz, half, one)?;
    g.select(xz, w, zero)
}
