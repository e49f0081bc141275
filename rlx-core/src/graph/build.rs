//! The builder half of [`Graph`]: one method per primitive op (and a few
//! shorthands), each inferring the output type and returning `Result`.

use super::{Graph, Node, NodeId};
use crate::{BinaryOp, CmpOp, DType, Error, Op, ReduceOp, Result, Shape, UnaryOp};

impl Graph {
    /// Element-wise unary op.
    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> Result<NodeId> {
        self.push(Op::Unary(op), &[x])
    }

    /// Element-wise binary op with broadcasting.
    ///
    /// A real float operand of a complex one is first cast to the complex
    /// dtype (real -> complex promotion; `f64` with `c32` is an error, as
    /// it would round).
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> Result<NodeId> {
        let (a, b) = match op {
            BinaryOp::Complex => (a, b),
            _ => self.promote(op.name(), a, b)?,
        };
        self.push(Op::Binary(op), &[a, b])
    }

    /// `a` and `b` with a real float operand of a complex one cast to the
    /// complex dtype; others unchanged (`infer` then judges them).
    fn promote(&mut self, op: &'static str, a: NodeId, b: NodeId) -> Result<(NodeId, NodeId)> {
        let (da, db) = (self.try_node(a)?.dtype, self.try_node(b)?.dtype);
        let widens = |real: DType, complex: DType| {
            real.is_float() && (complex == DType::C64 || real.complex() == Some(complex))
        };
        match (da.is_complex(), db.is_complex()) {
            (true, false) if db.is_float() => match widens(db, da) {
                true => Ok((a, self.cast(b, da)?)),
                false => Err(crate::Error::DTypeMismatch {
                    op,
                    lhs: da,
                    rhs: db,
                }),
            },
            (false, true) if da.is_float() => match widens(da, db) {
                true => Ok((self.cast(a, db)?, b)),
                false => Err(crate::Error::DTypeMismatch {
                    op,
                    lhs: da,
                    rhs: db,
                }),
            },
            _ => Ok((a, b)),
        }
    }

    /// `re + i im`: a complex value from real parts of one dtype (`f32`
    /// gives `c32`, `f64` gives `c64`), with broadcasting.
    pub fn complex(&mut self, re: NodeId, im: NodeId) -> Result<NodeId> {
        self.binary(BinaryOp::Complex, re, im)
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
    /// A real operand of a complex one is promoted as in [`Graph::binary`].
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        let (a, b) = self.promote("matmul", a, b)?;
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

    /// The elements of `range` along `axis` (`1..3`, `2..`, `..=4`; the
    /// whole axis returns `x`); an error if the range is not within the axis
    /// (see [`Shape::range_along`]).
    pub fn slice_range(
        &mut self,
        x: NodeId,
        range: impl std::ops::RangeBounds<usize>,
        axis: usize,
    ) -> Result<NodeId> {
        let s = &self.try_node(x)?.shape;
        let (start, len) = s.range_along(&range, axis)?;
        if start == 0 && len == s.dim(axis) {
            return Ok(x);
        }
        self.push(Op::Slice { axis, start, len }, &[x])
    }

    /// Elements `start..start + len` along `axis`.
    #[deprecated(
        note = "use `slice_range(x, start..start + len, axis)` (argument order: the range, then the axis last)"
    )]
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

    /// The sparse solve `op` of `b` with the matrix of `values` (see
    /// [`SparseSolveOp`](crate::SparseSolveOp)).
    pub fn sparse_solve(
        &mut self,
        op: crate::SparseSolveOp,
        values: NodeId,
        b: NodeId,
    ) -> Result<NodeId> {
        self.push(Op::SparseSolve(op), &[values, b])
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

    /// Applies a loop (see [`crate::loops`]) to its operands; the result is packed.
    pub fn looped(&mut self, l: crate::LoopRef, args: &[NodeId]) -> Result<NodeId> {
        self.push(Op::Loop(l), args)
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
    /// use rlx::{DType, Graph};
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
    /// Complex conjugate (complex operands only).
    conj => UnaryOp::Conj;
    /// Real part, a real value (complex operands only).
    real => UnaryOp::Real;
    /// Imaginary part, a real value (complex operands only).
    imag => UnaryOp::Imag;
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
