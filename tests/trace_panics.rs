//! A panic while tracing a `#[differentiable]` function is the companion's
//! `Err`, naming the panic's message and the line that panicked, and the
//! default panic hook prints nothing (no `thread 'main' panicked at` and
//! backtrace on stderr). The hook rlx installs (once, at the first trace)
//! passes every other panic, on any thread, to the hook it replaced.

use std::sync::Mutex;

use rlx::prelude::*;

#[differentiable]
fn boom(x: &Tensor, n: usize) -> f64 {
    let v = [1.0, 2.0];
    let k = v[n]; // PANICS
    (x * k).sum_all()
}

/// The `file:line:` of the line of this file that ends with `// PANICS`.
fn panic_line() -> String {
    let src = include_str!("trace_panics.rs");
    let i = src
        .lines()
        .position(|l| l.ends_with("// PANICS"))
        .expect("marker in this file");
    format!("{}:{}:", file!(), i + 1)
}

/// Asserts that `e` is the panic of `boom` with index `n`, at its line.
fn assert_is_the_panic(e: &Error, n: usize) {
    let msg = e.to_string();
    assert!(
        msg.contains(&format!(
            "`boom` panicked while being traced: index out of bounds: the len is 2 but the index is {n}"
        )),
        "{msg}"
    );
    assert!(msg.contains(&format!("--> {}", panic_line())), "{msg}");
    assert!(msg.contains("while tracing `boom(x: f64[3])`"), "{msg}");
}

/// Run in a child process (this test again, with `RLX_TRACE_PANIC_CHILD`
/// set) so that its stderr can be read: the default hook is in place, and
/// prints nothing for the panic while tracing.
#[test]
fn a_panic_while_tracing_prints_nothing_on_stderr() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    if std::env::var_os("RLX_TRACE_PANIC_CHILD").is_some() {
        let e = grad_boom(&x, 5).unwrap_err();
        assert_is_the_panic(&e, 5);
        println!("child done: {e}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "a_panic_while_tracing_prints_nothing_on_stderr",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RLX_TRACE_PANIC_CHILD", "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("child done: "), "{stdout}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    assert!(!stderr.contains("backtrace"), "stderr: {stderr}");
}

/// What the program's own hook saw.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The program's hook, set before the first trace: it still gets every
/// panic that is not inside a trace, on every thread, also while another
/// thread traces; it never sees the panics while tracing.
#[test]
fn other_panics_reach_the_programs_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info.payload_as_str().unwrap_or("").to_string();
        SEEN.lock().unwrap().push(msg);
    }));
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    assert_is_the_panic(&grad_boom(&x, 7).unwrap_err(), 7);
    assert!(
        SEEN.lock().unwrap().is_empty(),
        "{:?}",
        SEEN.lock().unwrap()
    );

    // While one thread traces (a new signature each call: each traces and
    // panics), another panics: the hook sees exactly the other's panics.
    let tracing = std::thread::spawn(move || {
        for n in 10..40 {
            let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
            assert_is_the_panic(&grad_boom(&x, n).unwrap_err(), n);
        }
    });
    let other = std::thread::spawn(|| {
        for i in 0..30 {
            let r = std::panic::catch_unwind(|| panic!("other thread {i}"));
            assert!(r.is_err());
        }
    });
    tracing.join().unwrap();
    other.join().unwrap();
    let seen = SEEN.lock().unwrap().clone();
    let _ = std::panic::take_hook();
    let want: Vec<String> = (0..30).map(|i| format!("other thread {i}")).collect();
    assert_eq!(seen, want);
}
