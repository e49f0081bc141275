//! The one error type of rlx, re-exported as `rlx::Error`.
//!
//! Messages read like rustc's: what happened, what was expected, and what to
//! do. Variants name the op and carry the offending shapes and dtypes.

use crate::{DType, Shape};

/// Result alias used throughout rlx.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when building, transforming or running a graph.
///
/// ```
/// use rlx::{DType, Graph, Shape};
/// let mut g = Graph::new();
/// let a = g.input("a", [2, 3], DType::F64);
/// let b = g.input("b", [4], DType::F64);
/// let err = g.add(a, b).unwrap_err();
/// assert!(err.to_string().contains("add"));
/// assert!(err.to_string().contains("[2, 3]"));
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two operand shapes are incompatible for an op.
    #[error("`{op}`: shapes {lhs} and {rhs} are incompatible\n  = note: expected {expected}")]
    ShapeMismatch {
        /// The op being built.
        op: &'static str,
        /// Shape of the first operand.
        lhs: Shape,
        /// Shape of the second operand.
        rhs: Shape,
        /// What the op expects of them.
        expected: String,
    },
    /// Two operand dtypes differ where the op needs them equal.
    #[error("`{op}`: operands have dtypes {lhs} and {rhs}\n  = help: {}", cast_hint(*lhs, *rhs))]
    DTypeMismatch {
        /// The op being built.
        op: &'static str,
        /// Dtype of the first operand.
        lhs: DType,
        /// Dtype of the second operand.
        rhs: DType,
    },
    /// An op does not accept values of this dtype.
    #[error("`{op}` does not accept {dtype} operands\n  = note: expected {expected}")]
    UnsupportedDType {
        /// The op being built.
        op: &'static str,
        /// The dtype that came.
        dtype: DType,
        /// What the op accepts.
        expected: &'static str,
    },
    /// An op argument (axis, permutation, slice bound, ...) is invalid.
    #[error("`{op}`: {message}")]
    InvalidArgument {
        /// The op being built.
        op: &'static str,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An op got the wrong number of operands.
    #[error("`{op}` takes {expected} operand(s), got {got}")]
    Arity {
        /// The op being built.
        op: &'static str,
        /// Number of operands expected.
        expected: usize,
        /// Number of operands given.
        got: usize,
    },
    /// A node id does not belong to the graph.
    #[error("node %{node} does not exist (the graph has {len} nodes)")]
    UnknownNode {
        /// The id given.
        node: u32,
        /// Number of nodes in the graph.
        len: usize,
    },
    /// A graph violates one of its invariants (see `Graph::verify`).
    #[error("invalid graph at %{node}: {message}\n{context}")]
    InvalidGraph {
        /// The offending node.
        node: u32,
        /// The invariant that fails.
        message: String,
        /// The IR around the node.
        context: String,
    },
    /// An input given at run time does not match the graph's declaration.
    #[error("input `{name}`: expected {expected_dtype}{expected_shape}, got {got_dtype}{got_shape}\n  = help: pass a tensor of shape {expected_shape} and dtype {expected_dtype}")]
    InputMismatch {
        /// The input's name.
        name: String,
        /// Declared shape.
        expected_shape: Shape,
        /// Declared dtype.
        expected_dtype: DType,
        /// Shape that came.
        got_shape: Shape,
        /// Dtype that came.
        got_dtype: DType,
    },
    /// The number of inputs or outputs given does not match the graph.
    #[error("{what}: expected {expected}, got {got}")]
    CountMismatch {
        /// What was counted (`inputs`, `outputs`, `tangents`, ...).
        what: String,
        /// Number expected.
        expected: usize,
        /// Number given.
        got: usize,
    },
    /// A value was read as the wrong dtype or size.
    #[error("cannot read a {got} tensor of shape {shape} as {wanted}")]
    ReadMismatch {
        /// What the caller asked for (`f32`, `a scalar`, ...).
        wanted: String,
        /// The tensor's dtype.
        got: DType,
        /// The tensor's shape.
        shape: Shape,
    },
    /// A transform needed a scalar (0-d or one-element) output.
    #[error("`{op}` needs a scalar output, but the output has shape {shape}\n  = help: use `vjp` with a cotangent, or `jacobian`, for non-scalar outputs")]
    NotScalar {
        /// The transform (`grad`, `hessian`, ...).
        op: &'static str,
        /// The output's shape.
        shape: Shape,
    },
    /// An op has no derivative rule of the requested kind.
    #[error("`{op}` has no {kind} rule\n  = help: wrap the value in `stop_gradient`, or define a custom derivative")]
    NotDifferentiable {
        /// The op's name.
        op: &'static str,
        /// `vjp`, `jvp` or `batching`.
        kind: &'static str,
    },
    /// A linear solve met a singular (or numerically singular) matrix.
    #[error("`{op}`: matrix of shape {shape} is singular (zero pivot in column {column})")]
    SingularMatrix {
        /// The op (`solve`).
        op: &'static str,
        /// Shape of the matrix operand.
        shape: Shape,
        /// Column where elimination found no usable pivot.
        column: usize,
    },
    /// An iterative solver (`rlx::root`) stopped at its iteration cap, or
    /// after a failed line search, without meeting its tolerance.
    #[error("{solver}: Newton's method did not converge in {iterations} iteration(s): the residual's max-norm is {norm:e}, above the tolerance {tol:e}{hint}")]
    NoConvergence {
        /// The solver and the user's line, e.g. ``rlx::root` at src/main.rs:12:5`.
        solver: String,
        /// Iterations run.
        iterations: usize,
        /// `max_i |F_i|` at the last iterate.
        norm: f64,
        /// The tolerance asked for.
        tol: f64,
        /// What went wrong besides the count, as a `\n  = note: ..` line, or empty.
        hint: String,
    },
    /// An index is out of range for the axis it indexes.
    #[error("`{op}`: index {index} is out of range for axis {axis} of size {size}")]
    IndexOutOfRange {
        /// The op (`gather`, `scatter_add`).
        op: &'static str,
        /// The offending index.
        index: i64,
        /// The axis indexed.
        axis: usize,
        /// Its size.
        size: usize,
    },
    /// A shape whose element count (or byte size) a tensor cannot have:
    /// more than `isize::MAX` bytes, the limit of every Rust allocation (see
    /// [`Shape::check_size`]). Found before anything is allocated.
    ///
    /// ```
    /// use rlx::{DType, Shape};
    /// let e = Shape::from([usize::MAX, 2]).check_size(DType::F64, "zeros", &[]).unwrap_err();
    /// assert_eq!(
    ///     e.to_string(),
    ///     "`zeros`: a f64 tensor of shape [18446744073709551615, 2] is too large \
    ///      (36893488147419103230 elements)\n  \
    ///      = note: a tensor holds at most isize::MAX bytes: 1152921504606846975 elements of f64"
    /// );
    /// ```
    #[error("{}", too_large(op, shape, *dtype, operands))]
    TooLarge {
        /// The op or constructor.
        op: &'static str,
        /// The shape that is too large.
        shape: Shape,
        /// Its dtype.
        dtype: DType,
        /// The operands' shapes (empty for a constructor).
        operands: Vec<Shape>,
    },
    /// The allocator refused memory for a tensor of a valid size (more than
    /// the machine can give). Returned instead of aborting the process.
    #[error("`{op}`: cannot allocate {bytes} bytes for a {dtype} tensor of shape {shape}\n  = note: the memory allocator refused the request")]
    OutOfMemory {
        /// The op or constructor.
        op: &'static str,
        /// The shape of the tensor.
        shape: Shape,
        /// Its dtype.
        dtype: DType,
        /// The number of bytes asked for.
        bytes: usize,
    },
    /// An error inside traced code, with the user's source location.
    #[error("{source}\n  --> {file}:{line}:{column}")]
    At {
        /// The error.
        source: Box<Error>,
        /// The user's file.
        file: String,
        /// Line in that file.
        line: u32,
        /// Column in that file.
        column: u32,
    },
    /// An error met while running one node of a compiled graph (a singular
    /// matrix in a `solve`, an index out of range in a `gather`, ...).
    ///
    /// `node` is the node's id in the graph that was compiled, as its
    /// `Display` prints it (`%12`), even though compilation optimises and
    /// renumbers the graph. [`Error::root`] gives the wrapped error:
    ///
    /// ```
    /// use rlx::{Error, Shape};
    /// let e = Error::AtNode {
    ///     node: 12,
    ///     op: "solve",
    ///     source: Box::new(Error::SingularMatrix {
    ///         op: "solve",
    ///         shape: Shape::from([3, 3]),
    ///         column: 2,
    ///     }),
    /// };
    /// assert_eq!(
    ///     e.to_string(),
    ///     "`solve`: matrix of shape [3, 3] is singular (zero pivot in column 2)\n  \
    ///      = note: while running node %12 (`solve`)"
    /// );
    /// assert!(matches!(e.root(), Error::SingularMatrix { column: 2, .. }));
    /// ```
    #[error("{source}\n  = note: while running node %{node} (`{op}`)")]
    AtNode {
        /// The node's id in the compiled graph.
        node: u32,
        /// The node's op.
        op: &'static str,
        /// The error.
        #[source]
        source: Box<Error>,
    },
    /// A NaN or an infinity found by the opt-in check of non-finite
    /// values (`rlx::set_debug_nans(true)`, or the environment variable
    /// `RLX_DEBUG_NANS=1`): see [`NonFinite`].
    #[error("{0}")]
    NonFinite(Box<NonFinite>),
    /// Tracing or a companion was used in a way rlx does not support.
    #[error("{0}")]
    Unsupported(String),
    /// An error met while tracing a `#[differentiable]` function for one
    /// input signature (the parameters' shapes and dtypes).
    #[error("{source}\n  = note: while tracing `{function}({signature})`")]
    Trace {
        /// The function's name.
        function: String,
        /// Its runtime parameters with their types, e.g. `q: f64[4], k: f64[]`.
        signature: String,
        /// The error.
        source: Box<Error>,
    },
}

impl Error {
    /// Attaches a source location (the user's file and line) to an error.
    pub fn at(self, file: &str, line: u32, column: u32) -> Error {
        match self {
            e @ Error::At { .. } => e,
            e => Error::At {
                source: Box::new(e),
                file: file.to_string(),
                line,
                column,
            },
        }
    }

    /// The error without any context attached: unwraps [`Error::At`],
    /// [`Error::Trace`] and [`Error::AtNode`], so that matching on the cause
    /// works wherever the error was met.
    pub fn root(&self) -> &Error {
        match self {
            Error::At { source, .. }
            | Error::Trace { source, .. }
            | Error::AtNode { source, .. } => source.root(),
            e => e,
        }
    }
}

/// The help of [`Error::DTypeMismatch`]: the `cast` call that makes the
/// operands agree. A float never gets the hint to become an integer or a
/// mask: the other operand is cast to the float's type.
///
/// ```
/// use rlx::{DType, Error};
/// let e = Error::DTypeMismatch { op: "add", lhs: DType::F32, rhs: DType::I64 };
/// assert!(e.to_string().contains("cast the i64 operand with `.cast(DType::F32)`"));
/// ```
fn cast_hint(lhs: DType, rhs: DType) -> String {
    match (lhs.is_float(), rhs.is_float()) {
        (true, false) => format!("cast the {rhs} operand with `.cast(DType::{lhs:?})`"),
        (false, true) => format!("cast the {lhs} operand with `.cast(DType::{rhs:?})`"),
        _ => format!("cast one operand with `.cast(DType::{lhs:?})` or `.cast(DType::{rhs:?})`"),
    }
}

/// The message of [`Error::TooLarge`].
fn too_large(op: &str, shape: &Shape, dtype: DType, operands: &[Shape]) -> String {
    let mut m = format!("`{op}`: a {dtype} tensor of shape {shape} is too large (");
    if shape.dims().contains(&0) {
        let nonzero: Vec<usize> = shape.dims().iter().copied().filter(|&d| d != 0).collect();
        m.push_str(&format!(
            "no elements, but its non-zero dimensions multiply to {}, so its strides overflow)",
            Shape::new(nonzero).numel_string()
        ));
    } else {
        m.push_str(&format!("{} elements)", shape.numel_string()));
    }
    if !operands.is_empty() {
        let list: Vec<String> = operands.iter().map(Shape::to_string).collect();
        m.push_str(&format!("\n  = note: operand shapes: {}", list.join(", ")));
    }
    m.push_str(&format!(
        "\n  = note: a tensor holds at most isize::MAX bytes: {} elements of {dtype}",
        Shape::max_numel(dtype)
    ));
    m
}

/// What [`Error::NonFinite`] found: the first node of the graph that was
/// run (for a companion, the transformed graph: a backward node for a
/// gradient) that produced a NaN or an infinity from finite operands, or,
/// when none did, the input that held one.
///
/// ```
/// use rlx::{Error, core::NonFinite, Shape};
/// let e = Error::NonFinite(Box::new(NonFinite {
///     function: "the gradient of `f`".into(),
///     node: 7,
///     op: "ln".into(),
///     operands: vec![Shape::scalar()],
///     shape: Shape::scalar(),
///     value: f64::NEG_INFINITY,
///     origin: "traced at src/model.rs:12:9".into(),
///     context: "> %7 = ln(%6) : f64[]\n".into(),
/// }));
/// let msg = e.to_string();
/// assert!(msg.starts_with("the gradient of `f`: node %7 (`ln`) produced -inf from finite operands"));
/// assert!(msg.contains("= note: traced at src/model.rs:12:9"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NonFinite {
    /// What was run (`` the gradient of `f` ``, `` `f` ``).
    pub function: String,
    /// The node's id in that graph (as its `Display` prints it), before
    /// optimisation; an input's node when an input held the value.
    pub node: u32,
    /// The node's op (`` input `x` `` for an input).
    pub op: String,
    /// The shapes of its operands.
    pub operands: Vec<Shape>,
    /// The shape of its result.
    pub shape: Shape,
    /// The first non-finite value of the result.
    pub value: f64,
    /// Where the node was traced, when known (its [`crate::Source`]):
    /// `` traced at file:line:column `` for a node the user's code
    /// recorded (inside a nested `#[differentiable]` function: the line in
    /// its body), `` the derivative of `sqrt`, traced at ... `` for a node
    /// an autodiff rule added, `` computed from %7 (...) `` for other
    /// nodes a transform added; empty otherwise.
    pub origin: String,
    /// The IR lines around the node.
    pub context: String,
}

impl std::fmt::Display for NonFinite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let NonFinite {
            function,
            node,
            op,
            operands,
            shape,
            value,
            origin,
            context,
        } = self;
        write!(f, "{function}: ")?;
        if op.starts_with("input") || op.starts_with("output") {
            write!(f, "{op} (node %{node}) holds {value}")?;
        } else {
            let operands: Vec<String> = operands.iter().map(Shape::to_string).collect();
            write!(
                f,
                "node %{node} (`{op}`) produced {value} from finite operands\n  = note: operands of shapes [{}], result of shape {shape}",
                operands.join(", ")
            )?;
        }
        if !origin.is_empty() {
            write!(f, "\n  = note: {origin}")?;
        }
        write!(
            f,
            "\n  = note: found by the check of non-finite values (`rlx::set_debug_nans(true)` or `RLX_DEBUG_NANS=1`)\n  = note: in the graph that ran:\n{}",
            context.trim_end()
        )
    }
}
