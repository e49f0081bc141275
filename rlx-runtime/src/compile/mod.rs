//! The graph compiler: [`compile`] turns a [`Graph`](rlx_core::Graph) into
//! an [`Executable`].
//!
//! Compilation is split from running (tract's `SimplePlan`/`SimpleState`):
//! the immutable plan (schedule, buffer slots, last uses, fused
//! instruction lists) is built once; each call borrows a mutable state that
//! owns the buffers. The executable keeps a small pool of warm states, so
//! concurrent calls each get their own and a warm call allocates nothing.
//!
//! # Rooms
//!
//! The module is a list of rooms, bottom to top; a file imports only from
//! the rooms above its own, and inside a room only from the files listed
//! before it (`.ci/check-rooms` checks this, with its list of the known
//! exceptions). Paths are written in one style, `crate::compile::room::file`.
//!
//! 1. `base`: what every step shares, importing nothing of `compile`:
//!    value numbers and the per-call `Env`, register banks, the block loops
//!    over the one definition of each op, the thread pool's split of a step,
//!    stack copies of a caller's numbers.
//! 2. `options`: the [`Options`] of a compilation.
//! 3. `scalar`: scalar regions, their instruction set, their interpreter
//!    and the 0-d region step, and (feature `jit`) their native code.
//! 4. `small`: a graph of small values as one scalar program over its
//!    elements, its argument and result I/O, the warm call of a pinned
//!    signature, and [`Flat`], the results as a companion takes them.
//! 5. `steps`: the plan steps that are not fused loops or products
//!    (reductions, solves, data movement, scatter-adds, loops, roots, small
//!    regions of a mixed graph); the remaining ops (gather, other
//!    scatter-adds, softmax, log-softmax) call the reference kernels,
//!    [`crate::kernels::eval_into`].
//! 6. `fusion`: fused element-wise loops, their register chains and the
//!    reductions folded into them.
//! 7. `products`: matrix products, their register panels per instruction
//!    set, and the epilogues run on their output.
//! 8. `plan`: the immutable plan, a schedule of the steps above.
//! 9. `planner`: graph → plan: grouping of element-wise chains, step
//!    selection, buffer planning by liveness.
//! 10. `exec`: the per-call state and the step loop.
//! 11. `executable`: [`Executable`], the plans it holds and its accessors.
//! 12. `driver`: [`compile`] and its variants, the graph-level passes run
//!     before planning.
//! 13. `items`: the program of one item of a batched graph whose items
//!     are independent, run over the items; `run`: the ways of running an
//!     executable (input checks, the state pool, the scalar-program paths).
//!
//! A plan holds compiled programs (a loop's body, a small region), so the
//! steps of loops, roots and regions and the scalarised plan still reach
//! up to `driver` and `executable`; they are the named exceptions of the
//! check.
//!
//! Invariants: a plan is only built from a graph that passes
//! [`Graph::verify`](rlx_core::Graph::verify), so shapes and dtypes seen by
//! the steps are the inferred ones; inputs and outputs are checked against
//! the declared types before every run, so the executor does not panic on
//! any accepted input.

#[macro_use]
mod base;
mod driver;
mod exec;
mod executable;
mod fusion;
mod items;
mod options;
mod plan;
mod planner;
mod products;
mod run;
mod scalar;
mod small;
mod steps;

// The doors of `compile` for the rest of the crate and the public API.
pub use base::parallel::{num_threads, set_num_threads};
pub(crate) use base::stack::on_copy;
pub use base::stats::PlanStats;
pub(crate) use driver::compile_owned;
pub use driver::{compile, compile_with};
pub(crate) use executable::DirectCall;
pub use executable::Executable;
pub use items::compile_items;
pub(crate) use items::{compile_items_owned, Batched, PAYS_FROM};
pub use options::Options;
pub(crate) use small::call::SmallCall;
pub use small::call::SmallRun;
pub use small::flat::{flat_build, flat_locate, Flat, Located, Take};
