//! The CPU runtime of rlx: tensors, tracing, the graph compiler and kernels.
//!
//! Modules, bottom to top (pipeline order); a module imports only modules
//! of the lines above its own, never one above it in the pipeline:
//! - [`storage`]: typed contiguous element storage; `buffer`: how a
//!   tensor holds it (owned when small, shared otherwise); `context`: the
//!   thread-local stack of active traces (ids, graphs, first errors);
//! - [`tensor`]: [`Tensor`], concrete or traced (its data and accessors);
//! - [`kernels`]: reference kernels, one per op ([`kernels::eval_into`]),
//!   and a graph run with them; [`trace`]: recording ops on traced tensors
//!   (the `Trace` used by `#[differentiable]`); `value`: [`Arg`]/[`Value`];
//!   `debug_nans`: the opt-in check of non-finite results ([`set_debug_nans`]);
//! - `apply`: [`Tensor::apply`], every op on tensors, recorded in the trace
//!   or evaluated eagerly by the kernels; [`interpret`]: the reference graph
//!   interpreter; `format`: printing;
//! - [`ops`]: the tensor methods and operators (one per primitive, plus
//!   composites), all through [`Tensor::apply`]; [`scan`](mod@scan): loops
//!   traced once (`scan`, `iterate`), eager on concrete tensors;
//!   [`solvers`]: `root`, Newton's method as one node differentiated by
//!   the implicit function theorem;
//! - [`compile`](mod@compile): graph → executable plan (fused element-wise
//!   loops, scalar regions, strided matrix products, planned buffers); its
//!   own layers are listed in its docs;
//! - [`function`]: per-function plan caches and the runtime side of
//!   `#[differentiable]`-generated code;
//! - [`rewritten`]: helpers for the macro's body rewrites and generated
//!   signatures (borrowed operands, scalar closure parameters, a number or
//!   a tensor for a float parameter);
//! - [`interop`]: conversions to and from nalgebra, ndarray and faer arrays
//!   (cargo features of those names).
//! - [`sparse`]: sparse Jacobians/Hessians as CSC matrices and sparse LU (faer).
#![deny(missing_docs)]

mod apply;
mod buffer;
pub mod compile;
mod context;
mod debug_nans;
mod format;
pub mod function;
pub mod interop;
mod interp;
pub mod kernels;
pub mod ops;
mod pages;
mod pool;
pub mod rewritten;
pub mod scan;
pub mod solvers;
pub mod sparse;
pub mod storage;
pub mod tensor;
pub mod trace;
mod value;

pub use compile::{compile, num_threads, set_num_threads, Executable};
pub use debug_nans::{debug_nans, set_debug_nans};
pub use interp::interpret;
pub use num_complex::{Complex, Complex32, Complex64};
pub use rlx_core::{
    BinaryOp, CmpOp, DType, Error, Graph, NodeId, Op, ReduceOp, Result, Shape, UnaryOp,
};
pub use sparse::{SparseLu, SparseMatrix};
pub use storage::{Element, Storage, C32, C64};
pub use tensor::{FillValue, Tensor};
pub use value::{Arg, Value, Values};
