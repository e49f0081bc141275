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
//! Contract: `inputs` have the types [`rlx_core::infer()`] accepts for `op`,
//! `out_shape` is the inferred shape and `out` already has the output dtype
//! and `out_shape.numel()` elements. Dtype and length mismatches are
//! reported as errors; data errors (an index out of range, a singular
//! matrix) too. Except for `Solve` (see [`solve_into`] to keep its scratch
//! warm) and `Custom`, kernels do not allocate.

mod elementwise;
mod index;
pub mod iter;
mod layout;
mod matmul;
mod reduce;
pub mod scalar;
mod softmax;
pub(crate) mod solve;
pub mod vmath;

use rlx_core::{DType, Error, Op, Result, Shape};

use crate::storage::Storage;

pub use solve::{solve_into, solve_scratch_len};

/// A read-only operand of a kernel: contiguous row-major values and their shape.
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The values.
    pub storage: &'a Storage,
    /// Their shape.
    pub shape: &'a Shape,
}

impl<'a> Operand<'a> {
    /// An operand from storage and shape.
    pub fn new(storage: &'a Storage, shape: &'a Shape) -> Operand<'a> {
        Operand { storage, shape }
    }

    fn dims(&self) -> &'a [usize] {
        self.shape.dims()
    }
}

/// Computes `op` on `inputs` into `out`, which has the output dtype and
/// `out_shape.numel()` elements.
///
/// ```
/// use rlx_runtime::kernels::{eval_into, Operand};
/// use rlx_runtime::{BinaryOp, Op, Shape, Storage};
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
        Op::Solve => solve_into(inputs[0], inputs[1], out, &mut Vec::new()),
        Op::Custom(c) => {
            let flat = c.forward.inline_custom()?;
            let storages: Vec<&Storage> = inputs.iter().map(|o| o.storage).collect();
            let mut results = crate::interp::run_storages(&flat, &storages)?;
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
        Op::Input { .. } | Op::Constant(_) | Op::Custom(_) | Op::Solve => true,
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

/// The error for operand/output dtypes that do not fit together.
fn dtype_error(op: &'static str, got: DType, out: DType) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: got,
        rhs: out,
    }
}

/// Matches storages that all hold the same dtype and runs `$body` with the
/// slices bound to the given names; otherwise evaluates `$err`.
macro_rules! same_dtype {
    ($err:expr; ($($s:expr),+) => |$($v:ident),+| $body:expr) => {
        match ($($s,)+) {
            ($(Storage::F32($v),)+) => $body,
            ($(Storage::F64($v),)+) => $body,
            ($(Storage::F16($v),)+) => $body,
            ($(Storage::BF16($v),)+) => $body,
            ($(Storage::I64($v),)+) => $body,
            ($(Storage::Bool($v),)+) => $body,
            #[allow(unreachable_patterns)]
            _ => $err,
        }
    };
}

/// Like `same_dtype!` for the four float dtypes only.
macro_rules! same_float {
    ($err:expr; ($($s:expr),+) => |$($v:ident),+| $body:expr) => {
        match ($($s,)+) {
            ($(Storage::F32($v),)+) => $body,
            ($(Storage::F64($v),)+) => $body,
            ($(Storage::F16($v),)+) => $body,
            ($(Storage::BF16($v),)+) => $body,
            #[allow(unreachable_patterns)]
            _ => $err,
        }
    };
}

pub(crate) use {same_dtype, same_float};
