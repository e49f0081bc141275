//! [`PlanStats`]: the counts describing a compiled plan, filled in by the
//! planner and read by tests and users through `Executable::stats`.

/// Counts describing a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Steps in the schedule.
    pub steps: usize,
    /// Fused element-wise loops.
    pub fused_loops: usize,
    /// Element-wise nodes inside fused loops.
    pub fused_nodes: usize,
    /// Of those, nodes evaluated in register chains (runs of cheap float
    /// ops applied in vector registers).
    pub chained_nodes: usize,
    /// Reductions folded into the fused loop computing their operand
    /// (the operand is never stored).
    pub fused_reductions: usize,
    /// Of those reductions' operands, negations and squares read by
    /// nothing else, applied by the reduction as it combines each element
    /// (no pass of their own over the block).
    pub absorbed: usize,
    /// Slices and transposes read in place by fused loops (never copied).
    pub views: usize,
    /// Values written in place into the concat or transpose using them
    /// (never stored on their own).
    pub placed: usize,
    /// Of those, values a fused loop writes together with others of the
    /// same loop placed in the same value through the same walk (the
    /// entries of per-item Jacobians): a few items at a time, every
    /// piece's entries of an item together, instead of one sweep of the
    /// block per piece.
    pub interleaved: usize,
    /// Scalar regions (runs of 0-d element-wise nodes).
    pub scalar_regions: usize,
    /// 0-d nodes inside scalar regions.
    pub scalar_nodes: usize,
    /// Regions of small values (at most 256 elements each) inside a plan
    /// that also has large ones, each lowered element by element into one
    /// scalar program run as one step (see
    /// [`Options::scalarize`](crate::compile::options::Options::scalarize)). Large values
    /// never enter them: they keep their kernels and fused loops.
    pub small_regions: usize,
    /// Graph nodes inside those regions.
    pub small_region_nodes: usize,
    /// Values the regions read from the rest of the plan (over all
    /// regions): the boundary into them.
    pub small_region_inputs: usize,
    /// Values the regions write for the rest of the plan or return: the
    /// boundary out of them.
    pub small_region_outputs: usize,
    /// Scalar regions compiled to native code (feature `jit`).
    pub native_regions: usize,
    /// Matrix products whose element-wise consumers (a bias add, an
    /// activation, an activation's derivative times a cotangent, with the
    /// reductions folded into them) run in the same step, over the
    /// product's result in place: the product writes straight into the
    /// buffer of the loop's result and is never stored on its own (see
    /// [`Options::epilogues`](crate::compile::options::Options::epilogues)).
    pub epilogues: usize,
    /// Transposes read in place by matrix products.
    pub virtual_transposes: usize,
    /// Gathers with constant indices read through their indices by fused
    /// loops (no step of their own; a sparse derivative's decompression).
    pub indexed_gathers: usize,
    /// Slices read in place by matrix products.
    pub virtual_slices: usize,
    /// Scatter-adds with constant indices, checked when the plan was built
    /// instead of on every call.
    pub checked_scatters: usize,
    /// Buffer slots of the per-call state.
    pub buffers: usize,
    /// Outputs that one fused loop writes whole, element by element,
    /// through its stores alone (the pieces of per-item Jacobians written
    /// item by item, say): a call returning such an output in fresh
    /// storage allocates it without setting it to zero first.
    pub unzeroed_outputs: usize,
    /// Other step targets written whole without being read, so resized
    /// without zeros: buffers a fused loop writes whole through its
    /// stores, targets a folded reduction finishes into whole, the
    /// float results of reduction steps, and the packed results of loops.
    pub unzeroed_targets: usize,
    /// Nodes of the graph lowered element by element into one scalar
    /// program (0 unless the whole plan is scalarised: see
    /// [`Options::scalarize`](crate::compile::options::Options::scalarize)). The other
    /// counts then describe the element program.
    pub scalarized_nodes: usize,
    /// Items an item plan runs its program over: a batched graph whose
    /// items are independent, run as the scalarised program of one item
    /// once per item (0 for any other plan). The other counts then
    /// describe that program.
    pub item_runs: usize,
}
