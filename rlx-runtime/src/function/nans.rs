//! The check of non-finite results (see [`crate::debug_nans`]) on the
//! runs of a function's plans: the dense companions and the number path
//! ([`Function::non_finite`]), the sparse companions ([`Finite`], handed
//! to them by [`Function::with_plan`]) and `n`-th derivatives. The node it
//! names carries the user's line in the plan's graph.

use rlx_core::{Error, Graph, Result};

use crate::debug_nans::{all_finite, debug_nans, first_non_finite, localise};
use crate::function::cache::{Entry, Function};
use crate::function::plan::Plan;
use crate::function::transform::Transform;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::{Arg, Value};

impl Function {
    /// After a run of `plan` (transform `t` of `entry`) on `args` and
    /// `extras` whose results were not all finite, with the check on: the
    /// error naming the node of the plan's graph that produced the first
    /// non-finite value (found by running the graph again in the
    /// interpreter) and the user's line it was traced at.
    ///
    /// A gradient alone ([`Transform::GradOnly`]) is run again as the
    /// value and gradient: its plan leaves out the function's value, so
    /// the op of the user's code that first went non-finite there (a `ln`
    /// at zero) would otherwise be named by the derivative op it fed (the
    /// `recip` of `ln`'s rule).
    #[cold]
    pub(super) fn non_finite(
        &self,
        entry: &Entry,
        t: Transform,
        plan: &Plan,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
    ) -> Error {
        let plan = match t {
            Transform::GradOnly => match self.plan(entry, Transform::Grad) {
                Ok(p) => p,
                Err(e) => return e,
            },
            _ => plan,
        };
        match plan.graph() {
            Ok(g) => non_finite_in(&t.what(self.name), g, args, extras),
            Err(e) => e,
        }
    }
}

/// [`Function::non_finite`] for a run of `graph`, described as `what`.
#[cold]
pub(super) fn non_finite_in(
    what: &str,
    graph: &Graph,
    args: &[Arg<'_>],
    extras: &[Arg<'_>],
) -> Error {
    let tensors: Vec<Tensor> = args.iter().chain(extras).map(|a| a.to_tensor()).collect();
    match tensors
        .iter()
        .map(Tensor::storage)
        .collect::<Result<Vec<&Storage>>>()
    {
        Ok(s) => localise(graph, &s, what),
        Err(e) => e,
    }
}

/// `Err` naming the node that made a non-finite value, when the check is
/// on and `values` (results of a run of `graph` on `args`) hold one.
#[inline]
pub(super) fn check_values(
    what: impl FnOnce() -> String,
    graph: &Graph,
    args: &[Arg<'_>],
    values: &[Value],
) -> Result<()> {
    if debug_nans() && !all_finite(values) {
        return Err(non_finite_in(&what(), graph, args, &[]));
    }
    Ok(())
}

/// The check of non-finite results for a companion that runs a plan
/// itself (the sparse ones, through [`Function::with_plan`]): it calls
/// [`Finite::values`] or [`Finite::storages`] on the run's results.
pub(crate) struct Finite<'a, 'b> {
    pub(super) function: &'a Function,
    pub(super) t: Transform,
    pub(super) plan: &'a Plan,
    pub(super) args: &'a [Arg<'b>],
}

impl Finite<'_, '_> {
    /// Checks the results of a run, as values.
    #[inline]
    pub(crate) fn values(&self, values: &[Value]) -> Result<()> {
        if debug_nans() && !all_finite(values) {
            return Err(self.non_finite()?);
        }
        Ok(())
    }

    /// Checks the results of a run, as the output storages.
    #[inline]
    pub(crate) fn storages(&self, outputs: &[Storage]) -> Result<()> {
        if debug_nans() && outputs.iter().any(|s| first_non_finite(s).is_some()) {
            return Err(self.non_finite()?);
        }
        Ok(())
    }

    /// The error for results that are not all finite: the graph that ran,
    /// run again node by node to find where the first one was born.
    fn non_finite(&self) -> Result<Error> {
        Ok(non_finite_in(
            &self.what(),
            self.plan.graph()?,
            self.args,
            &[],
        ))
    }

    fn what(&self) -> String {
        self.t.what(self.function.name)
    }
}
