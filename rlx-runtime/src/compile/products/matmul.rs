//! Matrix products: batched, broadcasting, strided.
//!
//! Every product goes through [`gemm`], the one wrapper over
//! `matrixmultiply::{sgemm, dgemm}`. Operands are strided views, so a
//! `Transpose` feeding a `MatMul` is read in place through swapped strides
//! (the planner never materialises it), and broadcast batch axes have
//! stride 0. `f16`/`bf16` operands are converted to `f32` scratch first.
//!
//! Large products split the rows of `C` across threads ([`product`]),
//! bit-identical for every thread count.
//!
//! Tiny products (`m·k·n ≤ SMALL`) use a plain loop instead:
//! `matrixmultiply` allocates its packing buffer on every call, which
//! would cost more than such a product and break the no-allocation
//! guarantee of warm runs on small (physics-sized) matrices. Products
//! of a few rows whose right operand fits in cache (an LSTM step's) skip
//! the packing too: see `panel` and [`Kernel::of`].

use half::{bf16, f16};
use rlx_core::DType;

use crate::compile::base::env::{Env, Val};
use crate::compile::base::parallel;
use crate::compile::products::panel::Gemm;
use crate::compile::products::view::Mat;
use crate::storage::Storage;

/// Largest `m·k·n` computed by the plain loop.
pub(crate) const SMALL: usize = 16 * 16 * 16;

/// A strided matrix operand.
#[derive(Clone, Debug)]
pub(crate) struct MatView {
    pub(crate) val: Val,
    /// Offset of the matrix (of batch 0) in the value's storage.
    pub(crate) off: usize,
    /// Element stride per output batch axis (0 where broadcast).
    pub(crate) batch_strides: Vec<usize>,
    /// Row stride.
    pub(crate) rs: usize,
    /// Column stride.
    pub(crate) cs: usize,
}

/// `out[b] = a[b] · b[b]` for every batch index `b`.
#[derive(Clone, Debug)]
pub(crate) struct MatMulStep {
    pub(crate) a: MatView,
    pub(crate) b: MatView,
    pub(crate) batch_dims: Vec<usize>,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) dtype: DType,
}

/// Last element index a `rows x cols` strided matrix touches, if any.
fn last(off: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Option<usize> {
    (rows > 0 && cols > 0).then(|| off + (rows - 1) * rs + (cols - 1) * cs)
}

/// Whether a product is tiny: computed by the plain loop of [`gemm`].
pub(crate) fn is_tiny(m: usize, k: usize, n: usize) -> bool {
    k == 0 || m.saturating_mul(k).saturating_mul(n) <= SMALL
}

/// Most rows of `C` a product may have for the panel kernels to take it
/// when it is not tiny. The panels skip packing (and `matrixmultiply`'s
/// allocation of its packing buffer) but run at a fraction of the speed
/// of its FMA kernels, slower still on ragged edges (columns past a
/// multiple of 8, rows past a multiple of 4, computed one element at a
/// time): they pay for a few rows (an LSTM step's 4), not for an MLP's
/// products (`[64, 256] · [256, 10]` and its gradients took 10% of the
/// MLP's time on the panels, about 1% of its multiply-adds).
pub(crate) const PANEL_ROWS: usize = 16;

/// The kernel computing a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// The plain triple loop (tiny products).
    Plain,
    /// The register-blocked loops of `panel`, without packing, with the
    /// plain loop's roundings (tiny products).
    Panel,
    /// The same with fused multiply-adds where the CPU has FMA (the
    /// products that are not tiny: like `matrixmultiply`'s kernels, which
    /// fuse them too, they need not keep the plain loop's roundings).
    PanelFused,
    /// `matrixmultiply`.
    Packed,
}

impl Kernel {
    /// The kernel of a whole `m x k x n` product, `C` with column stride
    /// `csc`. It is chosen once per product, so the row parts of a product
    /// split across threads take the kernel of the whole (the same bits).
    /// Tiny products take the panel kernels only where they keep the plain
    /// loop's order of sums.
    pub(crate) fn of<T>(
        m: usize,
        k: usize,
        n: usize,
        a: &Mat<'_, T>,
        b: &Mat<'_, T>,
        csc: usize,
    ) -> Kernel {
        let tiny = is_tiny(m, k, n);
        let panel = k > 0
            && crate::compile::products::panel::fits(k, n, a, b, csc)
            && if tiny { b.cs == 1 } else { m <= PANEL_ROWS };
        match (panel, tiny) {
            (true, true) => Kernel::Panel,
            (true, false) => Kernel::PanelFused,
            (false, true) => Kernel::Plain,
            (false, false) => Kernel::Packed,
        }
    }
}

/// `C ← A B` with `A: m x k`, `B: k x n` and `C: m x n` at `c_off` with
/// strides `rsc`, `csc`, by `kernel` (see [`Kernel::of`]).
///
/// # Panics
/// If a view reaches outside its slice (a planner bug, never user input).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Gemm>(
    kernel: Kernel,
    (m, k, n): (usize, usize, usize),
    a: Mat<'_, T>,
    b: Mat<'_, T>,
    c: &mut [T],
    c_off: usize,
    rsc: usize,
    csc: usize,
) {
    let in_bounds = |l: Option<usize>, len: usize| l.is_none_or(|l| l < len);
    assert!(
        in_bounds(last(a.off, m, k, a.rs, a.cs), a.data.len())
            && in_bounds(last(b.off, k, n, b.rs, b.cs), b.data.len())
            && in_bounds(last(c_off, m, n, rsc, csc), c.len()),
        "matmul view out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    match kernel {
        Kernel::Panel => {
            crate::compile::products::panel::product((m, k, n), a, b, c, c_off, rsc, false)
        }
        Kernel::PanelFused => {
            crate::compile::products::panel::product((m, k, n), a, b, c, c_off, rsc, true)
        }
        Kernel::Plain => plain((m, k, n), &a, &b, c, c_off, (rsc, csc)),
        Kernel::Packed => {
            // Strides are at most the slice lengths, which fit in `isize`.
            let s = |x: usize| x as isize;
            // SAFETY: the assertion above shows that every element addressed
            // through (offset, dims, strides) lies inside `a.data`, `b.data` and
            // `c`; `c` is a unique borrow, so it does not overlap the shared
            // borrows `a` and `b`.
            unsafe {
                T::raw(
                    m,
                    k,
                    n,
                    a.data.as_ptr().add(a.off),
                    s(a.rs),
                    s(a.cs),
                    b.data.as_ptr().add(b.off),
                    s(b.rs),
                    s(b.cs),
                    c.as_mut_ptr().add(c_off),
                    s(rsc),
                    s(csc),
                )
            }
        }
    }
}

/// The plain loop's sums: `C[i, j] = Σ_p A[i, p]·B[p, j]` added in order
/// of `p` from zero, for four columns at a time (four independent chains
/// instead of one). The views are in bounds (asserted by [`gemm`]).
fn plain<T: Gemm>(
    (m, k, n): (usize, usize, usize),
    a: &Mat<'_, T>,
    b: &Mat<'_, T>,
    c: &mut [T],
    c_off: usize,
    (rsc, csc): (usize, usize),
) {
    if rows_of_transposed((m, k, n), a, b, c, c_off, (rsc, csc)) {
        return;
    }
    const Q: usize = 4;
    let (pa, pb) = (a.data.as_ptr(), b.data.as_ptr());
    for i in 0..m {
        let mut j0 = 0;
        while j0 < n {
            let cols = (n - j0).min(Q);
            let mut s = [T::ZERO; Q];
            for p in 0..k {
                // SAFETY: `i < m`, `p < k`, `j0 + q < n`: inside the views
                // of A and B, which `gemm` asserted in bounds.
                let av = unsafe { *pa.add(a.off + i * a.rs + p * a.cs) };
                let bp = b.off + p * b.rs + j0 * b.cs;
                for (q, s) in s.iter_mut().enumerate().take(cols) {
                    // SAFETY: as above.
                    *s = *s + av * unsafe { *pb.add(bp + q * b.cs) };
                }
            }
            for (q, &s) in s.iter().enumerate().take(cols) {
                c[c_off + i * rsc + (j0 + q) * csc] = s;
            }
            j0 += cols;
        }
    }
}

/// Most elements of a transposed right operand that
/// [`rows_of_transposed`] copies (on the stack).
const TRANSPOSED_MAX: usize = 1024;

/// A tiny product with a transposed right operand (`rsb = 1`, as a
/// backward product `dz · Wᵀ` reads its weight) by the panels' `rows`
/// kernel on a copy of `B` with contiguous rows: the sums of the plain
/// loop, over `p` in order from zero with a multiply then an add (the same
/// bits), at vector width instead of one element at a time. False, having
/// done nothing, for other products (`C` must have contiguous rows, `B`
/// at most [`TRANSPOSED_MAX`] elements).
fn rows_of_transposed<T: Gemm>(
    (m, k, n): (usize, usize, usize),
    a: &Mat<'_, T>,
    b: &Mat<'_, T>,
    c: &mut [T],
    c_off: usize,
    (rsc, csc): (usize, usize),
) -> bool {
    if b.cs == 1 || b.rs != 1 || csc != 1 || k == 0 || k * n > TRANSPOSED_MAX {
        return false;
    }
    // Uninitialised (a tiny product's time would go into zeroing it):
    // the first `k·n` elements are written below, and only they are read.
    let mut rows = [std::mem::MaybeUninit::<T>::uninit(); TRANSPOSED_MAX];
    for (p, row) in rows[..k * n].chunks_exact_mut(n).enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            x.write(b.data[b.off + p + j * b.cs]);
        }
    }
    // SAFETY: the loops above wrote each of the first `k·n` elements
    // (`k` rows of `n`); `MaybeUninit<T>` has the layout of `T`.
    let rows: &[T] = unsafe { std::slice::from_raw_parts(rows.as_ptr().cast::<T>(), k * n) };
    let bt = Mat {
        data: rows,
        off: 0,
        rs: n,
        cs: 1,
    };
    if !crate::compile::products::panel::fits(k, n, a, &bt, csc) {
        return false;
    }
    crate::compile::products::panel::product((m, k, n), *a, bt, c, c_off, rsc, false);
    true
}

/// Multiply-adds one thread's part of a product gets at least: below
/// this, waking a worker costs more than the work it takes over.
pub(crate) const MIN_PART_WORK: usize = 1 << 19;

/// Rows of `C` are dealt to parts in whole groups of this many (the
/// height of `matrixmultiply`'s register tiles).
const ROW_GROUP: usize = 8;

/// How many parts a product of `m·k·n` multiply-adds is split into (by
/// rows of `C`): 1 for tiny products and below the threshold.
pub(crate) fn row_parts(m: usize, k: usize, n: usize) -> usize {
    let work = m.saturating_mul(k).saturating_mul(n);
    if is_tiny(m, k, n) || work < 2 * MIN_PART_WORK {
        return 1;
    }
    parallel::num_threads()
        .min(work / MIN_PART_WORK)
        .min(m.div_ceil(ROW_GROUP))
        .max(1)
}

/// `C ← A B` for a row-major `c: m x n` (the layout of every product's
/// output), its rows split across threads above a size threshold.
///
/// Each part multiplies its own rows of `A` by all of `B` with the kernel
/// chosen for the whole product ([`Kernel::of`]), which computes every
/// element of `C` from its row and column alone in an order fixed by `k`:
/// every thread count gives the same bits (tested). Tiny products take
/// the plain loop of [`gemm`], never split.
pub(crate) fn product<T: Gemm + Send + Sync>(
    (m, k, n): (usize, usize, usize),
    a: Mat<'_, T>,
    b: Mat<'_, T>,
    c: &mut [T],
) {
    let kernel = Kernel::of(m, k, n, &a, &b, 1);
    let parts = row_parts(m, k, n);
    if parts <= 1 {
        return gemm(kernel, (m, k, n), a, b, c, 0, n, 1);
    }
    let groups = m.div_ceil(ROW_GROUP);
    let row = |p: usize| (groups * p / parts * ROW_GROUP).min(m);
    parallel::for_each_chunk_mut(&mut c[..m * n], parts, &|p| row(p) * n, &|p, chunk| {
        let (r0, r1) = (row(p), row(p + 1));
        let a = Mat {
            off: a.off + r0 * a.rs,
            ..a
        };
        gemm(kernel, (r1 - r0, k, n), a, b, chunk, 0, n, 1)
    });
}

/// `f32` scratch for half-precision products.
#[derive(Debug, Default)]
pub(crate) struct HalfScratch {
    pub(crate) a: Vec<f32>,
    pub(crate) b: Vec<f32>,
    pub(crate) c: Vec<f32>,
}

impl MatMulStep {
    fn batches(&self) -> usize {
        self.batch_dims.iter().product()
    }

    /// Offsets of batch `bi` in `a` and `b`.
    fn offsets(&self, mut bi: usize) -> (usize, usize) {
        let (mut oa, mut ob) = (0, 0);
        for d in (0..self.batch_dims.len()).rev() {
            let i = bi % self.batch_dims[d];
            bi /= self.batch_dims[d];
            oa += i * self.a.batch_strides[d];
            ob += i * self.b.batch_strides[d];
        }
        (oa, ob)
    }

    /// Scratch sizes needed for half precision: `(m·k, k·n, m·n)`.
    pub(crate) fn half_scratch(&self) -> (usize, usize, usize) {
        match self.dtype {
            DType::F16 | DType::BF16 => (self.m * self.k, self.k * self.n, self.m * self.n),
            DType::F32 | DType::F64 | DType::I64 | DType::Bool | DType::C32 | DType::C64 => {
                (0, 0, 0)
            }
        }
    }

    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage, half: &mut HalfScratch) {
        let (m, k, n) = (self.m, self.k, self.n);
        let (a, b) = (env.get(self.a.val), env.get(self.b.val));
        let mat = |val: &MatView, off| (val.off + off, val.rs, val.cs);
        for bi in 0..self.batches() {
            let (oa, ob) = self.offsets(bi);
            let c_off = bi * m * n;
            let (ao, ars, acs) = mat(&self.a, oa);
            let (bo, brs, bcs) = mat(&self.b, ob);
            match (a, b, &mut *out) {
                (Storage::F32(a), Storage::F32(b), Storage::F32(c)) => product(
                    (m, k, n),
                    Mat {
                        data: a,
                        off: ao,
                        rs: ars,
                        cs: acs,
                    },
                    Mat {
                        data: b,
                        off: bo,
                        rs: brs,
                        cs: bcs,
                    },
                    &mut c[c_off..],
                ),
                (Storage::F64(a), Storage::F64(b), Storage::F64(c)) => product(
                    (m, k, n),
                    Mat {
                        data: a,
                        off: ao,
                        rs: ars,
                        cs: acs,
                    },
                    Mat {
                        data: b,
                        off: bo,
                        rs: brs,
                        cs: bcs,
                    },
                    &mut c[c_off..],
                ),
                (Storage::F16(a), Storage::F16(b), Storage::F16(c)) => {
                    half_product(
                        half,
                        (m, k, n),
                        (a, ao, ars, acs),
                        (b, bo, brs, bcs),
                        f16::to_f32,
                    );
                    for (o, &v) in c[c_off..c_off + m * n].iter_mut().zip(&half.c) {
                        *o = f16::from_f32(v);
                    }
                }
                (Storage::BF16(a), Storage::BF16(b), Storage::BF16(c)) => {
                    half_product(
                        half,
                        (m, k, n),
                        (a, ao, ars, acs),
                        (b, bo, brs, bcs),
                        bf16::to_f32,
                    );
                    for (o, &v) in c[c_off..c_off + m * n].iter_mut().zip(&half.c) {
                        *o = bf16::from_f32(v);
                    }
                }
                // Shape inference admits only equal float dtypes.
                _ => unreachable!("matmul operands checked by shape inference"),
            }
        }
    }
}

/// Converts both views to contiguous `f32` scratch and multiplies into `half.c`.
fn half_product<T: Copy>(
    half: &mut HalfScratch,
    (m, k, n): (usize, usize, usize),
    (a, ao, ars, acs): (&[T], usize, usize, usize),
    (b, bo, brs, bcs): (&[T], usize, usize, usize),
    to: fn(T) -> f32,
) {
    for i in 0..m {
        for p in 0..k {
            half.a[i * k + p] = to(a[ao + i * ars + p * acs]);
        }
    }
    for p in 0..k {
        for j in 0..n {
            half.b[p * n + j] = to(b[bo + p * brs + j * bcs]);
        }
    }
    let a = Mat {
        data: &half.a[..],
        off: 0,
        rs: k,
        cs: 1,
    };
    let b = Mat {
        data: &half.b[..],
        off: 0,
        rs: n,
        cs: 1,
    };
    gemm(
        Kernel::of(m, k, n, &a, &b, 1),
        (m, k, n),
        a,
        b,
        &mut half.c,
        0,
        n,
        1,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row-major (or, `t`, transposed) views of an `r x c` matrix.
    fn view(data: &[f32], r: usize, c: usize, t: bool) -> Mat<'_, f32> {
        let (rs, cs) = if t { (1, r) } else { (c, 1) };
        Mat {
            data,
            off: 0,
            rs,
            cs,
        }
    }

    /// The plain loop as it was written before its columns were blocked:
    /// `C` zeroed, then `C[i, j] += A[i, p]·B[p, j]` for each `p` in order.
    fn plain_reference(
        (m, k, n): (usize, usize, usize),
        a: &Mat<'_, f32>,
        b: &Mat<'_, f32>,
    ) -> Vec<f32> {
        let mut c = vec![0.0f32; m * n];
        for i in 0..m {
            for p in 0..k {
                let av = a.data[a.off + i * a.rs + p * a.cs];
                for j in 0..n {
                    c[i * n + j] += av * b.data[b.off + p * b.rs + j * b.cs];
                }
            }
        }
        c
    }

    #[test]
    fn the_plain_kernel_keeps_the_order_of_its_sums() {
        let data: Vec<f32> = (0..4096)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        for (m, k, n) in [
            (4, 16, 32),
            (4, 32, 16),
            (3, 5, 7),
            (1, 1, 1),
            (5, 0, 3),
            (7, 9, 13),
        ] {
            for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
                let (a, b) = (view(&data, m, k, ta), view(&data[7..], k, n, tb));
                let mut c = vec![f32::NAN; m * n];
                gemm(Kernel::Plain, (m, k, n), a, b, &mut c, 0, n, 1);
                let want = plain_reference((m, k, n), &a, &b);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&c), bits(&want), "{m}x{k}x{n} {ta} {tb}");
                // A transposed B goes through the panels'
                // rows on a copy of B: the same bits as the plain loop.
                let mut c = vec![f32::NAN; m * n];
                let copied = rows_of_transposed((m, k, n), &a, &b, &mut c, 0, (n, 1));
                assert_eq!(copied, b.cs != 1 && k > 0, "{m}x{k}x{n} {ta} {tb}");
                if copied {
                    assert_eq!(bits(&c), bits(&want), "{m}x{k}x{n} {ta} {tb}");
                }
            }
        }
    }

    #[test]
    fn kernels_by_shape() {
        let data = vec![0.0f32; 784 * 256];
        let of = |(m, k, n): (usize, usize, usize), ta: bool, tb: bool| {
            Kernel::of(m, k, n, &view(&data, m, k, ta), &view(&data, k, n, tb), 1)
        };
        // An LSTM step's gates: few rows, a weight that fits in cache.
        assert_eq!(of((4, 64, 128), false, false), Kernel::PanelFused);
        assert_eq!(of((4, 64, 128), false, true), Kernel::PanelFused);
        // An MLP's weight gradients `xᵀ · dz`: many rows, much work.
        assert_eq!(of((784, 64, 256), true, false), Kernel::Packed);
        assert_eq!(of((256, 64, 256), true, false), Kernel::Packed);
        // Many rows, little work: packed too.
        assert_eq!(of((256, 64, 10), true, false), Kernel::Packed);
        assert_eq!(of((64, 10, 256), false, true), Kernel::Packed);
        // A right operand too large for the panels.
        assert_eq!(of((4, 784, 256), false, false), Kernel::Packed);
        // Tiny: the panels only where they keep the plain loop's sums.
        assert_eq!(of((3, 5, 7), false, false), Kernel::Panel);
        assert_eq!(of((3, 5, 7), false, true), Kernel::Plain);
        assert_eq!(of((3, 0, 7), false, false), Kernel::Plain);
    }
}
