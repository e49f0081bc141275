//! The 5-point-stencil residual shared by `benches/sparse.rs` and
//! `tests/sparse_companions.rs` (included by `#[path]`), with its
//! hand-written Jacobian.

use rlx::prelude::*;

/// `Δu - u³` on a `k × k` grid with zero boundary values (5-point stencil).
#[differentiable]
pub fn stencil(u: &Tensor, k: usize) -> Tensor {
    let zr = Tensor::zeros([1, k], DType::F64);
    let rows = Tensor::concat(&[&zr, u, &zr], 0);
    let zc = Tensor::zeros([k + 2, 1], DType::F64);
    let p = Tensor::concat(&[&zc, &rows, &zc], 1);
    let nb = |di: usize, dj: usize| p.slice_range(di..di + k, 0).slice_range(dj..dj + k, 1);
    nb(0, 1) + nb(2, 1) + nb(1, 0) + nb(1, 2) - u * 4.0 - u.powi(3)
}

/// Visits the 5-point-stencil entries of column `c = i k + j` in CSC
/// (increasing row) order, calling `f(row)`.
pub fn stencil_rows(k: usize, c: usize, mut f: impl FnMut(usize)) {
    let (i, j) = (c / k, c % k);
    if i > 0 {
        f(c - k);
    }
    if j > 0 {
        f(c - 1);
    }
    f(c);
    if j + 1 < k {
        f(c + 1);
    }
    if i + 1 < k {
        f(c + k);
    }
}

/// The analytic Jacobian of `stencil` in CSC order: 1 off the diagonal,
/// `-4 - 3u²` on it.
pub fn stencil_hand(u: &[f64], k: usize, values: &mut [f64]) {
    let mut p = 0;
    for (c, &uc) in u.iter().enumerate() {
        let d = -4.0 - 3.0 * uc * uc;
        stencil_rows(k, c, |r| {
            values[p] = if r == c { d } else { 1.0 };
            p += 1;
        });
    }
}
