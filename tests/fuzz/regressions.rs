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
