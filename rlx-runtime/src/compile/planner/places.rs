//! Values written in place into the concat or transpose that reads them.
//!
//! A value whose only user is a `Concat` (as one of its operands) or a
//! copied `Transpose` (besides, for a member of a fused loop, other members
//! of the same loop), directly or through a `Reshape` that only adds or
//! drops unit axes, and which is not a graph output, need not exist on
//! its own: the fused loop computing it (or, for a concat or transpose,
//! the copies making it) writes each element straight to where the user
//! keeps it, through strides. Chains compose: the pieces of a concat that
//! is transposed are written once, into the transpose's buffer. Pieces
//! that are not placed (inputs, results of other steps) are copied into
//! their window by the concat's step, as before.

use crate::compile::planner::facts::unit_axes_only;
use rlx_core::{Graph, Op};

use crate::compile::planner::facts::contiguous;
use crate::compile::planner::views::View;

/// Where a value lives inside another one's storage: element `i` (a
/// multi-index over the value's dims) is element `off + Σ i_d·strides[d]`
/// of node `node`'s buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) node: u32,
    pub(super) off: usize,
    pub(super) strides: Vec<usize>,
}

/// The place of every value written in place (`None` for the others).
///
/// `group` marks members of element-wise groups and `sink` the reductions
/// folded into them; `virt` and `views` the transposes that are not copied.
pub(super) fn places(
    g: &Graph,
    users: &[Vec<u32>],
    is_output: &[bool],
    virt: &[bool],
    views: &[Option<View>],
    group: &[Option<u32>],
    sink: &[bool],
) -> Vec<Option<Place>> {
    let nodes = g.nodes();
    let copied = |i: usize| match nodes[i].op {
        Op::Concat { .. } => true,
        Op::Transpose { .. } => !virt[i] && views[i].is_none(),
        _ => false,
    };
    let mut places: Vec<Option<Place>> = vec![None; nodes.len()];
    for v in (0..nodes.len()).rev() {
        // A loop member may also be read by its own loop (from its
        // register); any other value has the concat or transpose alone.
        let computed_in_loop = group[v].is_some() && !sink[v] && nodes[v].shape.rank() > 0;
        let mut outside = users[v]
            .iter()
            .filter(|&&u| !computed_in_loop || group[u as usize] != group[v]);
        let (Some(&u), None) = (outside.next(), outside.next()) else {
            continue;
        };
        let u = u as usize;
        let un = &nodes[u];
        let once = un.inputs.iter().filter(|p| p.index() == v).count() == 1;
        // A view has no step to write it anywhere: the concat reads it.
        if places[v].is_some() || is_output[v] || !once || !copied(u) || views[v].is_some() {
            continue;
        }
        if matches!(nodes[v].op, Op::Reshape { .. }) {
            // A reshape adding or dropping unit axes, whose operand is
            // written by a loop or copy and read by it alone: the operand
            // is written where the reshape is placed.
            let x = nodes[v].inputs[0].index();
            let only_reshape = users[x].iter().all(|&w| {
                w as usize == v || (group[x].is_some() && !sink[x] && group[w as usize] == group[x])
            });
            let in_loop = group[x].is_some() && !sink[x] && nodes[x].shape.rank() > 0;
            let strides = unit_axes_only(nodes[x].shape.dims(), nodes[v].shape.dims());
            if let (true, false, true, Some(map)) =
                (only_reshape, is_output[x], in_loop || copied(x), strides)
            {
                let here = placed_in(&places, g, v, u);
                places[x] = Some(Place {
                    strides: map
                        .iter()
                        .map(|k| k.map_or(0, |k| here.strides[k]))
                        .collect(),
                    ..here.clone()
                });
                places[v] = Some(here);
            }
            continue;
        }
        if !(computed_in_loop || copied(v)) {
            continue;
        }
        places[v] = Some(placed_in(&places, g, v, u));
    }
    places
}

/// Where value `v` lives inside its user `u` (a concat or transpose).
fn placed_in(places: &[Option<Place>], g: &Graph, v: usize, u: usize) -> Place {
    let nodes = g.nodes();
    let un = &nodes[u];
    let dest = dest(places, g, u);
    match &un.op {
        Op::Concat { axis } => {
            let before: usize = un
                .inputs
                .iter()
                .take_while(|p| p.index() != v)
                .map(|p| nodes[p.index()].shape.dim(*axis))
                .sum();
            Place {
                off: dest.off + before * dest.strides[*axis],
                ..dest
            }
        }
        Op::Transpose { perm } => {
            // Output axis d reads operand axis perm[d].
            let mut strides = vec![0; perm.len()];
            for (d, &a) in perm.iter().enumerate() {
                strides[a] = dest.strides[d];
            }
            Place { strides, ..dest }
        }
        _ => unreachable!("values are placed in concats and transposes only"),
    }
}

/// Where node `i` is written: its place, or its own buffer.
pub(super) fn dest(places: &[Option<Place>], g: &Graph, i: usize) -> Place {
    places[i].clone().unwrap_or_else(|| Place {
        node: i as u32,
        off: 0,
        strides: contiguous(&g.nodes()[i].shape),
    })
}
