//! Fusion through movement ops and reductions (issue #16): slices and
//! transposes read in place, values written in place into the concat or
//! transpose using them, reductions folded into the loop computing their
//! operand. Every fused plan is compared bit for bit with the same graph
//! planned without this fusion (`Options::fuse_movement` off: the
//! operation order is the same, so the bits must be), and with the naive
//! evaluator and the interpreter through `check`. The plans of a few
//! derivative graphs are pinned by their counts.

use proptest::prelude::*;
use rlx_core::autodiff::{batch_jacobian, hvp, value_and_grad};

use super::{check, general, tol};
use crate::common::{assert_same_values, tensor, values};
use crate::device::device;
use crate::lj::{lj, lj_inputs};
use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{DType, Executable, Graph, NodeId, ReduceOp, Tensor, UnaryOp};

/// `g` planned without fusion through movement ops and reductions.
fn unfused(g: &Graph) -> Executable {
    let options = Options {
        fuse_movement: false,
        ..Options::general()
    };
    compile_with(g, &options).unwrap()
}

/// Checks `g` against the references, and its fused plan against the
/// unfused one bit for bit; returns the fused plan.
fn check_fused(g: &Graph, inputs: &[&Tensor], rtol: f64, what: &str) -> Executable {
    let exe = check(g, inputs, rtol, what);
    let fused = exe.run(inputs).unwrap();
    let plain = unfused(g).run(inputs).unwrap();
    for (j, (a, b)) in fused.iter().zip(&plain).enumerate() {
        assert_same_values(a, b, &format!("{what}: output {j} fused vs unfused"));
    }
    exe
}

/// Σ_i 100 (x_{i+1} − x_i²)² + (1 − x_i)² over `x: [n]`.
fn rosenbrock(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let a = g.slice_range(x, 0..n - 1, 0).unwrap();
    let b = g.slice_range(x, 1..n, 0).unwrap();
    let a2 = g.square(a).unwrap();
    let d = g.sub(b, a2).unwrap();
    let d2 = g.square(d).unwrap();
    let hundred = g.scalar(100.0, DType::F64);
    let t = g.mul(d2, hundred).unwrap();
    let one = g.scalar(1.0, DType::F64);
    let c = g.sub(one, a).unwrap();
    let c2 = g.square(c).unwrap();
    let s = g.add(t, c2).unwrap();
    let f = g.sum_all(s).unwrap();
    g.set_outputs(vec![f]);
    g
}

#[test]
fn rosenbrock_hvp_reads_slices_in_place_and_folds_its_sum() {
    let n = 1000;
    let h = hvp(&rosenbrock(n), &[0]).unwrap();
    let x = tensor(&values(n, 1, -1.2, 1.2), &[n], DType::F64);
    let v = tensor(&values(n, 2, -1.0, 1.0), &[n], DType::F64);
    let exe = check_fused(&h, &[&x, &v], 1e-9, "rosenbrock hvp");
    let s = exe.stats();
    // The four slices (of x and of v) are never copied; the value's sum is
    // folded into the loop over the 999 pairs, which also writes both
    // pads (the slices' cotangents, concats with a zero) in place. What
    // remains: that loop, the zero element of each pad, and the loop
    // adding the pads.
    assert_eq!(s.views, 4, "{s:?}");
    assert_eq!(s.fused_reductions, 1, "{s:?}");
    assert_eq!(s.placed, 2, "{s:?}");
    assert_eq!(s.fused_loops, 2, "{s:?}");
    assert_eq!(s.steps, 4, "{s:?}");
    let before = unfused(&h).stats();
    assert_eq!(before.steps, 10, "{before:?}");
    assert!(s.buffers < before.buffers, "{s:?} vs {before:?}");
}

#[test]
fn device_batch_jacobian_is_loops_only() {
    let n = 3000;
    let j = batch_jacobian(&device(n), &[0]).unwrap();
    let u = tensor(&values(3 * n, 3, -0.2, 0.2), &[n, 3], DType::F64);
    let exe = check_fused(&j, &[&u], 1e-9, "device batch_jacobian");
    let s = exe.stats();
    // The currents and the Jacobian columns (one JVP per basis vector,
    // each reshaped to `[n, 3, 1]` and concatenated on the last axis) are
    // written straight into the outputs by one loop, which reads column
    // slices in place. One entry, ∂i0/∂v2 = v0, is a column of the input
    // itself: the concat's copy reads that column slice in place too (a
    // view, one step), and nothing has a buffer of its own.
    assert_eq!(s.views, 3, "{s:?}");
    assert_eq!((s.steps, s.fused_loops, s.buffers), (2, 1, 0), "{s:?}");
    assert_eq!(s.placed, 17, "{s:?}");
    // The loop's pieces of the Jacobian (8: the ninth is the copied
    // column) and of the value (3) are each written item by item, every
    // item's entries together.
    assert_eq!(s.interleaved, 11, "{s:?}");
    let before = unfused(&j).stats();
    assert!(
        s.steps + 5 <= before.steps && s.buffers < before.buffers,
        "{s:?} vs {before:?}"
    );
}

#[test]
fn concat_of_elementwise_results_is_one_loop_without_buffers() {
    for dtype in [DType::F64, DType::F32, DType::F16] {
        let mut g = Graph::new();
        let x = g.input("x", [700, 3], dtype);
        let a = g.exp(x).unwrap();
        let b = g.sin(x).unwrap();
        let c = g.mul(a, b).unwrap();
        // Pieces on the middle axis of a transposed result.
        let cat = g.concat(&[a, c, b], 1).unwrap();
        let t = g.transpose(cat, &[1, 0]).unwrap();
        g.set_outputs(vec![t]);
        let xv = tensor(&values(2100, 5, -1.0, 1.0), &[700, 3], dtype);
        let exe = check_fused(&g, &[&xv], tol(dtype), &format!("concat {dtype}"));
        let s = exe.stats();
        assert_eq!((s.steps, s.fused_loops), (1, 1), "{s:?}");
        // `cat` and its three pieces live in the output.
        assert_eq!((s.placed, s.buffers), (4, 0), "{s:?}");
    }
}

#[test]
fn layers_of_a_stacked_value_are_read_in_place_by_loops_and_concats() {
    // `h: [3, 4, 5]` cut into layers `h.slice_range(l..l + 1, 0).reshape([4, 5])`
    // (a stacked LSTM carry): each layer is one contiguous run of `h`, so
    // the slice and its reshape are views, read in place by the loop
    // `tanh(h_l)·x` and by the copy of `concat([x, h_l], 1)`. A slice on
    // the middle axis reshaped (`[3, 2, 5] → [6, 5]`) is not a contiguous
    // run: it is copied as before, and its reshape stays an alias of the copy.
    for dtype in [DType::F64, DType::F32] {
        let mut g = Graph::new();
        let h = g.input("h", [3, 4, 5], dtype);
        let x = g.input("x", [4, 5], dtype);
        let mut outs = Vec::new();
        for l in 0..3 {
            let s = g.slice_range(h, l..l + 1, 0).unwrap();
            let hl = g.reshape(s, [4, 5]).unwrap();
            let t = g.tanh(hl).unwrap();
            outs.push(g.mul(t, x).unwrap());
            outs.push(g.concat(&[x, hl], 1).unwrap());
        }
        let mid = g.slice_range(h, 1..3, 1).unwrap();
        let flat = g.reshape(mid, [6, 5]).unwrap();
        outs.push(g.sin(flat).unwrap());
        // Column pieces of `x` given a leading unit axis and stacked (a
        // layer's piece of a stacked cotangent): strided views, read in
        // place by the concat's copy.
        let pieces: Vec<NodeId> = [0, 2]
            .iter()
            .map(|&at| {
                let c = g.slice_range(x, at..at + 3, 1).unwrap();
                g.reshape(c, [1, 4, 3]).unwrap()
            })
            .collect();
        outs.push(g.concat(&pieces, 0).unwrap());
        g.set_outputs(outs);
        let hv = tensor(&values(60, 6, -1.5, 1.5), &[3, 4, 5], dtype);
        let xv = tensor(&values(20, 7, -1.0, 1.0), &[4, 5], dtype);
        let exe = check_fused(&g, &[&hv, &xv], tol(dtype), &format!("layers {dtype}"));
        let s = exe.stats();
        // Three layer slices, two column slices and their reshapes.
        assert_eq!(s.views, 10, "{s:?}");
        // No step copies a layer or a column: the middle slice's copy is
        // the only step that is neither a loop nor a concat's copy (4).
        let before = unfused(&g).stats();
        assert_eq!(before.views, 0, "{before:?}");
        assert_eq!(s.steps, s.fused_loops + 4 + 1, "{s:?}");
        assert!(s.steps + 5 <= before.steps, "{s:?} vs {before:?}");
    }
}

#[test]
fn lj_gradient_folds_every_reduction() {
    let n = 40;
    let vg = value_and_grad(&lj(n), &[0]).unwrap();
    let (pt, et) = lj_inputs(n, &values(3 * n, 4, -0.1, 0.1));
    let exe = check_fused(&vg, &[&pt, &et], 1e-9, "lj value_and_grad");
    let s = exe.stats();
    // r² (a sum over the last axis), the energy, and the two halves of the
    // gradient (sums over either particle axis) are folded into the loops
    // computing their operands.
    assert_eq!(s.fused_reductions, 4, "{s:?}");
    assert_eq!(s.steps, s.fused_loops, "{s:?}");
    assert!(s.steps <= 4, "{s:?}");
}

#[test]
fn lj_broadcast_value_and_gradient_plan() {
    // The bench's plan: `value_and_grad_` with respect to both inputs at
    // n = 64. Four loops: d and r² (the square applied by the sum); the
    // energy and dE/dr² (the `eye` gradient); the two halves of the p
    // gradient (sums over either particle axis, the negation of one
    // applied by its sum); their sum. Three buffers.
    let n = 64;
    let vg = value_and_grad(&lj(n), &[0, 1]).unwrap();
    let (pt, et) = lj_inputs(n, &values(3 * n, 5, -0.1, 0.1));
    let exe = check_fused(&vg, &[&pt, &et], 1e-9, "lj value_and_grad wrt p and eye");
    let s = exe.stats();
    assert_eq!((s.fused_loops, s.steps, s.buffers), (4, 4, 3), "{s:?}");
    assert_eq!((s.fused_reductions, s.absorbed), (4, 2), "{s:?}");
}

#[test]
fn negations_and_squares_are_applied_by_the_reductions_reading_them() {
    // `reduce(op(sin x))` over every axis and all of them: in f64 and f32
    // the sink applies `op` (no pass of its own), with the bits of the
    // unfused plan. Not absorbed: half precision (the op's result is
    // rounded first), and an op whose result is also read by another
    // node (here an output).
    let dims = [40, 30, 3];
    let axes: [&[usize]; 4] = [&[0], &[1], &[2], &[0, 1, 2]];
    for dtype in [DType::F64, DType::F32, DType::F16] {
        for op in [UnaryOp::Neg, UnaryOp::Square] {
            for red in [ReduceOp::Sum, ReduceOp::Max] {
                for ax in axes {
                    for shared in [false, true] {
                        let mut g = Graph::new();
                        let x = g.input("x", dims, dtype);
                        let a = g.sin(x).unwrap();
                        let u = g.unary(op, a).unwrap();
                        let r = g.reduce(red, u, ax).unwrap();
                        g.set_outputs(if shared { vec![r, u] } else { vec![r] });
                        let xv = tensor(&values(3600, 3, -2.0, 2.0), &dims, dtype);
                        let what =
                            format!("{red:?} over {ax:?} of {op:?} {dtype}, shared {shared}");
                        let exe = check_fused(&g, &[&xv], 1e-3, &what);
                        let s = exe.stats();
                        let native = matches!(dtype, DType::F64 | DType::F32);
                        let want = usize::from(native && !shared);
                        assert_eq!((s.fused_reductions, s.absorbed), (1, want), "{what}: {s:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn folded_reductions_give_the_reduction_steps_bits_across_blocks() {
    // Rows that end mid-block, rows longer than a block, rows shorter than
    // the eight partial results, kept inner axes; short kept rows summed
    // over the axis before them (held in registers, rows cut by blocks);
    // kept axes merged, and a kept inner axis of length 1 (not merged
    // away); every reduction.
    // Sweeps of kept short rows: many per block, cut by blocks, and
    // sweeps that share their accumulators (the axes before them reduced
    // too).
    let shapes: [(&[usize], &[usize]); 21] = [
        (&[20, 3, 10, 2], &[0, 2]),
        (&[33, 5, 3], &[1]),
        (&[6, 40, 4], &[1]),
        (&[3, 20, 70, 2], &[0, 2]),
        (&[70, 30, 3], &[1]),
        (&[40, 30, 3], &[2]),
        (&[40, 30, 2], &[1, 2]),
        (&[7, 50, 1, 4], &[0, 3]),
        (&[7, 300, 1], &[2]),
        (&[9, 200, 2], &[1]),
        (&[5, 300, 4], &[0, 1]),
        (&[3, 700, 1], &[1]),
        (&[40, 30, 3], &[0]),
        (&[700, 5, 1], &[0]),
        (&[2500], &[0]),
        (&[3, 1500], &[1]),
        (&[3, 1500], &[0]),
        (&[700, 3], &[1]),
        (&[40, 30, 7], &[0, 2]),
        (&[5, 13, 16], &[1]),
        (&[9, 8, 4], &[0, 1, 2]),
    ];
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
    ];
    for dtype in [DType::F64, DType::F32] {
        for (dims, axes) in shapes {
            for op in ops {
                let mut g = Graph::new();
                let x = g.input("x", dims, dtype);
                let a = g.sin(x).unwrap();
                let one = g.scalar(1.0, dtype);
                let b = g.add(a, one).unwrap();
                let r = g.reduce(op, b, axes).unwrap();
                let c = g.mul(b, b).unwrap();
                g.set_outputs(vec![r, c]);
                let n: usize = dims.iter().product();
                let xv = tensor(&values(n, 7, -2.0, 2.0), dims, dtype);
                let what = format!("{op:?} over {axes:?} of {dims:?} {dtype}");
                let exe = check_fused(&g, &[&xv], 1e-4, &what);
                assert_eq!(exe.stats().fused_reductions, 1, "{what}");
                assert_eq!(exe.stats().steps, 1, "{what}");
            }
        }
    }
}

#[test]
fn short_rows_broadcast_along_the_axis_before_them_across_blocks() {
    // `x: [n, 1, k]` read by a loop over `[n, m, k]` repeats each row of
    // `k ≤ 4` elements `m` times; `y: [n, m, 1]` repeats each element `k`
    // times. The 1024-element blocks cut rows of 3.
    for dtype in [DType::F64, DType::F32] {
        for k in 1..=5 {
            let (n, m) = (37, 29);
            let mut g = Graph::new();
            let x = g.input("x", [n, 1, k], dtype);
            let y = g.input("y", [n, m, 1], dtype);
            let z = g.input("z", [1, m, k], dtype);
            let a = g.mul(x, y).unwrap();
            let b = g.sub(a, z).unwrap();
            let c = g.sin(b).unwrap();
            g.set_outputs(vec![c]);
            let xv = tensor(&values(n * k, 1, -2.0, 2.0), &[n, 1, k], dtype);
            let yv = tensor(&values(n * m, 2, -2.0, 2.0), &[n, m, 1], dtype);
            let zv = tensor(&values(m * k, 3, -2.0, 2.0), &[1, m, k], dtype);
            let what = format!("rows of {k} {dtype}");
            let exe = check_fused(&g, &[&xv, &yv, &zv], 1e-5, &what);
            assert_eq!(exe.stats().steps, 1, "{what}");
        }
    }
}

#[test]
fn a_reader_of_a_folded_reduction_never_joins_its_loop() {
    // `x - mean(x)` has the loop's shape, but the mean exists only once
    // the loop has run.
    let mut g = Graph::new();
    let x = g.input("x", [3000], DType::F64);
    let e = g.exp(x).unwrap();
    let m = g.reduce(ReduceOp::Mean, e, &[0]).unwrap();
    let c = g.sub(e, m).unwrap();
    let c2 = g.square(c).unwrap();
    let var = g.reduce(ReduceOp::Mean, c2, &[0]).unwrap();
    g.set_outputs(vec![var, c]);
    let xv = tensor(&values(3000, 8, -1.0, 1.0), &[3000], DType::F64);
    let exe = check_fused(&g, &[&xv], 1e-12, "centred");
    assert_eq!(exe.stats().fused_loops, 2, "{:?}", exe.stats());
    assert_eq!(exe.stats().fused_reductions, 2, "{:?}", exe.stats());
}

#[test]
fn views_of_views_and_shared_pieces() {
    // A slice of a transpose of a slice, read by a loop; a piece read by
    // its own loop after being placed; a concat that is also an output.
    let mut g = Graph::new();
    let x = g.input("x", [6, 50, 4], DType::F64);
    let s = g.slice_range(x, 1..5, 0).unwrap();
    let t = g.transpose(s, &[2, 0, 1]).unwrap();
    let u = g.slice_range(t, 10..40, 2).unwrap();
    let a = g.tanh(u).unwrap();
    let b = g.mul(a, a).unwrap();
    let c = g.add(b, a).unwrap();
    let cat = g.concat(&[a, c], 0).unwrap();
    let total = g.sum_all(cat).unwrap();
    g.set_outputs(vec![cat, total]);
    let xv = tensor(&values(1200, 9, -1.0, 1.0), &[6, 50, 4], DType::F64);
    let exe = check_fused(&g, &[&xv], 1e-12, "views of views");
    let s = exe.stats();
    assert_eq!((s.views, s.placed), (3, 2), "{s:?}");
}

/// One op of a random graph, applied to pool values picked by `pick`.
fn random_op(g: &mut Graph, pool: &[NodeId], op: u8, pick: &[usize]) -> Option<NodeId> {
    let a = pool[pick[0] % pool.len()];
    let b = pool[pick[1] % pool.len()];
    let dims = g.shape(a).dims().to_vec();
    let r = dims.len();
    let made = match op % 13 {
        0 => g.add(a, b),
        1 => g.mul(a, b),
        2 => g.tanh(a),
        3 => {
            let n = g.neg(a).ok()?;
            g.exp(n)
        }
        4 if r > 0 => {
            let axis = pick[2] % r;
            let len = dims[axis];
            let start = pick[3] % len;
            g.slice_range(a, start..start + (len - start).min(1 + pick[4] % len), axis)
        }
        5 if r > 1 => {
            let mut perm: Vec<usize> = (0..r).collect();
            perm.rotate_left(1 + pick[2] % (r - 1));
            g.transpose(a, &perm)
        }
        6 if r > 0 => {
            let s = g.sin(a).ok()?;
            g.concat(&[a, s, a], pick[2] % r)
        }
        7 if r > 0 => {
            let op = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Mean][pick[3] % 3];
            g.reduce(op, a, &[pick[2] % r])
        }
        8 => {
            let mut to = vec![2];
            to.extend(&dims);
            g.broadcast(a, to)
        }
        9 => g.reshape(a, [dims.iter().product::<usize>()]),
        // Absorbed by a reduction that is their only reader.
        11 => g.neg(a),
        12 => g.square(a),
        _ => g.sub(a, b),
    };
    made.ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    /// Random graphs mixing element-wise ops, slices, transposes, concats,
    /// broadcasts, reshapes and reductions: the fused plan equals the
    /// unfused one bit for bit, and the references within rounding.
    #[test]
    fn random_movement_graphs_fuse_exactly(
        ops in proptest::collection::vec((any::<u8>(), proptest::collection::vec(0usize..1000, 5)), 4..18),
        outs in proptest::collection::vec(0usize..1000, 1..4),
        seed in 0u64..1000,
    ) {
        let mut g = Graph::new();
        let x = g.input("x", [6, 5, 4], DType::F64);
        let y = g.input("y", [5, 4], DType::F64);
        let mut pool = vec![x, y];
        for (op, pick) in &ops {
            if let Some(v) = random_op(&mut g, &pool, *op, pick) {
                if g.shape(v).numel() <= 4096 {
                    pool.push(v);
                }
            }
        }
        let outputs: Vec<NodeId> = outs.iter().map(|o| pool[o % pool.len()]).collect();
        g.set_outputs(outputs);
        let xv = tensor(&values(120, seed, -1.0, 1.0), &[6, 5, 4], DType::F64);
        let yv = tensor(&values(20, seed + 1, -1.0, 1.0), &[5, 4], DType::F64);
        check_fused(&g, &[&xv, &yv], 1e-9, &format!("random graph:\n{g}"));
    }
}

#[test]
fn fused_plans_keep_their_structure_without_scalarisation() {
    // `general` (used by `check`) and the default compile agree on the
    // fused counts for a graph too large to scalarise.
    let g = rosenbrock(2000);
    let a = general(&g).stats();
    let b = rlx_runtime::compile(&g).unwrap().stats();
    assert_eq!((a.views, a.fused_reductions), (b.views, b.fused_reductions));
    assert_eq!((a.views, a.fused_reductions), (2, 1), "{a:?}");
}

/// Piece `k` of a concat: an element-wise function of `x` of kind `kind`
/// with its own constant (so that no two pieces are the same value).
fn piece(g: &mut Graph, x: NodeId, kind: u8, k: usize, dtype: DType) -> NodeId {
    let c = g.scalar(0.1 * (k + 1) as f64, dtype);
    match kind % 4 {
        0 => {
            let s = g.add(x, c).unwrap();
            g.sin(s).unwrap()
        }
        1 => g.mul(x, c).unwrap(),
        2 => {
            let e = g.exp(x).unwrap();
            g.mul(e, c).unwrap()
        }
        _ => {
            let t = g.tanh(x).unwrap();
            g.sub(t, c).unwrap()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

    /// Concats of several pieces one loop computes, which the loop writes
    /// together when they share a walk (`PlanStats::interleaved`): on any
    /// axis, of slices of equal and unequal lengths along it, or stacked
    /// on a new last axis through unit-axis reshapes (the form of a batched
    /// Jacobian), optionally transposed, in f64 and f32, over one block
    /// or several. The fused plan equals the unfused one bit for bit.
    #[test]
    fn concats_of_pieces_of_one_loop_are_written_exactly(
        dims in proptest::collection::vec(1usize..6, 1..3),
        lead in 1usize..400,
        axis in 0usize..3,
        pieces in proptest::collection::vec((0u8..4, 0usize..3), 2..12),
        stack in any::<bool>(),
        transpose in any::<bool>(),
        f32 in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let dtype = if f32 { DType::F32 } else { DType::F64 };
        let mut shape = vec![lead];
        shape.extend(&dims);
        let r = shape.len();
        let axis = axis % r;
        let mut g = Graph::new();
        let x = g.input("x", shape.clone(), dtype);
        // Stacked pieces share a value, which keeps them in one loop.
        let shared = g.sin(x).unwrap();
        let mut parts: Vec<NodeId> = pieces
            .iter()
            .enumerate()
            .map(|(k, &(kind, cut))| {
                let v = if stack {
                    shared
                } else {
                    // Slices of 1, 2 or all elements along the axis: pieces
                    // of equal lengths share a walk, the others do not.
                    let len = (cut + 1).min(shape[axis]);
                    let len = if cut == 2 { shape[axis] } else { len };
                    g.slice_range(x, 0..len, axis).unwrap()
                };
                piece(&mut g, v, kind, k, dtype)
            })
            .collect();
        if stack {
            // After every piece, as `passes::assemble_late` orders them (a
            // reshape reads its operand's loop from outside).
            let mut unit = shape.clone();
            unit.push(1);
            for p in &mut parts {
                *p = g.reshape(*p, unit.clone()).unwrap();
            }
        }
        let cat = g.concat(&parts, if stack { r } else { axis }).unwrap();
        let out = if transpose {
            let rank = g.shape(cat).rank();
            let perm: Vec<usize> = (0..rank).rev().collect();
            g.transpose(cat, &perm).unwrap()
        } else {
            cat
        };
        g.set_outputs(vec![out]);
        let n: usize = shape.iter().product();
        let xv = tensor(&values(n, seed, -1.0, 1.0), &shape, dtype);
        let exe = check_fused(&g, &[&xv], tol(dtype), &format!("concat of pieces:\n{g}"));
        if stack {
            // Every piece is placed through the same walk (up to 16 to
            // one write: 11 pieces never split).
            prop_assert_eq!(exe.stats().interleaved, pieces.len(), "{:?}", exe.stats());
        }
    }
}
