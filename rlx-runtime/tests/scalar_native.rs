//! Scalar regions compiled to native code (feature `jit`) give bit-identical
//! results to the interpreter (any NaN equal to any NaN, see [`bits`]), through `run` (leaves gathered from the
//! state) and `run_args` (a whole-graph scalar program over numbers), for
//! every element-wise op, f64 and f32 values, casts, comparisons, selects
//! and special values (±0, ±inf, NaN, negative arguments of sqrt and ln).

#![cfg(feature = "jit")]

use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{Arg, BinaryOp, CmpOp, DType, Graph, NodeId, Tensor, UnaryOp, Value};

/// A deterministic generator (no dependency needed for a test this small).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

const SPECIAL: [f64; 9] = [
    0.0,
    -0.0,
    1.5,
    -2.25,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e-300,
    3.0,
];

/// The bits of a 0-d result, every NaN made one: which NaN an operation
/// returns is not specified (with two NaN operands IEEE 754 lets it return
/// either, x86 returns the first, and an optimiser may commute `a + b`, as
/// an optimised build of the interpreter does), and Rust does not promise
/// NaN signs or payloads (RFC 3514). So the native code and the
/// interpreter agree on which results are NaN, and on every other value to
/// the bit (±0 and ±inf included).
fn bits(v: &Value) -> u64 {
    let x = match v {
        Value::F64(x) => *x,
        Value::F32(x) => f64::from(*x),
        Value::Tensor(t) if t.dtype() == DType::F32 => f64::from(t.item::<f32>().unwrap()),
        Value::Tensor(t) => t.item::<f64>().unwrap(),
    };
    if x.is_nan() {
        f64::NAN.to_bits()
    } else {
        x.to_bits()
    }
}

/// A random 0-d graph over inputs `a: f64`, `b: f64`, `c: f32`.
fn random_graph(rng: &mut Lcg) -> Graph {
    let mut g = Graph::new();
    let a = g.input("a", [], DType::F64);
    let b = g.input("b", [], DType::F64);
    let c = g.input("c", [], DType::F32);
    let mut f64s: Vec<NodeId> = vec![a, b];
    let mut f32s: Vec<NodeId> = vec![c];
    let unary: Vec<UnaryOp> = UnaryOp::ALL
        .into_iter()
        .chain([UnaryOp::Powi(-3), UnaryOp::Powi(0), UnaryOp::Powi(5)])
        .collect();
    for _ in 0..(12 + rng.below(20)) {
        let wide = rng.below(4) != 0;
        let pool = if wide { &f64s } else { &f32s };
        let x = pool[rng.below(pool.len())];
        let y = pool[rng.below(pool.len())];
        let made = match rng.below(6) {
            0 | 1 => g.unary(unary[rng.below(unary.len())], x),
            2 | 3 => g.binary(BinaryOp::ALL[rng.below(BinaryOp::ALL.len())], x, y),
            4 => g
                .compare(CmpOp::ALL[rng.below(CmpOp::ALL.len())], x, y)
                .and_then(|m| g.select(m, x, y)),
            _ => {
                let to = if wide { DType::F32 } else { DType::F64 };
                g.cast(x, to)
            }
        };
        // Ops that do not apply to floats (logical and/or, ...) are skipped.
        if let Ok(n) = made {
            match g.node(n).dtype {
                DType::F64 => f64s.push(n),
                _ => f32s.push(n),
            }
        }
    }
    let mut outs: Vec<NodeId> = f64s[2..].iter().rev().take(3).copied().collect();
    outs.extend(f32s[1..].iter().rev().take(2));
    g.set_outputs(outs);
    g
}

#[test]
fn native_regions_match_the_interpreter_bit_for_bit() {
    let mut rng = Lcg(7);
    let mut native = 0;
    for case in 0..200 {
        let g = random_graph(&mut rng);
        if g.outputs().is_empty() {
            continue;
        }
        let jit = compile_with(
            &g,
            &Options {
                jit: true,
                ..Options::default()
            },
        )
        .unwrap();
        let interp = compile_with(
            &g,
            &Options {
                jit: false,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(interp.stats().native_regions, 0);
        native += jit.stats().native_regions;
        for _ in 0..4 {
            let (a, b) = (SPECIAL[rng.below(9)], SPECIAL[rng.below(9)]);
            let c = SPECIAL[rng.below(9)] as f32;
            let args = [Arg::F64(a), Arg::F64(b), Arg::F32(c)];
            let want = interp.run_args(&args).unwrap();
            let got = jit.run_args(&args).unwrap();
            let tensors = [Tensor::scalar(a), Tensor::scalar(b), Tensor::scalar(c)];
            let refs: Vec<&Tensor> = tensors.iter().collect();
            let via_run = jit.run(&refs).unwrap();
            for (j, w) in want.iter().enumerate() {
                let w = bits(w);
                let what = format!("case {case}, output {j}, inputs ({a}, {b}, {c})\n{g}");
                assert_eq!(bits(&got[j]), w, "run_args: {what}");
                let r = Value::Tensor(via_run[j].clone());
                assert_eq!(bits(&r), w, "run: {what}");
            }
        }
    }
    // Most random graphs are one region big enough to be compiled.
    assert!(native > 100, "only {native} native regions in 200 graphs");
}

/// The Lennard-Jones pair energy's gradient: the kind of region the JIT is
/// for, checked against the closed form (and against the interpreter).
#[test]
fn native_gradient_of_a_pair_energy() {
    let mut g = Graph::new();
    let x = g.input("x", [], DType::F64);
    let r2 = g.square(x).unwrap();
    let s = g.recip(r2).unwrap();
    let s3 = g.powi(s, 3).unwrap();
    let s6 = g.square(s3).unwrap();
    let e = g.sub(s6, s3).unwrap();
    let four = g.scalar(4.0, DType::F64);
    let e = g.mul(e, four).unwrap();
    g.set_outputs(vec![e]);
    let vg = rlx_core::autodiff::value_and_grad(&g, &[0]).unwrap();
    let jit = compile_with(
        &vg,
        &Options {
            jit: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(jit.stats().native_regions, 1);
    let interp = compile_with(
        &vg,
        &Options {
            jit: false,
            ..Options::default()
        },
    )
    .unwrap();
    for r in [0.9, 1.0, 2f64.powf(1.0 / 6.0), 1.7] {
        let got = jit.run_args(&[Arg::F64(r)]).unwrap();
        let want = interp.run_args(&[Arg::F64(r)]).unwrap();
        assert_eq!(bits(&got[0]), bits(&want[0]));
        assert_eq!(bits(&got[1]), bits(&want[1]));
        let de = 4.0 * (-12.0 * r.powi(-13) + 6.0 * r.powi(-7));
        let Value::F64(d) = got[1] else {
            panic!("a 0-d f64 gradient comes back as a number")
        };
        assert!((d - de).abs() <= 1e-12 * de.abs().max(1.0), "{d} vs {de}");
    }
}

/// Compiles `g` with and without native code; the native plan must have
/// one native region.
fn both(g: &Graph) -> (rlx_runtime::Executable, rlx_runtime::Executable) {
    let with = |jit| {
        compile_with(
            g,
            &Options {
                jit,
                ..Options::default()
            },
        )
        .unwrap()
    };
    let (native, interp) = (with(true), with(false));
    assert_eq!(native.stats().native_regions, 1, "{g}");
    (native, interp)
}

/// The ops the native code computes with lane masks instead of branches
/// (`mul_zero`, max, min, every comparison, select, casts to `f32` and
/// `bool`) or with a constant sign mask (neg, abs), on every pair of
/// special values: ±0 (the sign of a zero result), ±inf, NaN, a
/// subnormal-adjacent value and ordinary ones.
#[test]
fn masked_ops_match_the_interpreter_on_every_special_pair() {
    let mut g = Graph::new();
    let a = g.input("a", [], DType::F64);
    let b = g.input("b", [], DType::F64);
    let mut outs = Vec::new();
    for op in [BinaryOp::MulZero, BinaryOp::Max, BinaryOp::Min] {
        outs.push(g.binary(op, a, b).unwrap());
    }
    for op in CmpOp::ALL {
        let m = g.compare(op, a, b).unwrap();
        outs.push(g.cast(m, DType::F64).unwrap());
        outs.push(g.select(m, a, b).unwrap());
    }
    // A number as a mask: NaN and -0 are tested as `!= 0`.
    let m = g.cast(a, DType::Bool).unwrap();
    outs.push(g.cast(m, DType::F64).unwrap());
    outs.push(g.select(m, b, a).unwrap());
    let narrow = g.cast(a, DType::F32).unwrap();
    outs.push(g.cast(narrow, DType::F64).unwrap());
    outs.push(g.unary(UnaryOp::Neg, a).unwrap());
    outs.push(g.unary(UnaryOp::Abs, a).unwrap());
    g.set_outputs(outs);
    let (native, interp) = both(&g);
    for x in SPECIAL.into_iter().chain([-f64::NAN, 1e-40, -0.1]) {
        for y in SPECIAL.into_iter().chain([-f64::NAN, 1e-40, -0.1]) {
            let args = [Arg::F64(x), Arg::F64(y)];
            let want = interp.run_args(&args).unwrap();
            let got = native.run_args(&args).unwrap();
            for (j, (w, o)) in want.iter().zip(&got).enumerate() {
                assert_eq!(bits(o), bits(w), "output {j} at ({x}, {y})\n{g}");
            }
        }
    }
}

/// Regions of up to eight leaves take them in registers, larger ones read
/// them from memory: on each side of that boundary (1 to 10 leaves, each
/// used at its own place in a chain of ops whose result depends on the
/// order of the leaves), the native code gives the interpreter's bits,
/// through `run_args` and through `run`.
#[test]
fn every_leaf_count_gives_the_interpreters_bits() {
    let ops = [BinaryOp::Sub, BinaryOp::Div, BinaryOp::Mul, BinaryOp::Add];
    // (Without a leaf the whole graph folds to constants: no region.)
    for n in 1..=10 {
        let mut g = Graph::new();
        let xs: Vec<NodeId> = (0..n)
            .map(|i| g.input(format!("x{i}"), [], DType::F64))
            .collect();
        let mut acc = g.scalar(0.75, DType::F64);
        for (i, &x) in xs.iter().enumerate() {
            let t = g.unary(UnaryOp::Sin, x).unwrap();
            let t = g.binary(BinaryOp::Add, t, x).unwrap();
            let t = g.binary(BinaryOp::Mul, t, x).unwrap();
            let t = g.unary(UnaryOp::Sqrt, t).unwrap();
            acc = g.binary(ops[i % ops.len()], acc, t).unwrap();
        }
        // A second output reads the last leaf and the first, so that
        // every leaf is a distinct argument of the code.
        let last = g.binary(BinaryOp::Sub, xs[n - 1], acc).unwrap();
        g.set_outputs(vec![acc, last]);
        let (native, interp) = both(&g);
        for trial in 0..3 {
            let values: Vec<f64> = (0..n)
                .map(|i| 0.5 + i as f64 * 1.25 - trial as f64 * 0.75)
                .collect();
            let args: Vec<Arg> = values.iter().map(|&v| Arg::F64(v)).collect();
            let want = interp.run_args(&args).unwrap();
            let got = native.run_args(&args).unwrap();
            let tensors: Vec<Tensor> = values.iter().map(|&v| Tensor::scalar(v)).collect();
            let refs: Vec<&Tensor> = tensors.iter().collect();
            let via_run = native.run(&refs).unwrap();
            for (j, w) in want.iter().enumerate() {
                assert_eq!(bits(&got[j]), bits(w), "{n} leaves, output {j}, {values:?}");
                let r = Value::Tensor(via_run[j].clone());
                assert_eq!(bits(&r), bits(w), "run: {n} leaves, output {j}");
            }
        }
    }
}
