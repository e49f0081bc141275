//! The bottom room: what every step and the executor share, importing
//! nothing else of `compile` (in this order, each file importing only the
//! ones above it): `env` (value numbers, their locations, the per-call
//! `Env` a step reads through), `regs` (the register banks of fused
//! loops), `math` (the block loops over the one definition of each op,
//! [`crate::kernels::scalar`]), `parallel` (the thread pool's split of a
//! step), `stack` (copies of a caller's numbers to the stack).

pub(crate) mod env;
pub(crate) mod regs;
pub(crate) mod stats;
#[macro_use]
pub(crate) mod math;
pub(crate) mod parallel;
pub(crate) mod stack;
