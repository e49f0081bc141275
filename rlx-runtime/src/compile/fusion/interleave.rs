//! Several registers of a fused loop written together into one target
//! (see [`Interleave`]): the pieces of a concat one loop computes, such
//! as the entries of per-item Jacobians.

use half::{bf16, f16};

use crate::compile::base::parallel::RawTarget;
use crate::compile::base::regs::{reg, Reg, Registers};
use crate::compile::fusion::io::{for_runs, Scatter};

/// Most registers one [`Interleave`] writes; larger groups of pieces are
/// split into several.
pub(crate) const MAX_INTERLEAVED: usize = 16;

/// Several registers of one loop written through one walk into one target,
/// each at its own offset: the pieces of a concat (or of its transpose)
/// computed by the same loop, such as the entries of per-item Jacobians.
/// Element `i` of register `k` goes to `map.off + srcs[k].1 + pos(i)`,
/// `pos` the walk of `map`. Writing the registers a few items at a time
/// fills each item's entries together while its cache lines are in L1,
/// where one [`Scatter`] per register would sweep the whole block's
/// window once per register, each time touching every cache line of it.
#[derive(Clone, Debug)]
pub(crate) struct Interleave {
    /// The shared walk; its `off` is the smallest offset of the pieces.
    pub(crate) map: Scatter,
    /// The registers and their offsets past `map.off`, by offset (at most
    /// [`MAX_INTERLEAVED`]).
    pub(crate) srcs: Vec<(Reg, usize)>,
}

/// Items per tile of [`interleave`]: 64 items of 9 `f64` entries are
/// 4.6 KiB of the target.
const TILE: usize = 64;

/// Writes the block `start..start + len` of the registers of `il`, a
/// tile of items at a time (see [`Interleave`]): the same values reach
/// the same elements as one `io::scatter` per register would write.
pub(crate) fn interleave(
    regs: &Registers,
    il: &Interleave,
    dst: RawTarget,
    start: usize,
    len: usize,
    idx: &mut [usize],
) {
    let map = &il.map;
    let s_in = map.strides[map.strides.len() - 1];
    let k = il.srcs.len();
    debug_assert!((1..=MAX_INTERLEAVED).contains(&k));
    let span = il.srcs[k - 1].1;
    let mut offs = [0usize; MAX_INTERLEAVED];
    for (o, &(_, off)) in offs.iter_mut().zip(&il.srcs) {
        *o = off;
    }
    let offs = &offs[..k];
    macro_rules! put {
        ($bank:ident, $p:expr, $n:expr, $f:expr) => {{
            let (f, p, n) = ($f, $p, $n);
            let mut cols = [&[][..]; MAX_INTERLEAVED];
            for (c, &(r, _)) in cols.iter_mut().zip(&il.srcs) {
                *c = &reg(&regs.$bank, r)[..len];
            }
            let cols = &cols[..k];
            for_runs(
                &map.dims,
                &map.strides,
                start,
                len,
                idx,
                |done, off, run| {
                    let first = map.off + off;
                    assert!(
                        first + (run - 1) * s_in + span < n,
                        "a placed value stays in its window"
                    );
                    // A tile of items at a time, one register (or four
                    // with consecutive offsets) after the other: the
                    // tile's window stays in L1 while every register
                    // fills its entries, with no per-element dispatch.
                    // (One register takes the whole run at once: runs can
                    // be rows of 3, where the tiles' set-up would show.)
                    let tile = if k == 1 { run } else { TILE };
                    let mut t = 0;
                    while t < run {
                        let m = tile.min(run - t);
                        let at = first + t * s_in;
                        let (a, b) = (done + t, done + t + m);
                        let mut c = 0;
                        while c < k {
                            let o = offs[c];
                            // Offsets are sorted and distinct: four in a
                            // row are one item's four adjacent entries,
                            // stored as one array (a vector store, not four
                            // scalar ones: stores are what this step is
                            // bound by).
                            if c + 4 <= k && offs[c + 3] == o + 3 {
                                let q: [&[_]; 4] = std::array::from_fn(|i| &cols[c + i][a..b]);
                                // SAFETY: as below, for the four entries
                                // `o..o + 4 ≤ span + 1` of items `0..m`;
                                // `f` converts `f64` to `f64` only as the
                                // identity (the `F64` arm).
                                unsafe { quads(q, &f, p.add(at + o), s_in) };
                                c += 4;
                                continue;
                            }
                            for (j, &x) in cols[c][a..b].iter().enumerate() {
                                // SAFETY: in bounds (checked above: `o ≤
                                // span`); the pieces' windows are disjoint
                                // and each map injective, and each part
                                // writes the elements of its own loop range
                                // only, so no element is written twice or
                                // borrowed elsewhere meanwhile.
                                unsafe { p.add(at + o + j * s_in).write(f(x)) };
                            }
                            c += 1;
                        }
                        t += m;
                    }
                },
            );
        }};
    }
    match dst {
        RawTarget::F32(p, n) => put!(f32, p, n, |x: f32| x),
        RawTarget::F16(p, n) => put!(f32, p, n, f16::from_f32),
        RawTarget::BF16(p, n) => put!(f32, p, n, bf16::from_f32),
        RawTarget::F64(p, n) => put!(f64, p, n, |x: f64| x),
        RawTarget::I64(p, n) => put!(i64, p, n, |x: i64| x),
        RawTarget::Bool(p, n) => put!(bool, p, n, |x: bool| x),
    }
}

/// Writes item `j` of four registers `q` (one element each), converted
/// by `f`, as one array at `p + j · stride`, for every `j < q[0].len()`:
/// with AVX2, `f64`s four items at a time transposed in vector registers,
/// so that each item's four entries take one vector store (LLVM keeps
/// the portable code's element moves scalar, even with AVX2 enabled).
///
/// # Safety
/// `p + j · stride .. + 4` must be writable and borrowed by nothing else,
/// for every such `j`; from `f64` to `f64`, `f` must be the identity (the
/// vector code does not call it).
#[inline]
unsafe fn quads<T: Copy + 'static, U: Copy + 'static>(
    q: [&[T]; 4],
    f: &impl Fn(T) -> U,
    p: *mut U,
    stride: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        use std::any::TypeId;
        if TypeId::of::<T>() == TypeId::of::<f64>() && TypeId::of::<U>() == TypeId::of::<f64>() {
            // SAFETY: `T` and `U` are `f64` (checked just above), so `f`
            // is the identity (the caller's promise); the CPU supports
            // AVX2; the caller's promise on `p` is passed on.
            return unsafe {
                let q: [&[f64]; 4] = std::array::from_fn(|i| {
                    std::slice::from_raw_parts(q[i].as_ptr().cast::<f64>(), q[i].len())
                });
                quads_f64_avx2(q, p.cast::<f64>(), stride)
            };
        }
    }
    // SAFETY: the caller's promise.
    unsafe { quads_portable(q, f, p, stride) }
}

/// [`quads`] of `f64`s: four items of the four registers loaded as four
/// vectors and transposed by unpacks and lane permutes, one vector store
/// per item.
///
/// # Safety
/// The CPU must support AVX2, and [`quads`]'s promise hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quads_f64_avx2(q: [&[f64]; 4], p: *mut f64, stride: usize) {
    use core::arch::x86_64::{
        _mm256_loadu_pd, _mm256_permute2f128_pd, _mm256_storeu_pd, _mm256_unpackhi_pd,
        _mm256_unpacklo_pd,
    };
    let m = q[0].len();
    let q: [&[f64]; 4] = std::array::from_fn(|i| &q[i][..m]);
    let whole = m / 4 * 4;
    for j in (0..whole).step_by(4) {
        // SAFETY: `j + 4 ≤ m` elements of each register are read; the
        // stores are the caller's promise.
        unsafe {
            let [a, b, c, d] = q.map(|r| _mm256_loadu_pd(r.as_ptr().add(j)));
            let (ab_even, ab_odd) = (_mm256_unpacklo_pd(a, b), _mm256_unpackhi_pd(a, b));
            let (cd_even, cd_odd) = (_mm256_unpacklo_pd(c, d), _mm256_unpackhi_pd(c, d));
            let items = [
                _mm256_permute2f128_pd::<0x20>(ab_even, cd_even),
                _mm256_permute2f128_pd::<0x20>(ab_odd, cd_odd),
                _mm256_permute2f128_pd::<0x31>(ab_even, cd_even),
                _mm256_permute2f128_pd::<0x31>(ab_odd, cd_odd),
            ];
            for (e, v) in items.into_iter().enumerate() {
                _mm256_storeu_pd(p.add((j + e) * stride), v);
            }
        }
    }
    let rest: [&[f64]; 4] = std::array::from_fn(|i| &q[i][whole..]);
    // SAFETY: the caller's promise, for the items from `whole` on.
    unsafe { quads_portable(rest, &|x| x, p.add(whole * stride), stride) }
}

#[inline(always)]
unsafe fn quads_portable<T: Copy, U: Copy>(
    q: [&[T]; 4],
    f: &impl Fn(T) -> U,
    p: *mut U,
    stride: usize,
) {
    let items = q[0].iter().zip(q[1]).zip(q[2].iter().zip(q[3]));
    for (j, ((&a, &b), (&c, &d))) in items.enumerate() {
        // SAFETY: the caller's promise (`j < q[0].len()`).
        unsafe {
            p.add(j * stride)
                .cast::<[U; 4]>()
                .write_unaligned([f(a), f(b), f(c), f(d)])
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::fusion::io::scatter;

    /// `interleave` writes exactly what one `scatter` per register writes,
    /// for blocks cut anywhere (mid-row, mid-tile, one element) and for
    /// targets stored in another type than their bank (`f16`): the
    /// device's nine stride-9 entries, the pieces of a concat on the last
    /// axis (runs along rows) and of its transpose (strided runs), and
    /// the most registers one write takes.
    #[test]
    fn interleaved_writes_equal_one_scatter_per_register() {
        use crate::compile::base::regs::{Bank, BLOCK};
        use crate::storage::Storage;
        let (a, b) = (37, 29);
        /// Dims, strides, offsets of the pieces, target length.
        type Case = (Vec<usize>, Vec<usize>, Vec<usize>, usize);
        let cases: Vec<Case> = vec![
            (vec![300], vec![9], vec![0, 3, 6, 1, 4, 7, 5, 8], 2700),
            (vec![a, b], vec![3 * b, 1], vec![0, b, 2 * b], 3 * a * b),
            (vec![a, b], vec![1, a], vec![0, a * b, 2 * a * b], 3 * a * b),
            (vec![100], vec![16], (0..16).rev().collect(), 1600),
        ];
        for (dims, strides, offs, total) in cases {
            let numel: usize = dims.iter().product();
            let k = offs.len();
            let mut regs = Registers::new([k, k, 0, 0]);
            for (i, v) in regs.f64.iter_mut().enumerate() {
                *v = i as f64 * 0.75 - 3.0;
            }
            for (i, v) in regs.f32.iter_mut().enumerate() {
                *v = i as f32 * 0.25 - 1.0;
            }
            let r = |bank, j: usize| Reg {
                bank,
                idx: j as u32,
            };
            let base = *offs.iter().min().unwrap();
            let walk = |off| Scatter {
                off,
                dims: dims.clone(),
                strides: strides.clone(),
            };
            for (bank, zero) in [
                (Bank::F64, Storage::F64(vec![0.0; total])),
                (Bank::F32, Storage::F16(vec![f16::ZERO; total])),
            ] {
                let mut srcs: Vec<(Reg, usize)> =
                    (0..k).map(|j| (r(bank, j), offs[j] - base)).collect();
                srcs.sort_unstable_by_key(|s| s.1);
                let il = Interleave {
                    map: walk(base),
                    srcs,
                };
                for start in [0, 1, 5, numel / 2] {
                    for len in [1, 63, 64, 65, 700, BLOCK] {
                        let len = len.min(numel - start);
                        let (mut want, mut got) = (zero.clone(), zero.clone());
                        let mut idx = vec![0; dims.len()];
                        for (j, &off) in offs.iter().enumerate() {
                            let t = RawTarget::of(&mut want);
                            scatter(&regs, r(bank, j), &walk(off), t, start, len, &mut idx);
                        }
                        let t = RawTarget::of(&mut got);
                        interleave(&regs, &il, t, start, len, &mut idx);
                        assert_eq!(got, want, "{dims:?} {strides:?} {start}+{len} {bank:?}");
                        let written = match &got {
                            Storage::F64(v) => v.iter().filter(|&&x| x != 0.0).count(),
                            Storage::F16(v) => v.iter().filter(|&&x| x != f16::ZERO).count(),
                            _ => unreachable!(),
                        };
                        // Every register's block is written (the fill
                        // values have one zero per bank at most).
                        assert!(written + 1 >= k * len, "{written} of {}", k * len);
                    }
                }
            }
        }
    }

    /// The vector transpose of `f64` quads (with AVX2) and the portable
    /// code write the same elements, for lengths around multiples of four
    /// and strides from dense (4) to sparse.
    #[test]
    fn quads_write_what_the_portable_code_writes() {
        let cols: Vec<Vec<f64>> = (0..4)
            .map(|c| (0..70).map(|i| (c * 100 + i) as f64 + 0.5).collect())
            .collect();
        for m in [0, 1, 3, 4, 5, 8, 63, 70] {
            for stride in [4, 5, 9] {
                let q: [&[f64]; 4] = std::array::from_fn(|i| &cols[i][..m]);
                let mut want = vec![0.0; 70 * stride + 4];
                let mut got = want.clone();
                let f = |x: f64| x;
                // SAFETY: `m` items of four entries at `stride` fit.
                unsafe {
                    quads_portable(q, &f, want.as_mut_ptr(), stride);
                    quads(q, &f, got.as_mut_ptr(), stride);
                }
                assert_eq!(got, want, "{m} items, stride {stride}");
                let written = want.iter().filter(|&&x| x != 0.0).count();
                assert_eq!(written, 4 * m);
            }
        }
    }
}
