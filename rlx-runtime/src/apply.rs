//! Applying one op to tensors ([`Tensor::apply`]): recorded in the current
//! trace when an operand is traced, else evaluated eagerly on the concrete
//! operands (infer the output type, allocate it, run the kernel).

use std::panic::Location;
use std::sync::Arc;

use rlx_core::{infer, Op, Result, TensorType};

use crate::context;
use crate::kernels::{eval_into, Operand};
use crate::storage::allocate;
use crate::tensor::{Concrete, Repr, Tensor};
use crate::trace;

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
            let concrete: Vec<&Concrete> = inputs
                .iter()
                .map(|t| match &t.repr {
                    Repr::Concrete(c) => c,
                    Repr::Traced(_) => unreachable!("checked above"),
                })
                .collect();
            eval(&op, &concrete)
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

/// Computes `op` on concrete operands.
fn eval(op: &Op, inputs: &[&Concrete]) -> Result<Tensor> {
    let tys: Vec<TensorType> = inputs
        .iter()
        .map(|c| TensorType::new(c.shape.clone(), c.storage.dtype()))
        .collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let out = infer(op, &refs)?;
    // A value computed from a tensor captured from outside the current trace
    // is itself captured: it keeps that foreign origin, so that the trace
    // still refuses it (see `crate::trace`).
    let here = context::current_id();
    let origin = inputs
        .iter()
        .map(|c| c.origin)
        .find(|&o| o != here)
        .unwrap_or(here);
    // Ops that keep the values as they are share the storage.
    let storage = if matches!(op, Op::Reshape { .. } | Op::StopGradient) {
        Arc::clone(&inputs[0].storage)
    } else {
        let mut storage = allocate(op.name(), &out.shape, out.dtype, 0.0)?;
        let operands: Vec<Operand<'_>> = inputs
            .iter()
            .map(|c| Operand::new(&c.storage, &c.shape))
            .collect();
        eval_into(op, &operands, &out.shape, &mut storage)?;
        Arc::new(storage)
    };
    Ok(Tensor {
        repr: Repr::Concrete(Concrete {
            storage,
            shape: out.shape,
            origin,
        }),
    })
}
