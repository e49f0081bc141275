//! Per-op kernels for the ops the compiler does not specialise (gather,
//! scatter-add, softmax, log-softmax), with the signature of the reference
//! kernels `rlx_runtime::kernels::eval_into`.
//!
//! These are the compiler's fallback until the reference kernels are
//! available to it; they allocate nothing. Each works on the layout
//! `[outer, axis, inner]` around the op's axis.

use rlx_core::{Error, Op, Result, Shape};

use crate::storage::{Element, Storage};

/// One operand of a kernel: values and shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand<'a> {
    pub(crate) storage: &'a Storage,
    pub(crate) shape: &'a Shape,
}

/// `(outer, axis, inner)` sizes around `axis`.
fn split_axis(s: &Shape, axis: usize) -> (usize, usize, usize) {
    let d = s.dims();
    (
        d[..axis].iter().product(),
        d[axis],
        d[axis + 1..].iter().product(),
    )
}

fn unsupported(op: &Op) -> Error {
    Error::Unsupported(format!(
        "the compiler has no fallback kernel for `{}` (it is planned as its own step)",
        op.name()
    ))
}

/// Computes `op` on `inputs` into `out` (which has the output dtype and length).
pub(crate) fn eval_into(
    op: &Op,
    inputs: &[Operand<'_>],
    out_shape: &Shape,
    out: &mut Storage,
) -> Result<()> {
    let _ = out_shape;
    match op {
        Op::Gather { axis } => gather(inputs[0], inputs[1], *axis, out),
        Op::ScatterAdd { axis } => scatter_add(inputs[0], inputs[1], inputs[2], *axis, out),
        Op::Softmax { axis } => {
            softmax(inputs[0], *axis, out, false);
            Ok(())
        }
        Op::LogSoftmax { axis } => {
            softmax(inputs[0], *axis, out, true);
            Ok(())
        }
        Op::Input { .. }
        | Op::Constant(_)
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Cast(_)
        | Op::Reduce { .. }
        | Op::MatMul
        | Op::Transpose { .. }
        | Op::Reshape { .. }
        | Op::Broadcast { .. }
        | Op::Concat { .. }
        | Op::Slice { .. }
        | Op::Solve
        | Op::StopGradient
        | Op::Custom(_) => Err(unsupported(op)),
    }
}

fn indices(idx: Operand<'_>) -> &[i64] {
    match idx.storage {
        Storage::I64(v) => v,
        // Shape inference only admits i64 indices.
        _ => &[],
    }
}

fn check_index(op: &'static str, i: i64, axis: usize, size: usize) -> Result<usize> {
    if i < 0 || i as u64 >= size as u64 {
        return Err(Error::IndexOutOfRange {
            op,
            index: i,
            axis,
            size,
        });
    }
    Ok(i as usize)
}

fn gather(x: Operand<'_>, idx: Operand<'_>, axis: usize, out: &mut Storage) -> Result<()> {
    let (outer, size, inner) = split_axis(x.shape, axis);
    let ids = indices(idx);
    for &i in ids {
        check_index("gather", i, axis, size)?;
    }
    fn go<T: Copy>(x: &[T], o: &mut [T], ids: &[i64], (outer, size, inner): (usize, usize, usize)) {
        let nidx = ids.len();
        for a in 0..outer {
            for (j, &i) in ids.iter().enumerate() {
                let s = (a * size + i as usize) * inner;
                let d = (a * nidx + j) * inner;
                o[d..d + inner].copy_from_slice(&x[s..s + inner]);
            }
        }
    }
    let dims = (outer, size, inner);
    match (x.storage, out) {
        (Storage::F32(x), Storage::F32(o)) => go(x, o, ids, dims),
        (Storage::F64(x), Storage::F64(o)) => go(x, o, ids, dims),
        (Storage::F16(x), Storage::F16(o)) => go(x, o, ids, dims),
        (Storage::BF16(x), Storage::BF16(o)) => go(x, o, ids, dims),
        (Storage::I64(x), Storage::I64(o)) => go(x, o, ids, dims),
        (Storage::Bool(x), Storage::Bool(o)) => go(x, o, ids, dims),
        _ => unreachable!("gather keeps the dtype (checked by shape inference)"),
    }
    Ok(())
}

fn scatter_add(
    operand: Operand<'_>,
    idx: Operand<'_>,
    upd: Operand<'_>,
    axis: usize,
    out: &mut Storage,
) -> Result<()> {
    let (outer, size, inner) = split_axis(operand.shape, axis);
    let ids = indices(idx);
    for &i in ids {
        check_index("scatter_add", i, axis, size)?;
    }
    fn go<T: Copy>(
        x: &[T],
        u: &[T],
        o: &mut [T],
        ids: &[i64],
        (outer, size, inner): (usize, usize, usize),
        add: impl Fn(T, T) -> T,
    ) {
        o.copy_from_slice(x);
        let nidx = ids.len();
        for a in 0..outer {
            for (j, &i) in ids.iter().enumerate() {
                let d = (a * size + i as usize) * inner;
                let s = (a * nidx + j) * inner;
                for t in 0..inner {
                    o[d + t] = add(o[d + t], u[s + t]);
                }
            }
        }
    }
    fn fadd<T: Element>(a: T, b: T) -> T {
        T::from_f64(a.to_f64() + b.to_f64())
    }
    let dims = (outer, size, inner);
    match (operand.storage, upd.storage, out) {
        (Storage::F32(x), Storage::F32(u), Storage::F32(o)) => go(x, u, o, ids, dims, |a, b| a + b),
        (Storage::F64(x), Storage::F64(u), Storage::F64(o)) => go(x, u, o, ids, dims, |a, b| a + b),
        (Storage::F16(x), Storage::F16(u), Storage::F16(o)) => go(x, u, o, ids, dims, fadd),
        (Storage::BF16(x), Storage::BF16(u), Storage::BF16(o)) => go(x, u, o, ids, dims, fadd),
        (Storage::I64(x), Storage::I64(u), Storage::I64(o)) => {
            go(x, u, o, ids, dims, i64::wrapping_add)
        }
        (Storage::Bool(x), Storage::Bool(u), Storage::Bool(o)) => {
            go(x, u, o, ids, dims, |a, b| a | b)
        }
        _ => unreachable!("scatter_add keeps the dtype (checked by shape inference)"),
    }
    Ok(())
}

/// Softmax (or log-softmax) along `axis`, computed in `f64`.
fn softmax(x: Operand<'_>, axis: usize, out: &mut Storage, log: bool) {
    let (outer, size, inner) = split_axis(x.shape, axis);
    fn go<T: Element>(
        x: &[T],
        o: &mut [T],
        (outer, size, inner): (usize, usize, usize),
        log: bool,
    ) {
        for a in 0..outer {
            for i in 0..inner {
                let at = |j: usize| (a * size + j) * inner + i;
                let mut m = f64::NEG_INFINITY;
                for j in 0..size {
                    m = m.max(x[at(j)].to_f64());
                }
                if m == f64::NEG_INFINITY || m.is_nan() {
                    // All -inf (or NaN): keep IEEE behaviour of x - max.
                    m = 0.0;
                }
                let mut s = 0.0;
                for j in 0..size {
                    s += (x[at(j)].to_f64() - m).exp();
                }
                let ls = s.ln();
                for j in 0..size {
                    let v = x[at(j)].to_f64() - m;
                    o[at(j)] = T::from_f64(if log { v - ls } else { v.exp() / s });
                }
            }
        }
    }
    let dims = (outer, size, inner);
    match (x.storage, out) {
        (Storage::F32(x), Storage::F32(o)) => go(x, o, dims, log),
        (Storage::F64(x), Storage::F64(o)) => go(x, o, dims, log),
        (Storage::F16(x), Storage::F16(o)) => go(x, o, dims, log),
        (Storage::BF16(x), Storage::BF16(o)) => go(x, o, dims, log),
        _ => unreachable!("softmax takes floats (checked by shape inference)"),
    }
}
