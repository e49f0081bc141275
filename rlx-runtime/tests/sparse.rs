//! Sparse Jacobians and Hessians of small random graphs against the dense
//! ones, for every compression (forward over column colours, reverse over
//! row colours, both over a bicolouring, star-coloured forward over reverse for Hessians): the
//! pattern must hold every nonzero of the dense derivative and the values
//! must agree. Also: the automatic choice of mode, and patterns against
//! central finite differences.

use rlx_core::autodiff::transforms::sparse::{
    sparse_hessian, sparse_hessian_by, sparse_jacobian, SparseMode,
};
use rlx_core::autodiff::{dense_hessian, jacfwd};
use rlx_core::sparsity::{jacobian_pattern, Pattern};
use rlx_core::{DType, Graph, Literal, NodeId, Op};
use rlx_runtime::{compile, Tensor};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() % 10_000) as f64 / 10_000.0 - 0.5
    }
}

/// A random graph of `x: [n]` with output 0 of shape `[n]`: element-wise
/// ops, shifts (slice + concat), constant-index gathers, selects, a
/// softmax, and now and then a dense coupling (a sum broadcast back).
fn random_graph(rng: &mut Rng, n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let mut nodes: Vec<NodeId> = vec![x];
    let steps = 3 + rng.below(6);
    for _ in 0..steps {
        let a = nodes[rng.below(nodes.len())];
        let b = nodes[rng.below(nodes.len())];
        let y = match rng.below(10) {
            0 => g.sin(a).unwrap(),
            1 => g.tanh(a).unwrap(),
            2 => g.mul(a, b).unwrap(),
            3 => g.add(a, b).unwrap(),
            4 => {
                // Shift by one: y_i = a_{i+1}, 0 at the end.
                let s = g.slice_range(a, 1..n, 0).unwrap();
                let z = g.full([1], 0.0, DType::F64);
                g.concat(&[s, z], 0).unwrap()
            }
            5 => {
                let idx: Vec<i64> = (0..n).map(|_| rng.below(n) as i64).collect();
                let i = g
                    .constant(Literal::I64(idx.into()), [n], DType::I64)
                    .unwrap();
                g.gather(a, i, 0).unwrap()
            }
            6 => {
                let zero = g.scalar(0.0, DType::F64);
                let c = g.compare(rlx_core::CmpOp::Gt, a, zero).unwrap();
                let s = g.square(b).unwrap();
                g.select(c, s, a).unwrap()
            }
            7 if rng.below(3) == 0 => {
                let s = g.sum_all(a).unwrap();
                g.mul(b, s).unwrap()
            }
            8 if rng.below(2) == 0 => {
                let r = g.reshape(a, [1, n]).unwrap();
                let s = g.softmax(r, 1).unwrap();
                g.reshape(s, [n]).unwrap()
            }
            _ => g.square(a).unwrap(),
        };
        nodes.push(y);
    }
    let out = *nodes.last().unwrap();
    // Keep x in the output so that every column can be nonzero.
    let w = g.scalar(0.5, DType::F64);
    let xw = g.mul(x, w).unwrap();
    let y = g.add(out, xw).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn run(g: &Graph, x: &[f64]) -> Vec<Vec<f64>> {
    let t = Tensor::from_slice(x, [x.len()]);
    compile(g)
        .unwrap()
        .run(&[&t])
        .unwrap()
        .iter()
        .map(|o| o.to_vec::<f64>().unwrap())
        .collect()
}

/// The dense matrix of `values` over `p`, row-major.
fn densify(p: &Pattern, values: &[f64]) -> Vec<f64> {
    let mut d = vec![0.0; p.nrows() * p.ncols()];
    for (k, (r, c)) in p.entries().enumerate() {
        d[r * p.ncols() + c] = values[k];
    }
    d
}

fn assert_close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
            "{what}: element {i}: {x} vs {y}"
        );
    }
}

#[test]
fn sparse_jacobians_of_random_graphs_equal_dense_ones_in_both_modes() {
    let mut rng = Rng(0x5eed);
    for case in 0..60 {
        let n = 3 + rng.below(6);
        let g = random_graph(&mut rng, n);
        let x: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
        let dense = run(&jacfwd(&g, &[0]).unwrap(), &x)[1].clone();
        for mode in [
            SparseMode::Forward,
            SparseMode::Reverse,
            SparseMode::Bidirectional,
        ] {
            let s = sparse_jacobian(&g, &[0], Some(mode)).unwrap();
            let outs = run(&s.graph, &x);
            assert_eq!(outs[0], run(&g, &x)[0], "case {case}: value");
            let what = format!("case {case}, {mode:?}, {} colours\n{g}", s.colours);
            assert_close(&densify(&s.pattern, &outs[1]), &dense, &what);
        }
    }
}

#[test]
fn sparse_hessians_of_random_graphs_equal_dense_ones_and_are_symmetric() {
    let mut rng = Rng(0xbeef);
    let mut modes = std::collections::BTreeMap::new();
    for case in 0..40 {
        let n = 3 + rng.below(6);
        let mut g = random_graph(&mut rng, n);
        // A scalar: Σ w_i y_i with fixed weights.
        let y = g.outputs()[0];
        let w: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 0.25).collect();
        let wc = g.constant(Literal::F64(w.into()), [n], DType::F64).unwrap();
        let p = g.mul(y, wc).unwrap();
        let f = g.sum_all(p).unwrap();
        g.set_outputs(vec![f]);
        let x: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
        let dense = run(&dense_hessian(&g, &[0]).unwrap(), &x)[1].clone();
        let s = sparse_hessian(&g, &[0]).unwrap();
        assert!(s.pattern.is_symmetric());
        let h = densify(&s.pattern, &run(&s.graph, &x)[1]);
        assert_close(
            &h,
            &dense,
            &format!("case {case}, {:?}, {} colours\n{g}", s.mode, s.colours),
        );
        // The element assembly against the star colouring of the same graph.
        let star = sparse_hessian_by(&g, &[0], SparseMode::Star).unwrap();
        assert_eq!(star.pattern, s.pattern);
        let hs = densify(&star.pattern, &run(&star.graph, &x)[1]);
        assert_close(&h, &hs, &format!("case {case}: {:?} vs star\n{g}", s.mode));
        *modes.entry(format!("{:?}", s.mode)).or_insert(0) += 1;
        for i in 0..n {
            for j in 0..n {
                assert!((h[i * n + j] - h[j * n + i]).abs() <= 1e-12 * (1.0 + h[i * n + j].abs()));
            }
        }
    }
    // Both compressions are exercised.
    eprintln!("{modes:?}");
    assert!(
        modes.get("Elements").copied().unwrap_or(0) >= 5,
        "{modes:?}"
    );
    assert!(modes.get("Star").copied().unwrap_or(0) >= 5, "{modes:?}");
}

#[test]
fn patterns_hold_every_nonzero_of_finite_differences() {
    let mut rng = Rng(0xfeed);
    for case in 0..40 {
        let n = 3 + rng.below(6);
        let g = random_graph(&mut rng, n);
        let p = jacobian_pattern(&g, &[0]).unwrap();
        let x: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
        let h = 1e-6;
        for j in 0..n {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[j] += h;
            xm[j] -= h;
            let (fp, fm) = (run(&g, &xp)[0].clone(), run(&g, &xm)[0].clone());
            for i in 0..n {
                let d = (fp[i] - fm[i]) / (2.0 * h);
                if d.abs() > 1e-7 {
                    assert!(
                        p.position(i, j).is_some(),
                        "case {case}: ({i}, {j}) = {d} is outside the pattern\n{g}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_cheaper_mode_is_picked() {
    // One dense row and a diagonal: reverse mode with two colours.
    let n = 16;
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let sq = g.square(x).unwrap();
    let s = g.sum_all(sq).unwrap();
    let s = g.reshape(s, [1]).unwrap();
    let rest = g.slice_range(x, 1..n, 0).unwrap();
    let rest = g.sin(rest).unwrap();
    let y = g.concat(&[s, rest], 0).unwrap();
    g.set_outputs(vec![y]);
    let p = sparse_jacobian(&g, &[0], None).unwrap();
    assert_eq!((p.mode, p.colours), (SparseMode::Reverse, 2));
    // Its transpose (one dense column): forward mode with two colours.
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let x0 = g.slice_range(x, 0..1, 0).unwrap();
    let e = g.exp(x0).unwrap();
    let y = g.mul(x, e).unwrap();
    g.set_outputs(vec![y]);
    let p = sparse_jacobian(&g, &[0], None).unwrap();
    assert_eq!((p.mode, p.colours), (SparseMode::Forward, 2));
    let e = sparse_jacobian(&g, &[0], Some(SparseMode::Star)).unwrap_err();
    assert!(e.to_string().contains("Hessian"), "{e}");
}

/// An arrow: `y_0 = Σ x²` (a dense row), `y_i = x_i · exp(x_0) + sin(x_i)`
/// (a dense column and the diagonal).
fn arrow(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let sq = g.square(x).unwrap();
    let s = g.sum_all(sq).unwrap();
    let s = g.reshape(s, [1]).unwrap();
    let x0 = g.slice_range(x, 0..1, 0).unwrap();
    let e = g.exp(x0).unwrap();
    let rest = g.slice_range(x, 1..n, 0).unwrap();
    let coupled = g.mul(rest, e).unwrap();
    let sin = g.sin(rest).unwrap();
    let rest = g.add(coupled, sin).unwrap();
    let y = g.concat(&[s, rest], 0).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn an_arrow_is_bicoloured_in_three_passes_and_equals_the_dense_jacobian() {
    let n = 40;
    let g = arrow(n);
    let s = sparse_jacobian(&g, &[0], None).unwrap();
    // One dense row, one dense column, the diagonal: 1 + 1 + 1 passes,
    // where a one-sided colouring needs n.
    assert_eq!((s.mode, s.colours), (SparseMode::Bidirectional, 3));
    let f = sparse_jacobian(&g, &[0], Some(SparseMode::Forward)).unwrap();
    assert_eq!(f.colours, n);
    let x: Vec<f64> = (0..n).map(|i| 0.3 * (i as f64 * 0.7).sin()).collect();
    let dense = run(&jacfwd(&g, &[0]).unwrap(), &x)[1].clone();
    let outs = run(&s.graph, &x);
    assert_eq!(outs[0], run(&g, &x)[0]);
    assert_close(&densify(&s.pattern, &outs[1]), &dense, "arrow");
}

/// `x` shifted by `k` places: element `i` is `x[i + k]`, 0 past the end.
fn shifted(g: &mut Graph, x: NodeId, n: usize, k: usize) -> NodeId {
    let s = g.slice_range(x, k..n, 0).unwrap();
    let z = g.full([k], 0.0, DType::F64);
    g.concat(&[s, z], 0).unwrap()
}

/// The last op computing the values output of a sparse program, and the
/// number of entries it computes per call (those added by its
/// `scatter_add`; 0 when the values are a constant).
fn computed_entries(g: &Graph) -> (Op, usize) {
    let v = g.node(*g.outputs().last().unwrap());
    let count = match v.op {
        Op::ScatterAdd { .. } => g.shape(v.inputs[1]).numel(),
        _ => 0,
    };
    (v.op.clone(), count)
}

/// Entries equal at every input (the linear part's) are constants of the
/// compressed program; only the others are computed, then added into
/// them. Each case against the dense Jacobian (the general path) and
/// central differences, at ordinary points and at an infinite input (the
/// constant entries stay finite there, as the dense Jacobian's do).
#[test]
fn constant_entries_are_folded_and_only_the_others_computed() {
    let n = 40;
    // (graph, entries computed per call).
    let mut cases = Vec::new();
    // 1-D stencil `x[i-1] + x[i+1] - 2 x[i] - x[i]³`: only the diagonal
    // depends on x.
    {
        let mut g = Graph::new();
        let x = g.input("x", [n], DType::F64);
        let right = shifted(&mut g, x, n, 1);
        let s = g.slice_range(x, 0..n - 1, 0).unwrap();
        let z = g.full([1], 0.0, DType::F64);
        let left = g.concat(&[z, s], 0).unwrap();
        let two = g.scalar(2.0, DType::F64);
        let lap = g.add(left, right).unwrap();
        let d = g.mul(x, two).unwrap();
        let lap = g.sub(lap, d).unwrap();
        let c = g.powi(x, 3).unwrap();
        let y = g.sub(lap, c).unwrap();
        g.set_outputs(vec![y]);
        cases.push((g, n));
    }
    // Linear: `3 x[i] + x[i+1] - 2 x[perm[i]]`: every entry constant.
    {
        let mut g = Graph::new();
        let x = g.input("x", [n], DType::F64);
        let perm: Vec<i64> = (0..n as i64).map(|i| (7 * i + 3) % n as i64).collect();
        let idx = g
            .constant(Literal::I64(perm.into()), [n], DType::I64)
            .unwrap();
        let p = g.gather(x, idx, 0).unwrap();
        let (three, two) = (g.scalar(3.0, DType::F64), g.scalar(2.0, DType::F64));
        let a = g.mul(x, three).unwrap();
        let r = shifted(&mut g, x, n, 1);
        let b = g.mul(p, two).unwrap();
        let y = g.add(a, r).unwrap();
        let y = g.sub(y, b).unwrap();
        g.set_outputs(vec![y]);
        cases.push((g, 0));
    }
    // Two nonlinear terms with different zero factors and a linear one:
    // `x[i]² + sin(x[i+1]) + 2 x[i+2]`: the diagonal and the first
    // superdiagonal are computed, the second superdiagonal is constant.
    {
        let mut g = Graph::new();
        let x = g.input("x", [n], DType::F64);
        let sq = g.square(x).unwrap();
        let r1 = shifted(&mut g, x, n, 1);
        let s = g.sin(r1).unwrap();
        let r2 = shifted(&mut g, x, n, 2);
        let two = g.scalar(2.0, DType::F64);
        let l = g.mul(r2, two).unwrap();
        let y = g.add(sq, s).unwrap();
        let y = g.add(y, l).unwrap();
        g.set_outputs(vec![y]);
        cases.push((g, 2 * n - 1));
    }
    let mut rng = Rng(0xc0de);
    for (case, (g, computed)) in cases.iter().enumerate() {
        let dense_g = jacfwd(g, &[0]).unwrap();
        for mode in [SparseMode::Forward, SparseMode::Reverse] {
            let s = sparse_jacobian(g, &[0], Some(mode)).unwrap();
            // The split sees through element-wise ops: in reverse mode the
            // shifted terms' cotangents pass through slices and concats,
            // so case 2 computes more there (the values still agree).
            let (op, count) = computed_entries(&s.graph);
            if mode == SparseMode::Forward || case < 2 {
                assert_eq!(
                    count, *computed,
                    "case {case}, {mode:?}: {op:?}\n{}",
                    s.graph
                );
            }
            if *computed == 0 {
                assert!(
                    matches!(op, Op::Constant(_)),
                    "case {case}: {op:?}\n{}",
                    s.graph
                );
            }
            let x: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
            let values = run(&s.graph, &x)[1].clone();
            let what = format!("case {case}, {mode:?}");
            let dense = run(&dense_g, &x)[1].clone();
            assert_close(&densify(&s.pattern, &values), &dense, &what);
            // Central differences along each column.
            let h = 1e-6;
            for j in 0..n {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[j] += h;
                xm[j] -= h;
                let (fp, fm) = (run(g, &xp)[0].clone(), run(g, &xm)[0].clone());
                for i in 0..n {
                    let fd = (fp[i] - fm[i]) / (2.0 * h);
                    let v = s.pattern.position(i, j).map_or(0.0, |k| values[k]);
                    assert!((fd - v).abs() <= 1e-6, "{what}: ({i}, {j}): {v} vs {fd}");
                }
            }
            // An infinite input: the same entries as the dense Jacobian's
            // (infinities equal, everything else close).
            let mut x_inf = x.clone();
            x_inf[n / 2] = f64::INFINITY;
            let got = densify(&s.pattern, &run(&s.graph, &x_inf)[1]);
            let want = run(&dense_g, &x_inf)[1].clone();
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                let same = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12;
                assert!(same, "{what}, x[{}] = inf: element {k}: {a} vs {b}", n / 2);
            }
        }
    }
}
