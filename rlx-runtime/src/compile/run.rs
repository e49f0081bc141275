//! The ways of running an [`Executable`]: on tensors ([`Executable::run`],
//! [`Executable::run_into`]), on arguments ([`Executable::run_args`] and
//! the companions' forms), and a plan that is one scalar program on
//! numbers; with the checks of inputs and outputs every run makes first,
//! and the pool of per-call states.

use rlx_core::{Error, Result, Shape, TensorType};

use crate::compile::base::env;
use crate::compile::executable::{Executable, POOL};
use crate::compile::scalar::program::ScalarProgram;
use crate::compile::scalar::step;
use crate::compile::{exec, plan};
use crate::debug_nans::{all_finite, debug_nans, localise};
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::{is_number, same_dims, Arg, Value, Values};

impl Executable {
    /// Runs on `inputs`, returning freshly allocated outputs.
    ///
    /// A data error met while running (a singular matrix, an index out of
    /// range) is an [`Error::AtNode`] naming the node by its id in the graph
    /// given to [`compile`](crate::compile::driver::compile); [`Error::root`] is the cause. The same holds
    /// for the other ways of running.
    ///
    /// With the check of non-finite values on ([`crate::set_debug_nans`]),
    /// a result holding a NaN or an infinity is an [`Error::NonFinite`]
    /// naming the first node of that graph that produced one, and its
    /// source line when it has one (a graph traced from a
    /// `#[differentiable]` function does).
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
        if let Some(s) = &self.small {
            s.run_tensors(inputs, outputs)?;
        } else if let Some(i) = &self.items {
            i.run_tensors(inputs, outputs)?;
        } else {
            let mut state = self.take_state()?;
            let res = exec::run(
                &self.plan,
                &mut state,
                &env::Inputs::Tensors(inputs),
                &mut env::Outputs::Tensors(outputs),
            );
            self.put_state(state);
            res.map_err(|e| self.with_line(e))?;
        }
        if debug_nans() {
            let outs: Vec<Value> = outputs.iter().map(|t| Value::Tensor(t.clone())).collect();
            let args: Vec<Arg<'_>> = inputs.iter().map(|&t| Arg::Tensor(t)).collect();
            self.check_finite(&args, &outs)?;
        }
        Ok(())
    }

    /// `e` at the source line of the node it names, when it is an
    /// [`Error::AtNode`] of a node traced from the user's code (a node an
    /// autodiff rule added has the line of the op it differentiates): so
    /// a run-time error names the user's line as a trace-time error does.
    #[cold]
    pub(super) fn with_line(&self, e: Error) -> Error {
        let Error::AtNode { node, .. } = &e else {
            return e;
        };
        match self.lines.get(*node as usize).copied().flatten() {
            Some(s) => e.at(s.line.file(), s.line.line(), s.line.column()),
            None => e,
        }
    }

    /// With the check of non-finite values on, `Err` naming the node of
    /// the source graph that made the first non-finite value of `outs`
    /// (the results of a run on `args`).
    fn check_finite(&self, args: &[Arg<'_>], outs: &[Value]) -> Result<()> {
        if !debug_nans() || all_finite(outs) {
            return Ok(());
        }
        let Some(g) = &self.source else {
            return Ok(());
        };
        let tensors: Vec<Tensor> = args.iter().map(|a| a.to_tensor()).collect();
        let storages = tensors
            .iter()
            .map(Tensor::storage)
            .collect::<Result<Vec<_>>>()?;
        Err(localise(g, &storages, "a compiled graph"))
    }

    /// Runs on `args`, where a number stands for a 0-d tensor of its type,
    /// and returns 0-d `F32`/`F64` outputs as numbers, the others as new
    /// tensors.
    ///
    /// This is the cheap way to call a graph over a few scalars: a warm call
    /// allocates only the result vector (and the tensor outputs, if any).
    ///
    /// ```
    /// use rlx::{compile, Arg, DType, Graph, Value};
    /// let mut g = Graph::new();
    /// let x = g.input("x", [], DType::F64);
    /// let y = g.input("y", [], DType::F64);
    /// let p = g.mul(x, y).unwrap();
    /// g.set_outputs(vec![p]);
    /// let exe = compile(&g).unwrap();
    /// let out = exe.run_args(&[Arg::F64(3.0), Arg::F64(0.5)]).unwrap();
    /// assert!(matches!(out[0], Value::F64(v) if v == 1.5));
    /// ```
    pub fn run_args(&self, args: &[Arg<'_>]) -> Result<Vec<Value>> {
        let mut values = Values::new();
        self.run_arg_lists(args, &[], true, 0, &mut values)?;
        self.check_finite(args, &values)?;
        Ok(values.into_vec())
    }

    /// [`Executable::run_args`] with the arguments given as two lists
    /// (`head` then `tail`), so that callers holding them apart need not
    /// join them, pushing the results onto `values` (passed in rather than
    /// returned: the list is a few hundred bytes, copied at every return).
    /// With `check_types` false the caller has already checked the
    /// arguments' count, shapes and dtypes (traced tensors are still
    /// refused). The first `skip` outputs are left out of `values` (a
    /// scalarised plan does not even build them).
    pub(crate) fn run_arg_lists(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        check_types: bool,
        skip: usize,
        values: &mut Values,
    ) -> Result<()> {
        if check_types {
            self.check_args(head, tail)?;
        } else {
            if let Some(i) = head.iter().chain(tail).position(Arg::is_traced) {
                return Err(traced_input(&self.plan.input_names[i]));
            }
        }
        if let Some(s) = &self.small {
            s.run_args(head, tail, &self.plan.output_types, skip, values);
            return Ok(());
        }
        let start = values.len();
        self.push_results(head, tail, values)?;
        let skip = skip.min(values.len() - start);
        values.drain(start..start + skip);
        Ok(())
    }

    /// [`Executable::run_arg_lists`] of a plan that is not scalarised.
    fn push_results(&self, head: &[Arg<'_>], tail: &[Arg<'_>], values: &mut Values) -> Result<()> {
        if self.run_scalar_program(head, tail, values) {
            return Ok(());
        }
        self.run_args_with(head, tail, |outs| {
            for (s, t) in outs.iter_mut().zip(&self.plan.output_types) {
                values.push(match s {
                    Storage::F64(v) if is_number(t) => Value::F64(v[0]),
                    Storage::F32(v) if is_number(t) => Value::F32(v[0]),
                    // Moved out; the next run allocates a fresh buffer.
                    _ => Value::Tensor(Tensor::from_storage(
                        std::mem::replace(s, Storage::zeros(t.dtype, 0)),
                        t.shape.clone(),
                    )?),
                });
            }
            Ok(())
        })
    }

    /// Runs on `head` then `tail` (types already checked by the caller) and
    /// hands the output storages to `read`. Storages left in place are
    /// reused by the next run, so a warm call that only reads them
    /// allocates nothing (the sparse companions' `*_into` forms).
    pub(crate) fn run_args_with<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        read: impl FnOnce(&mut [Storage]) -> Result<R>,
    ) -> Result<R> {
        self.run_args_into_last(head, tail, None, read)
    }

    /// [`Executable::run_args_with`], with the last output written straight
    /// into `last` when given: it is swapped in for the run and back after
    /// it, so a caller's buffer of the output's size is filled without a
    /// copy or an allocation (a sparse derivative's values).
    pub(crate) fn run_args_into_last<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        mut last: Option<&mut Storage>,
        read: impl FnOnce(&mut [Storage]) -> Result<R>,
    ) -> Result<R> {
        let mut state = self.take_state()?;
        let swap = |outs: &mut Vec<Storage>, last: &mut Option<&mut Storage>| {
            if let (Some(o), Some(l)) = (outs.last_mut(), last.as_deref_mut()) {
                std::mem::swap(o, l);
            }
        };
        if self.small.is_some() || self.items.is_some() {
            // Output storages kept in the state: sized by the first run.
            let mut outs = std::mem::take(&mut state.outs);
            for (o, t) in outs.iter_mut().zip(&self.plan.output_types) {
                if o.len() != t.shape.numel() {
                    *o = Storage::zeros(t.dtype, t.shape.numel());
                }
            }
            swap(&mut outs, &mut last);
            let args = head.iter().chain(tail).copied();
            match (&self.small, &self.items) {
                (Some(s), _) => s.run_storages(args, &mut outs),
                (_, Some(i)) => i.run_storages(args, &mut outs),
                _ => {}
            }
            let res = read(&mut outs);
            swap(&mut outs, &mut last);
            state.outs = outs;
            self.put_state(state);
            return res;
        }
        let mut numbers = std::mem::take(&mut state.numbers);
        for (i, a) in head.iter().chain(tail).enumerate() {
            match (a, &mut numbers[i]) {
                (Arg::F64(v), Storage::F64(s)) => s[0] = *v,
                (Arg::F32(v), Storage::F32(s)) => s[0] = *v,
                _ => {}
            }
        }
        let mut outs = std::mem::take(&mut state.outs);
        swap(&mut outs, &mut last);
        let res = exec::run(
            &self.plan,
            &mut state,
            &env::Inputs::Args {
                head,
                tail,
                numbers: &numbers,
            },
            &mut env::Outputs::Storages(&mut outs),
        )
        .map_err(|e| self.with_line(e))
        .and_then(|()| read(&mut outs));
        swap(&mut outs, &mut last);
        state.numbers = numbers;
        state.outs = outs;
        self.put_state(state);
        res
    }

    /// Runs a [`plan::ScalarProgram`], pushing its results onto `values` as
    /// [`Value`]s (`false`, pushing nothing, if the plan is not one; see
    /// [`Executable::run_scalar_into`]). The caller has checked the
    /// arguments' types.
    fn run_scalar_program(&self, head: &[Arg<'_>], tail: &[Arg<'_>], values: &mut Values) -> bool {
        /// Inputs and outputs up to this many are gathered on the stack.
        const SMALL: usize = 16;
        if self.plan.scalar_program.is_none() {
            return false;
        }
        let types = &self.plan.output_types;
        let (n_in, n_out) = (head.len() + tail.len(), types.len());
        let mut run = |ins: &mut [f64], out: &mut [f64]| {
            for (slot, a) in ins.iter_mut().zip(head.iter().chain(tail)) {
                *slot = step::arg_f64(a);
            }
            if !self.run_scalar_into(ins, &[], out) {
                return false;
            }
            let value = |(&v, t): (&f64, &TensorType)| match t.dtype {
                rlx_core::DType::F32 => Value::F32(v as f32),
                _ => Value::F64(v),
            };
            values.extend(out.iter().zip(types).map(value));
            true
        };
        if n_in <= SMALL && n_out <= SMALL {
            run(&mut [0.0; SMALL][..n_in], &mut [0.0; SMALL][..n_out])
        } else {
            run(&mut vec![0.0; n_in], &mut vec![0.0; n_out])
        }
    }

    /// Runs a [`plan::ScalarProgram`] on its inputs given as numbers
    /// (`head` then `tail`, each widened to `f64`), writing one number per
    /// output into `out` (an `F32` result is stored widened, so `as f32`
    /// gives it back exactly). Returns `false`, without running anything,
    /// when the plan is not a scalar program, the inputs or `out` do not
    /// have one slot per input or output, or the program's register file
    /// is too large for the stack.
    ///
    /// This is the whole warm call of a small function of a few scalars: no
    /// per-call state, no allocation.
    pub(crate) fn run_scalar_into(&self, head: &[f64], tail: &[f64], out: &mut [f64]) -> bool {
        /// Joined inputs up to this many live on the stack.
        const INPUTS: usize = 64;
        if let Some(s) = &self.small {
            return s.run_numbers(head, tail, out);
        }
        let Some(prog) = self.plan.scalar_program.as_ref() else {
            return false;
        };
        let plan::StepKind::Scalar(region) = &self.plan.steps[0].kind else {
            return false;
        };
        let types = &self.plan.output_types;
        let n_in = head.len() + tail.len();
        if out.len() != types.len() || n_in != self.plan.input_types.len() || n_in > INPUTS {
            return false;
        }
        if tail.is_empty() {
            return self.run_scalar_on(prog, region, head, out);
        }
        let mut joined = [0.0f64; INPUTS];
        joined[..head.len()].copy_from_slice(head);
        joined[head.len()..n_in].copy_from_slice(tail);
        self.run_scalar_on(prog, region, &joined[..n_in], out)
    }

    /// [`Executable::run_scalar_into`] with the inputs in one list.
    #[inline]
    fn run_scalar_on(
        &self,
        prog: &ScalarProgram,
        region: &step::ScalarStep,
        inputs: &[f64],
        out: &mut [f64],
    ) -> bool {
        /// Register files up to these sizes live on the stack.
        const TINY: usize = 32;
        const SMALL: usize = 128;
        const LARGE: usize = 1024;
        let types = &self.plan.output_types;
        #[cfg(feature = "jit")]
        if let Some(n) = &region.native {
            if prog.loads_are_inputs && prog.stores_are_outputs {
                n.call(inputs, out);
                return true;
            }
            /// Leaves and results of native code up to this many stay on the stack.
            const NATIVE: usize = 32;
            if n.loads() + n.stores() <= NATIVE {
                let mut buf = [0.0f64; NATIVE];
                let (ins, results) = buf.split_at_mut(n.loads());
                let ins: &[f64] = if prog.loads_are_inputs {
                    inputs
                } else {
                    for (slot, &i) in ins.iter_mut().zip(&prog.input_of_load) {
                        *slot = inputs[i as usize];
                    }
                    ins
                };
                n.call(ins, results);
                for ((o, &t), ty) in out.iter_mut().zip(&prog.target_of_output).zip(types) {
                    *o = step::round_to(ty.dtype, results[t as usize]);
                }
                return true;
            }
        }
        let mut io = step::NumberIo {
            locs: &self.plan.locs,
            inputs,
            output_of_target: &prog.output_of_target,
            types,
            out,
        };
        let regs = region.scratch_len();
        if regs <= TINY {
            on_stack::<TINY>(region, &mut io);
        } else if regs <= SMALL {
            on_stack::<SMALL>(region, &mut io);
        } else if regs <= LARGE {
            on_stack::<LARGE>(region, &mut io);
        } else {
            return false;
        }
        true
    }

    pub(super) fn take_state(&self) -> Result<Box<exec::State>> {
        let popped = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.pop()
        };
        match popped {
            Some(state) => Ok(state),
            None => Ok(Box::new(exec::State::new(&self.plan)?)),
        }
    }

    pub(super) fn put_state(&self, state: Box<exec::State>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(state);
        }
    }

    fn check_args(&self, head: &[Arg<'_>], tail: &[Arg<'_>]) -> Result<()> {
        self.check_inputs(head.len() + tail.len(), head.iter().chain(tail).copied())
    }

    /// Checks `count` inputs (count, concreteness, shape and dtype, in order).
    fn check_inputs<'a>(&self, count: usize, inputs: impl Iterator<Item = Arg<'a>>) -> Result<()> {
        let p = &self.plan;
        if count != p.input_types.len() {
            return Err(Error::CountMismatch {
                what: "inputs".into(),
                expected: p.input_types.len(),
                got: count,
            });
        }
        for ((a, want), name) in inputs.zip(&p.input_types).zip(&p.input_names) {
            if a.is_traced() {
                return Err(traced_input(name));
            }
            if !a.matches(want) {
                return Err(Error::InputMismatch {
                    name: name.clone(),
                    expected_shape: want.shape.clone(),
                    expected_dtype: want.dtype,
                    got_shape: Shape::new(a.dims()),
                    got_dtype: a.dtype(),
                });
            }
        }
        Ok(())
    }

    fn check(&self, inputs: &[&Tensor], outputs: &[Tensor]) -> Result<()> {
        self.check_inputs(inputs.len(), inputs.iter().map(|&t| Arg::Tensor(t)))?;
        let p = &self.plan;
        if outputs.len() != p.output_types.len() {
            return Err(Error::CountMismatch {
                what: "outputs".into(),
                expected: p.output_types.len(),
                got: outputs.len(),
            });
        }
        for (j, (t, want)) in outputs.iter().zip(&p.output_types).enumerate() {
            if t.is_traced()
                || t.dtype() != want.dtype
                || !same_dims(t.shape().dims(), want.shape.dims())
            {
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

#[cold]
fn traced_input(name: &str) -> Error {
    Error::Unsupported(format!(
        "input `{name}` is a traced tensor; a compiled graph runs on concrete values"
    ))
}

/// Runs `region` on a register file of `N` registers on the stack (a
/// separate function, so that only calls needing a large file pay for its
/// stack frame).
#[inline(never)]
fn on_stack<const N: usize>(region: &step::ScalarStep, io: &mut step::NumberIo<'_>) {
    region.exec_with_consts(&mut [0.0; N], io);
}
