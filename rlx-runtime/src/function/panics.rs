//! Panics while tracing: caught ([`catch`]) and returned as an `Err` with
//! the panic's message and the line it names, without the report the
//! default panic hook prints to stderr (`thread 'main' panicked at …` and
//! a backtrace).
//!
//! # Why one hook for the process, not one per trace
//!
//! The panic hook is global. Setting it for the duration of each trace and
//! restoring the previous one after would race with other threads: a panic
//! on another thread while one traces would be silenced, and two threads
//! tracing at once would restore each other's hooks in the wrong order
//! (losing the program's own hook). So the first trace installs one hook,
//! once, wrapping the hook in place at that moment:
//! - a panic on a thread that is inside [`catch`] (a thread-local depth,
//!   so nested traces count once) records its location for [`catch`]
//!   and prints nothing;
//! - every other panic, on any thread, goes to the wrapped hook, exactly
//!   as it would have without rlx.
//!
//! A hook the program sets after the first trace replaces this one: a
//! panic while tracing is then reported by that hook, and still becomes an
//! `Err` (with the message, without the line). A panic that the traced
//! code catches itself (`catch_unwind` inside the body) is not printed
//! either.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

/// A caught panic: its message and the `file:line:column` it names.
#[derive(Debug)]
pub(super) struct Caught {
    /// The panic's message (`(no message)` for a payload that is not a string).
    pub(super) message: String,
    /// Where it was raised, when the hook saw it.
    pub(super) location: Option<(String, u32, u32)>,
}

thread_local! {
    /// How many [`catch`] calls are active on this thread.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The location of the last panic on this thread while `DEPTH > 0`.
    static LAST: RefCell<Option<(String, u32, u32)>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Installs the hook (once per process); see the module docs.
fn install() {
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            // `try_with`: a panic while the thread's locals are being
            // destroyed goes to the previous hook.
            let tracing = DEPTH.try_with(|d| d.get() > 0).unwrap_or(false);
            if !tracing {
                return previous(info);
            }
            let loc = info
                .location()
                .map(|l| (l.file().to_string(), l.line(), l.column()));
            let _ = LAST.try_with(|c| *c.borrow_mut() = loc);
        }));
    });
}

/// Decrements the depth when [`catch`] ends, however it ends.
struct Depth;

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Runs `f`, catching a panic: `Err` with its message and location, and
/// nothing printed (see the module docs).
pub(super) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, Caught> {
    install();
    DEPTH.with(|d| d.set(d.get() + 1));
    LAST.with(|c| c.borrow_mut().take());
    let result = {
        let _depth = Depth;
        panic::catch_unwind(AssertUnwindSafe(f))
    };
    result.map_err(|payload| Caught {
        message: payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)")
            .to_string(),
        location: LAST.with(|c| c.borrow_mut().take()),
    })
}
