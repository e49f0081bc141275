//! The thread-local stack of active traces (the bottom of tracing: tensors
//! read the current trace id from it when they are created; [`crate::trace`]
//! pushes, records into and pops its frames).

use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicU64;

use rlx_core::{DType, Error, Graph, NodeId, Shape};

/// One active trace: its id, the graph recorded so far, its first error.
pub(crate) struct Frame {
    pub(crate) id: u64,
    pub(crate) graph: Graph,
    pub(crate) error: Option<Error>,
    /// For the body of a loop (`Trace::enter_body`): the values of
    /// enclosing traces the body used, each with the input it became.
    pub(crate) captures: Option<Vec<Capture>>,
    /// For a graph traced to run at once on concrete tensors (`rlx::root`
    /// outside a trace): any concrete tensor becomes a constant, whatever
    /// trace it was made in, since no plan of this graph is cached.
    pub(crate) eager: bool,
}

/// A value of an enclosing trace used in a loop body.
pub(crate) struct Capture {
    /// The trace and node it comes from, and its type.
    pub(crate) trace: u64,
    pub(crate) node: NodeId,
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
    /// The body's input standing for it.
    pub(crate) input: NodeId,
}

thread_local! {
    /// The active traces of this thread, innermost last.
    pub(crate) static STACK: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// The id of [`STACK`]'s innermost frame (0: none), kept by every
    /// change of the stack ([`sync_current`]): read by every tensor made
    /// and every warm companion call, it is one load from a `const`
    /// thread-local with no destructor (the stack itself is a `RefCell` to
    /// borrow behind a lazily registered destructor).
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// Sets [`CURRENT`] from `stack`, after each change of [`STACK`].
#[inline]
pub(crate) fn sync_current(stack: &[Frame]) {
    let id = stack.last().map_or(0, |f| f.id);
    let _ = CURRENT.try_with(|c| c.set(id));
}

/// The id of the next trace (ids are never reused; 0 means none).
pub(crate) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Id of the innermost active trace on this thread, or 0 outside any trace.
#[inline]
pub fn current_id() -> u64 {
    // During thread teardown (after the cell is gone) no trace is active.
    CURRENT.try_with(Cell::get).unwrap_or(0)
}

/// Whether a trace is active on this thread.
#[inline]
pub fn is_tracing() -> bool {
    current_id() != 0
}

/// Runs `f` on the graph of the innermost trace (the caller checked that
/// one is active).
pub(crate) fn with_current<R>(f: impl FnOnce(&mut Graph) -> R) -> R {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        let frame = s.last_mut().expect("caller checked that a trace is active");
        f(&mut frame.graph)
    })
}
