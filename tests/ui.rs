//! trybuild tests of `#[differentiable]`: one compile-fail file per
//! rejected construct (`tests/ui/<topic>/<what-is-wrong>.rs` + `.stderr`)
//! and pass cases that compile and run (`tests/ui/pass/`).
//! Refresh the expected output with `TRYBUILD=overwrite`, then read the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/signature/*.rs");
    t.compile_fail("tests/ui/args/*.rs");
    t.compile_fail("tests/ui/body/*.rs");
    t.compile_fail("tests/ui/call/*.rs");
    t.compile_fail("tests/ui/scan/*.rs");
    t.compile_fail("tests/ui/lint/*.rs");
    t.compile_fail("tests/ui/api/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
