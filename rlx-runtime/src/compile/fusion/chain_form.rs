//! Forming register chains in a fused loop body.
//!
//! [`form_chains`] rewrites a planned body: a run of consecutive cheap
//! float instructions (see [`ChainUnary`], [`ChainBinary`]) where each one
//! reads the previous one's register, and nothing else reads that register
//! before it is written again, becomes one [`Instr::Chain`]. The
//! intermediate registers are then simply never written.
//!
//! Half-precision values never chain: their ops are followed by an
//! `Instr::Round` of the result, which reads the register and so ends the
//! run; `f16`/`bf16` therefore keep their rounding after every op.

use crate::compile::base::regs::{Bank, Out, Reg, Src};
use crate::compile::fusion::chain::{Chain, ChainBinary, ChainUnary, Stage, MAX_STAGES};
use crate::compile::fusion::fused::Instr;
use crate::compile::fusion::io::Leaf;

/// The body with runs of two or more cheap ops replaced by chains, and the
/// number of instructions that went into chains.
///
/// A `Load` of a broadcast leaf inside a run (the planner emits it just
/// before its first reader) moves in front of the chain when the chain
/// neither holds its running value in that register nor reads the old
/// value there, so `x * w + bias_row` still chains. (The registers of
/// replaced instructions are free: the chain never writes them.)
pub(crate) fn form_chains(body: Vec<Instr>, leaves: &[Leaf]) -> (Vec<Instr>, usize) {
    let mut out = Vec::with_capacity(body.len());
    let mut chained = 0;
    let mut i = 0;
    while i < body.len() {
        let Some(mut chain) = begin(&body[i]) else {
            out.push(body[i].clone());
            i += 1;
            continue;
        };
        // Registers the stages read; the destination must not be one of
        // them (it may be the start's register: the chain runs in place).
        let mut reads: Vec<Reg> = Vec::with_capacity(MAX_STAGES + 1);
        if let Stage::Binary { operand, .. } = chain.stages[0] {
            read_reg(operand, &mut reads);
        }
        let mut hoisted: Vec<usize> = Vec::new();
        let mut j = i + 1;
        while chain.stages.len() < MAX_STAGES {
            let Out::Reg(v) = chain.dst else { break };
            // Loads that can run before the chain: not into the running
            // value's register, nor into one the chain still reads.
            let mut k = j;
            let mut loads = Vec::new();
            while let Some(Instr::Load { leaf }) = body.get(k) {
                let q = leaves[*leaf as usize].reg;
                if q.is_some_and(|q| q == v || reads.contains(&q) || chain.start == Src::Reg(q)) {
                    break;
                }
                loads.push((k, q));
                k += 1;
            }
            let Some((stage, dst)) = body.get(k).and_then(|ins| link(ins, chain.bank, v)) else {
                break;
            };
            if let Out::Reg(d) = dst {
                if reads.contains(&d) {
                    break;
                }
            }
            if !dead_after(&body[k + 1..], leaves, v) {
                break;
            }
            if let Stage::Binary { operand, .. } = stage {
                read_reg(operand, &mut reads);
            }
            // A loaded value must survive the chain: later destinations
            // may not overwrite it.
            reads.extend(loads.iter().filter_map(|&(_, q)| q));
            hoisted.extend(loads.iter().map(|&(k, _)| k));
            chain.stages.push(stage);
            chain.dst = dst;
            j = k + 1;
        }
        if chain.stages.len() >= 2 {
            chained += chain.stages.len();
            out.extend(hoisted.iter().map(|&k| body[k].clone()));
            out.push(Instr::Chain(chain));
            i = j;
        } else {
            out.push(body[i].clone());
            i += 1;
        }
    }
    (out, chained)
}

/// Records the register `s` reads, if any.
fn read_reg(s: Src, reads: &mut Vec<Reg>) {
    if let Src::Reg(r) | Src::Splat(r) = s {
        reads.push(r);
    }
}

/// A one-stage chain of a cheap float instruction.
fn begin(ins: &Instr) -> Option<Chain> {
    match *ins {
        Instr::Unary { op, bank, x, dst } if float(bank) => Some(Chain {
            bank,
            start: x,
            stages: vec![Stage::Unary(ChainUnary::of(op)?)],
            dst,
        }),
        Instr::Binary {
            op,
            bank,
            a,
            b,
            dst,
        } if float(bank) => {
            // Start from a register operand where there is one: the
            // running value then leaves that register free for a later
            // stage's destination (`c · r5 → r4; w · r4 → r5` chains).
            let (start, operand, value_first) = match (a, b) {
                (Src::Splat(_) | Src::Direct(_), Src::Reg(_)) => (b, a, false),
                _ => (a, b, true),
            };
            Some(Chain {
                bank,
                start,
                stages: vec![Stage::Binary {
                    op: ChainBinary::of(op)?,
                    operand,
                    value_first,
                }],
                dst,
            })
        }
        _ => None,
    }
}

/// The stage and destination of `ins` if it is a cheap op of `bank`
/// reading register `v` exactly once.
fn link(ins: &Instr, bank: Bank, v: Reg) -> Option<(Stage, Out)> {
    let is_v = |s: Src| s == Src::Reg(v);
    match *ins {
        Instr::Unary {
            op,
            bank: b,
            x,
            dst,
        } if b == bank && is_v(x) => Some((Stage::Unary(ChainUnary::of(op)?), dst)),
        Instr::Binary {
            op,
            bank: bk,
            a,
            b,
            dst,
        } if bk == bank && is_v(a) != is_v(b) => {
            let (operand, value_first) = if is_v(a) { (b, true) } else { (a, false) };
            let stage = Stage::Binary {
                op: ChainBinary::of(op)?,
                operand,
                value_first,
            };
            Some((stage, dst))
        }
        _ => None,
    }
}

fn float(bank: Bank) -> bool {
    matches!(bank, Bank::F32 | Bank::F64)
}

/// Whether register `r` is written before it is read again in `rest` (or
/// not used at all): then its value is dead once its one reader has run.
/// Each block starts afresh, so the end of the body ends every value
/// (splat registers are never destinations).
pub(crate) fn dead_after(rest: &[Instr], leaves: &[Leaf], r: Reg) -> bool {
    for ins in rest {
        let (reads, writes) = touches(ins, leaves, r);
        if reads {
            return false;
        }
        if writes {
            return true;
        }
    }
    true
}

/// Whether `ins` reads and whether it writes register `r`.
pub(crate) fn touches(ins: &Instr, leaves: &[Leaf], r: Reg) -> (bool, bool) {
    let src = |s: Src| matches!(s, Src::Reg(x) | Src::Splat(x) if x == r);
    let out = |o: Out| o == Out::Reg(r);
    match ins {
        Instr::Load { leaf } => (false, leaves[*leaf as usize].reg == Some(r)),
        Instr::LoadTarget { dst, .. } => (false, *dst == r),
        Instr::Unary { x, dst, .. } => (src(*x), out(*dst)),
        Instr::Binary { a, b, dst, .. } => (src(*a) || src(*b), out(*dst)),
        Instr::Compare { a, b, dst, .. } => (*a == r || *b == r, *dst == r),
        Instr::Select { c, a, b, dst } => (*c == r || *a == r || *b == r, *dst == r),
        Instr::Cast { x, dst } => (*x == r, *dst == r),
        Instr::Round { reg, .. } => (*reg == r, *reg == r),
        Instr::Store { src: s, .. }
        | Instr::Scatter { src: s, .. }
        | Instr::Fold { src: s, .. } => (*s == r, false),
        Instr::Interleave { il, .. } => (il.srcs.iter().any(|&(s, _)| s == r), false),
        Instr::Chain(ch) => {
            let reads = src(ch.start)
                || ch.stages.iter().any(|st| match st {
                    Stage::Unary(_) => false,
                    Stage::Binary { operand, .. } => src(*operand),
                });
            (reads, out(ch.dst))
        }
    }
}

#[cfg(test)]
mod tests {
    use rlx_core::{BinaryOp, UnaryOp};

    use super::*;
    use crate::compile::fusion::io::Access;

    fn f(idx: u32) -> Reg {
        Reg {
            bank: Bank::F32,
            idx,
        }
    }

    fn bin(op: BinaryOp, a: Src, b: Src, dst: Out) -> Instr {
        Instr::Binary {
            op,
            bank: Bank::F32,
            a,
            b,
            dst,
        }
    }

    fn un(op: UnaryOp, x: Src, dst: Out) -> Instr {
        Instr::Unary {
            op,
            bank: Bank::F32,
            x,
            dst,
        }
    }

    #[test]
    fn a_run_of_cheap_ops_becomes_one_chain() {
        // r1 = x * k; r2 = r1 + x; r1 = sqrt(r2); out = min(k, r1)
        let k = Src::Splat(f(0));
        let x = Src::Direct(0);
        let body = vec![
            bin(BinaryOp::Mul, x, k, Out::Reg(f(1))),
            bin(BinaryOp::Add, Src::Reg(f(1)), x, Out::Reg(f(2))),
            un(UnaryOp::Sqrt, Src::Reg(f(2)), Out::Reg(f(1))),
            bin(BinaryOp::Min, k, Src::Reg(f(1)), Out::Target(0)),
        ];
        let (got, n) = form_chains(body, &[]);
        assert_eq!(n, 4);
        let [Instr::Chain(ch)] = &got[..] else {
            panic!("{got:?}")
        };
        assert_eq!(ch.start, x);
        assert_eq!(ch.dst, Out::Target(0));
        assert_eq!(
            ch.stages[3],
            Stage::Binary {
                op: ChainBinary::Min,
                operand: k,
                value_first: false
            }
        );
    }

    #[test]
    fn runs_end_at_other_readers_costly_ops_and_aliases() {
        let k = Src::Splat(f(0));
        // r1 is stored as well as read by the add: no chain.
        let body = vec![
            un(UnaryOp::Abs, Src::Direct(0), Out::Reg(f(1))),
            bin(BinaryOp::Add, Src::Reg(f(1)), k, Out::Reg(f(2))),
            Instr::Store {
                src: f(1),
                target: 0,
            },
        ];
        assert_eq!(form_chains(body, &[]).1, 0);
        // tanh is not chained; the two ops after it are.
        let body = vec![
            un(UnaryOp::Tanh, Src::Direct(0), Out::Reg(f(1))),
            un(UnaryOp::Neg, Src::Reg(f(1)), Out::Reg(f(2))),
            un(UnaryOp::Abs, Src::Reg(f(2)), Out::Target(0)),
        ];
        let (got, n) = form_chains(body, &[]);
        assert_eq!((got.len(), n), (2, 2));
        // The destination would overwrite an operand read by an earlier stage.
        let body = vec![
            bin(
                BinaryOp::Mul,
                Src::Reg(f(2)),
                Src::Reg(f(3)),
                Out::Reg(f(1)),
            ),
            un(UnaryOp::Neg, Src::Reg(f(1)), Out::Reg(f(3))),
        ];
        assert_eq!(form_chains(body, &[]).1, 0);
        // Unless that operand is a register the chain can start from: it
        // then runs in place, `r3 = -(x0 · r3)` with the operands in their
        // original order.
        let body = vec![
            bin(
                BinaryOp::Mul,
                Src::Direct(0),
                Src::Reg(f(3)),
                Out::Reg(f(1)),
            ),
            un(UnaryOp::Neg, Src::Reg(f(1)), Out::Reg(f(3))),
        ];
        let (got, n) = form_chains(body, &[]);
        assert_eq!(n, 2);
        let [Instr::Chain(ch)] = &got[..] else {
            panic!("one chain: {got:?}")
        };
        assert!(ch.in_place());
        assert_eq!(
            ch.stages[0],
            Stage::Binary {
                op: ChainBinary::Mul,
                operand: Src::Direct(0),
                value_first: false
            }
        );
        // Both operands are the running value.
        let body = vec![
            un(UnaryOp::Neg, Src::Direct(0), Out::Reg(f(1))),
            bin(
                BinaryOp::Mul,
                Src::Reg(f(1)),
                Src::Reg(f(1)),
                Out::Reg(f(2)),
            ),
        ];
        assert_eq!(form_chains(body, &[]).1, 0);
    }

    #[test]
    fn loads_inside_a_run_move_in_front_unless_the_chain_uses_their_register() {
        let leaf = |r: u32| Leaf {
            val: 0,
            off: 0,
            access: Access::Splat { whole: true },
            reg: Some(f(r)),
        };
        let leaves = [leaf(2), leaf(1)];
        // r1 = x * k; load r2; out = r1 + r2
        let k = Src::Splat(f(0));
        let body = vec![
            bin(BinaryOp::Mul, Src::Direct(0), k, Out::Reg(f(1))),
            Instr::Load { leaf: 0 },
            bin(
                BinaryOp::Add,
                Src::Reg(f(1)),
                Src::Reg(f(2)),
                Out::Target(0),
            ),
        ];
        let (got, n) = form_chains(body, &leaves);
        assert_eq!(n, 2);
        assert!(matches!(
            got[..],
            [Instr::Load { leaf: 0 }, Instr::Chain(_)]
        ));
        // The load overwrites r1 after the product's last use, and the
        // add reads the loaded value: no chain, nothing moves.
        let body = vec![
            bin(BinaryOp::Mul, Src::Direct(0), k, Out::Target(1)),
            un(UnaryOp::Neg, Src::Direct(0), Out::Reg(f(1))),
            Instr::Load { leaf: 1 },
            bin(BinaryOp::Add, Src::Reg(f(1)), k, Out::Target(0)),
        ];
        let (got, n) = form_chains(body.clone(), &leaves);
        assert_eq!(n, 0);
        assert_eq!(got.len(), body.len());
    }

    #[test]
    fn a_chain_may_end_in_the_register_it_starts_from() {
        // r3 = square(r2); r2 = r3 - x; r3 = abs(r2); r2 = sqrt(r3)
        let body = vec![
            un(UnaryOp::Square, Src::Reg(f(2)), Out::Reg(f(3))),
            bin(
                BinaryOp::Sub,
                Src::Reg(f(3)),
                Src::Direct(0),
                Out::Reg(f(2)),
            ),
            un(UnaryOp::Abs, Src::Reg(f(2)), Out::Reg(f(3))),
            un(UnaryOp::Sqrt, Src::Reg(f(3)), Out::Reg(f(2))),
        ];
        let (got, n) = form_chains(body, &[]);
        assert_eq!(n, 4);
        let [Instr::Chain(ch)] = &got[..] else {
            panic!("{got:?}")
        };
        assert!(ch.in_place());
    }

    #[test]
    fn long_runs_split_at_the_stage_limit() {
        let mut body = vec![un(UnaryOp::Neg, Src::Direct(0), Out::Reg(f(0)))];
        for k in 1..(MAX_STAGES as u32 + 3) {
            body.push(un(UnaryOp::Neg, Src::Reg(f(k - 1)), Out::Reg(f(k))));
        }
        let (got, n) = form_chains(body, &[]);
        assert_eq!(n, MAX_STAGES + 3);
        assert_eq!(got.len(), 2);
    }
}
