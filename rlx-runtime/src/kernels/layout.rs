//! Data movement: copy (reshape, stop-gradient), transpose, broadcast,
//! concat and slice. Dtype-agnostic: each kernel is generic over the element
//! type and dispatched once.

use rlx_core::{Error, Result};

use super::iter::{broadcast_strides, split_at_axis, strides, walk, Dims};
use super::operand::{dtype_error, same_dtype, Operand};
use crate::storage::Storage;

/// Copies values unchanged (the kernel of `Reshape` and `StopGradient`).
pub(super) fn copy(op: &'static str, x: Operand<'_>, out: &mut Storage) -> Result<()> {
    let err = dtype_error(op, x.storage.dtype(), out.dtype());
    same_dtype!(Err(err); (x.storage, out) => |v, o| {
        o.copy_from_slice(v);
        Ok(())
    })
}

/// Output axis `i` is input axis `perm[i]`.
pub(super) fn transpose(
    perm: &[usize],
    x: Operand<'_>,
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let dims = x.dims();
    if perm.len() != dims.len() || perm.iter().any(|&p| p >= dims.len()) {
        return Err(Error::InvalidArgument {
            op: "transpose",
            message: format!("{perm:?} is not a permutation of the axes of {}", x.shape),
        });
    }
    let own = strides(dims);
    let mut st = Dims::zeros(perm.len());
    for (i, &p) in perm.iter().enumerate() {
        st[i] = own[p];
    }
    let err = dtype_error("transpose", x.storage.dtype(), out.dtype());
    same_dtype!(Err(err); (x.storage, out) => |v, o| {
        let mut i = 0;
        walk(so, [&st], [0], |[j]| {
            o[i] = v[j];
            i += 1;
        });
        Ok(())
    })
}

/// NumPy broadcast of `x` to `so`.
pub(super) fn broadcast(x: Operand<'_>, so: &[usize], out: &mut Storage) -> Result<()> {
    let st = broadcast_strides(x.dims(), so);
    let err = dtype_error("broadcast", x.storage.dtype(), out.dtype());
    same_dtype!(Err(err); (x.storage, out) => |v, o| {
        let mut i = 0;
        walk(so, [&st], [0], |[j]| {
            o[i] = v[j];
            i += 1;
        });
        Ok(())
    })
}

/// Joins `inputs` along `axis`: seen as `[outer, size_t * inner]` blocks,
/// each input's block `o` lands at column offset `Σ_{s<t} size_s * inner`.
pub(super) fn concat(
    axis: usize,
    inputs: &[Operand<'_>],
    so: &[usize],
    out: &mut Storage,
) -> Result<()> {
    let (outer, total, inner) = split_at_axis(so, axis);
    let mut offset = 0;
    for x in inputs {
        let size = x.dims()[axis];
        let chunk = size * inner;
        let err = dtype_error("concat", x.storage.dtype(), out.dtype());
        same_dtype!(Err(err); (x.storage, &mut *out) => |v, o| {
            for b in 0..outer {
                let dst = b * total * inner + offset * inner;
                o[dst..dst + chunk].copy_from_slice(&v[b * chunk..(b + 1) * chunk]);
            }
            Ok::<(), Error>(())
        })?;
        offset += size;
    }
    Ok(())
}

/// Elements `start..start + len` along `axis`.
pub(super) fn slice(
    axis: usize,
    start: usize,
    len: usize,
    x: Operand<'_>,
    out: &mut Storage,
) -> Result<()> {
    let (outer, size, inner) = split_at_axis(x.dims(), axis);
    let chunk = len * inner;
    let err = dtype_error("slice", x.storage.dtype(), out.dtype());
    same_dtype!(Err(err); (x.storage, out) => |v, o| {
        for b in 0..outer {
            let src = (b * size + start) * inner;
            o[b * chunk..(b + 1) * chunk].copy_from_slice(&v[src..src + chunk]);
        }
        Ok(())
    })
}
