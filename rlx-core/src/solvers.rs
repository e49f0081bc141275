//! Solvers as one node: the root of a residual found by Newton's method
//! ([`RootOp`]), differentiated by the implicit function theorem.
//!
//! A [`RootOp`] owns a `residual` graph with inputs `[x, p_1..p_m]` (the
//! unknown, then the parameters) and one output `F(x, p)` of exactly the
//! type of `x`. An [`Op::Root`](crate::Op::Root) node has operands
//! `[x0, p_1..p_m]` (the initial guess, then the parameters) and the value
//! `x*` with `F(x*, p) = 0`, of the type of `x0`.
//!
//! The forward value is found at run time by Newton's method on `F`
//! (settings in [`Newton`]) with the Jacobian `J_x = ∂F/∂x` of the
//! [`RootOp::jacobian`] graph: dense (`[n, n]`, LU with partial pivoting),
//! or sparse when the residual's traced pattern is (see [`JacobianKind`]:
//! the compressed program of coloured products of the sparse companions,
//! solved by faer's sparse LU whose symbolic analysis the plan keeps). The derivatives never differentiate the
//! iterations: with `J_x` and `J_p` taken at `(x*, p)`,
//!
//! ```text
//! forward:  ẋ* = −J_x⁻¹ (J_p ṗ)          reverse:  p̄ = −J_pᵀ (J_x⁻ᵀ x̄*)
//! ```
//!
//! and `x0` has no derivative (`x*` does not move with the guess). The
//! rules ([`autodiff::root_rules`](crate::autodiff::root_rules)) emit
//! ordinary nodes (the residual and its Jacobian inlined at `(x*, p)`, a
//! dense `solve`, or for a sparse Jacobian its values and a
//! [`SparseSolveOp`]), so derivatives of any order compose.
//!
//! Invariants (checked by [`RootRef::new`], re-checked by `Graph::verify`
//! through [`infer`](crate::infer())): the residual verifies, has at least
//! one input and exactly one output whose type is its first input's (a
//! float dtype, at least one element); the settings pass [`Newton::check`].

use std::fmt;
use std::sync::Arc;

use crate::autodiff::transforms::jacfwd;
use crate::autodiff::transforms::sparse::{choose, compressed_jacobian};
use crate::sparsity::{jacobian_pattern_within, Pattern};
use crate::{Error, Graph, Result, TensorType};

/// Which Jacobian (and linear solver) Newton's method of a root uses.
///
/// `Auto` (the default) takes the sparse path when the residual's traced
/// pattern of `∂F/∂x` has `n >= SPARSE_MIN_N` (64) unknowns and at most
/// `n² / 10` structural nonzeros (found by the pattern search of the
/// sparse companions, given up past `2²⁵` dependency entries), else the
/// dense one: below that size a dense LU costs microseconds, and above 10 %
/// density a sparse LU fills in towards dense anyway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum JacobianKind {
    /// Sparse when the pattern is sparse enough (see above).
    #[default]
    Auto,
    /// The dense `[n, n]` Jacobian and a dense LU, whatever the pattern.
    Dense,
    /// The coloured sparse Jacobian and faer's sparse LU, whatever the pattern.
    Sparse,
}

/// The fewest unknowns for which [`JacobianKind::Auto`] goes sparse.
pub const SPARSE_MIN_N: usize = 64;

/// Dependency entries the pattern search of [`JacobianKind::Auto`] may hold.
const PATTERN_LIMIT: usize = 1 << 25;

/// Settings of Newton's method for [`RootOp`] (and `rlx::root`).
///
/// Converged means `max_i |F_i(x)| <= tol` (an absolute tolerance on the
/// residual, in its units: amperes for a circuit's KCL residual). Each
/// iteration solves `J_x Δ = −F` by LU with partial pivoting and steps
/// `x ← x + t Δ`, where `t` starts at `damping` and, with the line search,
/// is halved until `‖F(x + tΔ)‖₂ ≤ (1 − 10⁻⁴ t) ‖F(x)‖₂` (Armijo's
/// condition on the residual norm, at most 30 halvings).
///
/// ```
/// use rlx::core::solvers::Newton;
/// let n = Newton::new().tol(1e-12).max_iter(20).line_search(false);
/// assert_eq!((n.tol, n.max_iter, n.line_search, n.damping), (1e-12, 20, false, 1.0));
/// assert!(Newton::new().tol(0.0).check("root").is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Newton {
    /// Absolute tolerance on the residual's max-norm (`> 0`). Default `1e-10`.
    pub tol: f64,
    /// Most Newton steps before giving up with [`Error::NoConvergence`]. Default 50.
    pub max_iter: usize,
    /// Whether to backtrack on the residual norm (default: yes).
    pub line_search: bool,
    /// The first step length tried, in `(0, 1]` (default 1: full Newton steps).
    pub damping: f64,
    /// Dense or sparse Jacobian (default [`JacobianKind::Auto`]).
    pub jacobian: JacobianKind,
}

impl Default for Newton {
    fn default() -> Newton {
        Newton {
            tol: 1e-10,
            max_iter: 50,
            line_search: true,
            damping: 1.0,
            jacobian: JacobianKind::Auto,
        }
    }
}

impl Newton {
    /// The defaults: `tol = 1e-10`, 50 iterations, line search on, full steps.
    pub fn new() -> Newton {
        Newton::default()
    }

    /// The tolerance on `max_i |F_i|`; must be finite and positive.
    pub fn tol(mut self, tol: f64) -> Newton {
        self.tol = tol;
        self
    }

    /// The iteration cap (at least 1).
    pub fn max_iter(mut self, n: usize) -> Newton {
        self.max_iter = n;
        self
    }

    /// Turns the backtracking line search on or off.
    pub fn line_search(mut self, yes: bool) -> Newton {
        self.line_search = yes;
        self
    }

    /// The first step length of every iteration, in `(0, 1]`.
    pub fn damping(mut self, t: f64) -> Newton {
        self.damping = t;
        self
    }

    /// Dense, sparse, or chosen from the residual's pattern (the default).
    pub fn jacobian(mut self, kind: JacobianKind) -> Newton {
        self.jacobian = kind;
        self
    }

    /// An error naming `name` (the solver and its line) unless the
    /// settings are usable: `tol` finite and `> 0`, `max_iter >= 1`,
    /// `damping` in `(0, 1]`.
    pub fn check(&self, name: &str) -> Result<()> {
        let bad = |message: String| {
            Err(Error::InvalidArgument {
                op: "root",
                message: format!("{name}: {message}"),
            })
        };
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return bad(format!(
                "the tolerance is {:e}; it must be finite and positive\n  = help: `Newton::new().tol(1e-10)`",
                self.tol
            ));
        }
        if self.max_iter == 0 {
            return bad("an iteration cap of 0\n  = help: allow at least one iteration".into());
        }
        if !(self.damping > 0.0 && self.damping <= 1.0) {
            return bad(format!(
                "the damping is {}; it must be in (0, 1]",
                self.damping
            ));
        }
        Ok(())
    }
}

/// A root of a residual; see the module docs for the conventions.
#[derive(Clone, Debug, PartialEq)]
pub struct RootOp {
    /// Shown in IR dumps and errors: what and where, e.g.
    /// ``rlx::root` at src/main.rs:12:5`.
    pub name: String,
    /// `F`: inputs `[x, p_1..p_m]`, one output shaped like `x`.
    pub residual: Graph,
    /// `J_x = ∂F/∂x`, dense or sparse.
    pub jacobian: RootJacobian,
    /// How Newton's method runs.
    pub newton: Newton,
}

impl RootOp {
    /// The type of the unknown (and of the node's value).
    pub fn unknown(&self) -> TensorType {
        self.residual.ty(self.residual.input_ids()[0])
    }

    /// Checks operand types against the residual's inputs and returns the
    /// node's type (the `infer` arm of `Op::Root`).
    pub fn infer(&self, operands: &[&TensorType]) -> Result<TensorType> {
        let ins = self.residual.inputs();
        if operands.len() != ins.len() {
            return Err(Error::Arity {
                op: "root",
                expected: ins.len(),
                got: operands.len(),
            });
        }
        for (inp, got) in ins.iter().zip(operands) {
            let want = self.residual.ty(inp.node);
            if &want != *got {
                return Err(Error::InputMismatch {
                    name: format!("{}::{}", self.name, inp.name),
                    expected_shape: want.shape,
                    expected_dtype: want.dtype,
                    got_shape: got.shape.clone(),
                    got_dtype: got.dtype,
                });
            }
        }
        Ok(self.unknown())
    }
}

/// The Jacobian `J_x = ∂F/∂x` of a root's residual.
#[derive(Clone, Debug, PartialEq)]
pub enum RootJacobian {
    /// Flattened: inputs those of `residual`, one output of shape `[n, n]`
    /// (`n` the number of elements of `x`).
    Dense(Graph),
    /// The compressed program of coloured products: inputs those of
    /// `residual`, one output `[nnz]`, the values of `pattern` (`[n, n]`,
    /// compressed sparse column) in its storage order.
    Sparse {
        /// The values' graph.
        values: Graph,
        /// The structural pattern of `J_x`.
        pattern: PatternRef,
    },
}

/// A shared [`Pattern`], compared and hashed by identity (as [`RootRef`]).
#[derive(Clone, Debug)]
pub struct PatternRef(pub Arc<Pattern>);

impl PartialEq for PatternRef {
    fn eq(&self, other: &PatternRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PatternRef {}

impl std::hash::Hash for PatternRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as usize).hash(state);
    }
}

impl std::ops::Deref for PatternRef {
    type Target = Pattern;
    fn deref(&self) -> &Pattern {
        &self.0
    }
}

/// The Jacobian of `residual` w.r.t. its unknown (`n` elements) of the
/// kind `kind` asks for (see [`JacobianKind`]).
fn root_jacobian(residual: &Graph, n: usize, kind: JacobianKind) -> Result<RootJacobian> {
    let pattern = match kind {
        JacobianKind::Dense => None,
        JacobianKind::Sparse => jacobian_pattern_within(residual, &[0], usize::MAX)?,
        JacobianKind::Auto if n < SPARSE_MIN_N => None,
        JacobianKind::Auto => jacobian_pattern_within(residual, &[0], PATTERN_LIMIT)?
            .filter(|p| p.nnz().saturating_mul(10) <= n.saturating_mul(n)),
    };
    let Some(pattern) = pattern else {
        return Ok(RootJacobian::Dense(flat_jacobian(residual, n)?));
    };
    let (mode, colouring) = choose(&pattern, None)?;
    let program = compressed_jacobian(residual, &[0], pattern, mode, &colouring)?;
    let mut values = program.graph;
    let v = *values.outputs().last().expect("the values output");
    values.set_outputs(vec![v]);
    Ok(RootJacobian::Sparse {
        values,
        pattern: PatternRef(Arc::new(program.pattern)),
    })
}

/// The graph of `∂F/∂x` reshaped to `[n, n]`, over the residual's inputs.
fn flat_jacobian(residual: &Graph, n: usize) -> Result<Graph> {
    let full = jacfwd(residual, &[0])?;
    let mut g = Graph::new();
    let args: Vec<_> = residual
        .inputs()
        .iter()
        .map(|i| {
            let t = residual.ty(i.node);
            g.input(i.name.clone(), t.shape, t.dtype)
        })
        .collect();
    let outs = g.inline(&full, &args)?;
    let j = g.reshape(outs[1], [n, n])?;
    g.set_outputs(vec![j]);
    Ok(g)
}

fn ty(t: &TensorType) -> String {
    format!("{}{}", t.dtype, t.shape)
}

/// A shared [`RootOp`], compared and hashed by identity (as
/// [`CustomRef`](crate::CustomRef)), so that `Op` stays `Eq + Hash`.
#[derive(Clone, Debug)]
pub struct RootRef(pub Arc<RootOp>);

impl PartialEq for RootRef {
    fn eq(&self, other: &RootRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RootRef {}

impl std::hash::Hash for RootRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as usize).hash(state);
    }
}

impl RootRef {
    /// A root op over `residual`, checking the module's invariants (a
    /// residual whose output type is not its unknown's is an error naming
    /// both) and building its Jacobian graph.
    pub fn new(name: impl Into<String>, residual: Graph, newton: Newton) -> Result<RootRef> {
        let name = name.into();
        let bad = |message: String| Error::InvalidArgument {
            op: "root",
            message: format!("{name}: {message}"),
        };
        newton.check(&name)?;
        residual.verify()?;
        let Some(first) = residual.inputs().first() else {
            return Err(bad("the residual has no unknown".into()));
        };
        let x = residual.ty(first.node);
        if residual.outputs().len() != 1 {
            return Err(bad(format!(
                "the residual must return one tensor, it returns {}",
                residual.outputs().len()
            )));
        }
        let f = residual.ty(residual.outputs()[0]);
        if f != x {
            return Err(bad(format!(
                "the residual returns {} but the unknown is {}: a root needs as many equations as unknowns, of the unknown's dtype\n  = help: return a residual of shape {} and dtype {}",
                ty(&f),
                ty(&x),
                x.shape,
                x.dtype
            )));
        }
        if !x.dtype.is_float() {
            return Err(bad(format!(
                "the unknown is {}; a root needs a float unknown",
                ty(&x)
            )));
        }
        let n = x.shape.numel();
        if n == 0 {
            return Err(bad(format!("the unknown {} has no elements", ty(&x))));
        }
        let jacobian = root_jacobian(&residual, n, newton.jacobian)?;
        Ok(RootRef(Arc::new(RootOp {
            name,
            residual,
            jacobian,
            newton,
        })))
    }
}

impl std::ops::Deref for RootRef {
    type Target = RootOp;
    fn deref(&self) -> &RootOp {
        &self.0
    }
}

impl fmt::Display for RootRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.jacobian {
            RootJacobian::Dense(_) => "dense",
            RootJacobian::Sparse { .. } => "sparse",
        };
        write!(f, "root {} tol={:e} {kind}", self.name, self.newton.tol)
    }
}

/// A sparse linear solve `x = A⁻¹ b` (or `A⁻ᵀ b`) over a fixed pattern, one
/// node whose operands are `[values, b]`: `values: [.., nnz]`, the entries
/// of `A` (`pattern`, square `n × n`, in its compressed-sparse-column
/// storage order), `b: [.., n]`. Values of rank 1 are one matrix for every
/// right-hand side (`b`'s leading dimensions are a batch of them); else
/// their leading dimensions are `b`'s, one matrix per item. The result has
/// `b`'s type.
///
/// Run by faer's sparse LU (symbolic analysis once per plan step); its
/// rules are solves with the same matrix: reverse `b̄ = A⁻ᵀ x̄`,
/// `Ā_k = −b̄[row_k] x[col_k]`; forward `ẋ = A⁻¹ (ḃ − Ȧ x)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SparseSolveOp {
    /// The structure of `A`.
    pub pattern: PatternRef,
    /// Solve with `Aᵀ` instead of `A` (same factors).
    pub transpose: bool,
}

impl SparseSolveOp {
    /// The `infer` arm: checks `[values, b]` and returns `b`'s type.
    pub fn infer(&self, operands: &[&TensorType]) -> Result<TensorType> {
        const OP: &str = "sparse_solve";
        let [v, b] = operands else {
            return Err(Error::Arity {
                op: OP,
                expected: 2,
                got: operands.len(),
            });
        };
        let (n, nnz) = (self.pattern.nrows(), self.pattern.nnz());
        let bad = |message: String| Err(Error::InvalidArgument { op: OP, message });
        if self.pattern.ncols() != n {
            return bad(format!(
                "the pattern is {n} × {}, not square",
                self.pattern.ncols()
            ));
        }
        if v.dtype != b.dtype || !v.dtype.is_float() {
            return bad(format!(
                "values {} and right-hand side {} must share one real float dtype",
                ty(v),
                ty(b)
            ));
        }
        let (vd, bd) = (v.shape.dims(), b.shape.dims());
        if vd.last() != Some(&nnz) || bd.last() != Some(&n) {
            return bad(format!(
                "expected values [.., {nnz}] and a right-hand side [.., {n}] for a {n} × {n} matrix with {nnz} nonzeros, got {} and {}",
                v.shape, b.shape
            ));
        }
        if vd.len() > 1 && vd[..vd.len() - 1] != bd[..bd.len() - 1] {
            return bad(format!(
                "batched values {} need the right-hand side's batch dimensions, got {}",
                v.shape, b.shape
            ));
        }
        Ok((*b).clone())
    }
}

impl fmt::Display for SparseSolveOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, nnz) = (self.pattern.nrows(), self.pattern.nnz());
        let t = if self.transpose { "ᵀ" } else { "" };
        write!(f, "sparse_solve{t} {n}×{n} nnz={nnz}")
    }
}
