//! The derivative rules of loops: a loop's rules are loops of rules.
//!
//! - JVP of a scan: a scan of the body's JVP, carrying `(c, ċ)` and stepping
//!   over `(x, ẋ)`; its packed result `[c(T), ċ(T), ys, ẏs]` holds the
//!   tangent `[ċ(T), ẏs]` in two contiguous pieces.
//! - VJP of a scan: an [`Adjoint`](crate::LoopKind::Adjoint) loop over the
//!   body's VJP, which the runtime runs backwards with binomial checkpoints
//!   (the scan's `checkpoints` budget).
//! - Rules of an adjoint (grad of grad, `hvp`, `hessian`): those of its
//!   [`lower_adjoint`] form, two scans that store every carry, inlined and
//!   differentiated in place (as a custom op without rules is).

use super::{backward, forward, jvp_nodes, proxy, vjp_nodes};
use crate::loops::lower::{declare_like, forward_like, lower_adjoint, no_spine};
use crate::loops::{unpack, LoopKind, LoopOp, LoopRef};
use crate::{Graph, NodeId, Result};

/// The VJP rule of a loop node with operands `x` and cotangent `ct`.
pub(crate) fn vjp(
    g: &mut Graph,
    l: &LoopRef,
    x: &[NodeId],
    ct: NodeId,
) -> Result<Vec<Option<NodeId>>> {
    no_spine(l)?;
    match l.kind {
        LoopKind::Scan => {
            let (c, k) = (l.carries, l.xs);
            let cts = unpack(g, ct, &l.segments())?;
            let adj = LoopOp::adjoint(l, body_vjp(l)?)?;
            let mut ops = x.to_vec();
            ops.extend(cts);
            let a = g.looped(adj.clone(), &ops)?;
            let bars = unpack(g, a, &adj.segments())?;
            let mut out: Vec<Option<NodeId>> = vec![None; x.len()];
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
        LoopKind::Adjoint { .. } => {
            let inner = lower_adjoint(l)?;
            let proxies: Vec<NodeId> = x.iter().map(|&xi| proxy(g, xi)).collect();
            let lo = g.len();
            let out = g.inline(&inner, &proxies)?[0];
            backward(g, &[out], &[ct], &proxies, lo)
        }
    }
}

/// The JVP rule of a loop node with operands `x` and their tangents.
pub(crate) fn jvp(
    g: &mut Graph,
    l: &LoopOp,
    x: &[NodeId],
    tangents: &[Option<NodeId>],
) -> Result<Option<NodeId>> {
    no_spine(l)?;
    if let LoopKind::Adjoint { .. } = l.kind {
        let inner = lower_adjoint(l)?;
        let proxies: Vec<NodeId> = x.iter().map(|&xi| proxy(g, xi)).collect();
        let out = g.inline(&inner, &proxies)?[0];
        return Ok(forward(g, &proxies, tangents, &[out])?[0]);
    }
    let (c, k) = (l.carries, l.xs);
    let n_in = l.body.inputs().len();
    let float = |i: usize| g.dtype(x[i]).is_float();
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
    ops.extend_from_slice(&x[c + k..]);
    ops.extend(tk.iter().map(|&i| tangents[i].expect("filtered")));
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
        parts.push(g.slice(node, 0, off_c, len_c)?);
    }
    if len_y > 0 {
        parts.push(g.slice(node, 0, off_y, len_y)?);
    }
    Ok(Some(match parts.len() {
        1 => parts[0],
        _ => g.concat(&parts, 0)?,
    }))
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
