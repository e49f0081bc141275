//! The kernel of a root node ([`rlx::core::solvers`](rlx_core::solvers)): Newton's method on
//! the residual graph, with its Jacobian graph (dense, or the values of a
//! sparse pattern solved by faer's sparse LU: [`Linear`]) for the steps, over any
//! runner of graphs ([`RunGraph`]: the reference interpreter here, compiled
//! plans in `compile::steps::root`).
//!
//! The iteration is in `f64` whatever the unknown's dtype (the residual
//! and its Jacobian run in that dtype). Each iteration evaluates `F(x)`
//! and `J(x)`, stops when `max|F| <= tol` (after checking that `J` at the
//! solution is not singular: there the implicit derivative would not
//! exist), else solves `J Δ = F` and steps `x ← x − tΔ` (line search:
//! see [`Newton`](rlx_core::Newton)). Every failure is an error naming the
//! solver and its line: no convergence within the cap or after a failed
//! line search ([`Error::NoConvergence`]), a NaN or infinity in the
//! residual or the Jacobian, a singular Jacobian (on the way or at the
//! solution).

use rlx_core::{Error, Result, RootOp, Shape};

use super::looping::RunGraph;
use super::solve::solve_into;
use super::sparse_solve::SparseSolver;
use super::Operand;
use crate::storage::Storage;

/// Halvings of the step the line search tries before giving up.
const HALVINGS: usize = 30;

/// Armijo's constant: a step of length `t` must shrink `‖F‖₂` by `c·t` at least.
const ARMIJO: f64 = 1e-4;

/// How a root's Newton step solves `J Δ = F`: the dense Jacobian graph
/// (`[n, n]`) and a dense LU, or the sparse values graph (`[nnz]` of the
/// op's pattern) and faer's sparse LU (its symbolic analysis done once,
/// kept by the caller across iterations and calls).
pub(crate) enum Linear<'a> {
    /// The dense Jacobian graph.
    Dense(&'a mut dyn RunGraph),
    /// The sparse values graph and a solver of the pattern.
    Sparse(&'a mut dyn RunGraph, &'a mut SparseSolver),
}

impl Linear<'_> {
    fn graph(&mut self) -> &mut dyn RunGraph {
        match self {
            Linear::Dense(g) => &mut **g,
            Linear::Sparse(g, _) => &mut **g,
        }
    }

    /// `(row, column)` of the `i`-th Jacobian value (`n` unknowns).
    fn entry(&self, i: usize, n: usize) -> (usize, usize) {
        match self {
            Linear::Dense(_) => (i / n, i % n),
            Linear::Sparse(_, s) => {
                let p = s.matrix.pattern();
                (p.row_idx()[i], p.col_ptr().partition_point(|&c| c <= i) - 1)
            }
        }
    }

    /// Solves `J Δ = f` with the Jacobian values `jv` into `step`.
    fn solve(
        &mut self,
        jv: Vec<f64>,
        f: &[f64],
        step: &mut Storage,
        scratch: &mut Vec<f64>,
    ) -> Result<()> {
        let n = f.len();
        match self {
            Linear::Dense(_) => {
                let (sa, sb) = (Shape::from([n, n]), Shape::from([n, 1]));
                let (a, b) = (Storage::F64(jv), Storage::F64(f.to_vec()));
                solve_into(Operand::new(&a, &sa), Operand::new(&b, &sb), step, scratch)
            }
            Linear::Sparse(_, s) => {
                s.matrix.values_mut().copy_from_slice(&jv);
                s.factor()?;
                let Storage::F64(d) = step else {
                    unreachable!("the step is f64")
                };
                d.copy_from_slice(f);
                s.lu.solve_in_place(d)
            }
        }
    }
}

/// Runs root `r` on `operands` (`[x0, p..]`) into `out` (the root, of the
/// unknown's type), evaluating `residual` and the Jacobian of `linear`
/// (the op's graphs, inputs `[x, p..]`).
pub(crate) fn run_root(
    r: &RootOp,
    residual: &mut dyn RunGraph,
    linear: &mut Linear<'_>,
    operands: &[&Storage],
    out: &mut Storage,
) -> Result<()> {
    let ty = r.unknown();
    let n = ty.shape.numel();
    let newton = r.newton;
    let fail = |message: String| Error::InvalidArgument {
        op: "root",
        message: format!("{}: {message}", r.name),
    };
    let eval = |x: &[f64], graph: &mut dyn RunGraph| -> Result<Vec<f64>> {
        let xs = Storage::from_f64(ty.dtype, x.iter().copied());
        let mut ins: Vec<&Storage> = Vec::with_capacity(operands.len());
        ins.push(&xs);
        ins.extend_from_slice(&operands[1..]);
        let mut outs = [Storage::zeros(ty.dtype, 0)];
        graph.run(&ins, &mut outs)?;
        let [o] = outs;
        Ok(o.to_f64_vec())
    };
    let mut x = operands[0].to_f64_vec();
    let mut f = eval(&x, residual)?;
    if let Some(i) = f.iter().position(|v| !v.is_finite()) {
        return Err(fail(format!(
            "the residual is {} at the initial guess (element {i})\n  = help: start from a guess where the residual is finite",
            f[i]
        )));
    }
    let mut scratch = Vec::new();
    let mut step = Storage::F64(vec![0.0; n]);
    for k in 0.. {
        let norm = max_norm(&f);
        let jv = eval(&x, linear.graph())?;
        if let Some(i) = jv.iter().position(|v| !v.is_finite()) {
            let (row, col) = linear.entry(i, n);
            return Err(fail(format!(
                "the Jacobian of the residual is {} at iterate {k} (row {row}, column {col})",
                jv[i],
            )));
        }
        let solved = linear.solve(jv, &f, &mut step, &mut scratch);
        let singular = |e: Error, at: &str| {
            match e {
            Error::SingularMatrix { column, .. } => fail(format!(
                "the Jacobian of the residual is singular {at} (no pivot in column {column}; residual max-norm {norm:e}){}",
                if at.starts_with("at the solution") {
                    "\n  = note: the root's derivative (the implicit function theorem's J_x⁻¹) does not exist there"
                } else {
                    ""
                }
            )),
            e => e,
        }
        };
        if norm <= newton.tol {
            if let Err(e) = solved {
                return Err(singular(e, "at the solution"));
            }
            break;
        }
        if k >= newton.max_iter {
            return Err(no_convergence(r, k, norm, String::new()));
        }
        if let Err(e) = solved {
            return Err(singular(e, &format!("at iterate {k}")));
        }
        let Storage::F64(d) = &step else {
            unreachable!("the step is f64")
        };
        let norm2 = two_norm(&f);
        let mut t = newton.damping;
        let mut accepted = None;
        for _ in 0..=HALVINGS {
            let xt: Vec<f64> = x.iter().zip(d).map(|(xi, di)| xi - t * di).collect();
            let ft = eval(&xt, residual)?;
            let finite = ft.iter().all(|v| v.is_finite());
            if !newton.line_search {
                if let Some(i) = ft.iter().position(|v| !v.is_finite()) {
                    return Err(fail(format!(
                        "the residual is {} after Newton step {} (element {i})\n  = help: turn the line search on (`Newton::line_search(true)`), damp the steps, or start closer to the root",
                        ft[i],
                        k + 1
                    )));
                }
                accepted = Some((xt, ft));
                break;
            }
            if finite && two_norm(&ft) <= (1.0 - ARMIJO * t) * norm2 {
                accepted = Some((xt, ft));
                break;
            }
            t *= 0.5;
        }
        let Some((xt, ft)) = accepted else {
            let hint = format!(
                "\n  = note: the line search found no step along Newton's direction that lowers the residual ({HALVINGS} halvings)"
            );
            return Err(no_convergence(r, k, norm, hint));
        };
        x = xt;
        f = ft;
    }
    write(out, &x)
}

fn no_convergence(r: &RootOp, iterations: usize, norm: f64, hint: String) -> Error {
    Error::NoConvergence {
        solver: r.name.clone(),
        iterations,
        norm,
        tol: r.newton.tol,
        hint,
    }
}

fn max_norm(f: &[f64]) -> f64 {
    f.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn two_norm(f: &[f64]) -> f64 {
    f.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// `x` into `out`, in `out`'s dtype and place.
fn write(out: &mut Storage, x: &[f64]) -> Result<()> {
    if out.len() != x.len() {
        return Err(Error::InvalidArgument {
            op: "root",
            message: format!(
                "the output buffer has {} values for an unknown of {}",
                out.len(),
                x.len()
            ),
        });
    }
    match out {
        Storage::F64(v) => v.copy_from_slice(x),
        Storage::F32(v) => v.iter_mut().zip(x).for_each(|(o, &s)| *o = s as f32),
        other => *other = Storage::from_f64(other.dtype(), x.iter().copied()),
    }
    Ok(())
}
