//! The panel kernels of [`panel`](crate::compile::products::panel) written with AVX
//! intrinsics for `f32` and `f64`: the same sums in the same order, so the
//! same bits as the portable loops (tested), at full vector width.
//!
//! The portable loops, compiled with AVX2 enabled, left LLVM to map their
//! `[T; 8]` blocks onto registers; for the transposed right operand of a
//! backward product (`dz · Wᵀ`, [`dots`](crate::compile::products::panel)) it produced
//! shuffles and spills. Here every block is explicit:
//!
//! - `rows` (`csb = 1`): `R × NV` vectors of `C` (`R ≤ 4` rows, `NV ≤ 2`
//!   vectors of columns) in registers; for each `p` in order, `NV` loads
//!   of `B`'s row, one broadcast of `A[i, p]` per row, then `acc + a·b`
//!   (a multiply, then an add: no fused multiply-add, which would round
//!   once instead of twice).
//! - `dots` (`rsb = csa = 1`): each dot product of a row of `A` with a
//!   column of `B` over 4 lanes (lane `l` sums the products at `p ≡ l`
//!   mod 4, in order), the lanes then summed in order and the `k mod 4`
//!   tail added last, as the portable `dots` does. An `f64` vector holds
//!   the 4 lanes of one dot product; an `f32` vector the lanes of two
//!   (rows `i` and `i + 1` of `A` against one column of `B`).
//!
//! Every element outside the full blocks is computed one at a time by the
//! same formula. The caller ([`crate::compile::products::panel::product`]) checks the views'
//! bounds first, and calls these only where the CPU has AVX.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::compile::products::view::{Madd, Views};

/// Rows of `C` per block.
const R: usize = 4;

/// `Σ_p a[i, p]·b[p, j]` summed in order from zero (the order of the
/// `rows` blocks).
fn edge_rows<T: Madd, const FUSED: bool>(v: &Views<'_, '_, T>, zero: T, i: usize, j: usize) -> T {
    let (a, b) = (&v.a, &v.b);
    (0..v.k).fold(zero, |s, p| {
        s.madd::<FUSED>(
            a.data[a.off + i * a.rs + p * a.cs],
            b.data[b.off + p * b.rs + j],
        )
    })
}

/// The dot product of row `i` of `A` and column `j` of `B` over 4 lanes
/// (the order of the `dots` blocks: lanes summed in order, then the tail).
pub(super) fn edge_dots<T: Madd + std::ops::Add<Output = T>, const FUSED: bool>(
    v: &Views<'_, '_, T>,
    zero: T,
    i: usize,
    j: usize,
) -> T {
    let k = v.k;
    let x = &v.a.data[v.a.off + i * v.a.rs..][..k];
    let y = &v.b.data[v.b.off + j * v.b.cs..][..k];
    finish_dot::<T, FUSED>(lanes4::<T, FUSED>(x, y, zero), x, y, zero)
}

/// The 4 lane sums of `x · y` over the full groups of 4.
fn lanes4<T: Madd, const FUSED: bool>(x: &[T], y: &[T], zero: T) -> [T; 4] {
    let full = x.len() - x.len() % 4;
    let mut lanes = [zero; 4];
    for (xc, yc) in x[..full].chunks_exact(4).zip(y[..full].chunks_exact(4)) {
        for q in 0..4 {
            lanes[q] = lanes[q].madd::<FUSED>(xc[q], yc[q]);
        }
    }
    lanes
}

/// The lanes summed in order from zero, plus the tail past the full groups.
fn finish_dot<T: Madd + std::ops::Add<Output = T>, const FUSED: bool>(
    lanes: [T; 4],
    x: &[T],
    y: &[T],
    zero: T,
) -> T {
    let full = x.len() - x.len() % 4;
    let tail = (full..x.len()).fold(zero, |s, p| s.madd::<FUSED>(x[p], y[p]));
    lanes.iter().fold(zero, |s, &l| s + l) + tail
}

/// The kernels over one element type: `$t` in vectors `$v` of `$w` lanes.
macro_rules! rows_kernel {
    ($t:ty, $v:ty, $w:expr, $zero:ident, $load:ident, $store:ident, $set1:ident, $add:ident, $mul:ident, $fma:ident) => {
        /// `acc + a·b`, fused (`FUSED`) or a multiply then an add.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        fn madd<const FUSED: bool>(acc: $v, a: $v, b: $v) -> $v {
            if FUSED {
                $fma(a, b, acc)
            } else {
                $add(acc, $mul(a, b))
            }
        }

        /// `R × NV` vectors of `C` at rows `i0..`, columns `j0..`.
        ///
        /// # Safety
        /// Rows `i0..i0 + R` and columns `j0..j0 + NV·W` inside the views.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        unsafe fn rows_block<const RR: usize, const NV: usize, const FUSED: bool>(
            v: &mut Views<'_, '_, $t>,
            i0: usize,
            j0: usize,
        ) {
            let (pa, pb) = (v.a.data.as_ptr(), v.b.data.as_ptr());
            let mut acc = [[$zero(); NV]; RR];
            for p in 0..v.k {
                let row = v.b.off + p * v.b.rs + j0;
                // SAFETY: `p < k` and `j0 + NV·W ≤ n`: inside B's view.
                let bv: [$v; NV] = std::array::from_fn(|q| unsafe { $load(pb.add(row + q * $w)) });
                for (r, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `i0 + r < m`, `p < k`: inside A's view.
                    let av = $set1(unsafe { *pa.add(v.a.off + (i0 + r) * v.a.rs + p * v.a.cs) });
                    for (o, &b) in acc.iter_mut().zip(&bv) {
                        *o = madd::<FUSED>(*o, av, b);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let o = v.c_off + (i0 + r) * v.rsc + j0;
                let out = &mut v.c[o..o + NV * $w];
                for (q, &x) in acc.iter().enumerate() {
                    // SAFETY: `out` holds `NV·W` elements (bounds-checked slice).
                    unsafe { $store(out.as_mut_ptr().add(q * $w), x) }
                }
            }
        }

        /// `C ← A B` for `csb = 1`.
        ///
        /// # Safety
        /// The CPU must support AVX2 and FMA; the views in bounds.
        #[target_feature(enable = "avx2,fma")]
        pub(super) unsafe fn rows<const FUSED: bool>(v: &mut Views<'_, '_, $t>) {
            let (m, n) = (v.m, v.n);
            let mut i0 = 0;
            while i0 < m {
                let rows = (m - i0).min(R);
                let mut j0 = 0;
                // SAFETY (every block): rows `i0..i0 + rows` and the
                // block's columns are inside the views.
                while j0 + 2 * $w <= n {
                    match rows {
                        4 => unsafe { rows_block::<4, 2, FUSED>(v, i0, j0) },
                        _ => (i0..i0 + rows)
                            .for_each(|i| unsafe { rows_block::<1, 2, FUSED>(v, i, j0) }),
                    }
                    j0 += 2 * $w;
                }
                while j0 + $w <= n {
                    match rows {
                        4 => unsafe { rows_block::<4, 1, FUSED>(v, i0, j0) },
                        _ => (i0..i0 + rows)
                            .for_each(|i| unsafe { rows_block::<1, 1, FUSED>(v, i, j0) }),
                    }
                    j0 += $w;
                }
                for i in i0..i0 + rows {
                    for j in j0..n {
                        let x = edge_rows::<$t, FUSED>(v, 0.0, i, j);
                        v.c[v.c_off + i * v.rsc + j] = x;
                    }
                }
                i0 += rows;
            }
        }
    };
}

/// `f64`: 4 lanes a vector.
mod f64x4 {
    use super::*;

    rows_kernel!(
        f64,
        __m256d,
        4,
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_set1_pd,
        _mm256_add_pd,
        _mm256_mul_pd,
        _mm256_fmadd_pd
    );

    /// Dot products of rows `i0..i0 + 4` of `A` with columns `j0, j0 + 1`
    /// of `B`, each over the 4 lanes of one vector.
    ///
    /// # Safety
    /// Those rows and columns inside the views (`rsb = csa = 1`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn dots_block<const FUSED: bool>(v: &mut Views<'_, '_, f64>, i0: usize, j0: usize) {
        const J: usize = 2;
        let (pa, pb) = (v.a.data.as_ptr(), v.b.data.as_ptr());
        let full_k = v.k - v.k % 4;
        let mut acc = [[_mm256_setzero_pd(); J]; R];
        for p0 in (0..full_k).step_by(4) {
            // SAFETY: `p0 + 4 ≤ k`, columns `j0 + q < n`, rows `i0 + r < m`.
            let y: [__m256d; J] = std::array::from_fn(|q| unsafe {
                _mm256_loadu_pd(pb.add(v.b.off + (j0 + q) * v.b.cs + p0))
            });
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: as above.
                let x = unsafe { _mm256_loadu_pd(pa.add(v.a.off + (i0 + r) * v.a.rs + p0)) };
                for (o, &y) in acc.iter_mut().zip(&y) {
                    *o = madd::<FUSED>(*o, x, y);
                }
            }
        }
        for q in 0..J {
            // Lane `l` of the 4 rows' sums in one vector: a 4 × 4 transpose.
            let [a0, a1, a2, a3] = acc.map(|row| row[q]);
            let (t0, t1) = (_mm256_unpacklo_pd(a0, a1), _mm256_unpackhi_pd(a0, a1));
            let (t2, t3) = (_mm256_unpacklo_pd(a2, a3), _mm256_unpackhi_pd(a2, a3));
            let lane = [
                _mm256_permute2f128_pd(t0, t2, 0x20),
                _mm256_permute2f128_pd(t1, t3, 0x20),
                _mm256_permute2f128_pd(t0, t2, 0x31),
                _mm256_permute2f128_pd(t1, t3, 0x31),
            ];
            // The lanes summed in order from zero, then the tail.
            let sum = lane
                .iter()
                .fold(_mm256_setzero_pd(), |s, &l| _mm256_add_pd(s, l));
            let mut tails = [0.0; R];
            if full_k < v.k {
                let y = &v.b.data[v.b.off + (j0 + q) * v.b.cs..][..v.k];
                for (r, t) in tails.iter_mut().enumerate() {
                    let x = &v.a.data[v.a.off + (i0 + r) * v.a.rs..][..v.k];
                    *t = (full_k..v.k).fold(0.0f64, |s, p| s.madd::<FUSED>(x[p], y[p]));
                }
            }
            let mut out = [0.0; R];
            // SAFETY: `tails` and `out` hold 4 elements.
            unsafe {
                let sum = _mm256_add_pd(sum, _mm256_loadu_pd(tails.as_ptr()));
                _mm256_storeu_pd(out.as_mut_ptr(), sum);
            }
            for (r, &x) in out.iter().enumerate() {
                v.c[v.c_off + (i0 + r) * v.rsc + j0 + q] = x;
            }
        }
    }

    /// `C ← A B` for `rsb = csa = 1`.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; the views in bounds.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dots<const FUSED: bool>(v: &mut Views<'_, '_, f64>) {
        let (full_m, full_n) = (v.m - v.m % R, v.n - v.n % 2);
        for i0 in (0..full_m).step_by(R) {
            for j0 in (0..full_n).step_by(2) {
                // SAFETY: rows `i0..i0 + 4`, columns `j0..j0 + 2` inside.
                unsafe { dots_block::<FUSED>(v, i0, j0) }
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

/// `f32`: 8 lanes a vector.
mod f32x8 {
    use super::*;

    rows_kernel!(
        f32,
        __m256,
        8,
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_set1_ps,
        _mm256_add_ps,
        _mm256_mul_ps,
        _mm256_fmadd_ps
    );

    /// Columns of `B` per `dots` block.
    const J: usize = 4;

    /// Dot products of rows `i0..i0 + 4` of `A` with columns `j0..j0 + 4`
    /// of `B`: a vector holds the 4 lanes of row `i` (low half) and row
    /// `i + 1` (high half) against one column.
    ///
    /// # Safety
    /// Those rows and columns inside the views (`rsb = csa = 1`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn dots_block<const FUSED: bool>(v: &mut Views<'_, '_, f32>, i0: usize, j0: usize) {
        let (pa, pb) = (v.a.data.as_ptr(), v.b.data.as_ptr());
        let full_k = v.k - v.k % 4;
        let mut acc = [[_mm256_setzero_ps(); J]; R / 2];
        for p0 in (0..full_k).step_by(4) {
            // SAFETY: `p0 + 4 ≤ k`, columns `j0 + q < n`, rows `i0 + r < m`.
            let y: [__m256; J] = std::array::from_fn(|q| unsafe {
                // An unaligned load, into both halves.
                let y = _mm_loadu_ps(pb.add(v.b.off + (j0 + q) * v.b.cs + p0));
                _mm256_set_m128(y, y)
            });
            for (h, acc) in acc.iter_mut().enumerate() {
                let row = |r: usize| v.a.off + (i0 + 2 * h + r) * v.a.rs + p0;
                // SAFETY: as above.
                let x = unsafe { _mm256_loadu2_m128(pa.add(row(1)), pa.add(row(0))) };
                for (o, &y) in acc.iter_mut().zip(&y) {
                    *o = madd::<FUSED>(*o, x, y);
                }
            }
        }
        for (h, acc) in acc.iter().enumerate() {
            // Lane `l` of the sums of columns `j0..j0 + 4` in one vector
            // (row `i0 + 2h` low, `i0 + 2h + 1` high): a 4 × 4 transpose
            // in each half.
            let [a0, a1, a2, a3] = *acc;
            let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpacklo_ps(a2, a3));
            let (t2, t3) = (_mm256_unpackhi_ps(a0, a1), _mm256_unpackhi_ps(a2, a3));
            let lane = [
                _mm256_shuffle_ps::<0x44>(t0, t1),
                _mm256_shuffle_ps::<0xEE>(t0, t1),
                _mm256_shuffle_ps::<0x44>(t2, t3),
                _mm256_shuffle_ps::<0xEE>(t2, t3),
            ];
            // The lanes summed in order from zero, then the tails.
            let sum = lane
                .iter()
                .fold(_mm256_setzero_ps(), |s, &l| _mm256_add_ps(s, l));
            // The tails of the 8 sums (`+0.0` when `k` is a multiple of 4,
            // as the empty fold from zero gives).
            let mut tails = [0.0f32; 8];
            if full_k < v.k {
                for (e, t) in tails.iter_mut().enumerate() {
                    let (i, j) = (i0 + 2 * h + e / 4, j0 + e % 4);
                    let x = &v.a.data[v.a.off + i * v.a.rs..][..v.k];
                    let y = &v.b.data[v.b.off + j * v.b.cs..][..v.k];
                    *t = (full_k..v.k).fold(0.0f32, |s, p| s.madd::<FUSED>(x[p], y[p]));
                }
            }
            for r in 0..2 {
                let o = v.c_off + (i0 + 2 * h + r) * v.rsc + j0;
                let out = &mut v.c[o..o + J];
                // SAFETY: `tails` holds 8 elements, `out` 4.
                unsafe {
                    let sum = _mm256_add_ps(sum, _mm256_loadu_ps(tails.as_ptr()));
                    let half = if r == 0 {
                        _mm256_castps256_ps128(sum)
                    } else {
                        _mm256_extractf128_ps::<1>(sum)
                    };
                    _mm_storeu_ps(out.as_mut_ptr(), half);
                }
            }
        }
    }

    /// `C ← A B` for `rsb = csa = 1`.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; the views in bounds.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dots<const FUSED: bool>(v: &mut Views<'_, '_, f32>) {
        let (full_m, full_n) = (v.m - v.m % R, v.n - v.n % J);
        for i0 in (0..full_m).step_by(R) {
            for j0 in (0..full_n).step_by(J) {
                // SAFETY: rows `i0..i0 + 4`, columns `j0..j0 + 4` inside.
                unsafe { dots_block::<FUSED>(v, i0, j0) }
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

/// `C ← A B` in `f64` (`csb = 1`: `rows`, else `rsb = csa = 1`: `dots`;
/// fused multiply-adds when `v.fused`).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and the views must be in bounds.
pub(super) unsafe fn product_f64(v: &mut Views<'_, '_, f64>) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (v.b.cs == 1, v.fused) {
            (true, false) => f64x4::rows::<false>(v),
            (true, true) => f64x4::rows::<true>(v),
            (false, false) => f64x4::dots::<false>(v),
            (false, true) => f64x4::dots::<true>(v),
        }
    }
}

/// `C ← A B` in `f32` (`csb = 1`: `rows`, else `rsb = csa = 1`: `dots`;
/// fused multiply-adds when `v.fused`).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and the views must be in bounds.
pub(super) unsafe fn product_f32(v: &mut Views<'_, '_, f32>) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match (v.b.cs == 1, v.fused) {
            (true, false) => f32x8::rows::<false>(v),
            (true, true) => f32x8::rows::<true>(v),
            (false, false) => f32x8::dots::<false>(v),
            (false, true) => f32x8::dots::<true>(v),
        }
    }
}
