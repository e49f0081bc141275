//! Scalarisation: a graph of small tensors lowered element by element into
//! a graph of 0-d nodes, which the planner turns into one scalar region
//! (and the JIT into straight-line native code).
//!
//! Physics code computes over small tensors: a few particles' coordinates
//! in one `[6]` tensor, sliced, squared, summed. Giving each such value a
//! buffer and a kernel call costs far more than its arithmetic. When every
//! value of a graph is small ([`SMALL_VALUE`] elements at most; shapes are
//! static per signature), the graph is rewritten so that each element of
//! each value is its own 0-d node (CasADi's SX expressions):
//!
//! - each input element becomes its own 0-d input (element `i` of input
//!   `k` is input `offset[k] + i` of the element graph, row-major), each
//!   output element its own 0-d output;
//! - movement ops (reshape, broadcast, transpose, slice, concat, gather
//!   with constant indices) only route elements: they emit no node;
//! - element-wise ops emit one node per element; reductions, small matrix
//!   products and scatter-add emit the additions of the reference kernels
//!   in the kernels' order (reductions accumulate in `f64` with the eight
//!   interleaved partial results of `compile::reduce`, products add `a·b`
//!   terms in `k` order onto zero), so results are bit-identical to the
//!   general plan's.
//!
//! The optimiser then runs on the element graph: common subexpressions and
//! constants are folded at the element level (the gradient of a slice adds
//! zeros nowhere; equal element expressions are computed once). Its rules
//! are exact in IEEE arithmetic (`x + (+0.0)` and `0·x` are kept), so
//! results are bit-identical to the general plan's, NaN, ±inf and the sign
//! of zero included.
//!
//! A graph is left to the general planner (`lower` gives `None`) if it has
//! a value larger than [`SMALL_VALUE`] (inputs may be larger, up to
//! [`MAX_INPUT_ELEMENTS`] elements in all), an input or output that is not
//! `f32`/`f64`, an `i64` value other than the constant indices of a gather
//! or scatter-add, a reduction, product or scatter-add of half precision
//! (their kernels round once at the end, an element program after each
//! op), a softmax, log-softmax, solve or loop, an out-of-range constant index, or
//! if the element graph would exceed [`MAX_ELEMENT_NODES`] nodes.

use rlx_core::{BinaryOp, CmpOp, DType, Graph, Literal, NodeId, Op, ReduceOp};

/// The largest number of elements of a value (other than an input) in a
/// scalarised graph: enough for the gradient of 64 particles in 3-D
/// (`[192]`), the all-pairs energies physics code writes as loops. A larger
/// element-wise value runs faster in a fused (vectorised) loop than as
/// straight-line scalar code.
pub(crate) const SMALL_VALUE: usize = 256;

/// The largest number of input elements, over all inputs, of a scalarised
/// graph (each is read on every call).
pub(crate) const MAX_INPUT_ELEMENTS: usize = 1024;

/// The largest element graph built (before element-level folding); beyond
/// it the general plan is used. The 64-particle pair loop's gradient
/// (2016 pairs unrolled) lowers to about 97 000 element nodes, 71 000
/// after folding; native code for it is generated in functions of a few
/// hundred instructions (`jit`), so compile time stays linear.
pub(crate) const MAX_ELEMENT_NODES: usize = 131_072;

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * dims[d + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize], idx: &mut [usize]) {
    for d in (0..dims.len()).rev() {
        idx[d] = flat % dims[d].max(1);
        flat /= dims[d].max(1);
    }
}

/// The flat position in `src` (broadcast to `out`, NumPy rules) read by
/// output position `flat`.
fn broadcast_source(flat: usize, out: &[usize], src: &[usize]) -> usize {
    let mut idx = vec![0; out.len()];
    unravel(flat, out, &mut idx);
    let skip = out.len() - src.len();
    let st = strides(src);
    src.iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { idx[skip + d] * st[d] })
        .sum()
}

/// Lowers `g` (verified, without custom ops) to its element graph, or
/// `None` if the graph is not small (see the module docs).
pub(crate) fn lower(g: &Graph) -> Option<Graph> {
    let nodes = g.nodes();
    let live = g.live_nodes();
    let mut eg = Graph::new();
    // Elements of each value (row-major), and the values of i64 constants.
    let mut elems: Vec<Option<Vec<NodeId>>> = vec![None; nodes.len()];
    let mut ints: Vec<Option<Vec<i64>>> = vec![None; nodes.len()];
    let mut input_elements = 0;
    for input in g.inputs() {
        let n = &nodes[input.node.index()];
        if !matches!(n.dtype, DType::F32 | DType::F64) {
            return None;
        }
        input_elements += n.shape.numel();
        if input_elements > MAX_INPUT_ELEMENTS {
            return None;
        }
        let one = |i: usize| format!("{}[{i}]", input.name);
        let es = (0..n.shape.numel())
            .map(|i| eg.input(one(i), [], n.dtype))
            .collect();
        elems[input.node.index()] = Some(es);
    }
    for o in g.outputs() {
        if !matches!(g.dtype(*o), DType::F32 | DType::F64) {
            return None;
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        if !live[i] || matches!(n.op, Op::Input { .. }) {
            continue;
        }
        if n.shape.numel() > SMALL_VALUE {
            return None;
        }
        if n.dtype == DType::I64 {
            // Only constant indices, read by their gather or scatter-add.
            let Op::Constant(lit) = &n.op else {
                return None;
            };
            ints[i] = Some((0..n.shape.numel()).map(|k| lit.get_i64(k)).collect());
            continue;
        }
        let es = lower_node(&mut eg, g, i, &elems, &ints)?;
        if eg.len() > MAX_ELEMENT_NODES {
            return None;
        }
        elems[i] = Some(es);
    }
    let mut outputs = Vec::new();
    for o in g.outputs() {
        outputs.extend(elems[o.index()].as_ref()?.iter().copied());
    }
    eg.set_outputs(outputs);
    Some(eg)
}

/// The elements of node `i`.
fn lower_node(
    eg: &mut Graph,
    g: &Graph,
    i: usize,
    elems: &[Option<Vec<NodeId>>],
    ints: &[Option<Vec<i64>>],
) -> Option<Vec<NodeId>> {
    let n = &g.nodes()[i];
    let out = n.shape.dims();
    let numel = n.shape.numel();
    if numel == 0 {
        // No elements (and no loop over a dimension that may be huge
        // next to a zero one).
        return Some(Vec::new());
    }
    let arg = |k: usize| elems[n.inputs[k].index()].as_ref();
    let dims = |k: usize| g.shape(n.inputs[k]).dims();
    let float = |d: DType| matches!(d, DType::F32 | DType::F64);
    // Element `flat` of operand `k`, broadcast to the output shape.
    let bcast = |k: usize, flat: usize| -> Option<NodeId> {
        Some(arg(k)?[broadcast_source(flat, out, dims(k))])
    };
    let es: Vec<NodeId> = match &n.op {
        Op::Input { .. } => elems[i].clone()?,
        Op::Constant(lit) => (0..numel).map(|k| constant(eg, lit, k, n.dtype)).collect(),
        Op::Unary(op) => arg(0)?
            .clone()
            .into_iter()
            .map(|x| eg.unary(*op, x).ok())
            .collect::<Option<_>>()?,
        Op::Binary(op) => (0..numel)
            .map(|f| eg.binary(*op, bcast(0, f)?, bcast(1, f)?).ok())
            .collect::<Option<_>>()?,
        Op::Compare(op) => (0..numel)
            .map(|f| eg.compare(*op, bcast(0, f)?, bcast(1, f)?).ok())
            .collect::<Option<_>>()?,
        Op::Select => (0..numel)
            .map(|f| eg.select(bcast(0, f)?, bcast(1, f)?, bcast(2, f)?).ok())
            .collect::<Option<_>>()?,
        Op::Cast(to) => arg(0)?
            .clone()
            .into_iter()
            .map(|x| eg.cast(x, *to).ok())
            .collect::<Option<_>>()?,
        Op::Broadcast { .. } => (0..numel).map(|f| bcast(0, f)).collect::<Option<_>>()?,
        Op::Reshape { .. } | Op::StopGradient => arg(0)?.clone(),
        Op::Transpose { perm } => {
            let xs = strides(dims(0));
            let x = arg(0)?;
            let mut idx = vec![0; out.len()];
            (0..numel)
                .map(|f| {
                    unravel(f, out, &mut idx);
                    x[idx
                        .iter()
                        .zip(perm)
                        .map(|(&o, &p)| o * xs[p])
                        .sum::<usize>()]
                })
                .collect()
        }
        Op::Slice { axis, start, .. } => {
            let x = arg(0)?;
            let xs = strides(dims(0));
            let mut idx = vec![0; out.len()];
            (0..numel)
                .map(|f| {
                    unravel(f, out, &mut idx);
                    idx[*axis] += start;
                    x[idx.iter().zip(&xs).map(|(a, b)| a * b).sum::<usize>()]
                })
                .collect()
        }
        Op::Concat { axis } => {
            let mut idx = vec![0; out.len()];
            (0..numel)
                .map(|f| {
                    unravel(f, out, &mut idx);
                    let mut at = idx[*axis];
                    for k in 0..n.inputs.len() {
                        let d = dims(k);
                        if at < d[*axis] {
                            idx[*axis] = at;
                            let s = strides(d);
                            return Some(
                                arg(k)?[idx.iter().zip(&s).map(|(a, b)| a * b).sum::<usize>()],
                            );
                        }
                        at -= d[*axis];
                    }
                    None
                })
                .collect::<Option<_>>()?
        }
        Op::Gather { axis } => {
            let x = arg(0)?;
            let ix = ints[n.inputs[1].index()].as_ref()?;
            let (outer, size, inner) = split(dims(0), *axis);
            if ix.iter().any(|&j| j < 0 || j as u64 >= size as u64) {
                return None;
            }
            let mut es = Vec::with_capacity(numel);
            for b in 0..outer {
                for &j in ix {
                    let src = (b * size + j as usize) * inner;
                    es.extend_from_slice(&x[src..src + inner]);
                }
            }
            es
        }
        Op::ScatterAdd { axis } => {
            if !float(n.dtype) {
                return None;
            }
            let mut es = arg(0)?.clone();
            let ix = ints[n.inputs[1].index()].as_ref()?;
            let upd = arg(2)?;
            let (outer, size, inner) = split(dims(0), *axis);
            if ix.iter().any(|&j| j < 0 || j as u64 >= size as u64)
                || upd.len() != outer * ix.len() * inner
            {
                return None;
            }
            for b in 0..outer {
                for (k, &j) in ix.iter().enumerate() {
                    let dst = (b * size + j as usize) * inner;
                    let src = (b * ix.len() + k) * inner;
                    for q in 0..inner {
                        es[dst + q] = eg.add(es[dst + q], upd[src + q]).ok()?;
                    }
                }
            }
            es
        }
        Op::Reduce { op, axes } => {
            if !float(n.dtype) {
                return None;
            }
            let x = arg(0)?.clone();
            reduce(eg, *op, &x, dims(0), axes, numel, n.dtype)?
        }
        Op::MatMul => {
            if !float(n.dtype) {
                return None;
            }
            matmul(eg, arg(0)?, dims(0), arg(1)?, dims(1), out, n.dtype)?
        }
        Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Solve
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => return None,
    };
    (es.len() == numel).then_some(es)
}

/// `(outer, size, inner)` of `dims` around `axis`.
fn split(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = dims[..axis].iter().product();
    let inner = dims[axis + 1..].iter().product();
    (outer, dims[axis], inner)
}

/// Element `k` of a constant, as a 0-d constant.
fn constant(eg: &mut Graph, lit: &Literal, k: usize, dtype: DType) -> NodeId {
    eg.scalar(lit.get_f64(k), dtype)
}

/// A reduction, folded as `compile::reduce` folds it: in `f64`, over the
/// input in row-major order, a reduced innermost axis in eight interleaved
/// partial results (combined into the accumulator in lane order, then the
/// remainder), the result converted to `dtype` once.
fn reduce(
    eg: &mut Graph,
    op: ReduceOp,
    x: &[NodeId],
    dims: &[usize],
    axes: &[usize],
    out_numel: usize,
    dtype: DType,
) -> Option<Vec<NodeId>> {
    let x: Vec<NodeId> = if dtype == DType::F64 {
        x.to_vec()
    } else {
        x.iter()
            .map(|&e| eg.cast(e, DType::F64).ok())
            .collect::<Option<_>>()?
    };
    let identity = match op {
        ReduceOp::Sum | ReduceOp::Mean => 0.0,
        ReduceOp::Prod => 1.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let id = eg.scalar(identity, DType::F64);
    let mut acc = vec![id; out_numel];
    // Output stride of each input axis (0 on reduced axes).
    let kept: Vec<usize> = (0..dims.len()).filter(|d| !axes.contains(d)).collect();
    let kept_dims: Vec<usize> = kept.iter().map(|&d| dims[d]).collect();
    let ks = strides(&kept_dims);
    let mut out_strides = vec![0; dims.len()];
    for (k, &d) in kept.iter().enumerate() {
        out_strides[d] = ks[k];
    }
    let r = dims.len();
    if !x.is_empty() && r == 0 {
        acc[0] = combine(eg, op, acc[0], x[0])?;
    } else if !x.is_empty() {
        let inner = dims[r - 1];
        let s_in = out_strides[r - 1];
        let mut idx = vec![0; r - 1];
        for (row_no, row) in x.chunks(inner.max(1)).enumerate() {
            unravel(row_no, &dims[..r - 1], &mut idx);
            let o: usize = idx.iter().zip(&out_strides).map(|(i, s)| i * s).sum();
            if s_in == 0 {
                // Each lane starts from its first element, not from the
                // kernel's identity: the same bits. For max, min and prod
                // `op(identity, v)` is `v`; a sum lane differs only by
                // giving `-0.0` where the kernel's (`+0.0 + -0.0 + ...`)
                // gives `+0.0`, and the lanes are added onto an
                // accumulator that started at `+0.0` and so is never
                // `-0.0`, where either zero adds nothing. A lane with no
                // element (the identity) adds nothing either.
                let mut lanes: [Option<NodeId>; 8] = [None; 8];
                let chunks = row.chunks_exact(8);
                let rest = chunks.remainder();
                for c in chunks {
                    for (l, &v) in lanes.iter_mut().zip(c) {
                        *l = Some(match *l {
                            None => v,
                            Some(a) => combine(eg, op, a, v)?,
                        });
                    }
                }
                let mut a = acc[o];
                for l in lanes.into_iter().flatten() {
                    a = combine(eg, op, a, l)?;
                }
                for &v in rest {
                    a = combine(eg, op, a, v)?;
                }
                acc[o] = a;
            } else {
                for (j, &v) in row.iter().enumerate() {
                    let t = o + j * s_in;
                    acc[t] = combine(eg, op, acc[t], v)?;
                }
            }
        }
    }
    if op == ReduceOp::Mean {
        let count: usize = axes.iter().map(|&d| dims[d]).product();
        let c = eg.scalar(count as f64, DType::F64);
        for a in &mut acc {
            *a = eg.div(*a, c).ok()?;
        }
    }
    if dtype != DType::F64 {
        for a in &mut acc {
            *a = eg.cast(*a, dtype).ok()?;
        }
    }
    Some(acc)
}

/// `compile::reduce`'s combination of accumulator `a` with element `x`
/// (NaN wins in max and min: once `a` is NaN it stays NaN).
fn combine(eg: &mut Graph, op: ReduceOp, a: NodeId, x: NodeId) -> Option<NodeId> {
    let pick = |eg: &mut Graph, better: CmpOp| -> rlx_core::Result<NodeId> {
        let a_nan = eg.compare(CmpOp::Ne, a, a)?;
        let x_nan = eg.compare(CmpOp::Ne, x, x)?;
        let wins = eg.compare(better, x, a)?;
        let x_or_a = eg.select(x_nan, x, a)?;
        let by_x = eg.select(wins, x, x_or_a)?;
        eg.select(a_nan, a, by_x)
    };
    match op {
        ReduceOp::Sum | ReduceOp::Mean => eg.binary(BinaryOp::Add, a, x),
        ReduceOp::Prod => eg.binary(BinaryOp::Mul, a, x),
        ReduceOp::Max => pick(eg, CmpOp::Gt),
        ReduceOp::Min => pick(eg, CmpOp::Lt),
    }
    .ok()
}

/// A batched product as the small-product loop of `compile::matmul`
/// computes it: `c = 0`, then `c = c + a[i, p]·b[p, j]` for `p` in order.
fn matmul(
    eg: &mut Graph,
    a: &[NodeId],
    ad: &[usize],
    b: &[NodeId],
    bd: &[usize],
    out: &[usize],
    dtype: DType,
) -> Option<Vec<NodeId>> {
    let r = out.len();
    let (m, n) = (out[r - 2], out[r - 1]);
    let k = ad[ad.len() - 1];
    let batch = &out[..r - 2];
    let batches: usize = batch.iter().product();
    let (a_batch, b_batch) = (&ad[..ad.len() - 2], &bd[..bd.len() - 2]);
    let zero = eg.scalar(0.0, dtype);
    let mut es = Vec::with_capacity(batches * m * n);
    for bi in 0..batches {
        let oa = broadcast_source(bi, batch, a_batch) * m * k;
        let ob = broadcast_source(bi, batch, b_batch) * k * n;
        for i in 0..m {
            for j in 0..n {
                let mut c = zero;
                for p in 0..k {
                    let t = eg.mul(a[oa + i * k + p], b[ob + p * n + j]).ok()?;
                    c = eg.add(c, t).ok()?;
                }
                es.push(c);
            }
        }
    }
    Some(es)
}
