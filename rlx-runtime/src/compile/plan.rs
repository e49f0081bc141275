//! The plan: the immutable result of compilation, a schedule of [`Step`]s
//! over the values of `env`, built by `planner` and run by `exec`.

use rlx_core::{DType, Op, Shape, TensorType};

use crate::compile::base::env::{Dst, Loc, Val};
use crate::compile::fusion::fused::FusedStep;
use crate::compile::products::matmul::MatMulStep;
use crate::compile::scalar::step::ScalarStep;
use crate::compile::steps::movement::CopyStep;
use crate::compile::steps::reduce::ReduceStep;
use crate::compile::steps::region::RegionStep;
use crate::compile::steps::scatter::ScatterStep;
use crate::compile::steps::solve::SolveStep;
use crate::storage::Storage;

/// One written value: destination and element count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub(crate) dst: Dst,
    pub(crate) numel: usize,
    pub(crate) dtype: DType,
    /// Whether the step writes every element of this target and reads
    /// none (a fused loop through its stores or a folded reduction's
    /// finish, or a float reduction step; see `fills`): a run whose
    /// storage for it does not hold its elements then gives it room
    /// without setting it to zero first.
    pub(crate) fills: bool,
}

/// An op computed by a per-op kernel.
#[derive(Clone, Debug)]
pub(crate) struct KernelStep {
    pub(crate) op: Op,
    pub(crate) args: Vec<(Val, Shape)>,
    pub(crate) out_shape: Shape,
}

/// What a step does.
#[derive(Clone, Debug)]
pub(crate) enum StepKind {
    Fused(FusedStep),
    Scalar(ScalarStep),
    MatMul(MatMulStep),
    Reduce(ReduceStep),
    Solve(SolveStep),
    Copy(CopyStep),
    Kernel(KernelStep),
    /// A scatter-add with constant indices, checked when the plan was built.
    Scatter(ScatterStep),
    Loop(crate::compile::steps::looping::LoopStep),
    /// A root node: Newton's method over its compiled graphs.
    Root(crate::compile::steps::root::RootStep),
    /// A scalar region of small values in a mixed graph.
    Region(RegionStep),
    /// A matrix product and the element-wise loop over its result, run
    /// in place in one step (see `epilogue`).
    Epilogue(crate::compile::products::epilogue::EpilogueStep),
}

/// One step of the schedule.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// The node whose value the step computes (the last member of a group,
    /// the copied node for an output copy), as an id of the caller's graph
    /// (see `planner::build`): what errors met running the step name.
    pub(crate) node: u32,
    pub(crate) kind: StepKind,
    pub(crate) targets: Vec<Target>,
    /// Values read (for liveness).
    pub(crate) reads: Vec<Val>,
}

/// The immutable result of compilation.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) input_names: Vec<String>,
    pub(crate) input_types: Vec<TensorType>,
    pub(crate) output_types: Vec<TensorType>,
    pub(crate) consts: Vec<Storage>,
    pub(crate) locs: Vec<Loc>,
    pub(crate) steps: Vec<Step>,
    /// Buffer slots: dtype and capacity in elements.
    pub(crate) slots: Vec<(DType, usize)>,
    /// Registers per bank for fused loops.
    pub(crate) regs: [usize; 4],
    /// Size of the scalar register file.
    pub(crate) scalar_regs: usize,
    /// Largest rank of any strided walk (index scratch).
    pub(crate) max_rank: usize,
    /// Largest `f64` reduction accumulator.
    pub(crate) acc_len: usize,
    /// Half-precision matmul scratch sizes.
    pub(crate) half: (usize, usize, usize),
    /// Solve scratch sizes (`n·n`, `n·k`).
    pub(crate) solve: (usize, usize),
    /// Most targets of one step.
    pub(crate) max_targets: usize,
    /// Number of nodes in each kind of step, for tests and diagnostics.
    pub(crate) stats: PlanStats,
    /// Set when the whole plan is one scalar region over numbers.
    pub(crate) scalar_program: Option<ScalarProgram>,
}

impl Plan {
    /// A plan with the types of `g` and no steps: the plan of an executable
    /// that runs a scalarised program instead (`compile::small`), which
    /// needs only the declared types for its checks, and what the planner
    /// starts from (its sizes and counts, grown as steps are added).
    pub(crate) fn types_only(g: &rlx_core::Graph) -> Plan {
        Plan {
            input_names: g.inputs().iter().map(|i| i.name.clone()).collect(),
            input_types: g.inputs().iter().map(|i| g.ty(i.node)).collect(),
            output_types: g.outputs().iter().map(|&o| g.ty(o)).collect(),
            consts: Vec::new(),
            locs: Vec::new(),
            steps: Vec::new(),
            slots: Vec::new(),
            regs: [0; 4],
            scalar_regs: 0,
            max_rank: 1,
            acc_len: 0,
            half: (0, 0, 0),
            solve: (0, 0),
            max_targets: 0,
            stats: PlanStats::default(),
            scalar_program: None,
        }
    }
}

/// A plan that is a single scalar region whose leaves are all 0-d
/// `F32`/`F64` inputs and whose stores write every output, each 0-d
/// `F32`/`F64` (a small physics energy and its gradient, say). Such a plan
/// runs straight from [`Arg`](crate::Arg) numbers into numbers, without a
/// per-call state: see `Executable::run_arg_lists`.
#[derive(Clone, Debug)]
pub(crate) struct ScalarProgram {
    /// The output each target of the region writes.
    pub(crate) output_of_target: Vec<u32>,
    /// The target writing each output (the inverse map).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) target_of_output: Vec<u32>,
    /// The input each `Load` of the region reads, in code order.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) input_of_load: Vec<u32>,
    /// Whether the loads read every input, in order.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) loads_are_inputs: bool,
    /// Whether target `j` writes output `j`, for every output, and every
    /// output is `F64`: native code can then write the results in place.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) stores_are_outputs: bool,
}

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
