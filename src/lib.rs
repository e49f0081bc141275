//! rlx: differentiable Rust.
#![deny(missing_docs)]

pub use rlx_core::*;
