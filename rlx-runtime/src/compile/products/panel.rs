//! Products of a few rows without packing: register-blocked loops that
//! read the operands where they are.
//!
//! `matrixmultiply` copies ("packs") both operands into aligned panels on
//! every call, which pays off for large products but dominates small ones:
//! an LSTM step's `[4, 64] · [64, 128]` packs all 8 192 elements of the
//! weight to use each 4 times. When the right operand fits in cache, these
//! kernels compute `C ← A B` straight from the strided views instead, in
//! blocks of `R` rows × `L` columns of `C` kept in registers:
//!
//! - [`rows`]: `B`'s rows contiguous (`csb = 1`): for each `p`, a row of
//!   `L` elements of `B` times `R` broadcast elements of `A` (any strides),
//!   summed over `p` in order, as the plain loop does (the same roundings);
//! - [`dots`]: `B`'s columns and `A`'s rows contiguous (`rsb = csa = 1`,
//!   a transposed weight): `R × 2` dot products, each split over 4 lanes
//!   summed at the end (a different order of the same sums).
//!
//! Where the CPU has AVX2, `panel_avx2` (with AVX-512F, `panel_avx512`)
//! computes the same sums in the
//! same order with explicit vector blocks (the same bits); these loops are
//! the fallback elsewhere.

use crate::compile::products::view::Mat;
#[cfg(target_arch = "x86_64")]
use crate::compile::products::view::Views;

/// Element types `matrixmultiply` multiplies.
pub(crate) trait Gemm:
    Copy + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + 'static
{
    const ZERO: Self;
    /// `C ← A B` through `matrixmultiply`.
    ///
    /// # Safety
    /// The pointers with the given dimensions and strides must address
    /// valid elements only, and `c` must not overlap `a` or `b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );

    /// `C ← A B` by the explicit kernels of `panel_avx512` (with `v.wide`,
    /// where they exist) or `panel_avx2` (a product that `panel::fits`):
    /// the one choice of instruction set of the panels.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA (and AVX-512F if `v.wide`), and
    /// the views of `A` and `B` must be in bounds.
    #[cfg(target_arch = "x86_64")]
    unsafe fn panel_avx2(v: &mut Views<'_, '_, Self>);
}

impl Gemm for f32 {
    const ZERO: f32 = 0.0;
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        c: *mut f32,
        rsc: isize,
        csc: isize,
    ) {
        // SAFETY: forwarded from the caller's contract (checked by `gemm`).
        unsafe { matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 0.0, c, rsc, csc) }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn panel_avx2(v: &mut Views<'_, '_, f32>) {
        #[cfg(feature = "avx512")]
        if v.wide {
            // SAFETY: forwarded from the caller's contract.
            return unsafe { crate::compile::products::panel_avx512::product_f32(v) };
        }
        // SAFETY: forwarded from the caller's contract.
        unsafe { crate::compile::products::panel_avx2::product_f32(v) }
    }
}

impl Gemm for f64 {
    const ZERO: f64 = 0.0;
    unsafe fn raw(
        m: usize,
        k: usize,
        n: usize,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        c: *mut f64,
        rsc: isize,
        csc: isize,
    ) {
        // SAFETY: forwarded from the caller's contract (checked by `gemm`).
        unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 0.0, c, rsc, csc) }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn panel_avx2(v: &mut Views<'_, '_, f64>) {
        #[cfg(feature = "avx512")]
        // SAFETY: forwarded from the caller's contract.
        if v.wide && unsafe { crate::compile::products::panel_avx512::product_f64(v) }.is_some() {
            return;
        }
        // SAFETY: forwarded from the caller's contract.
        unsafe { crate::compile::products::panel_avx2::product_f64(v) }
    }
}

/// Rows of `C` per block.
const R: usize = 4;
/// Columns (or, in [`dots`], lanes) per block.
const L: usize = 8;

/// Whether a product of these shapes and strides is computed here: `C`
/// has contiguous rows, `B` is read along a contiguous axis, and `B`
/// fits in a core's cache (`k·n ≤ 32 768` elements).
pub(crate) fn fits<T>(k: usize, n: usize, a: &Mat<'_, T>, b: &Mat<'_, T>, csc: usize) -> bool {
    csc == 1 && k * n <= 32 * 1024 && (b.cs == 1 || (b.rs == 1 && a.cs == 1))
}

/// One product `C ← A B` with `A: m × k`, `B: k × n` and `C[i, j] =
/// c[c_off + i·rsc + j]`.
struct Job<'a, T> {
    m: usize,
    k: usize,
    n: usize,
    a: Mat<'a, T>,
    b: Mat<'a, T>,
    c_off: usize,
    rsc: usize,
}

/// Every field, for destructuring at once.
type Parts<'j, 'a, T> = (
    usize,
    usize,
    usize,
    &'j Mat<'a, T>,
    &'j Mat<'a, T>,
    usize,
    usize,
);

impl<'a, T> Job<'a, T> {
    fn parts(&self) -> Parts<'_, 'a, T> {
        let j = self;
        (j.m, j.k, j.n, &j.a, &j.b, j.c_off, j.rsc)
    }
}

/// `C ← A B` for a product that [`fits`]; `c[c_off + i·rsc + j]` is `C[i, j]`.
///
/// # Panics
/// If a view reaches outside its slice (checked by the caller, `gemm`).
/// With `fused`, where the CPU has FMA, each `s + a·b` of the sums is one
/// fused multiply-add (one rounding instead of two; the same bits for
/// every split of the rows across threads, not the portable loops' bits).
pub(crate) fn product<T: Gemm>(
    mkn: (usize, usize, usize),
    a: Mat<'_, T>,
    b: Mat<'_, T>,
    c: &mut [T],
    c_off: usize,
    rsc: usize,
    fused: bool,
) {
    product_with(mkn, a, b, c, c_off, rsc, fused, true)
}

/// [`product`], with the AVX-512 kernels (`wide`, where they exist and
/// the CPU has AVX-512F) or without (the AVX2 kernels where the CPU has
/// AVX2).
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn product_with<T: Gemm>(
    (m, k, n): (usize, usize, usize),
    a: Mat<'_, T>,
    b: Mat<'_, T>,
    c: &mut [T],
    c_off: usize,
    rsc: usize,
    fused: bool,
    wide: bool,
) {
    let job = Job {
        m,
        k,
        n,
        a,
        b,
        c_off,
        rsc,
    };
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        check(&job.a, m, k);
        check(&job.b, k, n);
        let mut views = Views {
            m,
            k,
            n,
            a: job.a,
            b: job.b,
            c,
            c_off,
            rsc,
            fused,
            wide: cfg!(feature = "avx512") && wide && std::is_x86_feature_detected!("avx512f"),
        };
        // SAFETY: the CPU supports AVX2 and FMA (checked just above), and
        // AVX-512F if `wide` (checked as it is set), and the views
        // of A and B are in bounds (`check`); C's elements are reached
        // through bounds-checked slices.
        return unsafe { T::panel_avx2(&mut views) };
    }
    portable(&job, c)
}

/// The loops without explicit vectors: the fallback where the CPU lacks
/// AVX2 (and the reference of `panel_avx2`'s tests).
fn portable<T: Gemm>(job: &Job<'_, T>, c: &mut [T]) {
    if job.b.cs == 1 {
        rows(job, c)
    } else {
        dots(job, c)
    }
}

/// Panics unless every element of the `rows × cols` view `v` is inside
/// its slice: the one check the blocks' unchecked reads rely on.
fn check<T>(v: &Mat<'_, T>, rows: usize, cols: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    // Checked arithmetic: a wrapped offset must not pass for a small one.
    let last = (rows - 1)
        .checked_mul(v.rs)
        .and_then(|r| r.checked_add((cols - 1).checked_mul(v.cs)?))
        .and_then(|x| x.checked_add(v.off));
    assert!(
        last.is_some_and(|l| l < v.data.len()),
        "panel view out of bounds"
    );
}

/// `C ← A B` for `csb = 1`: blocks of `R × L` sums over `p` in order.
#[inline(always)]
fn rows<T: Gemm>(job: &Job<'_, T>, c: &mut [T]) {
    let (m, k, n, a, b, c_off, rsc) = job.parts();
    check(a, m, k);
    check(b, k, n);
    let at = |i: usize, p: usize| a.data[a.off + i * a.rs + p * a.cs];
    let (full_m, full_n) = (m - m % R, n - n % L);
    let (pa, pb) = (a.data.as_ptr(), b.data.as_ptr());
    for i0 in (0..full_m).step_by(R) {
        for j0 in (0..full_n).step_by(L) {
            let mut acc = [[T::ZERO; L]; R];
            for p in 0..k {
                let row = b.off + p * b.rs + j0;
                // SAFETY: `p < k`, `j0 + L ≤ n` and `i0 + r < m`: inside
                // the views of A and B, which `check` found in bounds.
                let brow: [T; L] = unsafe { pb.add(row).cast::<[T; L]>().read_unaligned() };
                for (r, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: as above.
                    let av = unsafe { *pa.add(a.off + (i0 + r) * a.rs + p * a.cs) };
                    for (o, &bv) in acc.iter_mut().zip(&brow) {
                        *o = *o + av * bv;
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let o = c_off + (i0 + r) * rsc + j0;
                c[o..o + L].copy_from_slice(acc);
            }
        }
    }
    // The ragged right columns and bottom rows, one element at a time.
    let edge = |i: usize, j: usize| {
        (0..k).fold(T::ZERO, |s, p| s + at(i, p) * b.data[b.off + p * b.rs + j])
    };
    for i in 0..m {
        let from = if i < full_m { full_n } else { 0 };
        for j in from..n {
            c[c_off + i * rsc + j] = edge(i, j);
        }
    }
}

/// `C ← A B` for `rsb = csa = 1`: blocks of `R × 2` dot products, each
/// over 4 lanes.
#[inline(always)]
fn dots<T: Gemm>(job: &Job<'_, T>, c: &mut [T]) {
    let (m, k, n, a, b, c_off, rsc) = job.parts();
    check(a, m, k);
    check(b, k, n);
    let (pa, pb) = (a.data.as_ptr(), b.data.as_ptr());
    const J: usize = 2;
    const W: usize = 4;
    let full_k = k - k % W;
    let arow = |i: usize| &a.data[a.off + i * a.rs..a.off + i * a.rs + k];
    let bcol = |j: usize| &b.data[b.off + j * b.cs..b.off + j * b.cs + k];
    let dot = |x: &[T], y: &[T]| {
        let mut lanes = [T::ZERO; W];
        for (xc, yc) in x[..full_k].chunks_exact(W).zip(y[..full_k].chunks_exact(W)) {
            for q in 0..W {
                lanes[q] = lanes[q] + xc[q] * yc[q];
            }
        }
        let tail = (full_k..k).fold(T::ZERO, |s, p| s + x[p] * y[p]);
        lanes.iter().fold(T::ZERO, |s, &v| s + v) + tail
    };
    let (full_m, full_n) = (m - m % R, n - n % J);
    for i0 in (0..full_m).step_by(R) {
        for j0 in (0..full_n).step_by(J) {
            // acc[r * J + q][l]: lane `l` of the dot product of row
            // `i0 + r` of A with column `j0 + q` of B.
            let mut acc = [[T::ZERO; W]; R * J];
            for p0 in (0..full_k).step_by(W) {
                // SAFETY: `p0 + W ≤ k`, `j0 + q < n` and `i0 + r < m`:
                // inside the views (`rsb = csa = 1`), which `check` found
                // in bounds.
                let y: [[T; W]; J] = std::array::from_fn(|q| {
                    let at = b.off + (j0 + q) * b.cs + p0;
                    unsafe { pb.add(at).cast::<[T; W]>().read_unaligned() }
                });
                for r in 0..R {
                    let at = a.off + (i0 + r) * a.rs + p0;
                    // SAFETY: as above.
                    let x: [T; W] = unsafe { pa.add(at).cast::<[T; W]>().read_unaligned() };
                    for q in 0..J {
                        for l in 0..W {
                            acc[r * J + q][l] = acc[r * J + q][l] + x[l] * y[q][l];
                        }
                    }
                }
            }
            for r in 0..R {
                for q in 0..J {
                    let (x, y) = (arow(i0 + r), bcol(j0 + q));
                    let tail = (full_k..k).fold(T::ZERO, |s, p| s + x[p] * y[p]);
                    c[c_off + (i0 + r) * rsc + j0 + q] =
                        acc[r * J + q].iter().fold(T::ZERO, |s, &v| s + v) + tail;
                }
            }
        }
    }
    for i in 0..m {
        let from = if i < full_m { full_n } else { 0 };
        for j in from..n {
            c[c_off + i * rsc + j] = dot(arow(i), bcol(j));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::products::view::Madd;

    /// The plain triple loop, in `f64`.
    fn reference<T: Gemm + Into<f64>>(
        (m, k, n): (usize, usize, usize),
        a: &Mat<'_, T>,
        b: &Mat<'_, T>,
    ) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let x: f64 = a.data[a.off + i * a.rs + p * a.cs].into();
                    let y: f64 = b.data[b.off + p * b.rs + j * b.cs].into();
                    c[i * n + j] += x * y;
                }
            }
        }
        c
    }

    /// The LSTM's products (`[4, 64]·[64, 128]` forward, `[4, 128]·[128,
    /// 64]ᵀ` backward, the tiny embedding and output ones) and ragged ones:
    /// rows, columns and depths that are no multiple of 4 or 8, and
    /// columns that end in each of the kernels' narrower blocks (`rows`:
    /// 4, 2 and 1 vectors, masked; `dots`: 16, then 8, then one at a time).
    const SHAPES: [(usize, usize, usize); 14] = [
        (5, 12, 27),
        (8, 20, 88),
        (4, 64, 128),
        (4, 128, 64),
        (4, 16, 32),
        (4, 32, 16),
        (5, 9, 11),
        (1, 1, 1),
        (64, 4, 128),
        (3, 17, 8),
        (9, 8, 3),
        (7, 13, 37),
        (6, 130, 70),
        (2, 5, 19),
    ];

    /// Every pairing of plain and transposed views of `data` that the
    /// panels take, for each of [`SHAPES`]: `f(dims, A, B)`.
    fn each_view<T: Gemm>(
        data: &[T],
        mut f: impl FnMut((usize, usize, usize), Mat<'_, T>, Mat<'_, T>),
    ) {
        for (m, k, n) in SHAPES {
            // A plain (offset 3) or transposed; B plain or transposed (offset 5).
            for a_t in [false, true] {
                for b_t in [false, true] {
                    let a = Mat {
                        data,
                        off: 3,
                        rs: if a_t { 1 } else { k },
                        cs: if a_t { m } else { 1 },
                    };
                    let b = Mat {
                        data,
                        off: 5,
                        rs: if b_t { 1 } else { n },
                        cs: if b_t { k } else { 1 },
                    };
                    if fits(k, n, &a, &b, 1) {
                        f((m, k, n), a, b);
                    } else {
                        // Transposed A with transposed B: left to matrixmultiply.
                        assert!(a_t && b_t);
                    }
                }
            }
        }
    }

    fn data<T: From<i16>>() -> Vec<T> {
        // Integers in -50..=50 (divided by 7 by the callers, so sums round).
        (0..20_000)
            .map(|i| T::from((i * 37 % 101) as i16 - 50))
            .collect()
    }

    /// Which kernels a test runs.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Kernels {
        /// The portable loops.
        Portable,
        /// `product` without the AVX-512 kernels: the AVX2 kernels where
        /// the CPU has AVX2, else the portable loops.
        Avx2,
        /// `product`: the AVX-512 kernels where they exist and the CPU
        /// has AVX-512F, else as `Avx2`.
        Avx512,
    }

    /// The vector kernels, narrow and wide.
    const VECTOR: [Kernels; 2] = [Kernels::Avx2, Kernels::Avx512];

    /// `C` of `kernels`, at offset 2 of a NaN-filled buffer (so an
    /// element left unwritten shows).
    fn run<T: Gemm + From<i16>>(
        (m, k, n): (usize, usize, usize),
        a: Mat<'_, T>,
        b: Mat<'_, T>,
        kernels: Kernels,
        nan: T,
    ) -> Vec<T> {
        run_fused((m, k, n), a, b, kernels, false, nan)
    }

    /// [`run`], with `product`'s fused multiply-adds when `fused`.
    fn run_fused<T: Gemm + From<i16>>(
        (m, k, n): (usize, usize, usize),
        a: Mat<'_, T>,
        b: Mat<'_, T>,
        kernels: Kernels,
        fused: bool,
        nan: T,
    ) -> Vec<T> {
        let mut c = vec![nan; m * n + 2];
        if kernels == Kernels::Portable {
            let job = Job {
                m,
                k,
                n,
                a,
                b,
                c_off: 2,
                rsc: n,
            };
            portable(&job, &mut c);
        } else {
            let wide = kernels == Kernels::Avx512;
            product_with((m, k, n), a, b, &mut c, 2, n, fused, wide);
        }
        c.drain(..2);
        c
    }

    #[test]
    fn the_portable_loops_agree_with_the_plain_loop_on_ragged_and_strided_shapes() {
        let data: Vec<f64> = data::<f64>().iter().map(|x| x / 7.0).collect();
        each_view(&data, |dims, a, b| {
            let want = reference(dims, &a, &b);
            let got = run(dims, a, b, Kernels::Portable, f64::NAN);
            for (x, y) in got.iter().zip(&want) {
                assert!(
                    (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
                    "{dims:?}: {x} vs {y}"
                );
            }
            if b.cs == 1 {
                // Same order of the same sums: the same roundings.
                assert_eq!(got, want, "{dims:?}");
            }
        });
    }

    /// The AVX2 and AVX-512 kernels (where this CPU has them; else
    /// `product` runs the narrower kernels or the portable loops, and this
    /// compares those) make the same sums in the same order as the
    /// portable loops: the same bits, in `f64` and `f32`, on values whose
    /// sums round.
    #[test]
    fn the_avx2_and_avx512_kernels_give_the_bits_of_the_portable_loops() {
        for kernels in VECTOR {
            let d64: Vec<f64> = data::<f64>().iter().map(|x| x / 7.0).collect();
            each_view(&d64, |dims, a, b| {
                let want = run(dims, a, b, Kernels::Portable, f64::NAN);
                let got = run(dims, a, b, kernels, f64::NAN);
                assert!(want.iter().all(|x| x.is_finite()));
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "f64 {kernels:?} {dims:?}");
            });
            let d32: Vec<f32> = data::<f32>().iter().map(|x| x / 7.0).collect();
            each_view(&d32, |dims, a, b| {
                let want = run(dims, a, b, Kernels::Portable, f32::NAN);
                let got = run(dims, a, b, kernels, f32::NAN);
                assert!(want.iter().all(|x| x.is_finite()));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "f32 {kernels:?} {dims:?}");
                // And both are the product (to f32 rounding).
                let exact = reference(dims, &a, &b);
                for (x, y) in got.iter().zip(&exact) {
                    assert!(
                        (f64::from(*x) - y).abs() <= 1e-4 * (1.0 + y.abs()),
                        "{dims:?}: {x} vs {y}"
                    );
                }
            });
        }
    }

    /// The fused order of the kernels, element by element: `rows` sums
    /// `a·b` over `p` in order with one rounding per multiply-add; `dots`
    /// (a transposed `B`) does so over 4 lanes (`p ≡ l` mod 4), then adds
    /// the lanes in order from zero, then the tail past the last full
    /// group of 4.
    fn fused_reference<T: Gemm + Madd>(
        (m, k, n): (usize, usize, usize),
        a: &Mat<'_, T>,
        b: &Mat<'_, T>,
    ) -> Vec<T> {
        let at = |i: usize, p: usize| a.data[a.off + i * a.rs + p * a.cs];
        let bt = |p: usize, j: usize| b.data[b.off + p * b.rs + j * b.cs];
        let mut c = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                c.push(if b.cs == 1 {
                    (0..k).fold(T::ZERO, |s, p| s.madd::<true>(at(i, p), bt(p, j)))
                } else {
                    let full = k - k % 4;
                    let mut lanes = [T::ZERO; 4];
                    for p in 0..full {
                        lanes[p % 4] = lanes[p % 4].madd::<true>(at(i, p), bt(p, j));
                    }
                    let tail = (full..k).fold(T::ZERO, |s, p| s.madd::<true>(at(i, p), bt(p, j)));
                    lanes.iter().fold(T::ZERO, |s, &l| s + l) + tail
                });
            }
        }
        c
    }

    /// With fused multiply-adds (where this CPU has AVX2 and FMA) the
    /// kernels give the bits of [`fused_reference`], at the LSTM's shapes
    /// and ragged ones; elsewhere `product` runs the portable loops. Either
    /// way the result is within the rounding bound of the portable loops'
    /// sums: `|fused − portable| ≤ 2·k·ε·Σ_p |a_ip·b_pj|` (each differs
    /// from the exact sum by at most `k·ε·Σ|a·b|`).
    #[test]
    fn the_fused_kernels_make_the_fused_sums_and_stay_within_rounding_of_the_portable_ones() {
        #[cfg(target_arch = "x86_64")]
        let has_fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        #[cfg(not(target_arch = "x86_64"))]
        let has_fma = false;
        fn check_one<T: Gemm + From<i16> + Into<f64> + Madd>(
            data: &[T],
            eps: f64,
            nan: T,
            has_fma: bool,
        ) {
            for kernels in VECTOR {
                check_kernels(data, eps, nan, has_fma, kernels);
            }
        }
        fn check_kernels<T: Gemm + From<i16> + Into<f64> + Madd>(
            data: &[T],
            eps: f64,
            nan: T,
            has_fma: bool,
            kernels: Kernels,
        ) {
            each_view(data, |dims, a, b| {
                let got = run_fused(dims, a, b, kernels, true, nan);
                let portable = run(dims, a, b, Kernels::Portable, nan);
                let (m, k, n) = dims;
                if has_fma {
                    let want = fused_reference(dims, &a, &b);
                    let bits = |v: &[T]| v.iter().map(|&x| x.into().to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{kernels:?} {dims:?}");
                } else {
                    let bits = |v: &[T]| v.iter().map(|&x| x.into().to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&portable), "{dims:?}");
                }
                for i in 0..m {
                    for j in 0..n {
                        let abs: f64 = (0..k)
                            .map(|p| {
                                let x: f64 = a.data[a.off + i * a.rs + p * a.cs].into();
                                let y: f64 = b.data[b.off + p * b.rs + j * b.cs].into();
                                (x * y).abs()
                            })
                            .sum();
                        let (x, y): (f64, f64) =
                            (got[i * n + j].into(), portable[i * n + j].into());
                        assert!(
                            (x - y).abs() <= 2.0 * k as f64 * eps * abs,
                            "{dims:?} ({i}, {j}): {x} vs {y}"
                        );
                    }
                }
            });
        }
        let d64: Vec<f64> = data::<f64>().iter().map(|x| x / 7.0).collect();
        check_one(&d64, f64::EPSILON, f64::NAN, has_fma);
        let d32: Vec<f32> = data::<f32>().iter().map(|x| x / 7.0).collect();
        check_one(&d32, f64::from(f32::EPSILON), f32::NAN, has_fma);
    }
}
