//! Element-wise kernels: constant fill, unary, binary, compare, select, cast.

use half::{bf16, f16};
use num_complex::Complex;
use rlx_core::{BinaryOp, CmpOp, Literal, Result, UnaryOp};

use super::complex;
use super::iter::{map1, zip2, zip3};
use super::operand::{dtype_error, same_dtype, same_real, Operand};
use super::scalar::{self, Float};
use crate::storage::{Element, Storage};

/// Fills `out` from a literal (a splat or one value per element).
pub(super) fn constant(lit: &Literal, out: &mut Storage) {
    fn fill<T: Element>(lit: &Literal, o: &mut [T]) {
        for (i, v) in o.iter_mut().enumerate() {
            *v = T::from_f64(lit.get_f64(i));
        }
    }
    match out {
        Storage::F32(o) => fill(lit, o),
        Storage::F64(o) => fill(lit, o),
        Storage::F16(o) => fill(lit, o),
        Storage::BF16(o) => fill(lit, o),
        Storage::I64(o) => {
            for (i, v) in o.iter_mut().enumerate() {
                *v = lit.get_i64(i);
            }
        }
        Storage::Bool(o) => fill(lit, o),
        Storage::C32(o) => fill(lit, o),
        Storage::C64(o) => fill(lit, o),
    }
}

fn float_unary<T: Float>(op: UnaryOp, x: &[T], out: &mut [T]) {
    map1(x, out, |v| T::store(scalar::unary(op, v.load())));
}

pub(super) fn unary(op: UnaryOp, x: Operand<'_>, out: &mut Storage) -> Result<()> {
    let err = dtype_error(op.name(), x.storage.dtype(), out.dtype());
    match (x.storage, out) {
        (Storage::F32(a), Storage::F32(o)) => float_unary(op, a, o),
        (Storage::F64(a), Storage::F64(o)) => float_unary(op, a, o),
        (Storage::F16(a), Storage::F16(o)) => float_unary(op, a, o),
        (Storage::BF16(a), Storage::BF16(o)) => float_unary(op, a, o),
        (Storage::I64(a), Storage::I64(o)) => map1(a, o, |v| scalar::unary_i64(op, v)),
        (Storage::Bool(a), Storage::Bool(o)) => map1(a, o, |v| scalar::unary_bool(op, v)),
        (Storage::C32(a), Storage::C32(o)) => map1(a, o, |v| complex::unary_c32(op, v)),
        (Storage::C64(a), Storage::C64(o)) => map1(a, o, |v| complex::unary_c64(op, v)),
        (Storage::C32(a), Storage::F32(o)) => map1(a, o, |v| complex::parts_c32(op, v)),
        (Storage::C64(a), Storage::F64(o)) => map1(a, o, |v| complex::parts_c64(op, v)),
        _ => return Err(err),
    }
    Ok(())
}

fn float_binary<T: Float>(
    op: BinaryOp,
    so: &[usize],
    a: (&[T], &[usize]),
    b: (&[T], &[usize]),
    out: &mut [T],
) {
    zip2(so, a, b, out, |x, y| {
        T::store(scalar::binary(op, x.load(), y.load()))
    });
}

pub(super) fn binary(
    op: BinaryOp,
    a: Operand<'_>,
    b: Operand<'_>,
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let err = dtype_error(op.name(), a.storage.dtype(), b.storage.dtype());
    let (sa, sb) = (a.dims(), b.dims());
    match (a.storage, b.storage, out) {
        (Storage::F32(x), Storage::F32(y), Storage::F32(o)) => {
            float_binary(op, so, (x, sa), (y, sb), o)
        }
        (Storage::F64(x), Storage::F64(y), Storage::F64(o)) => {
            float_binary(op, so, (x, sa), (y, sb), o)
        }
        (Storage::F16(x), Storage::F16(y), Storage::F16(o)) => {
            float_binary(op, so, (x, sa), (y, sb), o)
        }
        (Storage::BF16(x), Storage::BF16(y), Storage::BF16(o)) => {
            float_binary(op, so, (x, sa), (y, sb), o)
        }
        (Storage::I64(x), Storage::I64(y), Storage::I64(o)) => {
            zip2(so, (x, sa), (y, sb), o, |p, q| scalar::binary_i64(op, p, q))
        }
        (Storage::Bool(x), Storage::Bool(y), Storage::Bool(o)) => {
            zip2(so, (x, sa), (y, sb), o, |p, q| {
                scalar::binary_bool(op, p, q)
            })
        }
        (Storage::C32(x), Storage::C32(y), Storage::C32(o)) => {
            zip2(so, (x, sa), (y, sb), o, |p, q| {
                complex::binary_c32(op, p, q)
            })
        }
        (Storage::C64(x), Storage::C64(y), Storage::C64(o)) => {
            zip2(so, (x, sa), (y, sb), o, |p, q| {
                complex::binary_c64(op, p, q)
            })
        }
        (Storage::F32(x), Storage::F32(y), Storage::C32(o)) => {
            zip2(so, (x, sa), (y, sb), o, Complex::new)
        }
        (Storage::F64(x), Storage::F64(y), Storage::C64(o)) => {
            zip2(so, (x, sa), (y, sb), o, Complex::new)
        }
        _ => return Err(err),
    }
    Ok(())
}

pub(super) fn compare(
    op: CmpOp,
    a: Operand<'_>,
    b: Operand<'_>,
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let Storage::Bool(o) = out else {
        return Err(dtype_error(op.name(), a.storage.dtype(), out.dtype()));
    };
    let err = dtype_error(op.name(), a.storage.dtype(), b.storage.dtype());
    let (sa, sb) = (a.dims(), b.dims());
    // Complex values are never ordered: only `eq` and `ne` (`infer` rejects the others).
    let equal = matches!(op, CmpOp::Eq);
    match (a.storage, b.storage) {
        (Storage::C32(x), Storage::C32(y)) => {
            zip2(so, (x, sa), (y, sb), o, |p, q| (p == q) == equal);
            return Ok(());
        }
        (Storage::C64(x), Storage::C64(y)) => {
            zip2(so, (x, sa), (y, sb), o, |p, q| (p == q) == equal);
            return Ok(());
        }
        _ => {}
    }
    // Every real storage type's `PartialOrd` is the IEEE (or integer) order.
    same_real!(Err(err); (a.storage, b.storage) => |x, y| {
        zip2(so, (x, sa), (y, sb), o, |p, q| scalar::compare(op, p, q));
        Ok(())
    })
}

pub(super) fn select(
    c: Operand<'_>,
    a: Operand<'_>,
    b: Operand<'_>,
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let Storage::Bool(m) = c.storage else {
        return Err(dtype_error("select", c.storage.dtype(), out.dtype()));
    };
    let err = dtype_error("select", a.storage.dtype(), b.storage.dtype());
    let (sc, sa, sb) = (c.dims(), a.dims(), b.dims());
    same_dtype!(Err(err); (a.storage, b.storage, out) => |x, y, o| {
        zip3(so, (m, sc), (x, sa), (y, sb), o, |k, p, q| if k { p } else { q });
        Ok(())
    })
}

/// Conversion between any two dtypes, through `f64` (exact for every float
/// and bool; `i64 -> i64` is a copy). Floats to `i64` truncate toward zero
/// and saturate (NaN gives 0); to `bool`, non-zero (and NaN) is `true`.
/// A real value becomes a complex one with a zero imaginary part; a
/// complex one becomes real by its real part (the explicit cast, the one
/// way besides `real`, `imag`, `abs`, `arg` and `norm_sqr` to leave the
/// complex numbers); between `c32` and `c64` each part is converted.
pub(super) fn cast(x: Operand<'_>, out: &mut Storage) -> Result<()> {
    fn from<S: Element>(x: &[S], out: &mut Storage) {
        match out {
            Storage::F32(o) => map1(x, o, |v| f32::from_f64(v.to_f64())),
            Storage::F64(o) => map1(x, o, |v| v.to_f64()),
            Storage::F16(o) => map1(x, o, |v| f16::from_f64(v.to_f64())),
            Storage::BF16(o) => map1(x, o, |v| bf16::from_f64(v.to_f64())),
            Storage::I64(o) => map1(x, o, |v| v.to_f64() as i64),
            Storage::Bool(o) => map1(x, o, |v| v.to_f64() != 0.0),
            Storage::C32(o) => map1(x, o, |v| Complex::<f32>::from_c64(v.to_c64())),
            Storage::C64(o) => map1(x, o, |v| v.to_c64()),
        }
    }
    match x.storage {
        Storage::F32(v) => from(v, out),
        Storage::F64(v) => from(v, out),
        Storage::F16(v) => from(v, out),
        Storage::BF16(v) => from(v, out),
        Storage::I64(v) => match out {
            Storage::I64(o) => o.copy_from_slice(v),
            other => from(v, other),
        },
        Storage::Bool(v) => from(v, out),
        Storage::C32(v) => from(v, out),
        Storage::C64(v) => from(v, out),
    }
    Ok(())
}
