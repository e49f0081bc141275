//! Data movement: transpose, slice, concat and copies, as strided copies.
//!
//! A [`Strided`] copy moves the elements of a `dims`-shaped block from
//! `src[src_off + Σ i_d·src_strides[d]]` to `dst[dst_off + Σ i_d·dst_strides[d]]`.
//! A transpose permutes the source strides, a slice offsets them, a concat
//! is one copy per operand into a window of the output.

use super::env::{Env, Val};
use crate::storage::Storage;

/// One strided block copy.
#[derive(Clone, Debug)]
pub(crate) struct Strided {
    pub(crate) src: Val,
    pub(crate) src_off: usize,
    pub(crate) src_strides: Vec<usize>,
    pub(crate) dims: Vec<usize>,
    pub(crate) dst_off: usize,
    pub(crate) dst_strides: Vec<usize>,
}

/// A step made of strided copies into one target.
#[derive(Clone, Debug)]
pub(crate) struct CopyStep {
    pub(crate) parts: Vec<Strided>,
}

impl Strided {
    /// A contiguous copy of `numel` elements.
    pub(crate) fn contiguous(src: Val, numel: usize) -> Strided {
        Strided {
            src,
            src_off: 0,
            src_strides: vec![1],
            dims: vec![numel],
            dst_off: 0,
            dst_strides: vec![1],
        }
    }

    fn copy<T: Copy>(&self, src: &[T], dst: &mut [T], idx: &mut [usize]) {
        let r = self.dims.len();
        if self.dims.contains(&0) {
            return;
        }
        if r == 0 {
            dst[self.dst_off] = src[self.src_off];
            return;
        }
        let inner = self.dims[r - 1];
        let (si, di) = (self.src_strides[r - 1], self.dst_strides[r - 1]);
        let idx = &mut idx[..r - 1];
        idx.fill(0);
        loop {
            let mut so = self.src_off;
            let mut doff = self.dst_off;
            for ((&i, &ss), &ds) in idx.iter().zip(&self.src_strides).zip(&self.dst_strides) {
                so += i * ss;
                doff += i * ds;
            }
            if si == 1 && di == 1 {
                dst[doff..doff + inner].copy_from_slice(&src[so..so + inner]);
            } else {
                for j in 0..inner {
                    dst[doff + j * di] = src[so + j * si];
                }
            }
            let mut d = r - 1;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < self.dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

impl CopyStep {
    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage, idx: &mut [usize]) {
        for p in &self.parts {
            match (env.get(p.src), &mut *out) {
                (Storage::F32(s), Storage::F32(d)) => p.copy(s, d, idx),
                (Storage::F64(s), Storage::F64(d)) => p.copy(s, d, idx),
                (Storage::F16(s), Storage::F16(d)) => p.copy(s, d, idx),
                (Storage::BF16(s), Storage::BF16(d)) => p.copy(s, d, idx),
                (Storage::I64(s), Storage::I64(d)) => p.copy(s, d, idx),
                (Storage::Bool(s), Storage::Bool(d)) => p.copy(s, d, idx),
                _ => unreachable!("copies keep the dtype (checked by shape inference)"),
            }
        }
    }
}
