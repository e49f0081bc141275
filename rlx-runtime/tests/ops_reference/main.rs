//! Every op's kernel against the naive reference (plain f64 loops over
//! multi-indices, independent of the runtime). Each op is checked in
//! f64 and f32 (and f16/bf16 within their precision) with broadcasting, 0-d
//! scalars and size-0 dimensions; then errors, printing and the traced path.
//! The reference math is the shared one of tests/common/reference.rs.
//!
//! Modules by topic: `elementwise`, `reductions_linalg`, `movement`, `api`;
//! this file holds the data generator and the per-dtype comparison.

mod api;
#[path = "../common/mod.rs"]
mod common;
mod elementwise;
mod movement;
mod reductions_linalg;

use common::reference::{self, broadcast_map, numel, ravel, unravel, Val};
use common::tensor;

use rlx_runtime::{
    interpret, trace::Trace, BinaryOp, CmpOp, DType, Error, Graph, Op, ReduceOp, Shape, Storage,
    Tensor, UnaryOp,
};

// ---------- data and comparison ----------

/// A small deterministic generator (xorshift), values in `[-2, 2)`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// The values a tensor actually holds, as f64. The references here are
/// real: a complex tensor must hold real values (its imaginary parts
/// exactly 0), and its real parts are compared.
fn vals(t: &Tensor) -> Vec<f64> {
    if !t.dtype().is_complex() {
        return t.to_f64_vec().unwrap();
    }
    let z = t.to_complex_vec().unwrap();
    assert!(
        z.iter().all(|c| c.im == 0.0),
        "a complex tensor of real values has nonzero imaginary parts: {z:?}"
    );
    z.iter().map(|c| c.re).collect()
}

/// Relative and absolute tolerance per dtype: about the rounding of one
/// result, with room for the f32 computation of f16/bf16.
fn tol(d: DType) -> (f64, f64) {
    match d {
        DType::F64 | DType::C64 => (1e-11, 1e-12),
        DType::F32 | DType::C32 => (1e-5, 1e-6),
        DType::F16 => (2e-3, 1e-3),
        DType::BF16 => (1.6e-2, 1e-2),
        DType::I64 | DType::Bool => (0.0, 0.0),
    }
}

#[track_caller]
fn assert_close(got: &Tensor, want: &[f64], want_shape: &[usize], dtype: DType, what: &str) {
    assert_eq!(got.shape().dims(), want_shape, "{what}: shape");
    assert_eq!(got.dtype(), dtype, "{what}: dtype");
    let g = vals(got);
    assert_eq!(g.len(), want.len(), "{what}: length");
    let (rel, abs) = tol(dtype);
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * b.abs() + abs;
        assert!(
            ok,
            "{what} [{dtype}] element {i}: got {a}, want {b}\n got  {g:?}\n want {want:?}"
        );
    }
}

// ---------- index helpers of the reference ----------

/// Maps generated values into the op's domain (and away from poles).
fn domain(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Ln | UnaryOp::Sqrt | UnaryOp::Rsqrt => x.abs() + 0.1,
        UnaryOp::Log1p => x.abs() - 0.5,
        UnaryOp::Asin | UnaryOp::Acos => x / 2.5,
        UnaryOp::Tan => x * 0.6,
        UnaryOp::Recip => x + 0.5f64.copysign(x),
        _ => x,
    }
}

const FLOATS: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];

// ---------- element-wise ----------
