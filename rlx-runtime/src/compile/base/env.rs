//! The values of a run, shared by every step and the executor (the bottom of
//! `compile`: it imports nothing of it): value numbers ([`Val`]), where they
//! live ([`Loc`]) and are written ([`Dst`]), and the read access a step gets
//! to them ([`Env`]) over the inputs and outputs of one call.

use std::sync::Arc;

use crate::buffer::Buffer;
use crate::storage::Storage;
use crate::tensor::{Repr, Tensor};
use crate::value::{arg_at, Arg};

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

/// Where a step writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dst {
    /// The location of a node's value.
    Node(Val),
    /// Output tensor `j` (copies of aliases, inputs, constants, duplicates).
    Out(u32),
}

/// What a read of a location that holds nothing returns (never happens for
/// a valid plan and checked inputs).
static NOTHING: Storage = Storage::F32(Vec::new());

/// Read access to every value of a run.
pub(crate) struct Env<'a> {
    /// Where each value lives ([`Plan::locs`](crate::compile::plan::Plan)).
    pub(crate) locs: &'a [Loc],
    /// The plan's constants.
    pub(crate) consts: &'a [Storage],
    pub(crate) inputs: &'a Inputs<'a>,
    pub(crate) bufs: &'a [Storage],
    pub(crate) outs: &'a Outputs<'a>,
}

/// The storage of a concrete tensor.
pub(crate) fn concrete(t: &Tensor) -> &Storage {
    match &t.repr {
        Repr::Concrete(c) => &c.storage,
        // Inputs and outputs are checked to be concrete before a run.
        Repr::Traced(_) => &NOTHING,
    }
}

/// The inputs of a run: tensors, or [`Arg`]s whose numbers were copied into
/// 0-d storages of the state (`numbers[i]` for argument `i`).
pub(crate) enum Inputs<'a> {
    Tensors(&'a [&'a Tensor]),
    /// Storages of the declared types (a loop's body steps).
    Storages(&'a [&'a Storage]),
    Args {
        /// Arguments `0..head.len()`, then `tail`.
        head: &'a [Arg<'a>],
        tail: &'a [Arg<'a>],
        numbers: &'a [Storage],
    },
}

impl Inputs<'_> {
    fn get(&self, i: usize) -> &Storage {
        match self {
            Inputs::Tensors(ts) => concrete(ts[i]),
            Inputs::Storages(ss) => ss[i],
            Inputs::Args {
                head,
                tail,
                numbers,
            } => match arg_at(head, tail, i) {
                Arg::Tensor(t) => concrete(t),
                Arg::F32(_) | Arg::F64(_) => &numbers[i],
            },
        }
    }
}

/// Where a run writes its outputs: the caller's tensors, or storages of
/// the state.
pub(crate) enum Outputs<'a> {
    Tensors(&'a mut [Tensor]),
    Storages(&'a mut [Storage]),
}

impl Outputs<'_> {
    /// Output `j`, for reading.
    fn get(&self, j: usize) -> &Storage {
        match self {
            Outputs::Tensors(ts) => concrete(&ts[j]),
            Outputs::Storages(ss) => &ss[j],
        }
    }

    /// Output `j`, for writing (a tensor's storage is copied first only if
    /// the caller shares it).
    pub(crate) fn get_mut(&mut self, j: usize) -> &mut Storage {
        match self {
            Outputs::Tensors(ts) => match &mut ts[j].repr {
                Repr::Concrete(c) => match c.storage {
                    Buffer::Owned(ref mut s) => s,
                    Buffer::Shared(ref mut s) => Arc::make_mut(s),
                },
                // Checked before a run; a traced output is never written.
                Repr::Traced(_) => unreachable!("outputs are checked to be concrete"),
            },
            Outputs::Storages(ss) => &mut ss[j],
        }
    }
}

impl Env<'_> {
    /// The storage holding value `v`.
    pub(crate) fn get(&self, v: Val) -> &Storage {
        match self.locs[v as usize] {
            Loc::Input(i) => self.inputs.get(i as usize),
            Loc::Const(k) => &self.consts[k as usize],
            Loc::Buf(s) => &self.bufs[s as usize],
            Loc::Out(j) => self.outs.get(j as usize),
            Loc::None => &NOTHING,
        }
    }
}
