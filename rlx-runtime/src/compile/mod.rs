//! The graph compiler: [`compile`] turns a [`Graph`] into an [`Executable`].
//!
//! Compilation is split from running (tract's `SimplePlan`/`SimpleState`):
//! the immutable plan (schedule, buffer slots, last uses, fused
//! instruction lists) is built once; each call borrows a mutable state that
//! owns the buffers. The executable keeps a small pool of warm states, so
//! concurrent calls each get their own and a warm call allocates nothing.
//!
//! Modules, in pipeline order:
//! - `plan`: grouping of element-wise chains, step selection, buffer
//!   planning by liveness;
//! - `fused`, `scalar`: block-wise fused loops and 0-d scalar regions,
//!   with the op math in `math`; `chain_form` and `chain` fuse runs of
//!   cheap ops inside a fused loop into register-resident chains;
//! - `matmul`, `reduce`, `solve`, `movement`: the other specialised
//!   steps; the remaining ops (gather, scatter-add, softmax, log-softmax)
//!   call the reference kernels, [`crate::kernels::eval_into`];
//! - `exec`: the per-call state and the step loop.
//!
//! Invariants: a plan is only built from a graph that passes
//! [`Graph::verify`], so shapes and dtypes seen by the steps are the
//! inferred ones; inputs and outputs are checked against the declared types
//! before every run, so the executor does not panic on any accepted input.

mod chain;
mod chain_form;
mod exec;
mod fused;
#[macro_use]
mod math;
mod matmul;
mod movement;
mod plan;
mod reduce;
mod scalar;
mod solve;

use std::sync::Mutex;

use rlx_core::{Error, Graph, Result, TensorType};

use crate::tensor::Tensor;
pub use plan::PlanStats;

/// Warm states kept per executable (more concurrent calls still work; their
/// extra states are dropped afterwards).
const POOL: usize = 4;

/// A compiled graph, ready to run many times (from many threads).
///
/// ```
/// use rlx_runtime::{compile, DType, Graph, Tensor};
/// let mut g = Graph::new();
/// let x = g.input("x", [3], DType::F64);
/// let y = g.sin(x).unwrap();
/// let two = g.scalar(2.0, DType::F64);
/// let z = g.mul(y, two).unwrap();
/// g.set_outputs(vec![z]);
/// let exe = compile(&g).unwrap();
/// let out = exe.run(&[&Tensor::from_slice(&[0.0, 1.0, 2.0], [3])]).unwrap();
/// assert_eq!(out[0].to_vec::<f64>().unwrap()[1], 2.0 * 1f64.sin());
/// ```
#[derive(Debug)]
pub struct Executable {
    plan: plan::Plan,
    /// Warm states. Boxed so that taking one out and putting it back moves
    /// a pointer, not the ~340-byte state (that copy showed up in profiles
    /// of small scalar graphs).
    #[allow(clippy::vec_box)]
    pool: Mutex<Vec<Box<exec::State>>>,
}

/// Compiles `g`: inlines custom ops, optimises, plans the schedule and buffers.
///
/// Errors if the graph violates its invariants ([`Graph::verify`]).
pub fn compile(g: &Graph) -> Result<Executable> {
    let g = prepare(g)?;
    let plan = plan::build(&g)?;
    let first = Box::new(exec::State::new(&plan));
    let mut pool = Vec::with_capacity(POOL);
    pool.push(first);
    Ok(Executable {
        plan,
        pool: Mutex::new(pool),
    })
}

/// The graph-level passes run before planning.
fn prepare(g: &Graph) -> Result<Graph> {
    let g = g.inline_custom()?;
    optimize(g)
}

/// The optimisation pipeline: `stop_gradient` only matters to autodiff, then
/// the fixed-point pipeline of `rlx_core::passes` (CSE, constant folding,
/// algebraic simplification, DCE).
fn optimize(g: Graph) -> Result<Graph> {
    let g = rlx_core::passes::strip_stop_gradient(&g)?;
    rlx_core::passes::optimize(&g)
}

impl Executable {
    /// Declared input types, in order.
    pub fn input_types(&self) -> &[TensorType] {
        &self.plan.input_types
    }

    /// Declared input names, in order.
    pub fn input_names(&self) -> &[String] {
        &self.plan.input_names
    }

    /// Output types, in order.
    pub fn output_types(&self) -> &[TensorType] {
        &self.plan.output_types
    }

    /// Counts describing the compiled plan (steps, fused loops, buffers).
    pub fn stats(&self) -> PlanStats {
        self.plan.stats
    }

    /// Runs on `inputs`, returning freshly allocated outputs.
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let mut outs: Vec<Tensor> = self
            .plan
            .output_types
            .iter()
            .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
            .collect();
        self.run_into(inputs, &mut outs)?;
        Ok(outs)
    }

    /// Runs on `inputs`, writing into `outputs`, which must be concrete
    /// tensors of the output types. A warm call allocates nothing, unless an
    /// output tensor's storage is shared with another tensor (it is then
    /// copied first, so the other tensor keeps its values) or a matrix
    /// product is larger than the small-product threshold (`matrixmultiply`
    /// allocates its packing buffer per call).
    pub fn run_into(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<()> {
        self.check(inputs, outputs)?;
        let mut state = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.pop()
        }
        .unwrap_or_else(|| Box::new(exec::State::new(&self.plan)));
        let res = exec::run(&self.plan, &mut state, inputs, outputs);
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(state);
        }
        res
    }

    fn check(&self, inputs: &[&Tensor], outputs: &[Tensor]) -> Result<()> {
        let p = &self.plan;
        if inputs.len() != p.input_types.len() {
            return Err(Error::CountMismatch {
                what: "inputs".into(),
                expected: p.input_types.len(),
                got: inputs.len(),
            });
        }
        for ((t, want), name) in inputs.iter().zip(&p.input_types).zip(&p.input_names) {
            if t.is_traced() {
                return Err(Error::Unsupported(format!(
                    "input `{name}` is a traced tensor; a compiled graph runs on concrete values"
                )));
            }
            if t.shape() != &want.shape || t.dtype() != want.dtype {
                return Err(Error::InputMismatch {
                    name: name.clone(),
                    expected_shape: want.shape.clone(),
                    expected_dtype: want.dtype,
                    got_shape: t.shape().clone(),
                    got_dtype: t.dtype(),
                });
            }
        }
        if outputs.len() != p.output_types.len() {
            return Err(Error::CountMismatch {
                what: "outputs".into(),
                expected: p.output_types.len(),
                got: outputs.len(),
            });
        }
        for (j, (t, want)) in outputs.iter().zip(&p.output_types).enumerate() {
            if t.is_traced() || t.shape() != &want.shape || t.dtype() != want.dtype {
                return Err(Error::InvalidArgument {
                    op: "run_into",
                    message: format!(
                        "output #{j} must be a concrete {}{} tensor, got {}{}{}",
                        want.dtype,
                        want.shape,
                        if t.is_traced() { "a traced " } else { "" },
                        t.dtype(),
                        t.shape()
                    ),
                });
            }
        }
        Ok(())
    }
}
