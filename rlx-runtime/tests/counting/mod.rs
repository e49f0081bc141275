//! A counting global allocator for the no-allocation tests: a test binary
//! that includes this module counts the heap allocations each thread makes
//! while [`allocations`] runs a closure.
//!
//! Included with `mod counting;` by the tests of this package and with
//! `#[path = "../rlx-runtime/tests/counting/mod.rs"] mod counting;` by the
//! workspace's own tests, so that the allocator is written once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
    /// Bytes this thread holds beyond what it held when armed, and their peak.
    static BYTES: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note() {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

fn bytes(delta: isize) {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let _ = BYTES.try_with(|b| {
                let now = b.get() + delta;
                b.set(now);
                let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
            });
        }
    });
}

// SAFETY: forwards to the system allocator; the bookkeeping touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        bytes(layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        bytes(-(layout.size() as isize));
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        bytes(layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        bytes(new_size as isize - layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The most heap bytes this thread held at once while `f` ran, beyond what
/// it held when `f` started (memory allocated earlier and freed by `f`
/// counts as negative).
#[allow(dead_code)]
pub fn peak_bytes(f: impl FnOnce()) -> usize {
    BYTES.with(|b| b.set(0));
    PEAK.with(|p| p.set(0));
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    PEAK.with(|p| p.get()).max(0) as usize
}

/// Allocations (and reallocations) made by this thread while `f` runs.
#[allow(dead_code)]
pub fn allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    COUNT.with(|c| c.get())
}
