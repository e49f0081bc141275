//! Scalarised plans (graphs of small tensors run as one scalar program over
//! their elements) against the general plan: random small graphs of every
//! scalarisable op, f32 and f64, plain and through every transform of the
//! companions, bit for bit; the size threshold; companions over small
//! tensors against finite differences; allocation counts of warm calls.

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;

use counting::allocations;
use proptest::prelude::*;
use rlx::core::autodiff;
use rlx::core::Literal;
use rlx::prelude::*;
use rlx::runtime::compile::{compile_with, Options};
use rlx::runtime::{Arg, BinaryOp, CmpOp, ReduceOp, UnaryOp, Value};
use rlx::{Executable, Graph};

/// A transform of `rlx::core::autodiff` (graph, differentiated inputs).
type Transform = fn(&Graph, &[usize]) -> rlx::Result<Graph>;

fn general(g: &Graph) -> Executable {
    let options = Options::general();
    compile_with(g, &options).unwrap()
}

thread_local! {
    /// Whether element-level folding may have made a structural zero of a
    /// non-finite general result (see [`check_scalarised`]).
    static LENIENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Asserts equal bits (any NaN equals any NaN, and `+0.0` equals `-0.0`:
/// element-level folding drops `+ 0` terms, so a sum or a one-element
/// reduction of `-0.0` keeps its sign where the kernel's `0 + x` gives
/// `+0.0`; see [`check_scalarised`]).
fn same(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let lenient = LENIENT.get();
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x.to_bits() == y.to_bits()
                || (x.is_nan() && y.is_nan())
                || (*x == 0.0 && *y == 0.0)
                || (lenient && !x.is_finite()),
            "{what}: element {i}: {x:?} (general) vs {y:?} (scalarised)"
        );
    }
}

/// Compiles `g` both ways, requires the default one to be scalarised, and
/// compares the outputs of `run`, `run_args` and `run_into` bit for bit.
///
/// The one documented difference: the optimiser folds `0·x` to `0` (on
/// whole tensors in the general plan, per element in a scalarised one), so
/// an element that is a structural zero of a derivative (an off-diagonal
/// Hessian entry of a separable function, say) is `0` in the scalarised
/// plan where the general plan may compute `0·NaN = NaN` or `0·inf = NaN`
/// from a non-finite intermediate (so a non-finite general result may be
/// any value in the scalarised plan); tests of transforms allow exactly
/// that (`LENIENT`). And `x + 0` is folded to `x` per element, so the sign
/// of a zero may differ (`-0.0` where the general plan adds `+0.0` terms),
/// in every test.
fn check_scalarised(g: &Graph, inputs: &[&Tensor], what: &str) {
    let reference = general(g);
    let small = rlx::compile(g).unwrap();
    assert!(
        small.stats().scalarized_nodes > 0,
        "{what}: not scalarised: {:?}",
        small.stats()
    );
    assert!(small.stats().steps <= 1, "{what}: one scalar program");
    let want = reference.run(inputs).unwrap();
    let got = small.run(inputs).unwrap();
    for (j, (w, o)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w.shape(), o.shape(), "{what}: output {j} shape");
        assert_eq!(w.dtype(), o.dtype(), "{what}: output {j} dtype");
        same(
            &w.to_f64_vec().unwrap(),
            &o.to_f64_vec().unwrap(),
            &format!("{what}: run output {j}"),
        );
    }
    let args: Vec<Arg<'_>> = inputs.iter().map(|&t| Arg::Tensor(t)).collect();
    let values = small.run_args(&args).unwrap();
    for (j, (w, v)) in want.iter().zip(values).enumerate() {
        let v = match v {
            Value::F64(x) => vec![x],
            Value::F32(x) => vec![x as f64],
            Value::Tensor(t) => t.to_f64_vec().unwrap(),
        };
        same(
            &w.to_f64_vec().unwrap(),
            &v,
            &format!("{what}: run_args output {j}"),
        );
    }
    let mut outs: Vec<Tensor> = small
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    small.run_into(inputs, &mut outs).unwrap();
    for (j, (w, o)) in want.iter().zip(&outs).enumerate() {
        same(
            &w.to_f64_vec().unwrap(),
            &o.to_f64_vec().unwrap(),
            &format!("{what}: run_into output {j}"),
        );
    }
}

/// One step of a random graph: which op, and a few numbers choosing its
/// operands and parameters.
#[derive(Clone, Debug)]
struct Step {
    kind: u8,
    a: usize,
    b: usize,
    p: usize,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (0u8..14, 0usize..64, 0usize..64, 0usize..64).prop_map(|(kind, a, b, p)| Step {
            kind,
            a,
            b,
            p,
        }),
        1..14,
    )
}

/// A random graph over `x: [2, 3]`, `y: [3]` of `dtype`: each step applies
/// one op to earlier values; every value is an output.
fn random_graph(steps: &[Step], dtype: DType) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], dtype);
    let y = g.input("y", [3], dtype);
    let mut vals = vec![x, y];
    let unary = UnaryOp::ALL
        .into_iter()
        .filter(|&op| op != UnaryOp::Not)
        .chain([UnaryOp::Powi(3), UnaryOp::Powi(-2)])
        .collect::<Vec<_>>();
    let binary = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
    ];
    for s in steps {
        let a = vals[s.a % vals.len()];
        let b = vals[s.b % vals.len()];
        let (da, db) = (g.shape(a).dims().to_vec(), g.shape(b).dims().to_vec());
        let made = match s.kind {
            0 | 1 => g.unary(unary[s.p % unary.len()], a),
            2 | 3 => g.binary(binary[s.p % binary.len()], a, b),
            4 => {
                let ops = [
                    ReduceOp::Sum,
                    ReduceOp::Mean,
                    ReduceOp::Max,
                    ReduceOp::Min,
                    ReduceOp::Prod,
                ];
                let axes: Vec<usize> = (0..da.len()).filter(|d| s.p >> d & 1 == 1).collect();
                g.reduce(ops[s.b % ops.len()], a, &axes)
            }
            5 => {
                let mut perm: Vec<usize> = (0..da.len()).collect();
                if s.p % 2 == 1 {
                    perm.reverse();
                }
                g.transpose(a, &perm)
            }
            6 => {
                let n: usize = da.iter().product();
                g.reshape(a, [n])
            }
            7 if !da.is_empty() => {
                let axis = s.p % da.len();
                let start = s.b % da[axis];
                g.slice_range(a, start..da[axis], axis)
            }
            8 if !da.is_empty() => {
                let axis = s.p % da.len();
                g.concat(&[a, a], axis)
            }
            9 if da.len() == 2 && db.len() == 2 && da[1] == db[0] => g.matmul(a, b),
            9 if da.len() == 2 => {
                let bt = g.transpose(a, &[1, 0]).unwrap();
                g.matmul(a, bt)
            }
            10 => {
                let c = g.compare(CmpOp::Gt, a, b);
                c.and_then(|c| g.select(c, a, b))
            }
            11 if !da.is_empty() => {
                let axis = s.p % da.len();
                let idx: Vec<i64> = (0..3).map(|k| ((s.b + k) % da[axis]) as i64).collect();
                let i = g
                    .constant(Literal::I64(idx.into()), [3], DType::I64)
                    .unwrap();
                g.gather(a, i, axis)
            }
            12 => {
                let other = if dtype == DType::F64 {
                    DType::F32
                } else {
                    DType::F64
                };
                g.cast(a, other).and_then(|c| g.cast(c, dtype))
            }
            13 if !da.is_empty() => {
                let axis = s.p % da.len();
                let idx: Vec<i64> = (0..2).map(|k| ((s.b + 2 * k) % da[axis]) as i64).collect();
                let i = g
                    .constant(Literal::I64(idx.into()), [2], DType::I64)
                    .unwrap();
                let upd = g.gather(a, i, axis).unwrap();
                let upd = g.sin(upd).unwrap();
                g.scatter_add(a, i, upd, axis)
            }
            _ => g.broadcast(a, {
                let mut d = vec![2];
                d.extend(&da);
                d
            }),
        };
        if let Ok(v) = made {
            if g.shape(v).numel() <= 128 {
                vals.push(v);
            }
        }
    }
    g.set_outputs(vals[2..].to_vec());
    if g.outputs().is_empty() {
        let s = g.sin(x).unwrap();
        g.set_outputs(vec![s]);
    }
    g
}

fn inputs(dtype: DType, seed: u64) -> (Tensor, Tensor) {
    let v = |n: usize, k: u64| -> Vec<f64> {
        (0..n)
            .map(|i| (((i as u64 + 1) * 2654435761 + k * 97 + seed) % 1000) as f64 / 250.0 - 2.0)
            .collect()
    };
    let x = Tensor::from_slice(&v(6, 1), [2, 3]).cast(dtype);
    let y = Tensor::from_slice(&v(3, 2), [3]).cast(dtype);
    (x, y)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random small graphs: the scalarised plan equals the general plan
    /// bit for bit, through `run`, `run_args` and `run_into`.
    #[test]
    fn random_small_graphs_equal_the_general_plan(s in steps(), seed in 0u64..1000, f32s in any::<bool>()) {
        let dtype = if f32s { DType::F32 } else { DType::F64 };
        let g = random_graph(&s, dtype);
        let (x, y) = inputs(dtype, seed);
        check_scalarised(&g, &[&x, &y], &format!("{s:?} {dtype}"));
    }

}

proptest! {
    // Each case compiles six transforms twice: fewer cases.
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// The transforms of the companions (value and gradient, JVP, VJP,
    /// Jacobian, Hessian, HVP) of a random small scalar function, each
    /// scalarised, equal the general plans bit for bit.
    #[test]
    fn transforms_of_random_small_graphs_equal_the_general_plan(s in steps(), seed in 0u64..1000) {
        let mut g = random_graph(&s, DType::F64);
        // A smooth scalar of every output: Σ tanh(out)².
        let outs = g.outputs().to_vec();
        let mut total = None;
        for o in outs {
            let t = g.tanh(o).unwrap();
            let t = g.square(t).unwrap();
            let t = g.sum_all(t).unwrap();
            total = Some(match total {
                None => t,
                Some(acc) => g.add(acc, t).unwrap(),
            });
        }
        g.set_outputs(vec![total.unwrap()]);
        let (x, y) = inputs(DType::F64, seed);
        let transforms: [(&str, Transform, usize); 6] = [
            ("value_and_grad", autodiff::value_and_grad, 0),
            ("jvp", autodiff::jvp, 2),
            ("vjp", autodiff::vjp, 1),
            ("jacobian", autodiff::jacobian, 0),
            ("hessian", autodiff::hessian, 0),
            ("hvp", autodiff::hvp, 2),
        ];
        for (name, t, extras) in transforms {
            let tg = t(&g, &[0, 1]).unwrap();
            let mut args: Vec<Tensor> = vec![x.clone(), y.clone()];
            for e in tg.inputs()[2..2 + extras].iter() {
                let ty = tg.ty(e.node);
                let n = ty.shape.numel();
                let v: Vec<f64> = (0..n).map(|i| 0.5 - 0.1 * i as f64).collect();
                args.push(Tensor::from_slice(&v, ty.shape.clone()));
            }
            let refs: Vec<&Tensor> = args.iter().collect();
            let small = rlx::compile(&tg).unwrap();
            if small.stats().scalarized_nodes == 0 {
                // Larger than the threshold (a Hessian of inputs of 18
                // elements has 324): the general plan runs, nothing to compare.
                continue;
            }
            LENIENT.set(true);
            check_scalarised(&tg, &refs, &format!("{name} of {s:?}"));
        }
    }
}

#[test]
fn values_over_the_threshold_keep_the_general_plan() {
    // A [257] value inside: the general plan.
    let mut g = Graph::new();
    let x = g.input("x", [1], DType::F64);
    let b = g.broadcast(x, [257, 1]).unwrap();
    let s = g.sin(b).unwrap();
    let t = g.sum_all(s).unwrap();
    g.set_outputs(vec![t]);
    let exe = rlx::compile(&g).unwrap();
    assert_eq!(exe.stats().scalarized_nodes, 0);
    assert!(exe.stats().fused_loops >= 1);
    // Exactly 256 elements: scalarised.
    let mut g = Graph::new();
    let x = g.input("x", [8], DType::F64);
    let b = g.broadcast(x, [32, 8]).unwrap();
    let s = g.sin(b).unwrap();
    let t = g.sum_all(s).unwrap();
    g.set_outputs(vec![t]);
    let exe = rlx::compile(&g).unwrap();
    assert!(exe.stats().scalarized_nodes > 0);
    let xv = Tensor::from_slice(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [8]);
    check_scalarised(&g, &[&xv], "256 elements");
    // A large input that is only sliced: elements are read from it, up to
    // 1024 input elements in all.
    let mut g = Graph::new();
    let x = g.input("x", [1000], DType::F64);
    let s = g.slice_range(x, 10..14, 0).unwrap();
    let t = g.exp(s).unwrap();
    g.set_outputs(vec![t]);
    let xv = Tensor::from_slice(
        &(0..1000).map(|i| i as f64 / 1000.0).collect::<Vec<_>>(),
        [1000],
    );
    check_scalarised(&g, &[&xv], "slice of a large input");
    let mut g = Graph::new();
    let x = g.input("x", [2000], DType::F64);
    let s = g.slice_range(x, 10..14, 0).unwrap();
    let t = g.exp(s).unwrap();
    g.set_outputs(vec![t]);
    assert_eq!(rlx::compile(&g).unwrap().stats().scalarized_nodes, 0);
    // Unsupported ops keep the general plan: solve, softmax, i64 values.
    let mut g = Graph::new();
    let a = g.input("a", [2, 2], DType::F64);
    let b = g.input("b", [2, 1], DType::F64);
    let s = g.solve(a, b).unwrap();
    g.set_outputs(vec![s]);
    assert_eq!(rlx::compile(&g).unwrap().stats().scalarized_nodes, 0);
    let mut g = Graph::new();
    let a = g.input("a", [4], DType::F64);
    let s = g.softmax(a, 0).unwrap();
    g.set_outputs(vec![s]);
    assert_eq!(rlx::compile(&g).unwrap().stats().scalarized_nodes, 0);
    let mut g = Graph::new();
    let a = g.input("a", [4], DType::I64);
    let s = g.cast(a, DType::F64).unwrap();
    g.set_outputs(vec![s]);
    assert_eq!(rlx::compile(&g).unwrap().stats().scalarized_nodes, 0);
}

#[test]
fn outputs_that_are_inputs_or_constants() {
    // Element-level folding leaves some outputs as inputs or constants.
    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F64);
    let zero = g.scalar(0.0, DType::F64);
    let y = g.add(x, zero).unwrap();
    let c = g.full([2], 2.5, DType::F32);
    let z = g.mul(x, x).unwrap();
    g.set_outputs(vec![y, c, z, x]);
    let xv = Tensor::from_slice(&[1.0, -2.0, 3.0], [3]);
    check_scalarised(&g, &[&xv], "inputs and constants as outputs");
}

/// The LJ energy of three particles in 2-D over one `[6]` tensor.
#[differentiable]
fn lj3(p: &Tensor) -> Tensor {
    let d = |i: usize, j: usize| {
        (p.slice_range(2 * i..2 * i + 2, 0) - p.slice_range(2 * j..2 * j + 2, 0))
            .square()
            .sum_all()
    };
    let lj = |r2: Tensor| {
        let s3 = r2.recip().powi(3);
        (s3.square() - &s3) * 4.0
    };
    lj(d(0, 1)) + lj(d(0, 2)) + lj(d(1, 2)) + (d(0, 2).sqrt() - 1.5).square() * 5.0
}

#[test]
fn companions_over_a_small_tensor_match_finite_differences() {
    let p0 = [0.0, 0.0, 1.1, 0.1, 0.4, 1.2];
    let p = Tensor::from_slice(&p0, [6]);
    let (e, g) = value_and_grad_lj3(&p).unwrap();
    let e = e.item::<f64>().unwrap();
    let g = g.to_vec::<f64>().unwrap();
    let f = |q: &[f64]| lj3(&Tensor::from_slice(q, [6])).item::<f64>().unwrap();
    assert_eq!(f(&p0), e);
    let h = 1e-6;
    for k in 0..6 {
        let (mut a, mut b) = (p0, p0);
        a[k] += h;
        b[k] -= h;
        let fd = (f(&a) - f(&b)) / (2.0 * h);
        assert!(
            (fd - g[k]).abs() <= 1e-5 * (1.0 + g[k].abs()),
            "∂{k}: {fd} vs {}",
            g[k]
        );
    }
    // The Hessian against differences of the gradient.
    let hess = hessian_lj3(&p).unwrap().to_vec::<f64>().unwrap();
    for k in 0..6 {
        let (mut a, mut b) = (p0, p0);
        a[k] += h;
        b[k] -= h;
        let ga = grad_lj3(&Tensor::from_slice(&a, [6]))
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let gb = grad_lj3(&Tensor::from_slice(&b, [6]))
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        for i in 0..6 {
            let fd = (ga[i] - gb[i]) / (2.0 * h);
            let hv = hess[i * 6 + k];
            assert!(
                (fd - hv).abs() <= 1e-4 * (1.0 + hv.abs()),
                "H[{i},{k}]: {fd} vs {hv}"
            );
        }
    }
}

#[test]
fn warm_calls_allocate_only_their_outputs() {
    let t = rlx::trace::Trace::enter();
    let p = t.input("p", Shape::new(vec![6]), DType::F64);
    let e = ((p.slice_range(0..2, 0) - p.slice_range(2..4, 0))
        .square()
        .sum_all()
        + p.sin().sum_all())
    .sqrt();
    let g = t.finish(&[&e]).unwrap();
    let vg = autodiff::value_and_grad(&g, &[0]).unwrap();
    let exe = rlx::compile(&vg).unwrap();
    assert!(exe.stats().scalarized_nodes > 0);
    let pv = Tensor::from_slice(&[0.3, -0.2, 1.0, 0.5, 0.1, 0.7], [6]);
    let mut outs = vec![
        Tensor::zeros(Shape::scalar(), DType::F64),
        Tensor::zeros([6], DType::F64),
    ];
    exe.run_into(&[&pv], &mut outs).unwrap();
    let n = allocations(|| exe.run_into(&[&pv], &mut outs).unwrap());
    assert_eq!(n, 0, "warm run_into of a scalarised plan");
    // `run_args`: the result vector and the one tensor output.
    let args = [Arg::Tensor(&pv)];
    let _ = exe.run_args(&args).unwrap();
    let n = allocations(|| drop(exe.run_args(&args).unwrap()));
    assert!(n <= 4, "warm run_args allocated {n} times");
}

/// Particles of the pair-loop tests (the benchmark has 64; 16 give 120
/// pairs, an element program of a few thousand instructions: several
/// native functions).
const PAIR_N: usize = 16;

/// All-pairs Lennard-Jones energy over `[PAIR_N * 3]` coordinates, written
/// as the double loop physicists write (every pair unrolled at trace time).
#[differentiable]
fn pair_energy(p: &Tensor) -> Tensor {
    let mut e = p.slice_range(0..1, 0).sum_all() * 0.0;
    for i in 0..PAIR_N {
        for j in i + 1..PAIR_N {
            let d = p.slice_range(3 * i..3 * i + 3, 0) - p.slice_range(3 * j..3 * j + 3, 0);
            let s3 = d.square().sum_all().recip().powi(3);
            e = e + (s3.square() - &s3) * 4.0;
        }
    }
    e
}

/// The same energy in plain `f64`.
fn pair_energy_f64(p: &[f64]) -> f64 {
    let mut e = 0.0;
    for i in 0..PAIR_N {
        for j in i + 1..PAIR_N {
            let r2: f64 = (0..3).map(|k| (p[3 * i + k] - p[3 * j + k]).powi(2)).sum();
            let s3 = (1.0 / r2).powi(3);
            e += 4.0 * (s3 * s3 - s3);
        }
    }
    e
}

/// A jittered 2×2×4 lattice (spacing 1.1).
fn pair_lattice() -> Vec<f64> {
    (0..PAIR_N * 3)
        .map(|k| {
            let (i, axis) = (k / 3, k % 3);
            let c = [i % 2, (i / 2) % 2, i / 4][axis] as f64;
            1.1 * c + 0.01 * ((k * 7919 % 13) as f64 - 6.0)
        })
        .collect()
}

#[test]
fn pair_loop_gradient_is_scalarised_and_equals_the_general_plan() {
    let ps = pair_lattice();
    let p = Tensor::from_slice(&ps, [PAIR_N * 3]);
    let g = graph_pair_energy(&p).unwrap();
    let vg = autodiff::value_and_grad(&g, &[0]).unwrap();
    // The gradient `[48]` and the per-pair values are small: one scalar
    // program, split into several native functions.
    let exe = rlx::compile(&vg).unwrap();
    let stats = exe.stats();
    assert!(stats.scalarized_nodes > 0, "{stats:?}");
    assert_eq!((stats.steps, stats.scalar_regions), (1, 1), "{stats:?}");
    #[cfg(feature = "jit")]
    assert_eq!(stats.native_regions, 1, "{stats:?}");
    assert!(
        stats.scalar_nodes > 2048,
        "several native functions: {stats:?}"
    );
    check_scalarised(&vg, &[&p], "pair loop");
    // Split native code equals the interpreter, bit for bit.
    let interpreted = compile_with(
        &vg,
        &Options {
            jit: false,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(interpreted.stats().native_regions, 0);
    let (a, b) = (exe.run(&[&p]).unwrap(), interpreted.run(&[&p]).unwrap());
    for (x, y) in a.iter().zip(&b) {
        same(
            &y.to_f64_vec().unwrap(),
            &x.to_f64_vec().unwrap(),
            "native vs interpreted",
        );
    }
    assert_eq!(a[0].item::<f64>().unwrap(), pair_energy_f64(&ps));
    // The companion rerolls the 120 pairs (`rlx::core::passes::reroll`)
    // before differentiating: it equals the compiled rerolled graph bit for
    // bit, and the unrolled one within the bound of a reassociated sum
    // (tested in `rlx-runtime/tests/reroll.rs`).
    let rerolled = rlx::core::passes::reroll(&g).unwrap();
    let rvg = autodiff::value_and_grad(&rerolled, &[0]).unwrap();
    let r = rlx::compile(&rvg).unwrap().run(&[&p]).unwrap();
    let grad = grad_pair_energy(&p).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(grad, r[1].to_vec::<f64>().unwrap());
    for (x, y) in grad.iter().zip(a[1].to_vec::<f64>().unwrap()) {
        assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
    }
}

#[test]
fn pair_loop_gradient_matches_finite_differences() {
    let ps = pair_lattice();
    let grad = grad_pair_energy(&Tensor::from_slice(&ps, [PAIR_N * 3]))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let h = 1e-6;
    for k in 0..PAIR_N * 3 {
        let (mut a, mut b) = (ps.clone(), ps.clone());
        a[k] += h;
        b[k] -= h;
        let fd = (pair_energy_f64(&a) - pair_energy_f64(&b)) / (2.0 * h);
        assert!(
            (fd - grad[k]).abs() <= 1e-5 * (1.0 + grad[k].abs()),
            "coordinate {k}: finite differences {fd} vs gradient {}",
            grad[k]
        );
    }
}

#[test]
fn warm_run_into_of_a_split_native_program_allocates_nothing() {
    let p = Tensor::from_slice(&pair_lattice(), [PAIR_N * 3]);
    let vg = autodiff::value_and_grad(&graph_pair_energy(&p).unwrap(), &[0]).unwrap();
    let exe = rlx::compile(&vg).unwrap();
    let mut outs = vec![
        Tensor::zeros(Shape::scalar(), DType::F64),
        Tensor::zeros([PAIR_N * 3], DType::F64),
    ];
    exe.run_into(&[&p], &mut outs).unwrap();
    let n = allocations(|| exe.run_into(&[&p], &mut outs).unwrap());
    assert_eq!(n, 0, "warm run_into of a split native program");
}

#[test]
fn rerolled_pair_loop_through_value_and_grad_and_hessian() {
    // The 120 pairs are rerolled before differentiating (the traced graph
    // has a group of 120 copies), so both companions run the batched body.
    let ps = pair_lattice();
    let p = Tensor::from_slice(&ps, [PAIR_N * 3]);
    let traced = graph_pair_energy(&p).unwrap();
    let rerolled = rlx::core::passes::reroll(&traced).unwrap();
    assert!(rerolled.len() * 20 < traced.len(), "{rerolled}");
    let (e, g) = value_and_grad_pair_energy(&p).unwrap();
    let want = pair_energy_f64(&ps);
    // A reassociated sum of 120 terms (bound: 120 ε Σ|terms| ≤ 1e-12 here).
    let e = e.item::<f64>().unwrap();
    assert!(
        (e - want).abs() <= 1e-12 * (1.0 + want.abs()),
        "{e} vs {want}"
    );
    let g = g.to_vec::<f64>().unwrap();
    assert_eq!(g, grad_pair_energy(&p).unwrap().to_vec::<f64>().unwrap());
    let n = PAIR_N * 3;
    let hess = hessian_pair_energy(&p).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(hess.len(), n * n);
    let h = 1e-6;
    for col in [0, n / 2, n - 1] {
        let (mut a, mut b) = (ps.clone(), ps.clone());
        a[col] += h;
        b[col] -= h;
        let ga = grad_pair_energy(&Tensor::from_slice(&a, [n])).unwrap();
        let gb = grad_pair_energy(&Tensor::from_slice(&b, [n])).unwrap();
        let (ga, gb) = (ga.to_vec::<f64>().unwrap(), gb.to_vec::<f64>().unwrap());
        for row in 0..n {
            let fd = (ga[row] - gb[row]) / (2.0 * h);
            let got = hess[row * n + col];
            assert!(
                (fd - got).abs() <= 1e-4 * (1.0 + fd.abs()),
                "H[{row}, {col}]: finite differences {fd} vs {got}"
            );
            // Symmetric to rounding.
            let t = hess[col * n + row];
            assert!((t - got).abs() <= 1e-9 * (1.0 + got.abs()), "H symmetric");
        }
    }
}
