//! Graph-to-graph optimisation passes.
//!
//! Every pass is a function `fn(&Graph) -> Result<Graph>` that builds a new
//! graph and leaves its argument untouched. Shared guarantees:
//! - inputs keep their order, names, shapes and dtypes (they are declared
//!   first in the result, whatever their position in the argument);
//! - outputs keep their order, shapes and dtypes; an output may become an
//!   input node or a constant directly;
//! - the result holds only inputs and nodes some output needs, so every pass
//!   also removes dead code;
//! - the result passes [`Graph::verify`] (checked before returning).
//!
//! Passes, in the order [`optimize`] runs them:
//! - [`cse`]: common-subexpression elimination by hash-consing
//!   `(op, operands, shape, dtype)`; constants merge when bitwise equal,
//!   inputs never merge;
//! - [`fold_constants`] (module [`fold`]): evaluates element-wise and
//!   data-movement ops whose operands are all constants, only where the
//!   result is exactly what the runtime's kernels give;
//! - [`simplify()`] (module [`simplify`](mod@simplify)): algebraic identities
//!   exact in IEEE arithmetic (`x*1`, `x + (-0.0)`, `mul_zero(0, x)`, chains
//!   of reshapes/transposes/broadcasts, ...), with broadcast sinking (module
//!   `sink`: element-wise ops and slices of broadcasts run on the
//!   unbroadcast operands);
//! - [`dce`]: dead-code elimination.
//!
//! Every pass but [`reroll()`]'s folding of sums is exact: for every input,
//! NaN, ±inf, −0.0 and subnormals included, the result computes the bits
//! the argument computes with the runtime's kernels (NaN payloads aside).
//! An identity such as `x * 0 = 0`, `x + 0 = x`, `x - x = 0` or `x / x = 1`
//! that fails for some input is never applied; see each module's rules.
//!
//! [`assemble_late`] (concatenations, reshapes and transposes as late as
//! their users allow) is not part of [`optimize`]: `batch_jacobian` calls
//! it last, on the Jacobian it assembles from one piece per basis vector.
//!
//! [`strip_stop_gradient`] is not part of [`optimize`]: autodiff needs
//! `stop_gradient` nodes, execution does not.
//!
//! Passes renumber nodes. [`optimize_with_origins`] and
//! [`strip_stop_gradient_with_origins`] also return each result node's
//! *origin*, the node of the argument it was made for, so that a message
//! about an optimised graph can name the node the caller built.

mod assemble_late;
pub mod fold;
pub mod reroll;
pub mod simplify;
mod sink;

use rustc_hash::FxHashMap;

use crate::{BinaryOp, CmpOp, DType, Graph, Node, NodeId, Op, Result, Shape};

pub use assemble_late::assemble_late;
pub use fold::fold_constants;
pub use reroll::reroll;
pub use simplify::simplify;

/// Upper bound on the rounds of [`optimize`]; each round runs every pass once.
pub const MAX_ROUNDS: usize = 16;

/// Runs [`cse`], [`fold_constants`], [`simplify()`] and [`dce`] in rounds until
/// a round changes nothing (at most [`MAX_ROUNDS`] rounds).
///
/// ```
/// use rlx::{core::passes::optimize, DType, Graph, Op, UnaryOp};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let one = g.scalar(1.0, DType::F64);
/// let y = g.mul(x, one).unwrap();      // x * 1 -> x
/// let a = g.neg(y).unwrap();
/// let b = g.neg(a).unwrap();           // -(-x) -> x
/// let e1 = g.exp(b).unwrap();
/// let e2 = g.exp(x).unwrap();          // same as e1 after simplification
/// let s = g.add(e1, e2).unwrap();
/// g.set_outputs(vec![s]);
/// let o = optimize(&g).unwrap();
/// assert_eq!(o.len(), 3, "{o}");       // x, exp(x), add
/// assert_eq!(o.nodes()[1].op, Op::Unary(UnaryOp::Exp));
/// ```
pub fn optimize(g: &Graph) -> Result<Graph> {
    Ok(optimize_with_origins(g)?.0)
}

/// [`optimize`], also returning the *origin* of every node of the result:
/// `origins[k]` is the node of `g` that node `k` of the result was made
/// for. Nodes merged by CSE keep the first such node; nodes a rewrite adds
/// (a folded constant, the broadcast that replaces `x + 0`) get the node
/// they replace.
///
/// ```
/// use rlx::{core::passes::optimize_with_origins, DType, Graph, NodeId};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let _dead = g.exp(x).unwrap();
/// let y = g.sin(x).unwrap(); // %2 here, %1 once `_dead` is gone
/// g.set_outputs(vec![y]);
/// let (o, origins) = optimize_with_origins(&g).unwrap();
/// assert_eq!(o.outputs()[0], NodeId(1));
/// assert_eq!(origins, vec![x, y]);
/// ```
pub fn optimize_with_origins(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    let (cur, origins) = optimize_unverified(g)?;
    cur.verify()?;
    Ok((cur, origins))
}

/// The rounds of [`optimize_with_origins`], whose passes check each
/// rewrite's type but leave verifying the whole result to the caller
/// (once, not after every pass of every round: on a graph of tens of
/// thousands of nodes, verifying after each pass was a fifth of the time).
fn optimize_unverified(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    let (mut cur, mut origins) = dce_traced(g)?;
    for _ in 0..MAX_ROUNDS {
        // `map`: origins of `next`'s nodes among `cur`'s.
        let (mut next, mut map) = cse_traced(&cur)?;
        for pass in [fold::traced, simplify::traced, dce_traced] {
            let (g, o) = pass(&next)?;
            map = compose(&map, &o);
            next = g;
        }
        if next == cur {
            break;
        }
        origins = compose(&origins, &map);
        cur = next;
    }
    Ok((cur, origins))
}

/// The origins of a second pass in terms of the first one's argument:
/// `first[then[k]]`.
fn compose(first: &[NodeId], then: &[NodeId]) -> Vec<NodeId> {
    then.iter().map(|k| first[k.index()]).collect()
}

/// Dead-code elimination: keeps the inputs and the nodes some output needs.
///
/// ```
/// use rlx::{core::passes::dce, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [2], DType::F32);
/// let _unused = g.exp(x).unwrap();
/// let y = g.sin(x).unwrap();
/// g.set_outputs(vec![y]);
/// assert_eq!(dce(&g).unwrap().len(), 2);
/// ```
pub fn dce(g: &Graph) -> Result<Graph> {
    verified(dce_traced(g)?.0)
}

/// `g` once it passes [`Graph::verify`] (the one-pass functions' results;
/// [`rewrite`] itself does not verify).
pub(crate) fn verified(g: Graph) -> Result<Graph> {
    g.verify()?;
    Ok(g)
}

fn dce_traced(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    rewrite(g, |out, node, args| Ok(copy(out, node, args)))
}

/// Common-subexpression elimination: two nodes with the same op, the same
/// (already merged) operands, shape and dtype become one; `a + b` and
/// `b + a` count as the same (also `*`, and, or, `==`, `!=`). Constants merge
/// when their literals are bitwise equal (so `0.0` and `-0.0` stay apart and
/// NaNs with equal bits merge); inputs never merge; custom ops merge only
/// when they share one rule set (`CustomRef` compares by identity).
pub fn cse(g: &Graph) -> Result<Graph> {
    verified(cse_traced(g)?.0)
}

fn cse_traced(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    // FxHash: keys are hashed once per node of graphs of tens of thousands.
    let mut seen: FxHashMap<(Op, Vec<NodeId>, Shape, DType), NodeId> = FxHashMap::default();
    rewrite(g, |out, node, args| {
        let mut operands = args.to_vec();
        if commutes(&node.op) {
            operands.sort_unstable();
        }
        let key = (node.op.clone(), operands, node.shape.clone(), node.dtype);
        if let Some(&id) = seen.get(&key) {
            return Ok(id);
        }
        let id = copy(out, node, args);
        seen.insert(key, id);
        Ok(id)
    })
}

/// Whether swapping the two operands gives the same value (NaN payloads
/// aside): `a + b`, `a * b`, logical and/or, `==` and `!=` (min/max may
/// not, on NaN and signed zeros).
fn commutes(op: &Op) -> bool {
    matches!(
        op,
        Op::Binary(BinaryOp::Add | BinaryOp::Mul | BinaryOp::And | BinaryOp::Or)
            | Op::Compare(CmpOp::Eq | CmpOp::Ne)
    )
}

/// Replaces every `stop_gradient(x)` by `x`. Run it only on graphs that will
/// not be differentiated again (before execution): the derivative rules need
/// the marker.
pub fn strip_stop_gradient(g: &Graph) -> Result<Graph> {
    Ok(strip_stop_gradient_with_origins(g)?.0)
}

/// [`strip_stop_gradient`], also returning the origin of every node of the
/// result (as [`optimize_with_origins`] does).
///
/// ```
/// use rlx::{core::passes::strip_stop_gradient_with_origins, DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [2], DType::F32);
/// let s = g.stop_gradient(x).unwrap();
/// let y = g.exp(s).unwrap();
/// g.set_outputs(vec![y]);
/// let (h, origins) = strip_stop_gradient_with_origins(&g).unwrap();
/// assert_eq!(h.len(), 2);
/// assert_eq!(origins, vec![x, y]);
/// ```
pub fn strip_stop_gradient_with_origins(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    let (out, origins) = rewrite(g, |out, node, args| match node.op {
        Op::StopGradient => Ok(args[0]),
        _ => Ok(copy(out, node, args)),
    })?;
    Ok((verified(out)?, origins))
}

/// Copies `node` into `out` with operands `args` (already mapped).
pub(crate) fn copy(out: &mut Graph, node: &Node, args: &[NodeId]) -> NodeId {
    out.push_unchecked(Node {
        op: node.op.clone(),
        inputs: args.to_vec(),
        shape: node.shape.clone(),
        dtype: node.dtype,
    })
}

/// A new graph declaring `g`'s inputs, the map from `g`'s nodes to it
/// (set for the inputs) and the origins of its nodes so far.
#[allow(clippy::type_complexity)]
fn with_inputs(g: &Graph) -> Result<(Graph, Vec<Option<NodeId>>, Vec<NodeId>)> {
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    let mut origins: Vec<NodeId> = Vec::with_capacity(g.len());
    for inp in g.inputs() {
        let ty = g.try_node(inp.node)?.ty();
        map[inp.node.index()] = Some(out.input(inp.name.clone(), ty.shape, ty.dtype));
        origins.resize(out.len(), inp.node);
    }
    Ok((out, map, origins))
}

/// The driver every pass uses: declares `g`'s inputs in a new graph, then
/// visits the live non-input nodes of `g` in order, calling `f(out, node,
/// mapped_operands)` which returns the node of `out` that replaces `node`
/// (a copy, an earlier node or a new computation of the same type). Each
/// replacement's type is checked against the original so a wrong rewrite
/// is an error naming the node, never a silent change of meaning; the
/// public passes also verify the whole result ([`verified`]).
///
/// Also returns the origin of each node of the result: the node of `g`
/// whose visit added it.
pub(crate) fn rewrite(
    g: &Graph,
    mut f: impl FnMut(&mut Graph, &Node, &[NodeId]) -> Result<NodeId>,
) -> Result<(Graph, Vec<NodeId>)> {
    let (mut out, mut map, mut origins) = with_inputs(g)?;
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
                    return Err(crate::Error::InvalidGraph {
                        node: i as u32,
                        message: format!("operand {j} is not an earlier node"),
                        context: g.context(i),
                    })
                }
            }
        }
        let id = f(&mut out, node, &args)?;
        origins.resize(out.len(), NodeId(i as u32));
        let got = out.node(id);
        if got.shape != node.shape || got.dtype != node.dtype {
            return Err(crate::Error::InvalidGraph {
                node: i as u32,
                message: format!(
                    "a rewrite changed the type from {}{} to {}{} (a bug in rlx's passes)",
                    node.dtype, node.shape, got.dtype, got.shape
                ),
                context: g.context(i),
            });
        }
        map[i] = Some(id);
    }
    let mut outs = Vec::with_capacity(g.outputs().len());
    for o in g.outputs() {
        g.try_node(*o)?;
        outs.push(map[o.index()].expect("outputs are live"));
    }
    out.set_outputs(outs);
    // Each node keeps the source line of the node it was made for.
    out.copy_lines(g, &origins);
    if out.live_nodes().iter().any(|l| !l) {
        // A rewrite orphaned some copied nodes (folded operands, the inner
        // node of `neg(neg(x))`): one plain copy drops them.
        let (out, o) = dce_traced(&out)?;
        return Ok((out, compose(&origins, &o)));
    }
    Ok((out, origins))
}

#[cfg(test)]
mod tests;
