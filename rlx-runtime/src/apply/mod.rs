//! Applying one op to tensors ([`Tensor::apply`]): recorded in the current
//! trace when an operand is traced, else evaluated eagerly on the concrete
//! operands: by a fast path for small tensors when one applies (see
//! [`small`]), otherwise by the general path (infer the output type,
//! allocate it, run the kernel).

use std::panic::Location;

use rlx_core::{infer, Op, Result, Shape, TensorType};

use crate::buffer::Buffer;
use crate::context;
use crate::kernels::{eval_into, Operand};
use crate::storage::allocate;
use crate::tensor::{Concrete, Repr, Tensor};
use crate::trace;

mod small;

impl Tensor {
    /// Applies a primitive op: records it when an operand is traced,
    /// otherwise computes it eagerly.
    ///
    /// Errors name the op and the operand shapes. In traced code the error
    /// is also recorded in the trace, with the caller's source location, so
    /// that the companion function returns it.
    ///
    /// A binary op or matrix product of a real float and a complex operand
    /// first casts the real one to the complex dtype.
    #[track_caller]
    pub fn apply(op: Op, inputs: &[&Tensor]) -> Result<Tensor> {
        if let Some((k, dtype)) = crate::ops::complex::promotion(&op, inputs) {
            let cast = Tensor::apply(Op::Cast(dtype), &[inputs[k]])?;
            let mut promoted = [inputs[0], inputs[1]];
            promoted[k] = &cast;
            return Tensor::apply(op, &promoted);
        }
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
        match Tensor::apply(op, inputs) {
            Ok(t) => t,
            Err(e) => Tensor::failed(inputs, e),
        }
    }

    /// An op on `inputs` failed with `e` before it reached [`Tensor::apply`]
    /// (its arguments were checked first): traced, the error is recorded
    /// with the caller's line and a placeholder returned; eager, it panics
    /// there.
    #[track_caller]
    pub(crate) fn failed(inputs: &[&Tensor], e: rlx_core::Error) -> Tensor {
        let loc = Location::caller();
        let e = e.at(loc.file(), loc.line(), loc.column());
        match trace::poison(inputs, e.clone()) {
            Some(t) => t,
            None => panic!("{e}"),
        }
    }
}

/// Computes `op` on `N` concrete operands (an eager op on small tensors
/// allocates only its result). The small-tensor fast paths come first,
/// before any type is inferred or operand built (see [`small`]).
#[inline]
fn eval<const N: usize>(op: &Op, inputs: [&Concrete; N]) -> Result<Tensor> {
    if let Some((storage, shape)) = small::eval_small(op, &inputs) {
        return Ok(concrete(storage, shape, origin(&inputs)));
    }
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
    let origin = origin(inputs);
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
    Ok(concrete(storage, out.shape, origin))
}

/// The trace a result computed from `inputs` belongs to.
///
/// A value computed from a tensor captured from outside the current trace
/// is itself captured: it keeps that foreign origin, so that the trace
/// still refuses it (see `crate::trace`).
#[inline]
fn origin(inputs: &[&Concrete]) -> u64 {
    let here = context::current_id();
    inputs
        .iter()
        .map(|c| c.origin)
        .find(|&o| o != here)
        .unwrap_or(here)
}

/// A concrete tensor of `storage` (as many elements as `shape` has).
#[inline]
fn concrete(storage: Buffer, shape: Shape, origin: u64) -> Tensor {
    Tensor {
        repr: Repr::Concrete(Concrete {
            storage,
            shape,
            origin,
        }),
    }
}
