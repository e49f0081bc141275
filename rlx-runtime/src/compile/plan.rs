//! The plan: the immutable result of compilation, a schedule of [`Step`]s
//! over the values of `env`, built by `planner` and run by `exec`.

use rlx_core::{DType, Op, Shape, TensorType};

use crate::compile::base::env::{Dst, Loc, Val};
use crate::compile::base::stats::PlanStats;
use crate::compile::fusion::fused::FusedStep;
use crate::compile::products::matmul::MatMulStep;
use crate::compile::scalar::program::ScalarProgram;
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
    /// A sparse solve over a fixed pattern.
    SparseSolve(crate::compile::steps::sparse_solve::SparseSolveStep),
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
    /// that runs a scalarised program instead (`compile::small::program`), which
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
