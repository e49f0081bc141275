//! The graph: an append-only arena of [`Node`]s in topological order.
//!
//! Invariants (checked by [`Graph::verify`]):
//! - every operand of node `%i` is an earlier node `%j`, `j < i`, so insertion
//!   order is a topological order;
//! - each node's shape and dtype equal what [`infer()`] gives for its op and
//!   operands (inputs and constants carry their declared type);
//! - `Op::Input { index }` nodes and `Graph::inputs()` agree one to one;
//! - outputs name existing nodes;
//! - every node's shape passes [`Shape::check_size`] for its dtype (a
//!   tensor of that type could exist), so element counts never overflow.
//!
//! Builder methods (`add`, `matmul`, `sum`, ...) are one per primitive op;
//! they infer the output type with NumPy broadcasting and return `Result`.
//!
//! Source lines (debug information, as cranelift's source locations): a
//! node may carry the line of the user's code that recorded it
//! ([`Graph::source`]). Tracing sets them; the autodiff rules give the
//! nodes they add the line of the node they differentiate, marked as its
//! derivative; [`Graph::inline`], `vmap` and the optimisation passes
//! carry them over. They take no part in a graph's meaning: two graphs
//! that differ only in lines are equal.

use std::fmt;
use std::panic::Location;

use crate::{infer, DType, Error, Literal, Op, Result, Shape, TensorType};

/// Index of a node in its [`Graph`]. Printed as `%7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as a `usize` index into `Graph::nodes()`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// One operation applied to earlier nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What the node computes.
    pub op: Op,
    /// Operands, all earlier in the graph.
    pub inputs: Vec<NodeId>,
    /// Output shape.
    pub shape: Shape,
    /// Output dtype.
    pub dtype: DType,
}

impl Node {
    /// The node's output type.
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.shape.clone(), self.dtype)
    }
}

/// A named graph input.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphInput {
    /// The name used in error messages (a parameter name for traced code).
    pub name: String,
    /// The `Op::Input` node.
    pub node: NodeId,
}

/// A computation graph: nodes in topological order, named inputs, ordered outputs.
///
/// ```
/// use rlx::{DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let y = g.sin(x).unwrap();
/// let s = g.sum(y, &[0]).unwrap();
/// g.set_outputs(vec![s]);
/// assert_eq!(g.node(s).shape.dims(), &[] as &[usize]);
/// println!("{g}");
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    nodes: Vec<Node>,
    inputs: Vec<GraphInput>,
    outputs: Vec<NodeId>,
    lines: Lines,
}

/// A source line, as `#[track_caller]` gives it.
pub type SourceLine = &'static Location<'static>;

/// Where a node comes from in the user's code (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// The line that recorded the node, or the node it is a derivative of.
    pub line: SourceLine,
    /// For a node an autodiff rule added: the op it is a derivative of.
    pub derivative_of: Option<&'static str>,
}

impl std::fmt::Display for Source {
    /// `traced at file:line:column`, or `the derivative of `ln`, traced at …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(op) = self.derivative_of {
            write!(f, "the derivative of `{op}`, ")?;
        }
        let l = self.line;
        write!(f, "traced at {}:{}:{}", l.file(), l.line(), l.column())
    }
}

/// The source of each node, by index (shorter than the node list when
/// the last nodes have none). Debug information: always equal, so that
/// graph equality is about meaning only.
#[derive(Clone, Debug, Default)]
struct Lines(Vec<Option<Source>>);

impl PartialEq for Lines {
    fn eq(&self, _: &Lines) -> bool {
        true
    }
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// All nodes, in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node `id`. Panics if `id` is not a node of this graph; use
    /// [`Graph::try_node`] for ids that come from outside.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The node `id`, or an error naming the id.
    pub fn try_node(&self, id: NodeId) -> Result<&Node> {
        self.nodes.get(id.index()).ok_or(Error::UnknownNode {
            node: id.0,
            len: self.nodes.len(),
        })
    }

    /// Where node `id` comes from in the user's code, when known (see
    /// the module docs).
    ///
    /// ```
    /// use rlx::{DType, Graph, NodeId};
    /// let mut g = Graph::new();
    /// let x = g.input("x", [3], DType::F64);
    /// let y = g.sin(x).unwrap();
    /// assert!(g.source(y).is_none());
    /// g.mark_lines(1, std::panic::Location::caller());
    /// assert_eq!(g.source(y).unwrap().line.file(), file!());
    /// assert!(g.source(x).is_none());
    /// ```
    pub fn source(&self, id: NodeId) -> Option<Source> {
        self.lines.0.get(id.index()).copied().flatten()
    }

    /// Records `line` as the line of the nodes from index `from` on that
    /// have none (the nodes one traced op added).
    pub fn mark_lines(&mut self, from: usize, line: SourceLine) {
        self.mark_source(
            from,
            Source {
                line,
                derivative_of: None,
            },
        );
    }

    /// Marks the nodes from index `from` on that have no source as
    /// derivatives of node `of` (the nodes a rule added for it), when
    /// `of` has a source.
    pub fn mark_derivatives(&mut self, from: usize, of: NodeId) {
        if let Some(s) = self.source(of) {
            let op = s.derivative_of.unwrap_or(self.node(of).op.name());
            self.mark_source(
                from,
                Source {
                    line: s.line,
                    derivative_of: Some(op),
                },
            );
        }
    }

    /// Records `source` for the nodes from index `from` on that have none.
    pub fn mark_source(&mut self, from: usize, source: Source) {
        let n = self.nodes.len();
        if self.lines.0.len() < n {
            self.lines.0.resize(n, None);
        }
        for l in self.lines.0.iter_mut().take(n).skip(from) {
            l.get_or_insert(source);
        }
    }

    /// Gives node `k` the source of node `origins[k]` of `from` where it
    /// has none: the sources of a graph a pass made from `from`, with each
    /// node's origin (as [`crate::passes::optimize_with_origins`] returns
    /// them).
    pub fn copy_lines(&mut self, from: &Graph, origins: &[NodeId]) {
        if from.lines.0.is_empty() {
            return;
        }
        for (k, o) in origins.iter().enumerate().take(self.nodes.len()) {
            if let Some(l) = from.source(*o) {
                if self.source(NodeId(k as u32)).is_none() {
                    self.set_source(k, l);
                }
            }
        }
    }

    fn set_source(&mut self, k: usize, source: Source) {
        if self.lines.0.len() <= k {
            self.lines.0.resize(k + 1, None);
        }
        self.lines.0[k] = Some(source);
    }

    /// The declared inputs, in order.
    pub fn inputs(&self) -> &[GraphInput] {
        &self.inputs
    }

    /// The input nodes, in order.
    pub fn input_ids(&self) -> Vec<NodeId> {
        self.inputs.iter().map(|i| i.node).collect()
    }

    /// The outputs, in order.
    pub fn outputs(&self) -> &[NodeId] {
        &self.outputs
    }

    /// Replaces the output list.
    pub fn set_outputs(&mut self, outputs: Vec<NodeId>) {
        self.outputs = outputs;
    }

    /// Appends an output.
    pub fn add_output(&mut self, id: NodeId) {
        self.outputs.push(id);
    }

    /// Type of node `id`.
    pub fn ty(&self, id: NodeId) -> TensorType {
        self.node(id).ty()
    }

    /// Shape of node `id`.
    pub fn shape(&self, id: NodeId) -> &Shape {
        &self.node(id).shape
    }

    /// Dtype of node `id`.
    pub fn dtype(&self, id: NodeId) -> DType {
        self.node(id).dtype
    }

    /// Declares a new input.
    ///
    /// The shape is not checked here; one too large for any tensor (see
    /// [`Shape::check_size`]) makes [`Graph::verify`], and so every
    /// transform, compilation or interpretation of the graph, return
    /// [`Error::TooLarge`].
    pub fn input(
        &mut self,
        name: impl Into<String>,
        shape: impl Into<Shape>,
        dtype: DType,
    ) -> NodeId {
        let index = self.inputs.len();
        let id = self.push_unchecked(Node {
            op: Op::Input { index },
            inputs: vec![],
            shape: shape.into(),
            dtype,
        });
        self.inputs.push(GraphInput {
            name: name.into(),
            node: id,
        });
        id
    }

    /// A constant of the given shape and dtype. A non-splat literal must have
    /// one value per element.
    pub fn constant(
        &mut self,
        value: Literal,
        shape: impl Into<Shape>,
        dtype: DType,
    ) -> Result<NodeId> {
        let shape = shape.into();
        shape.check_size(dtype, "constant", &[])?;
        let len = match &value {
            Literal::Splat(_) | Literal::SplatI64(_) => None,
            Literal::F64(d) => Some(d.len()),
            Literal::I64(d) => Some(d.len()),
        };
        if let Some(len) = len {
            if len != shape.numel() {
                return Err(Error::InvalidArgument {
                    op: "constant",
                    message: format!(
                        "{len} values given for shape {shape} ({} elements)",
                        shape.numel()
                    ),
                });
            }
        }
        Ok(self.push_unchecked(Node {
            op: Op::Constant(value),
            inputs: vec![],
            shape,
            dtype,
        }))
    }

    /// A constant of `shape` and `dtype` where every element equals
    /// `value` (the shape first, as every constructor that fills takes it).
    pub fn full(&mut self, shape: impl Into<Shape>, value: f64, dtype: DType) -> NodeId {
        let lit = if dtype == DType::I64 {
            Literal::SplatI64(value as i64)
        } else {
            Literal::Splat(value)
        };
        self.push_unchecked(Node {
            op: Op::Constant(lit),
            inputs: vec![],
            shape: shape.into(),
            dtype,
        })
    }

    /// A 0-d constant.
    pub fn scalar(&mut self, value: f64, dtype: DType) -> NodeId {
        self.full(Shape::scalar(), value, dtype)
    }

    /// Zeros shaped like node `like`.
    pub fn zeros_like(&mut self, like: NodeId) -> NodeId {
        let n = self.node(like);
        let (shape, dtype) = (n.shape.clone(), n.dtype);
        self.full(shape, 0.0, dtype)
    }

    /// Ones shaped like node `like`.
    pub fn ones_like(&mut self, like: NodeId) -> NodeId {
        let n = self.node(like);
        let (shape, dtype) = (n.shape.clone(), n.dtype);
        self.full(shape, 1.0, dtype)
    }

    /// Appends `op` applied to `inputs`, inferring its type.
    pub fn push(&mut self, op: Op, inputs: &[NodeId]) -> Result<NodeId> {
        let mut tys = Vec::with_capacity(inputs.len());
        for &i in inputs {
            tys.push(self.try_node(i)?.ty());
        }
        let refs: Vec<&TensorType> = tys.iter().collect();
        let ty =
            match &op {
                Op::Input { .. } | Op::Constant(_) => return Err(Error::InvalidArgument {
                    op: op.name(),
                    message:
                        "inputs and constants are created with `Graph::input` and `Graph::constant`"
                            .into(),
                }),
                _ => infer(&op, &refs)?,
            };
        Ok(self.push_unchecked(Node {
            op,
            inputs: inputs.to_vec(),
            shape: ty.shape,
            dtype: ty.dtype,
        }))
    }

    /// Appends a node whose type the caller vouches for (passes use this to
    /// copy nodes between graphs). [`Graph::verify`] re-checks it.
    pub fn push_unchecked(&mut self, node: Node) -> NodeId {
        debug_assert!(node.inputs.iter().all(|i| i.index() < self.nodes.len()));
        let id = NodeId(u32::try_from(self.nodes.len()).expect("graph exceeds u32::MAX nodes"));
        self.nodes.push(node);
        id
    }

    /// Appends a copy of node `i` of `other` (with its source line) reading
    /// `inputs` of `self` instead of its own operands.
    pub(crate) fn push_copy(&mut self, other: &Graph, i: usize, inputs: Vec<NodeId>) -> NodeId {
        let node = &other.nodes[i];
        let id = self.push_unchecked(Node {
            op: node.op.clone(),
            inputs,
            shape: node.shape.clone(),
            dtype: node.dtype,
        });
        if let Some(l) = other.source(NodeId(i as u32)) {
            self.set_source(id.index(), l);
        }
        id
    }

    /// Copies the nodes of `other` needed for its outputs into `self`,
    /// substituting `args[i]` for `other`'s input `i`, with their source
    /// lines. Returns the new ids of `other`'s outputs.
    pub fn inline(&mut self, other: &Graph, args: &[NodeId]) -> Result<Vec<NodeId>> {
        if args.len() != other.inputs.len() {
            return Err(Error::CountMismatch {
                what: "arguments of the inlined graph".into(),
                expected: other.inputs.len(),
                got: args.len(),
            });
        }
        for (inp, &a) in other.inputs.iter().zip(args) {
            let want = other.ty(inp.node);
            let got = self.try_node(a)?.ty();
            if want != got {
                return Err(Error::InputMismatch {
                    name: inp.name.clone(),
                    expected_shape: want.shape,
                    expected_dtype: want.dtype,
                    got_shape: got.shape,
                    got_dtype: got.dtype,
                });
            }
        }
        let mut map: Vec<Option<NodeId>> = vec![None; other.nodes.len()];
        for (inp, &a) in other.inputs.iter().zip(args) {
            map[inp.node.index()] = Some(a);
        }
        let live = other.live_nodes();
        for (i, node) in other.nodes.iter().enumerate() {
            if map[i].is_some() || !live[i] {
                continue;
            }
            let inputs = node
                .inputs
                .iter()
                .map(|j| map[j.index()].expect("topological order"))
                .collect();
            map[i] = Some(self.push_copy(other, i, inputs));
        }
        Ok(other
            .outputs
            .iter()
            .map(|o| map[o.index()].expect("outputs are live"))
            .collect())
    }

    /// For every node, whether an output depends on it. Inputs are always live.
    pub fn live_nodes(&self) -> Vec<bool> {
        let mut live = vec![false; self.nodes.len()];
        for o in &self.outputs {
            live[o.index()] = true;
        }
        for i in (0..self.nodes.len()).rev() {
            if live[i] {
                for j in &self.nodes[i].inputs {
                    live[j.index()] = true;
                }
            }
        }
        for inp in &self.inputs {
            live[inp.node.index()] = true;
        }
        live
    }

    /// Checks that every node's shape passes [`Shape::check_size`] (the
    /// cheap part of [`Graph::verify`]): transforms call it first, so that
    /// no size arithmetic on the graph can overflow. Only inputs and
    /// constants can fail it, since the builder checks every op's result.
    ///
    /// ```
    /// use rlx::{DType, Error, Graph};
    /// let mut g = Graph::new();
    /// g.input("x", [usize::MAX, 2], DType::F64);
    /// assert!(matches!(g.check_sizes(), Err(Error::TooLarge { op: "input", .. })));
    /// ```
    pub fn check_sizes(&self) -> Result<()> {
        for node in &self.nodes {
            node.shape.check_size(node.dtype, node.op.name(), &[])?;
        }
        Ok(())
    }

    /// Checks the invariants listed in the module docs.
    pub fn verify(&self) -> Result<()> {
        self.check_sizes()?;
        let bad = |i: usize, message: String| Error::InvalidGraph {
            node: i as u32,
            message,
            context: self.context(i),
        };
        let mut input_seen = vec![false; self.inputs.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for j in &node.inputs {
                if j.index() >= i {
                    return Err(bad(i, format!("operand {j} is not an earlier node")));
                }
            }
            match &node.op {
                Op::Input { index } => {
                    if *index >= self.inputs.len() || self.inputs[*index].node.index() != i {
                        return Err(bad(
                            i,
                            format!("input #{index} is not declared by this node"),
                        ));
                    }
                    input_seen[*index] = true;
                }
                Op::Constant(lit) => {
                    let n = match lit {
                        Literal::F64(d) => Some(d.len()),
                        Literal::I64(d) => Some(d.len()),
                        _ => None,
                    };
                    if n.is_some_and(|n| n != node.shape.numel()) {
                        return Err(bad(i, "constant has the wrong number of values".into()));
                    }
                }
                op => {
                    let tys: Vec<TensorType> = node.inputs.iter().map(|j| self.ty(*j)).collect();
                    let refs: Vec<&TensorType> = tys.iter().collect();
                    let ty = infer(op, &refs).map_err(|e| bad(i, e.to_string()))?;
                    if ty.shape != node.shape || ty.dtype != node.dtype {
                        return Err(bad(
                            i,
                            format!(
                                "recorded type {}{} differs from inferred {}{}",
                                node.dtype, node.shape, ty.dtype, ty.shape
                            ),
                        ));
                    }
                }
            }
        }
        if let Some(k) = input_seen.iter().position(|s| !s) {
            return Err(bad(
                self.inputs[k].node.index(),
                format!("input #{k} has no node"),
            ));
        }
        for o in &self.outputs {
            if o.index() >= self.nodes.len() {
                return Err(Error::UnknownNode {
                    node: o.0,
                    len: self.nodes.len(),
                });
            }
        }
        Ok(())
    }

    /// The IR lines around node `i`, for error messages.
    pub fn context(&self, i: usize) -> String {
        let lo = i.saturating_sub(3);
        let hi = (i + 2).min(self.nodes.len());
        let mut s = String::new();
        for k in lo..hi {
            let mark = if k == i { "> " } else { "  " };
            s.push_str(mark);
            s.push_str(&self.format_node(NodeId(k as u32)));
            if let (true, Some(l)) = (k == i, self.source(NodeId(k as u32))) {
                s.push_str(&format!("    // {l}"));
            }
            s.push('\n');
        }
        s
    }

    /// One IR line: `%4 = mul(%2, %3) : f64[3]`.
    pub fn format_node(&self, id: NodeId) -> String {
        let n = self.node(id);
        let args: Vec<String> = n.inputs.iter().map(|i| i.to_string()).collect();
        let op = match &n.op {
            Op::Input { index } => format!(
                "input#{index} \"{}\"",
                self.inputs.get(*index).map_or("?", |i| &i.name)
            ),
            op => op.to_string(),
        };
        format!("{id} = {op}({}) : {}{}", args.join(", "), n.dtype, n.shape)
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in 0..self.nodes.len() {
            writeln!(f, "{}", self.format_node(NodeId(i as u32)))?;
        }
        let outs: Vec<String> = self.outputs.iter().map(|o| o.to_string()).collect();
        write!(f, "return ({})", outs.join(", "))
    }
}

mod build;
#[cfg(test)]
mod tests;
