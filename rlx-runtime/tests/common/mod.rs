//! Shared support of the tests: the naive reference math of the ops
//! ([`reference`]), running graphs, random points and directions, finite
//! differences.
//!
//! `run` executes a graph with the runtime's reference interpreter
//! (`rlx_runtime::interpret`) and cross-checks every result against the
//! compiled plan (`rlx_runtime::compile`) and against [`reference::eval`],
//! written from plain math independently of the kernels, so a derivative
//! test fails whether the rule, the kernel or the compiler is wrong, and
//! says which.
#![allow(dead_code)]

pub mod reference;

use rlx_core::{DType, Graph, Literal, NodeId, Shape};
use rlx_runtime::{compile, interpret, Storage, Tensor};

/// Runs `g` on `inputs` (one flat row-major vector per input, converted to
/// the declared dtypes) with the interpreter; checks against [`reference`].
pub fn run(g: &Graph, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    assert_eq!(inputs.len(), g.inputs().len(), "number of inputs");
    let ts: Vec<Tensor> = g
        .inputs()
        .iter()
        .zip(inputs)
        .map(|(inp, v)| {
            let ty = g.ty(inp.node);
            Tensor::from_storage(Storage::from_f64(ty.dtype, v.iter().copied()), ty.shape).unwrap()
        })
        .collect();
    let refs: Vec<&Tensor> = ts.iter().collect();
    let out: Vec<Vec<f64>> = interpret(g, &refs)
        .unwrap_or_else(|e| panic!("interpret: {e}\n{g}"))
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect();
    let compiled: Vec<Vec<f64>> = compile(g)
        .and_then(|exe| exe.run(&refs))
        .unwrap_or_else(|e| panic!("compile: {e}\n{g}"))
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect();
    let want: Vec<Vec<f64>> = reference::eval(g, inputs)
        .into_iter()
        .map(|v| v.data)
        .collect();
    // f32/f16 kernels round differently from f64-then-round: compare loosely there
    let tol = if g
        .nodes()
        .iter()
        .any(|n| n.dtype.is_float() && n.dtype != DType::F64)
    {
        1e-4
    } else {
        1e-9
    };
    for (k, (a, b)) in out.iter().zip(&want).enumerate() {
        let same = a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs())
            });
        assert!(
            same,
            "output {k}: interpreter {a:?} != reference {b:?}\n{g}"
        );
    }
    for (k, (a, b)) in compiled.iter().zip(&out).enumerate() {
        let same = a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs())
            });
        assert!(same, "output {k}: compiled {a:?} != interpreter {b:?}\n{g}");
    }
    out
}

// ---- random points, directions and finite differences ----

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform(0.0, n as f64) as usize).min(n - 1)
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// `⟨a, b⟩`.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Central difference `(f(x + h v) - f(x - h v)) / 2h` of output `k` of `g`
/// along direction `v` (one vector per input; empty for inputs held fixed).
pub fn fd(g: &Graph, x: &[Vec<f64>], v: &[Vec<f64>], k: usize, h: f64) -> Vec<f64> {
    let shift = |s: f64| -> Vec<Vec<f64>> {
        x.iter()
            .zip(v)
            .map(|(xi, vi)| {
                if vi.is_empty() {
                    xi.clone()
                } else {
                    xi.iter().zip(vi).map(|(a, b)| a + s * b).collect()
                }
            })
            .collect()
    };
    let p = run(g, &shift(h)).remove(k);
    let m = run(g, &shift(-h)).remove(k);
    p.iter().zip(&m).map(|(a, b)| (a - b) / (2.0 * h)).collect()
}

/// Asserts `|a - b| <= tol * (1 + |b|)` element-wise (equal values,
/// infinities included, and two NaNs agree).
#[track_caller]
pub fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * (1.0 + y.abs());
        assert!(
            ok,
            "{what}: element {i}: got {x}, expected {y}\n got {a:?}\nwant {b:?}"
        );
    }
}

/// Deterministic pseudo-random values in `[lo, hi)` (an LCG from `seed`).
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// A tensor of `dtype` holding `values` (rounded to the dtype).
pub fn tensor(values: &[f64], dims: &[usize], dtype: DType) -> Tensor {
    Tensor::from_storage(
        Storage::from_f64(dtype, values.iter().copied()),
        dims.to_vec(),
    )
    .unwrap()
}

/// An f64 input of the given shape.
pub fn input(g: &mut Graph, name: &str, shape: &[usize]) -> NodeId {
    g.input(name, Shape::from(shape), DType::F64)
}

/// A constant f64 tensor.
pub fn constant(g: &mut Graph, v: Vec<f64>, shape: &[usize]) -> NodeId {
    g.constant(Literal::F64(v.into()), Shape::from(shape), DType::F64)
        .unwrap()
}

/// A constant i64 tensor.
pub fn indices(g: &mut Graph, v: Vec<i64>, shape: &[usize]) -> NodeId {
    g.constant(Literal::I64(v.into()), Shape::from(shape), DType::I64)
        .unwrap()
}

/// Asserts that two tensors hold the same shape, dtype and values bit for
/// bit (any NaN equals any NaN).
pub fn assert_same_values(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shape");
    assert_eq!(a.dtype(), b.dtype(), "{what}: dtype");
    let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert!(
            p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()),
            "{what}: element {i}: {p:?} vs {q:?}"
        );
    }
}
