//! Eager evaluation of one op on concrete tensors: infer the output type,
//! allocate it, run the kernel.

use std::sync::Arc;

use rlx_core::{infer, Op, Result, TensorType};

use crate::kernels::{eval_into, Operand};
use crate::storage::allocate;
use crate::tensor::{Concrete, Repr, Tensor};
use crate::trace;

/// Computes `op` on concrete operands.
pub(crate) fn eval(op: &Op, inputs: &[&Concrete]) -> Result<Tensor> {
    let tys: Vec<TensorType> = inputs
        .iter()
        .map(|c| TensorType::new(c.shape.clone(), c.storage.dtype()))
        .collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let out = infer(op, &refs)?;
    // A value computed from a tensor captured from outside the current trace
    // is itself captured: it keeps that foreign origin, so that the trace
    // still refuses it (see `crate::trace`).
    let here = trace::current_id();
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
