//! Loads and stores of fused loops: leaves gathered into registers
//! (contiguous, splat or through strides), registers written to targets
//! (contiguous, or scattered through strides into the window of a concat
//! or transpose the value is placed in).

use half::{bf16, f16};

use crate::compile::base::env::Val;
use crate::compile::base::parallel::RawTarget;
use crate::compile::base::regs::{reg, reg_mut, Reg, Registers};
use crate::storage::Storage;

/// How a leaf operand maps onto the chain's output elements.
#[derive(Clone, Debug)]
pub(crate) enum Access {
    /// Same shape as the output: element `i` is element `i`.
    Contig,
    /// One element, broadcast everywhere (loaded once per call). Only
    /// lane 0 of its register is filled unless `whole`: the ops that read
    /// it as a block (compare, select, cast) need every lane, arithmetic
    /// reads it as a scalar.
    Splat { whole: bool },
    /// NumPy broadcast: `dims` are the output dims, `strides` the leaf's
    /// element strides per output axis (0 on broadcast axes).
    Broadcast {
        dims: Vec<usize>,
        strides: Vec<usize>,
    },
    /// Element `i` is element `idx[i]` of the leaf (a vector): a gather
    /// with constant indices, checked when the plan was built.
    Indexed(std::sync::Arc<[u32]>),
}

/// An operand from outside the chain.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub(crate) val: Val,
    /// Element of `val` where the leaf starts (a slice read in place).
    pub(crate) off: usize,
    pub(crate) access: Access,
    /// The register it is loaded into; `None` for a leaf read in place.
    pub(crate) reg: Option<Reg>,
}

/// Where a fused loop writes a value placed in a window of another
/// value's storage: element `i` of the loop (a multi-index over `dims`,
/// the loop's dims with axes merged) goes to `off + Σ i_d·strides[d]`.
#[derive(Clone, Debug)]
pub(crate) struct Scatter {
    pub(crate) off: usize,
    pub(crate) dims: Vec<usize>,
    pub(crate) strides: Vec<usize>,
}

/// `out[k] = f(src[ix[k]])`, the block of an indexed leaf. Out of line:
/// inlined into [`load`] (one large function over every type and access),
/// the loop reloaded its three pointers from the stack at every element;
/// here they stay in registers, and four elements a step keep four loads
/// in flight (a rerolled pair loop gathers its particles' coordinates so,
/// 12 096 elements a call for 64 particles).
#[inline(never)]
fn gather_indexed<S: Copy, T: Copy>(src: &[S], ix: &[u32], out: &mut [T], f: impl Fn(S) -> T) {
    let mut outs = out.chunks_exact_mut(4);
    let mut ixs = ix.chunks_exact(4);
    for (o, i) in outs.by_ref().zip(ixs.by_ref()) {
        let v = [
            src[i[0] as usize],
            src[i[1] as usize],
            src[i[2] as usize],
            src[i[3] as usize],
        ];
        for (o, v) in o.iter_mut().zip(v) {
            *o = f(v);
        }
    }
    for (o, &j) in outs.into_remainder().iter_mut().zip(ixs.remainder()) {
        *o = f(src[j as usize]);
    }
}

/// Copies `src[pos(i)]` for the block `start..start + len` into `out`,
/// converting each element with `f`; `copy` converts a contiguous run
/// (a `memcpy` when the types are the same).
#[inline]
fn gather<S: Copy, T: Copy>(
    src: &[S],
    access: &Access,
    start: usize,
    out: &mut [T],
    idx: &mut [usize],
    f: impl Fn(S) -> T,
    copy: impl Fn(&mut [T], &[S]),
) {
    match access {
        Access::Contig => {
            let n = out.len();
            copy(out, &src[start..start + n]);
        }
        Access::Splat { .. } => {
            out.fill(f(src[0]));
        }
        Access::Indexed(ix) => {
            let n = out.len();
            gather_indexed(src, &ix[start..start + n], out, f);
        }
        Access::Broadcast { dims, strides } if short_rows(dims) => {
            let r = strides.len();
            let (s_row, s_in) = (strides[r - 2], strides[r - 1]);
            macro_rules! rows {
                ($n:literal) => {
                    for_row_groups::<$n>(dims, strides, start, out.len(), |done, off, count| {
                        if count == 0 {
                            out[done] = f(src[off]);
                            return;
                        }
                        let row = |j: usize| -> [T; $n] {
                            std::array::from_fn(|k| f(src[off + j * s_row + k * s_in]))
                        };
                        let whole = &mut out[done..done + count * $n];
                        // Four rows a store run where the pattern allows:
                        // wide stores instead of one per element.
                        let mut quads = whole.chunks_exact_mut(4 * $n);
                        if s_row == 0 {
                            // The same row repeated (`x: [n, 1, 3]` in `[n, n, 3]`).
                            let row = row(0);
                            let mut quad = [row[0]; 4 * $n];
                            quad.chunks_exact_mut($n)
                                .for_each(|q| q.copy_from_slice(&row));
                            quads.by_ref().for_each(|o| o.copy_from_slice(&quad));
                            let rest = quads.into_remainder().chunks_exact_mut($n);
                            rest.for_each(|o| o.copy_from_slice(&row));
                            return;
                        }
                        if s_in == 0 && s_row == 1 {
                            // One element per row, repeated (`y: [n, m, 1]`
                            // in `[n, m, 3]`).
                            let col = &src[off..off + count];
                            let mut fours = col.chunks_exact(4);
                            for (o, c) in quads.by_ref().zip(fours.by_ref()) {
                                let quad: [T; 4 * $n] = std::array::from_fn(|k| f(c[k / $n]));
                                o.copy_from_slice(&quad);
                            }
                            let rest = quads.into_remainder().chunks_exact_mut($n);
                            rest.zip(fours.remainder()).for_each(|(o, &v)| o.fill(f(v)));
                            return;
                        }
                        let out = whole.chunks_exact_mut($n);
                        if s_in == 0 {
                            // One element per row, repeated (`y: [n, m, 1]`
                            // in `[n, m, 3]`).
                            let col = src[off..].iter().step_by(s_row);
                            out.zip(col).for_each(|(o, &v)| o.fill(f(v)));
                        } else {
                            out.enumerate()
                                .for_each(|(j, o)| o.copy_from_slice(&row(j)));
                        }
                    })
                };
            }
            match dims[r - 1] {
                1 => rows!(1),
                2 => rows!(2),
                3 => rows!(3),
                4 => rows!(4),
                _ => unreachable!("short rows have 1 to SHORT_ROW elements"),
            }
        }
        Access::Broadcast { dims, strides } => {
            let s_in = strides[strides.len() - 1];
            for_runs(dims, strides, start, out.len(), idx, |done, off, run| {
                let dst = &mut out[done..done + run];
                if s_in == 0 {
                    let v = src[off];
                    dst.iter_mut().for_each(|o| *o = f(v));
                } else if s_in == 1 {
                    copy(dst, &src[off..off + run]);
                } else if run < 8 {
                    // Short runs (rows of 3 in the LJ gradient's loops): the
                    // sub-slice below would cost more than it saves.
                    for (j, o) in dst.iter_mut().enumerate() {
                        *o = f(src[off + j * s_in]);
                    }
                } else {
                    // One bounds check per run, not per element.
                    let src = &src[off..=off + (run - 1) * s_in];
                    for (j, o) in dst.iter_mut().enumerate() {
                        // SAFETY: `j < run`, so `j · s_in < src.len()`.
                        *o = f(unsafe { *src.get_unchecked(j * s_in) });
                    }
                }
            });
        }
    }
}

/// Walks the elements `start..start + len` of a row-major loop over
/// `dims` whose element `i` (a multi-index) sits at `Σ i_d·strides[d]`, in
/// runs along the innermost axis: `f(done, off, run)` gets `run`
/// consecutive elements from block position `done`, the first at `off`,
/// the others `strides[last]` apart. Inlined, so that `f` is too: runs
/// can be a few elements long (a `[n, n, 3]` broadcast reads rows of 3),
/// so the offset is carried from run to run like an odometer (one add per
/// run, one more per wrapped axis) instead of recomputed from the
/// multi-index.
#[inline(always)]
pub(crate) fn for_runs(
    dims: &[usize],
    strides: &[usize],
    start: usize,
    len: usize,
    idx: &mut [usize],
    mut f: impl FnMut(usize, usize, usize),
) {
    if len == 0 {
        return;
    }
    let r = dims.len();
    let idx = &mut idx[..r];
    // Multi-index and offset of `start`.
    let mut rem = start;
    let mut off = 0;
    for d in (0..r).rev() {
        idx[d] = rem % dims[d];
        rem /= dims[d];
        off += idx[d] * strides[d];
    }
    let (inner, s_in) = (dims[r - 1], strides[r - 1]);
    // The first run may start mid-row; every later one starts a row.
    let mut run = (inner - idx[r - 1]).min(len);
    let mut done = 0;
    loop {
        f(done, off, run);
        done += run;
        if done >= len {
            break;
        }
        // Wrap to the start of the next row: back along the innermost
        // axis, then carry into the outer axes.
        // (`done < len` means the run ended its row, and a rank-1 loop
        // has one row.)
        debug_assert!(r > 1 && idx[r - 1] + run == inner);
        off -= idx[r - 1] * s_in;
        idx[r - 1] = 0;
        let mut d = r - 1;
        loop {
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < dims[d] || d == 0 {
                break;
            }
            off -= dims[d] * strides[d];
            idx[d] = 0;
        }
        run = inner.min(len - done);
    }
}

/// Whether a loop over `dims` walks rows (its innermost axis) of at most
/// [`SHORT_ROW`] elements, which [`for_row_groups`] takes a few at a time:
/// the `[n, 1, 3]` operand of an `[n, n, 3]` broadcast, a sum over the
/// last or the middle axis of `[n, n, 3]`.
pub(crate) fn short_rows(dims: &[usize]) -> bool {
    let r = dims.len();
    r >= 2 && dims[r - 1] <= SHORT_ROW
}

/// The longest row [`for_row_groups`] takes.
pub(crate) const SHORT_ROW: usize = 4;

/// Walks the elements `start..start + len` of a loop over `dims` whose
/// rows (innermost axis) have `N` elements (see [`short_rows`]), in
/// order: `f(done, off, count)` gets `count` whole consecutive rows of
/// one sweep of axis `r - 2` from block position `done` (element `k` of
/// row `j` at `off + j · strides[r - 2] + k · strides[r - 1]`), or with
/// `count == 0` one element at `off` of a row the block boundary cuts. A
/// short row then costs a few straight-line loads or combines (`N` is a
/// constant), not a run of [`for_runs`] each.
#[inline(always)]
pub(crate) fn for_row_groups<const N: usize>(
    dims: &[usize],
    strides: &[usize],
    start: usize,
    len: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    let r = dims.len();
    debug_assert!(r >= 2 && dims[r - 1] == N);
    // Element offset of global element `g` (a multi-index walk).
    let offset = |mut g: usize| {
        let mut off = 0;
        for d in (0..r).rev() {
            off += (g % dims[d]) * strides[d];
            g /= dims[d];
        }
        off
    };
    let group = dims[r - 2] * N;
    let mut done = 0;
    while done < len {
        let g = start + done;
        if g % N != 0 || len - done < N {
            f(done, offset(g), 0);
            done += 1;
            continue;
        }
        // Whole rows to the end of this sweep or the block's last whole row.
        let end = (start + len).min((g / group + 1) * group);
        let count = (end - g) / N;
        f(done, offset(g), count);
        done += count * N;
    }
}

/// Loads the block `start..start + len` of leaf `leaf` (whose values are
/// `src`) into its register `r`.
pub(crate) fn load(
    regs: &mut Registers,
    (leaf, r): (&Leaf, Reg),
    src: &Storage,
    start: usize,
    len: usize,
    idx: &mut [usize],
) {
    let (a, off) = (&leaf.access, leaf.off);
    macro_rules! get {
        ($v:expr, $bank:ident, $f:expr) => {{
            let f = $f;
            let convert = |o: &mut [_], s: &[_]| o.iter_mut().zip(s).for_each(|(o, &v)| *o = f(v));
            get!($v, $bank, f, convert)
        }};
        ($v:expr, $bank:ident, $f:expr, $copy:expr) => {
            gather(
                &$v[off..],
                a,
                start,
                &mut reg_mut(&mut regs.$bank, r)[..len],
                idx,
                $f,
                $copy,
            )
        };
    }
    fn same<T: Copy>(o: &mut [T], s: &[T]) {
        o.copy_from_slice(s)
    }
    match src {
        Storage::F32(v) => get!(v, f32, |x| x, same),
        Storage::F16(v) => get!(v, f32, f16::to_f32),
        Storage::BF16(v) => get!(v, f32, bf16::to_f32),
        Storage::F64(v) => get!(v, f64, |x| x, same),
        Storage::I64(v) => get!(v, i64, |x| x, same),
        Storage::Bool(v) => get!(v, bool, |x| x, same),
        Storage::C32(_) | Storage::C64(_) => {
            unreachable!("complex values run through kernel steps")
        }
    }
}

/// Fills the first `lanes` elements of a register with element `off` of `src`
/// (a splat leaf; blocks read at most `lanes` of them).
pub(crate) fn fill(regs: &mut Registers, r: Reg, src: &Storage, off: usize, lanes: usize) {
    match src {
        Storage::F32(v) => reg_mut(&mut regs.f32, r)[..lanes].fill(v[off]),
        Storage::F16(v) => reg_mut(&mut regs.f32, r)[..lanes].fill(v[off].to_f32()),
        Storage::BF16(v) => reg_mut(&mut regs.f32, r)[..lanes].fill(v[off].to_f32()),
        Storage::F64(v) => reg_mut(&mut regs.f64, r)[..lanes].fill(v[off]),
        Storage::I64(v) => reg_mut(&mut regs.i64, r)[..lanes].fill(v[off]),
        Storage::Bool(v) => reg_mut(&mut regs.bool, r)[..lanes].fill(v[off]),
        Storage::C32(_) | Storage::C64(_) => {
            unreachable!("complex values run through kernel steps")
        }
    }
}

/// Writes the block `start..start + len` of register `src` to the same
/// elements of `dst`, through raw pointer writes only (no reference to the
/// target is made): a fresh output may be memory not yet initialised
/// (see `fills`).
pub(crate) fn store(regs: &Registers, src: Reg, dst: RawTarget, start: usize, len: usize) {
    macro_rules! put {
        ($bank:ident, $p:expr, $n:expr, $f:expr, $copy:expr) => {{
            let (f, p, n, copy) = ($f, $p, $n, $copy);
            let s = &reg(&regs.$bank, src)[..len];
            assert!(start <= n && len <= n - start, "target window out of range");
            if let Some(copy) = copy {
                // SAFETY: in bounds (checked above); a register never
                // overlaps a target.
                unsafe { copy(s, p.add(start)) };
                return;
            }
            for (j, &x) in s.iter().enumerate() {
                // SAFETY: in bounds (checked above); this part owns the
                // block, so nothing else writes or borrows it meanwhile.
                unsafe { p.add(start + j).write(f(x)) };
            }
        }};
    }
    match dst {
        RawTarget::F32(p, n) => put!(f32, p, n, |x: f32| x, Some(copy_run::<f32>)),
        RawTarget::F16(p, n) => put!(f32, p, n, f16::from_f32, None::<CopyRun<f32, f16>>),
        RawTarget::BF16(p, n) => put!(f32, p, n, bf16::from_f32, None::<CopyRun<f32, bf16>>),
        RawTarget::F64(p, n) => put!(f64, p, n, |x: f64| x, Some(copy_run::<f64>)),
        RawTarget::I64(p, n) => put!(i64, p, n, |x: i64| x, Some(copy_run::<i64>)),
        RawTarget::Bool(p, n) => put!(bool, p, n, |x: bool| x, Some(copy_run::<bool>)),
    }
}

/// Copies a contiguous run of a register into a target of its own type
/// ([`copy_run`]); `None` where the target's type differs.
type CopyRun<S, T> = unsafe fn(&[S], *mut T);

/// A contiguous run of a register's own type written with one `memcpy`
/// (wide stores) instead of a store loop.
///
/// # Safety
/// `p` is valid for `s.len()` writes and does not overlap `s`.
unsafe fn copy_run<T: Copy>(s: &[T], p: *mut T) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len()) }
}

/// Writes the block `start..start + len` of register `src` through `map`.
pub(crate) fn scatter(
    regs: &Registers,
    src: Reg,
    map: &Scatter,
    dst: RawTarget,
    start: usize,
    len: usize,
    idx: &mut [usize],
) {
    let s_in = map.strides[map.strides.len() - 1];
    macro_rules! put {
        ($bank:ident, $p:expr, $n:expr, $f:expr, $copy:expr) => {{
            let (f, p, n, copy) = ($f, $p, $n, $copy);
            let s = &reg(&regs.$bank, src)[..len];
            for_runs(
                &map.dims,
                &map.strides,
                start,
                len,
                idx,
                |done, off, run| {
                    let first = map.off + off;
                    assert!(
                        first + (run - 1) * s_in < n,
                        "a placed value stays in its window"
                    );
                    if let (Some(copy), 1) = (copy, s_in) {
                        // SAFETY: as below.
                        unsafe { copy(&s[done..done + run], p.add(first)) };
                        return;
                    }
                    for (j, &x) in s[done..done + run].iter().enumerate() {
                        // SAFETY: in bounds (checked above); the map is
                        // injective and each part writes the elements of its
                        // own loop range only, so no element is written twice
                        // or borrowed elsewhere meanwhile.
                        unsafe { p.add(first + j * s_in).write(f(x)) };
                    }
                },
            );
        }};
    }
    match dst {
        RawTarget::F32(p, n) => put!(f32, p, n, |x: f32| x, Some(copy_run::<f32>)),
        RawTarget::F16(p, n) => put!(f32, p, n, f16::from_f32, None::<CopyRun<f32, f16>>),
        RawTarget::BF16(p, n) => put!(f32, p, n, bf16::from_f32, None::<CopyRun<f32, bf16>>),
        RawTarget::F64(p, n) => put!(f64, p, n, |x: f64| x, Some(copy_run::<f64>)),
        RawTarget::I64(p, n) => put!(i64, p, n, |x: i64| x, Some(copy_run::<i64>)),
        RawTarget::Bool(p, n) => put!(bool, p, n, |x: bool| x, Some(copy_run::<bool>)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `for_runs` visits exactly the elements `start..start + len` in
    /// order, each at `Σ i_d·strides[d]` of its multi-index, for every
    /// block start and length over shapes with short and long rows.
    #[test]
    fn runs_carry_offsets_like_the_multi_index() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[7], &[3]),
            (&[64, 64, 3], &[3, 0, 1]),
            (&[4, 1, 5], &[0, 9, 2]),
            (&[3, 2, 2, 3], &[1, 40, 7, 13]),
            (&[2, 3], &[0, 0]),
        ];
        for &(dims, strides) in cases {
            let numel: usize = dims.iter().product();
            let want: Vec<usize> = (0..numel)
                .map(|mut i| {
                    let mut off = 0;
                    for d in (0..dims.len()).rev() {
                        off += (i % dims[d]) * strides[d];
                        i /= dims[d];
                    }
                    off
                })
                .collect();
            let s_in = strides[strides.len() - 1];
            for start in 0..numel {
                for len in [0, 1, 2, 5, 17, numel - start] {
                    let len = len.min(numel - start);
                    let mut got = Vec::new();
                    let mut idx = vec![0; dims.len()];
                    for_runs(dims, strides, start, len, &mut idx, |done, off, run| {
                        assert_eq!(done, got.len(), "runs are consecutive");
                        assert!(run > 0, "no empty runs");
                        got.extend((0..run).map(|j| off + j * s_in));
                    });
                    assert_eq!(got, want[start..start + len], "{dims:?} {start}+{len}");
                }
            }
        }
    }
}
