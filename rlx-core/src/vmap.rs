//! Batching (`vmap`): one graph evaluated over a batch of inputs.
//!
//! [`vmap`] turns a graph `f` into a graph that computes `f` for each of
//! `size` items at once. Input `i` with `batched[i]` gets a new leading axis
//! of length `size` (its declared shape `[..s]` becomes `[size, ..s]`); the
//! other inputs are shared by all items. Every output gets the leading axis
//! (an output that depends on no batched input is broadcast).
//!
//! Invariant of the batching rules: the batch axis of a batched value is
//! always axis 0, and a value that depends on no batched input stays
//! unbatched (no copy per item) until it meets a batched one. Each rule
//! receives its operands with a flag saying which are batched; there is one
//! rule per op, in an exhaustive `match`.
//!
//! Broadcasting ops need care: NumPy aligns shapes from the right, so an
//! unbatched operand already lines up with the trailing (per-item) axes of a
//! batched one, but a batched operand of lower rank than the result has its
//! batch axis in the wrong place. It is reshaped to `[size, 1, .., 1, ..s]`
//! first, which puts the batch axis at position 0 of the result.
//!
//! The rules, for `B = size` and a node whose unbatched result has rank `r`:
//!
//! | op | batched form |
//! | --- | --- |
//! | unary, cast, stop_gradient | the same op |
//! | binary, compare, select | batched operands padded to rank `r + 1`, unbatched ones as they are |
//! | matmul | the same padding (batch dimensions broadcast; matrix axes stay last, so there is no vector case: both operands have rank >= 2) |
//! | reduce, softmax, log_softmax, slice | axes shifted by one |
//! | transpose | `[0, perm + 1]` |
//! | reshape, broadcast | target `[B, ..shape]` (broadcast pads its operand first) |
//! | concat | unbatched operands broadcast to `[B, ..]`, axis shifted |
//! | gather | batched `x`: axis shifted; batched `idx`: gather, then move the batch axis to the front; both: see below |
//! | scatter_add | operand and updates broadcast to `[B, ..]`; batched `idx`: see below |
//! | solve | the unbatched side broadcast to `[B, ..]` (solve does not broadcast) |
//! | custom | see below |
//! | loop | a loop of the batched body, every carry batched; an adjoint stays an adjoint (see `loops`) |
//! | root | the root of the batched residual, its unknown batched (one Newton solve over all items, whose dense Jacobian is block-diagonal) |
//! | input, constant | never batched |
//!
//! Custom ops with a batched operand are replaced by their inlined, batched
//! forward graph: the result computes the same values, but its derivatives
//! come from differentiating the forward graph, not from the op's custom
//! rules. To keep the rules, differentiate first and batch the derivative
//! graph (what the Jacobian transforms do). A custom op whose operands are
//! all unbatched is copied as it is.
//!
//! `gather`/`scatter_add` with batched indices index a flattened
//! `[size * n, ..]` operand at `idx + item * n`; an index that is out of
//! range for one item then reads or writes a neighbouring item instead of
//! failing (the runtime's range check sees only the flattened axis).

mod items;
mod loops;

pub use items::{unbatch, Item};

use crate::{DType, Error, Graph, Literal, Node, NodeId, Op, Result, Shape};

/// Batches `g` over a new leading axis of length `size` for the inputs with
/// `batched[i]`; see the module docs.
///
/// ```
/// use rlx::{core::vmap, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let w = g.input("w", [3], DType::F64);
/// let y = g.mul(x, w).unwrap();
/// let s = g.sum(y, &[0]).unwrap();
/// g.set_outputs(vec![s]);
/// let b = vmap(&g, &[true, false], 5).unwrap();
/// assert_eq!(b.shape(b.input_ids()[0]).dims(), &[5, 3]);
/// assert_eq!(b.shape(b.input_ids()[1]).dims(), &[3]);
/// assert_eq!(b.shape(b.outputs()[0]).dims(), &[5]);
/// ```
pub fn vmap(g: &Graph, batched: &[bool], size: usize) -> Result<Graph> {
    if batched.len() != g.inputs().len() {
        return Err(Error::CountMismatch {
            what: "`vmap`: batched flags (one per graph input)".into(),
            expected: g.inputs().len(),
            got: batched.len(),
        });
    }
    g.check_sizes()?;
    let mut out = Graph::new();
    let mut map: Vec<Option<(NodeId, bool)>> = vec![None; g.len()];
    for (inp, &b) in g.inputs().iter().zip(batched) {
        let ty = g.try_node(inp.node)?.ty();
        let shape = if b {
            checked_batch(size, &ty.shape, ty.dtype)?
        } else {
            ty.shape
        };
        map[inp.node.index()] = Some((out.input(inp.name.clone(), shape, ty.dtype), b));
    }
    let live = g.live_nodes();
    for (i, node) in g.nodes().iter().enumerate() {
        if !live[i] || map[i].is_some() {
            continue;
        }
        let mut args = Vec::with_capacity(node.inputs.len());
        for j in &node.inputs {
            match map.get(j.index()).copied().flatten() {
                Some(a) => args.push(a),
                None => {
                    return Err(Error::InvalidGraph {
                        node: i as u32,
                        message: format!("operand {j} is not an earlier node"),
                        context: g.context(i),
                    })
                }
            }
        }
        let before = out.len();
        let r = if args.iter().any(|a| a.1) {
            checked_batch(size, &node.shape, node.dtype)?;
            (batch_node(&mut out, node, &args, size)?, true)
        } else {
            let ids: Vec<NodeId> = args.iter().map(|a| a.0).collect();
            (
                out.push_unchecked(Node {
                    op: node.op.clone(),
                    inputs: ids,
                    shape: node.shape.clone(),
                    dtype: node.dtype,
                }),
                false,
            )
        };
        if let Some(s) = g.source(NodeId(i as u32)) {
            out.mark_source(before, s);
        }
        map[i] = Some(r);
    }
    let mut outs = Vec::with_capacity(g.outputs().len());
    for o in g.outputs() {
        g.try_node(*o)?;
        let (id, b) = map[o.index()].expect("outputs are live");
        outs.push(if b {
            id
        } else {
            let s = with_batch(size, g.shape(*o));
            out.broadcast(id, s)?
        });
    }
    out.set_outputs(outs);
    out.verify()?;
    Ok(out)
}

/// `[size, ..s]`, or [`Error::TooLarge`] if a `dtype` tensor of that shape
/// could not exist (every shape `vmap` builds is at most this large: checking
/// each batched node's shape bounds the rest).
fn checked_batch(size: usize, s: &Shape, dtype: DType) -> Result<Shape> {
    let b = with_batch(size, s);
    b.check_size(dtype, "vmap", std::slice::from_ref(s))?;
    Ok(b)
}

/// `[size, ..s]`.
fn with_batch(size: usize, s: &Shape) -> Shape {
    let mut d = Vec::with_capacity(s.rank() + 1);
    d.push(size);
    d.extend_from_slice(s.dims());
    Shape::new(d)
}

/// A batched `x: [B, ..s]` reshaped to `[B, 1 (extra times), ..s]`.
fn pad_after_batch(out: &mut Graph, x: NodeId, extra: usize) -> Result<NodeId> {
    if extra == 0 {
        return Ok(x);
    }
    let s = out.shape(x).dims().to_vec();
    let mut d = Vec::with_capacity(s.len() + extra);
    d.push(s[0]);
    d.extend(std::iter::repeat_n(1, extra));
    d.extend_from_slice(&s[1..]);
    out.reshape(x, d)
}

/// A batched operand padded so that its rank is `rank + 1` (batch axis
/// first); unbatched operands are returned as they are (NumPy broadcasting
/// aligns them with the trailing axes).
fn align(out: &mut Graph, (x, b): (NodeId, bool), rank: usize) -> Result<NodeId> {
    if !b {
        return Ok(x);
    }
    let r = out.shape(x).rank() - 1;
    pad_after_batch(out, x, rank.saturating_sub(r))
}

/// An operand with the batch axis: broadcast to `[size, ..s]` if unbatched.
fn materialize(out: &mut Graph, (x, b): (NodeId, bool), size: usize) -> Result<NodeId> {
    if b {
        return Ok(x);
    }
    let s = with_batch(size, out.shape(x));
    out.broadcast(x, s)
}

/// `[B, 1, .., 1]` (`ones` trailing ones) holding `item * n` in row `item`,
/// the offsets that turn per-item indices into indices of a `[B * n, ..]`
/// flattening.
fn item_offsets(out: &mut Graph, size: usize, n: usize, ones: usize) -> Result<NodeId> {
    let v: Vec<i64> = (0..size).map(|b| (b * n) as i64).collect();
    let mut d = vec![size];
    d.extend(std::iter::repeat_n(1, ones));
    out.constant(Literal::I64(v.into()), d, DType::I64)
}

/// Moves axis `from` of a rank-`rank` value to position `to` (others keep their order).
fn move_axis(out: &mut Graph, x: NodeId, from: usize, to: usize) -> Result<NodeId> {
    let rank = out.shape(x).rank();
    let mut perm: Vec<usize> = (0..rank).filter(|&a| a != from).collect();
    perm.insert(to, from);
    out.transpose(x, &perm)
}

/// Moves the block of axes `from..from + len` to start at `to` (in the order
/// of the remaining axes).
fn move_axes(out: &mut Graph, x: NodeId, from: usize, len: usize, to: usize) -> Result<NodeId> {
    let rank = out.shape(x).rank();
    let mut perm: Vec<usize> = (0..rank)
        .filter(|a| !(from..from + len).contains(a))
        .collect();
    for (k, a) in (from..from + len).enumerate() {
        perm.insert(to + k, a);
    }
    out.transpose(x, &perm)
}

/// The batched version of `node`, at least one of whose operands is batched.
/// Returns a node shaped `[size, ..node.shape]`.
fn batch_node(
    out: &mut Graph,
    node: &Node,
    args: &[(NodeId, bool)],
    size: usize,
) -> Result<NodeId> {
    let ids: Vec<NodeId> = args.iter().map(|a| a.0).collect();
    let rank = node.shape.rank();
    match &node.op {
        // No operands, so never batched here; copied for completeness.
        Op::Input { .. } | Op::Constant(_) => Ok(out.push_unchecked(node.clone())),
        Op::Unary(_) | Op::Cast(_) | Op::StopGradient => out.push(node.op.clone(), &ids),
        Op::Binary(_) | Op::Compare(_) | Op::Select => {
            let mut xs = Vec::with_capacity(args.len());
            for &a in args {
                xs.push(align(out, a, rank)?);
            }
            out.push(node.op.clone(), &xs)
        }
        Op::MatMul => {
            // Batch dimensions broadcast like element-wise operands; the
            // matrix axes stay last.
            let a = align(out, args[0], rank)?;
            let b = align(out, args[1], rank)?;
            out.matmul(a, b)
        }
        Op::Reduce { op, axes } => {
            let axes = axes.iter().map(|a| a + 1).collect();
            out.push(Op::Reduce { op: *op, axes }, &ids)
        }
        Op::Transpose { perm } => {
            let mut p = vec![0];
            p.extend(perm.iter().map(|a| a + 1));
            out.push(Op::Transpose { perm: p }, &ids)
        }
        Op::Reshape { shape } => out.push(
            Op::Reshape {
                shape: with_batch(size, shape),
            },
            &ids,
        ),
        Op::Broadcast { shape } => {
            let x = align(out, args[0], shape.rank())?;
            out.push(
                Op::Broadcast {
                    shape: with_batch(size, shape),
                },
                &[x],
            )
        }
        Op::Concat { axis } => {
            let mut xs = Vec::with_capacity(args.len());
            for &a in args {
                xs.push(materialize(out, a, size)?);
            }
            out.push(Op::Concat { axis: axis + 1 }, &xs)
        }
        Op::Slice { axis, start, len } => out.push(
            Op::Slice {
                axis: axis + 1,
                start: *start,
                len: *len,
            },
            &ids,
        ),
        Op::Softmax { axis } => out.push(Op::Softmax { axis: axis + 1 }, &ids),
        Op::LogSoftmax { axis } => out.push(Op::LogSoftmax { axis: axis + 1 }, &ids),
        Op::Gather { axis } => batch_gather(out, args, *axis, size),
        Op::ScatterAdd { axis } => batch_scatter_add(out, args, *axis, size),
        Op::Solve => {
            // Solve needs equal batch dimensions: no broadcasting.
            let a = materialize(out, args[0], size)?;
            let b = materialize(out, args[1], size)?;
            out.solve(a, b)
        }
        Op::Custom(c) => {
            let flat = c.forward.inline_custom()?;
            let flags: Vec<bool> = args.iter().map(|a| a.1).collect();
            let inner = vmap(&flat, &flags, size)?;
            Ok(out.inline(&inner, &ids)?[0])
        }
        Op::Loop(l) => loops::batch_loop(out, l, args, size),
        Op::SparseSolve(s) => {
            // One matrix for the whole batch when the values are not
            // batched (the items are more right-hand sides), else one per item.
            let (v, b) = (args[0], args[1]);
            let values = if v.1 || out.shape(v.0).rank() > 1 {
                materialize(out, v, size)?
            } else {
                v.0
            };
            let b = materialize(out, b, size)?;
            out.sparse_solve(s.clone(), values, b)
        }
        Op::Root(r) => {
            // The batched root is the root of the batched residual: its
            // unknown holds every item's (the guess broadcast to all).
            let mut ops = vec![materialize(out, args[0], size)?];
            ops.extend(args[1..].iter().map(|a| a.0));
            let mut flags = vec![true];
            flags.extend(args[1..].iter().map(|a| a.1));
            let residual = vmap(&r.residual, &flags, size)?;
            let batched = crate::RootRef::new(r.name.clone(), residual, r.newton)?;
            out.push(Op::Root(batched), &ops)
        }
    }
}

/// `gather(x, idx, axis)` per item. `x: [pre, n, rest]` (`axis = len(pre)`),
/// `idx: [is]`, result `[pre, is, rest]`.
fn batch_gather(
    out: &mut Graph,
    args: &[(NodeId, bool)],
    axis: usize,
    size: usize,
) -> Result<NodeId> {
    let ((x, xb), (idx, ib)) = (args[0], args[1]);
    match (xb, ib) {
        (true, false) => out.gather(x, idx, axis + 1),
        (false, _) => {
            // [pre, B, is, rest]: bring B to the front.
            let g = out.gather(x, idx, axis)?;
            move_axis(out, g, axis, 0)
        }
        (true, true) => {
            let xs = out.shape(x).dims().to_vec(); // [B, pre, n, rest]
            let n = xs[axis + 1];
            let k = out.shape(idx).rank() - 1;
            // [B, n, pre, rest] -> [B * n, pre, rest]
            let t = move_axis(out, x, axis + 1, 1)?;
            let mut flat = vec![size * n];
            flat.extend_from_slice(&xs[1..axis + 1]);
            flat.extend_from_slice(&xs[axis + 2..]);
            let f = out.reshape(t, flat)?;
            let off = item_offsets(out, size, n, k)?;
            let gi = out.add(idx, off)?;
            // [B, is, pre, rest] -> [B, pre, is, rest]
            let g = out.gather(f, gi, 0)?;
            move_axes(out, g, k + 1, axis, 1)
        }
    }
}

/// `scatter_add(operand, idx, updates, axis)` per item. `operand: [pre, n,
/// rest]`, `idx: [is]`, `updates: [pre, is, rest]`.
fn batch_scatter_add(
    out: &mut Graph,
    args: &[(NodeId, bool)],
    axis: usize,
    size: usize,
) -> Result<NodeId> {
    let operand = materialize(out, args[0], size)?;
    let updates = materialize(out, args[2], size)?;
    let (idx, ib) = args[1];
    if !ib {
        return out.scatter_add(operand, idx, updates, axis + 1);
    }
    let os = out.shape(operand).dims().to_vec(); // [B, pre, n, rest]
    let n = os[axis + 1];
    let k = out.shape(idx).rank() - 1;
    // operand -> [B, n, pre, rest] -> [B * n, pre, rest]
    let t = move_axis(out, operand, axis + 1, 1)?;
    let tshape = out.shape(t).clone();
    let mut flat = vec![size * n];
    flat.extend_from_slice(&os[1..axis + 1]);
    flat.extend_from_slice(&os[axis + 2..]);
    let f = out.reshape(t, flat)?;
    let off = item_offsets(out, size, n, k)?;
    let gi = out.add(idx, off)?;
    // updates [B, pre, is, rest] -> [B, is, pre, rest]
    let u = move_axes(out, updates, 1 + axis, k, 1)?;
    let s = out.scatter_add(f, gi, u, 0)?;
    // [B * n, pre, rest] -> [B, n, pre, rest] -> [B, pre, n, rest]
    let r = out.reshape(s, tshape)?;
    move_axis(out, r, 1, axis + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, CmpOp, ReduceOp, UnaryOp};

    /// vmap(g) verifies, and every output is `[size, ..original]`.
    fn check(g: &Graph, flags: &[bool], size: usize) -> Graph {
        g.verify().unwrap();
        let b = vmap(g, flags, size).unwrap();
        b.verify().unwrap();
        for (i, (inp, f)) in g.inputs().iter().zip(flags).enumerate() {
            let want = if *f {
                with_batch(size, g.shape(inp.node))
            } else {
                g.shape(inp.node).clone()
            };
            assert_eq!(b.shape(b.input_ids()[i]), &want);
            assert_eq!(b.inputs()[i].name, inp.name);
        }
        for (o, bo) in g.outputs().iter().zip(b.outputs()) {
            assert_eq!(b.shape(*bo), &with_batch(size, g.shape(*o)), "{b}");
            assert_eq!(b.dtype(*bo), g.dtype(*o));
        }
        b
    }

    #[test]
    fn wrong_flag_count_is_an_error() {
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::F64);
        g.set_outputs(vec![x]);
        let e = vmap(&g, &[true, false], 3).unwrap_err().to_string();
        assert!(e.contains("vmap") && e.contains("expected 1"), "{e}");
    }

    #[test]
    fn unbatched_values_stay_unbatched_until_mixed() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let w = g.input("w", [4, 3], DType::F64);
        let e = g.exp(w).unwrap(); // unbatched: computed once
        let y = g.add(x, e).unwrap(); // [B, 3] + [4, 3]
        g.set_outputs(vec![y, e]);
        let b = check(&g, &[true, false], 5);
        let exp = b
            .nodes()
            .iter()
            .find(|n| n.op == Op::Unary(UnaryOp::Exp))
            .unwrap();
        assert_eq!(exp.shape, Shape::from([4, 3]));
        // x: [5, 3] is padded to [5, 1, 3] so the batch axis leads.
        assert!(b.to_string().contains("reshape [5, 1, 3]"), "{b}");
    }

    #[test]
    fn elementwise_broadcasting_between_batched_operands_of_different_rank() {
        let mut g = Graph::new();
        let a = g.input("a", [3], DType::F32);
        let c = g.input("c", [2, 1], DType::F32);
        let m = g.input("m", [], DType::Bool);
        let s = g.mul(a, c).unwrap();
        let cmp = g.compare(CmpOp::Lt, a, c).unwrap();
        let sel = g.select(m, s, a).unwrap();
        let any = g.and(cmp, m).unwrap();
        g.set_outputs(vec![s, sel, any]);
        check(&g, &[true, true, true], 4);
        check(&g, &[false, true, false], 4);
        check(&g, &[true, false, true], 1);
    }

    #[test]
    fn reductions_and_axis_ops_shift_their_axes() {
        let mut g = Graph::new();
        let x = g.input("x", [2, 3, 4], DType::F64);
        let s = g.reduce(ReduceOp::Max, x, &[0, 2]).unwrap();
        let t = g.transpose(x, &[2, 0, 1]).unwrap();
        let r = g.reshape(x, [6, 4]).unwrap();
        let sl = g.slice_range(x, 1..3, 2).unwrap();
        let sm = g.softmax(x, 1).unwrap();
        let ls = g.log_softmax(x, 0).unwrap();
        let cat = g.concat(&[x, sl], 2).unwrap();
        let bc = g.broadcast(s, [5, 3]).unwrap();
        let cast = g.cast(x, DType::F32).unwrap();
        let sg = g.stop_gradient(x).unwrap();
        g.set_outputs(vec![s, t, r, sl, sm, ls, cat, bc, cast, sg]);
        let b = check(&g, &[true], 3);
        assert!(b.to_string().contains("reduce_max axes=[1, 3]"), "{b}");
        assert!(b.to_string().contains("perm=[0, 3, 1, 2]"), "{b}");
    }

    #[test]
    fn concat_of_batched_and_unbatched_materializes_the_batch_axis() {
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::F64);
        let y = g.input("y", [3], DType::F64);
        let c = g.concat(&[x, y], 0).unwrap();
        g.set_outputs(vec![c]);
        let b = check(&g, &[false, true], 4);
        assert!(b.to_string().contains("broadcast [4, 2]"), "{b}");
    }

    #[test]
    fn matmul_rank_rules() {
        for (sa, sb) in [
            (vec![2, 3], vec![3, 4]),
            (vec![5, 2, 3], vec![3, 4]),
            (vec![2, 3], vec![5, 3, 4]),
            (vec![1, 2, 3], vec![6, 3, 4]),
        ] {
            let mut g = Graph::new();
            let a = g.input("a", sa.clone(), DType::F64);
            let b = g.input("b", sb.clone(), DType::F64);
            let m = g.matmul(a, b).unwrap();
            g.set_outputs(vec![m]);
            for flags in [[true, false], [false, true], [true, true]] {
                check(&g, &flags, 7);
            }
        }
    }

    #[test]
    fn gather_and_scatter_add_with_every_batching_pattern() {
        for axis in 0..3 {
            let mut g = Graph::new();
            let x = g.input("x", [2, 3, 4], DType::F64);
            let idx = g.input("idx", [2, 2], DType::I64);
            let y = g.gather(x, idx, axis).unwrap();
            let u = g.input("u", g.shape(y).clone(), DType::F64);
            let s = g.scatter_add(x, idx, u, axis).unwrap();
            g.set_outputs(vec![y, s]);
            for flags in [
                [true, false, false],
                [false, true, false],
                [true, true, false],
                [false, false, true],
                [false, true, true],
                [true, true, true],
            ] {
                check(&g, &flags, 3);
            }
        }
    }

    #[test]
    fn solve_broadcasts_the_unbatched_side() {
        let mut g = Graph::new();
        let a = g.input("a", [3, 3], DType::F64);
        let b = g.input("b", [3, 2], DType::F64);
        let x = g.solve(a, b).unwrap();
        g.set_outputs(vec![x]);
        for flags in [[true, false], [false, true], [true, true]] {
            check(&g, &flags, 2);
        }
    }

    #[test]
    fn custom_ops_are_inlined_only_when_batched() {
        let mut f = Graph::new();
        let fx = f.input("x", [3], DType::F64);
        let fy = f.sin(fx).unwrap();
        let fs = f.sum(fy, &[0]).unwrap();
        f.set_outputs(vec![fs]);
        let op = std::sync::Arc::new(crate::CustomOp {
            name: "sinsum".into(),
            forward: f,
            vjp: None,
            jvp: None,
        });
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let w = g.input("w", [3], DType::F64);
        let c = g.custom(op.clone(), &[x]).unwrap();
        let d = g.custom(op, &[w]).unwrap();
        let y = g.binary(BinaryOp::Mul, c, d).unwrap();
        g.set_outputs(vec![y]);
        let b = check(&g, &[true, false], 4);
        let s = b.to_string();
        assert_eq!(s.matches("custom sinsum").count(), 1, "{s}"); // d, unbatched
        assert!(s.contains("sum axes=[1]"), "{s}");
    }

    #[test]
    fn outputs_without_batched_inputs_are_broadcast() {
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::F64);
        let k = g.scalar(3.0, DType::F64);
        g.set_outputs(vec![k, x]);
        let b = check(&g, &[false], 6);
        assert!(matches!(b.node(b.outputs()[0]).op, Op::Broadcast { .. }));
        let b0 = check(&g, &[true], 0);
        assert_eq!(b0.shape(b0.outputs()[1]), &Shape::from([0, 2]));
    }
}
