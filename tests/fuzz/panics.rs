//! Catching a panic with its message and location (shared with
//! `tests/hostile_input.rs`): what rlx's panicking conveniences promise is
//! rlx's own message at the caller's line.

use std::cell::RefCell;
use std::panic::{self, UnwindSafe};
use std::sync::Mutex;

/// A panic's message and the file and line it names.
#[derive(Debug)]
pub struct Caught {
    pub message: String,
    pub file: String,
    pub line: u32,
}

thread_local! {
    static LAST: RefCell<Option<(String, u32)>> = const { RefCell::new(None) };
}

/// The panic hook is global: tests that swap it take turns.
static HOOK: Mutex<()> = Mutex::new(());

/// Runs `f`, which must panic, and returns what the panic said and where.
pub fn panic_of<R>(f: impl FnOnce() -> R + UnwindSafe) -> Caught {
    try_panic_of(f).expect("expected a panic")
}

/// Runs `f`; `None` if it returned, the panic otherwise.
pub fn try_panic_of<R>(f: impl FnOnce() -> R + UnwindSafe) -> Option<Caught> {
    let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let previous = panic::take_hook();
    panic::set_hook(Box::new(|info| {
        let loc = info.location().map(|l| (l.file().to_string(), l.line()));
        LAST.with(|c| *c.borrow_mut() = loc);
    }));
    let result = panic::catch_unwind(f);
    panic::set_hook(previous);
    let payload = result.err()?;
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    let (file, line) = LAST.with(|c| c.borrow_mut().take()).expect("the hook ran");
    Some(Caught {
        message,
        file,
        line,
    })
}
