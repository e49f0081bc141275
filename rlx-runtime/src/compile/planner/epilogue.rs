//! Which matrix products run as the head of the fused loop reading them
//! (see `compile::epilogue`).
//!
//! A product `p` is an epilogue's product when
//! - it is an `f32` or `f64` product whose value is not pinned (not a
//!   graph output, not in a scalar region);
//! - every user of `p` is a member (not a folded reduction) of one
//!   element-wise group of `p`'s shape, reading it element for element;
//! - that group stores a member `h` of `p`'s shape and dtype contiguously
//!   (not placed in a concat or transpose): `p` is written into `h`'s
//!   buffer, which the loop reads block by block before overwriting it.
//!
//! Running `p` at the group's step instead of its own is a valid schedule:
//! `p`'s operands precede it, and nothing but the group reads it. A group
//! takes at most one product; the others keep their own steps.

use rlx_core::{DType, Graph, Op};

use crate::compile::planner::facts::Group;
use crate::compile::planner::places::Place;

/// The epilogues of a plan.
pub(super) struct Epilogues {
    /// Per node: whether it is a product computed by an epilogue step.
    pub(super) product: Vec<bool>,
    /// Per group: its product and the member whose buffer receives it.
    pub(super) of_group: Vec<Option<(u32, u32)>>,
}

impl Epilogues {
    /// No epilogues (see [`Options::epilogues`](crate::compile::options::Options)).
    pub(super) fn none(nodes: usize, groups: usize) -> Epilogues {
        Epilogues {
            product: vec![false; nodes],
            of_group: vec![None; groups],
        }
    }
}

/// What the planner knows that decides an epilogue.
pub(super) struct Facts<'a> {
    pub(super) g: &'a Graph,
    pub(super) live: &'a [bool],
    pub(super) users: &'a [Vec<u32>],
    pub(super) pinned: &'a [bool],
    pub(super) group: &'a [Option<u32>],
    pub(super) groups: &'a [Group],
    pub(super) sink: &'a [bool],
    pub(super) stored: &'a [bool],
    pub(super) places: &'a [Option<Place>],
}

/// Finds the epilogues (see the module docs).
pub(super) fn epilogues(f: &Facts<'_>) -> Epilogues {
    let nodes = f.g.nodes();
    let mut e = Epilogues::none(nodes.len(), f.groups.len());
    for (p, n) in nodes.iter().enumerate() {
        let float = matches!(n.dtype, DType::F32 | DType::F64);
        if !matches!(n.op, Op::MatMul) || !f.live[p] || f.pinned[p] || !float {
            continue;
        }
        let Some(&first) = f.users[p].first() else {
            continue;
        };
        let Some(gid) = f.group[first as usize] else {
            continue;
        };
        let gr = &f.groups[gid as usize];
        let only_this_group = f.users[p].iter().all(|&u| {
            let u = u as usize;
            f.group[u] == Some(gid) && !f.sink[u] && nodes[u].shape == n.shape
        });
        if !only_this_group || gr.shape != n.shape || e.of_group[gid as usize].is_some() {
            continue;
        }
        let into = gr.members.iter().copied().find(|&h| {
            let (h, hn) = (h as usize, &nodes[h as usize]);
            f.stored[h]
                && !f.sink[h]
                && f.places[h].is_none()
                && hn.dtype == n.dtype
                && hn.shape == n.shape
        });
        if let Some(h) = into {
            e.product[p] = true;
            e.of_group[gid as usize] = Some((p as u32, h));
        }
    }
    e
}
