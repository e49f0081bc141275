//! Data movement: transpose, slice, concat and copies, as strided copies.
//!
//! A [`Strided`] copy moves the elements of a `dims`-shaped block from
//! `src[src_off + Σ i_d·src_strides[d]]` to `dst[dst_off + Σ i_d·dst_strides[d]]`.
//! A transpose permutes the source strides, a slice offsets them, a concat
//! is one copy per operand into a window of the output.

use crate::compile::base::env::{Env, Val};
use crate::storage::Storage;

/// `dims` and one list of element strides per operand, with axes of
/// length 1 dropped and each pair of adjacent axes merged when every
/// operand steps through them as through one axis (`s[d] = s[d + 1] ·
/// dims[d + 1]`, which includes two broadcast axes). The flat index of an
/// element is unchanged, so a loop over the result visits the same
/// elements in the same order with longer inner runs.
pub(crate) fn merge_axes(dims: &[usize], strides: &[&[usize]]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let mut out_dims: Vec<usize> = Vec::with_capacity(dims.len());
    let mut out: Vec<Vec<usize>> = vec![Vec::with_capacity(dims.len()); strides.len()];
    for (d, &n) in dims.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let merge = !out_dims.is_empty()
            && strides
                .iter()
                .zip(&out)
                .all(|(s, o)| o[o.len() - 1] == s[d] * n);
        if merge {
            *out_dims.last_mut().expect("not empty") *= n;
            for (s, o) in strides.iter().zip(&mut out) {
                *o.last_mut().expect("not empty") = s[d];
            }
        } else {
            out_dims.push(n);
            for (s, o) in strides.iter().zip(&mut out) {
                o.push(s[d]);
            }
        }
    }
    (out_dims, out)
}

/// Inner runs shorter than this are moved outward by [`Strided::normalized`].
const SHORT_RUN: usize = 64;

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

    /// The same copy with axes of length 1 dropped, adjacent axes that
    /// are contiguous in both source and destination merged, and a short
    /// inner axis swapped for the longest one, so that the inner loop is
    /// as long as possible (a column slice `[N, 1]` of an
    /// `[N, 3]` value becomes one strided loop of `N`, not `N` loops of 1).
    pub(crate) fn normalized(mut self) -> Strided {
        if self.dims.contains(&0) {
            return self;
        }
        let (dims, mut st) = merge_axes(&self.dims, &[&self.src_strides, &self.dst_strides]);
        self.dims = dims;
        self.dst_strides = st.pop().expect("two stride lists");
        self.src_strides = st.pop().expect("two stride lists");
        // A copy may visit its elements in any order: a short inner axis
        // (a transpose `[3, N, 3]` to `[N, 3, 3]`) gives way to the longest.
        let r = self.dims.len();
        if r > 1 && self.dims[r - 1] < SHORT_RUN {
            let (a, _) = self
                .dims
                .iter()
                .enumerate()
                .max_by_key(|&(i, &n)| (n, i))
                .expect("rank > 1");
            for v in [&mut self.dims, &mut self.src_strides, &mut self.dst_strides] {
                let x = v.remove(a);
                v.push(x);
            }
        }
        self
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
    /// A step of `parts`, each [normalized](Strided::normalized).
    pub(crate) fn new(parts: Vec<Strided>) -> CopyStep {
        CopyStep {
            parts: parts.into_iter().map(Strided::normalized).collect(),
        }
    }

    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage, idx: &mut [usize]) {
        for p in &self.parts {
            match (env.get(p.src), &mut *out) {
                (Storage::F32(s), Storage::F32(d)) => p.copy(s, d, idx),
                (Storage::F64(s), Storage::F64(d)) => p.copy(s, d, idx),
                (Storage::F16(s), Storage::F16(d)) => p.copy(s, d, idx),
                (Storage::BF16(s), Storage::BF16(d)) => p.copy(s, d, idx),
                (Storage::I64(s), Storage::I64(d)) => p.copy(s, d, idx),
                (Storage::Bool(s), Storage::Bool(d)) => p.copy(s, d, idx),
                (Storage::C32(s), Storage::C32(d)) => p.copy(s, d, idx),
                (Storage::C64(s), Storage::C64(d)) => p.copy(s, d, idx),
                _ => unreachable!("copies keep the dtype (checked by shape inference)"),
            }
        }
    }
}
