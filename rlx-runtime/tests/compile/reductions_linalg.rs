//! Reductions, matrix products (odd and zero sizes, transposes read in place,
//! batches) and solves.

use super::*;

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
            let want: Vec<f64> = av.iter().map(|&v| reference::round(v, dtype)).collect();
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
            let ar: Vec<f64> = av.iter().map(|&v| reference::round(v, dtype)).collect();
            let br: Vec<f64> = bv.iter().map(|&v| reference::round(v, dtype)).collect();
            let want = reference::matmul(&Val::new(ar, &[m, k]), &Val::new(br, &[k, n])).data;
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
fn matmul_reads_a_layer_of_stacked_weights_in_place() {
    // h · w[1] and h · w[2]ᵀ for stacked weights `w: [3, k, k]`: each
    // layer is one contiguous range of `w`, read at its offset (also
    // through a transpose), with no copy step. A slice along a later
    // axis (columns of `w[0]`) is not one range: it is copied.
    for (m, k) in [(4, 8), (5, 24), (3, 7)] {
        let mut g = Graph::new();
        let h = g.input("h", [m, k], DType::F64);
        let w = g.input("w", [3, k, k], DType::F64);
        let layer = |g: &mut Graph, l: usize| {
            let s = g.slice_range(w, l..l + 1, 0).unwrap();
            g.reshape(s, [k, k]).unwrap()
        };
        let w1 = layer(&mut g, 1);
        let p = g.matmul(h, w1).unwrap();
        let w2 = layer(&mut g, 2);
        let w2t = g.transpose_last2(w2).unwrap();
        let q = g.matmul(h, w2t).unwrap();
        let w0 = layer(&mut g, 0);
        let cols = g.slice_range(w0, 1..k, 1).unwrap();
        let r = g.matmul(h, cols).unwrap();
        g.set_outputs(vec![p, q, r]);
        let hv = tensor(&values(m * k, 41, -1.0, 1.0), &[m, k], DType::F64);
        let wv = tensor(&values(3 * k * k, 42, -1.0, 1.0), &[3, k, k], DType::F64);
        let exe = check(&g, &[&hv, &wv], 1e-12, "layers of stacked weights");
        assert_eq!(exe.stats().virtual_slices, 2);
        // Three products and two copies (`w[0]`, read by a slice, not a
        // product, and its columns): no step for the two windows.
        assert_eq!(exe.stats().steps, 5);
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
