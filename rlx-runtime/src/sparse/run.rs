//! The runtime side of the sparse companions: run the cached compressed
//! program of a signature and wrap its values with the cached pattern.

use std::sync::Arc;

use rlx_core::sparsity::Pattern;
use rlx_core::{DType, Error, Result};

use super::SparseMatrix;
use crate::function::{Function, StaticArg, Tracer, Transform};
use crate::storage::Storage;
use crate::trace;
use crate::value::{Arg, Value, Values};

impl Function {
    /// Runs the sparse transform `t` ([`Transform::SparseJacobian`],
    /// [`Transform::ValueAndSparseJacobian`] or [`Transform::SparseHessian`])
    /// on `args`: the function's own outputs (only for
    /// `ValueAndSparseJacobian`; empty otherwise) and the sparse derivative,
    /// from one execution. The pattern, colouring
    /// and compressed program are built on the first call per signature.
    pub fn run_sparse<S: StaticArg>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
    ) -> Result<(Vec<Value>, SparseMatrix)> {
        self.check_sparse(t, args)?;
        self.with_plan(t, args, statics, tracer, |exe, pattern, finite| {
            let pattern = pattern_of(pattern)?;
            let mut outs = Values::new();
            exe.run_arg_lists(args, &[], false, 0, &mut outs)?;
            finite.values(&outs)?;
            let values = match outs.pop() {
                Some(Value::Tensor(v)) => v.to_vec::<f64>().or_else(|_| {
                    v.to_vec::<f32>()
                        .map(|v| v.into_iter().map(f64::from).collect())
                })?,
                _ => return Err(missing_values()),
            };
            Ok((outs.into_vec(), SparseMatrix::new(pattern.clone(), values)?))
        })
    }

    /// [`Function::run_sparse`] writing into caller-owned storage: the
    /// derivative's values into `out` (whose pattern must be this
    /// signature's, as returned by a first `run_sparse`) and, with `value`
    /// (which needs [`Transform::ValueAndSparseJacobian`]), output 0
    /// flattened into it. A warm call allocates nothing.
    pub fn run_sparse_into<S: StaticArg>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
        value: Option<&mut [f64]>,
        out: &mut SparseMatrix,
    ) -> Result<()> {
        self.check_sparse(t, args)?;
        self.with_plan(t, args, statics, tracer, |exe, pattern, finite| {
            let pattern = pattern_of(pattern)?;
            self.check_storage(t, pattern, out)?;
            let out0 = &exe.output_types()[0];
            if value.is_some() && t != Transform::ValueAndSparseJacobian {
                return Err(Error::Unsupported(format!(
                    "{t:?} computes no value; ask for `ValueAndSparseJacobian`"
                )));
            }
            if let Some(v) = &value {
                if v.len() != out0.shape.numel() {
                    return Err(Error::CountMismatch {
                        what: format!(
                            "elements of the value storage of `{}` (output 0 has shape {})",
                            self.name(),
                            out0.shape
                        ),
                        expected: out0.shape.numel(),
                        got: v.len(),
                    });
                }
            }
            // `f64` values are written straight into `out` (its buffer is
            // the program's values output for the run); others converted.
            let direct = exe.output_types().last().map(|t| t.dtype) == Some(DType::F64);
            let mut buf = Storage::F64(if direct {
                std::mem::take(out.values_vec())
            } else {
                Vec::new()
            });
            let res = exe.run_args_into_last(args, &[], direct.then_some(&mut buf), |outs| {
                finite.storages(outs)?;
                if !direct {
                    copy(outs.last().ok_or_else(missing_values)?, out.values_mut());
                }
                if let Some(v) = value {
                    copy(&outs[0], v);
                }
                Ok(())
            });
            if let (true, Storage::F64(v)) = (direct, buf) {
                *out.values_vec() = v;
            }
            res
        })
    }

    fn check_sparse(&self, t: Transform, args: &[Arg<'_>]) -> Result<()> {
        if !matches!(
            t,
            Transform::SparseJacobian
                | Transform::ValueAndSparseJacobian
                | Transform::SparseHessian
        ) {
            return Err(Error::Unsupported(format!(
                "`run_sparse` takes a sparse transform, got {t:?}"
            )));
        }
        if trace::is_tracing() || args.iter().any(Arg::is_traced) {
            return Err(Error::Unsupported(format!(
                "a sparse derivative of `{0}` cannot be computed inside traced code: its values exist only when the compiled function runs\n  = help: call `jacobian_{0}` or `hessian_{0}` inside a `#[differentiable]` function",
                self.name()
            )));
        }
        Ok(())
    }

    /// Checks that caller-owned storage has this signature's pattern.
    fn check_storage(
        &self,
        t: Transform,
        pattern: &Arc<Pattern>,
        out: &SparseMatrix,
    ) -> Result<()> {
        if Arc::ptr_eq(pattern, out.pattern_arc()) || **pattern == *out.pattern() {
            return Ok(());
        }
        let (what, companion, op) = match t {
            Transform::SparseHessian => ("Hessian", "sparse_hessian", "sparse_hessian_into"),
            _ => ("Jacobian", "sparse_jacobian", "sparse_jacobian_into"),
        };
        let (p, o) = (&**pattern, out.pattern());
        Err(Error::InvalidArgument {
            op,
            message: format!(
                "the storage is a {} × {} matrix with {} nonzeros, but the {what} of `{}` for these arguments is {} × {} with {} nonzeros{}\n  = help: get the storage from `{companion}_{}(..)` with arguments of the same shapes, then pass it back",
                o.nrows(), o.ncols(), o.nnz(), self.name(), p.nrows(), p.ncols(), p.nnz(),
                if p.nrows() == o.nrows() && p.ncols() == o.ncols() && p.nnz() == o.nnz() { " at other positions" } else { "" },
                self.name()
            ),
        })
    }
}

fn pattern_of(p: Option<&Arc<Pattern>>) -> Result<&Arc<Pattern>> {
    p.ok_or_else(|| Error::Unsupported("a sparse plan without a pattern".into()))
}

fn missing_values() -> Error {
    Error::Unsupported("a sparse plan gave no values output".into())
}

/// Copies a float storage into `dst` (as many elements as both have).
fn copy(src: &Storage, dst: &mut [f64]) {
    match src {
        Storage::F64(v) => {
            let n = v.len().min(dst.len());
            dst[..n].copy_from_slice(&v[..n]);
        }
        Storage::F32(v) => {
            for (d, s) in dst.iter_mut().zip(v) {
                *d = f64::from(*s);
            }
        }
        Storage::F16(_)
        | Storage::BF16(_)
        | Storage::I64(_)
        | Storage::Bool(_)
        | Storage::C32(_)
        | Storage::C64(_) => {
            for (i, d) in dst.iter_mut().enumerate() {
                *d = src.get_f64(i);
            }
        }
    }
}

impl crate::function::Placeholder for () {
    fn placeholder() -> Self {}
}
