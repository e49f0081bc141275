//! Matrix products and reductions over large tensors split across threads:
//! every thread count gives the same bits as one thread, and the values
//! match a naive reference (products: rows of `C` dealt to threads;
//! reductions: rows of a kept first axis dealt to threads, or a reduced
//! first axis cut into fixed blocks combined in order).

use std::sync::Mutex;

use rlx_runtime::{compile, set_num_threads, DType, Graph, ReduceOp, Tensor};

/// The thread count is global: tests that change it take turns.
static SETTING: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SETTING.lock().unwrap_or_else(|e| e.into_inner())
}

fn values(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as f64 * 0.7548 + seed) * 1.618).sin())
        .collect()
}

fn input(dims: &[usize], seed: f64, dtype: DType) -> Tensor {
    Tensor::from_vec(values(dims.iter().product(), seed), dims.to_vec()).cast(dtype)
}

/// Every output's bits (f32 widened to f64, which is exact).
fn bits(outs: &[Tensor]) -> Vec<Vec<u64>> {
    let widened = |t: &Tensor| t.cast(DType::F64).to_vec::<f64>().unwrap();
    outs.iter()
        .map(|t| widened(t).iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// Runs `g` with 1..=7 threads and asserts identical bits; returns the
/// 1-thread outputs.
fn same_bits_for_every_count(what: &str, g: &Graph, ins: &[&Tensor]) -> Vec<Tensor> {
    let exe = compile(g).unwrap();
    set_num_threads(1);
    let one = exe.run(ins).unwrap();
    let one_bits = bits(&one);
    for threads in 2..=7 {
        set_num_threads(threads);
        let many = bits(&exe.run(ins).unwrap());
        for (k, (a, b)) in one_bits.iter().zip(&many).enumerate() {
            if let Some(i) = a.iter().zip(b).position(|(p, q)| p != q) {
                panic!(
                    "{what}, {threads} threads: output {k} differs at element {i}: \
                     {:#x} vs {:#x}",
                    a[i], b[i]
                );
            }
        }
    }
    set_num_threads(0);
    one
}

fn assert_close(what: &str, got: &Tensor, want: &[f64], rel: f64) {
    let got = got.cast(DType::F64).to_vec::<f64>().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn products_give_the_same_bits_for_every_thread_count() {
    let _g = lock();
    // (batch, m, k, n, transpose b), each above the two-part threshold of
    // 2^20 multiply-adds: odd sizes, a row count that is not a multiple of
    // the 8-row groups, a transposed operand, a tall thin product, a batch,
    // and a product whose right operand fits the unpacked panel kernels
    // but whose rows are too many for them, while its parts' rows are not
    // (the kernel is chosen once, for the whole product).
    let cases = [
        (1, 40, 128, 256, false),
        (1, 133, 129, 117, false),
        (1, 64, 160, 256, false),
        (1, 300, 64, 100, true),
        (1, 1201, 300, 3, false),
        (3, 97, 111, 130, true),
    ];
    for (batch, m, k, n, tb) in cases {
        for dtype in [DType::F32, DType::F64] {
            let mut g = Graph::new();
            let a = g.input("a", [batch, m, k], dtype);
            let b_dims = if tb { [batch, n, k] } else { [batch, k, n] };
            let b = g.input("b", b_dims, dtype);
            let b = if tb {
                g.transpose(b, &[0, 2, 1]).unwrap()
            } else {
                b
            };
            let c = g.matmul(a, b).unwrap();
            g.set_outputs(vec![c]);
            let (at, bt) = (
                input(&[batch, m, k], 0.5, dtype),
                input(&b_dims, 2.5, dtype),
            );
            let what = format!("{batch}x{m}x{k}x{n} (b transposed: {tb}) {dtype:?}");
            let out = same_bits_for_every_count(&what, &g, &[&at, &bt]);
            // Against a naive product in f64.
            let (av, bv) = (values(batch * m * k, 0.5), values(batch * k * n, 2.5));
            let mut want = vec![0.0; batch * m * n];
            for q in 0..batch {
                for i in 0..m {
                    for j in 0..n {
                        let bij = |p: usize| {
                            if tb {
                                bv[q * n * k + j * k + p]
                            } else {
                                bv[q * k * n + p * n + j]
                            }
                        };
                        want[(q * m + i) * n + j] =
                            (0..k).map(|p| av[(q * m + i) * k + p] * bij(p)).sum();
                    }
                }
            }
            let rel = if dtype == DType::F32 { 1e-4 } else { 1e-12 };
            assert_close(&what, &out[0], &want, rel * k as f64);
        }
    }
}

#[test]
fn reductions_give_the_same_bits_for_every_thread_count() {
    let _g = lock();
    // (dims, axes): rows of a kept first axis; a reduced first axis in
    // fixed blocks (column sums, and all axes); an inner axis reduced
    // between kept ones; a shape just above the split threshold.
    let cases: [(&[usize], &[usize]); 6] = [
        (&[300, 997], &[1]),
        (&[300, 997], &[0]),
        (&[300, 997], &[0, 1]),
        (&[40, 50, 60], &[1]),
        (&[100_003], &[0]),
        (&[64, 512], &[0]),
    ];
    for (dims, axes) in cases {
        for dtype in [DType::F32, DType::F64] {
            for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max] {
                let mut g = Graph::new();
                let x = g.input("x", dims.to_vec(), dtype);
                let y = g.reduce(op, x, axes).unwrap();
                g.set_outputs(vec![y]);
                let xt = input(dims, 1.5, dtype);
                let what = format!("{op:?} of {dims:?} over {axes:?} {dtype:?}");
                let out = same_bits_for_every_count(&what, &g, &[&xt]);
                // Against a naive reduction in f64 of the same elements.
                let xs = xt.cast(DType::F64).to_vec::<f64>().unwrap();
                let (mut keep_strides, mut s) = (vec![0; dims.len()], 1);
                for d in (0..dims.len()).rev() {
                    if !axes.contains(&d) {
                        keep_strides[d] = s;
                        s *= dims[d];
                    }
                }
                let count = xs.len() / s;
                let mut want = vec![
                    if op == ReduceOp::Max {
                        f64::NEG_INFINITY
                    } else {
                        0.0
                    };
                    s
                ];
                let mut idx = vec![0; dims.len()];
                for &v in &xs {
                    let o: usize = idx.iter().zip(&keep_strides).map(|(i, s)| i * s).sum();
                    want[o] = if op == ReduceOp::Max {
                        want[o].max(v)
                    } else {
                        want[o] + v
                    };
                    for d in (0..dims.len()).rev() {
                        idx[d] += 1;
                        if idx[d] < dims[d] {
                            break;
                        }
                        idx[d] = 0;
                    }
                }
                if op == ReduceOp::Mean {
                    want.iter_mut().for_each(|w| *w /= count as f64);
                }
                let rel = if dtype == DType::F32 { 1e-6 } else { 1e-12 };
                assert_close(&what, &out[0], &want, rel * (count as f64).sqrt());
            }
        }
    }
}

/// An MLP layer's value and gradient with epilogues (each product written
/// into the buffer of the loop reading it, which then runs over it):
/// products large enough to be split across threads, and loops over their
/// results split too, give the bits of one thread and of the plan without
/// epilogues.
#[test]
fn epilogues_give_the_same_bits_for_every_thread_count() {
    let _g = lock();
    let (batch, d_in, hidden) = (64, 300, 130);
    for dtype in [DType::F32, DType::F64] {
        let mut g = Graph::new();
        let x = g.input("x", [batch, d_in], dtype);
        let w = g.input("w", [d_in, hidden], dtype);
        let b = g.input("b", [hidden], dtype);
        let v = g.input("v", [hidden, d_in], dtype);
        let p = g.matmul(x, w).unwrap();
        let z = g.add(p, b).unwrap();
        let h = g.tanh(z).unwrap();
        let back = g.matmul(h, v).unwrap();
        let sq = g.mul(back, back).unwrap();
        let loss = g.sum_all(sq).unwrap();
        g.set_outputs(vec![loss]);
        let vg = rlx_core::autodiff::value_and_grad(&g, &[1, 2, 3]).unwrap();
        let ins = [
            input(&[batch, d_in], 0.5, dtype),
            input(&[d_in, hidden], 1.5, dtype),
            input(&[hidden], 2.5, dtype),
            input(&[hidden, d_in], 3.5, dtype),
        ];
        let ins: Vec<&Tensor> = ins.iter().collect();
        let what = format!("mlp layer {dtype:?}");
        assert!(compile(&vg).unwrap().stats().epilogues >= 2, "{what}");
        let one = same_bits_for_every_count(&what, &vg, &ins);
        let apart = rlx_runtime::compile::Options {
            epilogues: false,
            ..Default::default()
        };
        let apart = rlx_runtime::compile::compile_with(&vg, &apart).unwrap();
        set_num_threads(1);
        let want = bits(&apart.run(&ins).unwrap());
        set_num_threads(0);
        assert_eq!(
            bits(&one),
            want,
            "{what}: against the plan without epilogues"
        );
    }
}

/// `h' = tanh(h·W + x)` over 40 steps (`h: [4, 16]`), output `Σ h(T)`:
/// its value and gradient, whose forward scan and reverse sweep (with
/// `W̄`'s products hoisted) are two loop nodes.
fn recurrent_gradient(dtype: DType) -> Graph {
    let steps = 40;
    let mut s = Graph::new();
    let h = s.input("h", [4, 16], dtype);
    let x = s.input("x", [4, 16], dtype);
    let w = s.input("w", [16, 16], dtype);
    let hw = s.matmul(h, w).unwrap();
    let z = s.add(hw, x).unwrap();
    let h2 = s.tanh(z).unwrap();
    s.set_outputs(vec![h2]);
    let l = rlx_core::LoopOp::scan("recurrent", s, 1, 1, steps, false, None).unwrap();
    let mut g = Graph::new();
    let h0 = g.input("h0", [4, 16], dtype);
    let xs = g.input("xs", [steps, 4, 16], dtype);
    let w = g.input("w", [16, 16], dtype);
    let p = g.looped(l, &[h0, xs, w]).unwrap();
    let y = g.sum_all(p).unwrap();
    g.set_outputs(vec![y]);
    rlx_core::autodiff::value_and_grad(&g, &[0, 1, 2]).unwrap()
}

#[test]
fn loop_bodies_compiled_on_several_threads_give_the_plan_of_one_thread() {
    // A plan's loop nodes have their step graphs compiled at once on the
    // pool's threads (the forward body on one, the reverse step and the
    // finishing graph of its hoisted products on another): the plan is
    // the one a single thread builds, step for step and bit for bit.
    let _guard = lock();
    for dtype in [DType::F64, DType::F32] {
        let g = recurrent_gradient(dtype);
        let ins: Vec<Tensor> = g
            .inputs()
            .iter()
            .enumerate()
            .map(|(i, inp)| input(g.shape(inp.node).dims(), i as f64, dtype))
            .collect();
        let refs: Vec<&Tensor> = ins.iter().collect();
        set_num_threads(1);
        let one = compile(&g).unwrap();
        let want = bits(&one.run(&refs).unwrap());
        for threads in [2, 3] {
            set_num_threads(threads);
            let many = compile(&g).unwrap();
            assert_eq!(many.stats(), one.stats(), "{dtype}, {threads} threads");
            set_num_threads(1);
            assert_eq!(
                bits(&many.run(&refs).unwrap()),
                want,
                "{dtype}, {threads} threads"
            );
        }
    }
    set_num_threads(0);
}
