//! Non-finite and signed-zero inputs through the optimised plans: random
//! graphs (the recipes of [`graphs`](crate::graphs), plus steps with the
//! constants IEEE identities fail on: 0, −0.0, ±1, NaN, ±inf) on inputs
//! that mix NaN, ±inf, ±0.0 and subnormals into ordinary values, compiled
//! (native scalar code or not, scalar regions or the general plan) and
//! compared bit for bit (any NaN equal to any NaN) with the interpreter,
//! which runs the graph as built. For `f64` graphs their JVP and VJP graphs
//! are checked the same way: a derivative graph is optimised before it
//! runs, and the optimiser must not change what it computes.

use proptest::test_runner::TestCaseError;
use rlx::compile::{compile_with, Options};
use rlx::runtime::interpret;
use rlx::{autodiff, BinaryOp, DType, Graph, NodeId, Tensor};

use crate::common;
use crate::compare::Res;
use crate::graphs::{recipe, step, Recipe};

/// Values mixed into the inputs.
const SPECIAL: [f64; 10] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    5e-324,
    -2e-310,
    1.4e-45,
    -1e-40,
    f64::MAX,
];

/// The constants of the extra steps.
const CONSTANTS: [f64; 9] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    5e-324,
];

/// The number of step kinds of [`graphs::step`](crate::graphs::step) with
/// non-smooth ops; kinds from here on are the constant steps below.
const GRAPH_KINDS: u8 = 27;

/// A constant step: `x op c` or `c op x` for a constant `c` and one of
/// add, sub, mul, div, mul_zero, min, max.
fn constant_step(g: &mut Graph, kind: u8, x: NodeId, p: u16) -> rlx::Result<NodeId> {
    let c = g.scalar(CONSTANTS[p as usize % CONSTANTS.len()], g.dtype(x));
    let op = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::MulZero,
        BinaryOp::Min,
        BinaryOp::Max,
    ][(p as usize / CONSTANTS.len()) % 7];
    if kind % 2 == 0 {
        g.binary(op, x, c)
    } else {
        g.binary(op, c, x)
    }
}

/// The graph of a recipe with the constant steps mixed in (`kind` modulo
/// 36: 27 graph kinds, 9 constant ones); outputs as [`graphs::build`](crate::graphs::build).
fn build(r: &Recipe) -> Graph {
    let mut g = Graph::new();
    let mut vals: Vec<NodeId> = r
        .inputs
        .iter()
        .enumerate()
        .map(|(i, s)| g.input(format!("x{i}"), s.clone(), r.dtype))
        .collect();
    for &(kind, a, b, p) in &r.steps {
        let x = vals[a as usize % vals.len()];
        let y = vals[b as usize % vals.len()];
        let kind = kind % (GRAPH_KINDS + 9);
        let v = if kind < GRAPH_KINDS {
            step(&mut g, r, kind, x, y, p)
        } else {
            constant_step(&mut g, kind, x, p)
        };
        if let Ok(v) = v {
            vals.push(v);
        }
    }
    let mut outs = vec![*vals.last().expect("at least one input")];
    if vals.len() > 2 {
        outs.push(vals[vals.len() / 2]);
    }
    g.set_outputs(outs);
    g
}

/// Ordinary values with about one element in three replaced by a special
/// value (which ones, from `seed`).
fn hostile_values(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = common::Rng::new(seed ^ 0x1eee);
    common::values(n, seed, -2.0, 2.0)
        .into_iter()
        .map(|v| {
            let u = rng.uniform(0.0, 3.0);
            if u < 1.0 {
                SPECIAL[(u * SPECIAL.len() as f64) as usize % SPECIAL.len()]
            } else {
                v
            }
        })
        .collect()
}

fn inputs_of(g: &Graph, seed: u64) -> Vec<Tensor> {
    g.inputs()
        .iter()
        .enumerate()
        .map(|(i, inp)| {
            let ty = g.ty(inp.node);
            let v = hostile_values(ty.shape.numel(), seed.wrapping_add(i as u64));
            common::tensor(&v, ty.shape.dims(), ty.dtype)
        })
        .collect()
}

/// `g` compiled with `options` gives the interpreter's bits on `inputs`.
fn same_bits(g: &Graph, inputs: &[Tensor], options: &Options, what: &str) -> Res {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let want = interpret(g, &refs)
        .map_err(|e| TestCaseError::fail(format!("{what}: interpret failed: {e}\n{g}")))?;
    let got = compile_with(g, options)
        .and_then(|exe| exe.run(&refs))
        .map_err(|e| TestCaseError::fail(format!("{what}: compiled run failed: {e}\n{g}")))?;
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        let (x, y) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
        for (i, (p, q)) in x.iter().zip(&y).enumerate() {
            if !(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())) {
                return Err(TestCaseError::fail(format!(
                    "{what}: output {k} element {i}: compiled {p:?}, interpreted {q:?}\n\
                     inputs {inputs:?}\n{g}"
                )));
            }
        }
    }
    Ok(())
}

/// One recipe: the graph and (for `f64`) its JVP and VJP graphs, under
/// every plan kind.
pub fn check(r: &Recipe) -> Res {
    crate::progress(r);
    let g = build(r);
    let plans = [
        ("native scalar code", Options::default()),
        (
            "interpreted scalar code",
            Options {
                jit: false,
                ..Options::default()
            },
        ),
        ("general plan", Options::general()),
    ];
    let mut graphs = vec![("graph", g.clone())];
    if r.dtype == DType::F64 && g.dtype(g.outputs()[0]) == DType::F64 {
        let wrt: Vec<usize> = (0..g.inputs().len()).collect();
        // A transform may refuse a graph (an op without a rule): that is
        // the transform's business, checked elsewhere.
        if let Ok(j) = autodiff::jvp(&g, &wrt) {
            graphs.push(("jvp", j));
        }
        if let Ok(v) = autodiff::vjp(&g, &wrt) {
            graphs.push(("vjp", v));
        }
    }
    for (name, h) in &graphs {
        let inputs = inputs_of(h, r.seed);
        for (plan, options) in &plans {
            same_bits(h, &inputs, options, &format!("{name}, {plan}"))?;
        }
    }
    Ok(())
}

/// The property over `cases` recipes (non-smooth ones: every op kind);
/// returns the number checked.
pub fn run_ieee(cases: u32) -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    let done = AtomicU32::new(0);
    let mut runner = crate::runner(cases, 5);
    let result = runner.run(&recipe(), |mut r| {
        r.smooth = false;
        check(&r)?;
        done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    done.into_inner()
}
