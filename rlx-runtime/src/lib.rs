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
//! - [`rewritten`]: helpers for the macro's body rewrites (borrowed
//!   operands, scalar closure parameters);
//! - [`interop`]: conversions to and from nalgebra, ndarray and faer arrays
//!   (cargo features of those names).
#![deny(missing_docs)]

pub mod compile;
mod eager;
mod format;
pub mod function;
pub mod interop;
mod interp;
pub mod kernels;
pub mod ops;
pub mod rewritten;
pub mod storage;
pub mod tensor;
pub mod trace;
mod value;

pub use compile::{compile, Executable};
pub use interp::interpret;
pub use rlx_core::{
    BinaryOp, CmpOp, DType, Error, Graph, NodeId, Op, ReduceOp, Result, Shape, UnaryOp,
};
pub use storage::{Element, Storage};
pub use tensor::{FillValue, Tensor};
pub use value::{Arg, Value};
