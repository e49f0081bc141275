//! Graph-level transforms: each takes a graph and the positions of the
//! inputs to differentiate (`wrt`) and returns a new graph.
//!
//! Conventions (shared with the macros and the runtime):
//! - the outputs of the result are ALWAYS the original outputs followed by
//!   the derivative outputs; derivatives are taken of output 0 only (other
//!   outputs are auxiliary, like JAX's `has_aux`);
//! - inputs keep their order and names; transforms that need more inputs
//!   (`vjp`'s cotangent, `jvp`'s tangents, `hvp`'s vectors) append them;
//! - a Jacobian block is shaped `[out..., in...]` per `wrt` input, and is
//!   computed in one execution: all basis vectors are batched with
//!   [`vmap`](crate::vmap::vmap) of the JVP (forward mode) or VJP (reverse
//!   mode) graph and fed as constants;
//! - every result goes through one cleanup call site (`finish`).

use crate::autodiff::{jvp_nodes, vjp_nodes};
use crate::{DType, Error, Graph, Literal, NodeId, Op, Result, Shape};

/// Gradient of the scalar output 0 with respect to the inputs at positions
/// `wrt`. Outputs: the original outputs, then one gradient per `wrt`.
///
/// ```
/// use rlx::{autodiff::grad, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let y = g.square(x).unwrap();
/// let s = g.sum_all(y).unwrap();
/// g.set_outputs(vec![s]);
/// let d = grad(&g, &[0]).unwrap();
/// assert_eq!(d.outputs().len(), 2);
/// assert_eq!(d.shape(d.outputs()[1]).dims(), &[3]);
/// ```
pub fn grad(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    finish(grad_graph(g, wrt, "grad")?)
}

/// Value and gradient in one graph; the same graph as [`grad`] (whose
/// outputs already start with the value).
pub fn value_and_grad(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    grad(g, wrt)
}

/// Vector-Jacobian product of output 0: one extra trailing input
/// `cotangent` shaped like output 0; outputs: the original outputs, then
/// `cotangentᵀ · ∂out0/∂x` per `wrt`.
pub fn vjp(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, "vjp")?;
    let o = out0(g, "vjp")?;
    let mut h = g.clone();
    let ty = g.ty(o);
    let ct = h.input("cotangent", ty.shape, ty.dtype);
    let d = vjp_nodes(&mut h, &[o], &[ct], &nodes)?;
    set_outputs(&mut h, g, d);
    finish(h)
}

/// Jacobian-vector product of output 0: one extra trailing input per `wrt`
/// (`tangent_<name>`, shaped like that input); outputs: the original
/// outputs, then `∂out0/∂x · t`.
pub fn jvp(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, "jvp")?;
    let o = out0(g, "jvp")?;
    let mut h = g.clone();
    let tans = add_like_inputs(&mut h, g, &nodes, "tangent");
    let d = jvp_nodes(&mut h, &nodes, &tans, &[o])?;
    set_outputs(&mut h, g, d);
    finish(h)
}

/// Hessian-vector product of the scalar output 0, forward-over-reverse
/// (the JVP of the gradient): one extra trailing input `v_<name>` per `wrt`;
/// outputs: the original outputs, then `Σ_j ∂²f/∂x_i∂x_j · v_j` per `wrt` `i`.
pub fn hvp(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, "hvp")?;
    let o = scalar_out0(g, "hvp")?;
    let mut h = g.clone();
    let ct = h.ones_like(o);
    let grads = vjp_nodes(&mut h, &[o], &[ct], &nodes)?;
    let vs = add_like_inputs(&mut h, g, &nodes, "v");
    let hv = jvp_nodes(&mut h, &nodes, &vs, &grads)?;
    set_outputs(&mut h, g, hv);
    finish(h)
}

/// Full Hessian of the scalar output 0 (forward mode over the gradient).
/// Outputs: the original outputs, then one block `∂²f/∂x_i∂x_j` shaped
/// `[in_i..., in_j...]` per pair `(i, j)` of `wrt`, row-major.
///
/// When the Hessian's structural pattern has a star colouring with at most
/// half as many colours as inputs, it is computed from those coloured
/// products (see [`coloured`]); else by one product per input element, as
/// [`dense_hessian`] always does.
pub fn hessian(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let gg = grad_graph(g, wrt, "hessian")?;
    let nodes = wrt_nodes(g, wrt, "hessian")?;
    for &w in &nodes {
        float_wrt(g, w, "hessian")?;
    }
    let n = total_numel(&shapes_of(g, &nodes), "hessian")?;
    if let Some(h) = coloured::hessian(g, &gg, wrt, &nodes, n)? {
        return Ok(h);
    }
    hessian_of(g, &gg, wrt)
}

/// The Hessian as [`hessian`] lays it out, always by one forward product
/// per input element (no pattern, no colouring): the reference the
/// coloured path is tested against.
pub fn dense_hessian(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let gg = grad_graph(g, wrt, "hessian")?;
    hessian_of(g, &gg, wrt)
}

fn hessian_of(g: &Graph, gg: &Graph, wrt: &[usize]) -> Result<Graph> {
    let m = g.outputs().len();
    let of: Vec<usize> = (m..m + wrt.len()).collect();
    let mut h = jac_fwd_core(gg, wrt, &of, "hessian")?;
    let blocks = h.outputs()[m + wrt.len()..].to_vec();
    set_outputs(&mut h, g, blocks);
    finish(h)
}

/// The `n`-th derivative of the scalar output 0 with respect to input
/// `wrt_input`, shaped `[in...]` repeated `n` times (`n = 1`: the gradient,
/// `n = 2`: the Hessian). Built by reverse mode once, then forward mode
/// `n - 1` times. Outputs: the original outputs, then the derivative
/// (`n = 0` gives the original outputs only).
pub fn nth_order_grad(g: &Graph, wrt_input: usize, n: usize) -> Result<Graph> {
    if n == 0 {
        wrt_nodes(g, &[wrt_input], "nth_order_grad")?;
        return finish(g.clone());
    }
    let m = g.outputs().len();
    let mut cur = grad_graph(g, &[wrt_input], "nth_order_grad")?;
    for _ in 1..n {
        let mut next = jac_fwd_core(&cur, &[wrt_input], &[m], "nth_order_grad")?;
        let last = *next.outputs().last().expect("a jacobian block");
        set_outputs(&mut next, g, vec![last]);
        cur = next;
    }
    finish(cur)
}

/// Jacobian of output 0 by forward mode (one batched JVP over all input
/// basis vectors). Outputs: the original outputs, then one block
/// `[out..., in...]` per `wrt`.
pub fn jacfwd(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    finish(jac_fwd_core(g, wrt, &[0], "jacfwd")?)
}

/// Jacobian of output 0 by reverse mode (one batched VJP over all output
/// basis vectors). Outputs as for [`jacfwd`].
pub fn jacrev(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    finish(jac_rev_core(g, wrt, "jacrev")?)
}

/// Jacobian of output 0, picking the cheapest way: coloured products when
/// the structural pattern needs at most half as many as the dense basis
/// (see [`coloured`]), else forward mode when the total size of the `wrt`
/// inputs is at most the size of the output, else reverse ([`jacfwd`] and
/// [`jacrev`] always take one basis product per element).
pub fn jacobian(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, "jacobian")?;
    let o = out0(g, "jacobian")?;
    for &w in &nodes {
        float_wrt(g, w, "jacobian")?;
    }
    let total_in = total_numel(&shapes_of(g, &nodes), "jacobian")?;
    let passes = total_in.min(g.shape(o).numel());
    if let Some(h) = coloured::jacobian(g, wrt, &nodes, o, passes)? {
        return Ok(h);
    }
    if total_in <= g.shape(o).numel() {
        finish(jac_fwd_core(g, wrt, &[0], "jacobian")?)
    } else {
        finish(jac_rev_core(g, wrt, "jacobian")?)
    }
}

/// Per-item Jacobians of a function written over a batch: output 0 has
/// shape `[N, out...]`, every `wrt` input `[N, in...]`, and output row `i`
/// must depend only on row `i` of the `wrt` inputs (checked on the graph; a
/// function that mixes rows is an error naming the node that mixes them).
/// Costs one execution batched over as many basis vectors as one item has
/// inputs (forward mode) or, when one item has fewer outputs than inputs,
/// as many as it has outputs (reverse mode: a residual of 3 values from 15
/// inputs takes 3 cotangents, not 15 tangents). In forward mode, items of
/// at most 8 inputs take one JVP per basis vector with the constant seed
/// folded in, laid out item-first (see `per_basis_jvp`); the primal is
/// still computed once.
/// Outputs: the original outputs, then one block `[N, out..., in...]` per `wrt`.
pub fn batch_jacobian(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    const OP: &str = "batch_jacobian";
    let nodes = wrt_nodes(g, wrt, OP)?;
    let o = out0(g, OP)?;
    let os = g.shape(o).clone();
    if os.rank() == 0 {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!("output 0 must have a leading batch axis, but it has shape {os}"),
        });
    }
    let n = os.dim(0);
    for &w in &nodes {
        let s = g.shape(w);
        if s.rank() == 0 || s.dim(0) != n {
            return Err(Error::InvalidArgument {
                op: OP,
                message: format!(
                    "input `{}` has shape {s}, but output 0 has shape {os}: every differentiated input needs the same leading batch axis (of size {n})",
                    input_name(g, w)
                ),
            });
        }
        float_wrt(g, w, OP)?;
    }
    locality::check(g, &nodes, o, n)?;
    // The JVP graph, batched over one basis vector per item input element.
    let items: Vec<Shape> = nodes
        .iter()
        .map(|&w| Shape::from(&g.shape(w).dims()[1..]))
        .collect();
    let m = total_numel(&items, OP)?;
    let out_item = Shape::from(&os.dims()[1..]);
    let dt = g.dtype(o);
    let mut r = g.clone();
    let mut blocks = Vec::with_capacity(nodes.len());
    let p = out_item.numel();
    if m == 0 || p == 0 {
        for item in &items {
            let mut d = os.dims().to_vec();
            d.extend_from_slice(item.dims());
            blocks.push(zero_block(&mut r, d, dt, OP)?);
        }
    } else if p < m {
        // One cotangent per item output, the same for every item.
        let mut one = vec![1];
        one.extend_from_slice(out_item.dims());
        let e = basis(&mut r, p, 0, &Shape::new(one), dt)?;
        let mut full = vec![p, n];
        full.extend_from_slice(out_item.dims());
        let seed = r.broadcast(e, full)?;
        let bars = batched_vjp(&mut r, g, &nodes, o, seed, p)?; // each [p, N, in_item...]
        for (&y, item) in bars.iter().zip(&items) {
            let mut perm = vec![1, 0];
            perm.extend(2..item.rank() + 2);
            let tr = r.transpose(y, &perm)?;
            let mut d = os.dims().to_vec();
            d.extend_from_slice(item.dims());
            blocks.push(r.reshape(tr, d)?);
        }
    } else if m <= MAX_UNBATCHED_BASIS {
        let jac = per_basis_jvp(&mut r, g, &nodes, o, &items, n)?; // [N, out_item..., m]
        let mut off = 0;
        for item in &items {
            let k = item.numel();
            let cols = r.slice_range(jac, off..off + k, os.rank())?;
            let mut d = os.dims().to_vec();
            d.extend_from_slice(item.dims());
            blocks.push(r.reshape(cols, d)?);
            off += k;
        }
        set_outputs(&mut r, g, blocks);
        return crate::passes::assemble_late(&finish(r)?);
    } else {
        let mut seeds = Vec::with_capacity(nodes.len());
        let mut off = 0;
        for (&w, item) in nodes.iter().zip(&items) {
            let mut one = vec![1];
            one.extend_from_slice(item.dims());
            let e = basis(&mut r, m, off, &Shape::new(one), g.dtype(w))?;
            let mut full = vec![m, n];
            full.extend_from_slice(item.dims());
            seeds.push(r.broadcast(e, full)?);
            off += item.numel();
        }
        let out = batched_jvp(&mut r, g, &nodes, &[o], &seeds, m)?[0]; // [m, N, out_item...]
        let mut off = 0;
        for item in &items {
            let k = item.numel();
            let s = r.slice_range(out, off..off + k, 0)?;
            let rank = out_item.rank() + 2;
            let mut perm: Vec<usize> = (1..rank).collect();
            perm.push(0);
            let tr = r.transpose(s, &perm)?;
            let mut d = os.dims().to_vec();
            d.extend_from_slice(item.dims());
            blocks.push(r.reshape(tr, d)?);
            off += k;
        }
    }
    set_outputs(&mut r, g, blocks);
    finish(r)
}

/// Items with at most this many inputs get their batched Jacobian from one
/// JVP per basis vector (see [`per_basis_jvp`]) instead of one JVP batched
/// over the basis: the graph grows with the item size, so larger items stay
/// batched.
const MAX_UNBATCHED_BASIS: usize = 8;

/// The per-item Jacobians of `g`'s node `o` (`[N, out_item...]`) with
/// respect to `nodes` (`[N, in_item...]`, `items` their item shapes), as
/// one `[N, out_item..., m]` node of `r` (`m` the total item size): one
/// JVP per basis vector, each seeded with its constant unit vector
/// broadcast over the batch.
///
/// The seeds being constants, a tangent that is zero for a basis vector
/// (a slice of it where it is 0) is no tangent there: the forward driver
/// adds no term for it (see `zeros`), and the cleanup turns products by
/// the remaining ones (`mul_zero(1, f)`) into the other factor (the batched
/// JVP instead multiplies whole `[m, N, ...]` tangents by `[m, 1, ...]`
/// columns of the basis). The values are the batched JVP's, operation for
/// operation with its products by 1 and its zero terms left out. Each piece is laid out
/// item-first, so the result is written contiguously per item, and the
/// primal nodes are shared by all pieces (CSE).
fn per_basis_jvp(
    r: &mut Graph,
    g: &Graph,
    nodes: &[NodeId],
    o: NodeId,
    items: &[Shape],
    n: usize,
) -> Result<NodeId> {
    let m: usize = items.iter().map(Shape::numel).sum();
    let mut col = g.shape(o).dims().to_vec();
    col.push(1);
    let mut pieces = Vec::with_capacity(m);
    // `r` starts as a copy of `g`: `nodes` and `o` are its primal nodes.
    // Each basis vector gets its own forward walk over the constant
    // tangents, so the driver sees where a slice of the basis is zero and
    // adds no term for it (an added zero would stay: `+0.0 + t` is not
    // `t` for `t = -0.0`).
    for j in 0..m {
        let mut tans = Vec::with_capacity(nodes.len());
        let mut off = 0;
        for (&w, item) in nodes.iter().zip(items) {
            let k = item.numel();
            let mut v = vec![0.0; k];
            if (off..off + k).contains(&j) {
                v[j - off] = 1.0;
            }
            let mut one = vec![1];
            one.extend_from_slice(item.dims());
            let e = r.constant(Literal::F64(v.into()), one, g.dtype(w))?;
            let mut full = vec![n];
            full.extend_from_slice(item.dims());
            tans.push(r.broadcast(e, full)?);
            off += k;
        }
        let y = jvp_nodes(r, nodes, &tans, &[o])?[0];
        pieces.push(r.reshape(y, col.clone())?);
    }
    Ok(match pieces.as_slice() {
        [one] => *one,
        _ => r.concat(&pieces, col.len() - 1)?,
    })
}

// ---- cores shared by the public transforms ----

/// `g` plus the gradient of its scalar output 0: outputs are the original
/// outputs followed by one gradient per `wrt` (not yet cleaned up).
pub(crate) fn grad_graph(g: &Graph, wrt: &[usize], op: &'static str) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, op)?;
    let o = scalar_out0(g, op)?;
    let mut h = g.clone();
    let ct = h.ones_like(o);
    let d = vjp_nodes(&mut h, &[o], &[ct], &nodes)?;
    set_outputs(&mut h, g, d);
    Ok(h)
}

/// `g` plus forward-mode Jacobian blocks of the outputs at positions `of`
/// with respect to the inputs at `wrt`: outputs are `g`'s outputs followed
/// by one block `[out_o..., in_j...]` per `(o, j)`, row-major.
fn jac_fwd_core(g: &Graph, wrt: &[usize], of: &[usize], op: &'static str) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, op)?;
    for &w in &nodes {
        float_wrt(g, w, op)?;
    }
    let outs: Vec<NodeId> = of
        .iter()
        .map(|&k| {
            g.outputs()
                .get(k)
                .copied()
                .ok_or_else(|| Error::CountMismatch {
                    what: format!("outputs of the graph given to `{op}`"),
                    expected: k + 1,
                    got: g.outputs().len(),
                })
        })
        .collect::<Result<_>>()?;
    let sizes: Vec<usize> = nodes.iter().map(|&w| g.shape(w).numel()).collect();
    let m = total_numel(&shapes_of(g, &nodes), op)?;
    let mut r = g.clone();
    let mut blocks = Vec::new();
    if m == 0 {
        for &o in &outs {
            for &w in &nodes {
                let mut d = g.shape(o).dims().to_vec();
                d.extend_from_slice(g.shape(w).dims());
                blocks.push(zero_block(&mut r, d, g.dtype(o), op)?);
            }
        }
    } else {
        let mut seeds = Vec::with_capacity(nodes.len());
        let mut off = 0;
        for &w in &nodes {
            let s = g.shape(w).clone();
            seeds.push(basis(&mut r, m, off, &s, g.dtype(w))?);
            off += s.numel();
        }
        let bo = batched_jvp(&mut r, g, &nodes, &outs, &seeds, m)?; // each [m, out...]
        for (&o, &y) in outs.iter().zip(&bo) {
            let os = g.shape(o).clone();
            let mut off = 0;
            for (&w, &k) in nodes.iter().zip(&sizes) {
                let s = r.slice_range(y, off..off + k, 0)?;
                let mut perm: Vec<usize> = (1..=os.rank()).collect();
                perm.push(0);
                let tr = r.transpose(s, &perm)?;
                let mut d = os.dims().to_vec();
                d.extend_from_slice(g.shape(w).dims());
                blocks.push(r.reshape(tr, d)?);
                off += k;
            }
        }
    }
    let mut all = g.outputs().to_vec();
    all.extend(blocks);
    r.set_outputs(all);
    Ok(r)
}

/// `g` plus reverse-mode Jacobian blocks of output 0 (one per `wrt`).
fn jac_rev_core(g: &Graph, wrt: &[usize], op: &'static str) -> Result<Graph> {
    let nodes = wrt_nodes(g, wrt, op)?;
    for &w in &nodes {
        float_wrt(g, w, op)?;
    }
    let o = out0(g, op)?;
    let os = g.shape(o).clone();
    let dt = g.dtype(o);
    check_real_out(dt, op)?;
    let p = os.numel();
    let mut r = g.clone();
    let mut blocks = Vec::new();
    if p == 0 {
        for &w in &nodes {
            let mut d = os.dims().to_vec();
            d.extend_from_slice(g.shape(w).dims());
            blocks.push(zero_block(&mut r, d, dt, op)?);
        }
    } else {
        let seed = basis(&mut r, p, 0, &os, dt)?;
        let bo = batched_vjp(&mut r, g, &nodes, o, seed, p)?; // each [p, in...]
        for (&w, &y) in nodes.iter().zip(&bo) {
            let mut d = os.dims().to_vec();
            d.extend_from_slice(g.shape(w).dims());
            blocks.push(r.reshape(y, d)?);
        }
    }
    set_outputs(&mut r, g, blocks);
    Ok(r)
}

/// Adds to `r` (a copy of `g`, possibly extended) the JVP of `g`'s nodes
/// `outs` with respect to `nodes`, batched over `m` tangents: `seeds` holds
/// one `[m, in...]` node of `r` per `nodes` entry. Returns one `[m, out...]`
/// node per `outs`.
pub(crate) fn batched_jvp(
    r: &mut Graph,
    g: &Graph,
    nodes: &[NodeId],
    outs: &[NodeId],
    seeds: &[NodeId],
    m: usize,
) -> Result<Vec<NodeId>> {
    let mut t = g.clone();
    let tans = add_like_inputs(&mut t, g, nodes, "tangent");
    let dots = jvp_nodes(&mut t, nodes, &tans, outs)?;
    t.set_outputs(dots);
    let mut flags = vec![false; g.inputs().len()];
    flags.extend(vec![true; nodes.len()]);
    let b = batched(&t, &flags, m)?;
    let mut args = r.input_ids()[..g.inputs().len()].to_vec();
    args.extend_from_slice(seeds);
    r.inline(&b, &args)
}

/// Adds to `r` (a copy of `g`) the VJP of `g`'s node `o` with respect to
/// `nodes`, batched over `p` cotangents given by `seed` (`[p, out...]`).
/// Returns one `[p, in...]` node per `nodes` entry.
pub(crate) fn batched_vjp(
    r: &mut Graph,
    g: &Graph,
    nodes: &[NodeId],
    o: NodeId,
    seed: NodeId,
    p: usize,
) -> Result<Vec<NodeId>> {
    let mut t = g.clone();
    let ty = g.ty(o);
    let ct = t.input("cotangent", ty.shape, ty.dtype);
    let bars = vjp_nodes(&mut t, &[o], &[ct], nodes)?;
    t.set_outputs(bars);
    let mut flags = vec![false; g.inputs().len()];
    flags.push(true);
    let b = batched(&t, &flags, p)?;
    let mut args = r.input_ids()[..g.inputs().len()].to_vec();
    args.push(seed);
    r.inline(&b, &args)
}

/// Batches `g` over a new leading axis of length `size` for the inputs with
/// `flags[i]` (the one place the Jacobian transforms batch; see
/// [`vmap`](crate::vmap::vmap)). The derivative graph is batched after
/// differentiation, so custom rules inside it are kept.
fn batched(g: &Graph, flags: &[bool], size: usize) -> Result<Graph> {
    crate::vmap::vmap(g, flags, size)
}

/// The one cleanup call site of every transform:
/// [`optimize`](crate::passes::optimize) (CSE, constant folding, algebraic
/// simplification, dead-code elimination; inputs and outputs keep their order).
pub(crate) fn finish(g: Graph) -> Result<Graph> {
    crate::passes::optimize(&g)
}

// ---- small helpers ----

/// Constant `[m, shape...]` whose row `r` is the unit vector `e_{r - off}`
/// (flattened over `shape`) for `off <= r < off + shape.numel()`, else 0.
///
/// The constant is dense (`m * k` values held as `f64`): its size is checked
/// and its allocation fallible, so a Jacobian too large for memory is an
/// error, not an abort.
fn basis(r: &mut Graph, m: usize, off: usize, shape: &Shape, dt: DType) -> Result<NodeId> {
    let mut d = vec![m];
    d.extend_from_slice(shape.dims());
    let d = Shape::new(d);
    d.check_size(dt, "jacobian", std::slice::from_ref(shape))?;
    d.check_size(DType::F64, "jacobian", std::slice::from_ref(shape))?;
    let (k, n) = (shape.numel(), d.numel());
    let mut v: Vec<f64> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        op: "jacobian",
        shape: d.clone(),
        dtype: DType::F64,
        bytes: n * 8,
    })?;
    v.resize(n, 0.0);
    for i in 0..k {
        v[(off + i) * k + i] = 1.0;
    }
    r.constant(Literal::F64(v.into()), d, dt)
}

/// An all-zero Jacobian block `[out..., in...]` (when either side has no
/// elements), or [`Error::TooLarge`] naming the transform when no tensor
/// may have that shape.
fn zero_block(r: &mut Graph, dims: Vec<usize>, dt: DType, op: &'static str) -> Result<NodeId> {
    let shape = Shape::new(dims);
    shape.check_size(dt, op, &[])?;
    Ok(r.full(shape, 0.0, dt))
}

/// The total element count of `shapes` (the number of Jacobian columns
/// they give), or an error naming `op` when it overflows.
fn total_numel(shapes: &[Shape], op: &'static str) -> Result<usize> {
    shapes
        .iter()
        .try_fold(0usize, |t, s| t.checked_add(s.numel()))
        .ok_or_else(|| Error::InvalidArgument {
            op,
            message: format!(
                "the differentiated inputs have more than usize::MAX elements in total (shapes {})",
                shapes
                    .iter()
                    .map(Shape::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

fn shapes_of(g: &Graph, nodes: &[NodeId]) -> Vec<Shape> {
    nodes.iter().map(|&n| g.shape(n).clone()).collect()
}

/// The input nodes at positions `wrt`. Every transform starts here, so this
/// is also where a graph with a shape too large for any tensor (an input
/// declared with [`Graph::input`]) is refused, before any size arithmetic.
pub(crate) fn wrt_nodes(g: &Graph, wrt: &[usize], op: &'static str) -> Result<Vec<NodeId>> {
    g.check_sizes()?;
    wrt.iter()
        .map(|&i| {
            g.inputs()
                .get(i)
                .map(|inp| inp.node)
                .ok_or_else(|| Error::InvalidArgument {
                    op,
                    message: format!(
                    "cannot differentiate with respect to input #{i}: the graph has {} input(s)",
                    g.inputs().len()
                ),
                })
        })
        .collect()
}

pub(crate) fn out0(g: &Graph, op: &'static str) -> Result<NodeId> {
    let o = g
        .outputs()
        .first()
        .copied()
        .ok_or_else(|| Error::CountMismatch {
            what: format!("outputs of the graph given to `{op}`"),
            expected: 1,
            got: 0,
        })?;
    g.try_node(o)?;
    Ok(o)
}

pub(crate) fn scalar_out0(g: &Graph, op: &'static str) -> Result<NodeId> {
    let o = out0(g, op)?;
    if g.shape(o).numel() != 1 {
        return Err(Error::NotScalar {
            op,
            shape: g.shape(o).clone(),
        });
    }
    check_real_out(g.dtype(o), op)?;
    Ok(o)
}

/// A gradient or Jacobian needs a real float output: a complex one is an
/// error that points to the companions defined for it.
fn check_real_out(dt: DType, op: &'static str) -> Result<()> {
    if dt.is_complex() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: dt,
            expected: "a real output: the gradient and Jacobian of a complex-valued output need the holomorphic option (`#[differentiable(holomorphic)]`, `autodiff::grad_holomorphic`); `vjp_` and `jvp_` are defined for complex outputs",
        });
    }
    if !dt.is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: dt,
            expected: "a float output to differentiate",
        });
    }
    Ok(())
}

pub(crate) fn float_wrt(g: &Graph, w: NodeId, op: &'static str) -> Result<()> {
    let dt = g.dtype(w);
    if !dt.is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype: dt,
            expected: "a float input to differentiate with respect to",
        });
    }
    Ok(())
}

fn input_name(g: &Graph, id: NodeId) -> String {
    match g.node(id).op {
        Op::Input { index } => g.inputs()[index].name.clone(),
        _ => id.to_string(),
    }
}

/// Appends one input per node of `like`, typed like it, named `<prefix>_<name>`.
fn add_like_inputs(h: &mut Graph, g: &Graph, like: &[NodeId], prefix: &str) -> Vec<NodeId> {
    like.iter()
        .map(|&w| {
            let ty = g.ty(w);
            h.input(format!("{prefix}_{}", input_name(g, w)), ty.shape, ty.dtype)
        })
        .collect()
}

/// Outputs of `h`: the original outputs of `g`, then `extra`.
pub(crate) fn set_outputs(h: &mut Graph, g: &Graph, extra: Vec<NodeId>) {
    let mut outs = g.outputs().to_vec();
    outs.extend(extra);
    h.set_outputs(outs);
}

pub mod coloured;
mod holomorphic;
mod locality;
pub mod sparse;

pub use holomorphic::{grad_holomorphic, jacobian_holomorphic};

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_graphs::tridiagonal as stencil;

    /// Jacobians batch over the basis with `vmap`: the transformed graph's
    /// size does not grow with the number of basis vectors (no unrolling),
    /// and the cleanup pipeline leaves a single `exp` of `x` (CSE). Both
    /// sizes keep the basis above `passes::fold::MAX_FOLD_ELEMENTS`, so
    /// constant folding treats them alike.
    #[test]
    fn jacobian_graph_size_is_independent_of_the_basis_count() {
        for t in [jacfwd, jacrev, jacobian] {
            let small = t(&stencil(100), &[0]).unwrap();
            let large = t(&stencil(200), &[0]).unwrap();
            assert_eq!(small.len(), large.len(), "{large}");
            assert_eq!(large.shape(large.outputs()[2]).dims(), &[200, 200]);
        }
        let j = jacobian(&stencil(200), &[0]).unwrap();
        let exps = j
            .nodes()
            .iter()
            .filter(|n| n.op == Op::Unary(crate::UnaryOp::Exp))
            .count();
        assert_eq!(exps, 1, "{j}");
        let energy = |n| {
            let mut g = stencil(n);
            g.set_outputs(vec![g.outputs()[1]]);
            g
        };
        let h = hessian(&energy(100), &[0]).unwrap();
        let hl = hessian(&energy(200), &[0]).unwrap();
        assert_eq!(h.len(), hl.len(), "{hl}");
    }
}
