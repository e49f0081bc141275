//! Reference kernels: one per op, for every dtype.
//!
//! [`eval_into`] is the single per-op table (an exhaustive `match` over
//! [`Op`]). The kernels behind it share two layers written once:
//! [`iter`] (strided, broadcasting walks; no allocation for ranks up to
//! [`iter::INLINE`]) and [`scalar`] (the math of each element-wise op,
//! generic over `f32`/`f64`; `f16`/`bf16` are loaded into `f32`, computed
//! and rounded back), whose transcendental functions live in [`vmath`]
//! (branch-free, so loops over them vectorise).
//!
//! Contract: `inputs` have the types [`rlx::core::infer()`](rlx_core::infer()) accepts for `op`,
//! `out_shape` is the inferred shape and `out` already has the output dtype
//! and `out_shape.numel()` elements. Dtype and length mismatches are
//! reported as errors; data errors (an index out of range, a singular
//! matrix) too. Except for `Solve` (see [`solve_into`] to keep its scratch
//! warm), `Custom`, `Loop` (carries and checkpoints) and `Root` (Newton's
//! iterates), kernels do not allocate.

mod complex;
mod elementwise;
mod index;
pub mod iter;
mod layout;
mod loop_result;
pub(crate) mod looping;
mod matmul;
mod operand;
mod reduce;
pub(crate) mod root;
pub mod scalar;
mod softmax;
pub(crate) mod solve;
pub(crate) mod solve_complex;
pub(crate) mod sparse_solve;
pub mod vmath;

use rlx_core::{Error, Graph, Op, Result, Shape};

use crate::storage::Storage;
use operand::{dtype_error, same_dtype};

pub(crate) use index::{scatter_add_checked, Order};
pub use operand::Operand;
pub use solve::{solve_into, solve_scratch_len};

/// Computes `op` on `inputs` into `out`, which has the output dtype and
/// `out_shape.numel()` elements.
///
/// ```
/// use rlx::runtime::kernels::{eval_into, Operand};
/// use rlx::{BinaryOp, Op, Shape, runtime::Storage};
/// let (a, b) = (Storage::F64(vec![1.0, 2.0]), Storage::F64(vec![10.0]));
/// let (sa, sb, so) = (Shape::from([2]), Shape::from([1]), Shape::from([2]));
/// let mut out = Storage::F64(vec![0.0; 2]);
/// eval_into(
///     &Op::Binary(BinaryOp::Add),
///     &[Operand::new(&a, &sa), Operand::new(&b, &sb)],
///     &so,
///     &mut out,
/// )
/// .unwrap();
/// assert_eq!(out, Storage::F64(vec![11.0, 12.0]));
/// ```
pub fn eval_into(
    op: &Op,
    inputs: &[Operand<'_>],
    out_shape: &Shape,
    out: &mut Storage,
) -> Result<()> {
    check(op, inputs, out_shape, out)?;
    // Nothing to write. Returning early also keeps loops over the other
    // axes of an empty value (`[1 << 58, 0]` has 2^58 rows of nothing) from
    // running for ever. Gather and scatter-add still check their indices
    // (NumPy's `take` refuses a bad index even for an empty result).
    if out.is_empty() && writes_only(op) {
        return Ok(());
    }
    let so = out_shape.dims();
    match op {
        Op::Input { .. } => Err(Error::InvalidArgument {
            op: "input",
            message: "graph inputs have no kernel; their values are given by the caller".into(),
        }),
        Op::Constant(lit) => {
            elementwise::constant(lit, out);
            Ok(())
        }
        Op::Unary(u) => elementwise::unary(*u, inputs[0], out),
        Op::Binary(b) => elementwise::binary(*b, inputs[0], inputs[1], so, out),
        Op::Compare(c) => elementwise::compare(*c, inputs[0], inputs[1], so, out),
        Op::Select => elementwise::select(inputs[0], inputs[1], inputs[2], so, out),
        Op::Cast(_) => elementwise::cast(inputs[0], out),
        Op::Reduce { op: r, axes } => reduce::reduce(*r, axes, inputs[0], out),
        Op::MatMul => matmul::matmul(inputs[0], inputs[1], so, out),
        Op::Transpose { perm } => layout::transpose(perm, inputs[0], so, out),
        Op::Reshape { .. } | Op::StopGradient => layout::copy(op.name(), inputs[0], out),
        Op::Broadcast { .. } => layout::broadcast(inputs[0], so, out),
        Op::Concat { axis } => layout::concat(*axis, inputs, so, out),
        Op::Slice { axis, start, len } => layout::slice(*axis, *start, *len, inputs[0], out),
        Op::Gather { axis } => index::gather(*axis, inputs[0], inputs[1], out),
        Op::ScatterAdd { axis } => index::scatter_add(*axis, inputs[0], inputs[1], inputs[2], out),
        Op::Softmax { axis } => softmax::softmax(*axis, false, inputs[0], out),
        Op::LogSoftmax { axis } => softmax::softmax(*axis, true, inputs[0], out),
        Op::Solve => solve::solve_eager(inputs[0], inputs[1], out),
        Op::Loop(l) => {
            use looping::{run_loop, Interpreted};
            let storages: Vec<&Storage> = inputs.iter().map(|o| o.storage).collect();
            let (body, vjp) = l.step_graphs();
            let mut body = Interpreted(body);
            let spine = match l.spine {
                0 => vec![],
                _ => rlx_core::loops::schedule::spine(l.length, l.checkpoints),
            };
            let mut vjp = vjp.map(Interpreted);
            let hoisted = l.residuals.as_ref().and_then(|r| r.hoisted.as_ref());
            let mut finish = hoisted.map(|h| Interpreted(&h.finish));
            run_loop(
                l,
                &mut body,
                vjp.as_mut().map(|v| v as &mut dyn looping::RunGraph),
                finish.as_mut().map(|f| f as &mut dyn looping::RunGraph),
                &spine,
                &storages,
                out,
                &mut Default::default(),
            )
        }
        Op::Root(r) => {
            let storages: Vec<&Storage> = inputs.iter().map(|o| o.storage).collect();
            let mut residual = looping::Interpreted(&r.residual);
            match &r.jacobian {
                rlx_core::solvers::RootJacobian::Dense(j) => {
                    let mut jacobian = looping::Interpreted(j);
                    let mut linear = root::Linear::Dense(&mut jacobian);
                    root::run_root(r, &mut residual, &mut linear, &storages, out)
                }
                rlx_core::solvers::RootJacobian::Sparse { values, pattern } => {
                    let mut jacobian = looping::Interpreted(values);
                    let mut solver = sparse_solve::SparseSolver::new(&pattern.0)?;
                    let mut linear = root::Linear::Sparse(&mut jacobian, &mut solver);
                    root::run_root(r, &mut residual, &mut linear, &storages, out)
                }
            }
        }
        Op::SparseSolve(s) => {
            let mut solver = sparse_solve::SparseSolver::new(&s.pattern.0)?;
            let (v, b) = (inputs[0], inputs[1]);
            sparse_solve::run_sparse_solve(
                s,
                &mut solver,
                (v.storage, v.shape),
                (b.storage, b.shape),
                out,
            )
        }
        Op::Custom(c) => {
            let flat = c.forward.inline_custom()?;
            let storages: Vec<&Storage> = inputs.iter().map(|o| o.storage).collect();
            let mut results = run_storages(&flat, &storages)?;
            let value = results.swap_remove(0);
            if value.len() != out.len() {
                return Err(Error::InvalidArgument {
                    op: "custom",
                    message: format!(
                        "custom op `{}` gave {} {} values for a {} output of shape {out_shape}",
                        c.name,
                        value.len(),
                        value.dtype(),
                        out.dtype()
                    ),
                });
            }
            let err = dtype_error("custom", value.dtype(), out.dtype());
            same_dtype!(Err(err);
            (&value, out) => |v, o| {
                o.copy_from_slice(v);
                Ok(())
            })
        }
    }
}

/// Cheap consistency checks of a kernel call (no allocation unless failing).
fn check(op: &Op, inputs: &[Operand<'_>], out_shape: &Shape, out: &Storage) -> Result<()> {
    if let Some(n) = op.arity() {
        if inputs.len() != n {
            return Err(Error::Arity {
                op: op.name(),
                expected: n,
                got: inputs.len(),
            });
        }
    } else if inputs.is_empty() {
        return Err(Error::Arity {
            op: op.name(),
            expected: 1,
            got: 0,
        });
    }
    for (k, x) in inputs.iter().enumerate() {
        if x.storage.len() != x.shape.numel() {
            return Err(Error::InvalidArgument {
                op: op.name(),
                message: format!(
                    "operand {k} has {} values for shape {} ({} elements)",
                    x.storage.len(),
                    x.shape,
                    x.shape.numel()
                ),
            });
        }
    }
    if out.len() != out_shape.numel() {
        return Err(Error::InvalidArgument {
            op: op.name(),
            message: format!(
                "output buffer has {} values for shape {out_shape} ({} elements)",
                out.len(),
                out_shape.numel()
            ),
        });
    }
    if !shapes_fit(op, inputs, out_shape.dims()) {
        let shapes: Vec<String> = inputs.iter().map(|x| x.shape.to_string()).collect();
        return Err(Error::InvalidArgument {
            op: op.name(),
            message: format!(
                "operands of shapes {} do not give an output of shape {out_shape}",
                shapes.join(", ")
            ),
        });
    }
    Ok(())
}

/// Whether running `op` has no effect but writing its output (no run-time
/// check of its operands' values that could fail): such an op with an empty
/// output can be skipped.
pub(crate) fn writes_only(op: &Op) -> bool {
    !matches!(
        op,
        Op::Input { .. }
            | Op::Custom(_)
            | Op::Root(_)
            | Op::SparseSolve(_)
            | Op::Gather { .. }
            | Op::ScatterAdd { .. }
    )
}

/// Whether `src` broadcasts to `out` (NumPy rules).
fn fits(src: &[usize], out: &[usize]) -> bool {
    src.len() <= out.len()
        && src
            .iter()
            .zip(&out[out.len() - src.len()..])
            .all(|(&s, &o)| s == 1 || s == o)
}

/// Whether the operand shapes and the output shape agree for `op`, so that
/// no kernel indexes out of bounds. Checked without allocating.
fn shapes_fit(op: &Op, inputs: &[Operand<'_>], so: &[usize]) -> bool {
    let d = |k: usize| inputs[k].dims();
    match op {
        Op::Input { .. }
        | Op::Constant(_)
        | Op::Custom(_)
        | Op::Solve
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => true,
        Op::Unary(_) | Op::Cast(_) => d(0) == so,
        Op::Softmax { axis } | Op::LogSoftmax { axis } => d(0) == so && *axis < so.len(),
        Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Broadcast { .. } => {
            inputs.iter().all(|x| fits(x.dims(), so))
        }
        Op::Reduce { axes, .. } => {
            let x = d(0);
            let sorted = axes.windows(2).all(|w| w[0] < w[1]);
            sorted
                && axes.iter().all(|&a| a < x.len())
                && x.len() - axes.len() == so.len()
                && x.iter()
                    .enumerate()
                    .filter(|(i, _)| !axes.contains(i))
                    .map(|(_, &v)| v)
                    .eq(so.iter().copied())
        }
        Op::MatMul => {
            let (a, b) = (d(0), d(1));
            let (ra, rb, r) = (a.len(), b.len(), so.len());
            ra >= 2
                && rb >= 2
                && r >= 2
                && a[ra - 1] == b[rb - 2]
                && so[r - 2] == a[ra - 2]
                && so[r - 1] == b[rb - 1]
                && fits(&a[..ra - 2], &so[..r - 2])
                && fits(&b[..rb - 2], &so[..r - 2])
        }
        Op::Transpose { perm } => {
            let x = d(0);
            perm.len() == x.len()
                && so.len() == x.len()
                && perm
                    .iter()
                    .enumerate()
                    .all(|(i, &p)| p < x.len() && so[i] == x[p] && !perm[..i].contains(&p))
        }
        Op::Reshape { .. } | Op::StopGradient => {
            d(0).iter().product::<usize>() == so.iter().product()
        }
        Op::Concat { axis } => {
            *axis < so.len()
                && inputs.iter().all(|x| {
                    let xd = x.dims();
                    xd.len() == so.len()
                        && xd
                            .iter()
                            .zip(so)
                            .enumerate()
                            .all(|(i, (a, b))| i == *axis || a == b)
                })
                && inputs.iter().map(|x| x.dims()[*axis]).sum::<usize>() == so[*axis]
        }
        Op::Slice { axis, start, len } => {
            let x = d(0);
            *axis < x.len()
                && x.len() == so.len()
                && start.checked_add(*len).is_some_and(|e| e <= x[*axis])
                && x.iter()
                    .zip(so)
                    .enumerate()
                    .all(|(i, (&a, &b))| if i == *axis { b == *len } else { a == b })
        }
        Op::Gather { axis } => {
            let (x, idx) = (d(0), d(1));
            *axis < x.len() && gathered(x, idx, *axis, so)
        }
        Op::ScatterAdd { axis } => {
            let (x, idx, upd) = (d(0), d(1), d(2));
            *axis < x.len() && x == so && gathered(x, idx, *axis, upd)
        }
    }
}

/// Whether `out == x[..axis] ++ idx ++ x[axis + 1..]`.
fn gathered(x: &[usize], idx: &[usize], axis: usize, out: &[usize]) -> bool {
    out.len() == x.len() - 1 + idx.len()
        && x[..axis]
            .iter()
            .chain(idx)
            .chain(&x[axis + 1..])
            .eq(out.iter())
}

enum Val<'a> {
    Dead,
    Input(&'a Storage),
    Owned(Storage),
}

impl Val<'_> {
    fn get(&self) -> Option<&Storage> {
        match self {
            Val::Dead => None,
            Val::Input(s) => Some(s),
            Val::Owned(s) => Some(s),
        }
    }
}

/// Runs `g` with the kernels of [`eval_into`] (the reference interpreter,
/// and the evaluation of a custom op's graph) on input values already checked against its declarations.
pub(crate) fn run_storages(g: &Graph, inputs: &[&Storage]) -> Result<Vec<Storage>> {
    run_inspecting(g, inputs, &mut |_, _| Ok(()))
}

/// [`run_storages`], calling `inspect(i, value)` with the value of each
/// live node `i` (inputs too) as soon as it is computed; an error from
/// `inspect` stops the run (the check of non-finite values localises the
/// first node that produced one this way).
pub(crate) fn run_inspecting(
    g: &Graph,
    inputs: &[&Storage],
    inspect: &mut dyn FnMut(usize, &Storage) -> Result<()>,
) -> Result<Vec<Storage>> {
    g.verify()?;
    let n = g.len();
    // Last node that reads each value; outputs live to the end.
    let mut last_use = vec![0usize; n];
    for (i, node) in g.nodes().iter().enumerate() {
        for j in &node.inputs {
            last_use[j.index()] = i;
        }
    }
    for o in g.outputs() {
        last_use[o.index()] = usize::MAX;
    }
    let live = g.live_nodes();
    let mut vals: Vec<Val<'_>> = Vec::with_capacity(n);
    for (i, node) in g.nodes().iter().enumerate() {
        if !live[i] {
            vals.push(Val::Dead);
            continue;
        }
        let v = match &node.op {
            Op::Input { index } => {
                let s = inputs.get(*index).ok_or_else(|| Error::CountMismatch {
                    what: "inputs".into(),
                    expected: g.inputs().len(),
                    got: inputs.len(),
                })?;
                if s.len() != node.shape.numel() || s.dtype() != node.dtype {
                    return Err(Error::InputMismatch {
                        name: g.inputs()[*index].name.clone(),
                        expected_shape: node.shape.clone(),
                        expected_dtype: node.dtype,
                        got_shape: rlx_core::Shape::from([s.len()]),
                        got_dtype: s.dtype(),
                    });
                }
                Val::Input(s)
            }
            op => {
                let mut operands = Vec::with_capacity(node.inputs.len());
                for j in &node.inputs {
                    let s = vals[j.index()]
                        .get()
                        .expect("operands are live until their last use");
                    operands.push(Operand::new(s, g.shape(*j)));
                }
                let mut out = crate::storage::allocate(op.name(), &node.shape, node.dtype, 0.0)
                    .map_err(|e| at_node(g, i, e))?;
                eval_into(op, &operands, &node.shape, &mut out).map_err(|e| at_node(g, i, e))?;
                Val::Owned(out)
            }
        };
        if let Some(value) = v.get() {
            inspect(i, value)?;
        }
        vals.push(v);
        for j in &node.inputs {
            if last_use[j.index()] == i {
                vals[j.index()] = Val::Dead;
            }
        }
    }
    Ok(g.outputs()
        .iter()
        .map(|o| vals[o.index()].get().expect("outputs stay live").clone())
        .collect())
}

/// Data errors keep their variant; the node is named only for internal
/// inconsistencies, which the kernels report as `InvalidArgument`.
fn at_node(g: &Graph, i: usize, e: Error) -> Error {
    match e {
        Error::InvalidArgument { .. } | Error::DTypeMismatch { .. } | Error::Arity { .. } => {
            Error::InvalidGraph {
                node: i as u32,
                message: e.to_string(),
                context: g.context(i),
            }
        }
        other => other,
    }
}
