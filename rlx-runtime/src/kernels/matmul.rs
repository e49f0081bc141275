//! Reference batched matrix product `C[.., i, j] = Σ_p A[.., i, p] B[.., p, j]`
//! with NumPy broadcasting of the batch dimensions. A plain triple loop that
//! accumulates in the compute type; the compiler routes its matmuls through
//! `matrixmultiply` instead.

use rlx_core::{Error, Result};

use super::iter::{broadcast_strides, walk};
use super::scalar::{Float, Real};
use super::{dtype_error, same_float, Operand};
use crate::storage::Storage;

#[allow(clippy::too_many_arguments)]
fn run<T: Float>(
    so: &[usize],
    sa: &[usize],
    sb: &[usize],
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    let r = so.len();
    let batch = &so[..r - 2];
    let ta = broadcast_strides(&sa[..sa.len() - 2], batch);
    let tb = broadcast_strides(&sb[..sb.len() - 2], batch);
    let mut c0 = 0;
    walk(batch, [&ta, &tb], [0, 0], |[ia, ib]| {
        let (a0, b0) = (ia * m * k, ib * k * n);
        for i in 0..m {
            for j in 0..n {
                let mut acc = <T::C as Real>::ZERO;
                for p in 0..k {
                    acc += a[a0 + i * k + p].load() * b[b0 + p * n + j].load();
                }
                out[c0 + i * n + j] = T::store(acc);
            }
        }
        c0 += m * n;
    });
}

pub(super) fn matmul(
    a: Operand<'_>,
    b: Operand<'_>,
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let (sa, sb) = (a.dims(), b.dims());
    let (ra, rb) = (sa.len(), sb.len());
    if ra < 2 || rb < 2 || so.len() < 2 || sa[ra - 1] != sb[rb - 2] {
        return Err(Error::ShapeMismatch {
            op: "matmul",
            lhs: a.shape.clone(),
            rhs: b.shape.clone(),
            expected: "operands of shapes [.., m, k] and [.., k, n]".into(),
        });
    }
    let mkn = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    let err = dtype_error("matmul", a.storage.dtype(), b.storage.dtype());
    same_float!(Err(err); (a.storage, b.storage, out) => |x, y, o| {
        run(so, sa, sb, mkn, x, y, o);
        Ok(())
    })
}
