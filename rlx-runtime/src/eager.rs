//! Eager evaluation of one op on concrete tensors.

use rlx_core::{infer, Error, Op, Result, TensorType};

use crate::tensor::{Concrete, Tensor};

/// Computes `op` on concrete operands.
pub(crate) fn eval(op: &Op, inputs: &[&Concrete]) -> Result<Tensor> {
    let tys: Vec<TensorType> = inputs
        .iter()
        .map(|c| TensorType::new(c.shape.clone(), c.storage.dtype()))
        .collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let _out = infer(op, &refs)?;
    Err(Error::Unsupported(format!(
        "eager `{}` is not available yet (kernels land with the runtime)",
        op.name()
    )))
}
