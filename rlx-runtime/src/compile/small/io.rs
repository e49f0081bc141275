//! The flat `f64` elements a scalarised plan ([`Small`]) runs on: the
//! arguments read in place or copied (widened) onto the stack, results
//! written back into `f32`/`f64` storages, and the call of the element
//! program itself.
//!
//! [`Small`]: crate::compile::small::program::Small

use crate::compile::base::env::concrete;
use crate::compile::executable::Executable;
use crate::compile::plan::StepKind;
#[cfg(feature = "jit")]
use crate::compile::scalar::step;
use crate::compile::scalar::step::NumberIo;
use crate::storage::Storage;
use crate::value::Arg;

/// Elements up to this many (inputs, outputs, scratch) live on the stack.
const STACK: usize = 512;

/// Calls `f` with the checked arguments (`head` then `tail`, `n_in`
/// elements in all) as flat `f64` elements: a single `f64` tensor's own
/// storage, or a copy on the stack.
#[inline]
pub(crate) fn with_inputs<R>(
    n_in: usize,
    head: &[Arg<'_>],
    tail: &[Arg<'_>],
    f: impl FnOnce(&[f64]) -> R,
) -> R {
    if let Some(ins) = in_place(n_in, head, tail) {
        return f(ins);
    }
    with_stack(n_in, |ins| {
        read_args(head.iter().chain(tail).copied(), ins);
        f(ins)
    })
}

/// The values of a single `f64` tensor argument of `n_in` elements, read
/// in place; `None` for any other arguments.
#[inline]
pub(crate) fn in_place<'a>(
    n_in: usize,
    head: &'a [Arg<'_>],
    tail: &[Arg<'_>],
) -> Option<&'a [f64]> {
    if let ([Arg::Tensor(t)], []) = (head, tail) {
        if let Storage::F64(v) = concrete(t) {
            if v.len() == n_in {
                return Some(v);
            }
        }
    }
    None
}

/// Copies checked arguments, widened to `f64`, to the front of `ins`.
pub(super) fn read_args<'a>(args: impl Iterator<Item = Arg<'a>>, ins: &mut [f64]) {
    let mut at = 0;
    for a in args {
        at += match a {
            Arg::F64(v) => put(&mut ins[at..], v),
            Arg::F32(v) => put(&mut ins[at..], v as f64),
            Arg::Tensor(t) => read(concrete(t), &mut ins[at..]),
        };
    }
}

/// Writes the front of `out` into `s` (an `f32`/`f64` storage: outputs of
/// scalarised plans are); returns the element count.
pub(super) fn write(out: &[f64], s: &mut Storage) -> usize {
    let n = s.len();
    match s {
        Storage::F64(v) => v.copy_from_slice(&out[..n]),
        Storage::F32(v) => {
            for (o, &x) in v.iter_mut().zip(&out[..n]) {
                *o = x as f32;
            }
        }
        other => unreachable!("scalarised output of dtype {}", other.dtype()),
    }
    n
}

/// Writes `v` into `slot[0]`; one element.
#[inline(always)]
fn put(slot: &mut [f64], v: f64) -> usize {
    slot[0] = v;
    1
}

/// Copies a storage's elements, widened to `f64`, to the front of `to`;
/// returns their count.
#[inline]
pub(crate) fn read(s: &Storage, to: &mut [f64]) -> usize {
    match s {
        Storage::F64(v) => to[..v.len()].copy_from_slice(v),
        Storage::F32(v) => {
            for (o, &x) in to.iter_mut().zip(v) {
                *o = x as f64;
            }
        }
        other => {
            for (i, o) in to[..other.len()].iter_mut().enumerate() {
                *o = other.get_f64(i);
            }
        }
    }
    s.len()
}

/// Calls `f` with `n` zeroed `f64`, on the stack when `n <= STACK` (in
/// one of a few sizes, each twice the last, so that a call never clears
/// more than twice what it uses: clearing 4 KB for a 100-element Hessian
/// was most of a warm `hessian_` call).
#[inline]
pub(crate) fn with_stack<R>(n: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
    if n <= 16 {
        f(&mut [0.0; 16][..n])
    } else if n <= 32 {
        f(&mut [0.0; 32][..n])
    } else if n <= 64 {
        f(&mut [0.0; 64][..n])
    } else if n <= 128 {
        f(&mut [0.0; 128][..n])
    } else if n <= 256 {
        f(&mut [0.0; 256][..n])
    } else if n <= STACK {
        f(&mut [0.0; STACK][..n])
    } else {
        f(&mut vec![0.0; n])
    }
}

/// Runs a scalar-program executable on `ins` (one per input), one result
/// per output into `out`, without the limits of the number path's stack
/// buffers.
pub(super) fn program(exe: &Executable, ins: &[f64], out: &mut [f64]) {
    // One native function over the inputs and outputs in order: called
    // with no more checks than their lengths.
    if exe.run_direct(ins, out) {
        return;
    }
    let plan = &exe.plan;
    let (Some(prog), Some(StepKind::Scalar(region))) = (
        plan.scalar_program.as_ref(),
        plan.steps.first().map(|s| &s.kind),
    ) else {
        unreachable!("a scalarised plan is a scalar program")
    };
    let types = &plan.output_types;
    #[cfg(feature = "jit")]
    if let Some(n) = &region.native {
        if prog.loads_are_inputs && prog.stores_are_outputs {
            n.call(ins, out);
            return;
        }
        with_stack(n.loads() + n.stores(), |buf| {
            let (leaves, results) = buf.split_at_mut(n.loads());
            for (slot, &i) in leaves.iter_mut().zip(&prog.input_of_load) {
                *slot = ins[i as usize];
            }
            n.call(leaves, results);
            for ((o, &t), ty) in out.iter_mut().zip(&prog.target_of_output).zip(types) {
                *o = step::round_to(ty.dtype, results[t as usize]);
            }
        });
        return;
    }
    let mut io = NumberIo {
        locs: &plan.locs,
        inputs: ins,
        output_of_target: &prog.output_of_target,
        types,
        out,
    };
    with_stack(region.scratch_len(), |file| {
        region.exec_with_consts(file, &mut io)
    });
}
