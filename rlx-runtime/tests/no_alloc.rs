//! A warm `run_into` performs no heap allocation: proven with a counting
//! global allocator on a graph with fused chains, a scalar region, a matrix
//! product with a transposed operand, a reduction, a solve, a slice, and a
//! softmax and a gather (both through the reference kernels), a
//! scatter-add with constant indices (checked when the plan is built); and the same
//! graph with its small values run as scalar regions (the default plan).

use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{compile, DType, Graph, Tensor};

mod counting;
use counting::allocations;
#[path = "shared/lj.rs"]
mod lj;

#[test]
fn warm_run_into_allocates_nothing() {
    let mut g = Graph::new();
    let x = g.input("x", [6, 5], DType::F64);
    let w = g.input("w", [4, 5], DType::F64);
    let a = g.input("a", [4, 4], DType::F64);
    let k = g.input("k", (), DType::F64);
    // Fused chain with a broadcast row and constants.
    let half = g.scalar(0.5, DType::F64);
    let row = g.full([5], 0.25, DType::F64);
    let t0 = g.mul(x, half).unwrap();
    let t1 = g.add(t0, row).unwrap();
    let t2 = g.tanh(t1).unwrap();
    // Matrix product with a transposed operand: [6, 5] x [5, 4].
    let wt = g.transpose_last2(w).unwrap();
    let p = g.matmul(t2, wt).unwrap();
    // Reduction and a second fused chain.
    let s = g.sum(p, &[0]).unwrap();
    let e = g.exp(s).unwrap();
    let srow = g.reshape(e, [4, 1]).unwrap();
    // Solve a x = srow.
    let sol = g.solve(a, srow).unwrap();
    // Scalar region on 0-d values.
    let k2 = g.mul(k, k).unwrap();
    let k3 = g.sin(k2).unwrap();
    let tot = g.sum_all(sol).unwrap();
    let out0 = g.add(tot, k3).unwrap();
    // Softmax and slice.
    let sm = g.softmax(p, 1).unwrap();
    let sl = g.slice_range(sm, 1..4, 0).unwrap();
    // A gather through the reference kernels.
    let idx = g.input("idx", [3], DType::I64);
    let ga = g.gather(sl, idx, 1).unwrap();
    // A scatter-add with constant indices (checked once, at plan build).
    let lit = rlx_core::Literal::I64(vec![0, 2, 2, 5, 1, 0].into());
    let ci = g.constant(lit, [2, 3], DType::I64).unwrap();
    let upd = g.reshape(t2, [2, 3, 5]).unwrap();
    let sc = g.scatter_add(x, ci, upd, 0).unwrap();
    g.set_outputs(vec![out0, ga, sol, sc]);

    // Every value is small, but softmax, solve and the i64 input keep the
    // graph from being scalarised whole: the default plan runs the rest
    // as scalar regions; the general plan (scalarisation off) as kernels,
    // fused loops and a 0-d scalar region.
    let general = compile_with(&g, &Options::general()).unwrap();
    let st = general.stats();
    assert!(
        st.fused_loops >= 2
            && st.scalar_regions >= 1
            && st.virtual_transposes == 1
            && st.checked_scatters == 1,
        "{st:?}"
    );
    let mixed = compile(&g).unwrap();
    let st = mixed.stats();
    assert!(st.small_regions >= 1, "{st:?}");
    for exe in [general, mixed] {
        warm_run_allocates_nothing(&exe);
    }
}

fn warm_run_allocates_nothing(exe: &rlx_runtime::Executable) {
    let xv = Tensor::from_vec((0..30).map(|i| (i as f64 * 0.37).sin()).collect(), [6, 5]);
    let wv = Tensor::from_vec((0..20).map(|i| (i as f64 * 0.11).cos()).collect(), [4, 5]);
    let mut av: Vec<f64> = (0..16).map(|i| (i as f64 * 0.7).sin() * 0.3).collect();
    for i in 0..4 {
        av[i * 5] += 2.0;
    }
    let avt = Tensor::from_vec(av, [4, 4]);
    let kv = Tensor::scalar(0.8f64);
    let iv = Tensor::from_vec(vec![3i64, 0, 2], [3]);
    warm_run_into_allocates_nothing_on(exe, &[&xv, &wv, &avt, &kv, &iv]);
}

/// Runs `exe` on `inputs` once, then asserts that three warm `run_into`s
/// allocate nothing and give the same values (and that a `run`, which
/// allocates fresh outputs, is counted).
fn warm_run_into_allocates_nothing_on(exe: &rlx_runtime::Executable, inputs: &[&Tensor]) {
    let mut outs: Vec<Tensor> = exe
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    // Cold run (states are created at compile time; this warms everything).
    exe.run_into(inputs, &mut outs).unwrap();
    let values = |outs: &[Tensor]| -> Vec<Vec<f64>> {
        outs.iter().map(|t| t.to_f64_vec().unwrap()).collect()
    };
    let first = values(&outs);
    let n = allocations(|| {
        for _ in 0..3 {
            exe.run_into(inputs, &mut outs).unwrap();
        }
    });
    assert_eq!(n, 0, "warm run_into allocated {n} times");
    assert_eq!(first, values(&outs));
    // The counter does count: a `run` (fresh outputs) allocates.
    let m = allocations(|| {
        let _ = exe.run(inputs).unwrap();
    });
    assert!(m > 0);
}

/// A warm `run_into` of an MLP layer's value and gradient whose products
/// run as epilogues allocates nothing. The products have at most 16 rows
/// (or are tiny) and right operands that fit in cache, so they take the
/// unpacked kernels (`matrixmultiply` allocates its packing buffer on
/// every call).
#[test]
fn warm_run_into_with_epilogues_allocates_nothing() {
    let (batch, d_in, hidden) = (8, 16, 40);
    let mut g = Graph::new();
    let x = g.input("x", [batch, d_in], DType::F32);
    let w = g.input("w", [d_in, hidden], DType::F32);
    let b = g.input("b", [hidden], DType::F32);
    let p = g.matmul(x, w).unwrap();
    let z = g.add(p, b).unwrap();
    let h = g.tanh(z).unwrap();
    let sq = g.mul(h, h).unwrap();
    let loss = g.sum_all(sq).unwrap();
    g.set_outputs(vec![loss]);
    let vg = rlx_core::autodiff::value_and_grad(&g, &[0, 1, 2]).unwrap();
    let options = Options::general();
    let exe = compile_with(&vg, &options).unwrap();
    assert!(exe.stats().epilogues >= 1, "{:?}", exe.stats());
    let vals = |n: usize| {
        (0..n)
            .map(|i| (i as f32 * 0.37).sin())
            .collect::<Vec<f32>>()
    };
    let ins = [
        Tensor::from_vec(vals(batch * d_in), [batch, d_in]),
        Tensor::from_vec(vals(d_in * hidden), [d_in, hidden]),
        Tensor::from_vec(vals(hidden), [hidden]),
    ];
    let ins: Vec<&Tensor> = ins.iter().collect();
    warm_run_into_allocates_nothing_on(&exe, &ins);
}

/// A warm `run_into` of the broadcast-form Lennard-Jones value and
/// gradient allocates nothing: its loops fold four reductions, two of them
/// applying a negation or a square (`fold::Pre`).
#[test]
fn warm_run_into_of_the_lj_broadcast_gradient_allocates_nothing() {
    let n = 64;
    let vg = rlx_core::autodiff::value_and_grad(&lj::lj(n), &[0, 1]).unwrap();
    let exe = compile(&vg).unwrap();
    let st = exe.stats();
    assert_eq!((st.fused_reductions, st.absorbed), (4, 2), "{st:?}");
    let jitter: Vec<f64> = (0..3 * n).map(|k| 0.1 * (k as f64 * 0.7).sin()).collect();
    let (p, eye) = lj::lj_inputs(n, &jitter);
    warm_run_into_allocates_nothing_on(&exe, &[&p, &eye]);
}
