//! Every failure the fuzzer found, as a test with its minimal input.

use rlx::core::passes::fold_constants;
use rlx::{DType, Error, Graph, Literal, Op, Tensor};

use crate::companions::jacobian_tile;

/// Found by `random_companion_calls`: `jacobian_tile(&[x], 1 << 58)`
/// aborted the process ("memory allocation of 2305843009213693952 bytes
/// failed"). Constant folding built its table of broadcast sources, one
/// entry per element of the result, before checking that the result was
/// small enough to fold; the forward-mode basis constant broadcast to
/// `[1, 2^58, 1]` asked for 2^61 bytes.
#[test]
fn folding_a_huge_broadcast_of_a_constant_allocates_nothing() {
    let mut g = Graph::new();
    let c = g
        .constant(Literal::F64(vec![1.0, 2.0].into()), [2], DType::F64)
        .unwrap();
    let b = g.broadcast(c, [1 << 58, 2]).unwrap();
    g.set_outputs(vec![b]);
    let f = fold_constants(&g).unwrap();
    assert!(
        matches!(f.node(f.outputs()[0]).op, Op::Broadcast { .. }),
        "{f}"
    );

    let x = Tensor::from_slice(&[0.5f64], [1]);
    let e = jacobian_tile(&x, 1 << 58).map(drop).unwrap_err();
    assert!(matches!(e.root(), Error::OutOfMemory { .. }), "{e}");
}

/// Found by `hostile_graphs` (the watchdog: no progress for a minute):
/// input `[2^58, 0, 0]`, softmax along axis 1. The value has no elements,
/// but the softmax kernel looped over its 2^58 rows of nothing; so did
/// gather, slice and matmul over empty values with a huge other axis.
/// Steps and kernels with nothing to write now return at once.
#[test]
fn ops_on_empty_values_with_a_huge_axis_finish_at_once() {
    use rlx::compile::{compile_with, Options};
    let big = 1usize << 58;
    let mut g = Graph::new();
    let x = g.input("x", [big, 0, 0], DType::F64);
    let s = g.softmax(x, 1).unwrap();
    let i = g
        .constant(Literal::I64(Vec::new().into()), [0, 2], DType::I64)
        .unwrap();
    let e = g.gather(s, i, 2).unwrap();
    let m = g.input("m", [big, 0, 3], DType::F64);
    let n = g.input("n", [1, 3, 0], DType::F64);
    let p = g.matmul(m, n).unwrap();
    let q = g.slice_range(p, 1..3, 0).unwrap();
    g.set_outputs(vec![s, e, q]);
    let t = [
        Tensor::zeros([big, 0, 0], DType::F64),
        Tensor::zeros([big, 0, 3], DType::F64),
        Tensor::zeros([1, 3, 0], DType::F64),
    ];
    let started = std::time::Instant::now();
    let compiled = compile_with(
        &g,
        &Options {
            jit: false,
            ..Options::default()
        },
    )
    .unwrap();
    let outs = compiled.run(&[&t[0], &t[1], &t[2]]).unwrap();
    assert_eq!(outs[2].shape().dims(), &[2, 0, 0]);
    rlx::runtime::interpret(&g, &[&t[0], &t[1], &t[2]]).unwrap();
    assert_eq!(t[0].softmax(1).numel(), 0);
    assert_eq!(t[1].matmul(&t[2]).numel(), 0);
    // Gather and scatter-add of no indices along an empty axis, with 2^58
    // rows before it.
    let x = Tensor::zeros([big, 0], DType::F64);
    let none = Tensor::zeros([0], DType::I64);
    assert_eq!(x.gather(&none, 1).shape().dims(), &[big, 0]);
    assert_eq!(x.scatter_add(&none, &x, 1).numel(), 0);
    // An index is still checked when the result is empty, as NumPy's `take` does.
    let bad = Tensor::from_slice(&[5i64], [1]);
    let e = Tensor::zeros([0, 2], DType::F64)
        .try_gather(&bad, 1)
        .unwrap_err();
    assert!(matches!(e, Error::IndexOutOfRange { index: 5, .. }), "{e}");
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );
}

/// Found by `hostile_graphs`: `vjp` of a mean over a graph input declared
/// as `[2, 2^63]` (a shape no tensor may have) overflowed computing the
/// element count of the mean. Transforms now check every node's size first.
#[test]
fn transforms_refuse_a_graph_whose_input_is_too_large() {
    let mut g = Graph::new();
    let x = g.input("x0", [2, 1 << 63], DType::F64);
    // The builder checks each op's result ([2] here), not its operands.
    let m = g.reduce(rlx::ReduceOp::Mean, x, &[1]).unwrap();
    g.set_outputs(vec![m]);
    for e in [
        rlx::autodiff::vjp(&g, &[0]).unwrap_err(),
        rlx::autodiff::jvp(&g, &[0]).unwrap_err(),
        rlx::core::vmap(&g, &[true], 2).unwrap_err(),
    ] {
        assert!(matches!(e, Error::TooLarge { op: "input", .. }), "{e}");
    }
}
