//! The state of one build: what the planner knows of the graph, and the
//! plan it is writing (steps, locations, constants, scratch sizes), with
//! the small helpers every kind of step uses and the assignment of buffer
//! slots by liveness.

use std::collections::HashMap;

use rlx_core::{DType, Graph, Shape};

use crate::compile::base::env::{Dst, Loc, Val};
use crate::compile::base::stats::PlanStats;
use crate::compile::plan::{Step, StepKind, Target};
#[cfg(feature = "jit")]
use crate::compile::scalar::native;
use crate::storage::Storage;

/// Scalar regions with fewer instructions stay interpreted: compiling them
/// would cost more than it saves.
#[cfg(feature = "jit")]
const JIT_MIN_INSTRS: usize = 8;

pub(super) struct Builder<'a> {
    pub(super) g: &'a Graph,
    pub(super) root: &'a [u32],
    pub(super) virt: &'a [bool],
    /// Per node: the checked indices of an indexed gather.
    pub(super) indexed: &'a [Option<std::sync::Arc<[u32]>>],
    /// Slices read in place by matrix products: operand node and offset.
    pub(super) windows: &'a [Option<(usize, usize)>],
    /// Slices and transposes read in place by fused loops.
    pub(super) views: &'a [Option<crate::compile::planner::views::View>],
    /// Values written in place into a concat or transpose.
    pub(super) places: &'a [Option<crate::compile::planner::places::Place>],
    pub(super) group: &'a [Option<u32>],
    pub(super) stored: &'a [bool],
    /// Products run by the fused loop reading them.
    pub(super) epilogues: &'a crate::compile::planner::epilogue::Epilogues,
    pub(super) consts: Vec<Storage>,
    pub(super) locs: Vec<Loc>,
    pub(super) steps: Vec<Step>,
    pub(super) regs: [usize; 4],
    pub(super) scalar_regs: usize,
    pub(super) max_rank: usize,
    pub(super) acc_len: usize,
    pub(super) half: (usize, usize, usize),
    pub(super) solve: (usize, usize),
    pub(super) stats: PlanStats,
    /// Compile scalar regions to native code (feature `jit`).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(super) jit: bool,
    /// The step graphs of the loop nodes, by node, compiled before
    /// planning (see `looping::compile_all`); each is taken by its step.
    pub(super) loops: std::collections::HashMap<
        usize,
        rlx_core::Result<crate::compile::steps::looping::Compiled>,
    >,
    /// The residual and Jacobian graphs of the root nodes, by node,
    /// compiled before planning; each is taken by its step.
    pub(super) roots:
        std::collections::HashMap<usize, rlx_core::Result<crate::compile::steps::root::Compiled>>,
}

/// Compiles every scalar region of `steps` of at least [`JIT_MIN_INSTRS`]
/// instructions to native code, counting them in `stats`: the last stage
/// of planning, or of a plan built without native code whose caller
/// compiles it later ([`crate::compile::planner::compile_native`]).
#[cfg(feature = "jit")]
pub(super) fn compile_native(steps: &mut [Step], stats: &mut PlanStats) {
    for step in steps {
        if let StepKind::Scalar(region) = &mut step.kind {
            if worth_compiling(&region.code) {
                region.native =
                    native::compile(&region.code, region.len, &region.consts, step.targets.len())
                        .map(std::sync::Arc::new);
                stats.native_regions += region.native.is_some() as usize;
            }
        }
    }
}

/// Whether a scalar region of `code` is long enough to be compiled to
/// native code ([`compile_native`]).
#[cfg(feature = "jit")]
pub(crate) fn worth_compiling(code: &[crate::compile::scalar::code::SInstr]) -> bool {
    code.len() >= JIT_MIN_INSTRS
}

impl Builder<'_> {
    /// Compiles every scalar region of at least [`JIT_MIN_INSTRS`]
    /// instructions to native code (last, once targets are final).
    #[cfg(feature = "jit")]
    pub(super) fn compile_native(&mut self) {
        compile_native(&mut self.steps, &mut self.stats);
    }

    /// The value a fused loop reads for operand `i`: its storage's owner,
    /// or for an indexed gather its operand's.
    pub(super) fn leaf_val(&self, i: usize) -> Val {
        match &self.indexed[i] {
            Some(_) => self.root[self.g.nodes()[i].inputs[0].index()],
            None => self.root[i],
        }
    }

    pub(super) fn shape(&self, i: usize) -> &Shape {
        &self.g.nodes()[i].shape
    }

    pub(super) fn target(&self, i: usize) -> Target {
        let n = &self.g.nodes()[i];
        Target {
            dst: Dst::Node(i as u32),
            numel: n.shape.numel(),
            dtype: n.dtype,
            fills: false,
        }
    }

    pub(super) fn push(&mut self, node: usize, kind: StepKind, reads: Vec<Val>) {
        self.push_to(node, node, kind, reads);
    }

    /// A step computing `node` into the buffer of `into` (a value placed in
    /// a concat or transpose writes there).
    pub(super) fn push_to(&mut self, node: usize, into: usize, kind: StepKind, reads: Vec<Val>) {
        let t = self.target(into);
        self.steps.push(Step {
            node: node as u32,
            kind,
            targets: vec![t],
            reads,
        });
    }

    /// Where node `i` is written: its place, or its own buffer.
    pub(super) fn dest(&self, i: usize) -> crate::compile::planner::places::Place {
        crate::compile::planner::places::dest(self.places, self.g, i)
    }

    pub(super) fn rank(&mut self, r: usize) {
        self.max_rank = self.max_rank.max(r);
    }

    /// Assigns buffer slots to values without a location, by liveness.
    pub(super) fn assign_slots(&mut self) -> Vec<(DType, usize)> {
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
