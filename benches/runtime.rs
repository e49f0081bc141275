//! Runtime benchmarks, each against a hand-written baseline in the same run:
//! (a) a fused chain of 8 cheap element-wise ops on 1M f32 vs one plain loop
//!     (and, for context, a 9-op chain with tanh/exp/sqrt);
//! (b) 256x256x256 matrix products (f32, f64) vs calling `matrixmultiply`;
//! (c) 50 dependent 0-d f64 ops (a scalar region) vs plain Rust; ns/op is the
//!     reported time divided by 50.
//!
//! Run: `cargo bench --bench runtime -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use rlx_runtime::kernels::vmath;
use rlx_runtime::{compile, DType, Graph, Tensor};

const N: usize = 1 << 20;

/// The chain: `min(sqrt(|(max(x*1.5 + 0.25, 0) * x) - 1|), 2)`.
fn chain_by_hand(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let t = (v * 1.5 + 0.25).max(0.0) * v - 1.0;
        *o = t.abs().sqrt().min(2.0);
    }
}

fn fused_chain(c: &mut Criterion) {
    let mut g = Graph::new();
    let x = g.input("x", [N], DType::F32);
    let k = |g: &mut Graph, v: f64| g.scalar(v, DType::F32);
    let (c15, c025, c0, c1, c2) = (
        k(&mut g, 1.5),
        k(&mut g, 0.25),
        k(&mut g, 0.0),
        k(&mut g, 1.0),
        k(&mut g, 2.0),
    );
    let mut v = g.mul(x, c15).unwrap();
    v = g.add(v, c025).unwrap();
    v = g.max(v, c0).unwrap();
    v = g.mul(v, x).unwrap();
    v = g.sub(v, c1).unwrap();
    v = g.abs(v).unwrap();
    v = g.sqrt(v).unwrap();
    v = g.min(v, c2).unwrap();
    g.set_outputs(vec![v]);
    let exe = compile(&g).unwrap();
    let xs: Vec<f32> = (0..N).map(|i| ((i as f32) * 1e-3).sin() * 3.0).collect();
    let xt = Tensor::from_slice(&xs, [N]);
    let mut outs = vec![Tensor::zeros([N], DType::F32)];
    // Same values as the hand-written loop.
    exe.run_into(&[&xt], &mut outs).unwrap();
    let mut hand = vec![0.0f32; N];
    chain_by_hand(&xs, &mut hand);
    assert_eq!(outs[0].as_slice::<f32>().unwrap(), &hand[..]);

    let mut grp = c.benchmark_group("chain8_1M_f32");
    grp.bench_function("compiled", |b| {
        b.iter(|| exe.run_into(&[black_box(&xt)], &mut outs).unwrap())
    });
    grp.bench_function("hand_loop", |b| {
        b.iter(|| chain_by_hand(black_box(&xs), &mut hand))
    });
    grp.finish();
}

/// A chain with transcendental ops: `exp(sqrt(|tanh(x*1.5 + 0.25) * x - 1|))`
/// plus a `max` with 0 — 8 ops where libm dominates.
fn mixed_by_hand(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let t = (v * 1.5 + 0.25).tanh() * v - 1.0;
        *o = t.abs().sqrt().exp().max(0.0);
    }
}

fn fused_mixed_chain(c: &mut Criterion) {
    let mut g = Graph::new();
    let x = g.input("x", [N], DType::F32);
    let k = |g: &mut Graph, v: f64| g.scalar(v, DType::F32);
    let (c15, c025, c1, c0) = (
        k(&mut g, 1.5),
        k(&mut g, 0.25),
        k(&mut g, 1.0),
        k(&mut g, 0.0),
    );
    let mut v = g.mul(x, c15).unwrap();
    v = g.add(v, c025).unwrap();
    v = g.tanh(v).unwrap();
    v = g.mul(v, x).unwrap();
    v = g.sub(v, c1).unwrap();
    v = g.abs(v).unwrap();
    v = g.sqrt(v).unwrap();
    v = g.exp(v).unwrap();
    v = g.max(v, c0).unwrap();
    g.set_outputs(vec![v]);
    let exe = compile(&g).unwrap();
    let xs: Vec<f32> = (0..N).map(|i| ((i as f32) * 1e-3).sin() * 3.0).collect();
    let xt = Tensor::from_slice(&xs, [N]);
    let mut outs = vec![Tensor::zeros([N], DType::F32)];
    exe.run_into(&[&xt], &mut outs).unwrap();
    let mut hand = vec![0.0f32; N];
    mixed_by_hand(&xs, &mut hand);
    // The same values as the loop written with rlx's own tanh and exp
    // (std's differ by an ulp here and there); the timed baseline uses std.
    let same: Vec<f32> = xs
        .iter()
        .map(|&v| {
            let t = vmath::tanh(v * 1.5 + 0.25) * v - 1.0;
            vmath::exp(t.abs().sqrt()).max(0.0)
        })
        .collect();
    assert_eq!(outs[0].as_slice::<f32>().unwrap(), &same[..]);
    let mut grp = c.benchmark_group("chain9_transcendental_1M_f32");
    grp.bench_function("compiled", |b| {
        b.iter(|| exe.run_into(&[black_box(&xt)], &mut outs).unwrap())
    });
    grp.bench_function("hand_loop", |b| {
        b.iter(|| mixed_by_hand(black_box(&xs), &mut hand))
    });
    grp.finish();
}

fn matmul(c: &mut Criterion) {
    let n = 256;
    for dtype in [DType::F32, DType::F64] {
        let mut g = Graph::new();
        let a = g.input("a", [n, n], dtype);
        let b = g.input("b", [n, n], dtype);
        let p = g.matmul(a, b).unwrap();
        g.set_outputs(vec![p]);
        let exe = compile(&g).unwrap();
        let vals: Vec<f64> = (0..n * n).map(|i| ((i % 97) as f64) * 0.01).collect();
        let at = Tensor::from_storage(
            rlx_runtime::Storage::from_f64(dtype, vals.iter().copied()),
            [n, n],
        )
        .unwrap();
        let bt = at.clone();
        let mut outs = vec![Tensor::zeros([n, n], dtype)];
        let mut grp = c.benchmark_group(format!("matmul256_{dtype}"));
        grp.bench_function("compiled", |bch| {
            bch.iter(|| {
                exe.run_into(&[black_box(&at), black_box(&bt)], &mut outs)
                    .unwrap()
            })
        });
        match dtype {
            DType::F32 => {
                let a32: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
                let mut c32 = vec![0.0f32; n * n];
                grp.bench_function("matrixmultiply", |bch| {
                    bch.iter(|| {
                        // SAFETY: a32 and c32 hold n*n elements, row-major
                        // strides (n, 1) stay in bounds; c32 is a unique borrow.
                        unsafe {
                            matrixmultiply::sgemm(
                                n,
                                n,
                                n,
                                1.0,
                                a32.as_ptr(),
                                n as isize,
                                1,
                                a32.as_ptr(),
                                n as isize,
                                1,
                                0.0,
                                c32.as_mut_ptr(),
                                n as isize,
                                1,
                            )
                        }
                    })
                });
            }
            _ => {
                let mut c64 = vec![0.0f64; n * n];
                grp.bench_function("matrixmultiply", |bch| {
                    bch.iter(|| {
                        // SAFETY: vals and c64 hold n*n elements, row-major
                        // strides (n, 1) stay in bounds; c64 is a unique borrow.
                        unsafe {
                            matrixmultiply::dgemm(
                                n,
                                n,
                                n,
                                1.0,
                                vals.as_ptr(),
                                n as isize,
                                1,
                                vals.as_ptr(),
                                n as isize,
                                1,
                                0.0,
                                c64.as_mut_ptr(),
                                n as isize,
                                1,
                            )
                        }
                    })
                });
            }
        }
        grp.finish();
    }
}

/// 50 dependent ops: `v = v * c`, `v + c`, `max(v, c)`, `v - c`, `v / c`, repeated.
fn scalar_by_hand(mut v: f64) -> f64 {
    for i in 0..50 {
        let c = 1.0 + (i + 1) as f64 * 0.01;
        v = match i % 5 {
            0 => v * c,
            1 => v + c,
            2 => v.max(c),
            3 => v - c,
            _ => v / c,
        };
    }
    v
}

fn scalar_region(c: &mut Criterion) {
    let mut g = Graph::new();
    let x = g.input("x", (), DType::F64);
    let mut v = x;
    for i in 0..50 {
        let k = g.scalar(1.0 + (i + 1) as f64 * 0.01, DType::F64);
        v = match i % 5 {
            0 => g.mul(v, k).unwrap(),
            1 => g.add(v, k).unwrap(),
            2 => g.max(v, k).unwrap(),
            3 => g.sub(v, k).unwrap(),
            _ => g.div(v, k).unwrap(),
        };
    }
    g.set_outputs(vec![v]);
    let exe = compile(&g).unwrap();
    let xt = Tensor::scalar(0.3f64);
    let mut outs = vec![Tensor::zeros((), DType::F64)];
    exe.run_into(&[&xt], &mut outs).unwrap();
    assert_eq!(outs[0].item::<f64>().unwrap(), scalar_by_hand(0.3));
    let mut grp = c.benchmark_group("scalar50_f64");
    grp.bench_function("compiled", |b| {
        b.iter(|| exe.run_into(&[black_box(&xt)], &mut outs).unwrap())
    });
    grp.bench_function("hand", |b| b.iter(|| scalar_by_hand(black_box(0.3))));
    grp.finish();
}

criterion_group!(
    benches,
    fused_chain,
    fused_mixed_chain,
    matmul,
    scalar_region
);
criterion_main!(benches);
