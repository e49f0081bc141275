//! The per-transform plans of a signature's cache entry, as methods of
//! [`Function`]: made on first use, compiled once, handed with the check
//! of non-finite results to the companions that run them themselves
//! ([`Function::with_plan`]).

use std::sync::{Arc, OnceLock};

use rlx_core::sparsity::Pattern;
use rlx_core::{Error, Result, Shape, TensorType};

use crate::compile::{compile_items_owned, compile_owned, Batched, Executable, Options, PAYS_FROM};
use crate::function::cache::{Entry, Function, StaticArg, Tracer};
use crate::function::nans::Finite;
use crate::function::pins::f32_mask;
use crate::function::plan::Plan;
use crate::function::transform::Transform;
use crate::value::Arg;

impl Function {
    /// Calls `f` with the executable of transform `t` for `args` (traced,
    /// transformed and compiled on first use, as [`Function::run`] does)
    /// and, for the sparse transforms, the pattern of its values output,
    /// and the check of non-finite results to call on the run's results
    /// ([`Finite`]): the building block of companions written in other
    /// modules ([`crate::sparse`]). Runs nothing itself; warm, it takes no
    /// lock.
    pub(crate) fn with_plan<S: StaticArg, R>(
        &self,
        t: Transform,
        args: &[Arg<'_>],
        statics: &S,
        tracer: Tracer<S>,
        f: impl FnOnce(&Executable, Option<&Arc<Pattern>>, &Finite<'_, '_>) -> Result<R>,
    ) -> Result<R> {
        if args.len() != self.params.len() {
            return Err(self.count_mismatch(args.len()));
        }
        let mut f = Some(f);
        let mut run = |e: &Arc<Entry>| -> Result<R> {
            let plan = self.plan(e, t)?;
            let exe = self.executable(plan)?;
            let finite = Finite {
                function: self,
                t,
                plan,
                args,
            };
            match f.take() {
                Some(f) => f(exe, plan.sparse.as_ref(), &finite),
                None => Err(Error::Unsupported("a plan callback ran twice".into())),
            }
        };
        if let Some(r) = self.hot(|e| e.matches(args, statics), &mut run) {
            return r;
        }
        let entry = self.miss(args, statics, tracer)?;
        run(&entry)
    }

    /// A plan's executable, compiled on first use.
    #[inline]
    pub(super) fn executable<'p>(&self, plan: &'p Plan) -> Result<&'p Executable> {
        match plan.exe.get() {
            Some(e) => Ok(e),
            None => {
                let options = Options::default();
                // An item plan where it beats the batched plan.
                let items = match &plan.item {
                    Some(item) => compile_items_owned(
                        Batched::Inputs(&plan.input_types()?),
                        item,
                        &options,
                        PAYS_FROM,
                    )?
                    .filter(Executable::item_plan_pays),
                    None => None,
                };
                let e = match items {
                    Some(e) => e,
                    None => compile_owned(plan.graph()?, &options)?,
                };
                Ok(plan.exe.get_or_init(|| e))
            }
        }
    }

    pub(super) fn plan<'e>(&self, entry: &'e Entry, t: Transform) -> Result<&'e Plan> {
        let slot = &entry.plans[t.index()];
        if let Some(p) = slot.get() {
            return Ok(p);
        }
        // With an item plan, the batched graph is made only if something
        // needs it (tracing, the check of non-finite values, or an item
        // plan that declines): transforming the whole batch costs as much
        // as the batch is large, the item's transform does not.
        let item = t.item(&entry.graph, self.wrt);
        let source = item.is_some().then(|| (entry.graph.clone(), t, self.wrt));
        let not_scalar = |e: Error| {
            match (t, e.root()) {
            (Transform::Grad | Transform::GradOnly | Transform::Hessian | Transform::Hvp | Transform::SparseHessian, Error::NotScalar { shape, .. }) => {
                Error::Unsupported(format!(
                    "`{}` returns a value of shape {shape}, but gradients and Hessians need a scalar (0-d or one-element) output\n  = help: use `vjp_{0}` with a cotangent, or `jacobian_{0}`",
                    self.name
                ))
            }
            _ => e,
        }
        };
        let (graph, sparse) = match &source {
            Some(_) => (OnceLock::new(), None),
            None => {
                let (g, sparse) = t
                    .apply_with(&entry.graph, self.wrt, self.holomorphic)
                    .map_err(not_scalar)?;
                (OnceLock::from(g), sparse)
            }
        };
        let extras: Vec<(String, TensorType)> = match t {
            Transform::Jvp | Transform::Hvp => {
                let prefix = if t == Transform::Jvp {
                    "tangent_"
                } else {
                    "v_"
                };
                // As the macro names them (`tangent_y` for `_y`; see
                // `extra_name` in rlx-macros).
                let param = |&i: &usize| {
                    let name = self.params[i].trim_start_matches('_');
                    let clash = self
                        .params
                        .iter()
                        .enumerate()
                        .any(|(j, p)| j != i && p.trim_start_matches('_') == name);
                    let name = if name.is_empty() || clash {
                        self.params[i]
                    } else {
                        name
                    };
                    (format!("{prefix}{name}"), entry.types[i].clone())
                };
                self.wrt.iter().map(param).collect()
            }
            Transform::Vjp => vec![("cotangent".into(), entry.graph.ty(entry.graph.outputs()[0]))],
            Transform::Call
            | Transform::Grad
            | Transform::GradOnly
            | Transform::Jacobian
            | Transform::Hessian
            | Transform::BatchJacobian
            | Transform::SparseJacobian
            | Transform::ValueAndSparseJacobian
            | Transform::SparseHessian => Vec::new(),
        };
        let plan = Plan {
            item,
            graph,
            source,
            sparse,
            extras_f32s: f32_mask(extras.iter().map(|(_, t)| t)).map(|m| (extras.len(), m)),
            extras,
            exe: OnceLock::new(),
        };
        Ok(slot.get_or_init(|| plan))
    }

    /// Checks the extra arguments against those `plan`'s transform `t` takes.
    pub(super) fn check_extras(&self, plan: &Plan, t: Transform, extras: &[Arg<'_>]) -> Result<()> {
        if extras.len() != plan.extras.len() {
            return Err(Error::CountMismatch {
                what: match t {
                    Transform::Vjp => "`cotangent` arguments".into(),
                    _ => format!("extra arguments of a `{}` companion", self.name),
                },
                expected: plan.extras.len(),
                got: extras.len(),
            });
        }
        for (a, (name, ty)) in extras.iter().zip(&plan.extras) {
            if !a.matches(ty) {
                return Err(mismatch(name.clone(), ty, a));
            }
        }
        Ok(())
    }
}

fn mismatch(name: String, ty: &TensorType, a: &Arg<'_>) -> Error {
    Error::InputMismatch {
        name,
        expected_shape: ty.shape.clone(),
        expected_dtype: ty.dtype,
        got_shape: Shape::new(a.dims()),
        got_dtype: a.dtype(),
    }
}
