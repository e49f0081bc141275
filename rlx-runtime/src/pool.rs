//! Reuse of small tensors' `f64` allocations, per thread.
//!
//! A warm call of a function over small tensors allocates only its result
//! tensors, and the caller frees them soon after: a `value_and_grad_` of a
//! `[6]` tensor spent about 500 of its 1 265 instructions in `malloc` and
//! `free` (glibc's checks on each). So a small `f64` result is built in an
//! allocation of a fixed capacity and, when its tensor is dropped, that
//! allocation goes back to a short list kept by the thread; the next result
//! on that thread takes it from there. Two lists: vectors of capacity
//! [`CAP`] for the values a tensor owns (at most [`OWNED_MAX`] elements),
//! and shared storages (`Arc`, capacity [`SHARED_CAP`]) for larger values
//! up to the most elements a scalarised plan's values have (a `[10, 10]`
//! Hessian). Only allocations of exactly those capacities are kept, so a
//! vector the user handed in (`Tensor::from_vec`) is freed as before, and a
//! thread keeps at most [`KEEP`] of each (about 17 KiB), freed when it
//! exits.
//!
//! The values of an allocation taken from a list are overwritten before
//! any tensor sees them: [`from_slice`] and [`buffer_from_slice`] copy,
//! [`zeroed`] and [`buffer_zeroed`] zero.

use std::cell::Cell;
use std::sync::Arc;

use crate::buffer::{Buffer, OWNED_MAX};
use crate::storage::Storage;

/// The capacity of the vectors the list keeps: the most elements a tensor
/// owns (larger values are shared behind an `Arc`).
pub(crate) const CAP: usize = OWNED_MAX;

/// The capacity of the shared storages the list keeps: the most elements
/// a value of a scalarised plan has (`compile::Options::scalarize`).
pub(crate) const SHARED_CAP: usize = 256;

/// How many allocations of each kind a thread keeps: enough for the
/// results of a few calls alive at once (a `hessian_` of three parameters
/// returns six blocks).
pub(crate) const KEEP: usize = 8;

/// A thread's kept allocations: `vecs[..len]`, each the pointer of an
/// allocation of [`CAP`] `f64`s that the list owns (a vector's pointer
/// with its capacity known, so that taking or giving one moves a pointer,
/// not a vector's three words), and `shared[..shared_len]`, each an `F64`
/// storage no other `Arc` points to, of capacity [`SHARED_CAP`].
/// Cells, not a `RefCell`: nothing is borrowed, each slot is moved in or
/// out whole (a borrow flag cost about a tenth of a warm small call).
struct Kept {
    len: Cell<usize>,
    vecs: [Cell<*mut f64>; KEEP],
    shared_len: Cell<usize>,
    shared: [Cell<Option<Arc<Storage>>>; KEEP],
}

impl Drop for Kept {
    /// Frees the kept vectors (the shared storages drop with their cells).
    fn drop(&mut self) {
        let n = self.len.get().min(KEEP);
        for slot in &self.vecs[..n] {
            // SAFETY: each of the first `len` slots holds the pointer of
            // an allocation of `CAP` `f64`s that only the list owns (put
            // there by `give`, from a vector of that capacity); it is
            // freed once, here, as the empty vector it was.
            drop(unsafe { Vec::from_raw_parts(slot.get(), 0, CAP) });
        }
    }
}

thread_local! {
    static KEPT: Kept = const {
        Kept {
            len: Cell::new(0),
            vecs: [const { Cell::new(std::ptr::null_mut()) }; KEEP],
            shared_len: Cell::new(0),
            shared: [const { Cell::new(None) }; KEEP],
        }
    };
}

/// An empty vector of capacity [`CAP`]: a kept one if the thread has one.
#[inline(always)]
fn take() -> Vec<f64> {
    // SAFETY: `take_raw` gives the only pointer to an allocation of `CAP`
    // `f64`s (see there); it is owned by this vector from here on.
    unsafe { Vec::from_raw_parts(take_raw(), 0, CAP) }
}

/// The pointer of an allocation of [`CAP`] `f64`s that the caller now
/// owns (a kept one if the thread has one): to be made into a vector of
/// capacity `CAP` (`Vec::from_raw_parts`). A pointer, not a vector, so
/// that [`from_slice`] makes its vector from registers after the copy:
/// a vector held in memory across the copy was stored as two words and
/// then moved as one 16-byte load, which cannot be forwarded from the
/// two stores and waited for them to reach the cache (the largest stall
/// of a warm small call, by `perf` samples).
#[inline(always)]
fn take_raw() -> *mut f64 {
    let kept = KEPT.try_with(|k| {
        let n = k.len.get().checked_sub(1)?;
        let p = k.vecs.get(n)?.get();
        k.len.set(n);
        Some(p)
    });
    match kept {
        // The slot held a kept allocation of `CAP` `f64`s (see `Kept`),
        // which leaves the list here (`len` no longer counts it).
        Ok(Some(p)) => p,
        _ => fresh(),
    }
}

/// The pointer of a new allocation of [`CAP`] `f64`s (the thread keeps
/// none), owned by the caller: out of line, so that the warm path of
/// [`take_raw`] stays short.
#[cold]
#[inline(never)]
fn fresh() -> *mut f64 {
    let mut v = std::mem::ManuallyDrop::new(Vec::<f64>::with_capacity(CAP));
    v.as_mut_ptr()
}

/// A vector holding `vals` (at most [`CAP`] of them), in a kept vector when
/// the thread has one, so that it can go back to the list when dropped.
/// Always inlined: it is on the warm path of every small result, where a
/// call (and the vector returned through memory) cost about a third of it.
///
/// The values are copied one 8-byte load and store at a time, not by
/// `memcpy`: they were usually just written by native code, one `f64`
/// store each, and `memcpy`'s 16- or 32-byte loads spanning several of
/// those stores cannot be forwarded from them (each waits until the
/// stores reach the cache). The vector is made from its pointer and
/// length after the copy (see [`take_raw`]).
#[inline(always)]
pub(crate) fn from_slice(vals: &[f64]) -> Vec<f64> {
    let n = vals.len();
    if n > CAP {
        return vals.to_vec();
    }
    let dst = take_raw();
    let src = vals.as_ptr();
    // SAFETY: `dst` is an allocation of `CAP >= n` `f64`s that only this
    // function owns (`take_raw`), and `vals` (another allocation) has `n`
    // elements: the first `n` elements of `dst` are written, each once,
    // then the vector of length `n` and capacity `CAP` takes ownership of
    // the allocation. The volatile reads are plain 8-byte loads of valid
    // elements; volatile only keeps them from being merged into wider
    // loads or a `memcpy` call.
    unsafe {
        for i in 0..n {
            dst.add(i).write(std::ptr::read_volatile(src.add(i)));
        }
        Vec::from_raw_parts(dst, n, CAP)
    }
}

/// A vector of `n` zeros (see [`from_slice`]).
#[inline]
pub(crate) fn zeroed(n: usize) -> Vec<f64> {
    if n > CAP {
        return vec![0.0; n];
    }
    let mut v = take();
    v.resize(n, 0.0);
    v
}

/// Gives `v` back to the thread's list if it is one of the list's
/// vectors (capacity [`CAP`]) and the list has room; frees it otherwise.
#[inline]
pub(crate) fn give(v: Vec<f64>) {
    if v.capacity() != CAP {
        return;
    }
    // Kept as its pointer: not dropped here.
    let mut v = std::mem::ManuallyDrop::new(v);
    let p = v.as_mut_ptr();
    let kept = KEPT.try_with(|k| {
        let n = k.len.get();
        let slot = k.vecs.get(n)?;
        // The slot is past `len`: it holds no allocation the list owns.
        slot.set(p);
        k.len.set(n + 1);
        Some(())
    });
    // On a thread being torn down, or with the list full, it is freed.
    if !matches!(kept, Ok(Some(()))) {
        free(std::mem::ManuallyDrop::into_inner(v));
    }
}

/// Frees `v` (a vector [`give`] could not keep): out of line, so that the
/// warm path of dropping a small result stays a leaf.
#[cold]
#[inline(never)]
fn free(v: Vec<f64>) {
    drop(v);
}

/// A shared `F64` storage holding `vals` (more than [`OWNED_MAX`] of them),
/// in a kept allocation when the thread has one and `vals` fit.
fn shared_from(vals: &[f64], zeros: usize) -> Arc<Storage> {
    let n = vals.len() + zeros;
    if n <= SHARED_CAP {
        let kept = KEPT.try_with(|k| {
            let i = k.shared_len.get().checked_sub(1)?;
            k.shared_len.set(i);
            k.shared.get(i)?.take()
        });
        let mut a = match kept {
            Ok(Some(a)) => a,
            _ => Arc::new(Storage::F64(Vec::with_capacity(SHARED_CAP))),
        };
        if let Some(Storage::F64(v)) = Arc::get_mut(&mut a) {
            v.clear();
            v.extend_from_slice(vals);
            v.resize(n, 0.0);
            return a;
        }
    }
    let mut v = Vec::with_capacity(n);
    v.extend_from_slice(vals);
    v.resize(n, 0.0);
    Arc::new(Storage::F64(v))
}

/// A tensor buffer holding `vals`: owned or shared as [`Buffer::new`]
/// decides by the length, in a kept allocation when the thread has one.
#[inline]
pub(crate) fn buffer_from_slice(vals: &[f64]) -> Buffer {
    if vals.len() <= OWNED_MAX {
        Buffer::owned(Storage::F64(from_slice(vals)))
    } else {
        Buffer::shared(shared_from(vals, 0))
    }
}

/// A tensor buffer of `n` zeros (see [`buffer_from_slice`]).
#[inline]
pub(crate) fn buffer_zeroed(n: usize) -> Buffer {
    if n <= OWNED_MAX {
        Buffer::owned(Storage::F64(zeroed(n)))
    } else {
        Buffer::shared(shared_from(&[], n))
    }
}

/// Gives `a` back to the thread's list of shared storages if it is one of
/// the list's (an `F64` storage of capacity [`SHARED_CAP`] that no other
/// `Arc` points to) and the list has room; drops it otherwise.
#[inline]
pub(crate) fn give_shared(mut a: Arc<Storage>) {
    match Arc::get_mut(&mut a) {
        Some(Storage::F64(v)) if v.capacity() == SHARED_CAP => {}
        _ => return,
    }
    let _ = KEPT.try_with(|k| {
        let n = k.shared_len.get();
        if let Some(slot) = k.shared.get(n) {
            // The slot is empty (`None`): nothing is dropped.
            slot.set(Some(a));
            k.shared_len.set(n + 1);
        }
    });
}

/// How many vectors the calling thread keeps (for tests).
#[cfg(test)]
pub(crate) fn kept() -> usize {
    KEPT.with(|k| k.len.get())
}

/// How many shared storages the calling thread keeps (for tests).
#[cfg(test)]
pub(crate) fn kept_shared() -> usize {
    KEPT.with(|k| k.shared_len.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_vectors_are_reused_and_their_old_values_never_seen() {
        // Fill the list, then take them all back.
        let vs: Vec<Vec<f64>> = (0..KEEP + 2)
            .map(|i| from_slice(&[i as f64; CAP]))
            .collect();
        let before = kept();
        vs.into_iter().for_each(give);
        assert_eq!(kept(), KEEP.min(before + KEEP + 2));
        let z = zeroed(5);
        assert_eq!(z, vec![0.0; 5]);
        assert_eq!(z.capacity(), CAP);
        let s = from_slice(&[1.0, 2.0]);
        assert_eq!(s, vec![1.0, 2.0]);
        assert_eq!(kept(), KEEP - 2);
        give(z);
        give(s);
        assert_eq!(kept(), KEEP);
    }

    #[test]
    fn copies_have_the_bits_of_their_values_for_every_small_length() {
        // Signed zeros, NaNs with payloads (quiet and signalling), ±∞ and
        // subnormals: the element-by-element copy must move bits, not values.
        let odd = [
            -0.0,
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::from_bits(0x7ff0_0000_0000_0001),
            f64::from_bits(0xfff4_0000_dead_beef),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::from_bits(1),
            -f64::MIN_POSITIVE / 3.0,
            1.5,
        ];
        for n in 0..=CAP + 1 {
            let vals: Vec<f64> = (0..n).map(|i| odd[i % odd.len()]).collect();
            // Twice: a fresh allocation or a kept one, then a kept one
            // that held other values.
            for _ in 0..2 {
                let v = from_slice(&vals);
                assert_eq!(v.len(), n);
                let bits = |x: &[f64]| x.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&v), bits(&vals), "length {n}");
                assert_eq!(v.capacity() == CAP, n <= CAP, "length {n}");
                give(v);
            }
        }
    }

    #[test]
    fn shared_storages_are_reused_only_when_no_other_tensor_holds_them() {
        let vals: Vec<f64> = (0..100).map(f64::from).collect();
        let b = buffer_from_slice(&vals);
        assert!(matches!(b, Buffer::Shared(_)));
        assert!(matches!(&*b, Storage::F64(v) if *v == vals));
        let before = kept_shared();
        let c = b.clone();
        drop(b); // another tensor still holds it
        assert_eq!(kept_shared(), before);
        drop(c);
        assert_eq!(kept_shared(), before + 1);
        // Taken again, with new values; zeros overwrite the old ones.
        let z = buffer_zeroed(50);
        assert_eq!(kept_shared(), before);
        assert!(matches!(&*z, Storage::F64(v) if *v == vec![0.0; 50]));
        drop(z);
        assert_eq!(kept_shared(), before + 1);
        // Too many elements for a kept storage: allocated and freed.
        let big = buffer_from_slice(&vec![1.0; SHARED_CAP + 1]);
        assert!(matches!(&*big, Storage::F64(v) if v.len() == SHARED_CAP + 1));
        drop(big);
        assert_eq!(kept_shared(), before + 1);
        // Owned sizes use the vector list.
        assert!(matches!(buffer_zeroed(OWNED_MAX), Buffer::Owned(_)));
    }

    #[test]
    fn foreign_and_large_vectors_are_not_kept() {
        let before = kept();
        let mut own = from_slice(&[1.0]);
        give(vec![1.0; 3]); // capacity 3: the user's, freed
        let big = from_slice(&[0.5; CAP + 1]);
        assert_eq!(big.len(), CAP + 1);
        give(big); // capacity over CAP: freed
        assert_eq!(kept(), before.saturating_sub(1));
        own.push(2.0);
        give(own);
        assert_eq!(kept(), before.clamp(1, KEEP));
    }
}
