//! rlx: differentiable Rust.
//!
//! Put `#[differentiable]` on a function written with [`Tensor`] and get
//! exact gradients, Jacobians, Hessians and JVPs of it from generated
//! companion functions:
//!
//! ```
//! use rlx::prelude::*;
//!
//! #[differentiable]
//! pub fn spring_energy(q: &Tensor, k: f64, rest: f64) -> f64 {
//!     let d = q.slice_range(2..4, 0) - q.slice_range(0..2, 0);
//!     let r = d.square().sum_all().sqrt();
//!     0.5 * k * (r - rest).powi(2)
//! }
//!
//! # fn main() -> rlx::Result<()> {
//! let q = Tensor::from_slice(&[0.0, 0.0, 1.2, 0.1], [4]);
//! let e = spring_energy(&q, 10.0, 1.0);
//! let (dq, dk, drest) = grad_spring_energy(&q, 10.0, 1.0)?;
//! assert_eq!(dq.shape().dims(), &[4]);
//! // dE/drest = -k (r - rest)
//! let r = (1.2f64 * 1.2 + 0.1 * 0.1).sqrt();
//! assert!((drest + 10.0 * (r - 1.0)).abs() < 1e-12);
//! assert!((dk - e / 10.0).abs() < 1e-12);
//! # Ok(())
//! # }
//! ```
//!
//! Parameters: `Tensor`/`&Tensor` and `f32`/`f64` are runtime inputs and
//! differentiable; anything else is static configuration (`Clone + Eq +
//! Hash + Send + Sync + 'static`), part of the plan-cache key. The
//! companions, each returning [`Result`] and each documented in your
//! crate's `cargo doc` with its signature and result shapes for your
//! function: `grad_f`, `value_and_grad_f`, `jvp_f`, `vjp_f`, `jacobian_f`,
//! `value_and_jacobian_f`, `hessian_f`, `hvp_f`, `batch_jacobian_f`,
//! `nth_derivative_f` and `graph_f`, and the sparse ones
//! `sparse_jacobian_f`, `value_and_sparse_jacobian_f`, `sparse_hessian_f`
//! (a [`SparseMatrix`]) with `sparse_jacobian_into_f`,
//! `value_and_sparse_jacobian_into_f` and `sparse_hessian_into_f` writing
//! into caller-owned storage. [`differentiable`] lists what each computes
//! and returns: with one differentiated parameter a bare value, with
//! several a tuple (and for `hessian_f`, a tuple of rows of blocks).
//!
//! The [`guide`] is a tested walk through all of it: first gradients, which
//! mode when, checking derivatives, Newton with sparse Jacobians, loops,
//! custom rules, solvers, complex numbers, performance, pitfalls.
//!
//! Crates, bottom to top: [`rlx_core`] (IR and transforms, graph to graph,
//! no execution), [`rlx_runtime`] (tensors, tracing, compiler, kernels;
//! uses `rlx_core`), `rlx_macros` (the attribute; its generated code calls
//! [`rlx_runtime`] through this crate's hidden `__private` module) and this
//! facade, which re-exports all three. No crate imports one above it.
#![deny(missing_docs)]

/// The `num-complex` crate, whose `Complex<T>` is rlx's complex element type.
pub use num_complex;
pub use rlx_core::{
    autodiff, BinaryOp, CmpOp, DType, Error, Graph, Literal, NodeId, Op, ReduceOp, Result, Shape,
    TensorType, UnaryOp,
};

/// Two parameters, one of them a float, and a static one: the shapes of
/// what the companions return.
///
/// ```
/// use rlx::prelude::*;
///
/// #[differentiable]
/// fn energy(q: &Tensor, k: f64, n: i32) -> f64 {
///     k * q.powi(n).sum_all()
/// }
///
/// #[differentiable(wrt(q))]
/// fn scaled(q: &Tensor, k: f64) -> f64 {
///     k * q.square().sum_all()
/// }
///
/// # fn main() -> rlx::Result<()> {
/// let q = Tensor::from_slice(&[1.0, 2.0], [2]);
/// // One gradient per parameter, shaped like it: a tuple.
/// let (dq, dk): (Tensor, f64) = grad_energy(&q, 3.0, 2)?;
/// assert_eq!(dq.to_vec::<f64>()?, vec![6.0, 12.0]);
/// assert_eq!(dk, 5.0);
/// // The Hessian: rows of blocks, `[2, 2]`, `[2]`, `[2]` and `[]`.
/// let ((hqq, hqk), (hkq, hkk)) = hessian_energy(&q, 3.0, 2)?;
/// assert_eq!(hqq.to_vec::<f64>()?, vec![6.0, 0.0, 0.0, 6.0]);
/// assert_eq!(hqk.to_vec::<f64>()?, vec![2.0, 4.0]);
/// assert_eq!(hkq.to_vec::<f64>()?, vec![2.0, 4.0]);
/// assert_eq!(hkk.item::<f64>()?, 0.0);
///
/// // Differentiated with respect to `q` alone: a bare `Tensor`.
/// let dq: Tensor = grad_scaled(&q, 3.0)?;
/// assert_eq!(dq.to_vec::<f64>()?, vec![6.0, 12.0]);
/// # Ok(())
/// # }
/// ```
pub use rlx_macros::differentiable;
pub use rlx_runtime::function::{plan_cache_capacity, set_plan_cache_capacity};
pub use rlx_runtime::scan::{iterate, scan, Scan};
pub use rlx_runtime::solvers::{fixed_point, root, sparse_solve, JacobianKind, Newton};
pub use rlx_runtime::{
    compile, num_threads, set_num_threads, sparse, trace, Executable, SparseLu, SparseMatrix,
    Tensor,
};
pub use rlx_runtime::{debug_nans, set_debug_nans, Arg, Value};
/// Complex numbers: `C32`/`C64` (= `Complex32`/`Complex64`) are the
/// elements of `DType::C32`/`DType::C64` tensors, the same types as faer's
/// `c32`/`c64`.
pub use rlx_runtime::{Complex, Complex32, Complex64, C32, C64};

pub mod guide;
mod marked_loop;
mod static_params;

/// The core crate (IR and transforms).
pub use rlx_core as core;
/// The runtime crate (tensors, tracing, compiler).
pub use rlx_runtime as runtime;

/// What most users import: `use rlx::prelude::*;`.
pub mod prelude {
    pub use crate::{
        differentiable, Complex32, Complex64, DType, Error, Result, Shape, SparseLu, SparseMatrix,
        Tensor, C32, C64,
    };
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// What code generated by `#[differentiable]` needs. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::marked_loop::{
        carry, extend_steps, scan_for, scan_range, step_outputs, steps_of, try_scan_for, Carry,
        CollectSteps, StepOutput,
    };
    pub use crate::static_params::{StaticOps, StaticParam, Statics};
    pub use rlx_core::{Graph, TensorType};
    pub use rlx_runtime::function::{
        and, companion, companion_at, eq, finish, flat, flat_build, flat_locate, ge, gt, inputs,
        le, lt, ne, number, or, out_of_line, outputs, plain, plain_at, select, skip, take, Arg,
        Flat, Function, Transform, Values,
    };
    pub use rlx_runtime::rewritten::{
        number_arg, number_of, operand, pass_number, scalar_param, Kind, NumberArg,
    };
    pub use rlx_runtime::trace::Trace;
}
