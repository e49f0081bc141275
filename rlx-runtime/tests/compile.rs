//! Compiled results against `rlx_runtime::interpret` and a naive reference
//! evaluator (tests/naive) for every op, f32/f64 (and half precision),
//! broadcasting, 0-d and size-0 values, random graphs; matmul edge cases;
//! buffer reuse; input and output errors; concurrency.

mod naive;

use naive::{assert_close, eval, tensor, values};
use rlx_runtime::{
    compile, Arg, BinaryOp, CmpOp, DType, Error, Executable, Graph, NodeId, ReduceOp, Shape,
    Tensor, UnaryOp,
};

fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 2e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 2e-2,
        DType::I64 | DType::Bool => 0.0,
    }
}

/// Compiles `g`, runs it on `inputs` and compares every output with the
/// naive evaluator.
fn check(g: &Graph, inputs: &[&Tensor], rtol: f64, what: &str) -> Executable {
    let exe = compile(g).unwrap_or_else(|e| panic!("{what}: compile: {e}"));
    let got = exe
        .run(inputs)
        .unwrap_or_else(|e| panic!("{what}: run: {e}"));
    let want = eval(g, inputs);
    assert_eq!(got.len(), want.len());
    for (j, (t, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(t.shape().dims(), &w.dims[..], "{what}: output {j} shape");
        assert_close(
            &t.to_f64_vec().unwrap(),
            &w.data,
            rtol,
            &format!("{what}: output {j}"),
        );
    }
    // The reference interpreter (per-op reference kernels) agrees too.
    let interp =
        rlx_runtime::interpret(g, inputs).unwrap_or_else(|e| panic!("{what}: interpret: {e}"));
    for (j, (t, r)) in got.iter().zip(&interp).enumerate() {
        assert_eq!(
            t.shape(),
            r.shape(),
            "{what}: output {j} shape vs interpret"
        );
        assert_eq!(
            t.dtype(),
            r.dtype(),
            "{what}: output {j} dtype vs interpret"
        );
        assert_close(
            &t.to_f64_vec().unwrap(),
            &r.to_f64_vec().unwrap(),
            rtol,
            &format!("{what}: output {j} vs interpret"),
        );
    }
    // A second (warm) run gives the same values.
    let again = exe.run(inputs).unwrap();
    for (a, b) in got.iter().zip(&again) {
        assert_close(
            &a.to_f64_vec().unwrap(),
            &b.to_f64_vec().unwrap(),
            0.0,
            &format!("{what}: warm run"),
        );
    }
    exe
}

fn domain(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::Asin | UnaryOp::Acos => (-0.9, 0.9),
        UnaryOp::Ln | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Log1p => (0.1, 3.0),
        UnaryOp::Tan => (-1.2, 1.2),
        _ => (-3.0, 3.0),
    }
}

#[test]
fn every_unary_op_fused_and_scalar() {
    for dtype in [DType::F64, DType::F32] {
        for op in UnaryOp::ALL {
            if op == UnaryOp::Not {
                continue;
            }
            let (lo, hi) = domain(op);
            // A [5, 7] chain: op(x) * 1.5 + x, fused into one loop.
            let mut g = Graph::new();
            let x = g.input("x", [5, 7], dtype);
            let y = g.unary(op, x).unwrap();
            let c = g.scalar(1.5, dtype);
            let z = g.mul(y, c).unwrap();
            let w = g.add(z, x).unwrap();
            g.set_outputs(vec![w, y]);
            let xv = tensor(&values(35, 1, lo, hi), &[5, 7], dtype);
            let exe = check(&g, &[&xv], tol(dtype), &format!("{op:?} {dtype}"));
            assert_eq!(exe.stats().fused_loops, 1);
            // The same on 0-d values: a scalar region.
            let mut g = Graph::new();
            let x = g.input("x", (), dtype);
            let y = g.unary(op, x).unwrap();
            let c = g.scalar(1.5, dtype);
            let z = g.mul(y, c).unwrap();
            g.set_outputs(vec![z]);
            let xv = tensor(&values(1, 2, lo, hi), &[], dtype);
            let exe = check(&g, &[&xv], tol(dtype), &format!("0-d {op:?} {dtype}"));
            assert_eq!(exe.stats().scalar_regions, 1);
        }
    }
}

#[test]
fn every_binary_op_with_broadcasting() {
    for dtype in [DType::F64, DType::F32] {
        for op in BinaryOp::ALL {
            if matches!(op, BinaryOp::And | BinaryOp::Or) {
                continue;
            }
            let mut g = Graph::new();
            let a = g.input("a", [4, 1], dtype);
            let b = g.input("b", [3], dtype);
            let s = g.input("s", (), dtype);
            let ab = g.binary(op, a, b).unwrap();
            let abs_ = g.binary(op, ab, s).unwrap();
            let sb = g.binary(op, s, b).unwrap();
            // 0-d operands: a scalar region (both orders, and a NaN operand).
            let t = g.input("t", (), dtype);
            let st = g.binary(op, s, t).unwrap();
            let ts = g.binary(op, t, s).unwrap();
            let nan = g.scalar(f64::NAN, dtype);
            let sn = g.binary(op, s, nan).unwrap();
            g.set_outputs(vec![abs_, sb, st, ts, sn]);
            let av = tensor(&values(4, 3, 0.2, 2.0), &[4, 1], dtype);
            let mut bvals = values(3, 4, -2.0, 2.0);
            bvals[1] = 0.0;
            let bv = tensor(&bvals, &[3], dtype);
            let sv = tensor(&[0.7], &[], dtype);
            let tv = tensor(&[-1.25], &[], dtype);
            check(
                &g,
                &[&av, &bv, &sv, &tv],
                tol(dtype),
                &format!("{op:?} {dtype}"),
            );
        }
    }
}

#[test]
fn logical_compare_select_and_integers() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let y = g.input("y", [3], DType::F64);
    let i = g.input("i", [2, 3], DType::I64);
    let lt = g.compare(CmpOp::Lt, x, y).unwrap();
    let ge = g.compare(CmpOp::Ge, x, y).unwrap();
    let eq = g.compare(CmpOp::Eq, x, y).unwrap();
    let ne = g.compare(CmpOp::Ne, lt, ge).unwrap();
    let both = g.and(lt, ne).unwrap();
    let either = g.or(both, eq).unwrap();
    let not = g.not(either).unwrap();
    let sel = g.select(not, x, y).unwrap();
    let two = g.full(2.0, (), DType::I64);
    let ii = g.mul(i, two).unwrap();
    let im = g.max(ii, i).unwrap();
    let ineg = g.neg(im).unwrap();
    let ip = g.powi(ineg, 3).unwrap();
    let ile = g.compare(CmpOp::Le, ip, i).unwrap();
    let fi = g.cast(ip, DType::F64).unwrap();
    let r = g.add(sel, fi).unwrap();
    g.set_outputs(vec![r, ile, either]);
    let xv = tensor(&[0.0, 1.0, 2.0, 3.0, -1.0, 0.5], &[2, 3], DType::F64);
    let yv = tensor(&[1.0, 1.0, 0.0], &[3], DType::F64);
    let iv = tensor(&[-3.0, -1.0, 0.0, 1.0, 2.0, 5.0], &[2, 3], DType::I64);
    check(&g, &[&xv, &yv, &iv], 0.0, "logical");
}

#[test]
fn casts_between_all_dtypes() {
    let dts = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::Bool,
    ];
    for from in dts {
        for to in dts {
            for dims in [vec![3, 2], vec![]] {
                let mut g = Graph::new();
                let x = g.input("x", dims.clone(), from);
                let c = g.cast(x, to).unwrap();
                g.set_outputs(vec![c]);
                let n: usize = dims.iter().product();
                let raw = [-2.75, 0.0, 1.5, 3.25, -0.5, 7.0];
                let xv = tensor(&raw[..n], &dims, from);
                check(&g, &[&xv], 0.0, &format!("cast {from}->{to} {dims:?}"));
            }
        }
    }
}

#[test]
fn half_precision_chains_round_after_each_op() {
    for dtype in [DType::F16, DType::BF16] {
        let mut g = Graph::new();
        let x = g.input("x", [17], dtype);
        let e = g.exp(x).unwrap();
        let s = g.sin(e).unwrap();
        let m = g.mul(s, x).unwrap();
        g.set_outputs(vec![m]);
        let xv = tensor(&values(17, 5, -1.0, 1.0), &[17], dtype);
        check(&g, &[&xv], tol(dtype), &format!("{dtype} chain"));
        let mut g = Graph::new();
        let x = g.input("x", (), dtype);
        let e = g.exp(x).unwrap();
        let s = g.sin(e).unwrap();
        g.set_outputs(vec![s]);
        let xv = tensor(&[0.3], &[], dtype);
        check(&g, &[&xv], tol(dtype), &format!("{dtype} scalar"));
    }
}

#[test]
fn reductions_over_axes() {
    let axes_list: [&[usize]; 6] = [&[], &[0], &[1], &[2], &[0, 2], &[0, 1, 2]];
    for dtype in [DType::F64, DType::F32, DType::I64] {
        for op in ReduceOp::ALL {
            if op == ReduceOp::Mean && dtype == DType::I64 {
                continue;
            }
            for axes in axes_list {
                let mut g = Graph::new();
                let x = g.input("x", [2, 3, 4], dtype);
                let r = g.reduce(op, x, axes).unwrap();
                g.set_outputs(vec![r]);
                let xv = tensor(
                    &values(24, 7, -2.0, 2.0)
                        .iter()
                        .map(|v| v.round())
                        .collect::<Vec<_>>(),
                    &[2, 3, 4],
                    dtype,
                );
                check(&g, &[&xv], tol(dtype), &format!("{op:?} {axes:?} {dtype}"));
            }
        }
    }
}

#[test]
fn size_zero_values() {
    let mut g = Graph::new();
    let x = g.input("x", [0, 3], DType::F64);
    let b = g.input("b", [3], DType::F64);
    let y = g.mul(x, b).unwrap();
    let e = g.exp(y).unwrap();
    let s = g.sum(e, &[0]).unwrap();
    let p = g.reduce(ReduceOp::Prod, e, &[0]).unwrap();
    let mx = g.reduce(ReduceOp::Max, e, &[0]).unwrap();
    let mn = g.reduce(ReduceOp::Mean, e, &[0, 1]).unwrap();
    g.set_outputs(vec![e, s, p, mx, mn]);
    let xv = tensor(&[], &[0, 3], DType::F64);
    let bv = tensor(&[1.0, 2.0, 3.0], &[3], DType::F64);
    let exe = compile(&g).unwrap();
    let out = exe.run(&[&xv, &bv]).unwrap();
    assert_eq!(out[0].shape().dims(), &[0, 3]);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![0.0; 3]);
    assert_eq!(out[2].to_vec::<f64>().unwrap(), vec![1.0; 3]);
    assert_eq!(out[3].to_vec::<f64>().unwrap(), vec![f64::NEG_INFINITY; 3]);
    assert!(out[4].item::<f64>().unwrap().is_nan());
}

/// `a @ b` for row-major `m x k` and `k x n` matrices, the textbook triple loop.
fn naive_mm(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

#[test]
fn matmul_identity_odd_and_zero_sizes() {
    for dtype in [DType::F64, DType::F32] {
        // Identity: I @ A = A exactly; both the small and the gemm path.
        for n in [3, 37] {
            let mut g = Graph::new();
            let i = g.input("i", [n, n], dtype);
            let a = g.input("a", [n, 5], dtype);
            let p = g.matmul(i, a).unwrap();
            g.set_outputs(vec![p]);
            let av = values(n * 5, 11, -1.0, 1.0);
            let exe = compile(&g).unwrap();
            let out = exe
                .run(&[&Tensor::eye(n, dtype), &tensor(&av, &[n, 5], dtype)])
                .unwrap();
            let want: Vec<f64> = av.iter().map(|&v| naive::round(v, dtype)).collect();
            assert_eq!(out[0].to_f64_vec().unwrap(), want, "identity {n} {dtype}");
        }
        // Odd, zero and large sizes against the triple loop.
        for (m, k, n) in [
            (5, 7, 3),
            (1, 1, 1),
            (0, 3, 4),
            (3, 0, 4),
            (3, 4, 0),
            (33, 29, 31),
        ] {
            let mut g = Graph::new();
            let a = g.input("a", [m, k], dtype);
            let b = g.input("b", [k, n], dtype);
            let p = g.matmul(a, b).unwrap();
            g.set_outputs(vec![p]);
            let av = values(m * k, 12, -1.0, 1.0);
            let bv = values(k * n, 13, -1.0, 1.0);
            let exe = compile(&g).unwrap();
            let out = exe
                .run(&[&tensor(&av, &[m, k], dtype), &tensor(&bv, &[k, n], dtype)])
                .unwrap();
            let ar: Vec<f64> = av.iter().map(|&v| naive::round(v, dtype)).collect();
            let br: Vec<f64> = bv.iter().map(|&v| naive::round(v, dtype)).collect();
            let want = naive_mm(&ar, &br, m, k, n);
            assert_close(
                &out[0].to_f64_vec().unwrap(),
                &want,
                tol(dtype) * 10.0,
                &format!("mm {m}x{k}x{n}"),
            );
        }
    }
}

#[test]
fn matmul_transposed_operands_are_read_in_place() {
    for (m, k, n) in [(4, 3, 5), (24, 20, 22)] {
        let mut g = Graph::new();
        let at = g.input("at", [k, m], DType::F64);
        let bt = g.input("bt", [n, k], DType::F64);
        let a = g.transpose_last2(at).unwrap();
        let b = g.transpose_last2(bt).unwrap();
        let p = g.matmul(a, b).unwrap();
        g.set_outputs(vec![p]);
        let atv = tensor(&values(m * k, 21, -1.0, 1.0), &[k, m], DType::F64);
        let btv = tensor(&values(n * k, 22, -1.0, 1.0), &[n, k], DType::F64);
        let exe = check(&g, &[&atv, &btv], 1e-12, "transposed matmul");
        assert_eq!(exe.stats().virtual_transposes, 2);
        assert_eq!(exe.stats().steps, 1, "no copy step for the transposes");
    }
}

#[test]
fn matmul_batched_broadcasting_and_half() {
    for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
        let mut g = Graph::new();
        let a = g.input("a", [2, 1, 3, 4], dtype);
        let b = g.input("b", [5, 4, 2], dtype);
        let p = g.matmul(a, b).unwrap();
        // A batched transpose (permuting batch axes too) read in place.
        let bt = g.transpose(b, &[2, 0, 1]).unwrap();
        let btt = g.transpose(bt, &[1, 2, 0]).unwrap();
        let q = g.matmul(a, btt).unwrap();
        g.set_outputs(vec![p, q]);
        let av = tensor(&values(24, 31, -1.0, 1.0), &[2, 1, 3, 4], dtype);
        let bv = tensor(&values(40, 32, -1.0, 1.0), &[5, 4, 2], dtype);
        let rtol = match dtype {
            DType::F16 => 1e-2,
            DType::BF16 => 5e-2,
            d => tol(d) * 10.0,
        };
        check(&g, &[&av, &bv], rtol, &format!("batched {dtype}"));
    }
}

#[test]
fn movement_and_kernel_ops() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3, 4], DType::F64);
    let idx = g.input("idx", [5], DType::I64);
    let t = g.transpose(x, &[2, 0, 1]).unwrap();
    let s = g.slice(x, 2, 1, 2).unwrap();
    let c = g.concat(&[x, x, s], 2).unwrap();
    let r = g.reshape(t, [4, 6]).unwrap();
    let bb = g.broadcast(s, [3, 2, 3, 2]).unwrap();
    let e = g.exp(bb).unwrap();
    let ga = g.gather(x, idx, 1).unwrap();
    let upd = g.input("upd", [2, 5, 4], DType::F64);
    let sc = g.scatter_add(x, idx, upd, 1).unwrap();
    let sm = g.softmax(x, 1).unwrap();
    let lsm = g.log_softmax(x, 2).unwrap();
    let sg = g.stop_gradient(sm).unwrap();
    let sgr = g.reshape(sg, [6, 4]).unwrap();
    g.set_outputs(vec![t, s, c, r, e, ga, sc, sm, lsm, sgr, x]);
    let xv = tensor(&values(24, 41, -2.0, 2.0), &[2, 3, 4], DType::F64);
    let iv = tensor(&[2.0, 0.0, 1.0, 2.0, 2.0], &[5], DType::I64);
    let uv = tensor(&values(40, 42, -1.0, 1.0), &[2, 5, 4], DType::F64);
    check(&g, &[&xv, &iv, &uv], 1e-12, "movement");
    // Out-of-range indices are an error naming the op and the node.
    let bad = tensor(&[0.0, 3.0, 0.0, 0.0, 0.0], &[5], DType::I64);
    let err = run_err(&compile(&g).unwrap(), &[&xv, &bad, &uv]);
    assert!(
        matches!(
            err,
            Error::AtNode {
                node,
                op: "gather",
                ..
            } if node == ga.0
        ),
        "{err}"
    );
    assert!(
        matches!(
            err.root(),
            Error::IndexOutOfRange {
                op: "gather",
                index: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("node {ga} (`gather`)")),
        "{err}"
    );
}

#[test]
fn solve_batched_and_singular() {
    for dtype in [DType::F64, DType::F32] {
        let mut g = Graph::new();
        let a = g.input("a", [2, 3, 3], dtype);
        let b = g.input("b", [2, 3, 2], dtype);
        let x = g.solve(a, b).unwrap();
        g.set_outputs(vec![x]);
        let mut av = values(18, 51, -1.0, 1.0);
        for bi in 0..2 {
            for i in 0..3 {
                av[bi * 9 + i * 4] += 3.0; // diagonally dominant
            }
        }
        let at = tensor(&av, &[2, 3, 3], dtype);
        let bt = tensor(&values(12, 52, -1.0, 1.0), &[2, 3, 2], dtype);
        check(
            &g,
            &[&at, &bt],
            tol(dtype) * 100.0,
            &format!("solve {dtype}"),
        );
        // A singular matrix (row 2 = 2 * row 1) is an error, not garbage.
        let mut sv = av.clone();
        for j in 0..3 {
            sv[9 + 6 + j] = 2.0 * sv[9 + 3 + j];
        }
        let exe = compile(&g).unwrap();
        let err = run_err(&exe, &[&tensor(&sv, &[2, 3, 3], dtype), &bt]);
        assert!(
            matches!(err.root(), Error::SingularMatrix { op: "solve", .. }),
            "{err}"
        );
        assert!(
            matches!(err, Error::AtNode { node, op: "solve", .. } if node == x.0),
            "{err}"
        );
        // The executable still works after an error.
        exe.run(&[&at, &bt]).unwrap();
    }
}

#[test]
fn scalar_region_of_fifty_dependent_ops() {
    let mut g = Graph::new();
    let x = g.input("x", (), DType::F64);
    let mut v = x;
    for i in 0..50 {
        let c = g.scalar(1.0 + (i + 1) as f64 * 0.01, DType::F64);
        v = match i % 5 {
            0 => g.mul(v, c).unwrap(),
            1 => g.add(v, c).unwrap(),
            2 => g.sin(v).unwrap(),
            3 => g.sub(v, c).unwrap(),
            _ => g.div(v, c).unwrap(),
        };
    }
    g.set_outputs(vec![v]);
    let xv = tensor(&[0.3], &[], DType::F64);
    let exe = check(&g, &[&xv], 0.0, "scalar chain");
    assert_eq!(exe.stats().scalar_regions, 1);
    assert_eq!(exe.stats().scalar_nodes, 50);
    assert_eq!(exe.stats().steps, 1);
}

#[test]
fn independent_scalar_computations_share_one_region() {
    // `a` and `b` are not connected: they still form one scalar region
    // (one step), whose results the scalar-program path returns as numbers.
    let mut g = Graph::new();
    let x = g.input("x", (), DType::F64);
    let y = g.input("y", (), DType::F64);
    let s = g.sin(x).unwrap();
    let a = g.mul(s, y).unwrap();
    let b = g.add(x, y).unwrap();
    let c = g.cos(y).unwrap();
    g.set_outputs(vec![c, a, b]);
    let (xv, yv) = (
        tensor(&[0.3], &[], DType::F64),
        tensor(&[-1.2], &[], DType::F64),
    );
    let exe = check(&g, &[&xv, &yv], 0.0, "independent scalars");
    assert_eq!(exe.stats().steps, 1);
    assert_eq!(exe.stats().scalar_regions, 1);
    let out = exe.run_args(&[Arg::F64(0.3), Arg::F64(-1.2)]).unwrap();
    let got: Vec<f64> = out.into_iter().map(|v| v.into_f64().unwrap()).collect();
    assert_eq!(got, vec![(-1.2f64).cos(), 0.3f64.sin() * -1.2, 0.3 + -1.2]);

    // A 0-d value that leaves through a vector and comes back must not
    // join the region it came from: that region was read from outside.
    let mut g = Graph::new();
    let x = g.input("x", (), DType::F64);
    let s = g.mul(x, x).unwrap();
    let v = g.broadcast(s, [4]).unwrap();
    let e = g.exp(v).unwrap();
    let t = g.sum(e, &[0]).unwrap();
    let u = g.neg(x).unwrap();
    let w = g.add(t, u).unwrap();
    g.set_outputs(vec![w]);
    let exe = check(&g, &[&xv], 1e-15, "scalar through a vector");
    assert!(exe.stats().scalar_regions >= 2);
}

#[test]
fn buffers_are_reused_by_liveness() {
    // A chain of 10 matmuls with a sum between each: 20 materialised values,
    // but only a couple are alive at any time.
    let mut g = Graph::new();
    let w = g.input("w", [8, 8], DType::F64);
    let mut v = g.input("x", [8, 8], DType::F64);
    for _ in 0..10 {
        let m = g.matmul(v, w).unwrap();
        let s = g.sum(m, &[0]).unwrap();
        let r = g.reshape(s, [1, 8]).unwrap();
        v = g.add(m, r).unwrap();
    }
    g.set_outputs(vec![v]);
    let wv = tensor(&values(64, 61, -0.3, 0.3), &[8, 8], DType::F64);
    let xv = tensor(&values(64, 62, -1.0, 1.0), &[8, 8], DType::F64);
    let exe = check(&g, &[&wv, &xv], 1e-10, "reuse");
    assert!(exe.stats().buffers <= 3, "{:?}", exe.stats());
}

#[test]
fn outputs_that_are_inputs_constants_or_repeated() {
    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F32);
    let c = g.full(2.5, [2], DType::F32);
    let y = g.exp(x).unwrap();
    let r = g.reshape(y, [3, 1]).unwrap();
    g.set_outputs(vec![x, c, y, y, r]);
    let xv = tensor(&[0.0, 1.0, -1.0], &[3], DType::F32);
    check(&g, &[&xv], 0.0, "outputs");
}

#[test]
fn custom_ops_are_inlined() {
    let mut f = Graph::new();
    let a = f.input("a", [2], DType::F64);
    let b = f.square(a).unwrap();
    f.set_outputs(vec![b]);
    let op = std::sync::Arc::new(rlx_core::CustomOp {
        name: "sq".into(),
        forward: f,
        vjp: None,
        jvp: None,
    });
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    let y = g.custom(op, &[x]).unwrap();
    g.set_outputs(vec![y]);
    let out = compile(&g)
        .unwrap()
        .run(&[&tensor(&[3.0, -2.0], &[2], DType::F64)])
        .unwrap();
    assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![9.0, 4.0]);
}

/// The error of a run that must fail.
fn run_err(exe: &Executable, inputs: &[&Tensor]) -> Error {
    match exe.run(inputs) {
        Ok(_) => panic!("run succeeded"),
        Err(e) => e,
    }
}

fn small_graph() -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let y = g.input("y", (), DType::F32);
    let e = g.exp(x).unwrap();
    let z = g.sin(y).unwrap();
    g.set_outputs(vec![e, z]);
    g
}

#[test]
fn input_errors_name_the_input() {
    let exe = compile(&small_graph()).unwrap();
    let x = Tensor::zeros([2, 3], DType::F64);
    let y = Tensor::zeros((), DType::F32);
    match run_err(&exe, &[&x]) {
        Error::CountMismatch {
            expected: 2,
            got: 1,
            what,
        } => assert_eq!(what, "inputs"),
        e => panic!("{e}"),
    }
    let bad_shape = Tensor::zeros([3, 2], DType::F64);
    let e = run_err(&exe, &[&bad_shape, &y]);
    assert!(
        matches!(&e, Error::InputMismatch { name, .. } if name == "x"),
        "{e}"
    );
    assert!(e.to_string().contains("[3, 2]"), "{e}");
    let bad_dtype = Tensor::zeros((), DType::F64);
    let e = run_err(&exe, &[&x, &bad_dtype]);
    assert!(
        matches!(&e, Error::InputMismatch { name, expected_dtype: DType::F32, got_dtype: DType::F64, .. } if name == "y"),
        "{e}"
    );
    // run_into checks the outputs too.
    let mut outs = vec![Tensor::zeros([2, 3], DType::F64)];
    let e = exe.run_into(&[&x, &y], &mut outs).unwrap_err();
    assert!(
        matches!(&e, Error::CountMismatch { what, .. } if what == "outputs"),
        "{e}"
    );
    let mut outs = vec![
        Tensor::zeros([2, 3], DType::F64),
        Tensor::zeros((), DType::F64),
    ];
    let e = exe.run_into(&[&x, &y], &mut outs).unwrap_err();
    assert!(e.to_string().contains("output #1"), "{e}");
    // Good inputs into good outputs work.
    let mut outs = vec![
        Tensor::zeros([2, 3], DType::F64),
        Tensor::zeros((), DType::F32),
    ];
    exe.run_into(&[&x, &y], &mut outs).unwrap();
    assert_eq!(outs[0].to_vec::<f64>().unwrap(), vec![1.0; 6]);
}

#[test]
fn run_into_does_not_disturb_shared_outputs() {
    let exe = compile(&small_graph()).unwrap();
    let x = Tensor::zeros([2, 3], DType::F64);
    let y = Tensor::zeros((), DType::F32);
    let mut outs = vec![
        Tensor::full(7.0, [2, 3], DType::F64),
        Tensor::zeros((), DType::F32),
    ];
    let keep = outs[0].clone();
    exe.run_into(&[&x, &y], &mut outs).unwrap();
    assert_eq!(outs[0].to_vec::<f64>().unwrap(), vec![1.0; 6]);
    assert_eq!(keep.to_vec::<f64>().unwrap(), vec![7.0; 6]);
}

#[test]
fn executable_is_send_sync_and_runs_concurrently() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Executable>();
    let mut g = Graph::new();
    let x = g.input("x", [64], DType::F64);
    let w = g.input("w", [64, 64], DType::F64);
    let xr = g.reshape(x, [1, 64]).unwrap();
    let p = g.matmul(xr, w).unwrap();
    let t = g.tanh(p).unwrap();
    let s = g.sum_all(t).unwrap();
    g.set_outputs(vec![s]);
    let exe = compile(&g).unwrap();
    let wv = tensor(&values(64 * 64, 71, -0.2, 0.2), &[64, 64], DType::F64);
    let inputs: Vec<Tensor> = (0..8)
        .map(|i| tensor(&values(64, 100 + i, -1.0, 1.0), &[64], DType::F64))
        .collect();
    let serial: Vec<f64> = inputs
        .iter()
        .map(|x| exe.run(&[x, &wv]).unwrap()[0].item::<f64>().unwrap())
        .collect();
    let parallel: Vec<f64> = std::thread::scope(|s| {
        let hs: Vec<_> = inputs
            .iter()
            .map(|x| {
                let (exe, wv) = (&exe, &wv);
                s.spawn(move || {
                    (0..20)
                        .map(|_| exe.run(&[x, wv]).unwrap()[0].item::<f64>().unwrap())
                        .last()
                        .unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(serial, parallel);
}

#[test]
fn fused_chain_is_one_loop_and_matches_per_element_math() {
    // 8 element-wise ops over [1000] with a broadcast row and constants.
    let mut g = Graph::new();
    let x = g.input("x", [10, 100], DType::F32);
    let b = g.input("b", [100], DType::F32);
    let mut v: NodeId = x;
    let c = g.scalar(0.5, DType::F32);
    v = g.mul(v, c).unwrap();
    v = g.add(v, b).unwrap();
    v = g.tanh(v).unwrap();
    v = g.square(v).unwrap();
    v = g.sub(v, x).unwrap();
    v = g.abs(v).unwrap();
    v = g.sqrt(v).unwrap();
    v = g.max(v, c).unwrap();
    g.set_outputs(vec![v]);
    let xv = values(1000, 81, -2.0, 2.0);
    let bv = values(100, 82, -1.0, 1.0);
    let exe = check(
        &g,
        &[
            &tensor(&xv, &[10, 100], DType::F32),
            &tensor(&bv, &[100], DType::F32),
        ],
        2e-6,
        "chain",
    );
    assert_eq!(exe.stats().fused_loops, 1);
    assert_eq!(exe.stats().fused_nodes, 8);
    // mul, add (its broadcast row loaded first) | tanh | square .. max.
    assert_eq!(exe.stats().chained_nodes, 7);
    assert_eq!(exe.stats().buffers, 0);
    let _ = Shape::scalar();
}

/// Bit-exact equality of two tensors' values (any NaN equals any NaN;
/// signed zeros must match).
fn assert_same_bits(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits();
        assert!(same, "{what}: element {i}: got {a:?}, want {b:?}");
    }
}

/// The chain of the runtime benchmark plus one using every chainable op
/// (both operand orders, a broadcast row, NaN/inf/-0 inputs), on sizes
/// around the chunk and block widths: register chains give exactly the
/// per-op reference kernels' values.
#[test]
fn register_chains_match_the_reference_kernels_bit_for_bit() {
    for dtype in [DType::F32, DType::F64, DType::F16] {
        for dims in [[0, 8], [1, 1], [3, 21], [1, 69], [5, 431], [64, 64]] {
            let mut g = Graph::new();
            let x = g.input("x", dims, dtype);
            let y = g.input("y", dims, dtype);
            let b = g.input("b", [dims[1]], dtype);
            let k = |g: &mut Graph, v: f64| g.scalar(v, dtype);
            let (c15, c025, c0, c1, c2, nz) = (
                k(&mut g, 1.5),
                k(&mut g, 0.25),
                k(&mut g, 0.0),
                k(&mut g, 1.0),
                k(&mut g, 2.0),
                k(&mut g, -0.0),
            );
            // The benchmark chain: one instruction streaming x to the output.
            let mut v = g.mul(x, c15).unwrap();
            v = g.add(v, c025).unwrap();
            v = g.max(v, c0).unwrap();
            v = g.mul(v, x).unwrap();
            v = g.sub(v, c1).unwrap();
            v = g.abs(v).unwrap();
            v = g.sqrt(v).unwrap();
            let bench = g.min(v, c2).unwrap();
            // Every chainable op, with slice and splat operands on both sides.
            let mut w = g.relu(y).unwrap();
            w = g.div(w, x).unwrap();
            w = g.sub(c025, w).unwrap();
            w = g.max(nz, w).unwrap();
            w = g.min(w, y).unwrap();
            w = g.add(w, b).unwrap();
            w = g.neg(w).unwrap();
            w = g.square(w).unwrap();
            w = g.recip(w).unwrap();
            w = g.min(nz, w).unwrap();
            w = g.max(w, x).unwrap();
            w = g.abs(w).unwrap();
            w = g.rsqrt(w).unwrap();
            w = g.div(c1, w).unwrap();
            w = g.mul(y, w).unwrap();
            let mid = w;
            w = g.sub(w, y).unwrap();
            w = g.max(w, b).unwrap();
            let every = g.min(c15, w).unwrap();
            let n = dims[0] * dims[1];
            let special = [f64::NAN, -0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, -1.5];
            let with_special = |seed: u64| {
                let mut v = values(n, seed, -3.0, 3.0);
                for (i, e) in v.iter_mut().enumerate().filter(|(i, _)| i % 7 == 3) {
                    *e = special[(i / 7) % special.len()];
                }
                v
            };
            let xv = tensor(&with_special(71), &dims, dtype);
            let yv = tensor(&with_special(72), &dims, dtype);
            let bv = tensor(&values(dims[1], 73, -1.0, 1.0), &[dims[1]], dtype);
            // Once with the chain's middle value as an output too (which
            // splits the chain there), once without.
            for outs in [vec![bench, every], vec![every, mid, bench]] {
                let mut g = g.clone();
                g.set_outputs(outs);
                let what = format!("{dtype} {dims:?}");
                let exe = compile(&g).unwrap();
                let got = exe.run(&[&xv, &yv, &bv]).unwrap();
                let want = rlx_runtime::interpret(&g, &[&xv, &yv, &bv]).unwrap();
                for (j, (t, r)) in got.iter().zip(&want).enumerate() {
                    assert_same_bits(t, r, &format!("{what} output {j}"));
                }
                let st = exe.stats();
                if dtype == DType::F16 {
                    assert_eq!(st.chained_nodes, 0, "{what}: half precision never chains");
                } else {
                    assert!(st.chained_nodes >= 20, "{what}: {st:?}");
                }
            }
        }
    }
}

#[test]
fn fused_loops_across_blocks_with_broadcast_leaves() {
    // 3 x 1500 = 4500 elements: several blocks, rows wrapping mid-block.
    for dtype in [DType::F64, DType::F32, DType::F16, DType::I64] {
        let mut g = Graph::new();
        let x = g.input("x", [3, 1500], dtype);
        let row = g.input("row", [1500], dtype);
        let col = g.input("col", [3, 1], dtype);
        let s = g.input("s", (), dtype);
        let a = g.add(x, row).unwrap();
        let b = g.mul(a, col).unwrap();
        // `x` is read in place by `add` and through a register by `compare`.
        let c = g.compare(CmpOp::Gt, b, x).unwrap();
        let d = g.select(c, b, s).unwrap();
        let e = g.sub(d, s).unwrap();
        let bc = g.broadcast(col, [2, 3, 1500]).unwrap();
        let f = g.max(bc, e).unwrap();
        g.set_outputs(vec![e, f, c]);
        let int = |v: Vec<f64>| {
            v.iter()
                .map(|x| (x * 4.0).round() / 4.0)
                .collect::<Vec<_>>()
        };
        let xv = tensor(&int(values(4500, 91, -3.0, 3.0)), &[3, 1500], dtype);
        let rv = tensor(&int(values(1500, 92, -3.0, 3.0)), &[1500], dtype);
        let cv = tensor(&[1.0, -2.0, 0.5], &[3, 1], dtype);
        let sv = tensor(&[0.25], &[], dtype);
        let exe = check(
            &g,
            &[&xv, &rv, &cv, &sv],
            tol(dtype),
            &format!("blocks {dtype}"),
        );
        assert_eq!(exe.stats().fused_loops, 2, "{:?}", exe.stats());
    }
}

#[test]
fn stored_members_feed_later_steps_and_outputs() {
    // `t` is needed by the fused chain, by a reduction and as an output.
    let mut g = Graph::new();
    let x = g.input("x", [2000], DType::F32);
    let t = g.tanh(x).unwrap();
    let u = g.mul(t, t).unwrap();
    let s = g.sum_all(t).unwrap();
    let v = g.mul(u, s).unwrap();
    g.set_outputs(vec![v, t, u]);
    let xv = tensor(&values(2000, 93, -2.0, 2.0), &[2000], DType::F32);
    check(&g, &[&xv], 1e-5, "stored members");
}

#[test]
fn long_reductions_use_partial_results() {
    for dtype in [DType::F64, DType::F32, DType::I64] {
        for op in ReduceOp::ALL {
            if op == ReduceOp::Mean && dtype == DType::I64 {
                continue;
            }
            for axes in [&[1usize][..], &[0, 1], &[0]] {
                let mut g = Graph::new();
                let x = g.input("x", [3, 1003], dtype);
                let r = g.reduce(op, x, axes).unwrap();
                g.set_outputs(vec![r]);
                // Products of many values overflow; keep them near 1.
                let vals: Vec<f64> = match op {
                    ReduceOp::Prod => values(3009, 95, 0.999, 1.001),
                    _ => values(3009, 96, -50.0, 50.0)
                        .iter()
                        .map(|v| v.round())
                        .collect(),
                };
                let vals = if dtype == DType::I64 && op == ReduceOp::Prod {
                    vec![1.0; 3009]
                } else {
                    vals
                };
                let xv = tensor(&vals, &[3, 1003], dtype);
                let rtol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
                check(&g, &[&xv], rtol, &format!("long {op:?} {axes:?} {dtype}"));
            }
        }
    }
}

#[test]
fn parallel_branches_merge_into_one_loop() {
    // exp(x) and sin(y) start separate chains; their sum joins them.
    let mut g = Graph::new();
    let x = g.input("x", [3000], DType::F64);
    let y = g.input("y", [3000], DType::F64);
    let a = g.exp(x).unwrap();
    let a2 = g.mul(a, x).unwrap();
    let b = g.sin(y).unwrap();
    let b2 = g.square(b).unwrap();
    let c = g.add(a2, b2).unwrap();
    let d = g.sub(c, b).unwrap();
    g.set_outputs(vec![d]);
    let xv = tensor(&values(3000, 97, -1.0, 1.0), &[3000], DType::F64);
    let yv = tensor(&values(3000, 98, -1.0, 1.0), &[3000], DType::F64);
    let exe = check(&g, &[&xv, &yv], 1e-12, "merge");
    assert_eq!(exe.stats().fused_loops, 1, "{:?}", exe.stats());
    assert_eq!(exe.stats().buffers, 0, "{:?}", exe.stats());
}

/// Random DAGs over a pool of values of shapes [4, 5], [5], [4, 1] and []:
/// element-wise ops with broadcasting, reductions, reshapes, transposes,
/// matrix products and stop-gradients, with several outputs. Exercises
/// grouping, sealing, merging and buffer reuse against the naive evaluator.
#[test]
fn random_graphs_match_the_reference() {
    let mut seed = 12345u64;
    let mut next = move |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    for case in 0..150 {
        let mut g = Graph::new();
        let x = g.input("x", [4, 5], DType::F64);
        let y = g.input("y", [5], DType::F64);
        let z = g.input("z", [4, 1], DType::F64);
        let s = g.input("s", (), DType::F64);
        let mut pool: Vec<NodeId> = vec![x, y, z, s];
        for _ in 0..(8 + next(20)) {
            let a = pool[next(pool.len())];
            let b = pool[next(pool.len())];
            let made = match next(12) {
                0 => g.add(a, b),
                1 => g.mul(a, b),
                2 => g.sub(a, b),
                3 => g.tanh(a),
                4 => g.sin(a),
                5 => {
                    let r = g.shape(a).rank();
                    if r == 0 {
                        g.exp(a)
                    } else {
                        g.sum(a, &[next(r)])
                    }
                }
                6 => g.max(a, b),
                7 => {
                    let c = g.compare(CmpOp::Gt, a, b);
                    c.and_then(|c| g.select(c, a, b))
                }
                8 => {
                    if g.shape(a).dims() == [4, 5] {
                        let t = g.transpose(a, &[1, 0]).unwrap();
                        g.matmul(a, t)
                    } else {
                        g.neg(a)
                    }
                }
                9 => {
                    let n = g.shape(a).numel();
                    g.reshape(a, [n])
                }
                10 => g.stop_gradient(a),
                _ => {
                    if g.shape(a).rank() == 2 && g.shape(a).dims() == [4, 5] {
                        g.sum(a, &[0, 1])
                    } else {
                        g.square(a)
                    }
                }
            };
            if let Ok(v) = made {
                pool.push(v);
            }
        }
        let k = 1 + next(3);
        let outs: Vec<NodeId> = (0..k).map(|_| pool[4 + next(pool.len() - 4)]).collect();
        g.set_outputs(outs);
        let xv = tensor(&values(20, 200 + case, -1.0, 1.0), &[4, 5], DType::F64);
        let yv = tensor(&values(5, 300 + case, -1.0, 1.0), &[5], DType::F64);
        let zv = tensor(&values(4, 400 + case, -1.0, 1.0), &[4, 1], DType::F64);
        let sv = tensor(&values(1, 500 + case, -1.0, 1.0), &[], DType::F64);
        check(
            &g,
            &[&xv, &yv, &zv, &sv],
            1e-9,
            &format!("random graph {case}:\n{g}"),
        );
    }
}

#[test]
fn zero_d_integers_and_mixed_dtypes() {
    // 0-d i64 values run in a (one-element) fused loop; the f64 part after
    // the cast is a scalar region; bool masks select between branches.
    let mut g = Graph::new();
    let n = g.input("n", (), DType::I64);
    let x = g.input("x", (), DType::F32);
    let three = g.full(3.0, (), DType::I64);
    let m = g.mul(n, three).unwrap();
    let p = g.powi(m, 2).unwrap();
    let f = g.cast(p, DType::F64).unwrap();
    let xf = g.cast(x, DType::F64).unwrap();
    let s = g.add(f, xf).unwrap();
    let pos = g.compare(CmpOp::Gt, s, f).unwrap();
    let neg = g.neg(s).unwrap();
    let r = g.select(pos, s, neg).unwrap();
    let h = g.cast(r, DType::F16).unwrap();
    let h2 = g.sqrt(h).unwrap();
    g.set_outputs(vec![r, p, h2, pos]);
    for (nv, xv) in [(2.0, 0.5), (-3.0, -1.25), (0.0, 0.0)] {
        let nt = tensor(&[nv], &[], DType::I64);
        let xt = tensor(&[xv], &[], DType::F32);
        check(&g, &[&nt, &xt], 1e-3, &format!("mixed 0-d n={nv} x={xv}"));
    }
}
