//! Rerolled graphs (`rlx_core::passes::reroll`) against the unrolled ones:
//! the all-pairs pair loop at several sizes through value-and-gradient and
//! the Hessian, against finite differences; random graphs of repeated
//! computations (proptest) against the interpreter of the unrolled graph.
//!
//! The bound: each copy's arithmetic is unchanged, so values read as rows
//! of the batch are equal bit for bit; a rerolled sum of `K` terms (and
//! each gradient entry, a sum of per-copy contributions) is reassociated,
//! so it differs from the sequential sum by at most `K · ε · Σ|terms|`
//! (ε = 2⁻⁵², standard summation error bound, both orders within
//! `(K − 1) · ε · Σ|terms|` of the exact sum).

use proptest::prelude::*;
use rlx_core::passes::reroll::{reroll, MIN_LANES};
use rlx_core::{autodiff, DType, Graph, NodeId, Op};
use rlx_runtime::{compile, interpret, Tensor};

/// The all-pairs LJ energy of `n` particles in 3-D as a traced double
/// loop (one term per pair, summed in order).
fn pair_energy(n: usize) -> Graph {
    let mut g = Graph::new();
    let p = g.input("p", [3 * n], DType::F64);
    let mut e = g.scalar(0.0, DType::F64);
    for i in 0..n {
        for j in i + 1..n {
            let a = g.slice_range(p, 3 * i..3 * i + 3, 0).unwrap();
            let b = g.slice_range(p, 3 * j..3 * j + 3, 0).unwrap();
            let d = g.sub(a, b).unwrap();
            let d2 = g.square(d).unwrap();
            let r2 = g.sum_all(d2).unwrap();
            let s = g.recip(r2).unwrap();
            let s3 = g.powi(s, 3).unwrap();
            let s6 = g.square(s3).unwrap();
            let t = g.sub(s6, s3).unwrap();
            let four = g.scalar(4.0, DType::F64);
            let t = g.mul(t, four).unwrap();
            e = g.add(e, t).unwrap();
        }
    }
    g.set_outputs(vec![e]);
    g
}

/// Particles on a jittered cubic lattice (spacing 1.1).
fn lattice(n: usize) -> Vec<f64> {
    (0..3 * n)
        .map(|k| {
            let (i, axis) = (k / 3, k % 3);
            let c = [i % 3, (i / 3) % 3, i / 9][axis] as f64;
            1.1 * c + 0.01 * ((k * 7919 % 13) as f64 - 6.0)
        })
        .collect()
}

/// The energy, the gradient, and the sums of the absolute values of their
/// terms (the scales of the summation bound), by hand.
fn by_hand(p: &[f64]) -> (f64, f64, Vec<f64>, Vec<f64>) {
    let n = p.len() / 3;
    let (mut e, mut e_abs) = (0.0, 0.0);
    let (mut g, mut g_abs) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
    for i in 0..n {
        for j in i + 1..n {
            let d: Vec<f64> = (0..3).map(|k| p[3 * i + k] - p[3 * j + k]).collect();
            let s = 1.0 / d.iter().map(|x| x * x).sum::<f64>();
            let s3 = s.powi(3);
            let t = 4.0 * (s3 * s3 - s3);
            e += t;
            e_abs += t.abs();
            // de/d(r²) = 4 (−6 s⁷ + 3 s⁴); d(r²)/dd = 2d.
            let de = 4.0 * (-6.0 * s3 * s3 * s + 3.0 * s3 * s);
            for k in 0..3 {
                let c = 2.0 * d[k] * de;
                g[3 * i + k] += c;
                g[3 * j + k] -= c;
                g_abs[3 * i + k] += c.abs();
                g_abs[3 * j + k] += c.abs();
            }
        }
    }
    (e, e_abs, g, g_abs)
}

/// `|a − b| ≤ K · ε · scale` (plus ε·scale for the last rounding).
fn within(a: f64, b: f64, terms: usize, scale: f64, what: &str) {
    let bound = (terms as f64 + 1.0) * f64::EPSILON * scale;
    assert!(
        (a - b).abs() <= bound,
        "{what}: {a} vs {b}, differ by {:e} > bound {bound:e}",
        (a - b).abs()
    );
}

fn count(g: &Graph, f: impl Fn(&Op) -> bool) -> usize {
    g.nodes().iter().filter(|n| f(&n.op)).count()
}

fn run(g: &Graph, x: &Tensor) -> Vec<Vec<f64>> {
    compile(g)
        .unwrap()
        .run(&[x])
        .unwrap()
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect()
}

#[test]
fn the_pair_loop_becomes_one_batched_body() {
    for n in [7, 12, 30] {
        let g = pair_energy(n);
        let r = reroll(&g).unwrap();
        // Two gathers (particle i, particle j), the body once, one batch sum.
        assert_eq!(count(&r, |op| matches!(op, Op::Gather { .. })), 2, "{r}");
        assert!(r.len() < 25, "n = {n}: {} nodes\n{r}", r.len());
        assert_eq!(r.ty(r.outputs()[0]), g.ty(g.outputs()[0]));
        let gathered = r
            .nodes()
            .iter()
            .find(|x| matches!(x.op, Op::Gather { .. }))
            .unwrap();
        assert_eq!(gathered.shape.dims(), &[3, n * (n - 1) / 2]);
    }
    // 6 particles are 15 pairs, fewer than MIN_LANES = 16: left unrolled.
    assert_eq!(reroll(&pair_energy(6)).unwrap(), pair_energy(6));
}

#[test]
fn rerolled_pair_loop_gradient_equals_the_unrolled_one_within_the_sum_bound() {
    for n in [7, 10, 16, 27] {
        let ps = lattice(n);
        let x = Tensor::from_slice(&ps, [3 * n]);
        let g = pair_energy(n);
        let unrolled = run(&autodiff::value_and_grad(&g, &[0]).unwrap(), &x);
        let rerolled = run(
            &autodiff::value_and_grad(&reroll(&g).unwrap(), &[0]).unwrap(),
            &x,
        );
        let (e, e_abs, grad, g_abs) = by_hand(&ps);
        let pairs = n * (n - 1) / 2;
        within(rerolled[0][0], unrolled[0][0], pairs, e_abs, "energy");
        within(rerolled[0][0], e, pairs, e_abs, "energy by hand");
        for k in 0..3 * n {
            // Each entry sums n − 1 contributions, each a few roundings.
            let what = format!("n = {n}, gradient {k}");
            within(rerolled[1][k], unrolled[1][k], 8 * n, g_abs[k], &what);
            within(rerolled[1][k], grad[k], 8 * n, g_abs[k], &what);
        }
        // And central differences of the energy by hand.
        let h = 1e-6;
        for k in [0, 3 * n / 2, 3 * n - 1] {
            let (mut a, mut b) = (ps.clone(), ps.clone());
            a[k] += h;
            b[k] -= h;
            let fd = (by_hand(&a).0 - by_hand(&b).0) / (2.0 * h);
            assert!(
                (fd - rerolled[1][k]).abs() <= 1e-5 * (1.0 + fd.abs()),
                "n = {n}, coordinate {k}: finite differences {fd} vs {}",
                rerolled[1][k]
            );
        }
    }
}

#[test]
fn rerolled_pair_loop_hessian_equals_the_unrolled_one() {
    let n = 7;
    let ps = lattice(n);
    let x = Tensor::from_slice(&ps, [3 * n]);
    let g = pair_energy(n);
    let unrolled = run(&autodiff::hessian(&g, &[0]).unwrap(), &x);
    let rerolled = run(&autodiff::hessian(&reroll(&g).unwrap(), &[0]).unwrap(), &x);
    let h_un = unrolled.last().unwrap();
    let h_re = rerolled.last().unwrap();
    assert_eq!(h_re.len(), 9 * n * n);
    let scale = h_un.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (k, (a, b)) in h_re.iter().zip(h_un).enumerate() {
        // Each entry sums at most n − 1 pair blocks of a few terms each.
        within(*a, *b, 16 * n, scale, &format!("Hessian entry {k}"));
    }
    // Central differences of the analytic gradient.
    let step = 1e-6;
    for col in [0, 10, 3 * n - 1] {
        let (mut a, mut b) = (ps.clone(), ps.clone());
        a[col] += step;
        b[col] -= step;
        let (ga, gb) = (by_hand(&a).2, by_hand(&b).2);
        for row in 0..3 * n {
            let fd = (ga[row] - gb[row]) / (2.0 * step);
            let got = h_re[row * 3 * n + col];
            assert!(
                (fd - got).abs() <= 1e-4 * (1.0 + fd.abs()),
                "H[{row}, {col}]: finite differences {fd} vs {got}"
            );
        }
    }
}

/// One random computation: unary ops applied in turn to a slice, then
/// combined with a second slice by a binary op, then summed or not.
#[derive(Clone, Debug)]
struct Body {
    unary: Vec<u8>,
    binary: u8,
    len: usize,
    reduce: bool,
}

fn apply_body(g: &mut Graph, body: &Body, a: NodeId, b: NodeId) -> NodeId {
    let mut x = a;
    for u in &body.unary {
        x = match u % 5 {
            0 => g.sin(x),
            1 => g.tanh(x),
            2 => g.square(x),
            3 => g.exp(x),
            _ => g.neg(x),
        }
        .unwrap();
    }
    let y = match body.binary % 4 {
        0 => g.add(x, b),
        1 => g.mul(x, b),
        2 => g.sub(b, x),
        _ => g.max(x, b),
    }
    .unwrap();
    if body.reduce {
        g.sum_all(y).unwrap()
    } else {
        y
    }
}

/// `copies` copies of `body` at random starts (`starts`), plus `odd`
/// copies of `other` (a different computation), summed in order; with
/// `rows`, every copy's value is also an output of its own.
fn repeated(body: &Body, other: &Body, starts: &[(usize, usize)], odd: usize, rows: bool) -> Graph {
    let mut g = Graph::new();
    let p = g.input("p", [40], DType::F64);
    let mut outs = Vec::new();
    let mut e: Option<NodeId> = None;
    for (k, &(i, j)) in starts.iter().enumerate() {
        let b = if k < odd { other } else { body };
        let x = g.slice_range(p, i..i + b.len, 0).unwrap();
        let y = g.slice_range(p, j..j + b.len, 0).unwrap();
        let t = apply_body(&mut g, b, x, y);
        let t = if b.reduce { t } else { g.sum_all(t).unwrap() };
        if rows {
            outs.push(t);
        }
        e = Some(match e {
            None => t,
            Some(e) => g.add(e, t).unwrap(),
        });
    }
    outs.insert(0, e.unwrap());
    g.set_outputs(outs);
    g
}

fn body() -> impl Strategy<Value = Body> {
    (
        prop::collection::vec(0u8..5, 0..4),
        0u8..4,
        1usize..5,
        any::<bool>(),
    )
        .prop_map(|(unary, binary, len, reduce)| Body {
            unary,
            binary,
            len,
            reduce,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn random_repeated_graphs_equal_the_unrolled_interpreter(
        body in body(),
        other in body(),
        starts in prop::collection::vec((0usize..35, 0usize..35), MIN_LANES..3 * MIN_LANES),
        odd in 0usize..6,
        rows in any::<bool>(),
        xs in prop::collection::vec(-1.5f64..1.5, 40),
    ) {
        let g = repeated(&body, &other, &starts, odd, rows);
        let r = reroll(&g).unwrap();
        let x = Tensor::from_slice(&xs, [40]);
        let want: Vec<Vec<f64>> = interpret(&g, &[&x])
            .unwrap()
            .iter()
            .map(|t| t.to_f64_vec().unwrap())
            .collect();
        let got = run(&r, &x);
        let unrolled = run(&g, &x);
        // The scale of the bound: the sum of the terms' absolute values.
        let with_rows = repeated(&body, &other, &starts, odd, true);
        let scale: f64 = interpret(&with_rows, &[&x]).unwrap()[1..]
            .iter()
            .map(|t| t.to_f64_vec().unwrap()[0].abs())
            .sum();
        within(got[0][0], want[0][0], starts.len(), scale.max(1.0), "sum");
        within(unrolled[0][0], want[0][0], starts.len(), scale.max(1.0), "unrolled sum");
        for (k, (a, b)) in got[1..].iter().zip(&unrolled[1..]).enumerate() {
            // A row of the batch: the same ops in the same order.
            prop_assert_eq!(a[0].to_bits(), b[0].to_bits(), "row {}", k);
        }
        // Copies that match the template are rerolled when MIN_LANES of
        // them remain; the different ones never join them.
        let same = starts.len() - odd;
        if same >= MIN_LANES && !body.unary.is_empty() {
            prop_assert!(count(&r, |op| matches!(op, Op::Gather { .. })) >= 1, "{}", r);
        }
    }
}

#[test]
fn copies_over_rows_of_a_matrix_with_broadcasts_and_plain_operands() {
    // Leaves are `[2, 3]` row blocks of a `[20, 3]` matrix (the gather's
    // batch axis is moved last), combined with a plain `[3]` operand, a
    // broadcast and a reduction over a lane's own axis.
    let mut g = Graph::new();
    let p = g.input("p", [20, 3], DType::F64);
    let w = g.input("w", [3], DType::F64);
    let mut rows = Vec::new();
    let mut e = g.scalar(0.0, DType::F64);
    for k in 0..MIN_LANES + 3 {
        let a = g.slice_range(p, k % 19..k % 19 + 2, 0).unwrap();
        let b = g.mul(a, w).unwrap();
        let s = g.sum(b, &[1]).unwrap(); // [2]
        let s = g.reshape(s, [2, 1]).unwrap();
        let s = g.broadcast(s, [2, 3]).unwrap();
        let t = g.transpose(s, &[1, 0]).unwrap(); // [3, 2]
        let c = g.sin(a).unwrap();
        let ct = g.transpose(c, &[1, 0]).unwrap();
        let y = g.mul(t, ct).unwrap();
        let y = g.sum_all(y).unwrap();
        rows.push(y);
        e = g.add(e, y).unwrap();
    }
    let mut outs = vec![e];
    outs.extend(&rows);
    g.set_outputs(outs);
    let r = reroll(&g).unwrap();
    assert_eq!(count(&r, |op| matches!(op, Op::Gather { .. })), 1, "{r}");
    let xs: Vec<f64> = (0..60).map(|i| (i as f64 * 0.37).sin()).collect();
    let x = Tensor::from_slice(&xs, [20, 3]);
    let wv = Tensor::from_slice(&[0.5, -1.25, 2.0], [3]);
    let run2 = |g: &Graph| -> Vec<f64> {
        compile(g)
            .unwrap()
            .run(&[&x, &wv])
            .unwrap()
            .iter()
            .map(|t| t.to_f64_vec().unwrap()[0])
            .collect()
    };
    let (got, want) = (run2(&r), run2(&g));
    let reference: Vec<f64> = interpret(&g, &[&x, &wv])
        .unwrap()
        .iter()
        .map(|t| t.to_f64_vec().unwrap()[0])
        .collect();
    let scale: f64 = want[1..].iter().map(|v| v.abs()).sum();
    within(got[0], want[0], MIN_LANES + 3, scale, "sum");
    within(
        got[0],
        reference[0],
        MIN_LANES + 3,
        scale,
        "sum vs interpreter",
    );
    for k in 1..got.len() {
        assert_eq!(got[k].to_bits(), want[k].to_bits(), "row {k}");
    }
}

#[test]
fn element_scatters_with_runs_of_equal_indices_add_in_order() {
    // The gradient of a rerolled gather is a scatter whose indices repeat
    // in runs; the kernel sums a run in a register, in the same order.
    let idx = [1i64, 1, 1, 0, 2, 2, 1, 3, 3, 3, 3];
    let upd: Vec<f64> = (0..idx.len()).map(|k| 0.1 + (k as f64).sqrt()).collect();
    let base = [1e16, -0.3, 2.5, 7.0];
    let mut g = Graph::new();
    let x = g.input("x", [4], DType::F64);
    let u = g.input("u", [idx.len()], DType::F64);
    let i = g
        .constant(
            rlx_core::Literal::I64(idx.to_vec().into()),
            [idx.len()],
            DType::I64,
        )
        .unwrap();
    let y = g.scatter_add(x, i, u, 0).unwrap();
    g.set_outputs(vec![y]);
    let (xt, ut) = (
        Tensor::from_slice(&base, [4]),
        Tensor::from_slice(&upd, [idx.len()]),
    );
    let got = compile(&g).unwrap().run(&[&xt, &ut]).unwrap()[0]
        .to_f64_vec()
        .unwrap();
    let mut want = base;
    for (&j, &v) in idx.iter().zip(&upd) {
        want[j as usize] += v;
    }
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.to_bits(), b.to_bits(), "{got:?} vs {want:?}");
    }
}

/// Compiles without scalarisation (these graphs are small enough to be
/// one scalar program otherwise), so that the scatter is a step.
fn general(g: &Graph) -> rlx_runtime::Executable {
    let options = rlx_runtime::compile::Options::general();
    rlx_runtime::compile::compile_with(g, &options).unwrap()
}

/// `base`, then `upd` added at `idx` along axis 0 of `[size, inner]`, one
/// addition at a time in index order (the definition of `scatter_add`).
fn scatter_in_order(base: &[f64], idx: &[i64], upd: &[f64], inner: usize) -> Vec<f64> {
    let mut want = base.to_vec();
    for (k, &j) in idx.iter().enumerate() {
        for q in 0..inner {
            want[j as usize * inner + q] += upd[k * inner + q];
        }
    }
    want
}

/// A scatter-add of `upd: [parts, count / parts, inner]` into
/// `x: [size, inner]` at `idx` (shaped `[parts, count / parts]`: the parts
/// a step may add in lock-step), the indices a constant (`constant`) or
/// an input.
fn scatter_graph(size: usize, inner: usize, idx: &[i64], parts: usize, constant: bool) -> Graph {
    let mut g = Graph::new();
    let ix_shape = [parts, idx.len() / parts];
    let x = g.input("x", [size, inner], DType::F64);
    let u = g.input("u", [parts, idx.len() / parts, inner], DType::F64);
    let i = if constant {
        let lit = rlx_core::Literal::I64(idx.to_vec().into());
        g.constant(lit, ix_shape, DType::I64).unwrap()
    } else {
        g.input("idx", ix_shape, DType::I64)
    };
    let y = g.scatter_add(x, i, u, 0).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn constant_index_scatters_are_checked_once_and_add_in_order() {
    // Index patterns: sorted; in 2, 3 and 4 parts touching disjoint
    // elements (with runs, and with an element left and met again); two
    // parts sharing an element; and rows (`inner` > 1).
    let third: Vec<i64> = (0..3)
        .flat_map(|k| [0i64, 0, 0, 1, 1, 2, 0, 3, 3, 3].map(|i| 3 * i + k))
        .collect();
    let cases: Vec<(usize, usize, Vec<i64>, usize)> = vec![
        (6, 1, vec![0, 0, 1, 3, 3, 3, 5], 1),
        (12, 1, third, 3),
        (8, 1, vec![1, 1, 0, 1, 6, 7, 7, 6], 2),
        (
            8,
            1,
            vec![0, 2, 0, 0, 4, 6, 6, 4, 1, 1, 3, 1, 5, 5, 7, 7],
            4,
        ),
        (5, 1, vec![0, 1, 1, 2, 2, 1, 4, 0], 2),
        (4, 3, vec![2, 0, 2, 3, 3, 1], 2),
    ];
    for (size, inner, idx, parts) in cases {
        let base: Vec<f64> = (0..size * inner)
            .map(|k| 1e16 * (k % 2) as f64 - 0.3 * k as f64)
            .collect();
        let upd: Vec<f64> = (0..idx.len() * inner)
            .map(|k| 0.1 + (k as f64).sqrt())
            .collect();
        let want = scatter_in_order(&base, &idx, &upd, inner);
        let (xt, ut) = (
            Tensor::from_slice(&base, [size, inner]),
            Tensor::from_slice(&upd, [parts, idx.len() / parts, inner]),
        );
        let exe = general(&scatter_graph(size, inner, &idx, parts, true));
        assert_eq!(exe.stats().checked_scatters, 1, "{idx:?}");
        let got = exe.run(&[&xt, &ut]).unwrap()[0].to_f64_vec().unwrap();
        // The kernel step, which checks the indices on every call.
        let kernel = general(&scatter_graph(size, inner, &idx, parts, false));
        assert_eq!(kernel.stats().checked_scatters, 0);
        let it = Tensor::from_slice(&idx, [parts, idx.len() / parts]);
        let by_kernel = kernel.run(&[&xt, &ut, &it]).unwrap()[0]
            .to_f64_vec()
            .unwrap();
        for k in 0..want.len() {
            assert_eq!(got[k].to_bits(), want[k].to_bits(), "{idx:?} at {k}");
            assert_eq!(got[k].to_bits(), by_kernel[k].to_bits(), "{idx:?} at {k}");
        }
    }
}

#[test]
fn constant_indices_out_of_range_still_give_the_error() {
    for bad in [4i64, -1] {
        let idx = [0, 3, bad, 1];
        let exe = general(&scatter_graph(4, 1, &idx, 2, true));
        assert_eq!(exe.stats().checked_scatters, 0);
        let (xt, ut) = (
            Tensor::zeros([4, 1], DType::F64),
            Tensor::ones([2, 2, 1], DType::F64),
        );
        let err = exe.run(&[&xt, &ut]).unwrap_err();
        match err.root() {
            rlx_core::Error::IndexOutOfRange {
                op, index, size, ..
            } => {
                assert_eq!((*op, *index, *size), ("scatter_add", bad, 4), "{err}");
            }
            other => panic!("expected an index error, got {other}"),
        }
        assert!(err.to_string().contains("scatter_add"), "{err}");
    }
}

#[test]
fn the_pair_loop_gradient_scatters_with_checked_indices() {
    let g = reroll(&pair_energy(20)).unwrap();
    let vg = autodiff::value_and_grad(&g, &[0]).unwrap();
    let exe = compile(&vg).unwrap();
    assert_eq!(exe.stats().checked_scatters, 2, "{:?}", exe.stats());
    // Identical bits at every thread count (the scatter runs on one).
    let x = Tensor::from_slice(&lattice(20), [60]);
    let one = {
        rlx_runtime::set_num_threads(1);
        run(&vg, &x)
    };
    for threads in 2..=4 {
        rlx_runtime::set_num_threads(threads);
        assert_eq!(run(&vg, &x), one, "{threads} threads");
    }
    rlx_runtime::set_num_threads(0);
}
