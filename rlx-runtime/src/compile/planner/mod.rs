//! Graph → [`Plan`]: grouping, step selection, buffer planning.
//!
//! The planner walks the graph once in topological order and decides for
//! each live node how its value comes to exist:
//!
//! - inputs and constants are read where they are (constants are converted
//!   to their dtype once, at compile time);
//! - `Reshape` and `StopGradient` are *aliases*: same elements, same buffer;
//! - a `Slice` or `Transpose` whose users are all element-wise is a *view*
//!   (see `views`): the fused loops reading it walk its operand's storage;
//! - a `Transpose` whose only consumers are matrix products is *virtual*:
//!   the products read its operand through permuted strides;
//! - so is a `Slice` that is one contiguous range of its operand (a layer
//!   `w[l]` of stacked weights) and whose only consumers (through reshapes
//!   and virtual transposes) are matrix products: they read the range in
//!   place, at an offset (a *window*);
//! - a `Gather` of a vector with constant indices whose only consumers are
//!   element-wise nodes of its shape is *indexed*: their fused loops read
//!   its operand through the indices (see `indexed`);
//! - element-wise nodes (unary, binary, compare, select, cast, broadcast)
//!   form *groups* of one output shape, each run as one fused loop (or, for
//!   0-d groups without `i64`, as a scalar region). A node joins the group
//!   of an operand of the same shape unless that group is *sealed*; a group
//!   is sealed as soon as a node outside it reads one of its members, which
//!   keeps "run the whole group at its last member" a valid schedule. A node
//!   reading several open groups of its shape merges them;
//! - a float reduction of a member of an open group is folded into that
//!   group's loop as a *sink* (see `fold`) when the loop is small enough
//!   to run on one thread;
//! - a value whose only user is a concat or a copied transpose is *placed*
//!   (see `places`): its loop or copy writes it straight into the user's
//!   buffer through strides;
//! - a run of small values (at most 256 elements each) in a graph that
//!   also has large ones is a *scalar region* (see `mixed`): one step
//!   running a scalar program over its elements;
//! - a matrix product read only by one fused loop of its shape that
//!   stores a value of the product's shape and dtype runs in that loop's
//!   step, written into that value's buffer (an *epilogue*, see
//!   `epilogue`);
//! - every other node is its own step.
//!
//! A graph holding complex values is planned *plainly*: no fusion, views,
//! windows, scalar regions or epilogues, every computing node a step of
//! its reference kernel (which has the complex arithmetic; the fused and
//! scalar paths are written for real registers). Real graphs never take
//! this path, so their plans are unchanged.
//!
//! Values that outlive their step live in buffer slots. Slots are assigned
//! by liveness (a slot is free after the last step reading it) and reused
//! for later values of the same dtype; a slot's capacity is the largest
//! value it holds, so warm runs never allocate. The first occurrence of each
//! computed graph output is written straight into the caller's output
//! tensor; other outputs are copied at the end.

//!
//! Modules: `builder` holds the state of one build (and buffer
//! assignment); `ops` picks the step of each non-element-wise op;
//! `regions` turns a group into a fused loop or a scalar region. This
//! module groups the nodes and drives the build.

mod builder;
mod epilogue;
mod facts;
mod fills;
mod indexed;
mod mixed;
mod ops;
mod places;
mod regions;
pub(super) mod scalarize;
mod views;

use rlx_core::{DType, Graph, Literal, NodeId, Op, Result, Shape, TensorType};

use crate::compile::base::env::{Dst, Loc};
use crate::compile::options::Options;
use crate::compile::plan::{Plan, Step, StepKind, Target};
use crate::compile::planner::builder::Builder;
use crate::compile::planner::facts::Group;
use crate::compile::scalar::code::SInstr;
use crate::compile::scalar::program::ScalarProgram;
use crate::compile::steps::movement::{CopyStep, Strided};
use crate::storage::Storage;
use crate::value::is_number;

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

/// The open group a node folds into as a sink: a float reduction of a
/// member of that group, over a loop small enough never to be split
/// across threads (a sink runs on one thread; the bits stay those of one
/// thread either way).
fn folds_into(
    g: &Graph,
    i: usize,
    group: &[Option<u32>],
    groups: &[Group],
    sink: &[bool],
) -> Option<u32> {
    let n = &g.nodes()[i];
    if !matches!(n.op, Op::Reduce { .. }) {
        return None;
    }
    let x = n.inputs[0].index();
    let gid = group[x]?;
    let gr = &groups[gid as usize];
    let xn = &g.nodes()[x];
    let float = matches!(n.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
    (float
        && !sink[x]
        && !gr.sealed
        && xn.dtype == n.dtype
        && xn.shape.rank() > 0
        && gr.shape == xn.shape
        && gr.shape.numel() < 2 * crate::compile::base::parallel::MIN_PER_PART)
        .then_some(gid)
}

/// Whether a live value of `g` is complex (see the module docs: such a
/// graph is planned plainly).
pub(crate) fn has_complex(g: &Graph) -> bool {
    g.nodes().iter().any(|n| n.dtype.is_complex())
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

/// Compiles the scalar regions of a plan built with `jit` off to native
/// code, as [`build`] does with it on.
#[cfg(feature = "jit")]
pub(crate) fn compile_native(plan: &mut Plan) {
    builder::compile_native(&mut plan.steps, &mut plan.stats);
}

#[cfg(feature = "jit")]
pub(crate) use crate::compile::planner::builder::worth_compiling;

/// Builds the plan of a verified graph without `Custom` ops.
///
/// `origins[k]` is the node of the caller's graph that node `k` of `g` was
/// made for (`g` is the caller's graph after inlining and optimisation);
/// steps name those nodes in their errors.
pub(crate) fn build(g: &Graph, origins: &[NodeId], options: &Options) -> Result<Plan> {
    g.verify()?;
    build_verified(g, origins, options)
}

/// [`build`] of a graph the caller has just verified or built with checked
/// pushes (`compile`'s prepared graph: `passes::optimize_with_origins`
/// verifies its result, `loops::spine::fuse_spines` builds through the
/// checked `Graph` methods). Verifying it again re-validated every loop's
/// step graphs: a tenth of the LSTM's trace + differentiate + compile.
pub(crate) fn build_verified(g: &Graph, origins: &[NodeId], options: &Options) -> Result<Plan> {
    let plain = has_complex(g);
    let plain_options;
    let options = match plain {
        true => {
            plain_options = Options {
                scalarize: false,
                fuse_movement: false,
                epilogues: false,
                ..options.clone()
            };
            &plain_options
        }
        false => options,
    };
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
    // Scalar regions of small values (`mixed`).
    let (region, regions) = match options.scalarize {
        true => mixed::regions(g, &live, &users, &is_output, options),
        false => (vec![None; nn], Vec::new()),
    };
    // Values that must exist in storage of their own: graph outputs, and
    // the members and inputs of scalar regions (which read and write
    // whole values). They are never views, windows, virtual transposes,
    // indexed gathers or placed values.
    let mut pinned = is_output.clone();
    for (i, n) in nodes.iter().enumerate() {
        if region[i].is_some() {
            pinned[i] = true;
            for p in &n.inputs {
                pinned[p.index()] = true;
            }
        }
    }
    // Aliases resolve to the node owning the storage (a region member
    // owns its value).
    let mut root: Vec<u32> = (0..nn as u32).collect();
    for (i, n) in nodes.iter().enumerate() {
        if matches!(n.op, Op::Reshape { .. } | Op::StopGradient) && region[i].is_none() {
            root[i] = root[n.inputs[0].index()];
        }
    }
    let virt: Vec<bool> = (0..nn)
        .map(|i| {
            matches!(nodes[i].op, Op::Transpose { .. })
                && !plain
                && live[i]
                && !pinned[i]
                && !users[i].is_empty()
                && users[i]
                    .iter()
                    .all(|&u| matches!(nodes[u as usize].op, Op::MatMul))
        })
        .collect();
    let (indexed, windows) = match plain {
        true => (vec![None; nn], vec![None; nn]),
        false => (
            indexed::indexed_gathers(g, &live, &users, &pinned, &root),
            windows(g, &live, &users, &pinned, &virt),
        ),
    };

    let fuse = options.fuse_movement;
    let views = match fuse {
        true => views::views(g, &users, &pinned, &root, &virt),
        false => vec![None; nn],
    };

    // Grouping of element-wise nodes.
    let mut group: Vec<Option<u32>> = vec![None; nn];
    let mut groups: Vec<Group> = Vec::new();
    // The last group of 0-d nodes, which an unconnected 0-d node may join.
    let mut last_scalar: Option<u32> = None;
    // Reductions folded into the loop of their operand (see `fold`): a
    // sink's value exists only once its loop has run, so its readers
    // never join that loop (they seal it, as any outside reader does).
    let mut sink = vec![false; nn];
    for (i, n) in nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let folds = folds_into(g, i, &group, &groups, &sink).filter(|_| fuse);
        if let Some(gid) = folds.filter(|_| region[i].is_none()) {
            group[i] = Some(gid);
            groups[gid as usize].members.push(i as u32);
            sink[i] = true;
            continue;
        }
        // Region members are computed by their region's step: they read
        // operand groups from outside (sealing them) and join none.
        let fusable =
            crate::compile::planner::facts::is_fusable(&n.op) && region[i].is_none() && !plain;
        let mut joined = None;
        let mut merge: Vec<u32> = Vec::new();
        let folded: Vec<u32> = n
            .inputs
            .iter()
            .filter(|p| sink[p.index()])
            .filter_map(|p| group[p.index()])
            .collect();
        for p in &n.inputs {
            if let Some(gid) = group[p.index()] {
                let gr = &groups[gid as usize];
                if fusable && !gr.sealed && gr.shape == n.shape && !folded.contains(&gid) {
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
    let places = match fuse {
        true => places::places(g, &users, &pinned, &virt, &views, &group, &sink),
        false => vec![None; nn],
    };
    let stored: Vec<bool> = (0..nn)
        .map(|i| {
            group[i].is_some()
                && (is_output[i] || users[i].iter().any(|&u| group[u as usize] != group[i]))
        })
        .collect();

    let epilogues = match options.epilogues {
        true => epilogue::epilogues(&epilogue::Facts {
            g,
            live: &live,
            users: &users,
            pinned: &pinned,
            group: &group,
            groups: &groups,
            sink: &sink,
            stored: &stored,
            places: &places,
        }),
        false => epilogue::Epilogues::none(nn, groups.len()),
    };

    // The declared types, and the sizes and counts of a plan with no
    // steps, which the builder grows.
    let base = Plan::types_only(g);
    // Every loop's step graphs, compiled at once on the pool's threads.
    let loop_nodes: Vec<(usize, &rlx_core::LoopOp)> = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match &n.op {
            Op::Loop(l) if live[i] => Some((i, &**l)),
            _ => None,
        })
        .collect();
    let ops: Vec<&rlx_core::LoopOp> = loop_nodes.iter().map(|&(_, l)| l).collect();
    let loops = loop_nodes
        .iter()
        .map(|&(i, _)| i)
        .zip(crate::compile::steps::looping::compile_all(&ops, options))
        .collect();
    let roots = nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match &n.op {
            Op::Root(r) if live[i] => {
                Some((i, crate::compile::steps::root::Compiled::new(r, options)))
            }
            _ => None,
        })
        .collect();
    let mut b = Builder {
        g,
        root: &root,
        virt: &virt,
        indexed: &indexed,
        windows: &windows,
        views: &views,
        places: &places,
        group: &group,
        stored: &stored,
        epilogues: &epilogues,
        consts: Vec::new(),
        locs: vec![Loc::None; nn],
        steps: Vec::new(),
        regs: base.regs,
        scalar_regs: base.scalar_regs,
        max_rank: base.max_rank,
        acc_len: base.acc_len,
        half: base.half,
        solve: base.solve,
        stats: base.stats,
        jit: options.jit,
        loops,
        roots,
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
        // An output that aliases a computed value (a reshape of it) takes
        // that value's place: the step computing it writes the output.
        let i = root[o.index()] as usize;
        let computed = !virt[i] && !matches!(nodes[i].op, Op::Input { .. } | Op::Constant(_));
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
        if let Some(r) = region[i] {
            let r = &regions[r as usize];
            if r.members.last() == Some(&(i as u32)) {
                b.region_step(r);
            }
            continue;
        }
        let computes = !matches!(
            n.op,
            Op::Input { .. }
                | Op::Constant(_)
                | Op::Reshape { .. }
                | Op::StopGradient
                | Op::Loop(_)
        );
        match plain && computes {
            true => b.kernel_step(i, n),
            false => b.op_step(i, n)?,
        }
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
                fills: false,
            }],
            reads: vec![r],
        });
    }

    for step in &mut b.steps {
        if let Some(o) = origins.get(step.node as usize) {
            step.node = o.0;
        }
    }

    b.stats.virtual_slices = windows.iter().filter(|w| w.is_some()).count();
    let slots = b.assign_slots();
    b.stats.steps = b.steps.len();
    b.stats.buffers = slots.len();
    b.stats.virtual_transposes = (0..nn).filter(|&i| virt[i]).count();
    b.stats.indexed_gathers = (0..nn).filter(|&i| live[i] && indexed[i].is_some()).count();
    b.stats.views = views.iter().filter(|v| v.is_some()).count();
    b.stats.placed = places.iter().filter(|p| p.is_some()).count();
    (b.stats.unzeroed_outputs, b.stats.unzeroed_targets) = fills::mark(&mut b.steps, &b.locs);
    let max_targets = b.steps.iter().map(|s| s.targets.len()).max().unwrap_or(0);
    let (input_types, output_types) = (&base.input_types, &base.output_types);
    let mut scalar_program = scalar_program(&b.steps, &b.locs, input_types, output_types);
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
            scalar_program = self::scalar_program(&b.steps, &b.locs, input_types, output_types);
        }
    }
    #[cfg(feature = "jit")]
    if b.jit {
        b.compile_native();
    }
    Ok(Plan {
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
        ..base
    })
}

/// For each slice that is read in place (see the module docs), its
/// operand's storage and the offset of its range there.
fn windows(
    g: &Graph,
    live: &[bool],
    users: &[Vec<u32>],
    is_output: &[bool],
    virt: &[bool],
) -> Vec<Option<(usize, usize)>> {
    let nodes = g.nodes();
    // Whether every use of node `i` is (through reshapes and virtual
    // transposes) an operand of a matrix product.
    fn products_only(
        i: usize,
        nodes: &[rlx_core::Node],
        users: &[Vec<u32>],
        is_output: &[bool],
        virt: &[bool],
    ) -> bool {
        !is_output[i]
            && !users[i].is_empty()
            && users[i].iter().all(|&u| {
                let u = u as usize;
                match nodes[u].op {
                    Op::MatMul => true,
                    Op::Reshape { .. } => products_only(u, nodes, users, is_output, virt),
                    Op::Transpose { .. } => virt[u],
                    _ => false,
                }
            })
    }
    (0..nodes.len())
        .map(|i| {
            let Op::Slice { axis, start, .. } = nodes[i].op else {
                return None;
            };
            let x = nodes[i].inputs[0].index();
            let xs = g.shape(NodeId(x as u32));
            // One contiguous range: every axis before the sliced one has length 1.
            let contiguous = xs.dims()[..axis].iter().all(|&d| d == 1);
            (live[i] && contiguous && products_only(i, nodes, users, is_output, virt))
                .then(|| (x, start * xs.strides()[axis]))
        })
        .collect()
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
