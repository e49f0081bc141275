//! The reference interpreter: runs a graph node by node with the kernels of
//! [`crate::kernels`], allocating each value and freeing it after its last use.
//!
//! It is the executable definition of a graph's meaning: simple, checked,
//! not fast. The compiler's plans must agree with it.

use rlx_core::{Error, Graph, Result};

use crate::kernels::run_storages;
use crate::tensor::Tensor;

/// Runs `g` on `inputs` and returns its outputs.
///
/// Errors if the number of inputs differs from the graph's
/// ([`Error::CountMismatch`]), if an input's shape or dtype differs from its
/// declaration ([`Error::InputMismatch`], naming the input), if an input is
/// traced, and for data errors of the kernels (a singular matrix, an index out
/// of range).
///
/// ```
/// use rlx::{runtime::interpret, DType, Graph, Tensor};
/// let mut g = Graph::new();
/// let x = g.input("x", [2], DType::F64);
/// let y = g.mul(x, x).unwrap();
/// g.set_outputs(vec![y]);
/// let out = interpret(&g, &[&Tensor::from_slice(&[3.0f64, 4.0], [2])]).unwrap();
/// assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![9.0, 16.0]);
/// ```
pub fn interpret(g: &Graph, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    if inputs.len() != g.inputs().len() {
        return Err(Error::CountMismatch {
            what: "inputs".into(),
            expected: g.inputs().len(),
            got: inputs.len(),
        });
    }
    let mut storages = Vec::with_capacity(inputs.len());
    for (decl, t) in g.inputs().iter().zip(inputs) {
        let want = g.try_node(decl.node)?;
        if t.shape() != &want.shape || t.dtype() != want.dtype {
            return Err(Error::InputMismatch {
                name: decl.name.clone(),
                expected_shape: want.shape.clone(),
                expected_dtype: want.dtype,
                got_shape: t.shape().clone(),
                got_dtype: t.dtype(),
            });
        }
        storages.push(t.storage()?);
    }
    let outs = run_storages(g, &storages)?;
    outs.into_iter()
        .zip(g.outputs())
        .map(|(s, o)| Tensor::from_storage(s, g.shape(*o).clone()))
        .collect()
}
