//! Compiled results against `rlx_runtime::interpret` and the naive reference
//! evaluator (tests/common/reference.rs) for every op, f32/f64 (and half
//! precision), broadcasting, 0-d and size-0 values, random graphs; matmul
//! edge cases; buffer reuse; input and output errors; concurrency.
//!
//! Modules by topic: `elementwise`, `reductions_linalg`, `movement`,
//! `fusion`, `fusion_movement`, `unzeroed`, `execution`; this file holds the
//! shared `check`.

#[path = "../common/mod.rs"]
mod common;
/// The device graph shared with `rlx-core`'s tests.
#[path = "../../../rlx-core/tests/shared/device.rs"]
mod device;
mod elementwise;
mod epilogues;
mod execution;
mod fusion;
mod fusion_movement;
/// The broadcast-form Lennard-Jones graph shared with `no_alloc.rs`.
#[path = "../shared/lj.rs"]
mod lj;
mod movement;
mod reductions_linalg;
mod unzeroed;

use common::assert_same_values;
use common::reference::{self, eval_tensors, Val};
use common::{assert_close, tensor, values};
use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{
    compile, Arg, BinaryOp, CmpOp, DType, Error, Executable, Graph, NodeId, ReduceOp, Shape,
    Tensor, UnaryOp,
};

fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 | DType::C64 => 1e-12,
        DType::F32 | DType::C32 => 2e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 2e-2,
        DType::I64 | DType::Bool => 0.0,
    }
}

/// `g` compiled by the general planner (scalarisation off), for tests of
/// the general plan's structure.
fn general(g: &Graph) -> Executable {
    let options = Options::general();
    compile_with(g, &options).unwrap()
}

/// Compiles `g` with the general planner, runs it on `inputs` and compares
/// every output with the naive evaluator; when `g` is small enough to be
/// scalarised (the default compilation), the scalarised plan's outputs
/// must equal the general plan's bit for bit. Returns the general plan.
fn check(g: &Graph, inputs: &[&Tensor], rtol: f64, what: &str) -> Executable {
    let exe = general(g);
    let scalarized = compile(g).unwrap_or_else(|e| panic!("{what}: compile: {e}"));
    if scalarized.stats().scalarized_nodes > 0 {
        let (a, b) = (exe.run(inputs), scalarized.run(inputs));
        let (a, b) = (
            a.unwrap(),
            b.unwrap_or_else(|e| panic!("{what}: scalarised: {e}")),
        );
        for (j, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_same_values(x, y, &format!("{what}: output {j} scalarised"));
        }
    }
    let got = exe
        .run(inputs)
        .unwrap_or_else(|e| panic!("{what}: run: {e}"));
    let want = eval_tensors(g, inputs);
    assert_eq!(got.len(), want.len());
    for (j, (t, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(t.shape().dims(), &w.dims[..], "{what}: output {j} shape");
        assert_close(
            &t.to_f64_vec().unwrap(),
            &w.data,
            rtol,
            &format!("{what}: output {j}"),
        );
    }
    // The reference interpreter (per-op reference kernels) agrees too.
    let interp =
        rlx_runtime::interpret(g, inputs).unwrap_or_else(|e| panic!("{what}: interpret: {e}"));
    for (j, (t, r)) in got.iter().zip(&interp).enumerate() {
        assert_eq!(
            t.shape(),
            r.shape(),
            "{what}: output {j} shape vs interpret"
        );
        assert_eq!(
            t.dtype(),
            r.dtype(),
            "{what}: output {j} dtype vs interpret"
        );
        assert_close(
            &t.to_f64_vec().unwrap(),
            &r.to_f64_vec().unwrap(),
            rtol,
            &format!("{what}: output {j} vs interpret"),
        );
    }
    // A second (warm) run gives the same values.
    let again = exe.run(inputs).unwrap();
    for (a, b) in got.iter().zip(&again) {
        assert_close(
            &a.to_f64_vec().unwrap(),
            &b.to_f64_vec().unwrap(),
            0.0,
            &format!("{what}: warm run"),
        );
    }
    exe
}

fn domain(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Asin | UnaryOp::Acos => (-0.9, 0.9),
        UnaryOp::Ln | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Log1p => (0.1, 3.0),
        UnaryOp::Tan => (-1.2, 1.2),
        _ => (-3.0, 3.0),
    }
}

/// The error of a run that must fail.
fn run_err(exe: &Executable, inputs: &[&Tensor]) -> Error {
    match exe.run(inputs) {
        Ok(_) => panic!("run succeeded"),
        Err(e) => e,
    }
}
