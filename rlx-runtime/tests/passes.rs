//! The optimisation passes keep values: random small graphs evaluated before
//! and after `optimize` (and after each pass alone) with the f64 reference
//! evaluator of `tests/common` give the same outputs.
//!
//! The graphs use ops whose values stay finite on inputs in `[-1, 1]`
//! (cases where the reference still meets an infinity are skipped, since
//! `x * 0 -> 0` deliberately differs from IEEE there); at least 90% of the
//! cases must be checked.

mod common;

use common::*;
use rlx_core::passes::{cse, dce, fold_constants, optimize, simplify, strip_stop_gradient};
use rlx_core::{CmpOp, DType, Graph, Literal, Op, ReduceOp, Shape};

type Pass = fn(&Graph) -> rlx_core::Result<Graph>;

fn random_graph(rng: &mut Rng) -> Graph {
    let mut g = Graph::new();
    let mut pool = vec![
        g.input("x", [2, 3], DType::F64),
        g.input("y", [3], DType::F64),
        g.input("s", [], DType::F64),
        g.scalar(0.0, DType::F64),
        g.full([3], 1.0, DType::F64),
        g.full([2, 3], -0.0, DType::F64),
        g.constant(Literal::F64(vec![0.5, -1.0, 2.0].into()), [3], DType::F64)
            .unwrap(),
    ];
    let consts = [0.0, 1.0, -0.0, 2.0, 0.5];
    let steps = rng.uniform(1.0, 16.0) as usize;
    let pick = |rng: &mut Rng, n: usize| (rng.uniform(0.0, n as f64) as usize).min(n - 1);
    for _ in 0..steps {
        let x = pool[pick(rng, pool.len())];
        let y = pool[pick(rng, pool.len())];
        let xs = g.shape(x).clone();
        let r = match pick(rng, 19) {
            0 => g.add(x, y),
            1 => g.sub(x, y),
            2 => g.mul(x, y),
            3 => g.mul_zero(x, y),
            4 => g.neg(x),
            5 => g.sin(x),
            6 => g.push(
                Op::Reshape {
                    shape: Shape::from([xs.numel()]),
                },
                &[x],
            ),
            7 => {
                let perm: Vec<usize> = (0..xs.rank()).rev().collect();
                g.push(Op::Transpose { perm }, &[x])
            }
            8 => {
                let mut d = vec![2];
                d.extend_from_slice(xs.dims());
                g.push(Op::Broadcast { shape: d.into() }, &[x])
            }
            9 if xs.rank() > 0 => g.sum(x, &[pick(rng, xs.rank())]),
            10 => g.compare(CmpOp::Lt, x, y).and_then(|m| g.select(m, x, y)),
            11 => g.cast(x, DType::F32).and_then(|c| g.cast(c, DType::F64)),
            12 => Ok(g.full(xs, consts[pick(rng, consts.len())], DType::F64)),
            13 => g.stop_gradient(x),
            14 => g.concat(&[x, y], 0),
            15 => g.abs(x).and_then(|a| g.sqrt(a)),
            16 => g.max(x, y),
            17 if xs.rank() > 0 && xs.dim(0) > 1 => g.slice_range(x, 1..xs.dim(0), 0),
            _ => g.push(
                Op::Reduce {
                    op: ReduceOp::Sum,
                    axes: vec![],
                },
                &[x],
            ),
        };
        if let Ok(id) = r {
            pool.push(id);
        }
    }
    let n = pool.len();
    g.set_outputs(vec![pool[n - 1], pool[n / 2], pool[0]]);
    g
}

#[test]
fn random_graphs_keep_their_values() {
    let mut rng = Rng::new(2024);
    let cases = 400;
    let mut checked = 0;
    for case in 0..cases {
        let g = random_graph(&mut rng);
        let inputs: Vec<Vec<f64>> = g
            .inputs()
            .iter()
            .map(|i| rng.vec(g.shape(i.node).numel(), -1.0, 1.0))
            .collect();
        let want = run(&g, &inputs);
        if want.iter().flatten().any(|v| !v.is_finite()) {
            continue;
        }
        checked += 1;
        let passes: [(&str, Pass); 6] = [
            ("dce", dce),
            ("cse", cse),
            ("fold_constants", fold_constants),
            ("simplify", simplify),
            ("strip_stop_gradient", strip_stop_gradient),
            ("optimize", optimize),
        ];
        for (name, pass) in passes {
            let o = pass(&g).unwrap();
            let got = run(&o, &inputs);
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_close(
                    a,
                    b,
                    1e-12,
                    &format!("case {case}, {name}, output {k}\n{g}\n->\n{o}"),
                );
            }
        }
    }
    assert!(
        checked * 10 >= cases * 9,
        "only {checked} of {cases} cases checked"
    );
}

#[test]
fn optimize_shrinks_a_gradient_graph() {
    // The gradient of sum(sin(x) * w) w.r.t. x: seeds of 1, broadcasts of
    // ones and mul_zero guards that optimisation removes.
    let mut g = Graph::new();
    let x = g.input("x", [4], DType::F64);
    let w = g.input("w", [4], DType::F64);
    let s = g.sin(x).unwrap();
    let p = g.mul(s, w).unwrap();
    let y = g.sum_all(p).unwrap();
    // The raw reverse-mode graph (the in-place driver, before any cleanup).
    let mut d = g.clone();
    let seed = d.scalar(1.0, DType::F64);
    let dx = rlx_core::autodiff::vjp_nodes(&mut d, &[y], &[seed], &[x]).unwrap();
    d.set_outputs(vec![y, dx[0]]);
    let o = optimize(&d).unwrap();
    // The seed `broadcast(reshape(1))` folds to a splat of ones and
    // `mul_zero(ones, w)` becomes `w`: no constant is left.
    assert!(o.len() < d.len(), "{d}\n->\n{o}");
    assert!(
        o.nodes().iter().all(|n| !matches!(n.op, Op::Constant(_))),
        "{d}\n->\n{o}"
    );
    let mut rng = Rng::new(7);
    let ins = vec![rng.vec(4, -1.0, 1.0), rng.vec(4, -1.0, 1.0)];
    let (a, b) = (run(&d, &ins), run(&o, &ins));
    for (x, y) in a.iter().zip(&b) {
        assert_close(y, x, 1e-14, "optimised gradient");
    }
    // d/dx sum(sin(x) w) = cos(x) w.
    let want: Vec<f64> = ins[0]
        .iter()
        .zip(&ins[1])
        .map(|(x, w)| x.cos() * w)
        .collect();
    assert_close(&b[1], &want, 1e-14, "gradient value");
}

/// Constant folding must give exactly what the kernels give: every foldable
/// op on awkward values (ties, subnormals, -0, huge values) in every float
/// dtype, run by `rlx_runtime::interpret` unfolded and folded, compared bit
/// for bit.
#[test]
fn folding_matches_the_kernels_bit_for_bit() {
    use rlx_core::{BinaryOp, UnaryOp};
    use rlx_runtime::interpret;
    let vals = vec![
        1.0 / 3.0,
        0.1,
        -2.5,
        2.5,
        3.5,
        -0.0,
        1e-5,
        65504.0,
        1.0 + 2f64.powi(-11),
        -7.25,
        1e30,
        f64::NAN,
    ];
    let other = vec![
        3.0, 0.7, -0.0, 1.5, -2.0, 0.0, 1e-3, 2.0, 1.0, 0.3, 1e10, 1.0,
    ];
    // Without NaN, zeros and values beyond i64, min/max/relu and every cast fold as well.
    let tame: Vec<f64> = vals
        .iter()
        .map(|v| {
            if v.is_nan() || *v == 0.0 || v.abs() > 1e18 {
                0.75
            } else {
                *v
            }
        })
        .collect();
    let tame_other: Vec<f64> = other
        .iter()
        .map(|v| if *v == 0.0 { -0.5 } else { *v })
        .collect();
    let unary = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::Recip,
        UnaryOp::Square,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Relu,
    ];
    let binary = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::MulZero,
        BinaryOp::Min,
        BinaryOp::Max,
    ];
    for ((vals, other), all_but) in [((&vals, &other), None), ((&tame, &tame_other), Some(2))] {
        let n = vals.len();
        for dt in [DType::F64, DType::F32, DType::F16, DType::BF16] {
            let mut g = Graph::new();
            // Constants are stored rounded to their dtype, as the runtime reads them.
            let a = g
                .constant(Literal::F64(vals.clone().into()), [n], DType::F64)
                .unwrap();
            let b = g
                .constant(Literal::F64(other.clone().into()), [n], DType::F64)
                .unwrap();
            let a = g.cast(a, dt).unwrap();
            let b = g.cast(b, dt).unwrap();
            let a = interpret_const(&mut g, a);
            let b = interpret_const(&mut g, b);
            let mut outs = Vec::new();
            for u in unary {
                outs.push(g.unary(u, a).unwrap());
            }
            for op in binary {
                outs.push(g.binary(op, a, b).unwrap());
            }
            for c in [CmpOp::Lt, CmpOp::Eq, CmpOp::Ge] {
                outs.push(g.compare(c, a, b).unwrap());
            }
            for to in [
                DType::F64,
                DType::F32,
                DType::F16,
                DType::BF16,
                DType::I64,
                DType::Bool,
            ] {
                outs.push(g.cast(a, to).unwrap());
            }
            g.set_outputs(outs);
            let folded = fold_constants(&g).unwrap();
            let want = interpret(&g, &[]).unwrap();
            let got = interpret(&folded, &[]).unwrap();
            for (k, (w, o)) in want.iter().zip(&got).enumerate() {
                let (w, o) = (w.to_f64_vec().unwrap(), o.to_f64_vec().unwrap());
                for (i, (x, y)) in w.iter().zip(&o).enumerate() {
                    assert!(
                        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                        "{dt}: output {k} ({}), element {i}: kernel {x:?}, folded {y:?}",
                        g.format_node(g.outputs()[k])
                    );
                }
            }
            let folded_count = folded
                .outputs()
                .iter()
                .filter(|o| matches!(folded.node(**o).op, Op::Constant(_)))
                .count();
            assert!(folded_count > 0, "{dt}: nothing folded\n{folded}");
            if let Some(k) = all_but {
                // Only f64 -> f16/bf16 (two possible roundings) may stay.
                let left = folded.outputs().len() - folded_count;
                assert!(left <= k, "{dt}: {left} ops not folded\n{folded}");
            }
        }
    }
}

/// Replaces constant-producing node `x` by a literal holding the runtime's
/// value of it (so that the operands of the ops under test are constants in
/// the node's own dtype, exactly as the kernels store them).
fn interpret_const(g: &mut Graph, x: rlx_core::NodeId) -> rlx_core::NodeId {
    let mut sub = g.clone();
    sub.set_outputs(vec![x]);
    let v = rlx_runtime::interpret(&sub, &[]).unwrap().remove(0);
    g.constant(
        Literal::F64(v.to_f64_vec().unwrap().into()),
        g.shape(x).clone(),
        g.dtype(x),
    )
    .unwrap()
}

/// Reductions of splats are folded only where accumulation order cannot
/// matter; what is folded must equal the kernels bit for bit.
#[test]
fn folded_reductions_match_the_kernels() {
    use rlx_runtime::interpret;
    for dt in [DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64] {
        let mut g = Graph::new();
        let mut outs = Vec::new();
        for v in [0.0, -0.0, 1.0, 3.0, -7.0, 0.5, 2048.0, f64::NAN] {
            if dt == DType::I64 && (v.fract() != 0.0 || v.is_nan()) {
                continue;
            }
            let x = g.full([4, 300], v, dt);
            for op in ReduceOp::ALL {
                if op == ReduceOp::Mean && dt == DType::I64 {
                    continue;
                }
                outs.push(g.reduce(op, x, &[1]).unwrap());
                outs.push(g.reduce(op, x, &[0, 1]).unwrap());
            }
        }
        g.set_outputs(outs);
        let folded = fold_constants(&g).unwrap();
        let want = interpret(&g, &[]).unwrap();
        let got = interpret(&folded, &[]).unwrap();
        let mut n_folded = 0;
        for (k, (w, o)) in want.iter().zip(&got).enumerate() {
            n_folded += usize::from(matches!(
                folded.node(folded.outputs()[k]).op,
                Op::Constant(_)
            ));
            let (w, o) = (w.to_f64_vec().unwrap(), o.to_f64_vec().unwrap());
            for (x, y) in w.iter().zip(&o) {
                assert!(
                    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    "{dt}: {}: kernel {x:?}, folded {y:?}",
                    g.format_node(g.outputs()[k])
                );
            }
        }
        assert!(
            n_folded * 2 > want.len(),
            "{dt}: only {n_folded} folded\n{folded}"
        );
    }
}

/// Gathers of constants with constant indices are folded (data movement:
/// exact) along every axis, with repeated indices and a 2-d index, and so
/// are scatter-adds (repeated indices accumulate in the kernel's order),
/// equal to the interpreter's kernels bit for bit; a bad index is left for
/// the kernel to report.
#[test]
fn folded_gathers_and_scatter_adds_match_the_kernels() {
    use rlx_runtime::interpret;
    let mut g = Graph::new();
    let vals: Vec<f64> = (0..24).map(|i| i as f64 * 0.5 - 3.0).collect();
    let x = g
        .constant(Literal::F64(vals.into()), [3, 4, 2], DType::F64)
        .unwrap();
    let idx = g
        .constant(
            Literal::I64(vec![1, 0, 1, 1, 0, 0].into()),
            [2, 3],
            DType::I64,
        )
        .unwrap();
    let mut outs: Vec<_> = (0..3).map(|axis| g.gather(x, idx, axis).unwrap()).collect();
    let upd: Vec<f64> = (0..36).map(|i| (i as f64 * 0.37).sin() * 1e-3).collect();
    let upd = g
        .constant(Literal::F64(upd.into()), [3, 2, 3, 2], DType::F64)
        .unwrap();
    outs.push(g.scatter_add(x, idx, upd, 1).unwrap());
    let bad = g
        .constant(Literal::I64(vec![0, 3].into()), [2], DType::I64)
        .unwrap();
    outs.push(g.gather(x, bad, 0).unwrap());
    g.set_outputs(outs);
    let folded = fold_constants(&g).unwrap();
    let kept: Vec<bool> = folded
        .outputs()
        .iter()
        .map(|&o| matches!(folded.node(o).op, Op::Constant(_)))
        .collect();
    assert_eq!(kept, [true, true, true, true, false], "{folded}");
    let (mut good, mut good_folded) = (g.clone(), folded.clone());
    good.set_outputs(g.outputs()[..4].to_vec());
    good_folded.set_outputs(folded.outputs()[..4].to_vec());
    let want = interpret(&good, &[]).unwrap();
    let got = interpret(&good_folded, &[]).unwrap();
    for (w, o) in want.iter().zip(&got) {
        assert_eq!(w.shape(), o.shape());
        let bits = |t: &rlx_runtime::Tensor| -> Vec<u64> {
            t.to_f64_vec()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(w), bits(o));
    }
    assert!(interpret(&folded, &[]).is_err());
}
