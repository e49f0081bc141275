//! Reuse of small tensors' `f64` allocations, per thread.
//!
//! A warm call of a function over small tensors allocates only its result
//! tensors, and the caller frees them soon after: a `value_and_grad_` of a
//! `[6]` tensor spent about 500 of its 1 265 instructions in `malloc` and
//! `free` (glibc's checks on each). So a small `f64` result is built in an
//! allocation of a fixed capacity and, when its tensor is dropped, that
//! allocation goes back to a short list kept by the thread; the next result
//! on that thread takes it from there. Two lists: vectors of capacity
//! [`CAP`] for the values a tensor owns (`buffer::OWNED_MAX` elements at most),
//! and shared storages (`Arc`, capacity [`SHARED_CAP`]) for larger values
//! up to the most elements a scalarised plan's values have (a `[10, 10]`
//! Hessian). Only allocations of exactly those capacities are kept, so a
//! vector the user handed in (`Tensor::from_vec`) is freed as before, and a
//! thread keeps at most [`KEEP`] of each (about 17 KiB), freed when it
//! exits.
//!
//! The values of an allocation taken from a list are overwritten before
//! any tensor sees them: [`from_slice`] and `buffer::buffer_from_slice` copy,
//! [`zeroed`] and `buffer::buffer_zeroed` zero.

use std::cell::Cell;
use std::sync::Arc;

use crate::storage::Storage;

/// The capacity of the vectors the list keeps: the most elements a tensor
/// owns (larger values are shared behind an `Arc`). 16 elements: a
/// `[4, 4]` matrix, four 3-D points; copying 128 bytes costs about what an
/// atomic reference count does.
pub(crate) const CAP: usize = 16;

/// The capacity of the shared storages the list keeps: the most elements
/// a value of a scalarised plan has (`compile::Options::scalarize`).
pub(crate) const SHARED_CAP: usize = 256;

/// How many allocations of each kind a thread keeps: enough for the
/// results of a few calls alive at once (a `hessian_` of three parameters
/// returns six blocks).
pub(crate) const KEEP: usize = 8;

/// A thread's kept vectors: `vecs[..len]`, each the pointer of an
/// allocation of [`CAP`] `f64`s that the list owns (a vector's pointer
/// with its capacity known, so that taking or giving one moves a pointer,
/// not a vector's three words). Cells, not a `RefCell`: nothing is
/// borrowed, each slot is moved in or out whole (a borrow flag cost about
/// a tenth of a warm small call).
///
/// No `Drop`: a thread-local without one is a plain `%fs` access, where
/// one with a destructor checks (and on first use registers) its state at
/// every access, three instructions a result taken or given. The vectors
/// are freed by [`Guard`]'s destructor instead, registered by the first
/// vector the list keeps. `len` is past [`KEEP`] while the list keeps
/// nothing and takes nothing: [`OPEN`] before the guard is registered,
/// [`CLOSED`] once it ran; the warm paths' bound check on `len` then
/// declines, and [`keep_cold`] tells the two apart.
struct Kept {
    len: Cell<usize>,
    vecs: [Cell<*mut f64>; KEEP],
}

/// `Kept::len` on a thread whose list has not kept a vector yet (no
/// [`Guard`] registered).
const OPEN: usize = KEEP + 1;

/// `Kept::len` once the thread's [`Guard`] freed the list (the thread is
/// exiting): later vectors are freed, not kept.
const CLOSED: usize = KEEP + 2;

/// Frees the thread's kept vectors when the thread exits (see [`Kept`]).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        close();
    }
}

/// Frees the kept vectors and closes the list (the thread is exiting).
fn close() {
    VECS.with(|k| {
        let n = k.len.replace(CLOSED);
        for slot in k.vecs.get(..n).unwrap_or_default() {
            // SAFETY: each of the first `len` slots (when `len` is at most
            // `KEEP`) holds the pointer of an allocation of `CAP` `f64`s
            // that only the list owns (put there by `give`, from a vector
            // of that capacity); `len` no longer counts it, so it is freed
            // once, here, as the empty vector it was.
            drop(unsafe { Vec::from_raw_parts(slot.get(), 0, CAP) });
        }
    });
}

/// A thread's kept shared storages: `shared[..shared_len]`, each an `F64`
/// storage no other `Arc` points to, of capacity [`SHARED_CAP`] (dropped
/// with their cells when the thread exits).
struct Shared {
    shared_len: Cell<usize>,
    shared: [Cell<Option<Arc<Storage>>>; KEEP],
}

thread_local! {
    static VECS: Kept = const {
        Kept {
            len: Cell::new(OPEN),
            vecs: [const { Cell::new(std::ptr::null_mut()) }; KEEP],
        }
    };
    static GUARD: Guard = const { Guard };
    static SHARED: Shared = const {
        Shared {
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
pub(crate) fn take_raw() -> *mut f64 {
    // `try_with`, which never fails here (`Kept` has no destructor), and
    // the new allocation outside its closure: `with` was left out of line
    // with this closure, reaching the thread-local through a function
    // pointer.
    let kept = VECS.try_with(|k| {
        // `len` is 0 (nothing kept), or past `KEEP` (`OPEN`, `CLOSED`):
        // then no slot, and a new allocation.
        let n = k.len.get().wrapping_sub(1);
        let p = k.vecs.get(n)?.get();
        // The slot held a kept allocation of `CAP` `f64`s (see `Kept`),
        // which leaves the list here (`len` no longer counts it).
        k.len.set(n);
        Some(p)
    });
    match kept {
        Ok(Some(p)) => p,
        _ => fresh(),
    }
}

/// The pointer of a new allocation of [`CAP`] `f64`s (the thread keeps
/// none), owned by the caller: out of line, so that the warm path of
/// [`take_raw`] stays short. `extern "C"`: it cannot unwind (an
/// allocation failure aborts), so a caller holding results already built
/// needs no landing pad to drop them, and keeps them in registers.
#[cold]
#[inline(never)]
extern "C" fn fresh() -> *mut f64 {
    let mut v = std::mem::ManuallyDrop::new(Vec::<f64>::with_capacity(CAP));
    v.as_mut_ptr()
}

/// Copies `K` elements from `src` to `dst`, one 8-byte load and store
/// each (see [`from_slice`]).
///
/// # Safety
/// `src` must be valid for reading and `dst` for writing `K` `f64`s, in
/// different allocations.
#[inline(always)]
unsafe fn copy_block<const K: usize>(src: *const f64, dst: *mut f64) {
    for i in 0..K {
        // SAFETY: `i < K` (the caller's contract). The volatile read is a
        // plain 8-byte load of a valid element; volatile only keeps the
        // loads from being merged into wider ones or a `memcpy` call.
        unsafe { dst.add(i).write(std::ptr::read_volatile(src.add(i))) };
    }
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
    // SAFETY: `dst` is an allocation of `CAP >= n` `f64`s that only this
    // function owns (`take_raw`), and `vals` (another allocation) has `n`
    // elements: the first `n` elements of `dst` are written (some twice,
    // with the same value), then the vector of length `n` and capacity
    // `CAP` takes ownership of the allocation.
    unsafe {
        copy_short(vals.as_ptr(), dst, n);
        Vec::from_raw_parts(dst, n, CAP)
    }
}

/// Copies `n` (at most [`CAP`]) elements from `src` to `dst` in at most
/// two blocks of a fixed length, the second ending at `n` (overlapping the
/// first): a few straight-line loads and stores, where an element loop
/// spent more on its control than on the copy (a 1-element copy took 16
/// instructions, a 6-element one 30).
///
/// # Safety
/// `src` must be valid for reading and `dst` for writing `n <= CAP`
/// `f64`s, in different allocations.
#[inline(always)]
unsafe fn copy_short(src: *const f64, dst: *mut f64, n: usize) {
    debug_assert!(n <= CAP);
    // SAFETY (every arm): each block lies in `0..n`: it starts at 0 or
    // at `n - K` with `K <= n`, and ends at `K` or `n`.
    unsafe {
        match n {
            0 => {}
            1 => copy_block::<1>(src, dst),
            2..=3 => {
                copy_block::<2>(src, dst);
                copy_block::<2>(src.add(n - 2), dst.add(n - 2));
            }
            4..=7 => {
                copy_block::<4>(src, dst);
                copy_block::<4>(src.add(n - 4), dst.add(n - 4));
            }
            _ => {
                copy_block::<8>(src, dst);
                copy_block::<8>(src.add(n - 8), dst.add(n - 8));
            }
        }
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
    let p = std::mem::ManuallyDrop::new(v).as_mut_ptr();
    let kept = VECS.try_with(|k| {
        let n = k.len.get();
        let slot = k.vecs.get(n)?;
        // The slot is past `len`: it holds no allocation the list owns.
        slot.set(p);
        k.len.set(n + 1);
        Some(())
    });
    // A full list, or one that is not open (see `Kept`).
    if !matches!(kept, Ok(Some(()))) {
        keep_cold(p);
    }
}

/// Keeps the allocation `p` of [`CAP`] `f64`s (a vector [`give`] could
/// not keep on its warm path) if the thread's list is [`OPEN`]: opens it,
/// registering the [`Guard`] that frees it when the thread exits. Frees
/// `p` otherwise (a full list, or a thread whose guard already ran). Out
/// of line, so that the warm path of dropping a small result stays a leaf.
#[cold]
#[inline(never)]
fn keep_cold(p: *mut f64) {
    // SAFETY: `p` is the pointer of a vector of capacity `CAP` that `give`
    // took over (and did not keep): this vector owns it again.
    let v = unsafe { Vec::from_raw_parts(p, 0, CAP) };
    // The guard's first access registers its destructor; `Err` if it ran.
    if VECS.with(|k| k.len.get()) == OPEN && GUARD.try_with(|_| ()).is_ok() {
        VECS.with(|k| {
            k.vecs[0].set(std::mem::ManuallyDrop::new(v).as_mut_ptr());
            k.len.set(1);
        });
        return;
    }
    drop(v);
}

/// A shared `F64` storage holding `vals` (more than `buffer::OWNED_MAX` of them),
/// in a kept allocation when the thread has one and `vals` fit.
pub(crate) fn shared_from(vals: &[f64], zeros: usize) -> Arc<Storage> {
    let n = vals.len() + zeros;
    if n <= SHARED_CAP {
        let kept = SHARED.try_with(|k| {
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

/// Gives `a` back to the thread's list of shared storages if it is one of
/// the list's (an `F64` storage of capacity [`SHARED_CAP`] that no other
/// `Arc` points to) and the list has room; drops it otherwise.
#[inline]
pub(crate) fn give_shared(mut a: Arc<Storage>) {
    match Arc::get_mut(&mut a) {
        Some(Storage::F64(v)) if v.capacity() == SHARED_CAP => {}
        _ => return,
    }
    let _ = SHARED.try_with(|k| {
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
    let n = VECS.with(|k| k.len.get());
    if n <= KEEP {
        n
    } else {
        0
    }
}

/// How many shared storages the calling thread keeps (for tests).
#[cfg(test)]
pub(crate) fn kept_shared() -> usize {
    SHARED.with(|k| k.shared_len.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{buffer_from_slice, buffer_zeroed, Buffer, OWNED_MAX};

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
    fn a_thread_opens_its_list_at_the_first_kept_vector_and_frees_it_at_exit() {
        std::thread::spawn(|| {
            let len = || VECS.with(|k| k.len.get());
            // Nothing kept yet: nothing to take, no destructor registered.
            assert_eq!(len(), OPEN);
            let v = from_slice(&[1.0, 2.0]);
            assert_eq!(len(), OPEN);
            give(v);
            assert_eq!((len(), kept()), (1, 1));
            let w = from_slice(&[3.0]);
            assert_eq!((kept(), &w[..]), (0, &[3.0][..]));
            give(w);
            // What the guard does when the thread exits: the list is freed
            // and closed; later vectors are freed, and taking still works.
            close();
            assert_eq!((len(), kept()), (CLOSED, 0));
            let x = from_slice(&[4.0, 5.0, 6.0]);
            assert_eq!(x, vec![4.0, 5.0, 6.0]);
            give(x);
            assert_eq!(len(), CLOSED);
            // The guard's own run (at exit) finds the list closed.
        })
        .join()
        .unwrap();
        // Threads keeping vectors and exiting while others do.
        let threads: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    let vs: Vec<_> = (0..KEEP + 1)
                        .map(|j| from_slice(&[(i + j) as f64]))
                        .collect();
                    vs.into_iter().for_each(give);
                    assert_eq!(kept(), KEEP);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
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
