//! The CPU runtime of rlx: tensors, tracing, the graph compiler and kernels.
//!
//! Modules, in pipeline order:
//! - [`storage`]: typed contiguous element storage;
//! - [`tensor`]: [`Tensor`], concrete or traced, and its eager ops;
//! - [`ops`]: the tensor methods and operators (one per primitive, plus composites);
//! - [`trace`]: the thread-local trace context used by `#[differentiable]`;
//! - [`kernels`]: reference kernels, one per op ([`kernels::eval_into`]);
//! - [`interpret`]: the reference graph interpreter;
//! - [`compile`](mod@compile): graph → executable plan (fused element-wise
//!   loops, scalar regions, strided matrix products, planned buffers);
//! - [`function`]: per-function plan caches and the runtime side of
//!   `#[differentiable]`-generated code;
//! - [`sparse`]: sparse Jacobians/Hessians as CSC matrices and sparse LU (faer).
#![deny(missing_docs)]

pub mod compile;
mod eager;
mod format;
pub mod function;
mod interp;
pub mod kernels;
pub mod ops;
pub mod sparse;
pub mod storage;
pub mod tensor;
pub mod trace;
mod value;

pub use compile::{compile, Executable};
pub use interp::interpret;
pub use rlx_core::{
    BinaryOp, CmpOp, DType, Error, Graph, NodeId, Op, ReduceOp, Result, Shape, UnaryOp,
};
pub use sparse::{SparseLu, SparseMatrix};
pub use storage::{Element, Storage};
pub use tensor::Tensor;
pub use value::{Arg, Value};
