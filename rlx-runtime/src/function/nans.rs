//! The check of non-finite results (see [`crate::debug_nans`]) on the
//! runs of a function's plans, and where the node it names was traced.

use std::panic::Location;

use rlx_core::{Error, Graph, Result};

use super::cache::{Entry, Function};
use super::plan::Plan;
use super::transform::Transform;
use crate::debug_nans::localise;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::Arg;

impl Function {
    /// After a run of `plan` (transform `t` of `entry`) on `args` and
    /// `extras` whose results were not all finite, with the check on: the
    /// error naming the node of the plan's graph that produced the first
    /// non-finite value (found by running the graph again in the
    /// interpreter) and the user's line it was traced at.
    #[cold]
    pub(super) fn non_finite(
        &self,
        entry: &Entry,
        t: Transform,
        plan: &Plan,
        args: &[Arg<'_>],
        extras: &[Arg<'_>],
    ) -> Error {
        let tensors: Vec<Tensor> = args.iter().chain(extras).map(|a| a.to_tensor()).collect();
        let storages: Result<Vec<&Storage>> = tensors.iter().map(Tensor::storage).collect();
        let mut e = match storages {
            Ok(s) => localise(&plan.graph, &s, &t.what(self.name)),
            Err(e) => return e,
        };
        if let Error::NonFinite(n) = &mut e {
            n.origin = traced_at(&entry.graph, &entry.lines, &plan.graph, n.node as usize);
        }
        e
    }
}

/// Where node `i` of `plan` (a transform of `traced`, whose node `k` the
/// user's line `lines[k]` recorded) comes from, for
/// [`Error::NonFinite`]: the line of a node the transform kept from the
/// traced graph (its nodes keep their ids there: the transforms append to
/// a copy), or, for a node the transform added, the line of the latest
/// such node it reads (directly, else through other added nodes): the
/// derivative of that node. Empty when unknown.
fn traced_at(traced: &Graph, lines: &[Option<&Location<'_>>], plan: &Graph, i: usize) -> String {
    let kept = traced
        .nodes()
        .iter()
        .zip(plan.nodes())
        .take_while(|(a, b)| a == b)
        .count();
    let line = |k: usize| lines.get(k).copied().flatten();
    let at = |l: &Location<'_>| format!("{}:{}:{}", l.file(), l.line(), l.column());
    if i < kept {
        return line(i).map_or_else(String::new, |l| format!("traced at {}", at(l)));
    }
    // Breadth first over the added nodes `i` reads, one level at a time.
    let mut level = vec![i];
    let mut seen = vec![false; plan.len()];
    while !level.is_empty() {
        let mut next = Vec::new();
        let mut best: Option<usize> = None;
        for &k in &level {
            for j in &plan.nodes()[k].inputs {
                let j = j.index();
                if j < kept {
                    if line(j).is_some() {
                        best = best.max(Some(j));
                    }
                } else if !std::mem::replace(&mut seen[j], true) {
                    next.push(j);
                }
            }
        }
        if let Some(k) = best {
            let op = plan.nodes()[k].op.name();
            let l = line(k).map_or_else(String::new, at);
            return format!("the derivative of `{op}` (%{k}), traced at {l}");
        }
        level = next;
    }
    String::new()
}
