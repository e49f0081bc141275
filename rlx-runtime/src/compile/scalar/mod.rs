//! Scalar regions: straight-line programs over `f64`s and the other
//! scalar types. `code` is the instruction set; `native` (feature `jit`,
//! on by default) compiles a region to native code with Cranelift,
//! bit-identical to the interpreter; `step` is the plan step of a 0-d
//! scalar region and its interpreter.

pub(crate) mod code;
#[cfg(feature = "jit")]
pub(crate) mod native;
pub(crate) mod program;
pub(crate) mod step;
