//! Sparse Hessians of sums of element terms (issue 41, item 2), each
//! against the hand-written element assembly in the same run (values
//! checked equal before timing):
//!
//! `msa_30`, `msa_100`, `msa_300`: the Hessian of the minimal-surface
//! objective (MINPACK-2 MSA, `benches/common/msa.rs`) on a 30 × 30,
//! 100 × 100 and 300 × 300 interior grid (900 to 90 000 unknowns, 2
//! triangles per cell), `sparse_hessian_into_msa_area` (warm, into caller
//! storage; element assembly: 3 products per triangle) vs
//! `msa_hessian_hand` (one pass over the triangles, closed-form 3 × 3
//! Hessians added at precomputed slots, no allocation).
//!
//! The first call (trace, pattern, program, compile, run) is printed per
//! size before timing.
//!
//! Run: `cargo bench --bench elements -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use rlx::prelude::*;

#[path = "common/msa.rs"]
mod msa;
use msa::{
    graph_msa_area, msa_hessian_hand, msa_slots, sparse_hessian_into_msa_area,
    sparse_hessian_msa_area, Msa,
};
use rlx::autodiff::transforms::sparse::{sparse_hessian_by, SparseMode};

fn bench_msa(c: &mut Criterion) {
    for k in [30, 100, 300] {
        let m = Msa::new(k, k);
        let x = m.start();
        let v = Tensor::from_slice(&x, [k * k]);
        let t0 = Instant::now();
        let mut h = sparse_hessian_msa_area(&v, k, k).unwrap();
        eprintln!(
            "msa_{k}: {} unknowns, {} triangles, {} nonzeros; first call {:?}",
            k * k,
            m.a.len(),
            h.nnz(),
            t0.elapsed()
        );
        let slots = msa_slots(&m, h.pattern());
        let mut hand = vec![0.0; h.nnz()];
        msa_hessian_hand(&m, &slots, &x, &mut hand);
        for (a, b) in h.values().iter().zip(&hand) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let mut group = c.benchmark_group(format!("msa_{k}"));
        group.sample_size(if k >= 300 { 20 } else { 50 });
        group.bench_function("rlx sparse_hessian_into", |b| {
            b.iter(|| sparse_hessian_into_msa_area(black_box(&v), k, k, &mut h).unwrap())
        });
        // The same Hessian by the star colouring of the whole graph (the
        // path before element assembly), for comparison.
        let g = rlx::core::passes::reroll(&graph_msa_area(&v, k, k).unwrap()).unwrap();
        let star = sparse_hessian_by(&g, &[0], SparseMode::Star).unwrap();
        eprintln!("msa_{k}: {} star colours", star.colours);
        let exe = rlx::compile(&star.graph).unwrap();
        group.bench_function("rlx star colouring (compiled graph)", |b| {
            b.iter(|| exe.run(&[black_box(&v)]).unwrap())
        });
        group.bench_function("hand element assembly", |b| {
            b.iter(|| msa_hessian_hand(&m, &slots, black_box(&x), &mut hand))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_msa);
criterion_main!(benches);
