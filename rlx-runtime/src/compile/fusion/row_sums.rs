//! Folded sums over rows of three `f64`s, the shape of 3-D coordinates:
//!
//! - [`sum_rows3`]: each row into its own accumulator, consecutive ones
//!   (`sum(square(d), [2])` of an `[n, m, 3]` operand: squared distances
//!   of all pairs of points), four rows a step;
//! - [`sum_sweeps3`]: the rows of a sweep into one row of three
//!   accumulators (`sum(g, [1])` of an `[n, m, 3]` operand: the force on
//!   each point), up to four sweeps with disjoint accumulators in
//!   lockstep. One sweep is a chain of dependent additions; four run in
//!   the time of one.
//!
//! Each accumulator takes exactly the operations of [`Sink`]'s short-row
//! loops, in the same order, so the bits are the same. With `p` the
//! sink's [`Pre`] op, a reduced row is `(((acc + 0) + p(x₀)) + p(x₁)) +
//! p(x₂)`, and a kept row adds `p(x_k)` to accumulator `k`, row after
//! row. The AVX2 code of [`sum_rows3`] loads four rows (twelve values) as
//! three vectors and regroups them into the vectors of first, second and
//! third elements with blends and one permute each; that of
//! [`sum_sweeps3`] keeps each sweep's three accumulators in one vector.
//! The portable code is the row loops themselves.
//!
//! [`Sink`]: crate::compile::fusion::fold::Sink

use crate::compile::base::math::Pre;

/// Row elements.
const N: usize = 3;

/// `acc[j] = (((acc[j] + 0) + p(v[3j])) + p(v[3j+1])) + p(v[3j+2])` for
/// every row `j` of `vals` (`vals.len() == 3 · acc.len()`).
pub(crate) fn sum_rows3(vals: &[f64], acc: &mut [f64], pre: Pre) {
    debug_assert_eq!(vals.len(), N * acc.len());
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::sum_rows3(vals, acc, pre) };
    }
    sum_rows3_portable(vals, acc, pre)
}

/// The row loop: one accumulator at a time.
fn sum_rows3_portable(vals: &[f64], acc: &mut [f64], pre: Pre) {
    let p = |v: f64| pre.apply(v);
    for (a, row) in acc.iter_mut().zip(vals.chunks_exact(N)) {
        *a = ((*a + 0.0 + p(row[0])) + p(row[1])) + p(row[2]);
    }
}

/// For each sweep `(at, o)` of `sweeps`: `acc[o + k] = acc[o + k] + p(v)`
/// for the element `k` of each of the `rows` rows of three at `vals[at..]`,
/// row after row. The sweeps' accumulator rows `o..o + 3` must be
/// disjoint.
pub(crate) fn sum_sweeps3(
    vals: &[f64],
    sweeps: &[(usize, usize)],
    rows: usize,
    acc: &mut [f64],
    pre: Pre,
) {
    debug_assert!(sweeps
        .iter()
        .all(|&(at, o)| at + N * rows <= vals.len() && o + N <= acc.len()));
    debug_assert!(sweeps
        .iter()
        .enumerate()
        .all(|(i, a)| sweeps[..i].iter().all(|b| a.1.abs_diff(b.1) >= N)));
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { wide::sum_sweeps3(vals, sweeps, rows, acc, pre) };
    }
    sum_sweeps3_portable(vals, sweeps, rows, acc, pre)
}

/// The kept-row loop: one sweep at a time.
fn sum_sweeps3_portable(
    vals: &[f64],
    sweeps: &[(usize, usize)],
    rows: usize,
    acc: &mut [f64],
    pre: Pre,
) {
    let p = |v: f64| pre.apply(v);
    for &(at, o) in sweeps {
        let mut a = [acc[o], acc[o + 1], acc[o + 2]];
        for row in vals[at..at + N * rows].chunks_exact(N) {
            for k in 0..N {
                a[k] += p(row[k]);
            }
        }
        acc[o..o + N].copy_from_slice(&a);
    }
}

#[cfg(target_arch = "x86_64")]
mod wide {
    use super::{sum_rows3_portable, Pre, N};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_rows3(vals: &[f64], acc: &mut [f64], pre: Pre) {
        match pre {
            Pre::Id => quads(vals, acc, pre, |x| x),
            // `-x` flips the sign bit, as the scalar negation does.
            Pre::Neg => quads(vals, acc, pre, |x| _mm256_xor_pd(x, _mm256_set1_pd(-0.0))),
            Pre::Square => quads(vals, acc, pre, |x| _mm256_mul_pd(x, x)),
        }
    }

    /// # Safety
    /// The CPU must support AVX2; the sweeps lie within `vals` and `acc`
    /// (see [`super::sum_sweeps3`]).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_sweeps3(
        vals: &[f64],
        sweeps: &[(usize, usize)],
        rows: usize,
        acc: &mut [f64],
        pre: Pre,
    ) {
        macro_rules! with {
            ($p:expr) => {{
                let mut groups = sweeps.chunks_exact(4);
                for g in groups.by_ref() {
                    // SAFETY: as this function's.
                    unsafe { lockstep::<4>(vals, g.try_into().unwrap(), rows, acc, $p) };
                }
                for &s in groups.remainder() {
                    // SAFETY: as this function's.
                    unsafe { lockstep::<1>(vals, [s], rows, acc, $p) };
                }
            }};
        }
        match pre {
            Pre::Id => with!(|x| x),
            Pre::Neg => with!(|x| _mm256_xor_pd(x, _mm256_set1_pd(-0.0))),
            Pre::Square => with!(|x: __m256d| _mm256_mul_pd(x, x)),
        }
    }

    /// `S` sweeps in lockstep, each one's three accumulators in lanes
    /// 0..3 of a vector (lane 3 unused); rows are read with a masked load,
    /// which touches nothing past the row.
    #[inline(always)]
    unsafe fn lockstep<const S: usize>(
        vals: &[f64],
        sweeps: [(usize, usize); S],
        rows: usize,
        acc: &mut [f64],
        p: impl Fn(__m256d) -> __m256d,
    ) {
        // SAFETY (whole body): the caller's: every row `at + 3j..at + 3j +
        // 3` (`j < rows`) lies in `vals`, every `o..o + 3` in `acc`; the
        // mask keeps lane 3 from being read or written.
        unsafe {
            let mask = _mm256_setr_epi64x(-1, -1, -1, 0);
            let mut a: [__m256d; S] =
                std::array::from_fn(|s| _mm256_maskload_pd(acc.as_ptr().add(sweeps[s].1), mask));
            for j in 0..rows {
                for s in 0..S {
                    let v = _mm256_maskload_pd(vals.as_ptr().add(sweeps[s].0 + N * j), mask);
                    a[s] = _mm256_add_pd(a[s], p(v));
                }
            }
            for s in 0..S {
                _mm256_maskstore_pd(acc.as_mut_ptr().add(sweeps[s].1), mask, a[s]);
            }
        }
    }

    /// Four rows a step with `p` applied to each element vector, then the
    /// rows left over by the portable loop.
    #[inline(always)]
    unsafe fn quads(vals: &[f64], acc: &mut [f64], pre: Pre, p: impl Fn(__m256d) -> __m256d) {
        let quads = acc.len() / 4;
        for q in 0..quads {
            // SAFETY: rows `4q..4q + 4` exist: `12q + 12 <= vals.len()`
            // and `4q + 4 <= acc.len()`.
            unsafe {
                let v = vals.as_ptr().add(4 * N * q);
                let (v0, v1, v2) = (
                    _mm256_loadu_pd(v),
                    _mm256_loadu_pd(v.add(4)),
                    _mm256_loadu_pd(v.add(8)),
                );
                // v0 = x0 x1 x2 x3, v1 = x4 x5 x6 x7, v2 = x8 x9 x10 x11.
                // First elements x0 x3 x6 x9: blend to x0 x9 x6 x3, then
                // permute lanes (0, 3, 2, 1).
                let t = _mm256_blend_pd::<0b0010>(_mm256_blend_pd::<0b0100>(v0, v1), v2);
                let first = _mm256_permute4x64_pd::<0b01_10_11_00>(t);
                // Second elements x1 x4 x7 x10: blend to x4 x1 x10 x7, then
                // swap within each half.
                let t = _mm256_blend_pd::<0b0100>(_mm256_blend_pd::<0b1001>(v0, v1), v2);
                let second = _mm256_permute_pd::<0b0101>(t);
                // Third elements x2 x5 x8 x11: blend to x8 x5 x2 x11, then
                // permute lanes (2, 1, 0, 3).
                let t = _mm256_blend_pd::<0b1001>(_mm256_blend_pd::<0b0010>(v0, v1), v2);
                let third = _mm256_permute4x64_pd::<0b11_00_01_10>(t);
                let a = acc.as_mut_ptr().add(4 * q);
                let mut s = _mm256_add_pd(_mm256_loadu_pd(a), _mm256_setzero_pd());
                s = _mm256_add_pd(s, p(first));
                s = _mm256_add_pd(s, p(second));
                s = _mm256_add_pd(s, p(third));
                _mm256_storeu_pd(a, s);
            }
        }
        sum_rows3_portable(&vals[4 * N * quads..], &mut acc[4 * quads..], pre);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with signed zeros, infinities, a NaN, subnormals and
    /// ordinary numbers, `len` of them.
    fn values(len: usize, seed: u64) -> Vec<f64> {
        let special = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            5e-324,
            -1e-310,
        ];
        let mut s = seed;
        (0..len)
            .map(|k| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if k % 7 == 3 {
                    special[(s >> 33) as usize % special.len()]
                } else {
                    ((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 8.0
                }
            })
            .collect()
    }

    /// The bits, with every NaN alike (LLVM does not promise which NaN
    /// an addition of two returns).
    fn nan_free_bits(v: &[f64]) -> Vec<Option<u64>> {
        v.iter()
            .map(|x| (!x.is_nan()).then(|| x.to_bits()))
            .collect()
    }

    #[test]
    fn every_pre_op_and_length_gives_the_row_loops_bits() {
        for pre in [Pre::Id, Pre::Neg, Pre::Square] {
            for rows in [0, 1, 3, 4, 5, 8, 11, 64, 341] {
                let vals = values(N * rows, rows as u64 + 1);
                let start = values(rows, 99);
                let mut want = start.clone();
                sum_rows3_portable(&vals, &mut want, pre);
                let mut got = start.clone();
                sum_rows3(&vals, &mut got, pre);
                assert_eq!(
                    nan_free_bits(&got),
                    nan_free_bits(&want),
                    "{pre:?}, {rows} rows"
                );
            }
        }
    }

    #[test]
    fn sweeps_in_lockstep_give_the_kept_row_loops_bits() {
        // Sweeps of `rows` rows laid out one after another, their
        // accumulator rows in reverse order with gaps; 1 to 9 sweeps (two groups
        // of four and a remainder).
        for pre in [Pre::Id, Pre::Neg, Pre::Square] {
            for (n, rows) in [(1, 1), (3, 5), (4, 64), (5, 7), (9, 2), (4, 0)] {
                let vals = values(N * rows * n + 2, (n * rows) as u64);
                let sweeps: Vec<_> = (0..n)
                    .map(|s| (N * rows * s + 1, 7 * (n - 1 - s)))
                    .collect();
                let start = values(7 * n + N, 5);
                let mut want = start.clone();
                sum_sweeps3_portable(&vals, &sweeps, rows, &mut want, pre);
                let mut got = start.clone();
                sum_sweeps3(&vals, &sweeps, rows, &mut got, pre);
                assert_eq!(
                    nan_free_bits(&got),
                    nan_free_bits(&want),
                    "{pre:?}, {n} x {rows}"
                );
            }
        }
    }

    #[test]
    fn the_loops_are_sums_in_order() {
        // Independent of the code above: plain left-to-right sums.
        let mut acc = [1.0, 2.0, 3.0, 0.0, 0.5, 0.0, 0.0];
        let vals = [
            1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.25, 0.25, 0.25, 0.5, 0.5, 0.5,
        ];
        sum_sweeps3(&vals, &[(0, 0), (6, 4)], 2, &mut acc, Pre::Neg);
        assert_eq!(acc, [-4.0, -5.0, -6.0, 0.0, -0.25, -0.75, -0.75]);
        let vals = [1.0, 2.0, 3.0, -4.0, 0.5, 0.25];
        let mut acc = [10.0, -0.0];
        sum_rows3(&vals, &mut acc, Pre::Square);
        assert_eq!(acc, [10.0 + 1.0 + 4.0 + 9.0, 16.0 + 0.25 + 0.0625]);
        let mut acc = [-0.0, -0.0];
        sum_rows3(&[0.0; 6], &mut acc, Pre::Neg);
        // -0 + 0 = +0, then + (-0) stays +0.
        assert_eq!(acc.map(f64::to_bits), [0.0f64.to_bits(); 2]);
    }
}
