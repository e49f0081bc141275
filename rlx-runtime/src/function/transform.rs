//! The transforms a companion can ask for ([`Transform`]) and how each
//! turns a signature's traced graph into the graph its plan runs.

use std::sync::Arc;

use rlx_core::autodiff;
use rlx_core::autodiff::transforms::sparse::{sparse_hessian, sparse_jacobian, SparseProgram};
use rlx_core::sparsity::Pattern;
use rlx_core::{Graph, Result};

/// The transforms a companion can ask for; one cached plan each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transform {
    /// The function itself (plain call).
    Call,
    /// Value and gradient (`grad_*`, `value_and_grad_*`).
    Grad,
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

pub(super) const TRANSFORMS: usize = 11;

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
        }
    }

    /// What a run of this transform of function `name` computes, for
    /// messages: `` `f` ``, `` the gradient of `f` ``, ...
    pub(super) fn what(self, name: &str) -> String {
        let of = match self {
            Transform::Call => return format!("`{name}`"),
            Transform::Grad => "the gradient",
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
    /// ([`rlx_core::passes::reroll`]), so the transform and every later
    /// pass see them once, batched.
    pub(super) fn apply(self, g: &Graph, wrt: &[usize]) -> Result<(Graph, Option<Arc<Pattern>>)> {
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
            Transform::Call => Ok((g.clone(), None)),
            Transform::Grad => dense(autodiff::value_and_grad(g, wrt)),
            Transform::Jvp => dense(autodiff::jvp(g, wrt)),
            Transform::Vjp => dense(autodiff::vjp(g, wrt)),
            Transform::Jacobian => dense(autodiff::jacobian(g, wrt)),
            Transform::Hessian => dense(autodiff::hessian(g, wrt).map(|h| values_skipped(h, g))),
            Transform::Hvp => dense(autodiff::hvp(g, wrt).map(|h| values_skipped(h, g))),
            Transform::BatchJacobian => {
                // The companion returns the blocks alone: the function's
                // own outputs, and what only they need, are not computed.
                let mut j = autodiff::batch_jacobian(g, wrt)?;
                j.set_outputs(j.outputs()[g.outputs().len()..].to_vec());
                Ok((rlx_core::passes::dce(&j)?, None))
            }
            Transform::SparseJacobian => values_only(sparse_jacobian(g, wrt, None)),
            Transform::ValueAndSparseJacobian => sparse(sparse_jacobian(g, wrt, None)),
            Transform::SparseHessian => values_only(sparse_hessian(g, wrt)),
        }
    }
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
