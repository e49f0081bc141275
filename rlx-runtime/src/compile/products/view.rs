//! The types the product kernels share, below every kernel: [`Mat`] (a
//! strided operand), [`Madd`] (the multiply-add of the panels, fused or
//! not), [`Views`] (one product as the x86 panels take it).

/// A strided matrix: `data[off + i·rs + j·cs]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) off: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

/// `s + a·b`: a multiply then an add (two roundings, the portable loops'
/// formula), or with `FUSED` one fused multiply-add (one rounding).
pub(crate) trait Madd: Copy {
    fn madd<const FUSED: bool>(self, a: Self, b: Self) -> Self;
}

impl Madd for f32 {
    #[inline]
    fn madd<const FUSED: bool>(self, a: f32, b: f32) -> f32 {
        if FUSED {
            a.mul_add(b, self)
        } else {
            self + a * b
        }
    }
}

impl Madd for f64 {
    #[inline]
    fn madd<const FUSED: bool>(self, a: f64, b: f64) -> f64 {
        if FUSED {
            a.mul_add(b, self)
        } else {
            self + a * b
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// One product: `C ← A B`, `A: m × k`, `B: k × n`, `C[i, j] = c[c_off +
/// i·rsc + j]`; the views are in bounds (checked by the caller) and `c`
/// holds every `C[i, j]`.
pub(crate) struct Views<'a, 'c, T> {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) a: Mat<'a, T>,
    pub(crate) b: Mat<'a, T>,
    pub(crate) c: &'c mut [T],
    pub(crate) c_off: usize,
    pub(crate) rsc: usize,
    /// Multiply-adds fused (one rounding each, `a.mul_add(b, s)`) instead
    /// of a multiply then an add; see [`Madd`].
    pub(crate) fused: bool,
    /// The AVX-512 kernels of `panel_avx512` where they exist (with the
    /// `avx512` feature; the CPU must then support AVX-512F).
    #[cfg_attr(not(feature = "avx512"), allow(dead_code))]
    pub(crate) wide: bool,
}
