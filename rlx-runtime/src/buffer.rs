//! [`Buffer`]: how a concrete tensor holds its [`Storage`].
//!
//! A large tensor's values are shared behind an `Arc`, so that cloning the
//! tensor (or reshaping it) copies nothing. A small tensor's values are
//! owned by the tensor itself: creating one costs one heap allocation (the
//! vector) instead of two (the vector and the `Arc`), which is most of the
//! cost of a warm call of a function of a few small tensors, and of an
//! eager op on them. Cloning a small tensor copies its values: at most
//! [`OWNED_MAX`] elements, about what the reference count of an `Arc`
//! costs to maintain.
//!
//! Small values are not stored inside the tensor (without any heap
//! allocation): every kernel, plan buffer and public accessor
//! ([`crate::Tensor::storage`]) works on a `&Storage` of `Vec`s, so inline
//! values would need a second storage type or a small-vector in every
//! `Storage` variant (about 250 construction and match sites). Measured on
//! the Van der Pol Newton iteration (callgrind), the allocation and free of
//! a 2-element result cost about 60–100 instructions of an eager op's
//! 250–650 (alone, and inside the iteration); the rest is dispatch, which
//! `apply::small` keeps short. Instead, a dropped buffer gives its `f64`
//! allocation back to its thread for the next small result
//! ([`crate::pool`]), when it is one the pool made.
//!
//! Invariant: a buffer is `Owned` exactly when it holds at most
//! [`OWNED_MAX`] elements (made by [`Buffer::new`] or by the pool, or
//! cloned from such a buffer); both variants hold immutable values unless
//! reached through [`Buffer::make_mut`], which copies a shared storage
//! first (copy on write), so a tensor never sees another's writes.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

use crate::pool;
use crate::storage::Storage;

/// Tensors of at most this many elements own their values (see the
/// module docs): as many as a vector of the pool holds ([`pool::CAP`]).
pub(crate) const OWNED_MAX: usize = pool::CAP;

/// The values of a concrete tensor: owned when small, shared otherwise.
#[derive(Debug)]
pub(crate) enum Buffer {
    /// A small tensor's own values. Dropped by hand (`Buffer`'s `Drop`),
    /// so that a vector given back to the pool is not dropped a second
    /// time as an empty one (an outlined call on every small result).
    Owned(ManuallyDrop<Storage>),
    /// Values shared between tensors. Dropped by hand (`Buffer`'s `Drop`,
    /// which may keep the allocation for reuse, see [`crate::pool`]).
    Shared(ManuallyDrop<Arc<Storage>>),
}

impl Buffer {
    /// `storage` as a tensor's buffer: owned when it has at most
    /// [`OWNED_MAX`] elements, shared otherwise.
    #[inline]
    pub(crate) fn new(storage: Storage) -> Buffer {
        if storage.len() <= OWNED_MAX {
            Buffer::owned(storage)
        } else {
            Buffer::shared(Arc::new(storage))
        }
    }

    /// An owned buffer holding `storage` (the caller keeps the invariant:
    /// at most [`OWNED_MAX`] elements).
    #[inline]
    pub(crate) fn owned(storage: Storage) -> Buffer {
        Buffer::Owned(ManuallyDrop::new(storage))
    }

    /// A shared buffer holding `a`.
    #[inline]
    pub(crate) fn shared(a: Arc<Storage>) -> Buffer {
        Buffer::Shared(ManuallyDrop::new(a))
    }

    /// The values of an `f64` buffer no other tensor shares, for writing;
    /// `None` for other buffers.
    #[inline]
    pub(crate) fn unique_f64_mut(&mut self) -> Option<&mut [f64]> {
        let s = match self {
            Buffer::Owned(s) => &mut **s,
            Buffer::Shared(s) => Arc::get_mut(s)?,
        };
        match s {
            Storage::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The values for writing, copying them first if they are shared with
    /// another tensor. `Err` if that copy cannot be allocated.
    pub(crate) fn make_mut(&mut self) -> Result<&mut Storage, std::collections::TryReserveError> {
        if let Buffer::Shared(s) = self {
            if Arc::get_mut(s).is_none() {
                // Fallibly: a refused allocation is an error, not an abort.
                let copy = Arc::new(s.try_clone()?);
                drop(std::mem::replace(&mut **s, copy));
            }
        }
        Ok(match self {
            Buffer::Owned(s) => &mut **s,
            Buffer::Shared(s) => Arc::get_mut(s).expect("made unique above"),
        })
    }

    /// The values, moved out when no other tensor shares them, copied
    /// otherwise.
    pub(crate) fn into_storage(self) -> Storage {
        // Not dropped: the values move to the caller instead of back to
        // the thread's list of vectors (see `Drop`).
        let me = std::mem::ManuallyDrop::new(self);
        match &*me {
            // SAFETY: `me` is never dropped or read again, so the field
            // read out here has exactly one owner.
            Buffer::Owned(s) => ManuallyDrop::into_inner(unsafe { std::ptr::read(s) }),
            Buffer::Shared(s) => {
                // SAFETY: as above.
                let s = ManuallyDrop::into_inner(unsafe { std::ptr::read(s) });
                Arc::try_unwrap(s).unwrap_or_else(|s| (*s).clone())
            }
        }
    }
}

impl Drop for Buffer {
    /// Gives an `f64` allocation back to the thread's lists for reuse
    /// (`crate::pool`, which keeps only its own) and drops the rest. Only
    /// the common case (a pooled vector) is inline: the other storages
    /// and shared buffers are dropped out of line, so that dropping a
    /// small result needs no stack frame.
    #[inline]
    fn drop(&mut self) {
        if let Buffer::Owned(s) = self {
            if let Storage::F64(v) = &mut **s {
                if v.capacity() == pool::CAP {
                    // The pool's vector goes back whole.
                    // SAFETY: the buffer is being dropped and
                    // `ManuallyDrop` left its drop to this function: the
                    // vector read out here is never used or dropped
                    // through `s` again, so it has exactly one owner.
                    pool::give(unsafe { std::ptr::read(v) });
                    return;
                }
            }
        }
        drop_other(self);
    }
}

/// Drops what `Buffer`'s `Drop` does not give back inline: an owned
/// storage other than a pooled vector, or a shared buffer (whose
/// allocation the pool may keep).
#[inline(never)]
fn drop_other(b: &mut Buffer) {
    match b {
        // SAFETY: called once, from `Buffer`'s `Drop`: `s` is never used
        // again, and `ManuallyDrop` left its drop to this function.
        Buffer::Owned(s) => unsafe { ManuallyDrop::drop(s) },
        Buffer::Shared(a) => {
            // SAFETY: as above, for `a`.
            pool::give_shared(unsafe { ManuallyDrop::take(a) });
        }
    }
}

impl Clone for Buffer {
    /// Shares a large buffer; copies a small one (see the module docs).
    #[inline]
    fn clone(&self) -> Buffer {
        match self {
            Buffer::Owned(s) => Buffer::Owned(s.clone()),
            Buffer::Shared(s) => Buffer::shared(Arc::clone(s)),
        }
    }
}

impl Deref for Buffer {
    type Target = Storage;

    #[inline]
    fn deref(&self) -> &Storage {
        match self {
            Buffer::Owned(s) => s,
            Buffer::Shared(s) => s,
        }
    }
}

/// A tensor buffer holding `vals`: owned or shared as [`Buffer::new`]
/// decides by the length, in a kept allocation when the thread has one.
#[inline]
pub(crate) fn buffer_from_slice(vals: &[f64]) -> Buffer {
    if vals.len() <= OWNED_MAX {
        Buffer::owned(Storage::F64(pool::from_slice(vals)))
    } else {
        Buffer::shared(pool::shared_from(vals, 0))
    }
}

/// A tensor buffer of `n` zeros (see [`buffer_from_slice`]).
#[inline]
pub(crate) fn buffer_zeroed(n: usize) -> Buffer {
    if n <= OWNED_MAX {
        Buffer::owned(Storage::F64(pool::zeroed(n)))
    } else {
        Buffer::shared(pool::shared_from(&[], n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_owned_and_large_ones_shared_at_the_threshold() {
        let at = Buffer::new(Storage::F64(vec![1.0; OWNED_MAX]));
        assert!(matches!(at, Buffer::Owned(_)));
        let over = Buffer::new(Storage::F64(vec![1.0; OWNED_MAX + 1]));
        assert!(matches!(over, Buffer::Shared(_)));
        // Clones keep the kind: a shared clone is the same allocation.
        let (Buffer::Shared(a), Buffer::Shared(b)) = (&over, &over.clone()) else {
            panic!("a shared buffer's clone is shared");
        };
        assert!(Arc::ptr_eq(a, b));
        assert!(matches!(at.clone(), Buffer::Owned(_)));
    }

    #[test]
    fn writes_never_reach_another_buffer() {
        for n in [OWNED_MAX, OWNED_MAX + 1] {
            let a = Buffer::new(Storage::F64(vec![1.0; n]));
            let mut b = a.clone();
            let Storage::F64(v) = b.make_mut().unwrap() else {
                panic!("f64 storage");
            };
            v[0] = 2.0;
            assert_eq!(a.get_f64(0), 1.0, "n = {n}");
            assert_eq!(b.get_f64(0), 2.0, "n = {n}");
            // A buffer no longer shared is written in place.
            let before = b.get_f64(0);
            drop(a);
            let Storage::F64(v) = b.make_mut().unwrap() else {
                panic!("f64 storage");
            };
            v[1] = before;
            assert_eq!(b.into_storage().get_f64(1), 2.0);
        }
    }
}
