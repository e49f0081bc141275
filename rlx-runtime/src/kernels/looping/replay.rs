//! The reverse sweep of an adjoint with residuals ([`replay`]): the
//! backward half of the split step once per step, from the last, on the
//! residuals its scan recorded, with hoisted products stacked a group of
//! steps at a time and summed after each group.

use rlx_core::loops::hoist::Hoisted;
use rlx_core::{Error, LoopOp, Result};

use super::super::loop_result::{add_into, copy, fill_zero_range, Packed};
use super::{
    end_reverse, fit, index, invariants, recycle, start_reverse, take_bars, types_of, zero,
    LoopBuffers, RunGraph,
};
use crate::storage::{Cache, Storage};

/// The reverse sweep of an adjoint with residuals: `step` (the split
/// step's backward half, `[x, k, c̄', ȳ, r] → [c̄, x̄, k̄]`) once per step,
/// from the last, on the residuals its scan recorded. No carry is stored
/// or recomputed. With hoisted products, the step also returns their
/// factors, stacked here a group of [`Hoisted::steps`] steps at a time;
/// after each group (and the last, shorter one, its unused rows zeros)
/// `finish` adds their products to `k̄`.
///
/// [`Hoisted::steps`]: rlx_core::loops::hoist::Hoisted::steps
pub(super) fn replay(
    l: &LoopOp,
    step: &mut dyn RunGraph,
    mut finish: Option<&mut dyn RunGraph>,
    operands: &[&Storage],
    out: &mut Packed<'_>,
    bufs: &mut LoopBuffers,
) -> Result<()> {
    let (backward, _) = l.step_graphs();
    let hoisted = l.residuals.as_ref().and_then(|r| r.hoisted.as_ref());
    let (sz, xbar_off) = start_reverse(l, backward, operands, bufs)?;
    let factors = hoisted.map_or(0, |h| h.factors);
    let group = hoisted.map_or(l.length, |h| h.steps);
    if hoisted.is_some() && finish.is_none() {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!("{}: hoisted products need their finishing graph", l.name),
        });
    }
    let outs = backward.outputs();
    // Every row of a stack is written by the sweep (or set to zeros, in
    // the last group) before `finish` reads it.
    let per_step = types_of(backward, &outs[outs.len() - factors..]);
    fit(
        &mut bufs.stacks,
        per_step.map(|(d, n)| (d, n * group)),
        false,
    );
    let (c, k, p) = (l.carries, l.xs, l.ys());
    let n_in = l.body.inputs().len();
    // The scan's packed result, holding the stacked residuals, follows
    // `[c(0), xs, k, c̄(T), ȳs]`.
    let packed = operands[n_in + c + p];
    zero(&mut bufs.rbuf, sz.r.iter().map(|&n| (packed.dtype(), n)));
    let mut spare: Vec<&Storage> = recycle(std::mem::take(&mut bufs.spare));
    for t in (0..l.length).rev() {
        let s = index(l, t);
        for j in 0..k {
            copy(&mut bufs.xbuf[j], 0, operands[c + j], s * sz.x[j], sz.x[j])?;
        }
        for (j, yb) in bufs.ybar.iter_mut().enumerate() {
            copy(yb, 0, operands[n_in + c + j], s * sz.y[j], sz.y[j])?;
        }
        for (i, r) in bufs.rbuf.iter_mut().enumerate() {
            copy(r, 0, packed, sz.residual(i, s), sz.r[i])?;
        }
        if t > 0 && !sz.r.is_empty() {
            // The next step's residuals (one run), fetched into the
            // second-level cache while this one runs, so that their copy,
            // after it, reads the cache rather than memory (the residuals
            // of a long loop were written a whole forward sweep earlier).
            packed.prefetch(sz.residual(0, index(l, t - 1)), sz.r_step, Cache::L2);
        }
        {
            let mut ins = recycle(std::mem::take(&mut spare));
            ins.extend(bufs.xbuf.iter());
            ins.extend_from_slice(invariants(l, operands));
            ins.extend(bufs.cbar.iter());
            ins.extend(bufs.ybar.iter());
            ins.extend(bufs.rbuf.iter());
            let r = step.run(&ins, &mut bufs.vouts);
            spare = recycle(ins);
            r?;
        }
        let next = take_bars(c, s, &xbar_off, hoisted.map(|h| &h.per_step[..]), bufs, out)?;
        let row = group_row(l, t, group);
        for (stack, v) in bufs.stacks.iter_mut().zip(&bufs.vouts[next..]) {
            copy(stack, row * v.len(), v, 0, v.len())?;
        }
        // The group's last step (the sweep runs `t` down to 0).
        if let (Some(h), Some(f), 0) = (hoisted, finish.as_deref_mut(), t % group) {
            zero_rows(l, t, group, &mut bufs.stacks);
            finish_group(h, f, bufs)?;
        }
    }
    bufs.spare = recycle(spare);
    end_reverse(l, bufs, out)
}

/// The row of iteration `t`'s factors in its group's stacks: the groups
/// cover iterations `[g·S, (g + 1)·S)` (the last may be shorter), and
/// rows follow the per-step index, as in a single group of all `T` steps
/// (whose row is the step's index).
fn group_row(l: &LoopOp, t: usize, group: usize) -> usize {
    let (start, len) = group_span(l, t, group);
    if l.reverse {
        start + len - 1 - t
    } else {
        t - start
    }
}

/// The first iteration and the number of iterations of `t`'s group.
fn group_span(l: &LoopOp, t: usize, group: usize) -> (usize, usize) {
    let start = t - t % group;
    (start, group.min(l.length - start))
}

/// Sets the rows of `t`'s group that no step writes (those of a shorter
/// group after its steps' rows, see [`group_row`]) to zeros.
fn zero_rows(l: &LoopOp, t: usize, group: usize, stacks: &mut [Storage]) {
    let (_, len) = group_span(l, t, group);
    for s in stacks.iter_mut() {
        let n = s.len() / group;
        fill_zero_range(s, len * n..group * n);
    }
}

/// Runs `finish` on the stacked factors of a group and adds its results to
/// the summed cotangents.
fn finish_group(h: &Hoisted, finish: &mut dyn RunGraph, bufs: &mut LoopBuffers) -> Result<()> {
    let stacks: Vec<&Storage> = bufs.stacks.iter().collect();
    // Storages of the finishing graph's output types (an `f32` loop's
    // products write `f32`).
    fit(
        &mut bufs.finished,
        types_of(&h.finish, h.finish.outputs()),
        false,
    );
    finish.run(&stacks, &mut bufs.finished)?;
    for (&q, v) in h.targets.iter().zip(&bufs.finished) {
        add_into(&mut bufs.kbar[q], v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_core::{DType, Graph, LoopKind, Op, Shape};

    use crate::kernels::looping::tests::fused_value_and_grad;
    use crate::kernels::looping::{run_loop, Interpreted};

    /// `h' = tanh(h·W + x)`, `y = h'` over `steps` steps (carry `h: [2,
    /// 8]`, per-step `x`, invariant `W: [8, 8]`; a reverse scan if
    /// `reverse`), output `Σ ys + Σ h(T)`: its value and gradient with the
    /// scan and adjoint fused, `W̄`'s products hoisted out of the sweep.
    fn recurrent(steps: usize, reverse: bool) -> Graph {
        let f = |g: &mut Graph, n: &str, s: &[usize]| g.input(n, Shape::from(s), DType::F64);
        let mut b = Graph::new();
        let (h, x, w) = (
            f(&mut b, "h", &[2, 8]),
            f(&mut b, "x", &[2, 8]),
            f(&mut b, "w", &[8, 8]),
        );
        let hw = b.matmul(h, w).unwrap();
        let z = b.add(hw, x).unwrap();
        let h2 = b.tanh(z).unwrap();
        b.set_outputs(vec![h2, h2]);
        let l = LoopOp::scan("test", b, 1, 1, steps, reverse, None).unwrap();
        fused_value_and_grad(l)
    }

    /// The values of every node of `g` on inputs of sines.
    fn node_values(g: &Graph) -> Vec<Option<Storage>> {
        let ins: Vec<Storage> = g
            .inputs()
            .iter()
            .enumerate()
            .map(|(i, inp)| {
                let n = g.ty(inp.node).shape.numel();
                Storage::F64((0..n).map(|k| ((i * 31 + k) as f64 * 0.37).sin()).collect())
            })
            .collect();
        let refs: Vec<&Storage> = ins.iter().collect();
        let mut vals: Vec<Option<Storage>> = vec![None; g.len()];
        crate::kernels::run_inspecting(g, &refs, &mut |i, v| {
            vals[i] = Some(v.clone());
            Ok(())
        })
        .unwrap();
        vals
    }

    /// Runs adjoint `l` (with residuals, hoisted products) on `operands`
    /// with the interpreter's step graphs.
    fn replayed(l: &LoopOp, operands: &[&Storage]) -> Vec<f64> {
        let (body, _) = l.step_graphs();
        let mut body = Interpreted(body);
        let h = l.residuals.as_ref().and_then(|r| r.hoisted.as_ref());
        let mut finish = Interpreted(&h.expect("hoisted products").finish);
        let mut out = Storage::F64(vec![f64::NAN; l.out_type().shape.numel()]);
        run_loop(
            l,
            &mut body,
            None,
            Some(&mut finish),
            &[],
            operands,
            &mut out,
            &mut LoopBuffers::default(),
        )
        .unwrap();
        out.to_f64_vec()
    }

    #[test]
    fn hoisted_products_summed_in_groups_of_any_size_give_the_one_group_sums() {
        // The adjoint of a 7-step recurrent loop (forward and reverse
        // scans) stacks its factors in groups of 1 to 7 steps (a last,
        // shorter group padded with zero rows). One group of all steps (the
        // default at this size) gives the interpreter's bits; other groups
        // add the same products in another order: within 1e-12 relative
        // (`hoisted_products…` in `tests/loops.rs` bounds the reordering).
        use rlx_core::loops::{hoist::hoist_grouped, residuals::split};
        let steps = 7;
        for reverse in [false, true] {
            let g = recurrent(steps, reverse);
            let vals = node_values(&g);
            let (i, l) = g
                .nodes()
                .iter()
                .enumerate()
                .find_map(|(i, n)| match &n.op {
                    Op::Loop(l)
                        if matches!(l.kind, LoopKind::Adjoint { .. })
                            && l.residuals.as_ref().is_some_and(|r| r.hoisted.is_some()) =>
                    {
                        Some((i, l.clone()))
                    }
                    _ => None,
                })
                .expect("an adjoint with hoisted products");
            let operands: Vec<&Storage> = g.nodes()[i]
                .inputs
                .iter()
                .map(|j| vals[j.index()].as_ref().expect("a live operand"))
                .collect();
            let want = vals[i].as_ref().expect("a live loop").to_f64_vec();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let r = l.residuals.as_ref().expect("residuals");
            assert_eq!(r.hoisted.as_ref().map(|h| h.steps), Some(steps));
            assert_eq!(bits(&replayed(&l, &operands)), bits(&want));
            let unsplit = LoopOp {
                residuals: None,
                ..(*l).clone()
            };
            for group in [1, 2, 3, 4, 6, 7] {
                let mut split = split(&unsplit).unwrap();
                let (backward, h) = hoist_grouped(&unsplit, &split.backward, Some(group))
                    .unwrap()
                    .expect("hoisted");
                assert_eq!(h.steps, group);
                split.backward = backward;
                split.hoisted = Some(h);
                let grouped = LoopOp {
                    residuals: Some(std::sync::Arc::new(split)),
                    ..(*l).clone()
                };
                grouped.validate().unwrap();
                let got = replayed(&grouped, &operands);
                if group == steps {
                    assert_eq!(bits(&got), bits(&want), "reverse {reverse}");
                }
                for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                        "reverse {reverse}, groups of {group}, element {k}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
