//! The primitive ops of the IR.
//!
//! `Op` is closed and grouped by kind. Operands are not part of an op: they
//! live in [`Node::inputs`](crate::Node), so passes that only move data
//! (toposort, DCE, liveness, printing) never match on ops. Every per-op table
//! (shape inference, VJP, JVP, batching, kernels, printing) is an exhaustive
//! `match` without a `_ =>` arm: a new variant makes the compiler list each
//! place to update.
//!
//! Broadcasting: binary, compare and select ops broadcast their operands with
//! NumPy rules implicitly; the node's shape is the broadcast shape.

use std::fmt;
use std::sync::Arc;

use crate::{DType, Graph, Shape};

pub use crate::loops::{LoopKind, LoopOp, LoopRef};
pub use crate::solvers::{RootOp, RootRef, SparseSolveOp};

/// One primitive operation. See the module docs for operand conventions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Graph input number `index` (position in `Graph::inputs`). No operands.
    Input {
        /// Position in the graph's input list.
        index: usize,
    },
    /// A constant; its node's shape and dtype say how it is laid out. No operands.
    Constant(Literal),
    /// Element-wise unary op. Operands: `[x]`.
    Unary(UnaryOp),
    /// Element-wise binary op with broadcasting. Operands: `[a, b]`.
    Binary(BinaryOp),
    /// Element-wise comparison with broadcasting, giving `Bool`. Operands: `[a, b]`.
    Compare(CmpOp),
    /// `cond ? a : b` element-wise, with broadcasting. Operands: `[cond, a, b]`.
    Select,
    /// Element-wise conversion to the node's dtype. Operands: `[x]`.
    Cast(DType),
    /// Reduction over `axes` (sorted, unique); the axes are removed from the
    /// shape. Operands: `[x]`.
    Reduce {
        /// Which reduction.
        op: ReduceOp,
        /// Axes reduced, sorted ascending.
        axes: Vec<usize>,
    },
    /// Batched matrix product `[.., m, k] x [.., k, n] -> [.., m, n]` with
    /// broadcasting batch dimensions; both operands have rank >= 2.
    /// Operands: `[a, b]`.
    MatMul,
    /// Axis permutation: output axis `i` is input axis `perm[i]`. Operands: `[x]`.
    Transpose {
        /// The permutation.
        perm: Vec<usize>,
    },
    /// Same elements, new shape (row-major order). Operands: `[x]`.
    Reshape {
        /// The new shape.
        shape: Shape,
    },
    /// NumPy broadcast to `shape`. Operands: `[x]`.
    Broadcast {
        /// The target shape.
        shape: Shape,
    },
    /// Concatenation along `axis`. Operands: one or more tensors.
    Concat {
        /// The axis joined along.
        axis: usize,
    },
    /// Elements `start..start + len` along `axis`. Operands: `[x]`.
    Slice {
        /// The axis sliced.
        axis: usize,
        /// First element kept.
        start: usize,
        /// Number of elements kept.
        len: usize,
    },
    /// `take` along `axis` with `I64` indices: the output shape is
    /// `x.shape[..axis] ++ idx.shape ++ x.shape[axis + 1..]`.
    /// Operands: `[x, idx]`.
    Gather {
        /// The axis indexed.
        axis: usize,
    },
    /// Adds `updates` into a copy of `operand` at `idx` along `axis`
    /// (repeated indices accumulate); the transpose of `Gather`.
    /// `updates` has the shape `Gather` would give. Operands:
    /// `[operand, idx, updates]`.
    ScatterAdd {
        /// The axis indexed.
        axis: usize,
    },
    /// `exp(x - max) / sum(exp(x - max))` along `axis`. Operands: `[x]`.
    Softmax {
        /// The normalised axis.
        axis: usize,
    },
    /// `x - max - ln(sum(exp(x - max)))` along `axis`. Operands: `[x]`.
    LogSoftmax {
        /// The normalised axis.
        axis: usize,
    },
    /// Solves `A X = B` by LU with partial pivoting: `A: [.., n, n]`,
    /// `B: [.., n, k]`, equal batch dimensions. Operands: `[a, b]`.
    Solve,
    /// Identity whose derivative is zero. Operands: `[x]`.
    StopGradient,
    /// A sub-function with user-supplied derivative rules (JAX's
    /// `custom_vjp` / `custom_jvp`). Operands: the sub-function's inputs.
    Custom(CustomRef),
    /// A loop over a body graph traced once (JAX's `scan`) or the reverse
    /// mode of one; see [`LoopOp`] for operands and the packed result.
    Loop(LoopRef),
    /// The root `x*` of a residual `F(x, p)` by Newton's method, with
    /// derivatives by the implicit function theorem; see [`RootOp`].
    /// Operands: `[x0, p_1..p_m]` (the guess, then the parameters).
    Root(RootRef),
    /// A sparse linear solve over a fixed pattern; see [`SparseSolveOp`].
    /// Operands: `[values, b]`.
    SparseSolve(SparseSolveOp),
}

/// A sub-function whose derivatives come from user-supplied graphs instead
/// of differentiating its body (for implicit functions and numerically
/// stable rules).
///
/// Conventions, for a `forward` graph with inputs `x_1..x_n` and one output `y`:
/// - `vjp` (optional): inputs `[x_1, .., x_n, y, ybar]`, outputs
///   `[xbar_1, .., xbar_n]` shaped like the inputs;
/// - `jvp` (optional): inputs `[x_1, .., x_n, t_1, .., t_n]`, one output
///   `ydot` shaped like `y`.
///
/// The rule graphs are themselves differentiated when a higher order is
/// asked for. A missing rule is derived from the other when possible
/// (a `vjp` from the `jvp` by transposition is not attempted; reverse mode
/// without a `vjp` rule differentiates `forward`).
#[derive(Clone, Debug, PartialEq)]
pub struct CustomOp {
    /// Name shown in IR dumps and error messages.
    pub name: String,
    /// The function itself: its inputs are the op's operands, its single output the op's value.
    pub forward: Graph,
    /// Reverse-mode rule, see the type's docs.
    pub vjp: Option<Graph>,
    /// Forward-mode rule, see the type's docs.
    pub jvp: Option<Graph>,
}

/// A shared [`CustomOp`], compared and hashed by identity so that `Op` stays
/// `Eq + Hash` (CSE merges two custom nodes only when they use the same rule set).
#[derive(Clone, Debug)]
pub struct CustomRef(pub Arc<CustomOp>);

impl PartialEq for CustomRef {
    fn eq(&self, other: &CustomRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CustomRef {}

impl std::hash::Hash for CustomRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as usize).hash(state);
    }
}

impl std::ops::Deref for CustomRef {
    type Target = CustomOp;
    fn deref(&self) -> &CustomOp {
        &self.0
    }
}

/// Element-wise unary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// `e^x - 1`, accurate near 0
    Expm1,
    /// natural logarithm
    Ln,
    /// `ln(1 + x)`, accurate near 0
    Log1p,
    /// sine
    Sin,
    /// cosine
    Cos,
    /// tangent
    Tan,
    /// hyperbolic tangent
    Tanh,
    /// hyperbolic sine
    Sinh,
    /// hyperbolic cosine
    Cosh,
    /// arcsine
    Asin,
    /// arccosine
    Acos,
    /// arctangent
    Atan,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// square root
    Sqrt,
    /// `1 / sqrt(x)`
    Rsqrt,
    /// `1 / x`
    Recip,
    /// `x * x`
    Square,
    /// `x^n` for a fixed integer `n`
    Powi(i32),
    /// `|x|`
    Abs,
    /// `-1`, `0` or `1` (0 for 0 and NaN stays NaN)
    Sign,
    /// `max(x, 0)`
    Relu,
    /// `x * Φ(x)` with the exact normal CDF `Φ(x) = (1 + erf(x / √2)) / 2`
    Gelu,
    /// `x * sigmoid(x)`
    Silu,
    /// the error function
    Erf,
    /// round toward -∞
    Floor,
    /// round toward +∞
    Ceil,
    /// round half away from zero
    Round,
    /// logical not (`Bool` only)
    Not,
    /// complex conjugate `x − iy` (complex only)
    Conj,
    /// real part, a real value (complex only)
    Real,
    /// imaginary part, a real value (complex only)
    Imag,
}

/// Element-wise binary ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// `a ^ b` (real power)
    Pow,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
    /// `atan2(a, b)`: the angle of the point `(b, a)`
    Atan2,
    /// `a * b`, but exactly 0 wherever `a == 0`, even if `b` is infinite or
    /// NaN. Derivative rules multiply incoming (co)tangents with it so that a
    /// branch not taken by a select contributes 0, not NaN.
    MulZero,
    /// logical and (`Bool` only)
    And,
    /// logical or (`Bool` only)
    Or,
    /// `a + i b`: a complex value from real parts of one float dtype
    Complex,
}

/// Element-wise comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
}

/// Reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// sum
    Sum,
    /// arithmetic mean
    Mean,
    /// maximum
    Max,
    /// minimum
    Min,
    /// product
    Prod,
}

/// The value of a constant node.
///
/// Values are held in `f64` (exact for every float dtype and for `Bool`) or
/// `i64`; the node's dtype says how they are stored at run time.
#[derive(Clone, Debug)]
pub enum Literal {
    /// Every element equals this value.
    Splat(f64),
    /// Every element equals this integer (for `I64` nodes).
    SplatI64(i64),
    /// One value per element, row-major.
    F64(Arc<[f64]>),
    /// One value per element, row-major (for `I64` nodes).
    I64(Arc<[i64]>),
}

impl Literal {
    /// The splat value, if every element is the same float.
    pub fn as_splat(&self) -> Option<f64> {
        match self {
            Literal::Splat(v) => Some(*v),
            Literal::SplatI64(v) => Some(*v as f64),
            Literal::F64(_) | Literal::I64(_) => None,
        }
    }

    /// Element `i` as `f64` (a splat gives its value for every `i`).
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Literal::Splat(v) => *v,
            Literal::SplatI64(v) => *v as f64,
            Literal::F64(d) => d[i],
            Literal::I64(d) => d[i] as f64,
        }
    }

    /// Element `i` as `i64`.
    pub fn get_i64(&self, i: usize) -> i64 {
        match self {
            Literal::Splat(v) => *v as i64,
            Literal::SplatI64(v) => *v,
            Literal::F64(d) => d[i] as i64,
            Literal::I64(d) => d[i],
        }
    }
}

// Bitwise equality, so that CSE can merge constants (NaN == NaN, 0.0 != -0.0).
impl PartialEq for Literal {
    fn eq(&self, other: &Literal) -> bool {
        match (self, other) {
            (Literal::Splat(a), Literal::Splat(b)) => a.to_bits() == b.to_bits(),
            (Literal::SplatI64(a), Literal::SplatI64(b)) => a == b,
            (Literal::F64(a), Literal::F64(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Literal::I64(a), Literal::I64(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Literal {}

impl std::hash::Hash for Literal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Literal::Splat(v) => v.to_bits().hash(state),
            Literal::SplatI64(v) => v.hash(state),
            Literal::F64(d) => {
                d.len().hash(state);
                for v in d.iter() {
                    v.to_bits().hash(state);
                }
            }
            Literal::I64(d) => d.hash(state),
        }
    }
}

impl Op {
    /// The op's name as used in messages and IR dumps.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input { .. } => "input",
            Op::Constant(_) => "constant",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Compare(c) => c.name(),
            Op::Select => "select",
            Op::Cast(_) => "cast",
            Op::Reduce { op, .. } => op.name(),
            Op::MatMul => "matmul",
            Op::Transpose { .. } => "transpose",
            Op::Reshape { .. } => "reshape",
            Op::Broadcast { .. } => "broadcast",
            Op::Concat { .. } => "concat",
            Op::Slice { .. } => "slice",
            Op::Gather { .. } => "gather",
            Op::ScatterAdd { .. } => "scatter_add",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::Solve => "solve",
            Op::StopGradient => "stop_gradient",
            Op::Custom(_) => "custom",
            Op::Loop(_) => "loop",
            Op::Root(_) => "root",
            Op::SparseSolve(_) => "sparse_solve",
        }
    }

    /// Number of operands, or `None` for variadic ops (`Concat`).
    pub fn arity(&self) -> Option<usize> {
        match self {
            Op::Input { .. } | Op::Constant(_) => Some(0),
            Op::Unary(_)
            | Op::Cast(_)
            | Op::Reduce { .. }
            | Op::Transpose { .. }
            | Op::Reshape { .. }
            | Op::Broadcast { .. }
            | Op::Slice { .. }
            | Op::Softmax { .. }
            | Op::LogSoftmax { .. }
            | Op::StopGradient => Some(1),
            Op::Binary(_)
            | Op::Compare(_)
            | Op::MatMul
            | Op::Gather { .. }
            | Op::Solve
            | Op::SparseSolve(_) => Some(2),
            Op::Select | Op::ScatterAdd { .. } => Some(3),
            Op::Concat { .. } => None,
            Op::Custom(c) => Some(c.forward.inputs().len()),
            Op::Loop(l) => Some(l.operand_count()),
            Op::Root(r) => Some(r.residual.inputs().len()),
        }
    }

    /// Whether the op is element-wise (fusable into one loop): unary, binary,
    /// compare, select and cast.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast(_)
        )
    }
}

impl UnaryOp {
    /// The op's name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Ln => "ln",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Recip => "recip",
            UnaryOp::Square => "square",
            UnaryOp::Powi(_) => "powi",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Silu => "silu",
            UnaryOp::Erf => "erf",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Not => "not",
            UnaryOp::Conj => "conj",
            UnaryOp::Real => "real",
            UnaryOp::Imag => "imag",
        }
    }

    /// Every unary op on real operands (with `Powi(3)` standing for the
    /// `Powi` family), for tests that walk the whole table; the complex-only
    /// ones are [`UnaryOp::COMPLEX_ONLY`].
    pub const ALL: [UnaryOp; 30] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Ln,
        UnaryOp::Log1p,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Tanh,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sigmoid,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Recip,
        UnaryOp::Square,
        UnaryOp::Powi(3),
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Not,
    ];

    /// The unary ops defined on complex values only (not in [`UnaryOp::ALL`],
    /// whose ops take real operands).
    pub const COMPLEX_ONLY: [UnaryOp; 3] = [UnaryOp::Conj, UnaryOp::Real, UnaryOp::Imag];
}

impl UnaryOp {
    /// Whether the op takes only complex operands (`conj`, `real`, `imag`).
    pub fn complex_only(self) -> bool {
        matches!(self, UnaryOp::Conj | UnaryOp::Real | UnaryOp::Imag)
    }

    /// Whether the op is defined on complex operands: the analytic
    /// functions (`exp`, `ln`, `sqrt`, `sin`, ..., `powi`), `neg`, `recip`,
    /// `square`, `conj`, `real`, `imag` and `abs` (a real result). The
    /// others order values or are real special functions.
    pub fn has_complex_kernel(self) -> bool {
        match self {
            UnaryOp::Neg
            | UnaryOp::Exp
            | UnaryOp::Ln
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Sinh
            | UnaryOp::Cosh
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Atan
            | UnaryOp::Sigmoid
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Recip
            | UnaryOp::Square
            | UnaryOp::Powi(_)
            | UnaryOp::Abs
            | UnaryOp::Conj
            | UnaryOp::Real
            | UnaryOp::Imag => true,
            UnaryOp::Expm1
            | UnaryOp::Log1p
            | UnaryOp::Sign
            | UnaryOp::Relu
            | UnaryOp::Gelu
            | UnaryOp::Silu
            | UnaryOp::Erf
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::Not => false,
        }
    }
}

impl BinaryOp {
    /// The op's name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::MulZero => "mul_zero",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Complex => "complex",
        }
    }

    /// Every binary op whose operands and result have one dtype, for tests
    /// that walk the whole table (all but [`BinaryOp::Complex`]).
    pub const ALL: [BinaryOp; 11] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::Atan2,
        BinaryOp::MulZero,
        BinaryOp::And,
        BinaryOp::Or,
    ];
}

impl CmpOp {
    /// The op's name.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
        }
    }

    /// Every comparison.
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
        CmpOp::Eq,
        CmpOp::Ne,
    ];
}

impl ReduceOp {
    /// The op's name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "reduce_max",
            ReduceOp::Min => "reduce_min",
            ReduceOp::Prod => "prod",
        }
    }

    /// Every reduction.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
    ];
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Input { index } => write!(f, "input #{index}"),
            Op::Constant(lit) => match lit {
                Literal::Splat(v) => write!(f, "constant {v}"),
                Literal::SplatI64(v) => write!(f, "constant {v}"),
                Literal::F64(d) if d.len() <= 6 => write!(f, "constant {d:?}"),
                Literal::I64(d) if d.len() <= 6 => write!(f, "constant {d:?}"),
                Literal::F64(d) => write!(f, "constant <{} values>", d.len()),
                Literal::I64(d) => write!(f, "constant <{} values>", d.len()),
            },
            Op::Unary(UnaryOp::Powi(n)) => write!(f, "powi {n}"),
            Op::Cast(d) => write!(f, "cast {d}"),
            Op::Reduce { op, axes } => write!(f, "{} axes={axes:?}", op.name()),
            Op::Transpose { perm } => write!(f, "transpose perm={perm:?}"),
            Op::Reshape { shape } => write!(f, "reshape {shape}"),
            Op::Broadcast { shape } => write!(f, "broadcast {shape}"),
            Op::Concat { axis } => write!(f, "concat axis={axis}"),
            Op::Slice { axis, start, len } => {
                write!(f, "slice axis={axis} start={start} len={len}")
            }
            Op::Gather { axis } => write!(f, "gather axis={axis}"),
            Op::ScatterAdd { axis } => write!(f, "scatter_add axis={axis}"),
            Op::Softmax { axis } => write!(f, "softmax axis={axis}"),
            Op::LogSoftmax { axis } => write!(f, "log_softmax axis={axis}"),
            Op::Custom(c) => write!(f, "custom {}", c.name),
            Op::Loop(l) => write!(f, "{l}"),
            Op::Root(r) => write!(f, "{r}"),
            Op::SparseSolve(s) => write!(f, "{s}"),
            other => f.write_str(other.name()),
        }
    }
}
