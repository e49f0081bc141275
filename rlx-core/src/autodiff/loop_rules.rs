//! The derivative rules of loops: a loop's rules are loops of rules.
//!
//! - JVP of a scan: a scan of the body's JVP, carrying `(c, ċ)` and stepping
//!   over `(x, ẋ)`; its packed result `[c(T), ċ(T), ys, ẏs]` holds the
//!   tangent `[ċ(T), ẏs]` in two contiguous pieces.
//! - VJP of a scan: an [`Adjoint`](crate::LoopKind::Adjoint) loop over the
//!   body's VJP, which the runtime runs backwards with binomial checkpoints
//!   (the scan's `checkpoints` budget).
//! - Rules of an adjoint (grad of grad, `hvp`, `hessian`): adjoints of the
//!   JVP scan, so second-order derivatives keep checkpointing (at most
//!   `checkpoints` stored pairs `(c, ċ)`). Write `F` for the scan's map
//!   `z = (c(0), xs, k) ↦ (c(T), ys)`, `J` for its Jacobian and `H` for its
//!   second derivative. The adjoint computes `A(z, v) = vᵀ J(z)`. The adjoint
//!   of the JVP scan `(z, ż) ↦ (F(z), J(z) ż)` with cotangents `(a, b)`
//!   gives `(aᵀ J + bᵀ H[ż], bᵀ J)`. Hence
//!   - the JVP of `A` along `(ż, v̇)`, `v̇ᵀ J + vᵀ H[ż]`, is its `z` part
//!     for `a = v̇, b = v`;
//!   - the VJP of `A` with cotangent `w` is `z̄ = vᵀ H[w]`, its `z` part for
//!     `ż = w, a = 0, b = v`, and `v̄ = J w`, the JVP scan's tangent.

use super::{jvp_nodes, vjp_nodes};
use crate::loops::lower::{declare_like, forward_like, no_spine};
use crate::loops::{pack, unpack, LoopKind, LoopOp, LoopRef};
use crate::{Graph, NodeId, Result};

/// The VJP rule of a loop node with operands `x` and cotangent `ct`.
pub(crate) fn vjp(
    g: &mut Graph,
    l: &LoopRef,
    x: &[NodeId],
    ct: NodeId,
) -> Result<Vec<Option<NodeId>>> {
    no_spine(l)?;
    let (c, k) = (l.carries, l.xs);
    let n_in = l.body.inputs().len();
    let mut out: Vec<Option<NodeId>> = vec![None; x.len()];
    let cts = unpack(g, ct, &l.segments())?;
    let bars = match l.kind {
        LoopKind::Scan => {
            let adj = LoopOp::adjoint(l, body_vjp(l)?)?;
            let mut ops = x.to_vec();
            ops.extend(cts);
            let a = g.looped(adj.clone(), &ops)?;
            unpack(g, a, &adj.segments())?
        }
        LoopKind::Adjoint { .. } => {
            // ż = w (the cotangent of the adjoint's result), a = 0, b = v.
            let fx = l.float_xs();
            let fk = l.float_consts();
            let mut w: Vec<Option<NodeId>> = vec![None; n_in];
            for (i, &p) in cts[..c].iter().enumerate() {
                w[i] = Some(p);
            }
            for (n, &j) in fx.iter().enumerate() {
                w[c + j] = Some(cts[c + n]);
            }
            for (n, &j) in fk.iter().enumerate() {
                w[c + k + j] = Some(cts[c + fx.len() + n]);
            }
            let (jl, ops) = jvp_scan(g, l, &x[..n_in], &w)?;
            // v̄ = J w: the JVP scan's tangent [ċ(T).., ẏs..].
            let node = g.looped(jl.clone(), &ops)?;
            let pieces = unpack(g, node, &jl.segments())?;
            let p = l.ys();
            for i in 0..c {
                out[n_in + i] = Some(pieces[c + i]);
            }
            for j in 0..p {
                out[n_in + c + j] = Some(pieces[2 * c + p + j]);
            }
            adjoint_of_jvp(g, l, &jl, ops, &x[n_in..], None)?
        }
    };
    for (o, &b) in out.iter_mut().zip(&bars[..c]) {
        *o = Some(b);
    }
    let fx = l.float_xs();
    for (n, &j) in fx.iter().enumerate() {
        out[c + j] = Some(bars[c + n]);
    }
    for (n, &j) in l.float_consts().iter().enumerate() {
        out[c + k + j] = Some(bars[c + fx.len() + n]);
    }
    Ok(out)
}

/// The JVP rule of a loop node with operands `x` and their tangents.
pub(crate) fn jvp(
    g: &mut Graph,
    l: &LoopRef,
    x: &[NodeId],
    tangents: &[Option<NodeId>],
) -> Result<Option<NodeId>> {
    no_spine(l)?;
    let n_in = l.body.inputs().len();
    if let LoopKind::Adjoint { .. } = l.kind {
        // a = v̇ (the tangents of the cotangent operands), b = v.
        let (jl, ops) = jvp_scan(g, l, &x[..n_in], &tangents[..n_in])?;
        let bars = adjoint_of_jvp(g, l, &jl, ops, &x[n_in..], Some(&tangents[n_in..]))?;
        return Ok(Some(pack(g, &bars)?));
    }
    let (jl, ops) = jvp_scan(g, l, x, tangents)?;
    let c = l.carries;
    let node = g.looped(jl.clone(), &ops)?;
    // [c(T).., ċ(T).., ys.., ẏs..]: the tangent is pieces c..2c and the last p.
    let seg: Vec<usize> = jl.segments().iter().map(|t| t.shape.numel()).collect();
    let p = l.ys();
    let off_c: usize = seg[..c].iter().sum();
    let len_c: usize = seg[c..2 * c].iter().sum();
    let off_y: usize = seg[..2 * c + p].iter().sum();
    let len_y: usize = seg[2 * c + p..].iter().sum();
    let mut parts = Vec::new();
    if len_c > 0 {
        parts.push(g.slice_range(node, off_c..off_c + len_c, 0)?);
    }
    if len_y > 0 {
        parts.push(g.slice_range(node, off_y..off_y + len_y, 0)?);
    }
    Ok(Some(match parts.len() {
        1 => parts[0],
        _ => g.concat(&parts, 0)?,
    }))
}

/// The JVP scan of `l`'s body (a scan, or the primal of an adjoint) over the
/// operands `x = [c(0).., xs.., k..]` with `tangents`, and its operands
/// `[c(0).., ċ(0).., xs.., ẋs.., k.., k̇..]` (tangents only for the
/// floating-point per-step inputs and invariants that have one; every carry
/// gets one, zero if none is given).
fn jvp_scan(
    g: &mut Graph,
    l: &LoopOp,
    x: &[NodeId],
    tangents: &[Option<NodeId>],
) -> Result<(LoopRef, Vec<NodeId>)> {
    let (c, k) = (l.carries, l.xs);
    let n_in = l.body.inputs().len();
    let float = |i: usize| g.dtype(x[i]).is_inexact();
    let with_t = |i: usize| float(i) && tangents[i].is_some();
    let tx: Vec<usize> = (c..c + k).filter(|&i| with_t(i)).collect();
    let tk: Vec<usize> = (c + k..n_in).filter(|&i| with_t(i)).collect();

    // Body: inputs [c.., ċ.., x.., ẋ.., k.., k̇..], outputs [c'.., ċ'.., y.., ẏ..].
    let b = &l.body;
    let bi = b.input_ids();
    let mut h = Graph::new();
    let decl = |h: &mut Graph, i: usize, prefix: &str| {
        let t = b.ty(bi[i]);
        h.input(format!("{prefix}{}", b.inputs()[i].name), t.shape, t.dtype)
    };
    let mut prim = Vec::with_capacity(n_in);
    let mut wrt = Vec::new();
    let mut tans = Vec::new();
    // Each group of inputs, then the tangents of those that have one.
    let all_carries: Vec<usize> = (0..c).collect();
    for (range, with_t) in [(0..c, &all_carries), (c..c + k, &tx), (c + k..n_in, &tk)] {
        for i in range {
            prim.push(decl(&mut h, i, ""));
        }
        for &i in with_t {
            wrt.push(prim[i]);
            tans.push(decl(&mut h, i, "tangent_"));
        }
    }
    let outs = h.inline(b, &prim)?;
    let touts = jvp_nodes(&mut h, &wrt, &tans, &outs)?;
    let mut o = outs[..c].to_vec();
    o.extend_from_slice(&touts[..c]);
    o.extend_from_slice(&outs[c..]);
    o.extend_from_slice(&touts[c..]);
    h.set_outputs(o);
    let jl = forward_like(l, format!("{}/jvp", l.name), h, 2 * c, k + tx.len())?;

    let mut ops = x[..c].to_vec();
    for i in 0..c {
        let t = tangents[i].unwrap_or_else(|| g.zeros_like(x[i]));
        ops.push(t);
    }
    ops.extend_from_slice(&x[c..c + k]);
    ops.extend(tx.iter().map(|&i| tangents[i].expect("filtered")));
    ops.extend_from_slice(&x[c + k..n_in]);
    ops.extend(tk.iter().map(|&i| tangents[i].expect("filtered")));
    Ok((jl, ops))
}

/// The adjoint of the JVP scan `jl` (operands `ops`) of the adjoint `l`,
/// with cotangents `a` on its primal results and `b = v` (`l`'s cotangent
/// operands `[c̄(T).., ȳs..]`) on its tangent results; `a` is `v̇` (the
/// tangents of `v`, zero where missing) or, when `None`, zero. Returns the
/// `z` part of its result laid out as `l`'s: `[c̄(0).., x̄s (float xs)..,
/// k̄ (float invariants)..]`.
fn adjoint_of_jvp(
    g: &mut Graph,
    l: &LoopOp,
    jl: &LoopRef,
    mut ops: Vec<NodeId>,
    v: &[NodeId],
    v_dot: Option<&[Option<NodeId>]>,
) -> Result<Vec<NodeId>> {
    let (c, p) = (l.carries, l.ys());
    let a = |g: &mut Graph, i: usize| match v_dot.and_then(|t| t[i]) {
        Some(t) => t,
        None => g.zeros_like(v[i]),
    };
    // [c'.., ċ'.., y.., ẏ..]
    for i in 0..c {
        let ai = a(g, i);
        ops.push(ai);
    }
    ops.extend_from_slice(&v[..c]);
    for j in 0..p {
        let aj = a(g, c + j);
        ops.push(aj);
    }
    ops.extend_from_slice(&v[c..c + p]);
    let adj = LoopOp::adjoint(jl, body_vjp(jl)?)?;
    let node = g.looped(adj.clone(), &ops)?;
    // [c̄.., c̄ of ċ.., x̄.., x̄ of ẋ.., k̄.., k̄ of k̇..]
    let pieces = unpack(g, node, &adj.segments())?;
    let (fx, jfx) = (l.float_xs().len(), jl.float_xs().len());
    let mut z = pieces[..c].to_vec();
    z.extend_from_slice(&pieces[2 * c..2 * c + fx]);
    z.extend_from_slice(&pieces[2 * c + jfx..][..l.float_consts().len()]);
    Ok(z)
}

/// The body's reverse-mode step `[c, x, k, c̄', ȳ] → [c̄, x̄ (float x), k̄ (float k)]`.
fn body_vjp(l: &LoopOp) -> Result<Graph> {
    let b = &l.body;
    let mut h = Graph::new();
    let ins = declare_like(&mut h, b);
    let outs = h.inline(b, &ins)?;
    let mut cts = Vec::with_capacity(outs.len());
    for (i, &o) in outs.iter().enumerate() {
        let t = h.ty(o);
        let name = if i < l.carries {
            format!("ct_carry{i}")
        } else {
            format!("ct_y{}", i - l.carries)
        };
        cts.push(h.input(name, t.shape, t.dtype));
    }
    let (c, k) = (l.carries, l.xs);
    let mut wrt = ins[..c].to_vec();
    wrt.extend(l.float_xs().into_iter().map(|j| ins[c + j]));
    wrt.extend(l.float_consts().into_iter().map(|j| ins[c + k + j]));
    let grads = vjp_nodes(&mut h, &outs, &cts, &wrt)?;
    h.set_outputs(grads);
    Ok(h)
}
