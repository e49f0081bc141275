//! Eager ops on small tensors without the general path's machinery.
//!
//! On a 2-element tensor, inferring the output type, allocating a zeroed
//! result and walking the broadcasting kernels cost several times the op
//! itself, and a Newton step on a 2-state ODE is made of such ops. The
//! ops here are the ones that code uses most, on concrete operands of at
//! most [`OWNED_MAX`] elements:
//!
//! - a reshape to a shape of as many elements (any size: the values are
//!   shared or copied, never computed);
//! - a float unary op (every one but `Not`, which takes `bool`s);
//! - a float arithmetic binary op (not `And`/`Or`) on two operands of one
//!   dtype with equal shapes, or with one 0-d operand;
//! - a solve `[n, n] x = [n, k]` in `f64`.
//!
//! Every result is bit for bit the general kernel's: the same scalar
//! function ([`scalar::unary`], [`scalar::binary`], [`factor_and_solve`])
//! on the same elements, widened and rounded the same way ([`Float`]).
//! For anything else, including every input that is an error (shapes that
//! do not match, mixed dtypes, a singular matrix), [`eval_small`] returns
//! `None` and the general path computes the op or reports the error, so
//! errors are unchanged.

use rlx_core::{BinaryOp, DType, Op, Shape, UnaryOp};

use crate::buffer::{Buffer, OWNED_MAX};
use crate::kernels::scalar::{self, Float};
use crate::kernels::solve::{eps, factor_and_solve};
use crate::storage::{Element, Storage};
use crate::tensor::Concrete;
use crate::value::same_dims;

/// `op` on small concrete operands, or `None` where the general path must
/// compute it (see the module docs).
#[inline]
pub(super) fn eval_small(op: &Op, inputs: &[&Concrete]) -> Option<(Buffer, Shape)> {
    match (op, inputs) {
        (Op::Reshape { shape }, [x]) => {
            let ok = shape.fits(x.storage.dtype()) && shape.numel() == x.shape.numel();
            ok.then(|| (x.storage.clone(), shape.clone()))
        }
        (Op::Unary(u), [x]) if !matches!(u, UnaryOp::Not) && !u.complex_only() => {
            Some((Buffer::new(unary(*u, &x.storage)?), x.shape.clone()))
        }
        (Op::Binary(b), [x, y])
            if !matches!(b, BinaryOp::And | BinaryOp::Or | BinaryOp::Complex) =>
        {
            let (values, shape) = binary(*b, x, y)?;
            Some((Buffer::new(values), shape.clone()))
        }
        (Op::Solve, [a, b]) => Some((Buffer::new(solve(a, b)?), b.shape.clone())),
        _ => None,
    }
}

/// A float unary op on at most [`OWNED_MAX`] elements.
#[inline]
fn unary(op: UnaryOp, x: &Storage) -> Option<Storage> {
    #[inline]
    fn go<T: Float + Element>(op: UnaryOp, x: &[T]) -> Storage {
        T::into_storage(
            x.iter()
                .map(|&v| T::store(scalar::unary(op, v.load())))
                .collect(),
        )
    }
    if x.len() > OWNED_MAX {
        return None;
    }
    Some(match x {
        Storage::F64(v) => go(op, v),
        Storage::F32(v) => go(op, v),
        Storage::F16(v) => go(op, v),
        Storage::BF16(v) => go(op, v),
        Storage::I64(_) | Storage::Bool(_) | Storage::C32(_) | Storage::C64(_) => return None,
    })
}

/// A float binary op on at most [`OWNED_MAX`] elements per operand, with
/// equal shapes or one 0-d operand; the result and its shape.
#[inline]
fn binary<'c>(op: BinaryOp, x: &'c Concrete, y: &'c Concrete) -> Option<(Storage, &'c Shape)> {
    #[inline]
    fn go<'c, T: Float + Element>(
        op: BinaryOp,
        (p, xs): (&[T], &'c Shape),
        (q, ys): (&[T], &'c Shape),
    ) -> Option<(Storage, &'c Shape)> {
        let f = |u: T, v: T| T::store(scalar::binary(op, u.load(), v.load()));
        let (values, shape): (Vec<T>, _) = if same_dims(xs.dims(), ys.dims()) {
            (p.iter().zip(q).map(|(&u, &v)| f(u, v)).collect(), xs)
        } else if ys.rank() == 0 {
            (p.iter().map(|&u| f(u, q[0])).collect(), xs)
        } else if xs.rank() == 0 {
            (q.iter().map(|&v| f(p[0], v)).collect(), ys)
        } else {
            return None;
        };
        Some((T::into_storage(values), shape))
    }
    if x.storage.len() > OWNED_MAX || y.storage.len() > OWNED_MAX {
        return None;
    }
    let (xs, ys) = (&x.shape, &y.shape);
    match (&*x.storage, &*y.storage) {
        (Storage::F64(p), Storage::F64(q)) => go(op, (p, xs), (q, ys)),
        (Storage::F32(p), Storage::F32(q)) => go(op, (p, xs), (q, ys)),
        (Storage::F16(p), Storage::F16(q)) => go(op, (p, xs), (q, ys)),
        (Storage::BF16(p), Storage::BF16(q)) => go(op, (p, xs), (q, ys)),
        _ => None,
    }
}

/// `a x = b` for an `f64` matrix `a: [n, n]` and `b: [n, k]` of at most
/// [`OWNED_MAX`] elements each: the general kernel's factorisation
/// ([`factor_and_solve`], straight-line for a 2×2) on stack copies.
/// `None` when singular, so that the general path reports it.
#[inline]
fn solve(a: &Concrete, b: &Concrete) -> Option<Storage> {
    let (Storage::F64(p), Storage::F64(q)) = (&*a.storage, &*b.storage) else {
        return None;
    };
    let (&[n, m], &[r, k]) = (a.shape.dims(), b.shape.dims()) else {
        return None;
    };
    if n != m || r != n || p.len() > OWNED_MAX || q.len() > OWNED_MAX {
        return None;
    }
    let (mut lu, mut x) = ([0.0; OWNED_MAX], [0.0; OWNED_MAX]);
    let (lu, x) = (&mut lu[..p.len()], &mut x[..q.len()]);
    lu.copy_from_slice(p);
    x.copy_from_slice(q);
    factor_and_solve(n, k, lu, x, eps(DType::F64)).ok()?;
    Some(Storage::F64(x.to_vec()))
}
