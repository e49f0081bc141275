//! What the planner fuses: scalar regions, fused loops across blocks, register
//! chains (bit for bit), merged branches, random graphs.

use super::*;

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
                let exe = general(&g);
                let got = exe.run(&[&xv, &yv, &bv]).unwrap();
                // Scalarised (when small): the same bits.
                let small = compile(&g).unwrap().run(&[&xv, &yv, &bv]).unwrap();
                for (j, (a, b)) in got.iter().zip(&small).enumerate() {
                    assert_same_values(a, b, &format!("{dtype} {dims:?} scalarised {j}"));
                }
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
