//! Axis-0 locality analysis for `batch_jacobian`: does row `i` of the output
//! depend (through values that carry a tangent) only on row `i` of the
//! differentiated inputs?
//!
//! Each node gets a state: `Free` (no tangent flows through it: it does not
//! depend on a differentiated input, or its derivative is zero, like
//! comparisons and `stop_gradient`), `Row` (it carries a tangent and its axis
//! 0 is the batch axis, row-local), or `Mixed` (a tangent crosses rows; the
//! node where that first happened is kept for the error message). A
//! reduction, matmul contraction, reshape, transpose, concat, slice, gather,
//! scatter or normalisation touching axis 0 of a `Row` value makes it `Mixed`.

use crate::{Error, Graph, NodeId, Op, Result};

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Free,
    Row,
    Mixed(NodeId),
}

/// Errors if output `out` of `g` mixes rows of the `wrt` inputs (batch size `n`).
pub(super) fn check(g: &Graph, wrt: &[NodeId], out: NodeId, n: usize) -> Result<()> {
    let mut init = vec![State::Free; g.inputs().len()];
    for (k, inp) in g.inputs().iter().enumerate() {
        if wrt.contains(&inp.node) {
            init[k] = State::Row;
        }
    }
    let states = analyze(g, &init, n);
    match states[out.index()] {
        State::Free | State::Row => Ok(()),
        State::Mixed(at) => Err(Error::InvalidArgument {
            op: "batch_jacobian",
            message: format!(
                "row i of output 0 must depend only on row i of the differentiated inputs, but {at} = `{}` mixes rows (axis 0 of size {n})\n{}  = help: use `jacobian` for functions that couple the rows",
                g.node(at).op,
                g.context(at.index())
            ),
        }),
    }
}

/// The state of every node of `g`, given the states of its inputs.
fn analyze(g: &Graph, inputs: &[State], n: usize) -> Vec<State> {
    let mut st: Vec<State> = Vec::with_capacity(g.len());
    for (i, node) in g.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        let ops: Vec<State> = node.inputs.iter().map(|j| st[j.index()]).collect();
        // A mix upstream stays a mix; keep the node where it first happened.
        let upstream = ops
            .iter()
            .find_map(|s| match s {
                State::Mixed(at) => Some(*at),
                _ => None,
            })
            .unwrap_or(id);
        let mixed = ops.iter().any(|s| matches!(s, State::Mixed(_)));
        let any_row = ops.contains(&State::Row);
        let row_rank = |k: usize| g.shape(node.inputs[k]).rank();
        let is_row = |k: usize| ops[k] == State::Row;
        let out_rank = node.shape.rank();
        let ok = |cond: bool| if cond { State::Row } else { State::Mixed(id) };
        let s = match &node.op {
            Op::Input { index } => inputs.get(*index).copied().unwrap_or(State::Free),
            Op::Constant(_) => State::Free,
            _ if !node.dtype.is_float() => State::Free,
            Op::StopGradient => State::Free,
            _ if mixed => State::Mixed(upstream),
            _ if !any_row => State::Free,
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast(_) => {
                ok((0..ops.len()).all(|k| !is_row(k) || row_rank(k) == out_rank))
            }
            Op::Broadcast { .. } => ok(row_rank(0) == out_rank),
            Op::Reduce { axes, .. } => ok(!axes.contains(&0)),
            Op::MatMul => {
                let (ra, rb) = (row_rank(0), row_rank(1));
                let a_ok = !is_row(0)
                    || (ra >= 3 && ra == out_rank)
                    || (ra == 2 && out_rank == 2 && !is_row(1));
                let b_ok = !is_row(1) || (rb >= 3 && rb == out_rank);
                ok(a_ok && b_ok)
            }
            Op::Transpose { perm } => ok(perm.first() == Some(&0)),
            Op::Reshape { shape } => {
                let xs = g.shape(node.inputs[0]);
                ok(shape.rank() >= 1 && shape.dim(0) == n && xs.rank() >= 1 && xs.dim(0) == n)
            }
            Op::Concat { axis } | Op::Slice { axis, .. } => ok(*axis != 0),
            Op::Gather { axis } | Op::ScatterAdd { axis } => ok(*axis != 0),
            Op::Softmax { axis } | Op::LogSoftmax { axis } => ok(*axis != 0),
            Op::Solve => ok(out_rank >= 3),
            // The packed result of a loop mixes every item's values.
            Op::Loop(_) => State::Mixed(id),
            Op::Custom(c) => {
                let inner = analyze(&c.forward, &ops, n);
                match c.forward.outputs().first().map(|o| inner[o.index()]) {
                    Some(State::Mixed(_)) => State::Mixed(id),
                    Some(s) => s,
                    None => State::Free,
                }
            }
        };
        st.push(s);
    }
    st
}
