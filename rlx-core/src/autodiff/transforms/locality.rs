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
//!
//! A scan is analysed through its body: its carries start with their
//! operands' states (a carry the body makes `Row` becomes `Row`), its
//! per-step inputs must be `Free` (their axis 0 is time), and its result is
//! `Packed`: one state per piece of the packed result (a per-step output
//! that carries a tangent is stacked `[T, N, ..]`, rows on axis 1, so it is
//! `Mixed`). Reading a piece back (`slice` of exactly that piece, then
//! `reshape` to its type, as [`unpack`](crate::loops::unpack) does) gives
//! the piece's state; anything else done to a packed value is `Free` if
//! every piece it reads is, and `Mixed` otherwise.

use crate::{Error, Graph, LoopKind, LoopOp, NodeId, Op, Result};

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Free,
    Row,
    Mixed(NodeId),
    /// A loop's packed result: entry `.0` of the analysis' table of pieces.
    Packed(usize),
    /// Piece `.1` of the packed result `.0`, flattened (a `slice` of it).
    Piece(usize, usize),
}

/// The pieces of the packed loop results of one graph: their offsets, their
/// types' shapes and states.
#[derive(Default)]
struct Packs(Vec<Vec<(usize, crate::Shape, State)>>);

impl Packs {
    /// `s` as an ordinary state: a packed value or piece is `Free` when every
    /// piece it holds is, `Mixed` (at `at`) otherwise.
    fn plain(&self, s: State, at: NodeId) -> State {
        let free = match s {
            State::Packed(p) => self.0[p].iter().all(|x| x.2 == State::Free),
            // a 1-D piece needs no reshape to be read back
            State::Piece(p, j) if self.0[p][j].1.rank() == 1 => return self.0[p][j].2,
            State::Piece(p, j) => self.0[p][j].2 == State::Free,
            s => return s,
        };
        if free {
            State::Free
        } else {
            State::Mixed(at)
        }
    }
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
    let at = match states[out.index()] {
        State::Free | State::Row => return Ok(()),
        State::Mixed(at) => at,
        // a packed loop result returned as it is
        State::Packed(_) | State::Piece(..) => out,
    };
    Err(Error::InvalidArgument {
        op: "batch_jacobian",
        message: format!(
            "row i of output 0 must depend only on row i of the differentiated inputs, but {at} = `{}` mixes rows (axis 0 of size {n})\n{}  = help: use `jacobian` for functions that couple the rows",
            g.node(at).op,
            g.context(at.index())
        ),
    })
}

/// The state of every node of `g`, given the states of its inputs.
fn analyze(g: &Graph, inputs: &[State], n: usize) -> Vec<State> {
    let mut st: Vec<State> = Vec::with_capacity(g.len());
    let mut packs = Packs::default();
    for (i, node) in g.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        let raw: Vec<State> = node.inputs.iter().map(|j| st[j.index()]).collect();
        // Reading a piece back out of a packed loop result.
        match (&node.op, raw.first()) {
            (Op::Slice { start, len, .. }, Some(&State::Packed(p))) => {
                let j = packs.0[p]
                    .iter()
                    .position(|x| x.0 == *start && x.1.numel() == *len);
                st.push(match j {
                    Some(j) => State::Piece(p, j),
                    None => State::Mixed(id),
                });
                continue;
            }
            (Op::Reshape { shape }, Some(&State::Piece(p, j))) => {
                let (_, ref want, s) = packs.0[p][j];
                st.push(if s == State::Row && shape != want {
                    State::Mixed(id)
                } else {
                    packs.plain(s, id)
                });
                continue;
            }
            _ => {}
        }
        let ops: Vec<State> = raw.iter().map(|&s| packs.plain(s, id)).collect();
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
            _ if !node.dtype.is_inexact() => State::Free,
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
            Op::Loop(l) => match analyze_loop(l, &ops, n, id) {
                Some(pieces) => {
                    packs.0.push(pieces);
                    State::Packed(packs.0.len() - 1)
                }
                None => State::Mixed(id),
            },
            // A root couples all of its unknown's elements.
            Op::Root(_) | Op::SparseSolve(_) => State::Mixed(id),
            Op::Custom(c) => {
                let inner = analyze(&c.forward, &ops, n);
                match c.forward.outputs().first().map(|o| inner[o.index()]) {
                    Some(State::Free) => State::Free,
                    Some(State::Row) => State::Row,
                    Some(_) => State::Mixed(id),
                    None => State::Free,
                }
            }
        };
        st.push(s);
    }
    st
}

/// The pieces (offset, shape, state) of the packed result of the scan `l`
/// (node `id`) with operand states `ops` (none `Mixed`), or `None` if the
/// loop mixes rows.
fn analyze_loop(
    l: &LoopOp,
    ops: &[State],
    n: usize,
    id: NodeId,
) -> Option<Vec<(usize, crate::Shape, State)>> {
    if !matches!(l.kind, LoopKind::Scan) || l.fused() {
        return None;
    }
    let (c, k) = (l.carries, l.xs);
    if ops[c..c + k].iter().any(|&s| s != State::Free) {
        return None;
    }
    let mut at_body = ops.to_vec();
    let outs = l.body.outputs();
    let carry_ok = |s: &crate::Shape| s.rank() >= 1 && s.dim(0) == n;
    // A carry becomes `Row` when the body makes it so: at most `c` rounds.
    let inner = loop {
        let inner = analyze(&l.body, &at_body, n);
        let mut changed = false;
        for i in 0..c {
            match inner[outs[i].index()] {
                State::Free => {}
                State::Row if at_body[i] == State::Row => {}
                State::Row if carry_ok(l.body.shape(outs[i])) => {
                    at_body[i] = State::Row;
                    changed = true;
                }
                _ => return None,
            }
        }
        if !changed {
            break inner;
        }
    };
    let mut off = 0;
    let mut pieces = Vec::new();
    for (j, t) in l.segments().into_iter().enumerate() {
        let s = match inner[outs[j].index()] {
            State::Free => State::Free,
            State::Row if j < c => State::Row,
            _ => State::Mixed(id),
        };
        let size = t.shape.numel();
        pieces.push((off, t.shape, s));
        off += size;
    }
    Some(pieces)
}
