//! The optimiser is exact in IEEE arithmetic: random graphs of element-wise
//! ops, reductions and constants (0, −0.0, ±1, NaN, ±inf, subnormals), on
//! inputs drawn from the same special values, give the same bits (any NaN
//! equal to any NaN) through the compiled plans (`rlx_core::passes`, then
//! the scalar-region plan or the general one) as through the reference
//! interpreter, which runs the graph as built, node by node.
//!
//! Pinned cases for the identities that are not IEEE identities (`x * 0`,
//! `x + 0` with −0.0, `0 − x`, `mul_zero(x, 0)`, `x − x`, `x / x`, `0 / x`)
//! run first, so a regression names the rule.

#[path = "common/mod.rs"]
mod common;

use common::assert_same_values;
use proptest::prelude::*;
use rlx_core::{BinaryOp, CmpOp, DType, Graph, NodeId, Op, ReduceOp, UnaryOp};
use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{compile, interpret, Storage, Tensor};

/// The special values: NaN, ±inf, ±0.0, subnormals (of f64, and of f32:
/// the f64 ones round to zero there), the largest finite values, ordinary
/// values.
const SPECIAL: [f64; 17] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    5e-324,
    -1e-310,
    1.4e-45,
    -1e-40,
    3.4e38,
    f64::MAX,
    -f64::MAX,
    1.0,
    -1.0,
    2.5,
    -0.75,
    3e-5,
];

/// The constants graphs use: the identities' operands and non-finite values.
const CONSTANTS: [f64; 10] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    0.5,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    5e-324,
];

/// Runs `g` through the interpreter and through both compiled plans
/// (default options: small graphs become scalar regions; general: kernels
/// and fused loops), asserting equal bits.
fn check(g: &Graph, inputs: &[Tensor], what: &str) {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let want = interpret(g, &refs).unwrap_or_else(|e| panic!("{what}: interpret: {e}\n{g}"));
    for (plan, exe) in [
        ("default plan", compile(g)),
        ("general plan", compile_with(g, &Options::general())),
    ] {
        let exe = exe.unwrap_or_else(|e| panic!("{what}: {plan}: compile: {e}\n{g}"));
        let got = exe
            .run(&refs)
            .unwrap_or_else(|e| panic!("{what}: {plan}: run: {e}\n{g}"));
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_same_values(a, b, &format!("{what}: {plan}: output {k} of\n{g}"));
        }
    }
}

fn tensor(dtype: DType, shape: &[usize], values: &[f64]) -> Tensor {
    Tensor::from_storage(Storage::from_f64(dtype, values.iter().copied()), shape).unwrap()
}

/// `x` of every special value, in `dtype`.
fn specials(dtype: DType) -> Tensor {
    tensor(dtype, &[SPECIAL.len()], &SPECIAL)
}

/// Each identity that fails for some float, on every special value, in
/// every float dtype the plans compute natively.
#[test]
fn identities_that_ieee_lacks_keep_their_value() {
    type Build = fn(&mut Graph, NodeId, NodeId, NodeId) -> NodeId;
    let cases: [(&str, Build); 12] = [
        ("x * 0", |g, x, z, _| g.mul(x, z).unwrap()),
        ("0 * x", |g, x, z, _| g.mul(z, x).unwrap()),
        ("x * -0", |g, x, _, n| g.mul(x, n).unwrap()),
        ("mul_zero(x, 0)", |g, x, z, _| g.mul_zero(x, z).unwrap()),
        ("x + 0", |g, x, z, _| g.add(x, z).unwrap()),
        ("0 + x", |g, x, z, _| g.add(z, x).unwrap()),
        ("x - (-0)", |g, x, _, n| g.sub(x, n).unwrap()),
        ("0 - x", |g, x, z, _| g.sub(z, x).unwrap()),
        ("x - x", |g, x, _, _| g.sub(x, x).unwrap()),
        ("x / x", |g, x, _, _| g.div(x, x).unwrap()),
        ("0 / x", |g, x, z, _| g.div(z, x).unwrap()),
        ("sum of x * 0", |g, x, z, _| {
            let p = g.mul(x, z).unwrap();
            g.sum_all(p).unwrap()
        }),
    ];
    for dt in [DType::F64, DType::F32] {
        for (name, build) in cases {
            let mut g = Graph::new();
            let x = g.input("x", [SPECIAL.len()], dt);
            let z = g.scalar(0.0, dt);
            let n = g.scalar(-0.0, dt);
            let y = build(&mut g, x, z, n);
            g.set_outputs(vec![y]);
            check(&g, &[specials(dt)], &format!("{dt} {name}"));
        }
    }
    // The answers themselves, so the interpreter too is held to IEEE.
    let mut g = Graph::new();
    let x = g.input("x", [SPECIAL.len()], DType::F64);
    let z = g.scalar(0.0, DType::F64);
    let p = g.mul(x, z).unwrap();
    let a = g.add(x, z).unwrap();
    g.set_outputs(vec![p, a]);
    let out = compile(&g).unwrap().run(&[&specials(DType::F64)]).unwrap();
    let (p, a) = (
        out[0].to_vec::<f64>().unwrap(),
        out[1].to_vec::<f64>().unwrap(),
    );
    for (i, &v) in SPECIAL.iter().enumerate() {
        let (wp, wa) = (v * 0.0, v + 0.0);
        assert!(
            p[i].to_bits() == wp.to_bits() || (p[i].is_nan() && wp.is_nan()),
            "{v:?} * 0 = {:?}",
            p[i]
        );
        assert!(
            a[i].to_bits() == wa.to_bits() || (a[i].is_nan() && wa.is_nan()),
            "{v:?} + 0 = {:?}",
            a[i]
        );
    }
}

/// One step of a random graph: an op code, three operand picks and a
/// parameter (a constant's index, a comparison, a reduction).
type Step = (u8, u8, u8, u8, u8);

/// Builds a graph over inputs `x: [4]`, `y: [4]`, `s: []`, `m: [2, 4]` of
/// `dtype` from `steps`; steps the builder rejects (shapes that do not
/// broadcast) are skipped. Every value built is an output.
fn random_graph(dtype: DType, steps: &[Step]) -> Graph {
    let mut g = Graph::new();
    let mut pool = vec![
        g.input("x", [4], dtype),
        g.input("y", [4], dtype),
        g.input("s", [], dtype),
        g.input("m", [2, 4], dtype),
    ];
    let inputs = pool.len();
    for &(op, a, b, c, k) in steps {
        let pick = |i: u8| pool[i as usize % pool.len()];
        let (a, b, c) = (pick(a), pick(b), pick(c));
        let konst = |g: &mut Graph, k: u8| {
            let v = CONSTANTS[k as usize % CONSTANTS.len()];
            if k & 16 != 0 {
                g.full([4], v, dtype)
            } else {
                g.scalar(v, dtype)
            }
        };
        let cmp = [
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
            CmpOp::Eq,
            CmpOp::Ne,
        ][k as usize % 6];
        let red = [
            ReduceOp::Sum,
            ReduceOp::Mean,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Prod,
        ][k as usize % 5];
        let bin = [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Min,
            BinaryOp::Max,
            BinaryOp::MulZero,
        ][k as usize % 7];
        let r = match op % 20 {
            0 => g.add(a, b),
            1 => g.sub(a, b),
            2 => g.mul(a, b),
            3 => g.div(a, b),
            4 => g.min(a, b),
            5 => g.max(a, b),
            6 => g.mul_zero(a, b),
            7 => g.neg(a),
            8 => g.compare(cmp, a, b).and_then(|cond| g.select(cond, b, c)),
            // A constant on either side of any binary op.
            9 => {
                let kc = konst(&mut g, k >> 3);
                g.binary(bin, a, kc)
            }
            10 => {
                let kc = konst(&mut g, k >> 3);
                g.binary(bin, kc, a)
            }
            // Constants only: what folding computes.
            11 => {
                let (p, q) = (konst(&mut g, k), konst(&mut g, k.rotate_left(3)));
                g.binary(bin, p, q)
            }
            12 => g.binary(bin, a, a),
            13 => g.compare(cmp, a, a).and_then(|cond| g.select(cond, b, b)),
            14 => g.reduce(red, a, &[0]),
            // Reductions over no axes, as other passes push them.
            15 => g.push(
                Op::Reduce {
                    op: red,
                    axes: Vec::new(),
                },
                &[a],
            ),
            16 => g.unary(
                [
                    UnaryOp::Abs,
                    UnaryOp::Square,
                    UnaryOp::Sqrt,
                    UnaryOp::Recip,
                    UnaryOp::Relu,
                    UnaryOp::Sign,
                    UnaryOp::Floor,
                    UnaryOp::Powi(1),
                ][k as usize % 8],
                a,
            ),
            17 => {
                let n = g.neg(a).unwrap();
                g.binary(bin, b, n)
            }
            18 => {
                let kc = konst(&mut g, k);
                let cond = g.compare(cmp, kc, kc).unwrap();
                g.select(cond, a, b)
            }
            _ => {
                let wide = if dtype == DType::F64 {
                    DType::F32
                } else {
                    DType::F64
                };
                let w = g.cast(a, wide).unwrap();
                g.cast(w, dtype)
            }
        };
        if let Ok(r) = r {
            if g.dtype(r) == dtype {
                pool.push(r);
            }
        }
    }
    let outs = pool[inputs..].to_vec();
    g.set_outputs(if outs.is_empty() { vec![pool[0]] } else { outs });
    g
}

fn special() -> impl Strategy<Value = f64> {
    prop::sample::select(SPECIAL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Random graphs: the optimised plans give the interpreter's bits.
    #[test]
    fn optimised_plans_give_the_interpreters_bits(
        f32_graph in any::<bool>(),
        steps in prop::collection::vec(any::<Step>(), 1..14),
        x in prop::collection::vec(special(), 4),
        y in prop::collection::vec(special(), 4),
        s in special(),
        m in prop::collection::vec(special(), 8),
    ) {
        let dt = if f32_graph { DType::F32 } else { DType::F64 };
        let g = random_graph(dt, &steps);
        let inputs = [
            tensor(dt, &[4], &x),
            tensor(dt, &[4], &y),
            tensor(dt, &[], &[s]),
            tensor(dt, &[2, 4], &m),
        ];
        check(&g, &inputs, "random graph");
    }
}
