//! Sparse Jacobians and Hessians at run time, and sparse linear solves.
//!
//! - [`SparseMatrix`]: the compressed-sparse-column result of the
//!   `sparse_jacobian_f` / `sparse_hessian_f` companions (orientation
//!   `[out, in]`, tensors flattened row-major), with conversions to and
//!   from faer's sparse matrices;
//! - [`SparseLu`]: sparse LU through faer, the symbolic factorisation kept
//!   across numeric refactorisations of one pattern (Newton's method);
//! - the companions' runtime side ([`Function::run_sparse`](crate::function::Function::run_sparse),
//!   [`Function::run_sparse_into`](crate::function::Function::run_sparse_into)).
//!
//! Symbolic and numeric are separate: the pattern, its colouring and the
//! compressed program (see `rlx::core::autodiff::transforms::sparse`) are
//! built once per signature and cached with the function's plans; a call
//! only runs the program and copies the values.

mod lu;
mod matrix;
mod pivots;
mod run;

pub use lu::SparseLu;
pub use matrix::SparseMatrix;
pub use rlx_core::sparsity::Pattern;
