//! Running loop nodes ([`rlx::core::loops`](rlx_core::loops)): the step loop of a scan and
//! the checkpointed reverse sweep of an adjoint, over any way of running one
//! body step (a compiled [`Executable`](crate::Executable) in plans, the
//! reference interpreter in [`crate::kernels`]).
//!
//! A scan keeps one set of carries and swaps it with the body's outputs
//! after each step; per-step inputs are copied out of their stacked operand
//! and per-step outputs into the packed result. An adjoint drives a
//! [`Sweep`] through [`revolve`]: at most `checkpoints` stored carries, a
//! working carry, the body's output, the carry cotangents and the reverse
//! step's output, and one accumulator per floating-point invariant, whatever
//! the loop's length. Memory for a run: `(checkpoints + 4)` carries plus the
//! bodies' own buffers (independent of `T`), besides the packed result (and,
//! for a loop fused with its scan, the spine of about `checkpoints` carries
//! the scan recorded); a scan's, 2 carries. These storages are
//! [`LoopBuffers`], which a plan keeps from call to call: a warm call
//! copies into them and allocates none. An adjoint with a spine skips the first descent of
//! the schedule: its advances are not run and its stores read the spine, in
//! place in the scan's packed result (which it takes as an operand).

use rlx_core::loops::schedule::{revolve, Sweep};
use rlx_core::{Error, LoopKind, LoopOp, Result};

use super::loop_result::{add_into, copy, fill_zero, Packed};
use crate::storage::Storage;
use replay::replay;

mod replay;

/// One way of running a graph on storages of its declared types.
pub(crate) trait RunGraph {
    /// Runs on `inputs`, writing `outputs` (one storage per output, resized as needed).
    fn run(&mut self, inputs: &[&Storage], outputs: &mut [Storage]) -> Result<()>;
}

/// The storages of a loop run besides its result: carries, checkpoint
/// slots, per-step inputs and outputs, cotangents. A plan's loop step keeps
/// them between calls, so that a warm call copies into them instead of
/// allocating (their sizes depend on the loop, not on the call).
#[derive(Debug, Default)]
pub(crate) struct LoopBuffers {
    /// A scan's carries, an adjoint's working carry.
    carry: Vec<Storage>,
    xbuf: Vec<Storage>,
    outs: Vec<Storage>,
    slots: Vec<Vec<Storage>>,
    ybar: Vec<Storage>,
    cbar: Vec<Storage>,
    vouts: Vec<Storage>,
    kbar: Vec<Storage>,
    /// One step's residuals (an adjoint with residuals).
    rbuf: Vec<Storage>,
    /// The factors of hoisted products, a group of steps' stacked (see
    /// [`rlx::core::loops::hoist`](rlx_core::loops::hoist)), and what the finishing graph makes of
    /// them.
    stacks: Vec<Storage>,
    finished: Vec<Storage>,
    /// The input list of a body or reverse step, empty between steps (its
    /// allocation is reused; see [`recycle`]).
    spare: Vec<&'static Storage>,
}

/// `dst[i] = srcs[i]` for every `i`, copying into storages of the same
/// dtype and length (no allocation) and cloning the others.
fn assign<'a>(
    dst: &mut Vec<Storage>,
    srcs: impl ExactSizeIterator<Item = &'a Storage>,
) -> Result<()> {
    dst.truncate(srcs.len());
    for (i, src) in srcs.enumerate() {
        match dst.get_mut(i) {
            Some(d) if d.dtype() == src.dtype() && d.len() == src.len() => {
                copy(d, 0, src, 0, src.len())?
            }
            Some(d) => *d = src.clone(),
            None => dst.push(src.clone()),
        }
    }
    Ok(())
}

/// `dst[i]` = zeros of `types[i]` (dtype, length), reusing storages that
/// already have that type.
fn zero(dst: &mut Vec<Storage>, types: impl ExactSizeIterator<Item = (rlx_core::DType, usize)>) {
    fit(dst, types, true)
}

/// `dst[i]` a storage of `types[i]` (dtype, length): a storage that
/// already has that type is kept (and set to zeros when `clear`), any
/// other replaced by zeros.
fn fit(
    dst: &mut Vec<Storage>,
    types: impl ExactSizeIterator<Item = (rlx_core::DType, usize)>,
    clear: bool,
) {
    dst.truncate(types.len());
    for (i, (dtype, n)) in types.enumerate() {
        match dst.get_mut(i) {
            Some(d) if d.dtype() == dtype && d.len() == n => {
                if clear {
                    fill_zero(d)
                }
            }
            Some(d) => *d = Storage::zeros(dtype, n),
            None => dst.push(Storage::zeros(dtype, n)),
        }
    }
}

/// Runs loop `l` on `operands` into its packed result `out`; `body` and
/// `vjp` run the graphs of [`LoopOp::step_graphs`] (a scan's body, an
/// adjoint's body and reverse-mode step, or with residuals only their
/// halves, in `body`). `spine`
/// is `schedule::spine(T, checkpoints)` for a loop with a spine (the steps
/// whose carries a scan records for its adjoint), else empty. `finish`
/// runs the [`Hoisted::finish`](rlx_core::loops::hoist::Hoisted) graph of
/// an adjoint with hoisted products. `bufs` are the run's storages (kept
/// from an earlier call, or empty).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_loop(
    l: &LoopOp,
    body: &mut dyn RunGraph,
    vjp: Option<&mut dyn RunGraph>,
    finish: Option<&mut dyn RunGraph>,
    spine: &[usize],
    operands: &[&Storage],
    out: &mut Storage,
    bufs: &mut LoopBuffers,
) -> Result<()> {
    if spine.len() != l.spine {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!(
                "{}: a spine of {} steps for {}",
                l.name,
                spine.len(),
                l.spine
            ),
        });
    }
    let mut out = Packed::new(out, l.dtype(), l.out_type().shape.numel());
    match (&l.kind, vjp) {
        (LoopKind::Scan, _) => scan(l, body, spine, operands, &mut out, bufs)?,
        (LoopKind::Adjoint { .. }, _) if l.residuals.is_some() => {
            replay(l, body, finish, operands, &mut out, bufs)?
        }
        (LoopKind::Adjoint { .. }, Some(vjp)) => {
            // The schedule's writes are not counted: zeros first.
            out.zeroed()?;
            adjoint(l, body, vjp, operands, &mut out, bufs)?
        }
        (LoopKind::Adjoint { .. }, None) => {
            return Err(Error::InvalidArgument {
                op: "loop",
                message: format!("{}: an adjoint loop needs its reverse-mode step", l.name),
            })
        }
    }
    out.finish(l)
}

/// Per-step element counts of the body's inputs and outputs.
struct Sizes {
    x: Vec<usize>,
    y: Vec<usize>,
    /// Offset of each per-step output's stacked piece in the packed result.
    y_off: Vec<usize>,
    /// Per-step residual sizes. The residuals take one region of the
    /// scan's packed result, step by step (`[T, Σr]`, each step's residuals
    /// next to each other, so that a step writes and reads one contiguous
    /// run): residual `j` of step `s` is at `r_base + s * r_step + r_off[j]`.
    r: Vec<usize>,
    r_off: Vec<usize>,
    r_base: usize,
    r_step: usize,
}

impl Sizes {
    /// Where residual `j` of the step at index `s` starts in the packed result.
    fn residual(&self, j: usize, s: usize) -> usize {
        self.r_base + s * self.r_step + self.r_off[j]
    }
}

fn sizes(l: &LoopOp) -> Sizes {
    let x: Vec<usize> = l.x_types().iter().map(|t| t.shape.numel()).collect();
    let y: Vec<usize> = l.y_types().iter().map(|t| t.shape.numel()).collect();
    let mut off: usize = l.carry_types().iter().map(|t| t.shape.numel()).sum();
    let mut y_off = Vec::with_capacity(y.len());
    for &n in &y {
        y_off.push(off);
        off += n * l.length;
    }
    let r: Vec<usize> = l.residual_types().iter().map(|t| t.shape.numel()).collect();
    let mut r_off = Vec::with_capacity(r.len());
    let mut r_step = 0;
    for &n in &r {
        r_off.push(r_step);
        r_step += n;
    }
    Sizes {
        x,
        y,
        y_off,
        r,
        r_off,
        r_base: off,
        r_step,
    }
}

/// The index into `xs`/`ys` of iteration `t`.
fn index(l: &LoopOp, t: usize) -> usize {
    if l.reverse {
        l.length - 1 - t
    } else {
        t
    }
}

fn scan(
    l: &LoopOp,
    body: &mut dyn RunGraph,
    spine: &[usize],
    operands: &[&Storage],
    out: &mut Packed<'_>,
    bufs: &mut LoopBuffers,
) -> Result<()> {
    let (c, k) = (l.carries, l.xs);
    let sz = sizes(l);
    // Offsets of the spine pieces, after the stacked outputs.
    let mut spine_off: Vec<usize> = Vec::with_capacity(c);
    let mut off = sz.y_off.last().map_or_else(
        || l.carry_types().iter().map(|t| t.shape.numel()).sum(),
        |&o| o + sz.y[sz.y.len() - 1] * l.length,
    );
    for t in l.carry_types() {
        spine_off.push(off);
        off += t.shape.numel() * spine.len();
    }
    let mut next_spine = 0;
    assign(&mut bufs.carry, operands[..c].iter().copied())?;
    zero(
        &mut bufs.xbuf,
        (0..k).map(|j| (operands[c + j].dtype(), sz.x[j])),
    );
    let (graph, _) = l.step_graphs();
    zero(&mut bufs.outs, types_of(graph, graph.outputs()));
    let p = l.ys();
    let LoopBuffers {
        carry,
        xbuf,
        outs,
        spare: kept,
        ..
    } = &mut *bufs;
    // The body's input list, kept empty between steps (and calls) so that
    // its allocation is reused.
    let mut spare: Vec<&Storage> = recycle(std::mem::take(kept));
    for t in 0..l.length {
        while spine.get(next_spine) == Some(&t) {
            for (i, v) in carry.iter().enumerate() {
                out.put(spine_off[i] + next_spine * v.len(), v, 0, v.len())?;
            }
            next_spine += 1;
        }
        let s = index(l, t);
        for j in 0..k {
            copy(&mut xbuf[j], 0, operands[c + j], s * sz.x[j], sz.x[j])?;
        }
        {
            let mut ins = recycle(std::mem::take(&mut spare));
            ins.extend(carry.iter());
            ins.extend(xbuf.iter());
            ins.extend_from_slice(&operands[c + k..]);
            body.run(&ins, outs)?;
            spare = recycle(ins);
        }
        for (j, y) in outs[c..c + p].iter().enumerate() {
            out.put(sz.y_off[j] + s * sz.y[j], y, 0, sz.y[j])?;
        }
        for (j, r) in outs[c + p..].iter().enumerate() {
            out.put(sz.residual(j, s), r, 0, sz.r[j])?;
        }
        for (a, b) in carry.iter_mut().zip(outs.iter_mut()) {
            std::mem::swap(a, b);
        }
    }
    *kept = recycle(spare);
    let mut off = 0;
    for v in carry.iter() {
        out.put(off, v, 0, v.len())?;
        off += v.len();
    }
    Ok(())
}

/// `(dtype, numel)` of nodes `ids` of `g`.
fn types_of<'a>(
    g: &'a rlx_core::Graph,
    ids: &'a [rlx_core::NodeId],
) -> impl ExactSizeIterator<Item = (rlx_core::DType, usize)> + 'a {
    ids.iter().map(move |&o| (g.dtype(o), g.shape(o).numel()))
}

/// The numbers of an adjoint's reverse sweep.
struct Adjoint<'a, 'p> {
    l: &'a LoopOp,
    body: &'a mut dyn RunGraph,
    vjp: &'a mut dyn RunGraph,
    operands: &'a [&'a Storage],
    out: &'a mut Packed<'p>,
    sz: Sizes,
    /// The working carry (`b.carry`), the slots and the step buffers.
    b: &'a mut LoopBuffers,
    /// Offsets of the stacked `x̄s` pieces in the result, per float per-step input.
    xbar_off: Vec<usize>,
    /// For a loop with a spine: whether the first descent is still going on
    /// (its advances are skipped and its stores read the spine), and how
    /// many of its stores have been made.
    descending: bool,
    stores: usize,
}

impl Adjoint<'_, '_> {
    /// Copies spine entry `k` (the carries its scan recorded) into `dst`,
    /// from the scan's packed result: its spine pieces `[K, ..c_i]` follow
    /// `[c(T).., ys..]`.
    fn spine_entry(&self, k: usize, dst: &mut [Storage]) -> Result<()> {
        let packed = self.operands[self.l.body.inputs().len() + self.l.carries + self.l.ys()];
        // `dst` holds one storage per carry, of its size.
        let mut off: usize = dst.iter().map(|d| d.len()).sum();
        off += self.sz.y.iter().map(|n| n * self.l.length).sum::<usize>();
        for d in dst.iter_mut() {
            let n = d.len();
            copy(d, 0, packed, off + k * n, n)?;
            off += self.l.spine * n;
        }
        Ok(())
    }
}

impl Adjoint<'_, '_> {
    fn load_x(&mut self, t: usize) -> Result<()> {
        let (c, s) = (self.l.carries, index(self.l, t));
        for j in 0..self.l.xs {
            let n = self.sz.x[j];
            copy(&mut self.b.xbuf[j], 0, self.operands[c + j], s * n, n)?;
        }
        Ok(())
    }
}

/// The invariant operands of `l`.
fn invariants<'a>(l: &LoopOp, operands: &'a [&'a Storage]) -> &'a [&'a Storage] {
    &operands[l.carries + l.xs..l.body.inputs().len()]
}

impl Sweep for Adjoint<'_, '_> {
    fn restore(&mut self, slot: usize) -> Result<()> {
        for (w, s) in self.b.carry.iter_mut().zip(&self.b.slots[slot]) {
            copy(w, 0, s, 0, s.len())?;
        }
        Ok(())
    }

    fn store(&mut self, slot: usize) -> Result<()> {
        if self.b.slots.len() <= slot {
            self.b.slots.resize_with(slot + 1, Vec::new);
        }
        if self.b.slots[slot].is_empty() {
            // Allocated once, at the first store into this slot.
            self.b.slots[slot] = self.b.carry.clone();
        }
        if self.descending {
            let mut s = std::mem::take(&mut self.b.slots[slot]);
            let r = self.spine_entry(self.stores, &mut s);
            self.b.slots[slot] = s;
            self.stores += 1;
            return r;
        }
        for (s, w) in self.b.slots[slot].iter_mut().zip(&self.b.carry) {
            copy(s, 0, w, 0, w.len())?;
        }
        Ok(())
    }

    fn advance(&mut self, t: usize) -> Result<()> {
        if self.descending {
            return Ok(());
        }
        self.load_x(t)?;
        let mut ins = recycle(std::mem::take(&mut self.b.spare));
        ins.extend(self.b.carry.iter());
        ins.extend(self.b.xbuf.iter());
        ins.extend_from_slice(invariants(self.l, self.operands));
        let r = self.body.run(&ins, &mut self.b.outs);
        self.b.spare = recycle(ins);
        r?;
        for (a, b) in self.b.carry.iter_mut().zip(self.b.outs.iter_mut()) {
            std::mem::swap(a, b);
        }
        Ok(())
    }

    fn reverse_step(&mut self, t: usize) -> Result<()> {
        if self.descending {
            let mut w = std::mem::take(&mut self.b.carry);
            let r = self.spine_entry(self.l.spine - 1, &mut w);
            self.b.carry = w;
            r?;
            self.descending = false;
        }
        let l = self.l;
        let (c, s) = (l.carries, index(l, t));
        let n_in = l.body.inputs().len();
        self.load_x(t)?;
        for (j, yb) in self.b.ybar.iter_mut().enumerate() {
            let n = self.sz.y[j];
            copy(yb, 0, self.operands[n_in + c + j], s * n, n)?;
        }
        {
            let mut ins = recycle(std::mem::take(&mut self.b.spare));
            ins.extend(self.b.carry.iter());
            ins.extend(self.b.xbuf.iter());
            ins.extend_from_slice(invariants(self.l, self.operands));
            ins.extend(self.b.cbar.iter());
            ins.extend(self.b.ybar.iter());
            let r = self.vjp.run(&ins, &mut self.b.vouts);
            self.b.spare = recycle(ins);
            r?;
        }
        take_bars(c, s, &self.xbar_off, None, self.b, self.out).map(drop)
    }
}

/// After a reverse step at index `s` (results in `b.vouts`): the carry
/// cotangents become `b.cbar`, `x̄(s)` goes to `out` at `xbar_off`, and `k̄`
/// is added to `b.kbar` (only the invariants `per_step` marks, when some
/// products were hoisted). Returns where the step's other results (the
/// factors of hoisted products) start in `b.vouts`.
fn take_bars(
    c: usize,
    s: usize,
    xbar_off: &[usize],
    per_step: Option<&[bool]>,
    b: &mut LoopBuffers,
    out: &mut Packed<'_>,
) -> Result<usize> {
    for (a, v) in b.cbar.iter_mut().zip(b.vouts.iter_mut()) {
        std::mem::swap(a, v);
    }
    for (n, &off) in xbar_off.iter().enumerate() {
        let v = &b.vouts[c + n];
        out.put(off + s * v.len(), v, 0, v.len())?;
    }
    let mut next = c + xbar_off.len();
    for (q, acc) in b.kbar.iter_mut().enumerate() {
        if per_step.is_none_or(|p| p[q]) {
            add_into(acc, &b.vouts[next])?;
            next += 1;
        }
    }
    Ok(next)
}

fn adjoint(
    l: &LoopOp,
    body: &mut dyn RunGraph,
    vjp: &mut dyn RunGraph,
    operands: &[&Storage],
    out: &mut Packed<'_>,
    bufs: &mut LoopBuffers,
) -> Result<()> {
    let LoopKind::Adjoint { vjp: vg, .. } = &l.kind else {
        unreachable!("called for adjoints")
    };
    let (sz, xbar_off) = start_reverse(l, vg, operands, bufs)?;
    assign(&mut bufs.carry, operands[..l.carries].iter().copied())?;
    zero(&mut bufs.outs, types_of(&l.body, l.body.outputs()));
    let mut a = Adjoint {
        l,
        body,
        vjp,
        operands,
        out,
        b: bufs,
        xbar_off,
        sz,
        descending: l.spine > 0,
        stores: 0,
    };
    revolve(l.length, l.checkpoints, &mut a)?;
    end_reverse(l, a.b, a.out)
}

/// Sets up the buffers of an adjoint's reverse sweep whose reverse step is
/// `step`: `c̄(T)` in `cbar`, zero `x`, `ȳ`, step results and `k̄`. Gives
/// the step sizes and the offsets of the `x̄s` pieces in the result.
fn start_reverse(
    l: &LoopOp,
    step: &rlx_core::Graph,
    operands: &[&Storage],
    bufs: &mut LoopBuffers,
) -> Result<(Sizes, Vec<usize>)> {
    let (c, k) = (l.carries, l.xs);
    let n_in = l.body.inputs().len();
    let sz = sizes(l);
    let seg: Vec<usize> = l.segments().iter().map(|t| t.shape.numel()).collect();
    let fx = l.float_xs().len();
    let mut xbar_off = Vec::with_capacity(fx);
    let mut off: usize = seg[..c].iter().sum();
    for n in &seg[c..c + fx] {
        xbar_off.push(off);
        off += n;
    }
    assign(&mut bufs.cbar, operands[n_in..n_in + c].iter().copied())?;
    zero(
        &mut bufs.xbuf,
        (0..k).map(|j| (operands[c + j].dtype(), sz.x[j])),
    );
    zero(
        &mut bufs.ybar,
        l.y_types().iter().map(|t| (t.dtype, t.shape.numel())),
    );
    zero(&mut bufs.vouts, types_of(step, step.outputs()));
    zero(
        &mut bufs.kbar,
        seg[c + fx..].iter().map(|&n| (l.dtype(), n)),
    );
    Ok((sz, xbar_off))
}

/// Writes `c̄(0)` and `k̄` into an adjoint's result after its sweep.
fn end_reverse(l: &LoopOp, b: &LoopBuffers, out: &mut Packed<'_>) -> Result<()> {
    let mut off = 0;
    for v in &b.cbar {
        out.put(off, v, 0, v.len())?;
        off += v.len();
    }
    let seg: Vec<usize> = l.segments().iter().map(|t| t.shape.numel()).collect();
    let mut off: usize = seg[..l.carries + l.float_xs().len()].iter().sum();
    for v in &b.kbar {
        out.put(off, v, 0, v.len())?;
        off += v.len();
    }
    Ok(())
}

/// `v` emptied, with its allocation kept for references of another
/// lifetime: the collect of a `Vec`'s own iterator into elements of the
/// same layout reuses the buffer, so a loop can refill one list of
/// borrowed inputs per step without allocating.
fn recycle<'b, T>(mut v: Vec<&T>) -> Vec<&'b T> {
    v.clear();
    v.into_iter()
        .map(|_| -> &'b T { unreachable!("emptied") })
        .collect()
}

/// Runs a graph with the reference interpreter.
pub(crate) struct Interpreted<'a>(pub(crate) &'a rlx_core::Graph);

impl RunGraph for Interpreted<'_> {
    fn run(&mut self, inputs: &[&Storage], outputs: &mut [Storage]) -> Result<()> {
        let flat = self.0.inline_custom()?;
        let res = super::run_storages(&flat, inputs)?;
        for (o, r) in outputs.iter_mut().zip(res) {
            *o = r;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_core::autodiff::value_and_grad;
    use rlx_core::{DType, Graph, LoopOp, Op, Shape};

    /// `u' = tanh(u·w) + x`, `y = u·u` over `steps` steps (carry `u: [5]`,
    /// per-step `x`, invariant `w`), output `Σ ys + Σ u(T)`; its value and
    /// gradient with the scan and adjoint fused (residuals for a budget of
    /// `steps`, a spine and checkpoints below).
    fn fused(steps: usize, budget: usize) -> Graph {
        let f = |g: &mut Graph, n: &str, s: &[usize]| g.input(n, Shape::from(s), DType::F64);
        let mut b = Graph::new();
        let (u, x, w) = (
            f(&mut b, "u", &[5]),
            f(&mut b, "x", &[5]),
            f(&mut b, "w", &[5]),
        );
        let uw = b.mul(u, w).unwrap();
        let th = b.tanh(uw).unwrap();
        let u2 = b.add(th, x).unwrap();
        let y = b.mul(u, u).unwrap();
        b.set_outputs(vec![u2, y]);
        let l = LoopOp::scan("test", b, 1, 1, steps, false, Some(budget)).unwrap();
        fused_value_and_grad(l)
    }

    /// The value and gradient (in every input) of `Σ ys + Σ c(T)` for a
    /// scan `l` with one carry, one per-step input and one invariant (the
    /// body's inputs, in that order), with the scan and its adjoint fused.
    pub(super) fn fused_value_and_grad(l: rlx_core::LoopRef) -> Graph {
        let body = l.body.inputs().to_vec();
        let mut g = Graph::new();
        let mut ins = Vec::new();
        for (k, inp) in body.iter().enumerate() {
            let ty = l.body.ty(inp.node);
            let mut dims = ty.shape.dims().to_vec();
            if k == 1 {
                dims.insert(0, l.length);
            }
            ins.push(g.input(&inp.name, Shape::from(&dims[..]), ty.dtype));
        }
        let p = g.looped(l.clone(), &ins).unwrap();
        let parts = rlx_core::loops::unpack(&mut g, p, &l.segments()).unwrap();
        let (a, c) = (g.sum_all(parts[0]).unwrap(), g.sum_all(parts[1]).unwrap());
        let out = g.add(a, c).unwrap();
        g.set_outputs(vec![out]);
        let vg = value_and_grad(&g, &[0, 1, 2]).unwrap();
        rlx_core::loops::spine::fuse_spines(&vg)
            .unwrap()
            .expect("a scan and its adjoint")
            .0
    }

    #[test]
    fn a_result_written_into_its_room_has_the_bits_of_one_overwritten_in_place() {
        // Each loop node of the fused graphs (a scan recording residuals or
        // a spine, its replay or checkpointed adjoint) runs on the operands
        // the interpreter gave it, once into a storage of its length filled
        // with NaNs (overwritten in place: the general path) and once into
        // an empty storage whose room holds NaNs: an element the loop did
        // not write would show as a NaN. Both give the interpreter's bits.
        let steps = 7;
        for budget in [steps, 2] {
            let g = fused(steps, budget);
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
            super::super::run_inspecting(&g, &refs, &mut |i, v| {
                vals[i] = Some(v.clone());
                Ok(())
            })
            .unwrap();
            let mut loops = 0;
            for (i, node) in g.nodes().iter().enumerate() {
                let Op::Loop(l) = &node.op else { continue };
                loops += 1;
                let operands: Vec<&Storage> = node
                    .inputs
                    .iter()
                    .map(|j| vals[j.index()].as_ref().expect("a live operand"))
                    .collect();
                let want = vals[i].as_ref().expect("a live loop");
                let n = want.len();
                let run = |out: &mut Storage| {
                    let (body, vjp) = l.step_graphs();
                    let mut body = Interpreted(body);
                    let mut vjp = vjp.map(Interpreted);
                    let hoisted = l.residuals.as_ref().and_then(|r| r.hoisted.as_ref());
                    let mut finish = hoisted.map(|h| Interpreted(&h.finish));
                    let spine = match l.spine {
                        0 => vec![],
                        _ => rlx_core::loops::schedule::spine(l.length, l.checkpoints),
                    };
                    run_loop(
                        l,
                        &mut body,
                        vjp.as_mut().map(|v| v as &mut dyn RunGraph),
                        finish.as_mut().map(|f| f as &mut dyn RunGraph),
                        &spine,
                        &operands,
                        out,
                        &mut LoopBuffers::default(),
                    )
                    .unwrap();
                };
                let mut in_place = Storage::F64(vec![f64::NAN; n]);
                run(&mut in_place);
                let mut roomy = vec![f64::NAN; n + 3];
                roomy.clear();
                let mut room = Storage::F64(roomy);
                run(&mut room);
                let bits = |s: &Storage| -> Vec<u64> {
                    assert_eq!(s.dtype(), DType::F64);
                    s.to_f64_vec().iter().map(|x| x.to_bits()).collect()
                };
                assert_eq!(bits(&in_place), bits(want), "{l}");
                assert_eq!(bits(&room), bits(want), "{l}");
            }
            assert_eq!(loops, 2, "a scan and its adjoint");
        }
    }
}
