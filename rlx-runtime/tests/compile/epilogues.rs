//! Matrix-product epilogues: a product and the fused loop reading it run
//! as one step, the product written into the loop's result buffer. The
//! operations and their order do not change, so an epilogue plan must give
//! the bits of the plan without epilogues (`Options::epilogues` off), for
//! forward layers and for their gradients (the activation's derivative
//! times the cotangent, the bias gradient's column sum), in `f32` and
//! `f64`, with and without a bias, for several activations, transposed
//! operands, and batch sizes that are not multiples of any block (so that
//! every product kernel is met: the plain loop, the unpacked panels and
//! `matrixmultiply`).

use super::*;

/// The benchmark's MLP (its hand-written version is not used here).
#[allow(dead_code)]
#[path = "../../../benches/common/mlp.rs"]
mod mlp;

/// How a layer's product is finished.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// The product plus the bias only.
    Linear,
    Unary(UnaryOp),
    /// `x · sigmoid(x)` written out: two readers of the product.
    SwishByHand,
}

fn finish(g: &mut Graph, z: NodeId, act: Act) -> NodeId {
    match act {
        Act::Linear => z,
        Act::Unary(op) => g.unary(op, z).unwrap(),
        Act::SwishByHand => {
            let s = g.sigmoid(z).unwrap();
            g.mul(z, s).unwrap()
        }
    }
}

/// `act(x · w [+ b])`, with `x` given as `xᵀ` when `ta` and `w` as `wᵀ`
/// when `tb` (both read in place through strides).
fn layer(
    dtype: DType,
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
    bias: bool,
    act: Act,
) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", if ta { [k, m] } else { [m, k] }, dtype);
    let w = g.input("w", if tb { [n, k] } else { [k, n] }, dtype);
    let b = g.input("b", [n], dtype);
    let x = if ta { g.transpose_last2(x).unwrap() } else { x };
    let w = if tb { g.transpose_last2(w).unwrap() } else { w };
    let p = g.matmul(x, w).unwrap();
    let z = if bias { g.add(p, b).unwrap() } else { p };
    let y = finish(&mut g, z, act);
    g.set_outputs(vec![y]);
    g
}

/// A two-layer MLP's loss `Σ out² / 2` with `out = act(x w1 + b1) w2 + b2`,
/// and its value and gradient with respect to the weights and biases.
fn mlp_value_and_grad(
    dtype: DType,
    (batch, d_in, hidden, d_out): (usize, usize, usize, usize),
    bias: bool,
    act: Act,
) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [batch, d_in], dtype);
    let w1 = g.input("w1", [d_in, hidden], dtype);
    let b1 = g.input("b1", [hidden], dtype);
    let w2 = g.input("w2", [hidden, d_out], dtype);
    let b2 = g.input("b2", [d_out], dtype);
    let p1 = g.matmul(x, w1).unwrap();
    let z1 = if bias { g.add(p1, b1).unwrap() } else { p1 };
    let h = finish(&mut g, z1, act);
    let p2 = g.matmul(h, w2).unwrap();
    let out = if bias { g.add(p2, b2).unwrap() } else { p2 };
    let sq = g.mul(out, out).unwrap();
    let s = g.sum_all(sq).unwrap();
    let half = g.scalar(0.5, dtype);
    let loss = g.mul(s, half).unwrap();
    g.set_outputs(vec![loss]);
    rlx_core::autodiff::value_and_grad(&g, &[1, 2, 3, 4]).unwrap()
}

/// The general planner (small graphs would otherwise be scalarised whole),
/// with or without epilogues.
fn with_epilogues(on: bool) -> Options {
    Options {
        epilogues: on,
        ..Options::general()
    }
}

/// Runs `g` with and without epilogues on deterministic inputs; asserts
/// identical bits and returns the epilogue plan's count of epilogues.
fn same_bits_as_without(g: &Graph, what: &str) -> usize {
    let fused = compile_with(g, &with_epilogues(true)).unwrap();
    let apart = compile_with(g, &with_epilogues(false)).unwrap();
    assert_eq!(apart.stats().epilogues, 0, "{what}");
    let inputs: Vec<Tensor> = fused
        .input_types()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let v = values(t.shape.numel(), 7 + i as u64, -1.5, 1.5);
            tensor(&v, t.shape.dims(), t.dtype)
        })
        .collect();
    let inputs: Vec<&Tensor> = inputs.iter().collect();
    let (a, b) = (fused.run(&inputs).unwrap(), apart.run(&inputs).unwrap());
    for (k, (a, b)) in a.iter().zip(&b).enumerate() {
        assert_same_values(a, b, &format!("{what}, output {k}"));
    }
    // A warm run (reusing the state) gives the same bits again.
    let again = fused.run(&inputs).unwrap();
    for (k, (a, b)) in again.iter().zip(&b).enumerate() {
        assert_same_values(a, b, &format!("{what}, warm, output {k}"));
    }
    fused.stats().epilogues
}

const ACTS: [Act; 6] = [
    Act::Linear,
    Act::Unary(UnaryOp::Tanh),
    Act::Unary(UnaryOp::Sigmoid),
    Act::Unary(UnaryOp::Relu),
    Act::Unary(UnaryOp::Exp),
    Act::SwishByHand,
];

#[test]
fn epilogue_layers_give_the_bits_of_separate_steps() {
    // Tiny (the plain loop), a few rows (the panels), and `matrixmultiply`
    // with row counts that are no multiple of its 8-row tiles.
    let shapes = [(1, 5, 3), (7, 33, 70), (37, 65, 130), (100, 300, 257)];
    for dtype in [DType::F32, DType::F64] {
        for (mkn, ta, tb) in [
            (shapes[0], false, false),
            (shapes[1], false, true),
            (shapes[2], true, false),
            (shapes[3], false, false),
            (shapes[3], true, true),
        ] {
            for bias in [false, true] {
                for act in ACTS {
                    let g = layer(dtype, mkn, (ta, tb), bias, act);
                    let what = format!("{dtype:?} {mkn:?} ta {ta} tb {tb} bias {bias} {act:?}");
                    let epilogues = same_bits_as_without(&g, &what);
                    // A product read by nothing but the graph output has
                    // no loop to run in.
                    let loop_reads_it = bias || !matches!(act, Act::Linear);
                    assert_eq!(epilogues, loop_reads_it as usize, "{what}");
                }
            }
        }
    }
}

#[test]
fn epilogue_gradients_give_the_bits_of_separate_steps() {
    for dtype in [DType::F32, DType::F64] {
        for dims in [(3, 9, 12, 4), (37, 50, 64, 10)] {
            for bias in [false, true] {
                for act in ACTS {
                    let g = mlp_value_and_grad(dtype, dims, bias, act);
                    let what = format!("{dtype:?} {dims:?} bias {bias} {act:?}");
                    let epilogues = same_bits_as_without(&g, &what);
                    // The hidden cotangent `(g · w2ᵀ) * act'` is an
                    // epilogue when the layer has an element-wise finish;
                    // so is the forward layer, unless the derivative reads
                    // the bare product itself (relu's and swish's do; the
                    // derivatives of tanh, sigmoid and exp read the output).
                    let finished = bias || !matches!(act, Act::Linear);
                    let derivative_reads_product =
                        !bias && matches!(act, Act::Unary(UnaryOp::Relu) | Act::SwishByHand);
                    let want = if !finished {
                        0
                    } else if derivative_reads_product {
                        1
                    } else {
                        2
                    };
                    assert!(epilogues >= want, "{what}: {epilogues} epilogues");
                }
            }
        }
    }
}

/// The MLP of the benchmark (784-256-256-10, batch 64, tanh, softmax
/// cross-entropy): every product whose result only a loop reads runs in
/// that loop's step.
#[test]
fn mlp_plan_has_an_epilogue_per_layer_and_cotangent() {
    let g = mlp::mlp_graph();
    let vg = rlx_core::autodiff::value_and_grad(&g, &[2, 3, 4, 5, 6, 7]).unwrap();
    let fused = compile_with(&vg, &with_epilogues(true)).unwrap().stats();
    let apart = compile_with(&vg, &with_epilogues(false)).unwrap().stats();
    // Forward: the three layers' `x · w + b` (two with `tanh`). Backward:
    // the two hidden cotangents `(g · wᵀ) * (1 - h²)`, each with its bias
    // gradient folded in. The weight gradients `hᵀ · g` are outputs.
    assert_eq!(fused.epilogues, 5, "{fused:?}");
    assert_eq!(
        (fused.steps, apart.steps),
        (13, 18),
        "{fused:?} / {apart:?}"
    );
    // The products' own buffers are gone (their slots were reused by later
    // values, so the count of slots does not grow either way).
    assert!(fused.buffers <= apart.buffers, "{fused:?} / {apart:?}");
    assert_eq!(fused.fused_loops, apart.fused_loops);
    assert_eq!(fused.fused_reductions, apart.fused_reductions);
}

/// Found by the fuzz suite (`non_finite_inputs_through_optimised_plans`):
/// `sin(x · xᵀ)` with a one-element product panicked in the general plan
/// ("range end index 1024 out of range for slice of length 0"). The loop
/// took the product, one element, for a splat leaf to fill from the
/// product's own buffer, which an epilogue never has: the product lives in
/// the loop's target. The product is now read from there as any size is.
#[test]
fn epilogue_over_a_one_element_product() {
    for dtype in [DType::F64, DType::F32] {
        for k in [1, 3] {
            let mut g = Graph::new();
            let x = g.input("x", [1, k], dtype);
            let t = g.transpose_last2(x).unwrap();
            let p = g.matmul(x, t).unwrap();
            let s = g.sin(p).unwrap();
            g.set_outputs(vec![s]);
            let xs: Vec<f64> = (0..k).map(|i| 0.25 + 0.5 * i as f64).collect();
            let xv = tensor(&xs, &[1, k], dtype);
            let fused = compile_with(&g, &Options::general()).unwrap();
            assert_eq!(fused.stats().epilogues, 1, "{:?}", fused.stats());
            let got = fused.run(&[&xv]).unwrap()[0].to_f64_vec().unwrap();
            let apart = compile_with(&g, &with_epilogues(false)).unwrap();
            let want = apart.run(&[&xv]).unwrap()[0].to_f64_vec().unwrap();
            assert_eq!(got, want, "{dtype:?}, k = {k}");
            let dot: f64 = xs.iter().map(|v| v * v).sum();
            assert_close(&got, &[dot.sin()], tol(dtype), "sin(x · xᵀ)");
        }
    }
}
