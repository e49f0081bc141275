//! The arrow function shared by `benches/sparse.rs` and
//! `tests/sparse_companions.rs` (included by `#[path]`).

use rlx::prelude::*;

/// An arrow: `y_0 = Σ x²` (a dense row), `y_i = x_i · exp(x_0) + sin(x_i)`
/// (a dense column and the diagonal): either one-sided colouring needs a
/// colour per column (row); the bicolouring needs three passes.
#[differentiable]
pub fn arrow(x: &Tensor, n: usize) -> Tensor {
    let head = x.square().sum_all().reshape([1]);
    let rest = x.slice_range(1..n, 0);
    let tail = &rest * &x.slice_range(0..1, 0).exp() + rest.sin();
    Tensor::concat(&[&head, &tail], 0)
}
