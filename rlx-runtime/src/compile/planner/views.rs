//! Movement ops read in place by fused loops.
//!
//! A `Slice` or `Transpose` whose users are all element-wise nodes (so all
//! members of fused loops) or views themselves gets no step and no buffer: it is a *view*, an
//! offset and one element stride per axis into the storage of the value it
//! was cut from, and the loops reading it walk that storage by index
//! arithmetic. Views compose (a slice of a transposed slice is one view).
//! A concat reads a view in place too: its copy of that operand walks the
//! view's strides. A view with any other user (a reduction, a product, a
//! graph output...) is copied as before, once, and every user reads the copy.
//!
//! A `Reshape` of a slice whose elements are one contiguous run of the
//! sliced value (`h.slice_range(l..l + 1, 0).reshape([B, H])`: a layer of a stacked
//! carry) is a view too, when all its users read it in place: that run
//! with the reshape's dims. A reshape is otherwise an alias of its
//! operand's storage, so without this the slice under it was copied
//! (its user, the reshape, reads nothing in place). So is a reshape that
//! only adds or drops unit axes of a slice or transpose (`[4, 32] → [1, 4,
//! 32]`, a layer's piece of a stacked cotangent): the other axes keep
//! their strides.

use rlx_core::{Graph, Op};

use crate::compile::planner::facts::contiguous;
use crate::compile::planner::facts::unit_axes_only;

/// Where the elements of a view live: element `i` (a multi-index over the
/// view's dims) is element `off + Σ i_d·strides[d]` of `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct View {
    /// The value owning the storage (an alias root, never itself a view).
    pub(super) base: u32,
    pub(super) off: usize,
    pub(super) strides: Vec<usize>,
}

/// The view of every node read in place (`None` for the others).
///
/// `users[i]` lists the live users of node `i`, `root` resolves aliases,
/// `virt` marks transposes read in place by matrix products (left to them).
pub(super) fn views(
    g: &Graph,
    users: &[Vec<u32>],
    is_output: &[bool],
    root: &[u32],
    virt: &[bool],
) -> Vec<Option<View>> {
    let nodes = g.nodes();
    // Which nodes are views: every user is a loop member or itself a view
    // (users come later, so decide from the last node back).
    let mut is_view = vec![false; nodes.len()];
    for i in (0..nodes.len()).rev() {
        let n = &nodes[i];
        let movement = match n.op {
            Op::Slice { .. } | Op::Transpose { .. } => true,
            Op::Reshape { .. } => {
                let x = n.inputs[0].index();
                contiguous_slice(g, x) || unit_axes_of_movement(g, x, n.shape.dims())
            }
            _ => false,
        };
        let read_in_place = !users[i].is_empty()
            && users[i].iter().all(|&u| {
                let un = &nodes[u as usize];
                is_view[u as usize]
                    || (crate::compile::planner::facts::is_fusable(&un.op) && un.shape.rank() > 0)
                    || matches!(un.op, Op::Concat { .. })
            });
        is_view[i] = movement && !is_output[i] && !virt[i] && read_in_place && n.shape.numel() > 0;
    }
    let mut views: Vec<Option<View>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if !is_view[i] {
            continue;
        }
        let x = n.inputs[0].index();
        let from = views[x].clone().unwrap_or_else(|| View {
            base: root[x],
            off: 0,
            strides: contiguous(&nodes[x].shape),
        });
        views[i] = Some(match &n.op {
            Op::Slice { axis, start, .. } => View {
                off: from.off + start * from.strides[*axis],
                ..from
            },
            Op::Transpose { perm } => View {
                strides: perm.iter().map(|&p| from.strides[p]).collect(),
                ..from
            },
            Op::Reshape { .. } => match unit_axes_only(nodes[x].shape.dims(), n.shape.dims()) {
                // Unit axes added or dropped: the other axes keep their
                // strides (a unit axis is never stepped along).
                Some(map) => {
                    let mut strides = vec![0; n.shape.rank()];
                    for (d, k) in map.into_iter().enumerate() {
                        if let Some(k) = k {
                            strides[k] = from.strides[d];
                        }
                    }
                    View { strides, ..from }
                }
                // `contiguous_slice`: the operand's elements are a
                // contiguous run from `from.off` (a view of one, or its
                // own storage).
                None => View {
                    strides: contiguous(&n.shape),
                    ..from
                },
            },
            _ => unreachable!("only slices, transposes and reshapes are views"),
        });
    }
    views
}

/// Whether node `x` is a slice, of a value that is not itself a movement
/// op, whose elements are one contiguous run of that value's storage: every
/// axis before the sliced one has length 1 (or the slice is the whole
/// axis, hence the whole value). Its view, if it is one, is then
/// `{ off, contiguous strides }`, and so is that of a reshape of it;
/// stored, it is contiguous too.
fn contiguous_slice(g: &Graph, x: usize) -> bool {
    let n = &g.nodes()[x];
    let Op::Slice { axis, .. } = n.op else {
        return false;
    };
    let src = &g.nodes()[n.inputs[0].index()];
    if matches!(
        src.op,
        Op::Slice { .. } | Op::Transpose { .. } | Op::Reshape { .. }
    ) {
        return false;
    }
    let dims = n.shape.dims();
    dims[..axis].iter().all(|&d| d == 1) || dims[axis] == src.shape.dims()[axis]
}

/// Whether node `x` is a slice or transpose and `to` its dims with unit
/// axes added or dropped (see `unit_axes_only`).
fn unit_axes_of_movement(g: &Graph, x: usize, to: &[usize]) -> bool {
    let n = &g.nodes()[x];
    matches!(n.op, Op::Slice { .. } | Op::Transpose { .. })
        && unit_axes_only(n.shape.dims(), to).is_some()
}
