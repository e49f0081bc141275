//! Facts about a graph's nodes and shapes that the planner's files share
//! (below every other file of `planner`): the open element-wise groups,
//! contiguous strides, unit-axis maps, which ops fuse.

use rlx_core::{Op, Shape};

/// An open group of element-wise nodes of one shape, fused into one loop
/// (`sealed` once a node that cannot join it reads a member).
pub(super) struct Group {
    pub(super) shape: Shape,
    pub(super) members: Vec<u32>,
    pub(super) sealed: bool,
}

/// The row-major strides of `s`.
pub(super) fn contiguous(s: &Shape) -> Vec<usize> {
    s.strides()
}

/// For `from` and `to` equal once their unit axes are dropped: for each
/// axis of `from`, the axis of `to` of the same extent (`None` for unit
/// axes); else `None`.
pub(super) fn unit_axes_only(from: &[usize], to: &[usize]) -> Option<Vec<Option<usize>>> {
    let mut big = (0..to.len()).filter(|&k| to[k] != 1);
    let map: Vec<Option<usize>> = from
        .iter()
        .map(|&d| match d {
            1 => Some(None),
            _ => big.next().filter(|&k| to[k] == d).map(Some),
        })
        .collect::<Option<_>>()?;
    big.next().is_none().then_some(map)
}

/// Whether `op` is element-wise, so that a fused loop can evaluate it.
pub(super) fn is_fusable(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Cast(_)
            | Op::Broadcast { .. }
    )
}
