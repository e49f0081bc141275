//! The traced graph of a signature ([`Function::graph`]) and its `n`-th
//! derivatives ([`Function::run_nth`], for `nth_derivative_*`), compiled
//! once per signature, parameter and order and kept in the signature's
//! cache entry.

use std::sync::{Arc, PoisonError};

use rlx_core::{autodiff, Error, Graph, Result};

use crate::compile::{compile_owned, Options};
use crate::function::cache::{Entry, Function, StaticArg, Tracer};
use crate::function::nans::check_values;
use crate::function::plan::NthPlan;
use crate::tensor::Tensor;
use crate::trace;
use crate::value::{Arg, Value, Values};

impl Function {
    /// The graph traced for `args` and `statics` (from the cache; traced on
    /// a miss): what the companions differentiate, to print or to pass to
    /// the transforms of `rlx::autodiff`. Its inputs are the runtime
    /// parameters, named and ordered as in the function.
    pub fn graph<S: StaticArg>(
        &self,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Graph> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        Ok(self.miss(args, statics, tracer)?.graph.clone())
    }

    /// The `n`-th derivative of the scalar (first) output with respect to
    /// each differentiated parameter on its own (`∂ⁿf/∂x_iⁿ`, shaped like
    /// `x_i` repeated `n` times; [`autodiff::nth_order_grad`]), one result
    /// per parameter after the function's outputs. Each (parameter, `n`)
    /// is differentiated and compiled once per signature. Inside a trace
    /// the derivative graphs are inlined.
    pub fn run_nth<S: StaticArg>(
        &self,
        args: &[Arg<'_>],
        n: usize,
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<Values> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let entry = self.miss(args, statics, tracer)?;
        let n_out = entry.graph.outputs().len();
        let mut outs = Values::new();
        for (k, &i) in self.wrt.iter().enumerate() {
            let plan = self.nth_plan(&entry, k, i, n)?;
            let mut got = if trace::is_tracing() {
                let tensors: Vec<Tensor> = args.iter().map(|a| a.to_tensor()).collect();
                let refs: Vec<&Tensor> = tensors.iter().collect();
                trace::inline(&plan.graph, &refs)?
                    .into_iter()
                    .map(Value::Tensor)
                    .collect::<Values>()
            } else {
                let mut got = Values::new();
                plan.exe.run_arg_lists(args, &[], false, 0, &mut got)?;
                let what = || format!("the derivative of order {n} of `{}`", self.name);
                check_values(what, &plan.graph, args, &got)?;
                got
            };
            let d = got.pop().ok_or_else(|| {
                Error::Unsupported(format!(
                    "the derivative of order {n} of `{}` has no output",
                    self.name
                ))
            })?;
            if k == 0 {
                got.truncate(n_out);
                outs.extend(got);
            }
            outs.push(d);
        }
        Ok(outs)
    }

    /// The graph and executable of the `n`-th derivative with respect to
    /// parameter `i` (position `k` in `wrt`), built on first use.
    fn nth_plan(&self, entry: &Entry, k: usize, i: usize, n: usize) -> Result<Arc<NthPlan>> {
        let lock = || entry.nth.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = lock().iter().find(|p| p.key == (k, n)) {
            return Ok(p.clone());
        }
        let mut g = autodiff::nth_order_grad(&entry.graph, i, n)?;
        if n == 0 {
            // The 0-th derivative is the value itself.
            let mut outs = g.outputs().to_vec();
            outs.push(outs[0]);
            g.set_outputs(outs);
        }
        let exe = compile_owned(&g, &Options::default())?;
        let p = Arc::new(NthPlan {
            key: (k, n),
            graph: g,
            exe,
        });
        lock().push(p.clone());
        Ok(p)
    }
}
