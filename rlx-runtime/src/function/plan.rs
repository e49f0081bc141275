//! The plans of a signature's entry, as data: one per [`Transform`] (the
//! transformed graph with its extra arguments, compiled on first use, see
//! `planning.rs`), and the plans of its `n`-th derivatives (see `nth.rs`).

use std::sync::{Arc, OnceLock};

use rlx_core::sparsity::Pattern;
use rlx_core::vmap::Item;
use rlx_core::{Error, Graph, Result, TensorType};

use crate::compile::Executable;
use crate::function::transform::Transform;

/// A transformed graph and, once compiled, its executable.
pub(super) struct Plan {
    /// The transformed graph: made with the plan, or, for a plan with an
    /// [`item`](Self::item), when first needed (see [`Plan::graph`]).
    pub(super) graph: OnceLock<Graph>,
    /// For a deferred `graph`: the function's graph and the transform
    /// that make it.
    pub(super) source: Option<(Graph, Transform, &'static [usize])>,
    /// The extra arguments the transform takes (tangents, cotangent or
    /// Hessian vectors), each named as its companion's parameter.
    pub(super) extras: Vec<(String, TensorType)>,
    /// The number of extra arguments and their [`f32_mask`], when they
    /// are all numbers (see [`Function::run_numbers`]).
    pub(super) extras_f32s: Option<(usize, u64)>,
    /// For the sparse transforms: the pattern of the values output.
    pub(super) sparse: Option<Arc<Pattern>>,
    /// The graph of one item of `graph`, when its items are independent
    /// (see [`Transform::item`]): compiled instead of `graph` into a plan
    /// run item by item, if it has one (`compile::items`).
    pub(super) item: Option<Item>,
    pub(super) exe: OnceLock<Executable>,
}

impl Plan {
    /// The transformed graph, made now if it was deferred.
    pub(super) fn graph(&self) -> Result<&Graph> {
        if let Some(g) = self.graph.get() {
            return Ok(g);
        }
        let Some((g, t, wrt)) = &self.source else {
            return Err(Error::Unsupported("a plan without its graph".into()));
        };
        let (h, _) = t.apply(g, wrt)?;
        Ok(self.graph.get_or_init(|| h))
    }

    /// The types of the transformed graph's inputs, without making a
    /// deferred graph: a deferred plan's transform (`batch_jacobian_`)
    /// takes the function's own inputs.
    pub(super) fn input_types(&self) -> Result<Vec<TensorType>> {
        let g = match &self.source {
            Some((g, _, _)) => g,
            None => self.graph()?,
        };
        Ok(g.input_ids().iter().map(|&i| g.ty(i)).collect())
    }
}

/// The graph and executable of an `n`-th derivative (see [`Function::run_nth`]).
pub(super) struct NthPlan {
    /// (position in `wrt`, order).
    pub(super) key: (usize, usize),
    pub(super) graph: Graph,
    pub(super) exe: Executable,
}
