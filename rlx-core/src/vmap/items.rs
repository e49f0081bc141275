//! The inverse of [`vmap`](super::vmap) for graphs written over a batch:
//! [`unbatch`] finds whether every output row of a graph is computed from
//! the same row of its batched inputs alone, and if so returns the graph of
//! one item (the batch axis of size 1), which a runtime can compile once
//! and run item by item.
//!
//! A node is *batched* (its axis 0 is the batch axis of size `n`, and row
//! `i` of it depends only on row `i` of the batched inputs) or *shared*
//! (it depends on no batched input; it is computed once, as it is). The
//! inputs whose leading axis has size `n` are batched, the others shared.
//! The item graph has the same nodes: a batched node's shape has its axis
//! 0 set to 1, a shared node is copied.
//!
//! A node with a batched operand is batched if its op keeps the rows apart:
//!
//! | op | condition |
//! | --- | --- |
//! | element-wise (unary, binary, compare, select, cast, stop_gradient) | batched operands have the result's rank; shared operands have a lower rank or a leading 1 |
//! | broadcast | the operand is batched (same rank) or shared with a lower rank or a leading 1 (rows all equal: a shared value spread over the batch) |
//! | reduce, softmax, log_softmax, slice, concat, gather, scatter_add | axis 0 untouched; concat and scatter_add take no shared operand, gather and scatter_add no batched index |
//! | transpose | axis 0 stays first |
//! | reshape | axis 0 of size `n` before and after |
//! | matmul | as element-wise for the batch dimensions; a batched rank-2 left operand only with a shared right one (rows of a product) |
//! | solve | both operands batched, rank >= 3 |
//! | constant | a splat with a leading `n` is batched (its rows are equal) |
//! | loop, custom | never (the item graph would have to be rebuilt inside) |
//!
//! Any other case, or an output that is not batched, gives `None`: the
//! graph mixes rows (or this analysis cannot tell that it does not), and
//! its batched form is used as it is.

use crate::{Graph, Literal, Node, NodeId, Op, Shape};

/// The graph of one item of a graph batched over axis 0; see the module
/// docs.
#[derive(Clone, Debug)]
pub struct Item {
    /// The graph of one item: batched inputs and every output have a
    /// leading axis of size 1.
    pub graph: Graph,
    /// Per input of the batched graph (the same inputs, in order): whether
    /// it is batched (each item reads its own row) or shared (every item
    /// reads all of it).
    pub batched: Vec<bool>,
    /// The batch size `n`.
    pub size: usize,
}

/// The item graph of `g` over a batch of `n` rows on axis 0 (see the module
/// docs), or `None` if its outputs are not all computed row by row.
///
/// ```
/// use rlx::{core::vmap::unbatch, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [1000, 3], DType::F64);
/// let w = g.input("w", [3], DType::F64);
/// let y = g.mul(x, w).unwrap();
/// let s = g.sum(y, &[1]).unwrap(); // one number per row
/// g.set_outputs(vec![s]);
/// let item = unbatch(&g, 1000).unwrap();
/// assert_eq!(item.batched, [true, false]);
/// assert_eq!(item.graph.shape(item.graph.outputs()[0]).dims(), &[1]);
///
/// let total = g.sum(s, &[0]).unwrap(); // mixes the rows
/// g.set_outputs(vec![total]);
/// assert!(unbatch(&g, 1000).is_none());
/// ```
pub fn unbatch(g: &Graph, n: usize) -> Option<Item> {
    let mut out = Graph::new();
    // New id and whether the node is batched.
    let mut map: Vec<Option<(NodeId, bool)>> = vec![None; g.len()];
    let mut batched = Vec::with_capacity(g.inputs().len());
    for inp in g.inputs() {
        let node = g.node(inp.node);
        let b = leads_with(&node.shape, n);
        let shape = if b {
            item(&node.shape)
        } else {
            node.shape.clone()
        };
        map[inp.node.index()] = Some((out.input(inp.name.clone(), shape, node.dtype), b));
        batched.push(b);
    }
    let live = g.live_nodes();
    for (i, node) in g.nodes().iter().enumerate() {
        if !live[i] || map[i].is_some() {
            continue;
        }
        let args: Vec<(NodeId, bool)> = node
            .inputs
            .iter()
            .map(|j| map.get(j.index()).copied().flatten())
            .collect::<Option<_>>()?;
        let before = out.len();
        let r = match &node.op {
            Op::Constant(Literal::Splat(v)) if leads_with(&node.shape, n) => {
                (out.full(item(&node.shape), *v, node.dtype), true)
            }
            // A shared value spread over the batch: equal rows.
            Op::Broadcast { shape }
                if leads_with(shape, n)
                    && !args[0].1
                    && spread(g.shape(node.inputs[0]), shape.rank()) =>
            {
                (out.broadcast(args[0].0, item(shape)).ok()?, true)
            }
            _ if args.iter().any(|a| a.1) => (batch_op(&mut out, g, node, &args, n)?, true),
            _ => {
                let ids = args.iter().map(|a| a.0).collect();
                let copy = Node {
                    op: node.op.clone(),
                    inputs: ids,
                    shape: node.shape.clone(),
                    dtype: node.dtype,
                };
                (out.push_unchecked(copy), false)
            }
        };
        if let Some(s) = g.source(NodeId(i as u32)) {
            out.mark_source(before, s);
        }
        map[i] = Some(r);
    }
    let outs = g
        .outputs()
        .iter()
        .map(|o| match map[o.index()] {
            Some((id, true)) => Some(id),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    out.set_outputs(outs);
    out.verify().ok()?;
    Some(Item {
        graph: out,
        batched,
        size: n,
    })
}

/// Whether `s` has a leading axis of size `n`.
fn leads_with(s: &Shape, n: usize) -> bool {
    s.rank() >= 1 && s.dim(0) == n
}

/// Whether a value of shape `s`, broadcast to a shape of rank `rank`,
/// gives equal rows on axis 0 (it has a lower rank or a leading 1).
fn spread(s: &Shape, rank: usize) -> bool {
    s.rank() < rank || s.dim(0) == 1
}

/// `s` with its axis 0 set to 1.
fn item(s: &Shape) -> Shape {
    let mut d = s.dims().to_vec();
    d[0] = 1;
    Shape::new(d)
}

/// The item form of `node` of `g`, some operand of which is batched (`args`:
/// the operands' new ids and whether each is batched), pushed onto `out`;
/// `None` if the op mixes rows.
fn batch_op(
    out: &mut Graph,
    g: &Graph,
    node: &Node,
    args: &[(NodeId, bool)],
    n: usize,
) -> Option<NodeId> {
    let rank = node.shape.rank();
    let in_shape = |k: usize| g.shape(node.inputs[k]);
    // A batched operand lines its axis 0 up with the result's; a shared
    // one must not hold a row per item.
    let aligned = |k: usize| {
        let s = in_shape(k);
        if args[k].1 {
            s.rank() == rank
        } else {
            spread(s, rank) || n == 1
        }
    };
    let all_aligned = (0..args.len()).all(aligned);
    let all_batched = args.iter().all(|a| a.1);
    let ok = match &node.op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Cast(_)
        | Op::StopGradient
        | Op::Broadcast { .. } => all_aligned,
        Op::Reduce { axes, .. } => !axes.contains(&0),
        Op::Softmax { axis } | Op::LogSoftmax { axis } | Op::Slice { axis, .. } => *axis != 0,
        Op::Concat { axis } => *axis != 0 && all_batched,
        Op::Gather { axis } => *axis != 0 && !args[1].1,
        Op::ScatterAdd { axis } => *axis != 0 && args[0].1 && !args[1].1 && args[2].1,
        Op::Transpose { perm } => perm.first() == Some(&0),
        Op::Reshape { .. } => leads_with(in_shape(0), n),
        // Rows of a product by a shared matrix, or products batched over axis 0.
        Op::MatMul if rank == 2 => args[0].1 && !args[1].1,
        Op::MatMul => all_aligned,
        Op::Solve => rank >= 3 && all_batched && all_aligned,
        Op::Input { .. }
        | Op::Constant(_)
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => false,
    };
    if !ok || !leads_with(&node.shape, n) {
        return None;
    }
    let want = item(&node.shape);
    let op = match &node.op {
        Op::Reshape { .. } => Op::Reshape {
            shape: want.clone(),
        },
        Op::Broadcast { .. } => Op::Broadcast {
            shape: want.clone(),
        },
        op => op.clone(),
    };
    let ids: Vec<NodeId> = args.iter().map(|a| a.0).collect();
    let id = out.push(op, &ids).ok()?;
    (out.shape(id) == &want && out.dtype(id) == node.dtype).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CmpOp, DType};

    const N: usize = 6;

    /// Builds an output from the input `x: [N, 3]`.
    type Body = dyn Fn(&mut Graph, NodeId) -> NodeId;

    /// `g` with input `x: [N, 3]` and what `body` builds from it as output.
    fn over_rows(body: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", [N, 3], DType::F64);
        let y = body(&mut g, x);
        g.set_outputs(vec![y]);
        g
    }

    fn dims(g: &Graph, id: NodeId) -> Vec<usize> {
        g.shape(id).dims().to_vec()
    }

    #[test]
    fn row_local_ops_give_the_graph_of_one_item() {
        let mut g = Graph::new();
        let x = g.input("x", [N, 2, 3], DType::F64);
        let w = g.input("w", [3, 2], DType::F64); // shared
        let k = g.input("k", (), DType::F64); // shared
        let half = g.full([N, 2, 3], 0.5, DType::F64); // splat: equal rows
        let s = g.sin(x).unwrap();
        let a = g.mul(s, half).unwrap();
        let a = g.mul(a, k).unwrap();
        let t = g.transpose(a, &[0, 2, 1]).unwrap(); // [N, 3, 2]
        let r = g.reshape(t, [N, 6]).unwrap();
        let c = g.slice_range(r, 1..4, 1).unwrap();
        let c = g.concat(&[c, c], 1).unwrap(); // [N, 6]
        let c = g.reshape(c, [N, 2, 3]).unwrap();
        let p = g.matmul(c, w).unwrap(); // [N, 2, 2]
        let zero = g.scalar(0.0, DType::F64);
        let pos = g.compare(CmpOp::Gt, p, zero).unwrap();
        let ones = g.full([2, 2], 1.0, DType::F64);
        let spread = g.broadcast(ones, [N, 2, 2]).unwrap();
        let sel = g.select(pos, p, spread).unwrap();
        let y = g.sum(sel, &[2]).unwrap(); // [N, 2]
        g.set_outputs(vec![y, sel]);
        let item = unbatch(&g, N).unwrap();
        assert_eq!(item.batched, [true, false, false]);
        assert_eq!(item.size, N);
        let h = &item.graph;
        assert_eq!(dims(h, h.input_ids()[0]), [1, 2, 3]);
        assert_eq!(dims(h, h.input_ids()[1]), [3, 2]);
        assert_eq!(dims(h, h.outputs()[0]), [1, 2]);
        assert_eq!(dims(h, h.outputs()[1]), [1, 2, 2]);
        // Every node of `g` has its item form: the same ops, one by one.
        assert_eq!(h.len(), g.len());
    }

    #[test]
    fn rows_of_a_product_with_a_shared_matrix_are_items() {
        let mut g = Graph::new();
        let x = g.input("x", [N, 3], DType::F64);
        let w = g.input("w", [3, 4], DType::F64);
        let y = g.matmul(x, w).unwrap();
        g.set_outputs(vec![y]);
        let item = unbatch(&g, N).unwrap();
        assert_eq!(dims(&item.graph, item.graph.outputs()[0]), [1, 4]);
        // The transposed product mixes rows.
        let mut g = Graph::new();
        let x = g.input("x", [N, 3], DType::F64);
        let w = g.input("w", [4, N], DType::F64);
        let y = g.matmul(w, x).unwrap();
        g.set_outputs(vec![y]);
        assert!(unbatch(&g, N).is_none());
    }

    #[test]
    fn ops_that_mix_rows_have_no_item_graph() {
        let mixes: [&Body; 6] = [
            &|g, x| {
                let s = g.sum(x, &[0]).unwrap();
                g.broadcast(s, [N, 3]).unwrap()
            },
            &|g, x| {
                let s = g.slice_range(x, 1..N, 0).unwrap();
                g.concat(&[s, s], 0).unwrap()
            },
            &|g, x| {
                let t = g.transpose(x, &[1, 0]).unwrap();
                g.reshape(t, [N, 3]).unwrap()
            },
            &|g, x| {
                let r = g.reshape(x, [3, N]).unwrap();
                g.reshape(r, [N, 3]).unwrap()
            },
            // A shared value holding one row per item.
            &|g, x| {
                let rows: Vec<f64> = (0..3 * N).map(|v| v as f64).collect();
                let c = g
                    .constant(Literal::F64(rows.into()), [N, 3], DType::F64)
                    .unwrap();
                g.add(x, c).unwrap()
            },
            &|g, x| {
                let s = g.slice_range(x, 0..1, 1).unwrap();
                let rows: Vec<f64> = (0..N).map(|v| v as f64).collect();
                let c = g
                    .constant(Literal::F64(rows.into()), [N, 1], DType::F64)
                    .unwrap();
                g.concat(&[s, c], 1).unwrap()
            },
        ];
        for (k, body) in mixes.iter().enumerate() {
            assert!(unbatch(&over_rows(body), N).is_none(), "case {k}");
        }
    }

    #[test]
    fn an_output_without_the_batch_axis_has_no_item_graph() {
        let mut g = Graph::new();
        let x = g.input("x", [N, 3], DType::F64);
        let w = g.input("w", [3], DType::F64);
        let y = g.sin(x).unwrap();
        let v = g.exp(w).unwrap();
        g.set_outputs(vec![y, v]);
        assert!(unbatch(&g, N).is_none());
        g.set_outputs(vec![y]);
        assert!(unbatch(&g, N).is_some());
    }
}
