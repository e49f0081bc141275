//! `vmap` against its definition: for every op, the batched graph evaluated
//! on a batch equals the original graph evaluated on each item, stacked
//! along a new leading axis. Every batching pattern (which operands carry the
//! batch axis) is tried. The optimised batched graph
//! (`rlx_core::passes::optimize`) must give the same values too.
//!
//! Expected values come from the f64 reference evaluator of `tests/common`
//! (independent of the runtime's kernels) run per item; the batched graph is
//! run with that evaluator, with `rlx_runtime::interpret` and, optimised,
//! with a compiled plan.

mod common;

use common::*;
use rlx_core::passes::optimize;
use rlx_core::{vmap, CmpOp, CustomOp, DType, Graph, NodeId, ReduceOp, Shape};
use rlx_runtime::{compile, interpret, Storage, Tensor};

/// One input of a test graph: shape, dtype and, for i64 indices, the
/// exclusive upper bound of the values.
#[derive(Clone)]
struct In {
    shape: Vec<usize>,
    dtype: DType,
    index_bound: usize,
}

fn f(shape: &[usize]) -> In {
    In {
        shape: shape.to_vec(),
        dtype: DType::F64,
        index_bound: 0,
    }
}

fn idx(shape: &[usize], bound: usize) -> In {
    In {
        shape: shape.to_vec(),
        dtype: DType::I64,
        index_bound: bound,
    }
}

fn boolean(shape: &[usize]) -> In {
    In {
        shape: shape.to_vec(),
        dtype: DType::Bool,
        index_bound: 0,
    }
}

fn item(rng: &mut Rng, i: &In) -> Vec<f64> {
    let n: usize = i.shape.iter().product();
    match i.dtype {
        DType::I64 => (0..n)
            .map(|_| rng.uniform(0.0, i.index_bound as f64).floor())
            .collect(),
        DType::Bool => (0..n)
            .map(|_| f64::from(u8::from(rng.uniform(0.0, 1.0) < 0.5)))
            .collect(),
        _ => rng.vec(n, 0.5, 2.0),
    }
}

/// Builds `g` from `ins` and `build`, then for every pattern in `patterns`
/// (all `2^n - 1` non-empty ones when `None`) checks vmap over `size` items.
fn check(
    name: &str,
    ins: &[In],
    patterns: Option<&[&[bool]]>,
    build: impl Fn(&mut Graph, &[NodeId]) -> Vec<NodeId>,
) {
    let mut g = Graph::new();
    let ids: Vec<NodeId> = ins
        .iter()
        .enumerate()
        .map(|(k, i)| g.input(format!("in{k}"), Shape::from(&i.shape[..]), i.dtype))
        .collect();
    let outs = build(&mut g, &ids);
    g.set_outputs(outs);
    check_graph(name, &g, ins, patterns);
}

/// [`check`] for a graph built elsewhere; `ins` describes its inputs.
fn check_graph(name: &str, g: &Graph, ins: &[In], patterns: Option<&[&[bool]]>) {
    g.verify().unwrap();
    let all: Vec<Vec<bool>> = (1..1u32 << ins.len())
        .map(|m| (0..ins.len()).map(|k| m & (1 << k) != 0).collect())
        .collect();
    let pats: Vec<Vec<bool>> = match patterns {
        Some(p) => p.iter().map(|p| p.to_vec()).collect(),
        None => all,
    };
    let size = 3;
    let mut rng = Rng::new(name.len() as u64 * 7919 + 17);
    for flags in &pats {
        let b = vmap(g, flags, size).unwrap_or_else(|e| panic!("{name} {flags:?}: {e}"));
        let items: Vec<Vec<Vec<f64>>> = (0..size)
            .map(|_| ins.iter().map(|i| item(&mut rng, i)).collect())
            .collect();
        // Unbatched inputs take item 0's value for every item.
        let per_item = |k: usize| -> Vec<Vec<f64>> {
            (0..ins.len())
                .map(|j| items[if flags[j] { k } else { 0 }][j].clone())
                .collect()
        };
        let batched_in: Vec<Vec<f64>> = (0..ins.len())
            .map(|j| {
                if flags[j] {
                    items.iter().flat_map(|it| it[j].clone()).collect()
                } else {
                    items[0][j].clone()
                }
            })
            .collect();
        let mut want: Vec<Vec<f64>> = vec![Vec::new(); g.outputs().len()];
        for k in 0..size {
            for (w, o) in want.iter_mut().zip(run(g, &per_item(k))) {
                w.extend(o);
            }
        }
        let what = format!("{name} batched={flags:?}\n{b}");
        let got = run(&b, &batched_in);
        for (o, (x, y)) in got.iter().zip(&want).enumerate() {
            assert_close(x, y, 1e-12, &format!("output {o} of {what}"));
        }
        let opt = optimize(&b).unwrap();
        for (o, (x, y)) in run(&opt, &batched_in).iter().zip(&want).enumerate() {
            assert_close(x, y, 1e-12, &format!("optimised output {o} of {what}"));
        }
        // The runtime's interpreter and compiled plans on the batched graph.
        let tensors: Vec<Tensor> = b
            .inputs()
            .iter()
            .zip(&batched_in)
            .map(|(i, v)| {
                let n = b.node(i.node);
                Tensor::from_storage(
                    Storage::from_f64(n.dtype, v.iter().copied()),
                    n.shape.clone(),
                )
                .unwrap()
            })
            .collect();
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let runs = [
            ("interpret", interpret(&b, &refs).unwrap()),
            ("compiled", compile(&opt).unwrap().run(&refs).unwrap()),
        ];
        for (how, outs) in runs {
            for (o, (t, y)) in outs.iter().zip(&want).enumerate() {
                let tol = if t.dtype() == DType::F64 { 1e-12 } else { 1e-6 };
                assert_close(
                    &t.to_f64_vec().unwrap(),
                    y,
                    tol,
                    &format!("{how} output {o} of {what}"),
                );
            }
        }
    }
}

#[test]
fn unary_ops_and_casts() {
    check("unary", &[f(&[2, 3])], None, |g, x| {
        let e = g.exp(x[0]).unwrap();
        let s = g.sin(e).unwrap();
        let q = g.sqrt(x[0]).unwrap();
        let p = g.powi(q, 3).unwrap();
        let c = g.cast(p, DType::F32).unwrap();
        let sg = g.stop_gradient(s).unwrap();
        vec![s, c, sg]
    });
}

#[test]
fn binary_ops_broadcasting_across_ranks() {
    check("binary", &[f(&[3]), f(&[2, 1]), f(&[])], None, |g, x| {
        let a = g.add(x[0], x[1]).unwrap();
        let m = g.mul(a, x[2]).unwrap();
        let d = g.div(x[1], x[0]).unwrap();
        let p = g.pow(x[0], x[2]).unwrap();
        let mz = g.mul_zero(x[2], x[1]).unwrap();
        vec![m, d, p, mz]
    });
    // A batched [B, 3] against an unbatched [4, 3]: trailing axes align.
    check("binary-4x3", &[f(&[3]), f(&[4, 3])], None, |g, x| {
        vec![g.sub(x[0], x[1]).unwrap()]
    });
}

#[test]
fn compare_select_and_logic() {
    check(
        "select",
        &[f(&[3]), f(&[2, 1]), boolean(&[2, 3])],
        None,
        |g, x| {
            let m = g.compare(CmpOp::Lt, x[0], x[1]).unwrap();
            let both = g.and(m, x[2]).unwrap();
            let s = g.select(both, x[0], x[1]).unwrap();
            let s2 = g.select(x[2], x[1], x[0]).unwrap();
            vec![s, s2, both]
        },
    );
}

#[test]
fn reductions() {
    check("reduce", &[f(&[2, 3, 4])], None, |g, x| {
        ReduceOp::ALL
            .iter()
            .flat_map(|&op| {
                [
                    g.reduce(op, x[0], &[1]).unwrap(),
                    g.reduce(op, x[0], &[0, 2]).unwrap(),
                ]
            })
            .collect()
    });
}

#[test]
fn matmul_all_rank_combinations() {
    for (sa, sb) in [
        (vec![2, 3], vec![3, 4]),
        (vec![5, 2, 3], vec![3, 4]),
        (vec![2, 3], vec![5, 3, 4]),
        (vec![1, 2, 3], vec![2, 3, 4]),
        (vec![2, 1, 2, 3], vec![4, 3, 2]),
    ] {
        check("matmul", &[f(&sa), f(&sb)], None, |g, x| {
            vec![g.matmul(x[0], x[1]).unwrap()]
        });
    }
}

#[test]
fn layout_ops() {
    check("layout", &[f(&[2, 3, 4]), f(&[3, 1])], None, |g, x| {
        let t = g.transpose(x[0], &[2, 0, 1]).unwrap();
        let r = g.reshape(x[0], [6, 4]).unwrap();
        let b = g.broadcast(x[1], [2, 3, 4]).unwrap();
        let b2 = g.broadcast(x[1], [3, 5]).unwrap();
        let s = g.slice_range(x[0], 1..3, 1).unwrap();
        let c = g.concat(&[x[0], b], 2).unwrap();
        let sm = g.softmax(x[0], 1).unwrap();
        let ls = g.log_softmax(x[0], 2).unwrap();
        vec![t, r, b, b2, s, c, sm, ls]
    });
}

#[test]
fn gather_every_axis_and_pattern() {
    for axis in 0..3 {
        let n = [2, 3, 4][axis];
        check("gather", &[f(&[2, 3, 4]), idx(&[2, 2], n)], None, |g, x| {
            vec![g.gather(x[0], x[1], axis).unwrap()]
        });
        check(
            "gather-scalar-index",
            &[f(&[2, 3, 4]), idx(&[], n)],
            None,
            |g, x| vec![g.gather(x[0], x[1], axis).unwrap()],
        );
    }
}

#[test]
fn scatter_add_every_axis_and_pattern() {
    for axis in 0..3 {
        let n = [2, 3, 4][axis];
        let mut ushape = vec![2, 3, 4];
        ushape.splice(axis..axis + 1, [2, 2]);
        check(
            "scatter_add",
            &[f(&[2, 3, 4]), idx(&[2, 2], n), f(&ushape)],
            None,
            |g, x| vec![g.scatter_add(x[0], x[1], x[2], axis).unwrap()],
        );
    }
}

#[test]
fn solve_batched_matrix_and_or_rhs() {
    check("solve", &[f(&[3, 3]), f(&[3, 2])], None, |g, x| {
        // A + 4 I keeps the matrix well conditioned for inputs in [0.5, 2).
        let eye = common::constant(
            g,
            vec![4.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 4.0],
            &[3, 3],
        );
        let a = g.add(x[0], eye).unwrap();
        vec![g.solve(a, x[1]).unwrap()]
    });
}

#[test]
fn custom_ops_and_unbatched_outputs() {
    let mut fwd = Graph::new();
    let fx = fwd.input("x", [3], DType::F64);
    let fw = fwd.input("w", [3], DType::F64);
    let p = fwd.mul(fx, fw).unwrap();
    let s = fwd.sum(p, &[0]).unwrap();
    let t = fwd.tanh(s).unwrap();
    fwd.set_outputs(vec![t]);
    let op = std::sync::Arc::new(CustomOp {
        name: "neuron".into(),
        forward: fwd,
        vjp: None,
        jvp: None,
    });
    check("custom", &[f(&[3]), f(&[3])], None, |g, x| {
        let c = g.custom(op.clone(), &[x[0], x[1]]).unwrap();
        let k = g.scalar(2.5, DType::F64);
        let e = g.exp(x[1]).unwrap();
        vec![c, k, e]
    });
}

#[test]
fn nested_vmap() {
    // vmap of a graph that vmap produced (offset gathers, padded matmuls).
    let mut g = Graph::new();
    let x = g.input("x", [1, 3], DType::F64);
    let w = g.input("w", [3, 4], DType::F64);
    let i = g.input("i", [2], DType::I64);
    let m = g.matmul(x, w).unwrap();
    let t = g.tanh(m).unwrap();
    let p = g.gather(t, i, 1).unwrap();
    g.set_outputs(vec![p]);
    let inner = vmap(&g, &[true, false, true], 2).unwrap();
    check_graph(
        "nested",
        &inner,
        &[f(&[2, 1, 3]), f(&[3, 4]), idx(&[2, 2], 4)],
        None,
    );
}

#[test]
fn vmap_of_derivative_graphs() {
    use rlx_core::autodiff::{grad, jvp};
    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F64);
    let w = g.input("w", [2, 3], DType::F64);
    let h = g.mul(w, x).unwrap();
    let s = g.sin(h).unwrap();
    let l = g.log_softmax(s, 1).unwrap();
    let y = g.sum_all(l).unwrap();
    g.set_outputs(vec![y]);
    let d = grad(&g, &[0, 1]).unwrap();
    check_graph("grad", &d, &[f(&[3]), f(&[2, 3])], None);
    let t = jvp(&g, &[0]).unwrap();
    check_graph("jvp", &t, &[f(&[3]), f(&[2, 3]), f(&[3])], None);
}

/// Random compositions of ops over inputs of different ranks, every
/// batching pattern: catches rules that are right alone but leave the batch
/// axis where the next rule does not expect it.
#[test]
fn random_graphs() {
    let mut rng = Rng::new(99);
    let ins = [f(&[2, 3]), f(&[3]), f(&[]), idx(&[2], 3)];
    for case in 0..60 {
        let mut g = Graph::new();
        let ids: Vec<NodeId> = ins
            .iter()
            .enumerate()
            .map(|(k, i)| g.input(format!("in{k}"), Shape::from(&i.shape[..]), i.dtype))
            .collect();
        let mut pool = ids[..3].to_vec();
        let steps = 2 + (rng.uniform(0.0, 8.0) as usize);
        for _ in 0..steps {
            let pick = |rng: &mut Rng, n: usize| (rng.uniform(0.0, n as f64) as usize).min(n - 1);
            let x = pool[pick(&mut rng, pool.len())];
            let y = pool[pick(&mut rng, pool.len())];
            let xs = g.shape(x).clone();
            let r = match pick(&mut rng, 12) {
                0 => g.add(x, y),
                1 => g.mul(x, y),
                2 => g.sin(x),
                3 if xs.rank() > 0 => g.sum(x, &[xs.rank() - 1]),
                4 if xs.rank() == 2 => g.transpose(x, &[1, 0]),
                5 => g.reshape(x, [xs.numel()]),
                6 => g.broadcast(x, {
                    let mut d = vec![2];
                    d.extend_from_slice(xs.dims());
                    d
                }),
                7 if xs.rank() > 0 && xs.dim(xs.rank() - 1) == 3 => {
                    g.gather(x, ids[3], xs.rank() - 1)
                }
                8 if xs.rank() > 0 => g.softmax(x, 0),
                9 if xs.rank() == 2 => {
                    let t = g.transpose(x, &[1, 0]).unwrap();
                    g.matmul(x, t)
                }
                10 => g.compare(CmpOp::Gt, x, y).and_then(|m| g.select(m, x, y)),
                _ => g.concat(&[x, y], 0),
            };
            if let Ok(id) = r {
                pool.push(id);
            }
        }
        let n = pool.len();
        g.set_outputs(vec![pool[n - 1], pool[n / 2]]);
        check_graph(&format!("random case {case}"), &g, &ins, None);
    }
}
