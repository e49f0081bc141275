//! Element-wise groups as steps: a fused block loop over registers (with
//! register chains formed afterwards), or, for 0-d groups without `i64`, a
//! scalar region.

use std::collections::{HashMap, HashSet};

use rlx_core::{BinaryOp, CmpOp, DType, Op, Result, UnaryOp};

use crate::compile::base::env::{Dst, Loc};
use crate::compile::base::math::Pre;
use crate::compile::base::regs::{Bank, Out, Reg, Src};
use crate::compile::fusion::absorb::absorb_into_sinks;
use crate::compile::fusion::chain_form::form_chains;
use crate::compile::fusion::fold::Sink;
use crate::compile::fusion::fused::{FusedStep, Instr};
use crate::compile::fusion::interleave::{Interleave, MAX_INTERLEAVED};
use crate::compile::fusion::io::Scatter;
use crate::compile::fusion::io::{Access, Leaf};
use crate::compile::plan::{Step, StepKind};
use crate::compile::planner::builder::Builder;
use crate::compile::planner::facts::Group;
use crate::compile::planner::ops::reduce_strides;
use crate::compile::planner::places::Place;
use crate::compile::products::epilogue::EpilogueStep;
use crate::compile::scalar::code::{binary_instr, unary_instr, SInstr, SType};
use crate::compile::scalar::step::ScalarStep;
use crate::compile::steps::movement::merge_axes;

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
        debug_assert!(
            !self.free[r.bank.index()].contains(&r.idx),
            "{r:?} released twice"
        );
        self.free[r.bank.index()].push(r.idx);
    }
}

impl Builder<'_> {
    pub(super) fn group_step(&mut self, gr: &Group) -> Result<()> {
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
        let mut sinks = Vec::new();
        let mut acc_len = 0;
        let mut placed_target: HashMap<u32, u32> = HashMap::new();
        let mut splat_leaf: HashMap<u32, usize> = HashMap::new();
        // An epilogue's product (see `epilogue`) is written into one of
        // this loop's targets and read from there, never from a buffer of
        // its own: it is no leaf, not even a one-element splat.
        let epilogue = gid.and_then(|g| self.epilogues.of_group[g as usize]);
        let product = epilogue.map(|(p, _)| p);
        // Splat leaves first: their registers are filled once per call and
        // must never be handed to a per-block value.
        for &m in members {
            for p in &nodes[m as usize].inputs {
                let pi = p.index();
                if in_group(pi)
                    || splat_of.contains_key(&p.0)
                    || self.shape(pi).numel() != 1
                    || product == Some(p.0)
                {
                    continue;
                }
                let reg = ra.alloc(Bank::of(nodes[pi].dtype));
                let (val, off, _) = self.leaf_of(pi, &gr.shape);
                // Filled across its lanes only if some op reads it as a block.
                leaves.push(Leaf {
                    val,
                    off,
                    access: Access::Splat { whole: false },
                    reg: Some(reg),
                });
                reads.push(val);
                splat_of.insert(p.0, reg);
                splat_leaf.insert(p.0, leaves.len() - 1);
            }
        }
        // Pieces this loop places into one value through the same walk
        // (the entries of per-item Jacobians) are written together, item
        // by item, once the last of them is computed (see `Interleave`);
        // their registers are held until then.
        let mut walks: HashMap<Walk, usize> = HashMap::new();
        for &m in members {
            let n = &nodes[m as usize];
            if let (Some(pl), false) = (&self.places[m as usize], matches!(n.op, Op::Reduce { .. }))
            {
                *walks.entry(walk(n.shape.dims(), pl)).or_default() += 1;
            }
        }
        let mut pending: HashMap<Walk, Vec<(u32, Reg, usize)>> = HashMap::new();
        let mut held: HashSet<u32> = HashSet::new();
        // The product: read from the target it was written into, first, so
        // that every block is read before anything writes it.
        if let Some((p, _)) = epilogue {
            let dst = ra.alloc(Bank::of(nodes[p as usize].dtype));
            body.push(Instr::LoadTarget { target: 0, dst });
            reg_of.insert(p, dst);
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
                        leaves[splat_leaf[&p.0]].access = Access::Splat { whole: true };
                        Src::Reg(r)
                    }
                } else if let Some(&r) = reg_of.get(&p.0) {
                    Src::Reg(r)
                } else {
                    debug_assert!(!in_group(pi), "group members precede their users");
                    let (val, off, access) = self.leaf_of(pi, &gr.shape);
                    let in_place = matches!(access, Access::Contig) && native(nodes[pi].dtype);
                    if elementwise_math && in_place {
                        let l = *direct_of.entry(p.0).or_insert_with(|| {
                            leaves.push(Leaf {
                                val,
                                off,
                                access: Access::Contig,
                                reg: None,
                            });
                            (leaves.len() - 1) as u32
                        });
                        Src::Direct(l)
                    } else {
                        let reg = ra.alloc(Bank::of(nodes[pi].dtype));
                        leaves.push(Leaf {
                            val,
                            off,
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
                reads.push(match &self.views[pi] {
                    Some(v) => v.base,
                    None => self.leaf_val(pi),
                });
                srcs.push(src);
            }
            let reg_src = |s: Src| match s {
                Src::Reg(r) | Src::Splat(r) => r,
                Src::Direct(_) => unreachable!("only unary and binary ops read leaves in place"),
            };
            if let Op::Reduce { op, axes } = &n.op {
                // A sink: fold the operand's register, write the result
                // after the loop.
                let xs = nodes[n.inputs[0].index()].shape.clone();
                let (out_strides, count) = reduce_strides(&xs, axes, &n.shape);
                self.rank(xs.rank());
                let (dims, out_strides) = sink_axes(xs.dims(), out_strides);
                sinks.push(Sink {
                    op: *op,
                    dims,
                    out_strides,
                    out_numel: n.shape.numel(),
                    count,
                    acc_off: acc_len,
                    target: targets.len() as u32,
                    pre: Pre::Id,
                });
                acc_len += Sink::scratch(n.shape.numel());
                targets.push(self.target(m as usize));
                body.push(Instr::Fold {
                    src: reg_src(srcs[0]),
                    sink: (sinks.len() - 1) as u32,
                });
                let keep = |p: u32| splat_of.contains_key(&p) || held.contains(&p);
                release_operands(n, k, &last_use, keep, &reg_of, &mut ra);
                continue;
            }
            let bank = Bank::of(n.dtype);
            let stored = self.stored[m as usize];
            let used_later = last_use.contains_key(&m);
            // Results needed only outside are written straight to their target.
            let placed = self.places[m as usize].clone();
            let direct_out =
                elementwise_math && stored && !used_later && native(n.dtype) && placed.is_none();
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
            body.push(match ElementWise::of(&n.op) {
                ElementWise::Unary(op) => Instr::Unary {
                    op,
                    bank,
                    x: srcs[0],
                    dst,
                },
                ElementWise::Binary(op) => Instr::Binary {
                    op,
                    bank,
                    a: srcs[0],
                    b: srcs[1],
                    dst,
                },
                ElementWise::Compare(op) => Instr::Compare {
                    op,
                    a: reg_src(srcs[0]),
                    b: reg_src(srcs[1]),
                    dst: dst_reg(),
                },
                ElementWise::Select => Instr::Select {
                    c: reg_src(srcs[0]),
                    a: reg_src(srcs[1]),
                    b: reg_src(srcs[2]),
                    dst: dst_reg(),
                },
                ElementWise::Cast => Instr::Cast {
                    x: reg_src(srcs[0]),
                    dst: dst_reg(),
                },
            });
            if let Out::Reg(r) = dst {
                if !native(n.dtype) {
                    body.push(Instr::Round {
                        reg: r,
                        dtype: n.dtype,
                    });
                }
                if let Some(pl) = placed {
                    // Written through strides into the concat or transpose
                    // using it; several members may share one destination.
                    let target = match placed_target.get(&pl.node) {
                        Some(&t) => t,
                        None => {
                            targets.push(self.target(pl.node as usize));
                            let t = (targets.len() - 1) as u32;
                            placed_target.insert(pl.node, t);
                            t
                        }
                    };
                    let key = walk(n.shape.dims(), &pl);
                    self.rank(key.1.len());
                    let left = walks.get_mut(&key).expect("counted above");
                    *left -= 1;
                    let group = pending.entry(key).or_default();
                    group.push((m, r, pl.off));
                    held.insert(m);
                    if *left == 0 || group.len() == MAX_INTERLEAVED {
                        let (group, key) = (std::mem::take(group), walk(n.shape.dims(), &pl));
                        if group.len() > 1 {
                            self.stats.interleaved += group.len();
                        }
                        body.push(write_pieces(key, &group, target));
                        // Free the registers whose last reader has run; the
                        // others (this member's among them) are freed by
                        // their last reader or below.
                        for (p, q, _) in group {
                            held.remove(&p);
                            if p != m && last_use.get(&p).is_none_or(|&u| u < k) {
                                ra.release(q);
                            }
                        }
                    }
                } else if stored {
                    body.push(Instr::Store {
                        src: r,
                        target: targets.len() as u32,
                    });
                    targets.push(self.target(m as usize));
                }
                reg_of.insert(m, r);
                if !used_later && !held.contains(&m) {
                    ra.release(r);
                }
            }
            let keep = |p: u32| splat_of.contains_key(&p) || held.contains(&p);
            release_operands(n, k, &last_use, keep, &reg_of, &mut ra);
        }
        debug_assert!(held.is_empty(), "every placed piece is written");
        for (b, c) in ra.count.iter().enumerate() {
            self.regs[b] = self.regs[b].max(*c);
        }
        let mut product = None;
        if let Some((p, h)) = epilogue {
            let into = targets.iter().position(|t| t.dst == Dst::Node(h));
            let into =
                into.expect("an epilogue's loop stores the value its product is written into");
            if let Some(Instr::LoadTarget { target, .. }) = body.first_mut() {
                *target = into as u32;
            }
            let (step, product_reads) = self.matmul_step(&nodes[p as usize]);
            reads.retain(|&v| v != p);
            reads.extend(product_reads);
            product = Some((step, into as u32));
        }
        reads.sort_unstable();
        reads.dedup();
        let (body, absorbed) = absorb_into_sinks(body, &leaves, &mut sinks);
        let (body, chained) = form_chains(body, &leaves);
        self.acc_len = self.acc_len.max(acc_len);
        self.stats.fused_reductions += sinks.len();
        self.stats.absorbed += absorbed;
        self.stats.fused_loops += 1;
        self.stats.fused_nodes += members.len() - sinks.len();
        self.stats.chained_nodes += chained;
        let fused = FusedStep::new(gr.shape.numel(), leaves, body, sinks);
        let kind = match product {
            Some((product, target)) => {
                self.stats.epilogues += 1;
                StepKind::Epilogue(EpilogueStep {
                    product,
                    target,
                    body: fused,
                })
            }
            None => StepKind::Fused(fused),
        };
        self.steps.push(Step {
            node: gr.members.last().copied().unwrap_or_default(),
            kind,
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
        for m in by_component(self.g, &gr.members) {
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
            code.push(match ElementWise::of(&n.op) {
                ElementWise::Unary(op) => unary_instr(op, stype(n.dtype), o(0), dst),
                ElementWise::Binary(op) => binary_instr(op, stype(n.dtype), o(0), o(1), dst),
                ElementWise::Compare(op) => SInstr::Compare {
                    op,
                    a: o(0),
                    b: o(1),
                    dst,
                },
                ElementWise::Select => SInstr::Select {
                    c: o(0),
                    a: o(1),
                    b: o(2),
                    dst,
                },
                ElementWise::Cast => SInstr::Cast {
                    to: stype(n.dtype),
                    x: o(0),
                    dst,
                },
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
}

/// Frees the registers of the operands of member `k` (node `n`) used
/// for the last time, except those `keep` holds (splats, placed pieces
/// not yet written).
fn release_operands(
    n: &rlx_core::Node,
    k: usize,
    last_use: &HashMap<u32, usize>,
    keep: impl Fn(u32) -> bool,
    reg_of: &HashMap<u32, Reg>,
    ra: &mut RegAlloc,
) {
    let mut seen: Vec<u32> = Vec::with_capacity(3);
    for p in &n.inputs {
        if seen.contains(&p.0) || keep(p.0) {
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

/// How a placed piece is written: the value it is placed in, and the
/// dims and strides of the walk (axes merged; a 0-d piece walks one
/// element), the same for pieces that differ only in their offset.
type Walk = (u32, Vec<usize>, Vec<usize>);

/// The walk writing a value of `dims` into its place `pl`.
fn walk(dims: &[usize], pl: &Place) -> Walk {
    let (mut dims, mut st) = merge_axes(dims, &[&pl.strides]);
    let mut strides = st.pop().expect("one stride list");
    if dims.is_empty() {
        (dims, strides) = (vec![1], vec![0]);
    }
    (pl.node, dims, strides)
}

/// The instruction writing the registers of `group` (member, register,
/// offset), placed through the same walk into target `target`: one
/// scatter for a single piece, else one interleaved write by offset.
fn write_pieces((_, dims, strides): Walk, group: &[(u32, Reg, usize)], target: u32) -> Instr {
    let off = group.iter().map(|g| g.2).min().expect("a piece");
    let map = Scatter { off, dims, strides };
    if let [(_, src, _)] = group {
        return Instr::Scatter {
            src: *src,
            target,
            map,
        };
    }
    let mut srcs: Vec<(Reg, usize)> = group.iter().map(|&(_, r, o)| (r, o - off)).collect();
    srcs.sort_unstable_by_key(|s| s.1);
    Instr::Interleave {
        target,
        il: Interleave { map, srcs },
    }
}

/// `members` (in topological order) reordered one connected component
/// after another, each in its own order: still a topological order, since
/// a member's operands inside the group are in its component, before it.
///
/// A scalarised graph of independent items (a batched function: one
/// component per row) then computes one item at a time instead of one op
/// over every item at a time. Far fewer values are live at once, which
/// is what native code's register allocation pays for, above all across
/// the calls a region makes (each clobbers every float register): the
/// 10-observation reprojection objective (870 instructions, 20 calls)
/// compiled in 3 ms instead of 23-33 ms, its Jacobian (3550 instructions)
/// in about 80 ms instead of 120-150 ms (both with the backtracking
/// allocator, loaded machine). Each value is still computed by the same
/// instruction from the same operands (same bits).
fn by_component(g: &rlx_core::Graph, members: &[u32]) -> Vec<u32> {
    let at: HashMap<u32, usize> = members.iter().enumerate().map(|(k, &m)| (m, k)).collect();
    // Union-find over members, linked through operands that are members.
    let mut parent: Vec<usize> = (0..members.len()).collect();
    fn find(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    for (k, &m) in members.iter().enumerate() {
        for p in &g.node(rlx_core::NodeId(m)).inputs {
            if let Some(&j) = at.get(&p.0) {
                let (a, b) = (find(&mut parent, k), find(&mut parent, j));
                // The root is the component's first member.
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut order: Vec<(usize, usize)> = (0..members.len())
        .map(|k| (find(&mut parent, k), k))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, k)| members[k]).collect()
}

/// The op of a member of an element-wise group, as both kinds of region
/// compile it.
#[derive(Clone, Copy)]
enum ElementWise {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    Select,
    /// A cast or a broadcast: one conversion per element.
    Cast,
}

impl ElementWise {
    /// The element-wise op `op` (groups hold no other).
    fn of(op: &Op) -> ElementWise {
        match op {
            Op::Unary(op) => ElementWise::Unary(*op),
            Op::Binary(op) => ElementWise::Binary(*op),
            Op::Compare(op) => ElementWise::Compare(*op),
            Op::Select => ElementWise::Select,
            Op::Cast(_) | Op::Broadcast { .. } => ElementWise::Cast,
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
            | Op::Custom(_)
            | Op::Loop(_)
            | Op::Root(_)
            | Op::SparseSolve(_)) => unreachable!("`{}` is not element-wise", other.name()),
        }
    }
}

/// The dims and output strides a sink walks: with the innermost axis kept,
/// every element combines into its own accumulator in row-major order, so
/// axes the accumulators step through as one are merged (a sum over the
/// first axis of `[n, m, 3]` walks rows of `3m`, not of 3) without
/// changing any result. A reduced innermost axis keeps its rows: they set
/// the partial results the combine order follows (see `fold`).
fn sink_axes(dims: &[usize], out_strides: Vec<usize>) -> (Vec<usize>, Vec<usize>) {
    if out_strides.last().is_some_and(|&s| s != 0) {
        let (d, mut s) = merge_axes(dims, &[&out_strides]);
        let s = s.pop().expect("one stride list");
        // (Dropping a kept axis of length 1 could leave a reduced axis
        // innermost, which would change the order: keep the dims then.)
        if s.last().is_some_and(|&x| x != 0) {
            return (d, s);
        }
    }
    (dims.to_vec(), out_strides)
}
