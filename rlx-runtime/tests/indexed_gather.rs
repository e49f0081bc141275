//! Gathers with constant indices read by fused loops through the indices
//! (no step of their own): equal to the interpreter on small and parallel
//! sizes, counted in the plan's stats, and an index out of range still the
//! kernel's error at run time.

use rlx_core::{DType, Error, Graph, Literal};
use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{interpret, Executable, Tensor};

/// `g` planned as a general plan (small graphs would otherwise be
/// scalarised, and a scalar program has no fused loops to read indices).
fn general(g: &Graph) -> Executable {
    let options = Options::general();
    compile_with(g, &options).unwrap()
}

/// `y = exp(gather(x, idx)) · c + gather(x, idx)`, `x: [n]`, `idx: [k]`.
fn graph(n: usize, idx: Vec<i64>) -> Graph {
    let k = idx.len();
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let i = g
        .constant(Literal::I64(idx.into()), [k], DType::I64)
        .unwrap();
    let gx = g.gather(x, i, 0).unwrap();
    let e = g.exp(gx).unwrap();
    let c: Vec<f64> = (0..k).map(|j| 1.0 + j as f64 * 1e-3).collect();
    let c = g.constant(Literal::F64(c.into()), [k], DType::F64).unwrap();
    let p = g.mul(e, c).unwrap();
    let y = g.add(p, gx).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn indexed_gathers_equal_the_interpreter_at_every_size() {
    for (n, k) in [(50, 170), (1000, 5000), (10_000, 200_000)] {
        let idx: Vec<i64> = (0..k).map(|j| ((j * 7919 + 3) % n) as i64).collect();
        let g = graph(n, idx);
        let x: Vec<f64> = (0..n).map(|j| (j as f64 * 0.37).sin()).collect();
        let x = Tensor::from_slice(&x, [n]);
        let exe = general(&g);
        assert_eq!(exe.stats().indexed_gathers, 1, "n = {n}, k = {k}");
        let got = exe.run(&[&x]).unwrap()[0].to_vec::<f64>().unwrap();
        let want = interpret(&g, &[&x]).unwrap()[0].to_vec::<f64>().unwrap();
        assert_eq!(got, want, "n = {n}, k = {k}");
    }
}

#[test]
fn a_gather_read_by_another_op_or_returned_keeps_its_step() {
    // Returned as an output: computed by the kernel.
    let mut g = Graph::new();
    let x = g.input("x", [4], DType::F64);
    let i = g
        .constant(Literal::I64(vec![3, 0, 1].into()), [3], DType::I64)
        .unwrap();
    let gx = g.gather(x, i, 0).unwrap();
    let s = g.sin(gx).unwrap();
    g.set_outputs(vec![s, gx]);
    let exe = general(&g);
    assert_eq!(exe.stats().indexed_gathers, 0);
    let x = Tensor::from_slice(&[0.5f64, 1.0, 1.5, 2.0], [4]);
    let out = exe.run(&[&x]).unwrap();
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![2.0, 0.5, 1.0]);
    assert_eq!(
        out[0].to_vec::<f64>().unwrap(),
        vec![2.0f64.sin(), 0.5f64.sin(), 1.0f64.sin()]
    );
}

#[test]
fn an_index_out_of_range_is_still_reported_when_the_graph_runs() {
    let g = graph(4, vec![0, 4, 1]);
    let exe = general(&g);
    assert_eq!(exe.stats().indexed_gathers, 0);
    let x = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0], [4]);
    let err = exe.run(&[&x]).unwrap_err();
    assert!(
        matches!(
            err.root(),
            Error::IndexOutOfRange {
                index: 4,
                size: 4,
                ..
            }
        ),
        "{err}"
    );
}
