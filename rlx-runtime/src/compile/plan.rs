//! Graph → [`Plan`]: grouping, step selection, buffer planning.
//!
//! The planner walks the graph once in topological order and decides for
//! each live node how its value comes to exist:
//!
//! - inputs and constants are read where they are (constants are converted
//!   to their dtype once, at compile time);
//! - `Reshape` and `StopGradient` are *aliases*: same elements, same buffer;
//! - a `Transpose` whose only consumers are matrix products is *virtual*:
//!   the products read its operand through permuted strides;
//! - element-wise nodes (unary, binary, compare, select, cast, broadcast)
//!   form *groups* of one output shape, each run as one fused loop (or, for
//!   0-d groups without `i64`, as a scalar region). A node joins the group
//!   of an operand of the same shape unless that group is *sealed*; a group
//!   is sealed as soon as a node outside it reads one of its members, which
//!   keeps "run the whole group at its last member" a valid schedule. A node
//!   reading several open groups of its shape merges them;
//! - every other node is its own step.
//!
//! Values that outlive their step live in buffer slots. Slots are assigned
//! by liveness (a slot is free after the last step reading it) and reused
//! for later values of the same dtype; a slot's capacity is the largest
//! value it holds, so warm runs never allocate. The first occurrence of each
//! computed graph output is written straight into the caller's output
//! tensor; other outputs are copied at the end.

use std::collections::HashMap;

use rlx_core::{DType, Error, Graph, Literal, NodeId, Op, Result, Shape, TensorType};

use super::chain_form::form_chains;
use super::fused::{Access, Bank, FusedStep, Instr, Leaf, Out, Reg, Src};
use super::matmul::{MatMulStep, MatView};
use super::movement::{CopyStep, Strided};
use super::reduce::ReduceStep;
use super::scalar::{binary_instr, unary_instr, SInstr, SType, ScalarStep};
use super::solve::SolveStep;
use super::Options;
use crate::storage::Storage;
use crate::value::is_number;

/// A value read or written by a step: the index of the node that owns the
/// storage (aliases are resolved to their root). Its location is
/// `Plan::locs[val]`.
pub(crate) type Val = u32;

/// Where a value's elements live during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Not materialised (fused into registers, an alias, or dead).
    None,
    /// Graph input `i`.
    Input(u32),
    /// Constant `k` of the plan.
    Const(u32),
    /// Buffer slot `s` of the per-call state.
    Buf(u32),
    /// The caller's output tensor `j`.
    Out(u32),
}

/// Scalar regions with fewer instructions stay interpreted: compiling them
/// would cost more than it saves.
#[cfg(feature = "jit")]
const JIT_MIN_INSTRS: usize = 8;

/// Where a step writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dst {
    /// The location of a node's value.
    Node(Val),
    /// Output tensor `j` (copies of aliases, inputs, constants, duplicates).
    Out(u32),
}

/// One written value: destination and element count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub(crate) dst: Dst,
    pub(crate) numel: usize,
    pub(crate) dtype: DType,
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
}

/// One step of the schedule.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// The node whose value the step computes (the last member of a group,
    /// the copied node for an output copy), as an id of the caller's graph
    /// (see [`build`]): what errors met running the step name.
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

/// Whether `steps` form a [`ScalarProgram`], and its output map.
fn scalar_program(
    steps: &[Step],
    locs: &[Loc],
    inputs: &[TensorType],
    outputs: &[TensorType],
) -> Option<ScalarProgram> {
    let [Step {
        kind: StepKind::Scalar(region),
        targets,
        ..
    }] = steps
    else {
        return None;
    };
    // Every leaf must be a number input.
    let input_of_load: Vec<u32> = region
        .code
        .iter()
        .filter_map(|i| match i {
            SInstr::Load { val, .. } => Some(*val),
            _ => None,
        })
        .map(|val| match locs[val as usize] {
            Loc::Input(k) if is_number(&inputs[k as usize]) => Some(k),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let output_of_target: Vec<u32> = targets
        .iter()
        .map(|t| match t.dst {
            Dst::Out(j) => Some(j),
            Dst::Node(v) => match locs[v as usize] {
                Loc::Out(j) => Some(j),
                _ => None,
            },
        })
        .collect::<Option<_>>()?;
    let mut target_of_output = vec![u32::MAX; outputs.len()];
    for (t, &j) in output_of_target.iter().enumerate() {
        target_of_output[j as usize] = t as u32;
    }
    let written = target_of_output.iter().all(|&t| t != u32::MAX);
    let f64_number = |t: &TensorType| is_number(t) && t.dtype == DType::F64;
    let loads_are_inputs = input_of_load.len() == inputs.len()
        && input_of_load
            .iter()
            .enumerate()
            .all(|(l, &k)| k as usize == l)
        && inputs.iter().all(f64_number);
    let stores_are_outputs = outputs.iter().all(f64_number)
        && output_of_target.len() == outputs.len()
        && output_of_target
            .iter()
            .enumerate()
            .all(|(t, &j)| j as usize == t);
    (written && outputs.iter().all(is_number)).then_some(ScalarProgram {
        output_of_target,
        target_of_output,
        loads_are_inputs,
        stores_are_outputs,
        input_of_load,
    })
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
    /// Scalar regions.
    pub scalar_regions: usize,
    /// 0-d nodes inside scalar regions.
    pub scalar_nodes: usize,
    /// Scalar regions compiled to native code (feature `jit`).
    pub native_regions: usize,
    /// Transposes read in place by matrix products.
    pub virtual_transposes: usize,
    /// Buffer slots of the per-call state.
    pub buffers: usize,
}

fn contiguous(s: &Shape) -> Vec<usize> {
    s.strides()
}

fn is_fusable(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Cast(_)
            | Op::Broadcast { .. }
    )
}

/// Converts a literal to storage of `dtype` and `shape`; a splat of a
/// shape too large for memory is an error, not an abort.
fn literal_storage(lit: &Literal, dtype: DType, shape: &Shape) -> Result<Storage> {
    let numel = shape.numel();
    Ok(match (lit, dtype) {
        (Literal::SplatI64(v), DType::I64) => {
            let mut s = crate::storage::allocate("constant", shape, dtype, 0.0)?;
            if let Storage::I64(x) = &mut s {
                x.fill(*v);
            }
            s
        }
        (Literal::SplatI64(v), _) => crate::storage::allocate("constant", shape, dtype, *v as f64)?,
        (Literal::Splat(v), _) => crate::storage::allocate("constant", shape, dtype, *v)?,
        (Literal::I64(d), DType::I64) => Storage::I64(d.to_vec()),
        (Literal::F64(_), DType::I64) => Storage::I64((0..numel).map(|i| lit.get_i64(i)).collect()),
        _ => Storage::from_f64(dtype, (0..numel).map(|i| lit.get_f64(i))),
    })
}

struct Group {
    shape: Shape,
    members: Vec<u32>,
    sealed: bool,
}

/// Per-bank register allocator with free lists.
#[derive(Default)]
struct RegAlloc {
    free: [Vec<u32>; 4],
    count: [usize; 4],
}

impl RegAlloc {
    fn alloc(&mut self, bank: Bank) -> Reg {
        let b = bank.index();
        let idx = self.free[b].pop().unwrap_or_else(|| {
            self.count[b] += 1;
            (self.count[b] - 1) as u32
        });
        Reg { bank, idx }
    }
    fn release(&mut self, r: Reg) {
        self.free[r.bank.index()].push(r.idx);
    }
}

/// Builds the plan of a verified graph without `Custom` ops.
///
/// `origins[k]` is the node of the caller's graph that node `k` of `g` was
/// made for (`g` is the caller's graph after inlining and optimisation);
/// steps name those nodes in their errors.
pub(crate) fn build(g: &Graph, origins: &[NodeId], options: &Options) -> Result<Plan> {
    g.verify()?;
    let nodes = g.nodes();
    let nn = nodes.len();
    let live = g.live_nodes();
    let mut users: Vec<Vec<u32>> = vec![Vec::new(); nn];
    for (i, n) in nodes.iter().enumerate() {
        if live[i] {
            for p in &n.inputs {
                users[p.index()].push(i as u32);
            }
        }
    }
    let mut is_output = vec![false; nn];
    for o in g.outputs() {
        is_output[o.index()] = true;
    }
    // Aliases resolve to the node owning the storage.
    let mut root: Vec<u32> = (0..nn as u32).collect();
    for (i, n) in nodes.iter().enumerate() {
        if matches!(n.op, Op::Reshape { .. } | Op::StopGradient) {
            root[i] = root[n.inputs[0].index()];
        }
    }
    let virt: Vec<bool> = (0..nn)
        .map(|i| {
            matches!(nodes[i].op, Op::Transpose { .. })
                && live[i]
                && !is_output[i]
                && !users[i].is_empty()
                && users[i]
                    .iter()
                    .all(|&u| matches!(nodes[u as usize].op, Op::MatMul))
        })
        .collect();

    // Grouping of element-wise nodes.
    let mut group: Vec<Option<u32>> = vec![None; nn];
    let mut groups: Vec<Group> = Vec::new();
    // The last group of 0-d nodes, which an unconnected 0-d node may join.
    let mut last_scalar: Option<u32> = None;
    for (i, n) in nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let fusable = is_fusable(&n.op);
        let mut joined = None;
        let mut merge: Vec<u32> = Vec::new();
        for p in &n.inputs {
            if let Some(gid) = group[p.index()] {
                let gr = &groups[gid as usize];
                if fusable && !gr.sealed && gr.shape == n.shape {
                    match joined {
                        None => joined = Some(gid),
                        Some(j) if j != gid && !merge.contains(&gid) => merge.push(gid),
                        Some(_) => {}
                    }
                }
            }
        }
        // A 0-d node without an open group among its operands joins the
        // last open 0-d group, so that independent scalar computations
        // (an auxiliary output, say) share one region: valid for the same
        // reason as the merge below.
        if joined.is_none() && fusable && n.shape.rank() == 0 {
            joined = last_scalar.filter(|&g| !groups[g as usize].sealed);
        }
        // Operands in several open groups of this shape: merge them. No
        // outside node has read an open group yet, so running the union at
        // its last member is still a valid schedule.
        if let Some(j) = joined {
            for gid in merge {
                let moved = std::mem::take(&mut groups[gid as usize].members);
                for &m in &moved {
                    group[m as usize] = Some(j);
                }
                let into = &mut groups[j as usize].members;
                into.extend(moved);
                into.sort_unstable();
            }
        }
        for p in &n.inputs {
            if let Some(gid) = group[p.index()] {
                if Some(gid) != joined {
                    groups[gid as usize].sealed = true;
                }
            }
        }
        if fusable {
            let gid = joined.unwrap_or_else(|| {
                groups.push(Group {
                    shape: n.shape.clone(),
                    members: Vec::new(),
                    sealed: false,
                });
                (groups.len() - 1) as u32
            });
            group[i] = Some(gid);
            groups[gid as usize].members.push(i as u32);
            if n.shape.rank() == 0 {
                last_scalar = Some(gid);
            }
        }
    }
    let stored: Vec<bool> = (0..nn)
        .map(|i| {
            group[i].is_some()
                && (is_output[i] || users[i].iter().any(|&u| group[u as usize] != group[i]))
        })
        .collect();

    let mut b = Builder {
        g,
        root: &root,
        virt: &virt,
        group: &group,
        stored: &stored,
        consts: Vec::new(),
        locs: vec![Loc::None; nn],
        steps: Vec::new(),
        regs: [0; 4],
        scalar_regs: 0,
        max_rank: 1,
        acc_len: 0,
        half: (0, 0, 0),
        solve: (0, 0),
        stats: PlanStats::default(),
        jit: options.jit,
    };

    // Locations known up front: inputs, constants, outputs.
    for (i, n) in nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        match &n.op {
            Op::Input { index } => b.locs[i] = Loc::Input(*index as u32),
            Op::Constant(lit) => {
                b.consts.push(literal_storage(lit, n.dtype, &n.shape)?);
                b.locs[i] = Loc::Const((b.consts.len() - 1) as u32);
            }
            _ => {}
        }
    }
    let mut copies: Vec<(u32, u32)> = Vec::new();
    for (j, o) in g.outputs().iter().enumerate() {
        let i = o.index();
        let computed = root[i] as usize == i
            && !virt[i]
            && !matches!(nodes[i].op, Op::Input { .. } | Op::Constant(_));
        if computed && b.locs[i] == Loc::None {
            b.locs[i] = Loc::Out(j as u32);
        } else {
            copies.push((j as u32, root[i]));
        }
    }

    // Steps, in topological order of their last node.
    for (i, n) in nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        if let Some(gid) = group[i] {
            let gr = &groups[gid as usize];
            if gr.members.last() == Some(&(i as u32)) {
                b.group_step(gr)?;
            }
            continue;
        }
        b.op_step(i, n)?;
    }
    for (j, r) in copies {
        let n = &nodes[r as usize];
        b.steps.push(Step {
            node: r,
            kind: StepKind::Copy(CopyStep {
                parts: vec![Strided::contiguous(r, n.shape.numel())],
            }),
            targets: vec![Target {
                dst: Dst::Out(j),
                numel: n.shape.numel(),
                dtype: n.dtype,
            }],
            reads: vec![r],
        });
    }

    for step in &mut b.steps {
        if let Some(o) = origins.get(step.node as usize) {
            step.node = o.0;
        }
    }

    let slots = b.assign_slots();
    b.stats.steps = b.steps.len();
    b.stats.buffers = slots.len();
    b.stats.virtual_transposes = (0..nn).filter(|&i| virt[i]).count();
    let max_targets = b.steps.iter().map(|s| s.targets.len()).max().unwrap_or(0);
    let input_types: Vec<TensorType> = g.inputs().iter().map(|i| g.ty(i.node)).collect();
    let output_types: Vec<TensorType> = g.outputs().iter().map(|&o| g.ty(o)).collect();
    let mut scalar_program = scalar_program(&b.steps, &b.locs, &input_types, &output_types);
    if let Some(prog) = &scalar_program {
        // Stores in output order, so that native code writes the results
        // where the caller wants them.
        let in_order = prog
            .output_of_target
            .iter()
            .enumerate()
            .all(|(t, &j)| t == j as usize);
        if !in_order && prog.output_of_target.len() == output_types.len() {
            b.steps[0].store_in_order(&prog.output_of_target);
            scalar_program = self::scalar_program(&b.steps, &b.locs, &input_types, &output_types);
        }
    }
    #[cfg(feature = "jit")]
    if b.jit {
        b.compile_native();
    }
    Ok(Plan {
        input_names: g.inputs().iter().map(|i| i.name.clone()).collect(),
        input_types,
        output_types,
        scalar_program,
        consts: b.consts,
        locs: b.locs,
        steps: b.steps,
        slots,
        regs: b.regs,
        scalar_regs: b.scalar_regs,
        max_rank: b.max_rank,
        acc_len: b.acc_len,
        half: b.half,
        solve: b.solve,
        max_targets,
        stats: b.stats,
    })
}

impl Step {
    /// Renumbers a scalar step's targets: target `t` becomes target
    /// `order[t]` (a permutation).
    fn store_in_order(&mut self, order: &[u32]) {
        let StepKind::Scalar(region) = &mut self.kind else {
            return;
        };
        let mut targets: Vec<Option<Target>> = (0..self.targets.len()).map(|_| None).collect();
        for (t, target) in self.targets.drain(..).enumerate() {
            targets[order[t] as usize] = Some(target);
        }
        self.targets = targets
            .into_iter()
            .map(|t| t.expect("a permutation"))
            .collect();
        for i in &mut region.code {
            if let SInstr::Store { target, .. } = i {
                *target = order[*target as usize];
            }
        }
    }
}

struct Builder<'a> {
    g: &'a Graph,
    root: &'a [u32],
    virt: &'a [bool],
    group: &'a [Option<u32>],
    stored: &'a [bool],
    consts: Vec<Storage>,
    locs: Vec<Loc>,
    steps: Vec<Step>,
    regs: [usize; 4],
    scalar_regs: usize,
    max_rank: usize,
    acc_len: usize,
    half: (usize, usize, usize),
    solve: (usize, usize),
    stats: PlanStats,
    /// Compile scalar regions to native code (feature `jit`).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    jit: bool,
}

impl Builder<'_> {
    /// Compiles every scalar region of at least [`JIT_MIN_INSTRS`]
    /// instructions to native code (last, once targets are final).
    #[cfg(feature = "jit")]
    fn compile_native(&mut self) {
        for step in &mut self.steps {
            if let StepKind::Scalar(region) = &mut step.kind {
                if region.code.len() >= JIT_MIN_INSTRS {
                    region.native =
                        super::jit::compile(region, step.targets.len()).map(std::sync::Arc::new);
                    self.stats.native_regions += region.native.is_some() as usize;
                }
            }
        }
    }

    fn shape(&self, i: usize) -> &Shape {
        &self.g.nodes()[i].shape
    }

    fn target(&self, i: usize) -> Target {
        let n = &self.g.nodes()[i];
        Target {
            dst: Dst::Node(i as u32),
            numel: n.shape.numel(),
            dtype: n.dtype,
        }
    }

    fn push(&mut self, node: usize, kind: StepKind, reads: Vec<Val>) {
        let t = self.target(node);
        self.steps.push(Step {
            node: node as u32,
            kind,
            targets: vec![t],
            reads,
        });
    }

    fn rank(&mut self, r: usize) {
        self.max_rank = self.max_rank.max(r);
    }

    /// The step of a non-element-wise node (one exhaustive table).
    fn op_step(&mut self, i: usize, n: &rlx_core::Node) -> Result<()> {
        let arg = |k: usize| n.inputs[k].index();
        match &n.op {
            Op::Input { .. } | Op::Constant(_) | Op::Reshape { .. } | Op::StopGradient => {}
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Cast(_)
            | Op::Broadcast { .. } => {
                unreachable!("element-wise nodes are grouped")
            }
            Op::Transpose { perm } => {
                if !self.virt[i] {
                    let x = arg(0);
                    let xs = contiguous(self.shape(x));
                    self.rank(perm.len());
                    let part = Strided {
                        src: self.root[x],
                        src_off: 0,
                        src_strides: perm.iter().map(|&p| xs[p]).collect(),
                        dims: n.shape.dims().to_vec(),
                        dst_off: 0,
                        dst_strides: contiguous(&n.shape),
                    };
                    self.push(i, StepKind::Copy(CopyStep { parts: vec![part] }), vec![self.root[x]]);
                }
            }
            Op::Slice { axis, start, .. } => {
                let x = arg(0);
                let xs = contiguous(self.shape(x));
                self.rank(xs.len());
                let part = Strided {
                    src: self.root[x],
                    src_off: start * xs[*axis],
                    src_strides: xs,
                    dims: n.shape.dims().to_vec(),
                    dst_off: 0,
                    dst_strides: contiguous(&n.shape),
                };
                self.push(i, StepKind::Copy(CopyStep { parts: vec![part] }), vec![self.root[x]]);
            }
            Op::Concat { axis } => {
                let os = contiguous(&n.shape);
                self.rank(os.len());
                let mut at = 0;
                let mut parts = Vec::new();
                let mut reads = Vec::new();
                for p in &n.inputs {
                    let s = self.shape(p.index());
                    parts.push(Strided {
                        src: self.root[p.index()],
                        src_off: 0,
                        src_strides: contiguous(s),
                        dims: s.dims().to_vec(),
                        dst_off: at * os[*axis],
                        dst_strides: os.clone(),
                    });
                    at += s.dim(*axis);
                    reads.push(self.root[p.index()]);
                }
                self.push(i, StepKind::Copy(CopyStep { parts }), reads);
            }
            Op::Reduce { op, axes } => {
                let x = arg(0);
                let xs = self.shape(x).clone();
                let os = contiguous(&n.shape);
                let mut out_strides = Vec::with_capacity(xs.rank());
                let mut kept = 0;
                let mut count = 1;
                for d in 0..xs.rank() {
                    if axes.contains(&d) {
                        out_strides.push(0);
                        count *= xs.dim(d);
                    } else {
                        out_strides.push(os[kept]);
                        kept += 1;
                    }
                }
                self.rank(xs.rank());
                if n.dtype != DType::I64 {
                    self.acc_len = self.acc_len.max(n.shape.numel());
                }
                let step = ReduceStep {
                    x: self.root[x],
                    op: *op,
                    dims: xs.dims().to_vec(),
                    out_strides,
                    out_numel: n.shape.numel(),
                    count,
                };
                self.push(i, StepKind::Reduce(step), vec![self.root[x]]);
            }
            Op::MatMul => {
                let (a, ar) = self.mat_view(arg(0), &n.shape);
                let (b, br) = self.mat_view(arg(1), &n.shape);
                let r = n.shape.rank();
                let step = MatMulStep {
                    a,
                    b,
                    batch_dims: n.shape.dims()[..r - 2].to_vec(),
                    m: n.shape.dim(r - 2),
                    k: self.shape(arg(0)).dim(self.shape(arg(0)).rank() - 1),
                    n: n.shape.dim(r - 1),
                    dtype: n.dtype,
                };
                let h = step.half_scratch();
                self.half = (self.half.0.max(h.0), self.half.1.max(h.1), self.half.2.max(h.2));
                self.push(i, StepKind::MatMul(step), vec![ar, br]);
            }
            Op::Solve => {
                let (a, bb) = (arg(0), arg(1));
                let s = self.shape(a).clone();
                let r = s.rank();
                let nn = s.dim(r - 1);
                let k = n.shape.dim(r - 1);
                self.solve = (self.solve.0.max(nn * nn), self.solve.1.max(nn * k));
                let step = SolveStep {
                    a: self.root[a],
                    b: self.root[bb],
                    batches: s.dims()[..r - 2].iter().product(),
                    a_shape: s,
                    n: nn,
                    k,
                    dtype: n.dtype,
                };
                self.push(i, StepKind::Solve(step), vec![self.root[a], self.root[bb]]);
            }
            Op::Gather { .. } | Op::ScatterAdd { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } => {
                let args: Vec<(Val, Shape)> = n
                    .inputs
                    .iter()
                    .map(|p| (self.root[p.index()], self.shape(p.index()).clone()))
                    .collect();
                let reads = args.iter().map(|a| a.0).collect();
                let step = KernelStep {
                    op: n.op.clone(),
                    args,
                    out_shape: n.shape.clone(),
                };
                self.push(i, StepKind::Kernel(step), reads);
            }
            Op::Custom(c) => {
                return Err(Error::Unsupported(format!(
                    "custom op `{}` reached the compiler un-inlined (compile runs `inline_custom` first)",
                    c.name
                )))
            }
        }
        Ok(())
    }

    /// A matmul operand as a strided view (a virtual transpose reads its
    /// operand with permuted strides), aligned to the output batch dims.
    fn mat_view(&mut self, x: usize, out: &Shape) -> (MatView, Val) {
        let nodes = self.g.nodes();
        let (src, dims, strides) = if self.virt[x] {
            let Op::Transpose { perm } = &nodes[x].op else {
                unreachable!("virtual nodes are transposes")
            };
            let inner = nodes[x].inputs[0].index();
            let base = contiguous(self.shape(inner));
            (
                self.root[inner],
                nodes[x].shape.dims().to_vec(),
                perm.iter().map(|&p| base[p]).collect::<Vec<_>>(),
            )
        } else {
            let s = self.shape(x);
            (self.root[x], s.dims().to_vec(), contiguous(s))
        };
        let r = dims.len();
        let nb = out.rank() - 2;
        let batch_strides = (0..nb)
            .map(|d| {
                let lead = nb - (r - 2);
                if d < lead || dims[d - lead] == 1 {
                    0
                } else {
                    strides[d - lead]
                }
            })
            .collect();
        (
            MatView {
                val: src,
                batch_strides,
                rs: strides[r - 2],
                cs: strides[r - 1],
            },
            src,
        )
    }

    /// Access pattern of leaf `p` inside a loop over `shape`.
    fn access(&mut self, p: usize, shape: &Shape) -> Access {
        let ps = self.shape(p);
        if ps.numel() == 1 {
            Access::Splat
        } else if ps.numel() == shape.numel() {
            Access::Contig
        } else {
            let r = shape.rank();
            let pr = ps.rank();
            let pst = contiguous(ps);
            let strides = (0..r)
                .map(|d| {
                    let lead = r - pr;
                    if d < lead || ps.dim(d - lead) == 1 {
                        0
                    } else {
                        pst[d - lead]
                    }
                })
                .collect();
            self.rank(r);
            Access::Broadcast {
                dims: shape.dims().to_vec(),
                strides,
            }
        }
    }

    fn group_step(&mut self, gr: &Group) -> Result<()> {
        let nodes = self.g.nodes();
        let members = &gr.members;
        let scalar = gr.shape.is_scalar()
            && members.iter().all(|&m| {
                let n = &nodes[m as usize];
                n.dtype != DType::I64
                    && n.inputs
                        .iter()
                        .all(|p| nodes[p.index()].dtype != DType::I64)
            });
        if scalar {
            self.scalar_step(gr)
        } else {
            self.fused_step(gr)
        }
    }

    fn fused_step(&mut self, gr: &Group) -> Result<()> {
        let nodes = self.g.nodes();
        let members = &gr.members;
        let gid = self.group[members[0] as usize];
        let in_group = |v: usize| self.group[v] == gid;
        // Whether a dtype is computed in its own storage type (no conversion),
        // so leaves can be read and results written in place.
        let native = |d: DType| !matches!(d, DType::F16 | DType::BF16);
        // Last member position using each value.
        let mut last_use: HashMap<u32, usize> = HashMap::new();
        for (k, &m) in members.iter().enumerate() {
            for p in &nodes[m as usize].inputs {
                last_use.insert(p.0, k);
            }
        }
        let mut ra = RegAlloc::default();
        // Registers of group members and of leaves loaded into registers.
        let mut reg_of: HashMap<u32, Reg> = HashMap::new();
        let mut direct_of: HashMap<u32, u32> = HashMap::new();
        let mut splat_of: HashMap<u32, Reg> = HashMap::new();
        let mut leaves: Vec<Leaf> = Vec::new();
        let mut body = Vec::new();
        let mut targets = Vec::new();
        let mut reads = Vec::new();
        // Splat leaves first: their registers are filled once per call and
        // must never be handed to a per-block value.
        for &m in members {
            for p in &nodes[m as usize].inputs {
                let pi = p.index();
                if in_group(pi) || splat_of.contains_key(&p.0) || self.shape(pi).numel() != 1 {
                    continue;
                }
                let reg = ra.alloc(Bank::of(nodes[pi].dtype));
                leaves.push(Leaf {
                    val: self.root[pi],
                    access: Access::Splat,
                    reg: Some(reg),
                });
                reads.push(self.root[pi]);
                splat_of.insert(p.0, reg);
            }
        }
        for (k, &m) in members.iter().enumerate() {
            let n = &nodes[m as usize];
            let elementwise_math = matches!(n.op, Op::Unary(_) | Op::Binary(_));
            let mut srcs: Vec<Src> = Vec::with_capacity(3);
            for p in &n.inputs {
                let pi = p.index();
                let src = if let Some(&r) = splat_of.get(&p.0) {
                    if elementwise_math {
                        Src::Splat(r)
                    } else {
                        Src::Reg(r)
                    }
                } else if let Some(&r) = reg_of.get(&p.0) {
                    Src::Reg(r)
                } else {
                    debug_assert!(!in_group(pi), "group members precede their users");
                    let access = self.access(pi, &gr.shape);
                    let in_place = matches!(access, Access::Contig) && native(nodes[pi].dtype);
                    if elementwise_math && in_place {
                        let l = *direct_of.entry(p.0).or_insert_with(|| {
                            leaves.push(Leaf {
                                val: self.root[pi],
                                access: Access::Contig,
                                reg: None,
                            });
                            (leaves.len() - 1) as u32
                        });
                        Src::Direct(l)
                    } else {
                        let reg = ra.alloc(Bank::of(nodes[pi].dtype));
                        leaves.push(Leaf {
                            val: self.root[pi],
                            access,
                            reg: Some(reg),
                        });
                        body.push(Instr::Load {
                            leaf: (leaves.len() - 1) as u32,
                        });
                        reg_of.insert(p.0, reg);
                        Src::Reg(reg)
                    }
                };
                reads.push(self.root[pi]);
                srcs.push(src);
            }
            let reg_src = |s: Src| match s {
                Src::Reg(r) | Src::Splat(r) => r,
                Src::Direct(_) => unreachable!("only unary and binary ops read leaves in place"),
            };
            let bank = Bank::of(n.dtype);
            let stored = self.stored[m as usize];
            let used_later = last_use.contains_key(&m);
            // Results needed only outside are written straight to their target.
            let direct_out = elementwise_math && stored && !used_later && native(n.dtype);
            let dst = if direct_out {
                targets.push(self.target(m as usize));
                Out::Target((targets.len() - 1) as u32)
            } else {
                Out::Reg(ra.alloc(bank))
            };
            let dst_reg = || match dst {
                Out::Reg(r) => r,
                Out::Target(_) => unreachable!("register destinations only"),
            };
            body.push(match &n.op {
                Op::Unary(op) => Instr::Unary {
                    op: *op,
                    bank,
                    x: srcs[0],
                    dst,
                },
                Op::Binary(op) => Instr::Binary {
                    op: *op,
                    bank,
                    a: srcs[0],
                    b: srcs[1],
                    dst,
                },
                Op::Compare(op) => Instr::Compare {
                    op: *op,
                    a: reg_src(srcs[0]),
                    b: reg_src(srcs[1]),
                    dst: dst_reg(),
                },
                Op::Select => Instr::Select {
                    c: reg_src(srcs[0]),
                    a: reg_src(srcs[1]),
                    b: reg_src(srcs[2]),
                    dst: dst_reg(),
                },
                Op::Cast(_) | Op::Broadcast { .. } => Instr::Cast {
                    x: reg_src(srcs[0]),
                    dst: dst_reg(),
                },
                other @ (Op::Input { .. }
                | Op::Constant(_)
                | Op::Reduce { .. }
                | Op::MatMul
                | Op::Transpose { .. }
                | Op::Reshape { .. }
                | Op::Concat { .. }
                | Op::Slice { .. }
                | Op::Gather { .. }
                | Op::ScatterAdd { .. }
                | Op::Softmax { .. }
                | Op::LogSoftmax { .. }
                | Op::Solve
                | Op::StopGradient
                | Op::Custom(_)) => unreachable!("`{}` is not element-wise", other.name()),
            });
            if let Out::Reg(r) = dst {
                if !native(n.dtype) {
                    body.push(Instr::Round {
                        reg: r,
                        dtype: n.dtype,
                    });
                }
                if stored {
                    body.push(Instr::Store {
                        src: r,
                        target: targets.len() as u32,
                    });
                    targets.push(self.target(m as usize));
                }
                reg_of.insert(m, r);
                if !used_later {
                    ra.release(r);
                }
            }
            // Free registers of operands used for the last time (splats stay).
            let mut seen: Vec<u32> = Vec::with_capacity(3);
            for p in &n.inputs {
                if seen.contains(&p.0) || splat_of.contains_key(&p.0) {
                    continue;
                }
                seen.push(p.0);
                if last_use.get(&p.0) == Some(&k) {
                    if let Some(&r) = reg_of.get(&p.0) {
                        ra.release(r);
                    }
                }
            }
        }
        for (b, c) in ra.count.iter().enumerate() {
            self.regs[b] = self.regs[b].max(*c);
        }
        reads.sort_unstable();
        reads.dedup();
        let (body, chained) = form_chains(body, &leaves);
        self.stats.fused_loops += 1;
        self.stats.fused_nodes += members.len();
        self.stats.chained_nodes += chained;
        self.steps.push(Step {
            node: gr.members.last().copied().unwrap_or_default(),
            kind: StepKind::Fused(FusedStep::new(gr.shape.numel(), leaves, body)),
            targets,
            reads,
        });
        Ok(())
    }

    fn scalar_step(&mut self, gr: &Group) -> Result<()> {
        let nodes = self.g.nodes();
        let stype = |d: DType| SType::of(d).expect("scalar regions exclude i64");
        let mut reg_of: HashMap<u32, u32> = HashMap::new();
        let mut consts = Vec::new();
        let mut code = Vec::new();
        let mut targets = Vec::new();
        let mut reads = Vec::new();
        let mut next = 0u32;
        for &m in &gr.members {
            let n = &nodes[m as usize];
            for p in &n.inputs {
                if reg_of.contains_key(&p.0) {
                    continue;
                }
                let r = next;
                next += 1;
                reg_of.insert(p.0, r);
                let root = self.root[p.index()];
                match self.locs[root as usize] {
                    Loc::Const(k) => consts.push((r, self.consts[k as usize].get_f64(0))),
                    _ => {
                        code.push(SInstr::Load { val: root, dst: r });
                        reads.push(root);
                    }
                }
            }
            let dst = next;
            next += 1;
            let o = |k: usize| reg_of[&n.inputs[k].0];
            code.push(match &n.op {
                Op::Unary(op) => unary_instr(*op, stype(n.dtype), o(0), dst),
                Op::Binary(op) => binary_instr(*op, stype(n.dtype), o(0), o(1), dst),
                Op::Compare(op) => SInstr::Compare {
                    op: *op,
                    a: o(0),
                    b: o(1),
                    dst,
                },
                Op::Select => SInstr::Select {
                    c: o(0),
                    a: o(1),
                    b: o(2),
                    dst,
                },
                Op::Cast(_) | Op::Broadcast { .. } => SInstr::Cast {
                    to: stype(n.dtype),
                    x: o(0),
                    dst,
                },
                other @ (Op::Input { .. }
                | Op::Constant(_)
                | Op::Reduce { .. }
                | Op::MatMul
                | Op::Transpose { .. }
                | Op::Reshape { .. }
                | Op::Concat { .. }
                | Op::Slice { .. }
                | Op::Gather { .. }
                | Op::ScatterAdd { .. }
                | Op::Softmax { .. }
                | Op::LogSoftmax { .. }
                | Op::Solve
                | Op::StopGradient
                | Op::Custom(_)) => unreachable!("`{}` is not element-wise", other.name()),
            });
            reg_of.insert(m, dst);
            if self.stored[m as usize] {
                code.push(SInstr::Store {
                    src: dst,
                    target: targets.len() as u32,
                });
                targets.push(self.target(m as usize));
            }
        }
        // Loads first, by node (inputs in order): a region's leaves are all
        // computed before it runs, and a scalar program whose loads are its
        // inputs in order gathers them without a map.
        code.sort_by_key(|i| match i {
            SInstr::Load { val, .. } => (false, *val),
            _ => (true, 0),
        });
        reads.sort_unstable();
        reads.dedup();
        let base = self.scalar_regs;
        self.scalar_regs += next as usize;
        self.stats.scalar_regions += 1;
        self.stats.scalar_nodes += gr.members.len();
        let mut step = ScalarStep {
            base,
            len: next as usize,
            consts,
            code,
            #[cfg(feature = "jit")]
            native: None,
        };
        step.use_accumulator();
        self.steps.push(Step {
            node: gr.members.last().copied().unwrap_or_default(),
            kind: StepKind::Scalar(step),
            targets,
            reads,
        });
        Ok(())
    }

    /// Assigns buffer slots to values without a location, by liveness.
    fn assign_slots(&mut self) -> Vec<(DType, usize)> {
        let mut last_use: HashMap<Val, usize> = HashMap::new();
        for (s, step) in self.steps.iter().enumerate() {
            for &v in &step.reads {
                last_use.insert(v, s);
            }
        }
        let mut slots: Vec<(DType, usize)> = Vec::new();
        let mut free: Vec<u32> = Vec::new();
        for s in 0..self.steps.len() {
            let targets = self.steps[s].targets.clone();
            for t in &targets {
                let Dst::Node(v) = t.dst else { continue };
                if self.locs[v as usize] != Loc::None {
                    continue;
                }
                // Best fit among free slots of this dtype: the smallest that
                // is large enough, else the largest (grown).
                let same: Vec<usize> = (0..free.len())
                    .filter(|&f| slots[free[f] as usize].0 == t.dtype)
                    .collect();
                let fit = same
                    .iter()
                    .copied()
                    .filter(|&f| slots[free[f] as usize].1 >= t.numel)
                    .min_by_key(|&f| slots[free[f] as usize].1)
                    .or_else(|| {
                        same.iter()
                            .copied()
                            .max_by_key(|&f| slots[free[f] as usize].1)
                    });
                let slot = match fit {
                    Some(f) => {
                        let slot = free.swap_remove(f);
                        let cap = &mut slots[slot as usize].1;
                        *cap = (*cap).max(t.numel);
                        slot
                    }
                    None => {
                        slots.push((t.dtype, t.numel));
                        (slots.len() - 1) as u32
                    }
                };
                self.locs[v as usize] = Loc::Buf(slot);
            }
            // Free what dies here: values last read by this step, and values
            // written here that nothing reads.
            let mut dying: Vec<Val> = self.steps[s]
                .reads
                .iter()
                .copied()
                .filter(|v| last_use.get(v) == Some(&s))
                .collect();
            for t in &targets {
                if let Dst::Node(v) = t.dst {
                    if !last_use.contains_key(&v) {
                        dying.push(v);
                    }
                }
            }
            dying.sort_unstable();
            dying.dedup();
            for v in dying {
                if let Loc::Buf(slot) = self.locs[v as usize] {
                    free.push(slot);
                }
            }
        }
        slots
    }
}
