//! Running a [`Plan`]: the per-call [`State`] and the step loop (the top
//! of `compile` below its entry points: it imports the plan and the steps).
//!
//! A `State` owns every mutable byte a run needs (buffer slots, fused
//! registers, the scalar register file, scratch for reductions, solves and
//! half-precision products), sized from the plan. Buffer slots are
//! allocated by the first run that writes them, each at its full capacity
//! and from zeroed memory ([`Storage::try_zeroed`]): building a plan costs
//! no buffer memory (a loop's packed residuals take tens of megabytes),
//! and the first run touches only what its steps write. A run only
//! resizes buffers within their capacity, so a warm run allocates
//! nothing.
//!
//! Each step *takes* its target storages out of their slots (or out of the
//! caller's output tensors), reads its operands through an [`Env`] of
//! shared borrows, and puts the targets back; reads and writes never alias
//! without any `unsafe`.

use rlx_core::{DType, Error, Result, Shape};

use crate::compile::base::env::{Dst, Env, Inputs, Loc, Outputs};
use crate::compile::base::parallel;
use crate::compile::base::regs::Registers;
use crate::compile::fusion::fused::LoopScratch;
use crate::compile::plan::{Plan, StepKind, Target};
use crate::compile::products::matmul::HalfScratch;
use crate::compile::steps::solve::SolveScratch;
use crate::kernels::{self, Operand};
use crate::storage::{out_of_memory, Storage};
use crate::value::is_number;

/// A placeholder left in a slot while its storage is taken (allocates nothing).
const EMPTY: Storage = Storage::F32(Vec::new());

/// Mutable per-call state.
#[derive(Debug)]
pub(crate) struct State {
    bufs: Vec<Storage>,
    /// Registers, indices, thread lanes and accumulators of fused loops
    /// (the indices and accumulators also serve reductions and copies).
    loops: LoopScratch,
    scalar: Vec<f64>,
    half: HalfScratch,
    solve: SolveScratch,
    taken: Vec<Storage>,
    /// Per target of the current step, whether it is a fresh output its
    /// fused loop writes whole (given room, not zeros; see `fresh`).
    fresh: Vec<bool>,
    /// One 0-d storage per input of a 0-d `F32`/`F64` type (empty for the
    /// others): where [`Inputs::Args`] numbers are copied.
    pub(crate) numbers: Vec<Storage>,
    /// Output storages for [`Outputs::Storages`] runs: 0-d numbers stay
    /// here; tensor outputs are moved out after each run.
    pub(crate) outs: Vec<Storage>,
}

impl State {
    /// A state sized for `plan`, with constant registers written and its
    /// buffer slots empty (see [`first_use`]); an [`Error::OutOfMemory`] if
    /// the allocator refuses scratch.
    pub(crate) fn new(plan: &Plan) -> Result<State> {
        let bufs = plan
            .slots
            .iter()
            .map(|&(dtype, _)| Storage::zeros(dtype, 0))
            .collect();
        let mut scalar = vec![0.0; plan.scalar_regs];
        for step in &plan.steps {
            if let StepKind::Scalar(s) = &step.kind {
                s.init(&mut scalar);
            }
        }
        // Numbers get their one element now; other outputs an empty storage
        // of their dtype (allocated by the run that fills it).
        let number = |t: &rlx_core::TensorType| Storage::zeros(t.dtype, is_number(t) as usize);
        Ok(State {
            bufs,
            loops: LoopScratch {
                regs: Registers::new(plan.regs),
                idx: vec![0; plan.max_rank],
                par: parallel::Scratch::new(plan.regs, plan.max_rank, plan.max_targets),
                // Scratch sized by the largest reduction, half-precision
                // product or solve: as large as the user's shapes, so fallible.
                acc: scratch(plan.acc_len, DType::F64)?,
            },
            scalar,
            half: HalfScratch {
                a: scratch(plan.half.0, DType::F32)?,
                b: scratch(plan.half.1, DType::F32)?,
                c: scratch(plan.half.2, DType::F32)?,
            },
            solve: SolveScratch {
                lu: scratch(plan.solve.0, DType::F64)?,
                x: scratch(plan.solve.1, DType::F64)?,
                z: Vec::new(),
            },
            taken: Vec::with_capacity(plan.max_targets),
            fresh: Vec::with_capacity(plan.max_targets),
            numbers: plan.input_types.iter().map(number).collect(),
            outs: plan.output_types.iter().map(number).collect(),
        })
    }
}

/// `n` zeros of a scratch buffer whose elements are `dtype`'s, or
/// [`Error::OutOfMemory`].
fn scratch<T: Copy + Default>(n: usize, dtype: DType) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| out_of_memory("compile", &Shape::from([n]), dtype))?;
    v.resize(n, T::default());
    Ok(v)
}

fn slot<'s>(
    plan: &Plan,
    dst: Dst,
    bufs: &'s mut [Storage],
    outs: &'s mut Outputs<'_>,
) -> &'s mut Storage {
    let loc = match dst {
        Dst::Node(v) => plan.locs[v as usize],
        Dst::Out(j) => Loc::Out(j),
    };
    match loc {
        Loc::Buf(s) => &mut bufs[s as usize],
        Loc::Out(j) => outs.get_mut(j as usize),
        Loc::None | Loc::Input(_) | Loc::Const(_) => unreachable!("targets are buffers or outputs"),
    }
}

/// Allocates the buffer slot target `t` writes when no run has yet: the
/// slot's whole capacity, so that later values of the slot fit without
/// allocating. Outputs are the caller's. For a target its step writes
/// whole (`fills`), the slot is only given room, which the step fills
/// (see [`fresh`]); for the others it is zeroed by the allocator. Zeroed
/// memory is free only when it comes straight from the system: a plan
/// built after another was dropped (a first `grad_` call) gets memory the
/// allocator reuses and must clear, 17 MB of the LSTM's residuals that its
/// scan then overwrites. A large slot is advised to take huge pages
/// either way (`pages`).
fn first_use(plan: &Plan, t: &Target, s: &mut Storage) -> Result<()> {
    let Dst::Node(v) = t.dst else { return Ok(()) };
    let Loc::Buf(k) = plan.locs[v as usize] else {
        return Ok(());
    };
    let (dtype, cap) = plan.slots[k as usize];
    let oom = || out_of_memory("run", &Shape::from([cap]), dtype);
    if s.capacity() < cap {
        *s = match t.fills {
            true => {
                let mut room = Storage::zeros(dtype, 0);
                room.try_room(cap).map_err(|_| oom())?;
                advise_room(&mut room);
                room
            }
            false => Storage::try_zeroed(dtype, cap).ok_or_else(oom)?,
        };
    }
    Ok(())
}

/// Advises huge pages for the spare room of a fresh storage before
/// anything is written into it (see `pages::advise_huge`).
fn advise_room(s: &mut Storage) {
    use crate::pages::advise_huge as a;
    match s {
        Storage::F32(v) => a(v.spare_capacity_mut()),
        Storage::F64(v) => a(v.spare_capacity_mut()),
        Storage::F16(v) => a(v.spare_capacity_mut()),
        Storage::BF16(v) => a(v.spare_capacity_mut()),
        Storage::I64(v) => a(v.spare_capacity_mut()),
        Storage::Bool(v) => a(v.spare_capacity_mut()),
        Storage::C32(v) => a(v.spare_capacity_mut()),
        Storage::C64(v) => a(v.spare_capacity_mut()),
    }
}

/// Whether target `t` is written whole by its step (see `fills`) and its
/// storage does not hold its elements (an output moved out to the caller
/// by the previous run, a buffer slot last holding a value of another
/// size), so it is given room for them, not zeros.
fn fresh(t: &Target, s: &Storage) -> bool {
    t.fills && s.len() != t.numel
}

/// Sets the length of a target: within its capacity for a buffer (no
/// allocation), a fallible allocation for an output that was moved out.
fn set_len(s: &mut Storage, n: usize) -> Result<()> {
    s.try_resize(n)
        .map_err(|_| out_of_memory("run", &Shape::from([n]), s.dtype()))
}

/// An error met running the step of `node` (an op named `op`), wrapped so
/// that its message names the node; [`Error::root`] still gives the cause.
#[cold]
fn at_node(node: u32, op: &'static str, e: Error) -> Error {
    Error::AtNode {
        node,
        op,
        source: Box::new(e),
    }
}

/// Runs every step of `plan`. Inputs and outputs are already validated.
/// An error of a step (a singular matrix, an index out of range) is an
/// [`Error::AtNode`] naming the node of the caller's graph the step computes.
pub(crate) fn run(
    plan: &Plan,
    st: &mut State,
    inputs: &Inputs<'_>,
    outs: &mut Outputs<'_>,
) -> Result<()> {
    for step in &plan.steps {
        // A step with nothing to write is skipped: its loops over the
        // other axes of an empty value could run for ever (2^58 rows of
        // nothing), and it has no other effect.
        let checks = matches!(&step.kind, StepKind::Kernel(k) if !kernels::writes_only(&k.op));
        if !checks && !step.targets.is_empty() && step.targets.iter().all(|t| t.numel == 0) {
            for t in &step.targets {
                set_len(slot(plan, t.dst, &mut st.bufs, outs), 0)
                    .map_err(|e| at_node(step.node, "output", e))?;
            }
            continue;
        }
        let mut sized = Ok(());
        st.fresh.clear();
        for t in &step.targets {
            let s = slot(plan, t.dst, &mut st.bufs, outs);
            // Pushed before it is sized, and sized in place: moved after
            // `set_len` wrote its length, it was read back by wider loads
            // overlapping that store (the instruction where an LSTM
            // step's profile put a quarter of this function's own time).
            st.taken.push(std::mem::replace(s, EMPTY));
            let taken = st.taken.last_mut().expect("pushed just above");
            if sized.is_ok() {
                sized = first_use(plan, t, taken)
                    .and_then(|()| {
                        if fresh(t, taken) {
                            st.fresh.push(true);
                            // Written whole by the step: room, no zeros.
                            taken
                                .try_room(t.numel)
                                .map_err(|_| out_of_memory("run", &Shape::from([t.numel]), t.dtype))
                        } else {
                            st.fresh.push(false);
                            set_len(taken, t.numel)
                        }
                    })
                    .map_err(|e| at_node(step.node, "output", e));
            }
        }
        let env = Env {
            locs: &plan.locs,
            consts: &plan.consts,
            inputs,
            bufs: &st.bufs,
            outs: &*outs,
        };
        let targets = &mut st.taken[..];
        let res = sized.and_then(|()| match &step.kind {
            StepKind::Fused(f) => {
                let (spec, is_fresh) = (&step.targets, &st.fresh);
                // A fresh target of a folded reduction is written by its
                // finish (`write_f64` extends the empty storage); the
                // others by the loop's stores, into their spare room.
                let stored =
                    |k: usize| is_fresh[k] && !f.sinks.iter().any(|s| s.target as usize == k);
                let fresh = |k: usize| stored(k).then(|| spec[k].numel);
                f.run(&env, targets, fresh, &mut st.loops);
                for (k, (s, t)) in targets.iter_mut().zip(spec).enumerate() {
                    if stored(k) {
                        // SAFETY: the storage was given room for `numel`
                        // elements and holds none (`try_room` above); the
                        // loop wrote all of them into that room (the
                        // planner's `fills`).
                        unsafe { s.set_written(t.numel) };
                    }
                }
                Ok(())
            }
            StepKind::Scalar(s) => {
                s.run(&env, &mut st.scalar, targets);
                Ok(())
            }
            StepKind::MatMul(m) => {
                m.run(&env, &mut targets[0], &mut st.half);
                Ok(())
            }
            StepKind::Epilogue(e) => {
                e.run(&env, targets, &mut st.loops, &mut st.half);
                Ok(())
            }
            StepKind::Reduce(r) => {
                r.run(&env, &mut targets[0], &mut st.loops.acc, &mut st.loops.idx);
                Ok(())
            }
            StepKind::Solve(s) => s
                .run(&env, &mut targets[0], &mut st.solve)
                .map_err(|e| at_node(step.node, "solve", e)),
            StepKind::Copy(c) => {
                c.run(&env, &mut targets[0], &mut st.loops.idx);
                Ok(())
            }
            StepKind::Kernel(k) => {
                let arg = |i: usize| Operand {
                    storage: env.get(k.args[i].0),
                    shape: &k.args[i].1,
                };
                match k.args.len() {
                    1 => kernels::eval_into(&k.op, &[arg(0)], &k.out_shape, &mut targets[0]),
                    2 => {
                        kernels::eval_into(&k.op, &[arg(0), arg(1)], &k.out_shape, &mut targets[0])
                    }
                    _ => kernels::eval_into(
                        &k.op,
                        &[arg(0), arg(1), arg(2)],
                        &k.out_shape,
                        &mut targets[0],
                    ),
                }
                .map_err(|e| at_node(step.node, k.op.name(), e))
            }
            StepKind::Scatter(s) => s
                .run(&env, &mut targets[0])
                .map_err(|e| at_node(step.node, "scatter_add", e)),
            StepKind::Region(r) => {
                r.run(&env, targets);
                Ok(())
            }
            StepKind::Loop(l) => l
                .run(&env, &mut targets[0])
                .map_err(|e| at_node(step.node, "loop", e)),
            StepKind::Root(r) => r
                .run(&env, &mut targets[0])
                .map_err(|e| at_node(step.node, "root", e)),
            StepKind::SparseSolve(s) => s
                .run(&env, &mut targets[0])
                .map_err(|e| at_node(step.node, "sparse_solve", e)),
        });
        for t in step.targets.iter().rev() {
            let taken = st.taken.pop().unwrap_or(EMPTY);
            *slot(plan, t.dst, &mut st.bufs, outs) = taken;
        }
        res?;
    }
    Ok(())
}
