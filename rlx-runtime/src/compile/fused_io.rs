//! Loads and stores of fused loops: leaves gathered into registers
//! (contiguous, splat or through strides), registers written to targets
//! (contiguous, or scattered through strides into the window of a concat
//! or transpose the value is placed in).

use half::{bf16, f16};

use super::env::Val;
use super::parallel::{window, RawTarget};
use super::regs::{reg, reg_mut, Reg, Registers};
use crate::storage::Storage;

/// How a leaf operand maps onto the chain's output elements.
#[derive(Clone, Debug)]
pub(crate) enum Access {
    /// Same shape as the output: element `i` is element `i`.
    Contig,
    /// One element, broadcast everywhere (loaded once per call). Only
    /// lane 0 of its register is filled unless `whole`: the ops that read
    /// it as a block (compare, select, cast) need every lane, arithmetic
    /// reads it as a scalar.
    Splat { whole: bool },
    /// NumPy broadcast: `dims` are the output dims, `strides` the leaf's
    /// element strides per output axis (0 on broadcast axes).
    Broadcast {
        dims: Vec<usize>,
        strides: Vec<usize>,
    },
    /// Element `i` is element `idx[i]` of the leaf (a vector): a gather
    /// with constant indices, checked when the plan was built.
    Indexed(std::sync::Arc<[u32]>),
}

/// An operand from outside the chain.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub(crate) val: Val,
    /// Element of `val` where the leaf starts (a slice read in place).
    pub(crate) off: usize,
    pub(crate) access: Access,
    /// The register it is loaded into; `None` for a leaf read in place.
    pub(crate) reg: Option<Reg>,
}

/// Where a fused loop writes a value placed in a window of another
/// value's storage: element `i` of the loop (a multi-index over `dims`,
/// the loop's dims with axes merged) goes to `off + Σ i_d·strides[d]`.
#[derive(Clone, Debug)]
pub(crate) struct Scatter {
    pub(crate) off: usize,
    pub(crate) dims: Vec<usize>,
    pub(crate) strides: Vec<usize>,
}

/// Copies `src[pos(i)]` for the block `start..start + len` into `out`,
/// converting each element with `f`.
#[inline]
fn gather<S: Copy, T: Copy>(
    src: &[S],
    access: &Access,
    start: usize,
    out: &mut [T],
    idx: &mut [usize],
    f: impl Fn(S) -> T,
) {
    match access {
        Access::Contig => {
            let n = out.len();
            for (o, &v) in out.iter_mut().zip(&src[start..start + n]) {
                *o = f(v);
            }
        }
        Access::Splat { .. } => {
            out.fill(f(src[0]));
        }
        Access::Indexed(ix) => {
            let n = out.len();
            for (o, &j) in out.iter_mut().zip(&ix[start..start + n]) {
                *o = f(src[j as usize]);
            }
        }
        Access::Broadcast { dims, strides } => {
            let s_in = strides[strides.len() - 1];
            for_runs(dims, strides, start, out.len(), idx, |done, off, run| {
                let dst = &mut out[done..done + run];
                if s_in == 0 {
                    let v = src[off];
                    dst.iter_mut().for_each(|o| *o = f(v));
                } else if s_in == 1 {
                    for (o, &v) in dst.iter_mut().zip(&src[off..off + run]) {
                        *o = f(v);
                    }
                } else {
                    for (j, o) in dst.iter_mut().enumerate() {
                        *o = f(src[off + j * s_in]);
                    }
                }
            });
        }
    }
}

/// Walks the elements `start..start + len` of a row-major loop over
/// `dims` whose element `i` (a multi-index) sits at `Σ i_d·strides[d]`, in
/// runs along the innermost axis: `f(done, off, run)` gets `run`
/// consecutive elements from block position `done`, the first at `off`,
/// the others `strides[last]` apart. Inlined, so that `f` is too: runs
/// can be a few elements long.
#[inline(always)]
pub(crate) fn for_runs(
    dims: &[usize],
    strides: &[usize],
    start: usize,
    len: usize,
    idx: &mut [usize],
    mut f: impl FnMut(usize, usize, usize),
) {
    let r = dims.len();
    let idx = &mut idx[..r];
    // Multi-index of `start`.
    let mut rem = start;
    for d in (0..r).rev() {
        idx[d] = rem % dims[d];
        rem /= dims[d];
    }
    let inner = dims[r - 1];
    let mut done = 0;
    while done < len {
        let off: usize = idx.iter().zip(strides.iter()).map(|(i, s)| i * s).sum();
        let run = (inner - idx[r - 1]).min(len - done);
        f(done, off, run);
        done += run;
        // Advance the multi-index by `run` (stays within the row or wraps once).
        idx[r - 1] += run;
        let mut d = r - 1;
        while d > 0 && idx[d] >= dims[d] {
            idx[d] = 0;
            idx[d - 1] += 1;
            d -= 1;
        }
    }
}

/// Loads the block `start..start + len` of leaf `leaf` (whose values are
/// `src`) into its register `r`.
pub(crate) fn load(
    regs: &mut Registers,
    (leaf, r): (&Leaf, Reg),
    src: &Storage,
    start: usize,
    len: usize,
    idx: &mut [usize],
) {
    let (a, off) = (&leaf.access, leaf.off);
    match src {
        Storage::F32(v) => gather(
            &v[off..],
            a,
            start,
            &mut reg_mut(&mut regs.f32, r)[..len],
            idx,
            |x| x,
        ),
        Storage::F16(v) => gather(
            &v[off..],
            a,
            start,
            &mut reg_mut(&mut regs.f32, r)[..len],
            idx,
            f16::to_f32,
        ),
        Storage::BF16(v) => gather(
            &v[off..],
            a,
            start,
            &mut reg_mut(&mut regs.f32, r)[..len],
            idx,
            bf16::to_f32,
        ),
        Storage::F64(v) => gather(
            &v[off..],
            a,
            start,
            &mut reg_mut(&mut regs.f64, r)[..len],
            idx,
            |x| x,
        ),
        Storage::I64(v) => gather(
            &v[off..],
            a,
            start,
            &mut reg_mut(&mut regs.i64, r)[..len],
            idx,
            |x| x,
        ),
        Storage::Bool(v) => gather(
            &v[off..],
            a,
            start,
            &mut reg_mut(&mut regs.bool, r)[..len],
            idx,
            |x| x,
        ),
    }
}

/// Fills the first `lanes` elements of a register with element `off` of `src`
/// (a splat leaf; blocks read at most `lanes` of them).
pub(crate) fn fill(regs: &mut Registers, r: Reg, src: &Storage, off: usize, lanes: usize) {
    match src {
        Storage::F32(v) => reg_mut(&mut regs.f32, r)[..lanes].fill(v[off]),
        Storage::F16(v) => reg_mut(&mut regs.f32, r)[..lanes].fill(v[off].to_f32()),
        Storage::BF16(v) => reg_mut(&mut regs.f32, r)[..lanes].fill(v[off].to_f32()),
        Storage::F64(v) => reg_mut(&mut regs.f64, r)[..lanes].fill(v[off]),
        Storage::I64(v) => reg_mut(&mut regs.i64, r)[..lanes].fill(v[off]),
        Storage::Bool(v) => reg_mut(&mut regs.bool, r)[..lanes].fill(v[off]),
    }
}

pub(crate) fn store(regs: &Registers, src: Reg, dst: RawTarget, start: usize, len: usize) {
    macro_rules! put {
        ($bank:ident, $p:expr, $n:expr, $f:expr) => {{
            let f = $f;
            let s = &reg(&regs.$bank, src)[..len];
            // SAFETY: as in `operands`: this part owns the block.
            let o = unsafe { window($p, $n, start, len) };
            for (o, &x) in o.iter_mut().zip(s) {
                *o = f(x);
            }
        }};
    }
    match dst {
        RawTarget::F32(p, n) => put!(f32, p, n, |x: f32| x),
        RawTarget::F16(p, n) => put!(f32, p, n, f16::from_f32),
        RawTarget::BF16(p, n) => put!(f32, p, n, bf16::from_f32),
        RawTarget::F64(p, n) => put!(f64, p, n, |x: f64| x),
        RawTarget::I64(p, n) => put!(i64, p, n, |x: i64| x),
        RawTarget::Bool(p, n) => put!(bool, p, n, |x: bool| x),
    }
}

/// Writes the block `start..start + len` of register `src` through `map`.
pub(crate) fn scatter(
    regs: &Registers,
    src: Reg,
    map: &Scatter,
    dst: RawTarget,
    start: usize,
    len: usize,
    idx: &mut [usize],
) {
    let s_in = map.strides[map.strides.len() - 1];
    macro_rules! put {
        ($bank:ident, $p:expr, $n:expr, $f:expr) => {{
            let (f, p, n) = ($f, $p, $n);
            let s = &reg(&regs.$bank, src)[..len];
            for_runs(
                &map.dims,
                &map.strides,
                start,
                len,
                idx,
                |done, off, run| {
                    let first = map.off + off;
                    assert!(
                        first + (run - 1) * s_in < n,
                        "a placed value stays in its window"
                    );
                    for (j, &x) in s[done..done + run].iter().enumerate() {
                        // SAFETY: in bounds (checked above); the map is
                        // injective and each part writes the elements of its
                        // own loop range only, so no element is written twice
                        // or borrowed elsewhere meanwhile.
                        unsafe { p.add(first + j * s_in).write(f(x)) };
                    }
                },
            );
        }};
    }
    match dst {
        RawTarget::F32(p, n) => put!(f32, p, n, |x: f32| x),
        RawTarget::F16(p, n) => put!(f32, p, n, f16::from_f32),
        RawTarget::BF16(p, n) => put!(f32, p, n, bf16::from_f32),
        RawTarget::F64(p, n) => put!(f64, p, n, |x: f64| x),
        RawTarget::I64(p, n) => put!(i64, p, n, |x: i64| x),
        RawTarget::Bool(p, n) => put!(bool, p, n, |x: bool| x),
    }
}
