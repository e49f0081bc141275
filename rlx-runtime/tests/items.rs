//! Item plans (`compile_items`): a graph batched over axis 0 whose items
//! are independent runs one item's scalarised program once per item. Its
//! results are those of the general plan of the batched graph, bit for
//! bit, on 1 to 4 threads; a warm `run_into` allocates nothing; the plan's
//! shape shows in `stats()`; graphs without such a plan are declined.

use rlx_core::vmap::unbatch;
use rlx_runtime::compile::{compile_items, compile_with, Options};
use rlx_runtime::{set_num_threads, CmpOp, DType, Graph, Tensor};

mod common;
mod counting;
use common::assert_same_values;
use counting::allocations;

/// `x: [n, 2, 3]` batched, `w: [3, 2]` and `k` shared: element-wise math,
/// a select, a transpose, reshapes, a slice, a concat, a product by the
/// shared matrix and a reduction, with two outputs.
fn rows_graph(n: usize, dtype: DType) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n, 2, 3], dtype);
    let w = g.input("w", [3, 2], dtype);
    let k = g.input("k", (), dtype);
    let s = g.sin(x).unwrap();
    let e = g.exp(s).unwrap();
    let a = g.mul(e, k).unwrap();
    let t = g.transpose(a, &[0, 2, 1]).unwrap(); // [n, 3, 2]
    let r = g.reshape(t, [n, 6]).unwrap();
    let c = g.slice_range(r, 1..4, 1).unwrap();
    let sq = g.mul(c, c).unwrap();
    let c = g.concat(&[c, sq], 1).unwrap(); // [n, 6]
    let c = g.reshape(c, [n, 2, 3]).unwrap();
    let p = g.matmul(c, w).unwrap(); // [n, 2, 2]
    let half = g.scalar(0.5, dtype);
    let big = g.compare(CmpOp::Gt, p, half).unwrap();
    let sq = g.sqrt(p).unwrap();
    let ones = g.full([2, 2], 1.0, dtype);
    let ones = g.broadcast(ones, [n, 2, 2]).unwrap();
    let sel = g.select(big, sq, ones).unwrap();
    let y = g.sum(sel, &[2]).unwrap(); // [n, 2]
    g.set_outputs(vec![y, sel]);
    g
}

fn inputs(n: usize, dtype: DType) -> Vec<Tensor> {
    let xs: Vec<f64> = (0..n * 6)
        .map(|i| ((i * 37) % 101) as f64 / 50.0 - 1.0)
        .collect();
    let ws: Vec<f64> = (0..6).map(|i| 0.3 + 0.2 * i as f64).collect();
    let cast = |t: Tensor| t.cast(dtype);
    vec![
        cast(Tensor::from_slice(&xs, [n, 2, 3])),
        cast(Tensor::from_slice(&ws, [3, 2])),
        cast(Tensor::from_slice(&[1.25], ())),
    ]
}

/// The item plan of [`rows_graph`] over `n` rows.
fn item_plan(n: usize) -> rlx_runtime::Executable {
    let g = rows_graph(n, DType::F64);
    let item = unbatch(&g, n).unwrap();
    compile_items(&g, &item, &Options::default())
        .unwrap()
        .expect("an item plan")
}

fn general(g: &Graph) -> rlx_runtime::Executable {
    compile_with(g, &Options::general()).unwrap()
}

fn assert_same_bits(got: &[Tensor], want: &[Tensor], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: outputs");
    for (k, (a, b)) in got.iter().zip(want).enumerate() {
        assert_same_values(a, b, &format!("{what}, output {k}"));
    }
}

#[test]
fn item_plans_equal_the_general_plan_on_every_thread_count() {
    // (Not n = 3: `w: [3, 2]` would then count as batched.)
    for n in [1, 4, 2000] {
        let g = rows_graph(n, DType::F64);
        let item = unbatch(&g, n).unwrap();
        let exe = compile_items(&g, &item, &Options::default())
            .unwrap()
            .expect("an item plan");
        let st = exe.stats();
        assert_eq!(st.item_runs, n, "{st:?}");
        assert_eq!((st.steps, st.buffers), (1, 0), "one scalar program: {st:?}");
        assert!(st.scalarized_nodes > 10, "{st:?}");
        let ins = inputs(n, DType::F64);
        let ins: Vec<&Tensor> = ins.iter().collect();
        let want = general(&g).run(&ins).unwrap();
        for threads in 1..=4 {
            set_num_threads(threads);
            let got = exe.run(&ins).unwrap();
            assert_same_bits(&got, &want, &format!("n = {n}, {threads} threads"));
        }
        set_num_threads(0);
    }
}

#[test]
fn item_plans_without_native_code_equal_the_general_plan() {
    let n = 40;
    let g = rows_graph(n, DType::F64);
    let item = unbatch(&g, n).unwrap();
    let options = Options {
        jit: false,
        ..Options::default()
    };
    let exe = compile_items(&g, &item, &options).unwrap().unwrap();
    assert_eq!(exe.stats().native_regions, 0);
    let ins = inputs(n, DType::F64);
    let ins: Vec<&Tensor> = ins.iter().collect();
    let want = general(&g).run(&ins).unwrap();
    assert_same_bits(&exe.run(&ins).unwrap(), &want, "interpreted");
}

#[test]
fn a_warm_item_run_into_allocates_nothing() {
    let n = 50;
    let exe = item_plan(n);
    let ins = inputs(n, DType::F64);
    let ins: Vec<&Tensor> = ins.iter().collect();
    let mut outs: Vec<Tensor> = (exe.output_types().iter())
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    exe.run_into(&ins, &mut outs).unwrap();
    let first: Vec<Vec<f64>> = outs.iter().map(|t| t.to_vec().unwrap()).collect();
    let count = allocations(|| {
        for _ in 0..3 {
            exe.run_into(&ins, &mut outs).unwrap();
        }
    });
    assert_eq!(count, 0, "a warm run_into allocated {count} times");
    let again: Vec<Vec<f64>> = outs.iter().map(|t| t.to_vec().unwrap()).collect();
    assert_eq!(first, again);
    // Fresh outputs are counted.
    assert!(allocations(|| drop(exe.run(&ins).unwrap())) > 0);
}

#[test]
fn graphs_without_an_item_plan_are_declined() {
    let n = 8;
    // f32 values: the item plan takes F64 only.
    let g = rows_graph(n, DType::F32);
    let item = unbatch(&g, n).unwrap();
    assert!(compile_items(&g, &item, &Options::default())
        .unwrap()
        .is_none());
    // With scalarisation off.
    let g = rows_graph(n, DType::F64);
    let item = unbatch(&g, n).unwrap();
    assert!(compile_items(&g, &item, &Options::general())
        .unwrap()
        .is_none());
    // An item too large to scalarise: a 4096-element row.
    let mut big = Graph::new();
    let x = big.input("x", [n, 4096], DType::F64);
    let y = big.exp(x).unwrap();
    big.set_outputs(vec![y]);
    let item = unbatch(&big, n).unwrap();
    assert!(compile_items(&big, &item, &Options::default())
        .unwrap()
        .is_none());
    // An item graph that is not the given graph's.
    let other = rows_graph(n + 1, DType::F64);
    let item = unbatch(&other, n + 1).unwrap();
    assert!(compile_items(&g, &item, &Options::default())
        .unwrap()
        .is_none());
}

#[test]
fn run_errors_of_an_item_plan_are_those_of_any_plan() {
    let n = 5;
    let exe = item_plan(n);
    let mut ins = inputs(n + 1, DType::F64);
    let wrong: Vec<&Tensor> = ins.iter().collect();
    let e = exe.run(&wrong).unwrap_err().to_string();
    assert!(e.contains("[5, 2, 3]"), "{e}");
    ins.pop();
    let short: Vec<&Tensor> = ins.iter().collect();
    assert!(exe.run(&short).is_err());
}
