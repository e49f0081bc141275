//! The graph: an append-only arena of [`Node`]s in topological order.
//!
//! Invariants (checked by [`Graph::verify`]):
//! - every operand of node `%i` is an earlier node `%j`, `j < i`, so insertion
//!   order is a topological order;
//! - each node's shape and dtype equal what [`infer()`] gives for its op and
//!   operands (inputs and constants carry their declared type);
//! - `Op::Input { index }` nodes and `Graph::inputs()` agree one to one;
//! - outputs name existing nodes.
//!
//! Builder methods (`add`, `matmul`, `sum`, ...) are one per primitive op;
//! they infer the output type with NumPy broadcasting and return `Result`.

use std::fmt;

use crate::{
    infer, BinaryOp, CmpOp, DType, Error, Literal, Op, ReduceOp, Result, Shape, TensorType, UnaryOp,
};

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
/// use rlx_core::{DType, Graph};
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

    /// A constant where every element equals `value`.
    pub fn full(&mut self, value: f64, shape: impl Into<Shape>, dtype: DType) -> NodeId {
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
        self.full(value, Shape::scalar(), dtype)
    }

    /// Zeros shaped like node `like`.
    pub fn zeros_like(&mut self, like: NodeId) -> NodeId {
        let n = self.node(like);
        let (shape, dtype) = (n.shape.clone(), n.dtype);
        self.full(0.0, shape, dtype)
    }

    /// Ones shaped like node `like`.
    pub fn ones_like(&mut self, like: NodeId) -> NodeId {
        let n = self.node(like);
        let (shape, dtype) = (n.shape.clone(), n.dtype);
        self.full(1.0, shape, dtype)
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

    /// Copies the nodes of `other` needed for its outputs into `self`,
    /// substituting `args[i]` for `other`'s input `i`. Returns the new ids of
    /// `other`'s outputs.
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
            map[i] = Some(self.push_unchecked(Node {
                op: node.op.clone(),
                inputs,
                shape: node.shape.clone(),
                dtype: node.dtype,
            }));
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

    /// Checks the invariants listed in the module docs.
    pub fn verify(&self) -> Result<()> {
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

    // ---- builder methods: one per primitive op ----

    /// Element-wise unary op.
    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> Result<NodeId> {
        self.push(Op::Unary(op), &[x])
    }

    /// Element-wise binary op with broadcasting.
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Op::Binary(op), &[a, b])
    }

    /// Element-wise comparison with broadcasting, giving `Bool`.
    pub fn compare(&mut self, op: CmpOp, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Op::Compare(op), &[a, b])
    }

    /// `cond ? a : b` element-wise, with broadcasting.
    pub fn select(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Op::Select, &[cond, a, b])
    }

    /// Converts to `dtype` (a no-op returns `x`).
    pub fn cast(&mut self, x: NodeId, dtype: DType) -> Result<NodeId> {
        if self.try_node(x)?.dtype == dtype {
            return Ok(x);
        }
        self.push(Op::Cast(dtype), &[x])
    }

    /// Reduction over `axes` (any order; duplicates are an error). The axes are removed.
    pub fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: &[usize]) -> Result<NodeId> {
        let mut axes = axes.to_vec();
        axes.sort_unstable();
        self.push(Op::Reduce { op, axes }, &[x])
    }

    /// Sum over `axes`.
    pub fn sum(&mut self, x: NodeId, axes: &[usize]) -> Result<NodeId> {
        self.reduce(ReduceOp::Sum, x, axes)
    }

    /// Sum over every axis, giving a 0-d value.
    pub fn sum_all(&mut self, x: NodeId) -> Result<NodeId> {
        let axes: Vec<usize> = (0..self.try_node(x)?.shape.rank()).collect();
        self.reduce(ReduceOp::Sum, x, &axes)
    }

    /// Batched, broadcasting matrix product.
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Op::MatMul, &[a, b])
    }

    /// Axis permutation (the identity permutation returns `x`).
    pub fn transpose(&mut self, x: NodeId, perm: &[usize]) -> Result<NodeId> {
        if perm.iter().enumerate().all(|(i, &p)| i == p)
            && perm.len() == self.try_node(x)?.shape.rank()
        {
            return Ok(x);
        }
        self.push(
            Op::Transpose {
                perm: perm.to_vec(),
            },
            &[x],
        )
    }

    /// Swaps the last two axes.
    pub fn transpose_last2(&mut self, x: NodeId) -> Result<NodeId> {
        let r = self.try_node(x)?.shape.rank();
        if r < 2 {
            return Err(Error::InvalidArgument {
                op: "transpose",
                message: format!("cannot swap the last two axes of a rank-{r} value"),
            });
        }
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.transpose(x, &perm)
    }

    /// Same elements in a new shape (the same shape returns `x`).
    pub fn reshape(&mut self, x: NodeId, shape: impl Into<Shape>) -> Result<NodeId> {
        let shape = shape.into();
        if self.try_node(x)?.shape == shape {
            return Ok(x);
        }
        self.push(Op::Reshape { shape }, &[x])
    }

    /// Broadcasts to `shape` (the same shape returns `x`).
    pub fn broadcast(&mut self, x: NodeId, shape: impl Into<Shape>) -> Result<NodeId> {
        let shape = shape.into();
        if self.try_node(x)?.shape == shape {
            return Ok(x);
        }
        self.push(Op::Broadcast { shape }, &[x])
    }

    /// Reduces `x` by summation to `shape`, undoing a NumPy broadcast from
    /// `shape` (the transpose of [`Graph::broadcast`]).
    pub fn sum_to(&mut self, x: NodeId, shape: &Shape) -> Result<NodeId> {
        let xs = self.try_node(x)?.shape.clone();
        if &xs == shape {
            return Ok(x);
        }
        if !shape.broadcasts_to(&xs) {
            return Err(Error::ShapeMismatch {
                op: "sum_to",
                lhs: xs,
                rhs: shape.clone(),
                expected: "a target shape that broadcasts to the operand's shape".into(),
            });
        }
        let lead = xs.rank() - shape.rank();
        let mut axes: Vec<usize> = (0..lead).collect();
        for (k, &d) in shape.dims().iter().enumerate() {
            if d == 1 && xs.dim(lead + k) != 1 {
                axes.push(lead + k);
            }
        }
        let s = if axes.is_empty() {
            x
        } else {
            self.sum(x, &axes)?
        };
        self.reshape(s, shape.clone())
    }

    /// Concatenation along `axis`.
    pub fn concat(&mut self, xs: &[NodeId], axis: usize) -> Result<NodeId> {
        if xs.len() == 1 {
            self.try_node(xs[0])?;
            return Ok(xs[0]);
        }
        self.push(Op::Concat { axis }, xs)
    }

    /// Elements `start..start + len` along `axis` (the full range returns `x`).
    pub fn slice(&mut self, x: NodeId, axis: usize, start: usize, len: usize) -> Result<NodeId> {
        let s = &self.try_node(x)?.shape;
        if axis < s.rank() && start == 0 && len == s.dim(axis) {
            return Ok(x);
        }
        self.push(Op::Slice { axis, start, len }, &[x])
    }

    /// `take` along `axis` with `I64` indices.
    pub fn gather(&mut self, x: NodeId, idx: NodeId, axis: usize) -> Result<NodeId> {
        self.push(Op::Gather { axis }, &[x, idx])
    }

    /// Adds `updates` into a copy of `operand` at `idx` along `axis`.
    pub fn scatter_add(
        &mut self,
        operand: NodeId,
        idx: NodeId,
        updates: NodeId,
        axis: usize,
    ) -> Result<NodeId> {
        self.push(Op::ScatterAdd { axis }, &[operand, idx, updates])
    }

    /// Softmax along `axis`.
    pub fn softmax(&mut self, x: NodeId, axis: usize) -> Result<NodeId> {
        self.push(Op::Softmax { axis }, &[x])
    }

    /// Log-softmax along `axis`.
    pub fn log_softmax(&mut self, x: NodeId, axis: usize) -> Result<NodeId> {
        self.push(Op::LogSoftmax { axis }, &[x])
    }

    /// Solves `a x = b` (LU with partial pivoting).
    pub fn solve(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Op::Solve, &[a, b])
    }

    /// Identity with zero derivative.
    pub fn stop_gradient(&mut self, x: NodeId) -> Result<NodeId> {
        self.push(Op::StopGradient, &[x])
    }

    /// Applies a sub-function with custom derivative rules.
    pub fn custom(
        &mut self,
        op: std::sync::Arc<crate::CustomOp>,
        args: &[NodeId],
    ) -> Result<NodeId> {
        self.push(Op::Custom(crate::CustomRef(op)), args)
    }

    /// Replaces every `Op::Custom` node by the nodes of its forward graph
    /// (what execution and batching need; derivative rules are gone after this).
    pub fn inline_custom(&self) -> Result<Graph> {
        Ok(self.inline_custom_with_origins()?.0)
    }

    /// [`inline_custom`](Graph::inline_custom), also returning the origin of
    /// every node of the result: `origins[k]` is the node of `self` that
    /// node `k` was made for (the `Op::Custom` node, for the nodes of its
    /// inlined forward graph).
    ///
    /// ```
    /// use rlx_core::{DType, Graph};
    /// let mut g = Graph::new();
    /// let x = g.input("x", [2], DType::F64);
    /// let y = g.sin(x).unwrap();
    /// g.set_outputs(vec![y]);
    /// // Without custom ops, every node is its own origin.
    /// let (h, origins) = g.inline_custom_with_origins().unwrap();
    /// assert_eq!(h, g);
    /// assert_eq!(origins, vec![x, y]);
    /// ```
    pub fn inline_custom_with_origins(&self) -> Result<(Graph, Vec<NodeId>)> {
        let mut out = Graph::new();
        let mut map: Vec<NodeId> = Vec::with_capacity(self.nodes.len());
        let mut origins: Vec<NodeId> = Vec::with_capacity(self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            let args: Vec<NodeId> = node.inputs.iter().map(|i| map[i.index()]).collect();
            let id = match &node.op {
                Op::Custom(c) => {
                    let inner = c.forward.inline_custom()?;
                    out.inline(&inner, &args)?[0]
                }
                Op::Input { index } => out.input(
                    self.inputs[*index].name.clone(),
                    node.shape.clone(),
                    node.dtype,
                ),
                op => out.push_unchecked(Node {
                    op: op.clone(),
                    inputs: args,
                    shape: node.shape.clone(),
                    dtype: node.dtype,
                }),
            };
            map.push(id);
            origins.resize(out.len(), NodeId(i as u32));
        }
        out.outputs = self.outputs.iter().map(|o| map[o.index()]).collect();
        Ok((out, origins))
    }
}

macro_rules! unary_builders {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Graph {
            $($(#[$doc])* pub fn $name(&mut self, x: NodeId) -> Result<NodeId> { self.unary($op, x) })*
        }
    };
}

unary_builders! {
    /// `-x`.
    neg => UnaryOp::Neg;
    /// `e^x`.
    exp => UnaryOp::Exp;
    /// `e^x - 1`, accurate near 0.
    expm1 => UnaryOp::Expm1;
    /// Natural logarithm.
    ln => UnaryOp::Ln;
    /// `ln(1 + x)`, accurate near 0.
    log1p => UnaryOp::Log1p;
    /// Sine.
    sin => UnaryOp::Sin;
    /// Cosine.
    cos => UnaryOp::Cos;
    /// Tangent.
    tan => UnaryOp::Tan;
    /// Hyperbolic tangent.
    tanh => UnaryOp::Tanh;
    /// Hyperbolic sine.
    sinh => UnaryOp::Sinh;
    /// Hyperbolic cosine.
    cosh => UnaryOp::Cosh;
    /// Arcsine.
    asin => UnaryOp::Asin;
    /// Arccosine.
    acos => UnaryOp::Acos;
    /// Arctangent.
    atan => UnaryOp::Atan;
    /// `1 / (1 + e^-x)`.
    sigmoid => UnaryOp::Sigmoid;
    /// Square root.
    sqrt => UnaryOp::Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => UnaryOp::Rsqrt;
    /// `1 / x`.
    recip => UnaryOp::Recip;
    /// `x * x`.
    square => UnaryOp::Square;
    /// `|x|`.
    abs => UnaryOp::Abs;
    /// `-1`, `0` or `1`.
    sign => UnaryOp::Sign;
    /// `max(x, 0)`.
    relu => UnaryOp::Relu;
    /// `x * Phi(x)` with the exact error function.
    gelu => UnaryOp::Gelu;
    /// `x * sigmoid(x)`.
    silu => UnaryOp::Silu;
    /// Error function.
    erf => UnaryOp::Erf;
    /// Round down.
    floor => UnaryOp::Floor;
    /// Round up.
    ceil => UnaryOp::Ceil;
    /// Round half away from zero.
    round => UnaryOp::Round;
    /// Logical not.
    not => UnaryOp::Not;
}

macro_rules! binary_builders {
    ($($(#[$doc:meta])* $name:ident => $op:expr;)*) => {
        impl Graph {
            $($(#[$doc])* pub fn $name(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> { self.binary($op, a, b) })*
        }
    };
}

binary_builders! {
    /// `a + b`.
    add => BinaryOp::Add;
    /// `a - b`.
    sub => BinaryOp::Sub;
    /// `a * b`.
    mul => BinaryOp::Mul;
    /// `a / b`.
    div => BinaryOp::Div;
    /// `a ^ b`.
    pow => BinaryOp::Pow;
    /// Element-wise minimum.
    min => BinaryOp::Min;
    /// Element-wise maximum.
    max => BinaryOp::Max;
    /// Two-argument arctangent `atan2(a, b)`.
    atan2 => BinaryOp::Atan2;
    /// `a * b`, except that `0 * anything` (NaN, inf) is `0`.
    mul_zero => BinaryOp::MulZero;
    /// Logical and.
    and => BinaryOp::And;
    /// Logical or.
    or => BinaryOp::Or;
}

impl Graph {
    /// `x ^ n` for an integer `n`.
    pub fn powi(&mut self, x: NodeId, n: i32) -> Result<NodeId> {
        self.unary(UnaryOp::Powi(n), x)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_infers_broadcast_shapes() {
        let mut g = Graph::new();
        let a = g.input("a", [4, 1], DType::F32);
        let b = g.input("b", [3], DType::F32);
        let c = g.mul(a, b).unwrap();
        assert_eq!(g.shape(c), &Shape::from([4, 3]));
        g.set_outputs(vec![c]);
        g.verify().unwrap();
    }

    #[test]
    fn mismatch_names_op_and_shapes() {
        let mut g = Graph::new();
        let a = g.input("a", [2, 3], DType::F64);
        let b = g.input("b", [4], DType::F64);
        let msg = g.add(a, b).unwrap_err().to_string();
        assert!(
            msg.contains("`add`") && msg.contains("[2, 3]") && msg.contains("[4]"),
            "{msg}"
        );
    }

    #[test]
    fn display_prints_one_node_per_line() {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let y = g.exp(x).unwrap();
        g.set_outputs(vec![y]);
        let s = g.to_string();
        assert_eq!(s.lines().count(), 3, "{s}");
        assert!(s.contains("%1 = exp(%0) : f64[3]"), "{s}");
    }

    #[test]
    fn sum_to_undoes_broadcast() {
        let mut g = Graph::new();
        let x = g.input("x", [5, 4, 3], DType::F64);
        let s = g.sum_to(x, &Shape::from([4, 1])).unwrap();
        assert_eq!(g.shape(s), &Shape::from([4, 1]));
        let r = g.sum_to(x, &Shape::from([4, 1, 3])).unwrap_err();
        assert!(r.to_string().contains("sum_to"));
        let ok = g.sum_to(x, &Shape::from([1, 3])).unwrap();
        assert_eq!(g.shape(ok), &Shape::from([1, 3]));
    }

    #[test]
    fn inline_substitutes_inputs() {
        let mut f = Graph::new();
        let x = f.input("x", [2], DType::F64);
        let y = f.sin(x).unwrap();
        f.set_outputs(vec![y]);
        let mut g = Graph::new();
        let a = g.input("a", [2], DType::F64);
        let out = g.inline(&f, &[a]).unwrap();
        assert_eq!(g.node(out[0]).op, Op::Unary(UnaryOp::Sin));
        assert_eq!(g.node(out[0]).inputs, vec![a]);
        let b = g.input("b", [3], DType::F64);
        assert!(g.inline(&f, &[b]).is_err());
    }

    #[test]
    fn inline_custom_expands_forward() {
        let mut f = Graph::new();
        let x = f.input("x", [2], DType::F64);
        let y = f.exp(x).unwrap();
        f.set_outputs(vec![y]);
        let op = std::sync::Arc::new(crate::CustomOp {
            name: "myexp".into(),
            forward: f,
            vjp: None,
            jvp: None,
        });
        let mut g = Graph::new();
        let a = g.input("a", [2], DType::F64);
        let c = g.custom(op.clone(), &[a]).unwrap();
        g.set_outputs(vec![c]);
        assert!(g.to_string().contains("custom myexp"));
        let flat = g.inline_custom().unwrap();
        flat.verify().unwrap();
        assert_eq!(flat.node(flat.outputs()[0]).op, Op::Unary(UnaryOp::Exp));
        let b = g.input("b", [3], DType::F64);
        assert!(g.custom(op, &[b]).is_err());
    }

    #[test]
    fn verify_catches_bad_types() {
        let mut g = Graph::new();
        let x = g.input("x", [2], DType::F64);
        g.push_unchecked(Node {
            op: Op::Unary(UnaryOp::Exp),
            inputs: vec![x],
            shape: Shape::from([3]),
            dtype: DType::F64,
        });
        let e = g.verify().unwrap_err().to_string();
        assert!(e.contains("%1") && e.contains("differs"), "{e}");
    }
}
