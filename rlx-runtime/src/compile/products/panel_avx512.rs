//! The panel kernels of [`panel`](crate::compile::products::panel) at AVX-512 width, where
//! the CPU has AVX-512F: the same sums in the same order as the portable
//! loops and [`panel_avx2`](crate::compile::products::panel_avx2), so the same bits (tested),
//! with twice the lanes a vector.
//!
//! - `rows` (`csb = 1`, `f32` and `f64`): `R × NV` vectors of `C` in
//!   registers, as in `panel_avx2`: blocks of `NV = 4` vectors of 16
//!   (`f32`) or 8 (`f64`) columns while they fit (16 sums in flight, 4
//!   rows of `B` loaded per 16 multiply-adds: about 15% faster than 2 on
//!   an LSTM step's `[4, 64] · [64, 128]`), then of 2 and 1; the columns
//!   past the last full vector are one more block with masked loads and
//!   stores (each element's sum over `p` in order, as every other
//!   element's).
//! - `dots` (`rsb = csa = 1`, `f32`): each dot product over 4 lanes (lane
//!   `l` sums the products at `p ≡ l` mod 4, in order), the lanes summed
//!   in order from zero, the `k mod 4` tail added last. A vector holds
//!   the 4 lanes of 4 rows of `A` (one 128-bit lane each) against one
//!   column of `B`, whose 4 elements one broadcast load repeats in every
//!   128-bit lane; a block is 4 rows × 16 columns (then one of 8), each
//!   column's start computed once per block.
//!
//! Every element outside the blocks is computed one at a time by the
//! same formula (`panel_avx2`'s edge loops). The caller
//! ([`panel_avx2::product_f32`](crate::compile::products::panel_avx2)) calls these only
//! where the CPU has AVX-512F; the views are checked by
//! [`crate::compile::products::panel::product`].

#![cfg(target_arch = "x86_64")]
// The AVX-512 intrinsics are stable since Rust 1.89, above the crate's
// 1.85: this module is compiled only with the `avx512` feature, which
// documents that it needs 1.89.
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use crate::compile::products::panel_avx2::edge_dots;
use crate::compile::products::view::{Madd, Views};

/// Rows of `C` per block.
const R: usize = 4;

/// The `rows` kernel over one element type: `$t` in vectors `$v` of `$w`
/// lanes, masks `$m`.
macro_rules! rows512 {
    ($t:ty, $v:ty, $m:ty, $w:expr, $zero:ident, $load:ident, $mload:ident, $store:ident,
     $mstore:ident, $set1:ident, $add:ident, $mul:ident, $fma:ident) => {
        /// `acc + a·b`, fused (`FUSED`) or a multiply then an add.
        #[target_feature(enable = "avx512f")]
        #[inline]
        fn madd<const FUSED: bool>(acc: $v, a: $v, b: $v) -> $v {
            if FUSED {
                $fma(a, b, acc)
            } else {
                $add(acc, $mul(a, b))
            }
        }

        /// `RR × NV` vectors of `C` at rows `i0..`, columns `j0..`; the
        /// last vector's lanes limited to `last` (all lanes: `!0`).
        ///
        /// # Safety
        /// Rows `i0..i0 + RR` inside the views; columns `j0..j0 + (NV −
        /// 1)·W` plus the lanes of `last` inside the views.
        #[target_feature(enable = "avx512f")]
        #[inline]
        unsafe fn rows_block<const RR: usize, const NV: usize, const FUSED: bool>(
            v: &mut Views<'_, '_, $t>,
            i0: usize,
            j0: usize,
            last: $m,
        ) {
            let (pa, pb) = (v.a.data.as_ptr(), v.b.data.as_ptr());
            let mut acc = [[$zero(); NV]; RR];
            for p in 0..v.k {
                let row = v.b.off + p * v.b.rs + j0;
                // SAFETY: `p < k`; the columns loaded (the masked-off
                // lanes are not read) are inside B's view.
                let bv: [$v; NV] = std::array::from_fn(|q| unsafe {
                    if q + 1 == NV {
                        $mload(last, pb.add(row + q * $w))
                    } else {
                        $load(pb.add(row + q * $w))
                    }
                });
                for (r, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `i0 + r < m`, `p < k`: inside A's view.
                    let av = $set1(unsafe { *pa.add(v.a.off + (i0 + r) * v.a.rs + p * v.a.cs) });
                    for (o, &b) in acc.iter_mut().zip(&bv) {
                        *o = madd::<FUSED>(*o, av, b);
                    }
                }
            }
            let cols = (NV - 1) * $w + (last as u64).count_ones() as usize;
            for (r, acc) in acc.iter().enumerate() {
                let o = v.c_off + (i0 + r) * v.rsc + j0;
                let out = &mut v.c[o..o + cols];
                for (q, &x) in acc.iter().enumerate() {
                    // SAFETY: `out` holds the `cols` elements written
                    // (bounds-checked slice): `W` a full vector, the
                    // lanes of `last` the last one.
                    unsafe {
                        if q + 1 == NV {
                            $mstore(out.as_mut_ptr().add(q * $w), last, x)
                        } else {
                            $store(out.as_mut_ptr().add(q * $w), x)
                        }
                    }
                }
            }
        }

        /// `RR` rows of `C` from row `i0`, every column.
        ///
        /// # Safety
        /// Rows `i0..i0 + RR` inside the views.
        #[target_feature(enable = "avx512f")]
        #[inline]
        unsafe fn row_blocks<const RR: usize, const FUSED: bool>(
            v: &mut Views<'_, '_, $t>,
            i0: usize,
        ) {
            let n = v.n;
            let all: $m = !0;
            let mut j0 = 0;
            // SAFETY (every block): the rows and the block's columns are
            // inside the views.
            while j0 + 4 * $w <= n {
                unsafe { rows_block::<RR, 4, FUSED>(v, i0, j0, all) };
                j0 += 4 * $w;
            }
            while j0 + 2 * $w <= n {
                unsafe { rows_block::<RR, 2, FUSED>(v, i0, j0, all) };
                j0 += 2 * $w;
            }
            if j0 + $w < n {
                let last: $m = (1 << (n - j0 - $w)) - 1;
                unsafe { rows_block::<RR, 2, FUSED>(v, i0, j0, last) };
            } else if j0 + $w == n {
                unsafe { rows_block::<RR, 1, FUSED>(v, i0, j0, all) };
            } else if j0 < n {
                let last: $m = (1 << (n - j0)) - 1;
                unsafe { rows_block::<RR, 1, FUSED>(v, i0, j0, last) };
            }
        }

        /// `C ← A B` for `csb = 1`.
        ///
        /// # Safety
        /// The CPU must support AVX-512F; the views in bounds.
        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn rows<const FUSED: bool>(v: &mut Views<'_, '_, $t>) {
            let m = v.m;
            let mut i0 = 0;
            // SAFETY (every call): rows `i0..i0 + 4` (or `i0`) inside.
            while i0 + R <= m {
                unsafe { row_blocks::<R, FUSED>(v, i0) };
                i0 += R;
            }
            while i0 < m {
                unsafe { row_blocks::<1, FUSED>(v, i0) };
                i0 += 1;
            }
        }
    };
}

/// `f64`: 8 lanes a vector.
mod f64x8 {
    use super::*;

    rows512!(
        f64,
        __m512d,
        __mmask8,
        8,
        _mm512_setzero_pd,
        _mm512_loadu_pd,
        _mm512_maskz_loadu_pd,
        _mm512_storeu_pd,
        _mm512_mask_storeu_pd,
        _mm512_set1_pd,
        _mm512_add_pd,
        _mm512_mul_pd,
        _mm512_fmadd_pd
    );
}

/// `f32`: 16 lanes a vector.
mod f32x16 {
    use super::*;

    rows512!(
        f32,
        __m512,
        __mmask16,
        16,
        _mm512_setzero_ps,
        _mm512_loadu_ps,
        _mm512_maskz_loadu_ps,
        _mm512_storeu_ps,
        _mm512_mask_storeu_ps,
        _mm512_set1_ps,
        _mm512_add_ps,
        _mm512_mul_ps,
        _mm512_fmadd_ps
    );

    /// The 4 × 4 transposes of `dots`: from the lane sums `acc[q]` of
    /// columns `j0 + q` (`q < 4`; 128-bit lane `r` holds row `i0 + r`),
    /// the sums of those columns (128-bit lane `r`, element `q`: `C[i0 +
    /// r, j0 + q]` without its tail), the lanes added in order from zero.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn lane_sums(acc: [__m512; 4]) -> __m512 {
        let [a0, a1, a2, a3] = acc;
        let (t0, t1) = (_mm512_unpacklo_ps(a0, a1), _mm512_unpacklo_ps(a2, a3));
        let (t2, t3) = (_mm512_unpackhi_ps(a0, a1), _mm512_unpackhi_ps(a2, a3));
        let lane = [
            _mm512_shuffle_ps::<0x44>(t0, t1),
            _mm512_shuffle_ps::<0xEE>(t0, t1),
            _mm512_shuffle_ps::<0x44>(t2, t3),
            _mm512_shuffle_ps::<0xEE>(t2, t3),
        ];
        lane.iter()
            .fold(_mm512_setzero_ps(), |s, &l| _mm512_add_ps(s, l))
    }

    /// Dot products of rows `i0..i0 + 4` of `A` with columns `j0..j0 +
    /// J` of `B` (`J` a multiple of 4: `J / 4` groups of 4 columns).
    ///
    /// # Safety
    /// Those rows and columns inside the views (`rsb = csa = 1`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn dots_block<const J: usize, const FUSED: bool>(
        v: &mut Views<'_, '_, f32>,
        i0: usize,
        j0: usize,
    ) {
        let (pa, pb) = (v.a.data.as_ptr(), v.b.data.as_ptr());
        let full_k = v.k - v.k % 4;
        let mut acc = [_mm512_setzero_ps(); J];
        // Where each column starts, computed once: the loads below then
        // address every column from its own base, with no chain of
        // additions from one column to the next within a step.
        let cols: [usize; J] = std::array::from_fn(|q| v.b.off + (j0 + q) * v.b.cs);
        for p0 in (0..full_k).step_by(4) {
            let row = |r: usize| v.a.off + (i0 + r) * v.a.rs + p0;
            // SAFETY: `p0 + 4 ≤ k`, rows `i0 + r < m`, columns `j0 + q <
            // n`: 4 elements of each inside the views.
            let x = unsafe {
                let x = _mm512_castps128_ps512(_mm_loadu_ps(pa.add(row(0))));
                let x = _mm512_insertf32x4::<1>(x, _mm_loadu_ps(pa.add(row(1))));
                let x = _mm512_insertf32x4::<2>(x, _mm_loadu_ps(pa.add(row(2))));
                _mm512_insertf32x4::<3>(x, _mm_loadu_ps(pa.add(row(3))))
            };
            for (q, o) in acc.iter_mut().enumerate() {
                // SAFETY: as above.
                let y = unsafe { _mm512_broadcast_f32x4(_mm_loadu_ps(pb.add(cols[q] + p0))) };
                *o = madd::<FUSED>(*o, x, y);
            }
        }
        for g in 0..J / 4 {
            let sum = lane_sums([acc[4 * g], acc[4 * g + 1], acc[4 * g + 2], acc[4 * g + 3]]);
            // The tails of the 16 sums (`+0.0` when `k` is a multiple of
            // 4, as the empty fold from zero gives): element `4r + q` of
            // row `i0 + r`, column `j0 + 4g + q`.
            let mut tails = [0.0f32; 16];
            if full_k < v.k {
                for (e, t) in tails.iter_mut().enumerate() {
                    let (i, j) = (i0 + e / 4, j0 + 4 * g + e % 4);
                    let x = &v.a.data[v.a.off + i * v.a.rs..][..v.k];
                    let y = &v.b.data[v.b.off + j * v.b.cs..][..v.k];
                    *t = (full_k..v.k).fold(0.0f32, |s, p| Madd::madd::<FUSED>(s, x[p], y[p]));
                }
            }
            let mut out = [0.0f32; 16];
            // SAFETY: `tails` and `out` hold 16 elements.
            unsafe {
                let sum = _mm512_add_ps(sum, _mm512_loadu_ps(tails.as_ptr()));
                _mm512_storeu_ps(out.as_mut_ptr(), sum);
            }
            for r in 0..R {
                let o = v.c_off + (i0 + r) * v.rsc + j0 + 4 * g;
                v.c[o..o + 4].copy_from_slice(&out[4 * r..4 * r + 4]);
            }
        }
    }

    /// `C ← A B` for `rsb = csa = 1`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; the views in bounds.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dots<const FUSED: bool>(v: &mut Views<'_, '_, f32>) {
        let full_m = v.m - v.m % R;
        // Blocks of 16 columns (16 sums in flight, one `A` vector built
        // per 16 products), then one of 8; the rest one at a time.
        let full_n = v.n - v.n % 8;
        for i0 in (0..full_m).step_by(R) {
            let mut j0 = 0;
            while j0 + 16 <= v.n {
                // SAFETY: rows `i0..i0 + 4`, columns `j0..j0 + 16` inside.
                unsafe { dots_block::<16, FUSED>(v, i0, j0) }
                j0 += 16;
            }
            if j0 < full_n {
                // SAFETY: rows `i0..i0 + 4`, columns `j0..j0 + 8` inside.
                unsafe { dots_block::<8, FUSED>(v, i0, j0) }
            }
        }
        for i in 0..v.m {
            let from = if i < full_m { full_n } else { 0 };
            for j in from..v.n {
                let x = edge_dots::<_, FUSED>(v, 0.0, i, j);
                v.c[v.c_off + i * v.rsc + j] = x;
            }
        }
    }
}

/// `C ← A B` in `f64` with AVX-512 `rows` (`csb = 1`); `None` for a
/// transposed `B`, which the AVX2 kernels take.
///
/// # Safety
/// The CPU must support AVX-512F, and the views must be in bounds.
pub(super) unsafe fn product_f64(v: &mut Views<'_, '_, f64>) -> Option<()> {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (v.b.cs == 1, v.fused) {
            (true, false) => f64x8::rows::<false>(v),
            (true, true) => f64x8::rows::<true>(v),
            (false, _) => return None,
        }
    }
    Some(())
}

/// `C ← A B` in `f32` (`csb = 1`: `rows`, else `rsb = csa = 1`: `dots`;
/// fused multiply-adds when `v.fused`).
///
/// # Safety
/// The CPU must support AVX-512F, and the views must be in bounds.
pub(super) unsafe fn product_f32(v: &mut Views<'_, '_, f32>) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (v.b.cs == 1, v.fused) {
            (true, false) => f32x16::rows::<false>(v),
            (true, true) => f32x16::rows::<true>(v),
            (false, false) => f32x16::dots::<false>(v),
            (false, true) => f32x16::dots::<true>(v),
        }
    }
}
