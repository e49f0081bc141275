//! The pipeline from a graph to an [`Executable`]: the graph-level passes
//! (`prepare`, `optimize`), then one of the plans: a scalarised plan when
//! every value is small, else the general plan built by `planner`.

use std::sync::Arc;

use rlx_core::{Graph, NodeId, Result};

use crate::compile::executable::Executable;
use crate::compile::options::Options;
use crate::compile::plan;
use crate::compile::planner;
use crate::compile::small::program;

/// Compiles `g`: inlines custom ops, optimises, plans the schedule and buffers.
///
/// Errors if the graph violates its invariants ([`Graph::verify`]).
pub fn compile(g: &Graph) -> Result<Executable> {
    compile_with(g, &Options::default())
}

/// [`compile`] with explicit [`Options`].
pub fn compile_with(g: &Graph, options: &Options) -> Result<Executable> {
    let mut exe = compile_owned(g, options)?;
    exe.source = Some(Arc::new(g.clone()));
    Ok(exe)
}

/// [`compile_with`] keeping no copy of `g`: for callers that run the
/// executable only through the crate's own entry points and check
/// non-finite results themselves (the plan caches of `function`, which
/// keep the graph).
pub(crate) fn compile_owned(g: &Graph, options: &Options) -> Result<Executable> {
    let mut exe = compile_plan(g, options)?;
    if (0..g.len()).any(|i| g.source(NodeId(i as u32)).is_some()) {
        exe.lines = (0..g.len()).map(|i| g.source(NodeId(i as u32))).collect();
    }
    Ok(exe)
}

/// [`compile_owned`] without the source lines.
pub(crate) fn compile_plan(g: &Graph, options: &Options) -> Result<Executable> {
    let (g, origins) = prepare(g)?;
    // A graph of small values runs as one scalar program over its elements
    // (`small`); the general plan is then never built. A graph whose values
    // are all 0-d is already one scalar program in the general plan.
    if options.scalarize && !all_scalar(&g) && !planner::has_complex(&g) {
        if let Some(small) = program::Small::build(&g, options) {
            let mut exe = Executable::from_plan(plan::Plan::types_only(&g))?;
            exe.small = Some(Box::new(small));
            return Ok(exe);
        }
    }
    // `prepare` verified `g` (or built it with checked pushes).
    let plan = planner::build_verified(&g, &origins, options)?;
    Executable::from_plan(plan)
}

/// Whether every live value of `g` is 0-d.
pub(crate) fn all_scalar(g: &Graph) -> bool {
    let live = g.live_nodes();
    g.nodes()
        .iter()
        .zip(live)
        .all(|(n, l)| !l || n.shape.rank() == 0)
}

/// The graph-level passes run before planning, and the origin of each node
/// of the result in `g` (so that run-time errors name the caller's nodes).
pub(crate) fn prepare(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    let (g, inlined) = g.inline_custom_with_origins()?;
    let (g, optimized) = optimize(g)?;
    let origins: Vec<NodeId> = optimized.iter().map(|k| inlined[k.index()]).collect();
    // A loop's value and its reverse sweep share one forward pass.
    match rlx_core::loops::spine::fuse_spines(&g)? {
        Some((fused, from)) => Ok((fused, from.iter().map(|k| origins[k.index()]).collect())),
        None => Ok((g, origins)),
    }
}

/// The optimisation pipeline: `stop_gradient` only matters to autodiff, then
/// the fixed-point pipeline of `rlx::core::passes` (CSE, constant folding,
/// algebraic simplification, DCE). Returns origins as `prepare` does.
pub(crate) fn optimize(g: Graph) -> Result<(Graph, Vec<NodeId>)> {
    // A graph with no `stop_gradient` (every element graph of a scalarised
    // plan) goes straight to the pipeline: stripping would copy it whole.
    if !g
        .nodes()
        .iter()
        .any(|n| matches!(n.op, rlx_core::Op::StopGradient))
    {
        return rlx_core::passes::optimize_with_origins(&g);
    }
    let (g, stripped) = rlx_core::passes::strip_stop_gradient_with_origins(&g)?;
    let (g, optimized) = rlx_core::passes::optimize_with_origins(&g)?;
    Ok((g, optimized.iter().map(|k| stripped[k.index()]).collect()))
}
