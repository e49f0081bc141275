//! Element-wise ops applied by the reductions folding their results.
//!
//! [`absorb_into_sinks`] rewrites a planned fused-loop body: a `neg` or
//! `square` whose result is read only by one `Fold` (a reduction folded
//! into the loop, see `fold`) is dropped, and the fold reads the op's
//! operand and applies the op itself as it combines (`math::Pre`). The
//! backward of a broadcast subtracted (`sum(neg(g))`) and a sum of
//! squares then make one pass over the block instead of two. The op runs
//! in the register's type before the widening, as the instruction did, so
//! the bits do not change.

use crate::compile::base::math::Pre;
use crate::compile::base::regs::{Bank, Out, Src};
use crate::compile::fusion::chain_form::{dead_after, touches};
use crate::compile::fusion::fold::Sink;
use crate::compile::fusion::fused::Instr;
use crate::compile::fusion::io::Leaf;

/// The body with each absorbable op removed (its fold reading the op's
/// operand, its sink applying the op), and the number removed.
///
/// An op `b = op(a)` followed by `Fold { src: b }` is absorbed when
/// nothing between them reads `b` or writes `a` (so `a` still holds the
/// operand at the fold) and `b` is dead after the fold.
pub(crate) fn absorb_into_sinks(
    body: Vec<Instr>,
    leaves: &[Leaf],
    sinks: &mut [Sink],
) -> (Vec<Instr>, usize) {
    let mut body = body;
    let mut gone = vec![false; body.len()];
    let mut absorbed = 0;
    for k in 0..body.len() {
        let Instr::Fold { src: b, sink } = body[k] else {
            continue;
        };
        // The last instruction writing `b` before the fold.
        let Some(i) = (0..k).rev().find(|&i| touches(&body[i], leaves, b).1) else {
            continue;
        };
        let Instr::Unary {
            op,
            bank: Bank::F32 | Bank::F64,
            x: Src::Reg(a),
            dst: Out::Reg(d),
        } = body[i]
        else {
            continue;
        };
        let Some(pre) = Pre::of(op) else { continue };
        let between = &body[i + 1..k];
        let b_read = between.iter().any(|ins| touches(ins, leaves, b).0);
        let a_written = between.iter().any(|ins| touches(ins, leaves, a).1);
        if d != b || gone[i] || b_read || a_written || !dead_after(&body[k + 1..], leaves, b) {
            continue;
        }
        body[k] = Instr::Fold { src: a, sink };
        sinks[sink as usize].pre = pre;
        gone[i] = true;
        absorbed += 1;
    }
    let body = body
        .into_iter()
        .zip(gone)
        .filter_map(|(ins, g)| (!g).then_some(ins))
        .collect();
    (body, absorbed)
}

#[cfg(test)]
mod tests {
    use rlx_core::{ReduceOp, UnaryOp};

    use super::*;
    use crate::compile::base::regs::Reg;

    fn f(idx: u32) -> Reg {
        Reg {
            bank: Bank::F64,
            idx,
        }
    }

    fn un(op: UnaryOp, x: u32, dst: u32) -> Instr {
        Instr::Unary {
            op,
            bank: Bank::F64,
            x: Src::Reg(f(x)),
            dst: Out::Reg(f(dst)),
        }
    }

    fn fold(src: u32) -> Instr {
        Instr::Fold {
            src: f(src),
            sink: 0,
        }
    }

    fn sink() -> Vec<Sink> {
        vec![Sink {
            op: ReduceOp::Sum,
            dims: vec![8],
            out_strides: vec![0],
            out_numel: 1,
            count: 8,
            acc_off: 0,
            target: 0,
            pre: Pre::Id,
        }]
    }

    /// The instructions left and the sink's op after absorbing.
    fn absorb(body: Vec<Instr>) -> (Vec<Instr>, Pre) {
        let mut sinks = sink();
        let (body, n) = absorb_into_sinks(body, &[], &mut sinks);
        assert_eq!(n, usize::from(sinks[0].pre != Pre::Id));
        (body, sinks[0].pre)
    }

    #[test]
    fn an_op_read_only_by_a_fold_is_applied_by_its_sink() {
        // r2 = -r1; fold r2  →  fold r1 with the negation.
        let (body, pre) = absorb(vec![un(UnaryOp::Neg, 1, 2), fold(2)]);
        assert_eq!(pre, Pre::Neg);
        assert!(
            matches!(body[..], [Instr::Fold { src, .. }] if src == f(1)),
            "{body:?}"
        );
        // A store of r1 in between reads the operand, which is fine.
        let store = Instr::Store {
            src: f(1),
            target: 1,
        };
        let (body, pre) = absorb(vec![un(UnaryOp::Square, 1, 2), store, fold(2)]);
        assert_eq!((body.len(), pre), (2, Pre::Square));
    }

    #[test]
    fn ops_with_other_readers_or_a_lost_operand_stay() {
        let store = |r| Instr::Store {
            src: f(r),
            target: 1,
        };
        let overwrite_r1 = Instr::Unary {
            op: UnaryOp::Abs,
            bank: Bank::F64,
            x: Src::Direct(0),
            dst: Out::Reg(f(1)),
        };
        let cases = [
            // The result is stored too.
            vec![un(UnaryOp::Neg, 1, 2), store(2), fold(2)],
            // The operand's register is overwritten before the fold.
            vec![un(UnaryOp::Neg, 1, 2), overwrite_r1, fold(2)],
            vec![un(UnaryOp::Neg, 1, 2), fold(2), un(UnaryOp::Abs, 2, 3)],
            // Not an op a sink applies.
            vec![un(UnaryOp::Tanh, 1, 2), fold(2)],
        ];
        for body in cases {
            let (got, pre) = absorb(body.clone());
            assert_eq!((got.len(), pre), (body.len(), Pre::Id), "{body:?}");
        }
    }
}
