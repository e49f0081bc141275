//! The transforms a companion can ask for ([`Transform`]) and how each
//! turns a signature's traced graph into the graph its plan runs.

use std::sync::Arc;

use rlx_core::autodiff;
use rlx_core::autodiff::transforms::sparse::{sparse_hessian, sparse_jacobian, SparseProgram};
use rlx_core::sparsity::Pattern;
use rlx_core::vmap::{unbatch, Item};
use rlx_core::{Graph, Result};

/// The transforms a companion can ask for; one cached plan each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transform {
    /// The function itself (plain call).
    Call,
    /// Value and gradient (`value_and_grad_*`): the function's outputs,
    /// then one gradient per differentiated input.
    Grad,
    /// The gradient alone (`grad_*`): one output per differentiated input.
    /// The function's own outputs, and what only they need, are not
    /// computed.
    GradOnly,
    /// Jacobian-vector product (`jvp_*`): one tangent per differentiated input.
    Jvp,
    /// Vector-Jacobian product (`vjp_*`): one cotangent for output 0.
    Vjp,
    /// Full Jacobian (`jacobian_*`), mode picked by size.
    Jacobian,
    /// Full Hessian (`hessian_*`).
    Hessian,
    /// Hessian-vector product (`hvp_*`): one vector per differentiated input.
    Hvp,
    /// Per-item Jacobians of a batched function (`batch_jacobian_*`): its
    /// plan returns the blocks alone, not the function's outputs.
    BatchJacobian,
    /// Sparse Jacobian values alone (`sparse_jacobian_*`; see [`crate::sparse`]).
    SparseJacobian,
    /// The function's outputs and the sparse Jacobian's values
    /// (`value_and_sparse_jacobian_*`).
    ValueAndSparseJacobian,
    /// Sparse Hessian values (`sparse_hessian_*`).
    SparseHessian,
}

pub(super) const TRANSFORMS: usize = 12;

impl Transform {
    pub(super) fn index(self) -> usize {
        match self {
            Transform::Call => 0,
            Transform::Grad => 1,
            Transform::Jvp => 2,
            Transform::Vjp => 3,
            Transform::Jacobian => 4,
            Transform::Hessian => 5,
            Transform::Hvp => 6,
            Transform::BatchJacobian => 7,
            Transform::SparseJacobian => 8,
            Transform::ValueAndSparseJacobian => 9,
            Transform::SparseHessian => 10,
            Transform::GradOnly => 11,
        }
    }

    /// What a run of this transform of function `name` computes, for
    /// messages: `` `f` ``, `` the gradient of `f` ``, ...
    pub(super) fn what(self, name: &str) -> String {
        let of = match self {
            Transform::Call => return format!("`{name}`"),
            Transform::Grad | Transform::GradOnly => "the gradient",
            Transform::Jvp => "the Jacobian-vector product",
            Transform::Vjp => "the vector-Jacobian product",
            Transform::Jacobian => "the Jacobian",
            Transform::Hessian => "the Hessian",
            Transform::Hvp => "the Hessian-vector product",
            Transform::BatchJacobian => "the batch Jacobian",
            Transform::SparseJacobian | Transform::ValueAndSparseJacobian => "the sparse Jacobian",
            Transform::SparseHessian => "the sparse Hessian",
        };
        format!("{of} of `{name}`")
    }

    /// The transformed graph and, for the sparse transforms, the pattern
    /// of the values it computes. Repeated copies of one computation in the
    /// traced graph (a trace-time loop) are rerolled first
    /// ([`rlx::core::passes::reroll`](rlx_core::passes::reroll)), so the transform and every later
    /// pass see them once, batched.
    pub(super) fn apply(self, g: &Graph, wrt: &[usize]) -> Result<(Graph, Option<Arc<Pattern>>)> {
        self.apply_with(g, wrt, false)
    }

    /// [`Transform::apply`] for a function declared holomorphic
    /// (`#[differentiable(holomorphic)]`) when `holomorphic`: its gradient
    /// and Jacobian are the complex derivative `f′(z)` (see
    /// [`autodiff::grad_holomorphic`]); its other transforms are the same.
    pub(super) fn apply_with(
        self,
        g: &Graph,
        wrt: &[usize],
        holomorphic: bool,
    ) -> Result<(Graph, Option<Arc<Pattern>>)> {
        let rerolled = rlx_core::passes::reroll(g)?;
        let g = &rerolled;
        let dense = |r: Result<Graph>| r.map(|g| (g, None));
        let sparse = |r: Result<SparseProgram>| r.map(|p| (p.graph, Some(Arc::new(p.pattern))));
        // Without the function's own outputs, what only they need is dropped.
        let values_only = |r: Result<SparseProgram>| {
            let (mut g, p) = sparse(r)?;
            let last = g.outputs().last().copied();
            g.set_outputs(last.into_iter().collect());
            Ok((rlx_core::optimize(&g)?, p))
        };
        match self {
            Transform::Grad if holomorphic => dense(autodiff::grad_holomorphic(g, wrt)),
            Transform::GradOnly if holomorphic => {
                dense(autodiff::grad_holomorphic(g, wrt).and_then(|d| without_values(d, g)))
            }
            Transform::Jacobian if holomorphic => dense(autodiff::jacobian_holomorphic(g, wrt)),
            Transform::Call => Ok((g.clone(), None)),
            Transform::Grad => dense(autodiff::value_and_grad(g, wrt)),
            Transform::GradOnly => {
                dense(autodiff::value_and_grad(g, wrt).and_then(|d| without_values(d, g)))
            }
            Transform::Jvp => dense(autodiff::jvp(g, wrt)),
            Transform::Vjp => dense(autodiff::vjp(g, wrt)),
            Transform::Jacobian => dense(autodiff::jacobian(g, wrt)),
            Transform::Hessian => dense(autodiff::hessian(g, wrt).map(|h| values_skipped(h, g))),
            Transform::Hvp => dense(autodiff::hvp(g, wrt).map(|h| values_skipped(h, g))),
            // The companion returns the blocks alone.
            Transform::BatchJacobian => dense(without_values(autodiff::batch_jacobian(g, wrt)?, g)),
            Transform::SparseJacobian => values_only(sparse_jacobian(g, wrt, None)),
            Transform::ValueAndSparseJacobian => sparse(sparse_jacobian(g, wrt, None)),
            Transform::SparseHessian => values_only(sparse_hessian(g, wrt)),
        }
    }
}

impl Transform {
    /// For [`Transform::BatchJacobian`] of a function whose rows are
    /// independent (see [`unbatch`]): its plan's graph for one item, the
    /// per-item Jacobian at a batch of 1, to compile once and run item by
    /// item (`compile::items`) when its item is long enough for that to
    /// beat the batched plan. `None` for the other transforms, and when
    /// the function's output 0 is not computed row by row from rows of
    /// its batched inputs, or a differentiated input is not batched (the
    /// plan of [`Transform::apply`] then runs as it is). Transforming one
    /// item costs the same at every batch size.
    pub(super) fn item(self, g: &Graph, wrt: &[usize]) -> Option<Item> {
        if self != Transform::BatchJacobian {
            return None;
        }
        let mut h = rlx_core::passes::reroll(g).ok()?;
        let o = *h.outputs().first()?;
        let n = *h.shape(o).dims().first()?;
        h.set_outputs(vec![o]);
        let mut item = unbatch(&h, n)?;
        if !wrt.iter().all(|&i| item.batched.get(i) == Some(&true)) {
            return None;
        }
        item.graph = self.apply(&item.graph, wrt).ok()?.0;
        Some(item)
    }
}

/// `d`, a derivative of `g` whose first outputs are `g`'s own, without
/// them: what only they need is dropped too.
fn without_values(mut d: Graph, g: &Graph) -> Result<Graph> {
    d.set_outputs(d.outputs()[g.outputs().len()..].to_vec());
    rlx_core::passes::dce(&d)
}

/// `h`, a derivative of `g` whose first outputs are `g`'s own, with those
/// replaced by zeros of their types. The companions running the transform
/// (`hessian_*`, `hvp_*`) skip them, so the plan only computes what the
/// derivative needs: the function's value and what only it reads are
/// dropped (for Rosenbrock's `hvp_`, a quarter of the loop body and its
/// reduction).
fn values_skipped(mut h: Graph, g: &Graph) -> Graph {
    let mut outputs = h.outputs().to_vec();
    for o in &mut outputs[..g.outputs().len()] {
        *o = h.zeros_like(*o);
    }
    h.set_outputs(outputs);
    h
}

#[cfg(test)]
mod tests {
    use super::Transform;
    use rlx_core::{passes, BinaryOp, DType, Graph, NodeId, Op, UnaryOp};

    /// `f(x) = Σ ln(x) + Σ x³`: its value needs `ln`, its Hessian
    /// (`diag(-1/x² + 6x)`) and Hessian-vector products do not.
    fn log_plus_cube() -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", [4], DType::F64);
        let l = g.unary(UnaryOp::Ln, x).unwrap();
        let c = g.unary(UnaryOp::Powi(3), x).unwrap();
        let s = g.binary(BinaryOp::Add, l, c).unwrap();
        let y = g.sum_all(s).unwrap();
        g.set_outputs(vec![y]);
        g
    }

    fn has_ln(g: &Graph) -> bool {
        g.nodes()
            .iter()
            .any(|n| matches!(n.op, Op::Unary(UnaryOp::Ln)))
    }

    fn is_zero_constant(g: &Graph, id: NodeId) -> bool {
        matches!(&g.node(id).op, Op::Constant(l) if l.as_splat() == Some(0.0))
    }

    #[test]
    fn grad_only_plans_compute_no_value() {
        let g = log_plus_cube();
        let (d, pattern) = Transform::GradOnly.apply(&g, &[0]).unwrap();
        assert!(pattern.is_none());
        // The gradient `1/x + 3x²` alone: no `ln`, one output.
        assert!(!has_ln(&d), "{d}");
        assert_eq!(d.outputs().len(), 1);
        assert_eq!(d.shape(d.outputs()[0]).dims(), &[4]);
        let (full, _) = Transform::Grad.apply(&g, &[0]).unwrap();
        assert!(has_ln(&full));
        assert_eq!(full.outputs().len(), 2);
    }

    #[test]
    fn hessian_and_hvp_plans_compute_no_value() {
        let g = log_plus_cube();
        // The derivative graphs with the value kept still compute `ln`...
        let kept = passes::dce(&rlx_core::autodiff::hessian(&g, &[0]).unwrap()).unwrap();
        assert!(has_ln(&kept));
        // ...the companions' graphs do not: the value is a zero constant.
        for t in [Transform::Hessian, Transform::Hvp] {
            let (h, pattern) = t.apply(&g, &[0]).unwrap();
            assert!(pattern.is_none());
            let h = passes::dce(&h).unwrap();
            assert!(!has_ln(&h), "{t:?} still computes the value:\n{h}");
            assert!(is_zero_constant(&h, h.outputs()[0]), "{t:?}:\n{h}");
        }
    }
}
