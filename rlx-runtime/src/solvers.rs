//! Solvers traced once, differentiated implicitly: [`root`] and
//! [`fixed_point`].
//!
//! `root(|x| residual(x, &p), &x0, Newton::new())` is the `x*` near `x0`
//! with `residual(x*, p) = 0`, found by Newton's method
//! ([`Newton`] settings). In `#[differentiable]` code the closure is traced
//! once into the residual graph of one root node
//! ([`rlx::core::solvers`](rlx_core::solvers)); tensors of the enclosing function it uses
//! (`p`) become the node's parameters, and the companions differentiate
//! `x*` with respect to them by the implicit function theorem,
//! `dx*/dp = −J_x⁻¹ J_p` (the iterations are never differentiated; `x0`
//! has no derivative). On concrete tensors outside a trace the closure is
//! traced and the solve runs at once (compiled for that call).
//!
//! Errors, each naming the solver with its line: a residual whose type is
//! not the unknown's, settings out of range (a tolerance ≤ 0), in traced
//! code returned at once by `root` (and so by the companion); a solve
//! that does not converge ([`Error::NoConvergence`], with the residual
//! norm reached), a NaN in the residual, a singular Jacobian on the way
//! or at the solution (where the derivative would not exist): returned by
//! the companion that runs the plan, or by `root` on concrete tensors.

use std::panic::Location;

use std::sync::Arc;

use rlx_core::solvers::PatternRef;
use rlx_core::sparsity::Pattern;
use rlx_core::{Error, Graph, Op, Result, RootRef, SparseSolveOp};

pub use rlx_core::{JacobianKind, Newton};

use crate::compile::compile;
use crate::tensor::Tensor;
use crate::trace::{self, Trace};

/// The root `x*` of `f` near `x0` by Newton's method: `f(x*) = 0` to the
/// tolerance `max|f(x*)| <= newton.tol`. `f` must return a tensor of the
/// shape and dtype of `x0`; its Jacobian is taken by rlx, dense or sparse
/// from the residual's traced pattern ([`JacobianKind`]: a sparse one is
/// solved by faer's sparse LU, symbolic analysis once per plan, and the
/// derivatives then solve with it too). See the module docs for tracing,
/// derivatives and errors.
///
/// ```
/// use rlx::{root, Newton};
/// use rlx::Tensor;
/// // x³ + x = 10 has the root x = 2
/// let c = Tensor::scalar(10.0);
/// let x0 = Tensor::scalar(1.0);
/// let x = root(|x| x * x * x + x - &c, &x0, Newton::new().tol(1e-12)).unwrap();
/// assert!((x.item::<f64>().unwrap() - 2.0).abs() < 1e-12);
/// ```
#[track_caller]
pub fn root(f: impl FnOnce(&Tensor) -> Tensor, x0: &Tensor, newton: Newton) -> Result<Tensor> {
    solve("root", f, x0, newton, Location::caller())
}

/// [`root`] named `rlx::{api}` at `loc` in messages.
fn solve(
    api: &str,
    f: impl FnOnce(&Tensor) -> Tensor,
    x0: &Tensor,
    newton: Newton,
    loc: &'static Location<'static>,
) -> Result<Tensor> {
    let name = format!(
        "`rlx::{api}` at {}:{}:{}",
        loc.file(),
        loc.line(),
        loc.column()
    );
    let at = |e: Error| e.at(loc.file(), loc.line(), loc.column());
    if trace::is_tracing() {
        let (residual, captured) = residual(f, x0, Trace::enter_body()).map_err(at)?;
        let r = RootRef::new(name, residual, newton).map_err(at)?;
        let mut operands = vec![x0];
        operands.extend(&captured);
        trace::record(Op::Root(r), &operands, loc)
    } else {
        let (residual, captured) = residual(f, x0, Trace::enter_eager()).map_err(at)?;
        debug_assert!(captured.is_empty(), "no trace encloses an eager one");
        let r = RootRef::new(name, residual, newton).map_err(at)?;
        let mut g = Graph::new();
        let x = g.input("x0", x0.shape().clone(), x0.dtype());
        let y = g.push(Op::Root(r), &[x]).map_err(at)?;
        g.set_outputs(vec![y]);
        let exe = compile(&g).map_err(at)?;
        let mut out = exe.run(&[x0]).map_err(at)?;
        Ok(out.swap_remove(0))
    }
}

/// The fixed point `x* = g(x*)` near `x0`: the [`root`] of `x − g(x)`, so
/// Newton's method (not the plain iteration `x ← g(x)`, which needs `g`
/// to be a contraction and converges linearly) finds it to
/// `max|x* − g(x*)| <= newton.tol`, and its derivatives are the implicit
/// function theorem's with `J_x = I − ∂g/∂x`: `dx*/dp = (I − ∂g/∂x)⁻¹ ∂g/∂p`.
/// Errors as for [`root`] (a singular `I − ∂g/∂x`: `g` has slope 1 there).
///
/// ```
/// use rlx::{fixed_point, Newton};
/// use rlx::Tensor;
/// // x = cos(x): the Dottie number
/// let x = fixed_point(|x| x.cos(), &Tensor::scalar(1.0), Newton::new().tol(1e-14)).unwrap();
/// assert!((x.item::<f64>().unwrap() - 0.739_085_133_215_160_6).abs() < 1e-14);
/// ```
#[track_caller]
pub fn fixed_point(
    g: impl FnOnce(&Tensor) -> Tensor,
    x0: &Tensor,
    newton: Newton,
) -> Result<Tensor> {
    solve("fixed_point", |x| x - g(x), x0, newton, Location::caller())
}

/// `f` traced in `body` over an unknown typed like `x0`: the residual
/// graph and the enclosing traces' tensors it captured.
fn residual(
    f: impl FnOnce(&Tensor) -> Tensor,
    x0: &Tensor,
    body: Trace,
) -> Result<(Graph, Vec<Tensor>)> {
    let x = body.input("x", x0.shape().clone(), x0.dtype());
    let fx = f(&x);
    body.finish_body(&[&fx])
}

/// `x = A⁻¹ b` for the sparse `A` whose structure is `pattern` (square,
/// `n × n`) and whose entries are `values` (`[nnz]`, in the pattern's
/// compressed-sparse-column storage order, as
/// [`SparseMatrix::values`](crate::sparse::SparseMatrix::values)), with
/// `b: [n]` (or `[.., n]`: a batch of right-hand sides; values `[.., nnz]`
/// with `b`'s batch dimensions are one matrix per item). With `transpose`,
/// `x = A⁻ᵀ b` from the same factors.
///
/// Differentiable in `#[differentiable]` code in both `values` and `b`:
/// reverse mode is one transposed solve with the same factors (`b̄ =
/// A⁻ᵀ x̄`, `Ā_k = −b̄[row_k] x[col_k]`), forward mode one solve; no dense
/// matrix is formed. Solved by faer's sparse LU, its symbolic analysis done
/// once per pattern (keep one `Arc<Pattern>` across calls) and the factors
/// of one matrix reused by the solves of its derivatives. Errors: shapes
/// or dtypes that do not fit the pattern (named), a singular matrix.
///
/// ```
/// use std::sync::Arc;
/// use rlx::sparse::Pattern;
/// use rlx::Tensor;
/// // [[2, 1], [0, 3]] x = [3, 3] gives x = [1, 1].
/// let p = Arc::new(Pattern::from_entries(2, 2, &[(0, 0), (0, 1), (1, 1)])?);
/// let a = Tensor::from_slice(&[2.0, 1.0, 3.0], [3]);
/// let x = rlx::sparse_solve(&p, &a, &Tensor::from_slice(&[3.0, 3.0], [2]), false)?;
/// assert_eq!(x.to_vec::<f64>()?, vec![1.0, 1.0]);
/// # Ok::<(), rlx::Error>(())
/// ```
#[track_caller]
pub fn sparse_solve(
    pattern: &Arc<Pattern>,
    values: &Tensor,
    b: &Tensor,
    transpose: bool,
) -> Result<Tensor> {
    let loc = Location::caller();
    let at = |e: Error| e.at(loc.file(), loc.line(), loc.column());
    let op = Op::SparseSolve(SparseSolveOp {
        pattern: PatternRef(pattern.clone()),
        transpose,
    });
    if trace::is_tracing() {
        return trace::record(op, &[values, b], loc);
    }
    let mut g = Graph::new();
    let v = g.input("values", values.shape().clone(), values.dtype());
    let r = g.input("b", b.shape().clone(), b.dtype());
    let y = g.push(op, &[v, r]).map_err(at)?;
    g.set_outputs(vec![y]);
    let exe = compile(&g).map_err(at)?;
    let mut out = exe.run(&[values, b]).map_err(at)?;
    Ok(out.swap_remove(0))
}
