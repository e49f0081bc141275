//! Gather (`take` along an axis) and its transpose, scatter-add.
//!
//! With `x` seen as `[outer, size, inner]` around `axis` and the indices
//! flattened to `[count]`: `gather[o, i, q] = x[o, idx[i], q]`, and
//! `scatter_add = operand` with `out[o, idx[i], q] += updates[o, i, q]`
//! (repeated indices accumulate). Every index is checked before anything is
//! written; negative indices are errors, as are indices `>= size`.

use rlx_core::{Error, Result};

use super::iter::split_at_axis;
use super::operand::{dtype_error, same_dtype, Operand};
use super::scalar::Float;
use crate::storage::Storage;

/// The indices, checked to lie in `0..size`; `sorted`: they are known
/// never to decrease (then the first and last are checked).
fn indices<'a>(
    op: &'static str,
    axis: usize,
    size: usize,
    idx: Operand<'a>,
    sorted: impl FnOnce(&[i64]) -> bool,
) -> Result<&'a [i64]> {
    let Storage::I64(ix) = idx.storage else {
        return Err(Error::UnsupportedDType {
            op,
            dtype: idx.storage.dtype(),
            expected: "i64 indices",
        });
    };
    let in_range = |i: i64| i >= 0 && (i as u64) < size as u64;
    let ends = [ix.first(), ix.last()];
    if sorted(ix) && ends.iter().flatten().all(|&&i| in_range(i)) {
        return Ok(ix);
    }
    if let Some(&bad) = ix.iter().find(|&&i| !in_range(i)) {
        return Err(Error::IndexOutOfRange {
            op,
            index: bad,
            axis,
            size,
        });
    }
    Ok(ix)
}

fn check_axis(op: &'static str, axis: usize, x: Operand<'_>) -> Result<()> {
    if axis >= x.dims().len() {
        return Err(Error::InvalidArgument {
            op,
            message: format!("axis {axis} is out of range for shape {}", x.shape),
        });
    }
    Ok(())
}

pub(super) fn gather(
    axis: usize,
    x: Operand<'_>,
    idx: Operand<'_>,
    out: &mut Storage,
) -> Result<()> {
    check_axis("gather", axis, x)?;
    let (outer, size, inner) = split_at_axis(x.dims(), axis);
    let ix = indices("gather", axis, size, idx, |_| false)?;
    let count = ix.len();
    let err = dtype_error("gather", x.storage.dtype(), out.dtype());
    same_dtype!(Err(err); (x.storage, out) => |v, o| {
        // An empty result (indices checked above): `outer` may be huge.
        if o.is_empty() {
            return Ok(());
        }
        for b in 0..outer {
            if inner == 1 {
                // Element by element (a sparse Jacobian's decompression):
                // a copy call per element would dominate.
                let (v, o) = (&v[b * size..(b + 1) * size], &mut o[b * count..(b + 1) * count]);
                for (d, &j) in o.iter_mut().zip(ix) {
                    *d = v[j as usize];
                }
                continue;
            }
            for (i, &j) in ix.iter().enumerate() {
                let src = (b * size + j as usize) * inner;
                let dst = (b * count + i) * inner;
                o[dst..dst + inner].copy_from_slice(&v[src..src + inner]);
            }
        }
        Ok(())
    })
}

/// A checked index: a position along the scattered axis.
pub(crate) trait Position: Copy + PartialEq {
    fn at(self) -> usize;
}

impl Position for i64 {
    #[inline(always)]
    fn at(self) -> usize {
        self as usize
    }
}

impl Position for u32 {
    #[inline(always)]
    fn at(self) -> usize {
        self as usize
    }
}

/// What is known of the order of a scatter's indices. Each element gets
/// its updates in the order of the indices whatever the order, so every
/// order gives the same bits; the known ones only go faster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Nothing.
    Any,
    /// The indices never decrease.
    Sorted,
    /// Element indices (`inner = outer = 1`) in `s` (2 to 4) contiguous
    /// parts of equal length that touch disjoint elements (the three
    /// coordinates of a rerolled pair loop's particles): the parts are
    /// added in lock-step, each part's running sum in its own register,
    /// so that their additions overlap.
    Disjoint(usize),
    /// As `Disjoint`, with most indices differing from the one before them
    /// in their part (the second particle of each pair): a running sum
    /// would be stored and reloaded at nearly every step, so the updates
    /// are added in place, the parts still in lock-step.
    Apart(usize),
}

impl Order {
    /// The order of checked element indices `ix` into `0..size`:
    /// `Disjoint(parts)` (or `Apart(parts)`) if they split so, else
    /// `Sorted` or `Any`.
    pub(crate) fn of(ix: &[u32], size: usize, parts: usize) -> Order {
        if sorted(ix) {
            return Order::Sorted;
        }
        if !(2..=4).contains(&parts) || ix.is_empty() || ix.len() % parts != 0 {
            return Order::Any;
        }
        let len = ix.len() / parts;
        let mut part_of = vec![u8::MAX; size];
        for (k, &j) in ix.iter().enumerate() {
            let part = (k / len) as u8;
            let p = &mut part_of[j as usize];
            if *p != u8::MAX && *p != part {
                return Order::Any;
            }
            *p = part;
        }
        // Steps where a part's index changes, against those where it
        // stays (a run a running sum adds up in a register).
        let changes = ix
            .chunks_exact(len)
            .map(|p| p.windows(2).filter(|w| w[0] != w[1]).count())
            .sum::<usize>();
        if 2 * changes > ix.len() {
            Order::Apart(parts)
        } else {
            Order::Disjoint(parts)
        }
    }
}

/// `o = x`, then `upd` (laid out `[outer, count, inner]`) added into `o`
/// (`[outer, size, inner]`) at `ix`, known to come in `order`. Every index
/// must lie in `0..size`.
fn copy_and_scatter<T: Copy, I: Position>(
    split: (usize, usize, usize),
    order: Order,
    ix: &[I],
    x: &[T],
    upd: &[T],
    o: &mut [T],
    add: impl Fn(T, T) -> T,
) {
    // Nothing to write (`outer` may be huge then).
    if o.is_empty() {
        return;
    }
    // Sorted element indices (a sparse derivative's computed entries among
    // its constant ones): one pass in cache-sized chunks, each copied and
    // then added into while it is in the cache. Equal indices are
    // adjacent, so they accumulate in the same order as below.
    if split.2 == 1 && order == Order::Sorted {
        let (outer, size, _) = split;
        let count = ix.len();
        for b in 0..outer {
            let (x, o) = (
                &x[b * size..(b + 1) * size],
                &mut o[b * size..(b + 1) * size],
            );
            let upd = &upd[b * count..(b + 1) * count];
            let mut k = 0;
            for lo in (0..size).step_by(SCATTER_CHUNK) {
                let hi = (lo + SCATTER_CHUNK).min(size);
                o[lo..hi].copy_from_slice(&x[lo..hi]);
                while k < count && ix[k].at() < hi {
                    let j = ix[k].at();
                    o[j] = add(o[j], upd[k]);
                    k += 1;
                }
            }
        }
        return;
    }
    o.copy_from_slice(x);
    match order {
        Order::Disjoint(2) if split.0 == 1 && split.2 == 1 => in_parts::<T, I, 2>(ix, upd, o, add),
        Order::Disjoint(3) if split.0 == 1 && split.2 == 1 => in_parts::<T, I, 3>(ix, upd, o, add),
        Order::Disjoint(4) if split.0 == 1 && split.2 == 1 => in_parts::<T, I, 4>(ix, upd, o, add),
        Order::Apart(2) if split.0 == 1 && split.2 == 1 => apart::<T, I, 2>(ix, upd, o, add),
        Order::Apart(3) if split.0 == 1 && split.2 == 1 => apart::<T, I, 3>(ix, upd, o, add),
        Order::Apart(4) if split.0 == 1 && split.2 == 1 => apart::<T, I, 4>(ix, upd, o, add),
        _ => scatter(split, ix, upd, o, add),
    }
}

/// The `S` equal parts of `ix` and of `upd` (see [`Order::Disjoint`]),
/// and their length.
fn split_parts<'a, T, I, const S: usize>(
    ix: &'a [I],
    upd: &'a [T],
) -> (usize, [&'a [I]; S], [&'a [T]; S]) {
    let len = ix.len() / S;
    (
        len,
        std::array::from_fn(|s| &ix[s * len..(s + 1) * len]),
        std::array::from_fn(|s| &upd[s * len..(s + 1) * len]),
    )
}

/// Adds element updates `upd` into `o` at `ix`, which split into `S`
/// contiguous parts of equal length touching disjoint elements, in
/// lock-step: step `t` adds update `t` of every part, each part summing a
/// run of equal indices in its own register. Every element still gets its
/// updates in order, from one part, so the bits are [`scatter`]'s.
fn in_parts<T: Copy, I: Position, const S: usize>(
    ix: &[I],
    upd: &[T],
    o: &mut [T],
    add: impl Fn(T, T) -> T,
) {
    let (len, ix, upd) = split_parts::<T, I, S>(ix, upd);
    let mut at: [usize; S] = std::array::from_fn(|s| ix[s][0].at());
    let mut acc: [T; S] = std::array::from_fn(|s| o[at[s]]);
    for t in 0..len {
        for s in 0..S {
            let j = ix[s][t].at();
            if j != at[s] {
                o[at[s]] = acc[s];
                at[s] = j;
                acc[s] = o[j];
            }
            acc[s] = add(acc[s], upd[s][t]);
        }
    }
    for s in 0..S {
        o[at[s]] = acc[s];
    }
}

/// Adds element updates `upd` into `o` at `ix`, which split into `S`
/// contiguous parts of equal length touching disjoint elements, in
/// lock-step, each update added in place (see [`Order::Apart`]). Every
/// element gets its updates in order, from one part, so the bits are
/// [`scatter`]'s.
fn apart<T: Copy, I: Position, const S: usize>(
    ix: &[I],
    upd: &[T],
    o: &mut [T],
    add: impl Fn(T, T) -> T,
) {
    let (len, ix, upd) = split_parts::<T, I, S>(ix, upd);
    for t in 0..len {
        for s in 0..S {
            let j = ix[s][t].at();
            o[j] = add(o[j], upd[s][t]);
        }
    }
}

/// Whether `ix` never decreases (one branch-free pass).
pub(crate) fn sorted<I: Copy + PartialOrd>(ix: &[I]) -> bool {
    ix.windows(2).fold(true, |ok, w| ok & (w[0] <= w[1]))
}

/// Elements per chunk of [`copy_and_scatter`]'s sorted pass (32 KiB of
/// `f64`: within the L1 cache).
const SCATTER_CHUNK: usize = 4096;

/// Adds `upd` (laid out `[outer, count, inner]`) into `o` (`[outer, size, inner]`).
fn scatter<T: Copy, I: Position>(
    (outer, size, inner): (usize, usize, usize),
    ix: &[I],
    upd: &[T],
    o: &mut [T],
    add: impl Fn(T, T) -> T,
) {
    let count = ix.len();
    // Nothing to add (`outer` may be huge when the updates are empty).
    if upd.is_empty() {
        return;
    }
    if inner == 1 {
        // Element scatters (a gradient through gathered scalars): one
        // index per update, no per-element offset arithmetic, and a run of
        // equal indices summed in a register (the same additions in the
        // same order, without a store and reload between them).
        //
        // A chunk's indices and updates are read before any of its stores,
        // so that no load of them waits behind a store it only seems to
        // depend on (a store to an address equal in its low 12 bits); a run
        // split by a chunk's end is stored and reloaded, the same value.
        const CHUNK: usize = 16;
        for (ob, ub) in o.chunks_exact_mut(size).zip(upd.chunks_exact(count)) {
            for (ic, uc) in ix.chunks(CHUNK).zip(ub.chunks(CHUNK)) {
                let n = ic.len();
                let mut js = [0usize; CHUNK];
                let mut us = [uc[0]; CHUNK];
                for t in 0..n {
                    js[t] = ic[t].at();
                    us[t] = uc[t];
                }
                let mut k = 0;
                while k < n {
                    let j = js[k];
                    let mut acc = ob[j];
                    while k < n && js[k] == j {
                        acc = add(acc, us[k]);
                        k += 1;
                    }
                    ob[j] = acc;
                }
            }
        }
        return;
    }
    for b in 0..outer {
        for (i, &j) in ix.iter().enumerate() {
            let dst = (b * size + j.at()) * inner;
            let src = (b * count + i) * inner;
            for q in 0..inner {
                o[dst + q] = add(o[dst + q], upd[src + q]);
            }
        }
    }
}

fn float_add<T: Float>(a: T, b: T) -> T {
    T::store(a.load() + b.load())
}

pub(super) fn scatter_add(
    axis: usize,
    operand: Operand<'_>,
    idx: Operand<'_>,
    updates: Operand<'_>,
    out: &mut Storage,
) -> Result<()> {
    check_axis("scatter_add", axis, operand)?;
    let split = split_at_axis(operand.dims(), axis);
    // Sorted indices (checked once, here) are added in one pass.
    let mut order = Order::Any;
    let ix = indices("scatter_add", axis, split.1, idx, |ix| {
        let is_sorted = sorted(ix);
        if is_sorted {
            order = Order::Sorted;
        }
        is_sorted
    })?;
    if updates.storage.len() != split.0 * ix.len() * split.2 {
        return Err(Error::ShapeMismatch {
            op: "scatter_add",
            lhs: operand.shape.clone(),
            rhs: updates.shape.clone(),
            expected: format!("updates shaped like a gather of {} indices", ix.len()),
        });
    }
    scatter_add_checked(split, order, ix, operand.storage, updates.storage, out)
}

/// [`scatter_add`] with indices already checked to lie in `0..split.1`
/// (and known to come in `order`), `updates`
/// holding `split.0 · ix.len() · split.2` elements: the step of a
/// scatter-add whose indices are constants, checked when the plan was
/// built (`compile::steps::scatter`). The same additions in the same order as
/// [`scatter_add`], so the same bits.
pub(crate) fn scatter_add_checked<I: Position>(
    split: (usize, usize, usize),
    order: Order,
    ix: &[I],
    operand: &Storage,
    updates: &Storage,
    out: &mut Storage,
) -> Result<()> {
    let err = dtype_error("scatter_add", operand.dtype(), updates.dtype());
    match (operand, updates, out) {
        (Storage::F32(x), Storage::F32(u), Storage::F32(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, float_add);
        }
        (Storage::F64(x), Storage::F64(u), Storage::F64(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, float_add);
        }
        (Storage::F16(x), Storage::F16(u), Storage::F16(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, float_add);
        }
        (Storage::BF16(x), Storage::BF16(u), Storage::BF16(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, float_add);
        }
        (Storage::I64(x), Storage::I64(u), Storage::I64(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, i64::wrapping_add);
        }
        // Booleans add as logical or (saturating 0/1 arithmetic).
        (Storage::Bool(x), Storage::Bool(u), Storage::Bool(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, |a, b| a || b);
        }
        (Storage::C32(x), Storage::C32(u), Storage::C32(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, |a, b| a + b);
        }
        (Storage::C64(x), Storage::C64(u), Storage::C64(o)) => {
            copy_and_scatter(split, order, ix, x, u, o, |a, b| a + b);
        }
        _ => return Err(err),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `copy_and_scatter` of `(parts, ix)` (element indices into 0..size)
    /// under `order`, with updates whose sums depend on their order.
    fn scatter_under(order: Order, ix: &[u32], size: usize) -> Vec<u64> {
        let x: Vec<f64> = (0..size).map(|i| 1.0 + i as f64 * 1e-3).collect();
        let upd: Vec<f64> = (0..ix.len())
            .map(|k| (k as f64 * 0.731).sin() * 10f64.powi((k % 7) as i32 - 3))
            .collect();
        let mut o = vec![0.0; size];
        copy_and_scatter((1, size, 1), order, ix, &x, &upd, &mut o, |a, b| a + b);
        o.into_iter().map(f64::to_bits).collect()
    }

    #[test]
    fn every_known_order_gives_the_bits_of_the_plain_scatter() {
        // Three coordinates of 8 particles: pairs (i, j), i < j, by i:
        // the first particles come in runs, the second ones apart.
        let pairs: Vec<(u32, u32)> = (0..8)
            .flat_map(|i| (i + 1..8).map(move |j| (i, j)))
            .collect();
        for take in [|p: (u32, u32)| p.0, |p: (u32, u32)| p.1] {
            let ix: Vec<u32> = (0..3)
                .flat_map(|k| pairs.iter().map(move |&p| 3 * take(p) + k))
                .collect();
            let order = Order::of(&ix, 24, 3);
            let want = scatter_under(Order::Any, &ix, 24);
            assert_eq!(scatter_under(order, &ix, 24), want, "{order:?}");
            for other in [Order::Disjoint(3), Order::Apart(3)] {
                assert_eq!(scatter_under(other, &ix, 24), want, "{other:?}");
            }
        }
        let runs: Vec<u32> = (0..3)
            .flat_map(|k| pairs.iter().map(move |&p| 3 * p.0 + k))
            .collect();
        let apart: Vec<u32> = (0..3)
            .flat_map(|k| pairs.iter().map(move |&p| 3 * p.1 + k))
            .collect();
        assert_eq!(Order::of(&runs, 24, 3), Order::Disjoint(3));
        assert_eq!(Order::of(&apart, 24, 3), Order::Apart(3));
    }

    #[test]
    fn the_chunked_element_scatter_adds_in_index_order() {
        // Runs of equal indices of every length, some across the chunks'
        // ends, and scattered ones; against one addition at a time.
        let size = 37;
        for len in [1usize, 15, 16, 17, 31, 32, 33, 100, 1000] {
            let ix: Vec<u32> = (0..len as u32)
                .map(|k| {
                    if k % 23 < 9 {
                        (k / 23) % size as u32
                    } else {
                        (k * 7 + 3) % size as u32
                    }
                })
                .collect();
            let upd: Vec<f64> = (0..len)
                .map(|k| (k as f64 * 0.731).sin() * 10f64.powi((k % 7) as i32 - 3))
                .collect();
            let x: Vec<f64> = (0..size).map(|i| 1.0 + i as f64 * 1e-3).collect();
            let mut want = x.clone();
            for (&j, &u) in ix.iter().zip(&upd) {
                want[j as usize] += u;
            }
            let mut got = vec![0.0; size];
            copy_and_scatter((1, size, 1), Order::Any, &ix, &x, &upd, &mut got, |a, b| {
                a + b
            });
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{len} updates");
        }
    }
}
