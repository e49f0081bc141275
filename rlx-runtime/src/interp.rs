//! The reference interpreter: runs a graph node by node with the kernels of
//! [`crate::kernels`], allocating each value and freeing it after its last use.
//!
//! It is the executable definition of a graph's meaning: simple, checked,
//! not fast. The compiler's plans must agree with it.

use rlx_core::{Error, Graph, Op, Result};

use crate::kernels::{eval_into, Operand};
use crate::storage::Storage;
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
/// use rlx_runtime::{interpret, DType, Graph, Tensor};
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

enum Val<'a> {
    Dead,
    Input(&'a Storage),
    Owned(Storage),
}

impl Val<'_> {
    fn get(&self) -> Option<&Storage> {
        match self {
            Val::Dead => None,
            Val::Input(s) => Some(s),
            Val::Owned(s) => Some(s),
        }
    }
}

/// Runs `g` on input values already checked against its declarations.
pub(crate) fn run_storages(g: &Graph, inputs: &[&Storage]) -> Result<Vec<Storage>> {
    g.verify()?;
    let n = g.len();
    // Last node that reads each value; outputs live to the end.
    let mut last_use = vec![0usize; n];
    for (i, node) in g.nodes().iter().enumerate() {
        for j in &node.inputs {
            last_use[j.index()] = i;
        }
    }
    for o in g.outputs() {
        last_use[o.index()] = usize::MAX;
    }
    let live = g.live_nodes();
    let mut vals: Vec<Val<'_>> = Vec::with_capacity(n);
    for (i, node) in g.nodes().iter().enumerate() {
        if !live[i] {
            vals.push(Val::Dead);
            continue;
        }
        let v = match &node.op {
            Op::Input { index } => {
                let s = inputs.get(*index).ok_or_else(|| Error::CountMismatch {
                    what: "inputs".into(),
                    expected: g.inputs().len(),
                    got: inputs.len(),
                })?;
                if s.len() != node.shape.numel() || s.dtype() != node.dtype {
                    return Err(Error::InputMismatch {
                        name: g.inputs()[*index].name.clone(),
                        expected_shape: node.shape.clone(),
                        expected_dtype: node.dtype,
                        got_shape: rlx_core::Shape::from([s.len()]),
                        got_dtype: s.dtype(),
                    });
                }
                Val::Input(s)
            }
            op => {
                let mut operands = Vec::with_capacity(node.inputs.len());
                for j in &node.inputs {
                    let s = vals[j.index()]
                        .get()
                        .expect("operands are live until their last use");
                    operands.push(Operand::new(s, g.shape(*j)));
                }
                let mut out = crate::storage::allocate(op.name(), &node.shape, node.dtype, 0.0)
                    .map_err(|e| at_node(g, i, e))?;
                eval_into(op, &operands, &node.shape, &mut out).map_err(|e| at_node(g, i, e))?;
                Val::Owned(out)
            }
        };
        vals.push(v);
        for j in &node.inputs {
            if last_use[j.index()] == i {
                vals[j.index()] = Val::Dead;
            }
        }
    }
    Ok(g.outputs()
        .iter()
        .map(|o| vals[o.index()].get().expect("outputs stay live").clone())
        .collect())
}

/// Data errors keep their variant; the node is named only for internal
/// inconsistencies, which the kernels report as `InvalidArgument`.
fn at_node(g: &Graph, i: usize, e: Error) -> Error {
    match e {
        Error::InvalidArgument { .. } | Error::DTypeMismatch { .. } | Error::Arity { .. } => {
            Error::InvalidGraph {
                node: i as u32,
                message: e.to_string(),
                context: g.context(i),
            }
        }
        other => other,
    }
}
