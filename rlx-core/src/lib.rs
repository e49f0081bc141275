//! The IR and transforms of rlx.
//!
//! A [`Graph`] is an append-only list of [`Node`]s in topological order; each
//! node applies a primitive [`Op`] to earlier nodes and carries its inferred
//! [`Shape`] and [`DType`]. Modules, in pipeline order:
//!
//! - [`dtype`], [`shape`], [`op`]: what a value is and what can be done to it;
//! - [`infer`](mod@infer): shape and dtype inference, one exhaustive `match` over ops;
//! - [`graph`]: the arena and its builder (one method per op);
//! - [`loops`]: the loop op (a body graph traced once), its packed result,
//!   its lowering and the binomial checkpoint schedule of its reverse mode;
//! - [`solvers`]: the root op (Newton on a residual graph, one node whose
//!   derivatives are the implicit function theorem's);
//! - [`passes`]: dead-code elimination, CSE, constant folding, algebraic
//!   simplification, and [`optimize`] running them to a fixed point;
//! - [`vmap`](mod@vmap): batching, one rule per op;
//! - [`autodiff`]: VJP/JVP rule tables, the two drivers and the transforms
//!   (`grad`, `jvp`, `hessian`, `jacobian`, ...), all graph to graph;
//! - [`sparsity`], [`colouring`]: Jacobian and Hessian sparsity patterns
//!   from the graph's structure, and the colourings that compress them
//!   (the compressed programs are `autodiff::transforms::sparse`);
//! - [`error`]: the one error type, re-exported as `rlx::Error`.
//!
//! Layers, bottom to top: `dtype`, `shape`, `error`; `op`, `infer`;
//! `graph`; `passes`, `vmap`; `autodiff` (its transforms use `passes` and
//! `vmap`). A module imports from its own line or the lines above, never
//! from below, with one exception: a custom op holds its forward [`Graph`],
//! so `op` and `graph` name each other (one recursive type).
//!
//! This crate does no execution and contains no `unsafe`; `rlx-runtime` runs graphs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod autodiff;
pub mod colouring;
pub mod dtype;
pub mod error;
pub mod graph;
pub mod infer;
pub mod loops;
pub mod op;
pub mod passes;
pub mod shape;
mod shape_dims;
pub mod solvers;
pub mod sparsity;
#[cfg(test)]
mod test_graphs;
pub mod vmap;

pub use dtype::DType;
pub use error::{Error, NonFinite, Result};
pub use graph::{Graph, GraphInput, Node, NodeId, Source, SourceLine};
pub use infer::{infer, TensorType};
pub use loops::{LoopKind, LoopOp, LoopRef};
pub use op::{BinaryOp, CmpOp, CustomOp, CustomRef, Literal, Op, ReduceOp, UnaryOp};
pub use passes::optimize;
pub use shape::Shape;
pub use solvers::{JacobianKind, Newton, RootOp, RootRef, SparseSolveOp};
pub use vmap::vmap;
