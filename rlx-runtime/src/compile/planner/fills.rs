//! Outputs a fused loop writes whole (`Target::fills`): every element
//! of the output is written by the loop's stores (`Store`, `Scatter`,
//! `Interleave`, which write through raw pointers only), and nothing of
//! the loop reads it or writes it another way. A run whose storage for
//! such an output is fresh (moved out to the caller by the previous run)
//! then allocates it without setting it to zero first, and the loop
//! fills it: per-item Jacobians of 10 000 devices are 720 KB that were
//! otherwise zeroed on every call, then overwritten.

use crate::compile::base::env::{Dst, Loc};
use crate::compile::base::regs::Out;
use crate::compile::fusion::fused::{FusedStep, Instr};
use crate::compile::fusion::io::{for_runs, Scatter};
use crate::compile::plan::{Step, StepKind};

/// Sets `Target::fills` on the targets a step writes whole without
/// reading them: the outputs and buffers a fused loop writes whole through
/// its stores, the targets a loop's folded reduction finishes into whole
/// (no other instruction of the loop writing them), the float targets
/// of reduction steps, and the packed results of loop nodes. A buffer
/// slot shared by values of several sizes is then resized without zeros
/// on every call. Returns `(outputs, others)`:
/// how many fused-loop outputs written by stores it marked (the
/// `unzeroed_outputs` of the stats) and how many other targets.
pub(super) fn mark(steps: &mut [Step], locs: &[Loc]) -> (usize, usize) {
    let (mut outputs, mut others) = (0, 0);
    for step in steps {
        match &step.kind {
            StepKind::Fused(f) => {
                for (t, target) in step.targets.iter_mut().enumerate() {
                    let output = match target.dst {
                        Dst::Out(_) => true,
                        Dst::Node(v) => matches!(locs[v as usize], Loc::Out(_)),
                    };
                    if target.numel == 0 {
                        continue;
                    }
                    if writes_whole(f, t as u32, target.numel) {
                        target.fills = true;
                        if output {
                            outputs += 1;
                        } else {
                            others += 1;
                        }
                    } else if sink_writes_whole(f, t as u32, target.numel) {
                        target.fills = true;
                        others += 1;
                    }
                }
            }
            StepKind::Loop(_) => {
                // A loop writes every element of its packed result (see
                // `kernels::looping::Packed`): a fresh one is given room,
                // not zeros (tens of megabytes of residuals).
                let target = &mut step.targets[0];
                if target.numel > 0 {
                    target.fills = true;
                    others += 1;
                }
            }
            StepKind::Reduce(r) => {
                let target = &mut step.targets[0];
                // Float results are written whole by `write_f64`; integer
                // ones are folded in place (they must hold the identity).
                if target.numel > 0 && target.numel == r.out_numel && target.dtype.is_float() {
                    target.fills = true;
                    others += 1;
                }
            }
            _ => {}
        }
    }
    (outputs, others)
}

/// Whether target `t` (of `numel` elements) of loop `f` is written whole
/// by exactly one folded reduction's finish and by nothing else.
pub(crate) fn sink_writes_whole(f: &FusedStep, t: u32, numel: usize) -> bool {
    let mut sinks = f.sinks.iter().filter(|s| s.target == t);
    let one = matches!((sinks.next(), sinks.next()), (Some(s), None) if s.out_numel == numel);
    one && !f.body.iter().any(|ins| match ins {
        Instr::LoadTarget { target, .. }
        | Instr::Store { target, .. }
        | Instr::Scatter { target, .. }
        | Instr::Interleave { target, .. } => *target == t,
        Instr::Unary { dst, .. } | Instr::Binary { dst, .. } => *dst == Out::Target(t),
        Instr::Chain(ch) => ch.dst == Out::Target(t),
        _ => false,
    })
}

/// Whether loop `f` writes every element of its target `t` (of `numel`
/// elements) through stores only, and neither reads it (an in-place
/// load), writes it through an op (a slice reference into the target) nor
/// finishes a folded reduction into it.
pub(crate) fn writes_whole(f: &FusedStep, t: u32, numel: usize) -> bool {
    let target_out = |o: &Out| *o == Out::Target(t);
    if f.sinks.iter().any(|s| s.target == t) {
        return false;
    }
    let mut stores = Vec::new();
    for ins in &f.body {
        match ins {
            Instr::LoadTarget { target, .. } if *target == t => return false,
            Instr::Unary { dst, .. } | Instr::Binary { dst, .. } if target_out(dst) => {
                return false
            }
            Instr::Chain(ch) if target_out(&ch.dst) => return false,
            Instr::Store { target, .. } if *target == t => stores.push(None),
            Instr::Scatter { target, map, .. } if *target == t => stores.push(Some((map, 0))),
            Instr::Interleave { target, il } if *target == t => {
                stores.extend(il.srcs.iter().map(|&(_, off)| Some((&il.map, off))))
            }
            _ => {}
        }
    }
    // A contiguous store of the whole loop covers a target of its size.
    if stores.iter().any(Option::is_none) && f.numel >= numel {
        return true;
    }
    // Coverage is checked element by element, at plan time: only for
    // outputs of at most `CHECKED_MAX` elements (larger ones, and graphs
    // whose sizes no memory holds, are zeroed as before).
    if numel > CHECKED_MAX || f.numel > CHECKED_MAX {
        return false;
    }
    let Some(mut written) = Bits::new(numel) else {
        return false;
    };
    let mut idx = Vec::new();
    for s in stores {
        let ok = match s {
            None => (0..f.numel).all(|i| written.set(i)),
            Some((map, off)) => walk(map, off, f.numel, &mut idx, &mut written),
        };
        if !ok {
            return false;
        }
    }
    written.all()
}

/// Marks the elements `map` writes (shifted by `off`) over a loop of
/// `numel` elements; `false` if one falls outside the target.
fn walk(map: &Scatter, off: usize, numel: usize, idx: &mut Vec<usize>, bits: &mut Bits) -> bool {
    let s_in = *map.strides.last().unwrap_or(&1);
    idx.clear();
    idx.resize(map.dims.len(), 0);
    let mut ok = map.dims.iter().product::<usize>() == numel;
    if ok {
        for_runs(&map.dims, &map.strides, 0, numel, idx, |_, o, run| {
            let first = map.off + off + o;
            for j in 0..run {
                ok &= bits.set(first + j * s_in);
            }
        });
    }
    ok
}

/// The most elements of an output (and of the loop writing it) whose
/// coverage [`writes_whole`] checks: a bit each, 512 KiB, and a walk of
/// a few milliseconds at plan time.
const CHECKED_MAX: usize = 1 << 22;

/// A set of element indices below a bound.
struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    /// The empty set below `len`; `None` if its words cannot be allocated.
    fn new(len: usize) -> Option<Bits> {
        let n = len.div_ceil(64);
        let mut words = Vec::new();
        words.try_reserve_exact(n).ok()?;
        words.resize(n, 0);
        Some(Bits { words, len })
    }

    /// Adds `i`; `false` if `i` is out of bounds.
    fn set(&mut self, i: usize) -> bool {
        if i >= self.len {
            return false;
        }
        self.words[i / 64] |= 1 << (i % 64);
        true
    }

    fn all(&self) -> bool {
        let full = self.len / 64;
        let rest = self.len % 64;
        self.words[..full].iter().all(|&w| w == u64::MAX)
            && (rest == 0 || self.words[full] == (1u64 << rest) - 1)
    }
}
