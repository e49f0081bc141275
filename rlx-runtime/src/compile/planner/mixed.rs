//! Scalar regions of mixed graphs: runs of small values inside a graph that
//! also has large ones, each lowered element by element into one scalar
//! program (as a whole small graph is, see `scalarize`) that runs as one
//! step of the general plan.
//!
//! A model with a few parameters driving a large element-wise computation
//! (a diode law over 10 000 devices whose temperature, saturation current
//! and emission coefficient go through a chain of scalar ops first) has
//! many tiny values next to a few large ones; its gradient adds reductions
//! of large cotangents into the parameters, which feed more small chains.
//! Run by the general planner, each tiny op is a step (a copy, a kernel
//! call, a fused loop of one element). Here they become one step each run:
//!
//! - **membership**: a live node is *small* when its value and every
//!   operand have at most [`SMALL_VALUE`] elements, its op lowers element
//!   by element (element-wise ops, movement ops, float reductions and
//!   products, gathers and scatter-adds with constant indices; not
//!   softmax, solve, loops), and its dtype is `f32`, `f64` or `bool`. A
//!   large tensor is never an operand, a result or a boundary value of a
//!   region: a reduction of a large cotangent stays a kernel (or a fold
//!   of its loop) and the region reads its result;
//! - **regions**: in topological order, a small node joins the open
//!   region (connected to it or not, as independent 0-d nodes share a
//!   scalar region), and a region is *sealed* when a node outside it
//!   reads one of its members. Running the whole region at its last
//!   member is then a valid schedule: everything it reads from outside
//!   comes before that member, everything reading it after;
//! - **boundary**: a region reads its *inputs* (outside operands other
//!   than constants, which are copied into its element program and folded
//!   there) from the plan's buffers and writes its *outputs* (members read
//!   outside, or graph outputs) into them. Both must be `f32`/`f64`;
//!   their values are never views, windows or placed values (the planner
//!   pins them, as it pins graph outputs);
//! - **pay rule**: a region is kept only when it has at least two
//!   computing members (ops other than movement: reshape, slice,
//!   transpose, broadcast, concat, gather) and is not just 0-d
//!   element-wise nodes, which the general planner already runs as one
//!   scalar region. A region of one op would trade one step for one step
//!   plus the copies in and out.
//!
//! A region whose element program cannot be built (more than
//! `MAX_INPUT_ELEMENTS` input elements, too many element nodes) is left to
//! the general planner, node by node.

use std::collections::HashMap;
use std::sync::Arc;

use rlx_core::{DType, Graph, Node, NodeId, Op};

use crate::compile::options::Options;
use crate::compile::plan::{Step, StepKind};
use crate::compile::planner::builder::Builder;
use crate::compile::planner::scalarize::SMALL_VALUE;
use crate::compile::small::program::Small;
use crate::compile::steps::region::RegionStep;

/// A region of small values run as one scalar program.
pub(super) struct Region {
    /// Its nodes, in topological order.
    pub(super) members: Vec<u32>,
    /// Values read from the rest of the plan, in order of first read.
    pub(super) inputs: Vec<u32>,
    /// Members read by the rest of the plan or returned, in node order.
    pub(super) outputs: Vec<u32>,
    /// The element program.
    pub(super) small: Arc<Small>,
}

/// The regions of `g` (see the module docs) and the region of each node.
/// `users[i]` lists the live users of node `i`.
pub(super) fn regions(
    g: &Graph,
    live: &[bool],
    users: &[Vec<u32>],
    is_output: &[bool],
    options: &Options,
) -> (Vec<Option<u32>>, Vec<Region>) {
    let nodes = g.nodes();
    let mut region: Vec<Option<u32>> = vec![None; nodes.len()];
    let mut sets: Vec<Vec<u32>> = Vec::new();
    let mut open: Option<u32> = None;
    for (i, n) in nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        if small(g, i) {
            let r = *open.get_or_insert_with(|| {
                sets.push(Vec::new());
                (sets.len() - 1) as u32
            });
            sets[r as usize].push(i as u32);
            region[i] = Some(r);
        } else if open.is_some() && n.inputs.iter().any(|p| region[p.index()] == open) {
            open = None;
        }
    }
    let mut kept = Vec::new();
    for (r, members) in sets.into_iter().enumerate() {
        let built = pays(g, &members)
            .then(|| build(g, &members, r as u32, &region, users, is_output, options))
            .flatten();
        let id = built.as_ref().map(|_| kept.len() as u32);
        for &m in &members {
            region[m as usize] = id;
        }
        kept.extend(built);
    }
    (region, kept)
}

/// Whether node `i` may be a region member (see the module docs).
fn small(g: &Graph, i: usize) -> bool {
    let nodes = g.nodes();
    let n = &nodes[i];
    let value = |d: DType| matches!(d, DType::F32 | DType::F64 | DType::Bool);
    let float = matches!(n.dtype, DType::F32 | DType::F64);
    let const_index = |k: usize| {
        let p = &nodes[n.inputs[k].index()];
        p.dtype == DType::I64 && matches!(p.op, Op::Constant(_))
    };
    let op = match &n.op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Cast(_)
        | Op::Broadcast { .. }
        | Op::Reshape { .. }
        | Op::StopGradient
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Concat { .. } => true,
        Op::Gather { .. } => const_index(1),
        Op::ScatterAdd { .. } => float && const_index(1),
        Op::Reduce { .. } | Op::MatMul => float,
        Op::Input { .. }
        | Op::Constant(_)
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Solve
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => false,
    };
    op && value(n.dtype)
        && n.shape.numel() <= SMALL_VALUE
        && n.inputs.iter().all(|p| {
            let p = &nodes[p.index()];
            p.shape.numel() <= SMALL_VALUE && (value(p.dtype) || p.dtype == DType::I64)
        })
}

/// The pay rule (see the module docs).
fn pays(g: &Graph, members: &[u32]) -> bool {
    let nodes = g.nodes();
    let computing = members
        .iter()
        .filter(|&&m| {
            !matches!(
                nodes[m as usize].op,
                Op::Reshape { .. }
                    | Op::StopGradient
                    | Op::Slice { .. }
                    | Op::Transpose { .. }
                    | Op::Broadcast { .. }
                    | Op::Concat { .. }
                    | Op::Gather { .. }
            )
        })
        .count();
    let scalar_elementwise = members.iter().all(|&m| {
        let n = &nodes[m as usize];
        n.shape.rank() == 0 && crate::compile::planner::facts::is_fusable(&n.op)
    });
    computing >= 2 && !scalar_elementwise
}

/// Region `r` (its `members`): its boundary and element program, or `None`
/// if a boundary value is not `f32`/`f64` or the program cannot be built.
fn build(
    g: &Graph,
    members: &[u32],
    r: u32,
    region: &[Option<u32>],
    users: &[Vec<u32>],
    is_output: &[bool],
    options: &Options,
) -> Option<Region> {
    let nodes = g.nodes();
    let inside = |v: usize| region[v] == Some(r);
    let float = |v: u32| matches!(nodes[v as usize].dtype, DType::F32 | DType::F64);
    let mut inputs: Vec<u32> = Vec::new();
    for &m in members {
        for p in &nodes[m as usize].inputs {
            let is_const = matches!(nodes[p.index()].op, Op::Constant(_));
            if !inside(p.index()) && !is_const && !inputs.contains(&p.0) {
                inputs.push(p.0);
            }
        }
    }
    let outputs: Vec<u32> = members
        .iter()
        .copied()
        .filter(|&m| {
            is_output[m as usize] || users[m as usize].iter().any(|&u| !inside(u as usize))
        })
        .collect();
    if !inputs.iter().chain(&outputs).all(|&v| float(v)) {
        return None;
    }
    // The region as a graph of its own: inputs, copied constants, members.
    let mut sub = Graph::new();
    let mut map: HashMap<u32, NodeId> = HashMap::new();
    for &p in &inputs {
        let n = &nodes[p as usize];
        map.insert(p, sub.input(format!("%{p}"), n.shape.clone(), n.dtype));
    }
    for &m in members {
        let n = &nodes[m as usize];
        let mut operands = Vec::with_capacity(n.inputs.len());
        for p in &n.inputs {
            let id = match map.get(&p.0) {
                Some(&id) => id,
                None => {
                    // Not an input nor an earlier member: a constant.
                    let id = sub.push_unchecked(nodes[p.index()].clone());
                    map.insert(p.0, id);
                    id
                }
            };
            operands.push(id);
        }
        let id = sub.push_unchecked(Node {
            op: n.op.clone(),
            inputs: operands,
            shape: n.shape.clone(),
            dtype: n.dtype,
        });
        map.insert(m, id);
    }
    sub.set_outputs(outputs.iter().map(|o| map[o]).collect());
    sub.verify().ok()?;
    let small = Small::build(&sub, options)?;
    Some(Region {
        members: members.to_vec(),
        inputs,
        outputs,
        small: Arc::new(small),
    })
}

impl Builder<'_> {
    /// The step of region `r`, at its last member.
    pub(super) fn region_step(&mut self, r: &Region) {
        let nodes = self.g.nodes();
        let inputs: Vec<(u32, usize)> = r
            .inputs
            .iter()
            .map(|&p| (self.root[p as usize], nodes[p as usize].shape.numel()))
            .collect();
        let mut reads: Vec<u32> = inputs.iter().map(|&(v, _)| v).collect();
        reads.sort_unstable();
        reads.dedup();
        let targets = r.outputs.iter().map(|&m| self.target(m as usize)).collect();
        self.stats.small_regions += 1;
        self.stats.small_region_nodes += r.members.len();
        self.stats.small_region_inputs += r.inputs.len();
        self.stats.small_region_outputs += r.outputs.len();
        self.steps.push(Step {
            node: *r.members.last().expect("a region has members"),
            kind: StepKind::Region(RegionStep {
                small: Arc::clone(&r.small),
                inputs,
            }),
            targets,
            reads,
        });
    }
}
