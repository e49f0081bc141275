//! Iteration, written once: strided walks over row-major index spaces.
//!
//! Every kernel that is not a flat loop goes through [`walk`]: it visits the
//! points of an index space in row-major order and hands out, for each of `N`
//! operands, the flat offset of that point given the operand's strides (a
//! stride of 0 broadcasts). Index counters live on the stack for ranks up to
//! [`INLINE`], so walks do not allocate.

use std::ops::{Deref, DerefMut};

/// Ranks up to this size keep their counters and strides on the stack.
pub const INLINE: usize = 12;

/// A small vector of dimensions or strides: inline up to [`INLINE`] entries.
#[derive(Clone, Debug)]
pub enum Dims {
    /// Stack storage and length.
    Inline([usize; INLINE], usize),
    /// Heap storage for ranks above [`INLINE`].
    Heap(Vec<usize>),
}

impl Dims {
    /// `n` zeros.
    pub fn zeros(n: usize) -> Dims {
        if n <= INLINE {
            Dims::Inline([0; INLINE], n)
        } else {
            Dims::Heap(vec![0; n])
        }
    }

    /// A copy of `v`.
    pub fn from_slice(v: &[usize]) -> Dims {
        let mut d = Dims::zeros(v.len());
        d.copy_from_slice(v);
        d
    }
}

impl Deref for Dims {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        match self {
            Dims::Inline(a, n) => &a[..*n],
            Dims::Heap(v) => v,
        }
    }
}

impl DerefMut for Dims {
    fn deref_mut(&mut self) -> &mut [usize] {
        match self {
            Dims::Inline(a, n) => &mut a[..*n],
            Dims::Heap(v) => v,
        }
    }
}

/// Row-major strides of `dims`.
pub fn strides(dims: &[usize]) -> Dims {
    let mut s = Dims::zeros(dims.len());
    let mut acc = 1;
    for i in (0..dims.len()).rev() {
        s[i] = acc;
        acc *= dims[i];
    }
    s
}

/// Strides that read an operand of shape `src` at every point of the
/// broadcast shape `out` (NumPy rules; broadcast axes get stride 0).
pub fn broadcast_strides(src: &[usize], out: &[usize]) -> Dims {
    let own = strides(src);
    let lead = out.len() - src.len();
    let mut s = Dims::zeros(out.len());
    for (k, &d) in src.iter().enumerate() {
        s[lead + k] = if d == 1 { 0 } else { own[k] };
    }
    s
}

/// Visits every point of `dims` in row-major order and calls `f` with the
/// offsets `base[j] + Σ idx[i] * strides[j][i]` of the `N` operands.
pub fn walk<const N: usize>(
    dims: &[usize],
    strides: [&[usize]; N],
    base: [usize; N],
    mut f: impl FnMut([usize; N]),
) {
    if dims.contains(&0) {
        return;
    }
    let r = dims.len();
    if r == 0 {
        f(base);
        return;
    }
    let inner = dims[r - 1];
    let mut inner_stride = [0; N];
    for j in 0..N {
        inner_stride[j] = strides[j][r - 1];
    }
    let mut idx = Dims::zeros(r - 1);
    let mut off = base;
    loop {
        let mut o = off;
        for _ in 0..inner {
            f(o);
            for j in 0..N {
                o[j] += inner_stride[j];
            }
        }
        // Advance the outer counter, odometer style.
        let mut ax = r - 1;
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            for j in 0..N {
                off[j] += strides[j][ax];
            }
            if idx[ax] < dims[ax] {
                break;
            }
            for j in 0..N {
                off[j] -= strides[j][ax] * dims[ax];
            }
            idx[ax] = 0;
        }
    }
}

/// `out[i] = f(a[i])` over equal lengths.
pub fn map1<A: Copy, O>(a: &[A], out: &mut [O], f: impl Fn(A) -> O) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// `out = f(a, b)` with NumPy broadcasting of `a` (shape `sa`) and `b`
/// (shape `sb`) to `so`.
pub fn zip2<A: Copy, B: Copy, O>(
    so: &[usize],
    (a, sa): (&[A], &[usize]),
    (b, sb): (&[B], &[usize]),
    out: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    if sa == so && sb == so {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
        return;
    }
    let (ta, tb) = (broadcast_strides(sa, so), broadcast_strides(sb, so));
    let mut i = 0;
    walk(so, [&ta, &tb], [0, 0], |[ia, ib]| {
        out[i] = f(a[ia], b[ib]);
        i += 1;
    });
}

/// `out = f(a, b, c)` with NumPy broadcasting of the three operands to `so`.
pub fn zip3<A: Copy, B: Copy, C: Copy, O>(
    so: &[usize],
    (a, sa): (&[A], &[usize]),
    (b, sb): (&[B], &[usize]),
    (c, sc): (&[C], &[usize]),
    out: &mut [O],
    f: impl Fn(A, B, C) -> O,
) {
    let (ta, tb, tc) = (
        broadcast_strides(sa, so),
        broadcast_strides(sb, so),
        broadcast_strides(sc, so),
    );
    let mut i = 0;
    walk(so, [&ta, &tb, &tc], [0, 0, 0], |[ia, ib, ic]| {
        out[i] = f(a[ia], b[ib], c[ic]);
        i += 1;
    });
}

/// Splits `dims` around `axis` into `(outer, size, inner)` element counts.
pub fn split_at_axis(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis],
        dims[axis + 1..].iter().product(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_visits_transposed_offsets() {
        // A [2, 3] matrix read with the strides of its transpose.
        let mut seen = Vec::new();
        walk(&[3, 2], [&[1, 3]], [0], |[o]| seen.push(o));
        assert_eq!(seen, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn walk_handles_scalars_empty_and_deep_ranks() {
        let mut n = 0;
        walk(&[], [&[]], [5], |[o]| {
            assert_eq!(o, 5);
            n += 1
        });
        assert_eq!(n, 1);
        walk(&[2, 0, 3], [&[0, 0, 0]], [0], |_| panic!("no points"));
        let dims = [1usize; 20];
        let st = strides(&dims);
        let mut n = 0;
        walk(&dims, [&st], [0], |_| n += 1);
        assert_eq!(n, 1);
    }

    #[test]
    fn broadcast_strides_zero_broadcast_axes() {
        assert_eq!(&*broadcast_strides(&[3, 1], &[2, 3, 4]), &[0, 1, 0]);
    }
}
