//! Applying one op to tensors ([`Tensor::apply`]): recorded in the current
//! trace when an operand is traced, else evaluated eagerly on the concrete
//! operands (infer the output type, allocate it, run the kernel).

use std::panic::Location;

use rlx_core::{infer, BinaryOp, Op, Result, Shape, TensorType};

use crate::buffer::{Buffer, OWNED_MAX};
use crate::context;
use crate::kernels::solve::solve_eager;
use crate::kernels::{eval_into, scalar, Operand};
use crate::storage::{allocate, Storage};
use crate::tensor::{Concrete, Repr, Tensor};
use crate::trace;
use crate::value::same_dims;

impl Tensor {
    /// Applies a primitive op: records it when an operand is traced,
    /// otherwise computes it eagerly.
    ///
    /// Errors name the op and the operand shapes. In traced code the error
    /// is also recorded in the trace, with the caller's source location, so
    /// that the companion function returns it.
    #[track_caller]
    pub fn apply(op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
        if inputs.iter().any(|t| t.is_traced()) {
            trace::record(op, inputs, Location::caller())
        } else {
            fn c<'t>(t: &&'t Tensor) -> &'t Concrete {
                match &t.repr {
                    Repr::Concrete(c) => c,
                    Repr::Traced(_) => unreachable!("checked above"),
                }
            }
            // Up to three operands, every list lives on the stack.
            match inputs {
                [a] => eval(&op, [c(a)]),
                [a, b] => eval(&op, [c(a), c(b)]),
                [a, b, x] => eval(&op, [c(a), c(b), c(x)]),
                _ => eval_dyn(&op, &inputs.iter().map(c).collect::<Vec<_>>()),
            }
        }
    }

    /// Like [`Tensor::apply`], for methods and operators that return a
    /// `Tensor`: an eager error panics with its message; a traced error is
    /// recorded and a placeholder returned.
    #[track_caller]
    pub fn apply_or_panic(op: Op, inputs: &[&Tensor]) -> Tensor {
        let loc = Location::caller();
        match Tensor::apply(op, inputs) {
            Ok(t) => t,
            Err(e) => match trace::poison(inputs, e.clone()) {
                Some(t) => t,
                None => panic!("{}", e.at(loc.file(), loc.line(), loc.column())),
            },
        }
    }
}

/// Computes `op` on `N` concrete operands (an eager op on small tensors
/// allocates only its result).
fn eval<const N: usize>(op: &Op, inputs: [&Concrete; N]) -> Result<Tensor> {
    let tys = inputs.map(|c| TensorType::new(c.shape.clone(), c.storage.dtype()));
    let refs: [&TensorType; N] = std::array::from_fn(|i| &tys[i]);
    let operands = inputs.map(|c| Operand::new(&c.storage, &c.shape));
    eval_with(op, &inputs, &refs, &operands)
}

/// [`eval`] for any number of operands.
fn eval_dyn(op: &Op, inputs: &[&Concrete]) -> Result<Tensor> {
    let tys: Vec<TensorType> = inputs
        .iter()
        .map(|c| TensorType::new(c.shape.clone(), c.storage.dtype()))
        .collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let operands: Vec<Operand<'_>> = inputs
        .iter()
        .map(|c| Operand::new(&c.storage, &c.shape))
        .collect();
    eval_with(op, inputs, &refs, &operands)
}

/// Computes `op` on concrete operands, given their types and operands.
fn eval_with(
    op: &Op,
    inputs: &[&Concrete],
    tys: &[&TensorType],
    operands: &[Operand<'_>],
) -> Result<Tensor> {
    // A value computed from a tensor captured from outside the current trace
    // is itself captured: it keeps that foreign origin, so that the trace
    // still refuses it (see `crate::trace`).
    let here = context::current_id();
    let origin = inputs
        .iter()
        .map(|c| c.origin)
        .find(|&o| o != here)
        .unwrap_or(here);
    if let Some((storage, shape)) = eval_small(op, inputs) {
        return Ok(Tensor {
            repr: Repr::Concrete(Concrete {
                storage,
                shape,
                origin,
            }),
        });
    }
    let out = infer(op, tys)?;
    // Ops that keep the values as they are share the storage (a small
    // tensor's is copied, see `crate::buffer`).
    let storage = if matches!(op, Op::Reshape { .. } | Op::StopGradient) {
        inputs[0].storage.clone()
    } else {
        let mut storage = allocate(op.name(), &out.shape, out.dtype, 0.0)?;
        eval_into(op, operands, &out.shape, &mut storage)?;
        Buffer::new(storage)
    };
    Ok(Tensor {
        repr: Repr::Concrete(Concrete {
            storage,
            shape: out.shape,
            origin,
        }),
    })
}

/// The eager ops on small tensors that need none of the general path's
/// machinery (type inference, a zeroed result, the broadcasting kernels),
/// which costs several times the op itself on a 2-element tensor (a
/// Newton step on a 2-state ODE is made of them): a reshape to a shape of
/// as many elements, a binary arithmetic op on two `f64` tensors of at
/// most [`OWNED_MAX`] elements with equal shapes or one 0-d operand, and
/// a solve of a small `f64` system.
/// `None` for everything else, including every input that is an error:
/// the general path then reports it.
///
/// The values are those of the general kernels: the same scalar function
/// ([`scalar::binary`]) on the same elements.
#[inline]
fn eval_small(op: &Op, inputs: &[&Concrete]) -> Option<(Buffer, Shape)> {
    match (op, inputs) {
        (Op::Reshape { shape }, [x]) => {
            let ok = shape.fits(x.storage.dtype()) && shape.numel() == x.shape.numel();
            ok.then(|| (x.storage.clone(), shape.clone()))
        }
        (Op::Binary(b), [x, y]) if !matches!(b, BinaryOp::And | BinaryOp::Or) => {
            let (Storage::F64(p), Storage::F64(q)) = (&*x.storage, &*y.storage) else {
                return None;
            };
            if p.len() > OWNED_MAX || q.len() > OWNED_MAX {
                return None;
            }
            let f = |u, v| scalar::binary(*b, u, v);
            let (values, shape): (Vec<f64>, _) = if same_dims(x.shape.dims(), y.shape.dims()) {
                (p.iter().zip(q).map(|(&u, &v)| f(u, v)).collect(), &x.shape)
            } else if y.shape.rank() == 0 {
                (p.iter().map(|&u| f(u, q[0])).collect(), &x.shape)
            } else if x.shape.rank() == 0 {
                (q.iter().map(|&v| f(p[0], v)).collect(), &y.shape)
            } else {
                return None;
            };
            Some((Buffer::new(Storage::F64(values)), shape.clone()))
        }
        // A small `f64` system `[n, n] x = [n, k]`: the eager kernel on a
        // fresh result, without inferring the type (the kernel checks the
        // shapes). A singular or malformed system goes the general way,
        // which reports it.
        (Op::Solve, [a, b]) if b.storage.len() <= OWNED_MAX && b.shape.rank() == 2 => {
            let (Storage::F64(_), Storage::F64(_)) = (&*a.storage, &*b.storage) else {
                return None;
            };
            let mut out = Storage::F64(vec![0.0; b.storage.len()]);
            let (oa, ob) = (
                Operand::new(&a.storage, &a.shape),
                Operand::new(&b.storage, &b.shape),
            );
            solve_eager(oa, ob, &mut out).ok()?;
            Some((Buffer::new(out), b.shape.clone()))
        }
        _ => None,
    }
}
