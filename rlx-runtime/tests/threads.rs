//! Fused loops over large tensors split across threads: every thread count
//! gives the same bits as one thread (chains with transcendental ops,
//! broadcasting, compare/select, casts, several outputs, sizes that are not
//! a multiple of the block), the count follows `set_num_threads` and
//! `RLX_NUM_THREADS`, and a warm `run_into` with threads on allocates nothing.

use std::sync::Mutex;

use rlx_runtime::{compile, num_threads, set_num_threads, CmpOp, DType, Graph, Tensor};

mod counting;
use counting::allocations;

/// The thread count is global: tests that change it take turns.
static SETTING: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SETTING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A graph over `[rows, cols]` inputs of `dtype`: a transcendental chain
/// with a broadcast row and column, a compare/select, a cast to the other
/// float type, and a streaming single op; four outputs.
fn chain_graph(rows: usize, cols: usize, dtype: DType) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [rows, cols], dtype);
    let y = g.input("y", [rows, cols], dtype);
    let row = g.input("row", [cols], dtype);
    let col = g.input("col", [rows, 1], dtype);
    let half = g.scalar(0.5, dtype);
    let a = g.mul(x, half).unwrap();
    let b = g.add(a, row).unwrap();
    let c = g.tanh(b).unwrap();
    let d = g.exp(c).unwrap();
    let e = g.mul(d, col).unwrap();
    let f = g.sin(e).unwrap();
    let h = g.mul(y, y).unwrap();
    let s = g.sqrt(h).unwrap();
    let t = g.add(f, s).unwrap();
    let cond = g.compare(CmpOp::Gt, x, y).unwrap();
    let sel = g.select(cond, t, e).unwrap();
    let other = if dtype == DType::F32 {
        DType::F64
    } else {
        DType::F32
    };
    let cast = g.cast(sel, other).unwrap();
    let ln = g.ln(cast).unwrap();
    let stream = g.add(x, y).unwrap();
    g.set_outputs(vec![sel, ln, stream, t]);
    g
}

fn input(n: usize, seed: f64, dims: Vec<usize>, dtype: DType) -> Tensor {
    let v: Vec<f64> = (0..n)
        .map(|i| ((i as f64 + seed) * 0.618).sin() * 3.0)
        .collect();
    Tensor::from_vec(v, dims).cast(dtype)
}

/// Every output's bits, as `u64`s (f32 widened by its bit pattern).
fn bits(outs: &[Tensor]) -> Vec<Vec<u64>> {
    outs.iter()
        .map(|t| match t.dtype() {
            DType::F32 => t
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits() as u64)
                .collect(),
            _ => t
                .to_vec::<f64>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect(),
        })
        .collect()
}

#[test]
fn every_thread_count_gives_the_same_bits() {
    let _g = lock();
    // 300 x 997 is not a multiple of the 1024-element block; 64 x 1024 is
    // just above the two-part threshold.
    for (rows, cols) in [(300, 997), (64, 1024), (3, 70_001)] {
        for dtype in [DType::F32, DType::F64] {
            let g = chain_graph(rows, cols, dtype);
            let exe = compile(&g).unwrap();
            let n = rows * cols;
            let x = input(n, 0.0, vec![rows, cols], dtype);
            let y = input(n, 7.5, vec![rows, cols], dtype);
            let row = input(cols, 1.25, vec![cols], dtype);
            let col = input(rows, 3.5, vec![rows, 1], dtype);
            let ins = [&x, &y, &row, &col];
            set_num_threads(1);
            let one = bits(&exe.run(&ins).unwrap());
            assert!(one[0].len() == n && one[1].len() == n);
            for threads in 2..=7 {
                set_num_threads(threads);
                let many = bits(&exe.run(&ins).unwrap());
                for (k, (a, b)) in one.iter().zip(&many).enumerate() {
                    if let Some(i) = a.iter().zip(b).position(|(p, q)| p != q) {
                        panic!(
                            "{rows}x{cols} {dtype:?}, {threads} threads: output {k} differs \
                             at element {i}: {:#x} vs {:#x}",
                            a[i], b[i]
                        );
                    }
                }
            }
        }
    }
    set_num_threads(0);
}

/// Fusion through movement ops over `[n, 3]`: column slices read in
/// place, results written together into a transposed concat (from every
/// part of a split loop), and a small loop with a folded sum of squares.
fn movement_graph(n: usize) -> Graph {
    let mut g = Graph::new();
    let u = g.input("u", [n, 3], DType::F64);
    let w = g.input("w", [100, 7], DType::F64);
    let v: Vec<_> = (0..3)
        .map(|k| g.slice_range(u, k..k + 1, 1).unwrap())
        .collect();
    let d = g.sub(v[0], v[1]).unwrap();
    let e = g.exp(d).unwrap();
    let t = g.tanh(v[2]).unwrap();
    let p = g.mul(e, t).unwrap();
    let cat = g.concat(&[e, p, t], 1).unwrap();
    let tr = g.transpose(cat, &[1, 0]).unwrap();
    let w2 = g.square(w).unwrap();
    let ss = g.sum(w2, &[1]).unwrap();
    g.set_outputs(vec![tr, ss]);
    g
}

#[test]
fn movement_fusion_gives_the_same_bits_for_every_thread_count() {
    let _g = lock();
    for n in [20_000, 70_001] {
        let g = movement_graph(n);
        let exe = compile(&g).unwrap();
        let s = exe.stats();
        // The three pieces of the transposed concat are written together.
        assert!(
            s.views == 3 && s.placed == 4 && s.fused_reductions == 1 && s.interleaved == 3,
            "{s:?}"
        );
        let u = input(3 * n, 0.5, vec![n, 3], DType::F64);
        let w = input(700, 2.0, vec![100, 7], DType::F64);
        set_num_threads(1);
        let one = bits(&exe.run(&[&u, &w]).unwrap());
        for threads in 2..=5 {
            set_num_threads(threads);
            let many = bits(&exe.run(&[&u, &w]).unwrap());
            assert!(one == many, "n = {n}, {threads} threads: the bits differ");
        }
        let mut outs: Vec<Tensor> = exe
            .output_types()
            .iter()
            .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
            .collect();
        set_num_threads(4);
        exe.run_into(&[&u, &w], &mut outs).unwrap();
        let count = allocations(|| exe.run_into(&[&u, &w], &mut outs).unwrap());
        assert_eq!(count, 0, "warm run_into allocated {count} times");
        assert!(bits(&outs) == one);
    }
    set_num_threads(0);
}

#[test]
fn short_row_broadcasts_give_the_same_bits_for_every_thread_count() {
    // `[n, m, 3]` loops reading `[n, m, 1]` (one element per row,
    // repeated), `[n, 1, 3]` (one row, repeated) and `[1, m, 3]`, split
    // across threads at block boundaries that cut rows of 3.
    let _g = lock();
    let (n, m) = (150, 101);
    for dtype in [DType::F64, DType::F32] {
        let mut g = Graph::new();
        let a = g.input("a", [n, m, 1], dtype);
        let b = g.input("b", [n, 1, 3], dtype);
        let c = g.input("c", [1, m, 3], dtype);
        let d = g.sub(b, c).unwrap();
        let e = g.mul(d, a).unwrap();
        let f = g.sin(e).unwrap();
        g.set_outputs(vec![f]);
        let exe = compile(&g).unwrap();
        let av = input(n * m, 0.5, vec![n, m, 1], dtype);
        let bv = input(3 * n, 1.5, vec![n, 1, 3], dtype);
        let cv = input(3 * m, 2.5, vec![1, m, 3], dtype);
        set_num_threads(1);
        let one = bits(&exe.run(&[&av, &bv, &cv]).unwrap());
        for threads in 2..=5 {
            set_num_threads(threads);
            let many = bits(&exe.run(&[&av, &bv, &cv]).unwrap());
            assert!(one == many, "{dtype}, {threads} threads: the bits differ");
        }
    }
    set_num_threads(0);
}

#[test]
fn the_count_follows_the_api_and_the_environment() {
    let _g = lock();
    set_num_threads(3);
    assert_eq!(num_threads(), 3);
    set_num_threads(1);
    assert_eq!(num_threads(), 1);
    // 0 restores the default, which reads RLX_NUM_THREADS.
    std::env::set_var("RLX_NUM_THREADS", "5");
    set_num_threads(0);
    assert_eq!(num_threads(), 5);
    // A value that is not a positive number falls back to the core count.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for bad in ["0", "many", ""] {
        std::env::set_var("RLX_NUM_THREADS", bad);
        set_num_threads(0);
        assert_eq!(num_threads(), cores, "RLX_NUM_THREADS={bad:?}");
    }
    std::env::remove_var("RLX_NUM_THREADS");
    set_num_threads(0);
    assert_eq!(num_threads(), cores);
}

#[test]
fn warm_run_into_with_threads_allocates_nothing() {
    let _g = lock();
    set_num_threads(4);
    let (rows, cols) = (200, 1000);
    let g = chain_graph(rows, cols, DType::F32);
    let exe = compile(&g).unwrap();
    let n = rows * cols;
    let x = input(n, 0.0, vec![rows, cols], DType::F32);
    let y = input(n, 2.0, vec![rows, cols], DType::F32);
    let row = input(cols, 1.0, vec![cols], DType::F32);
    let col = input(rows, 4.0, vec![rows, 1], DType::F32);
    let ins = [&x, &y, &row, &col];
    let mut outs: Vec<Tensor> = exe
        .output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect();
    // Cold: spawns the workers and makes the per-thread registers.
    exe.run_into(&ins, &mut outs).unwrap();
    let first = bits(&outs);
    let count = allocations(|| {
        for _ in 0..3 {
            exe.run_into(&ins, &mut outs).unwrap();
        }
    });
    assert_eq!(count, 0, "warm threaded run_into allocated {count} times");
    assert_eq!(first, bits(&outs));
    set_num_threads(0);
}
