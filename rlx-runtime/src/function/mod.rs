//! The runtime side of `#[differentiable]`: per-function plan caches and
//! the helpers that generated code calls (through `rlx::__private`).
//!
//! # Plan cache
//!
//! Each differentiable function owns one [`Function`] (a `static` in the
//! generated code). Its cache maps an input *signature* — the shape and
//! dtype of every runtime argument, plus the static (configuration)
//! arguments, compared with `Eq` after a hash — to an entry holding the
//! traced graph and, per [`Transform`], the transformed graph and its
//! compiled [`Executable`](crate::Executable). Entries are built lazily: the first call with a
//! new signature traces the function; the first call of each transform
//! differentiates and compiles.
//!
//! Invariants:
//! - entries and plans are immutable once built and shared as `Arc`s, so
//!   any number of threads may call the same function at once; each thread
//!   also remembers the entry it used last per function (a small
//!   direct-mapped thread-local table), so a warm call with an unchanged
//!   signature takes no lock and hashes nothing (executables keep per-call
//!   scratch in their own pool; scalar programs need none);
//! - at most a bounded number of signatures are kept per function
//!   ([`MAX_ENTRIES`] unless set with [`set_plan_cache_capacity`], or per
//!   function with `#[differentiable(cache = N)]`); inserting one more
//!   evicts the least recently used (a program that keeps one hot shape and
//!   meets many one-off shapes keeps its hot plan; one cycling through more
//!   signatures than the bound retraces, it does not grow without bound).
//!   "Used" is counted at the shared cache: a thread that keeps calling one
//!   signature is served from its own table and holds that entry alive even
//!   if the shared cache drops it;
//! - errors are not cached: a failing call fails again, the same way.
//!
//! # Functions of numbers
//!
//! When every runtime parameter is an `f32`/`f64` and every result of a
//! companion is a number (`grad_f` of a scalar energy of coordinates, say),
//! the generated code first calls [`Function::run_numbers`]: the arguments
//! go in as a slice of `f64`s, the results come back in a stack array, and
//! a plan that is one scalar region runs its native code directly on those
//! slices. A warm call allocates nothing. A function without static
//! arguments has one signature per count and `f32` mask of its numbers,
//! so each transform pins the first entry it ran for; a warm call with the
//! same number types then runs that plan's native code directly (no
//! thread-local table, no lock, no signature comparison beyond the mask).
//! Whatever that path cannot serve
//! (a plan that is not one scalar region) it declines, and the companion
//! takes the general path. Numbers are never traced, so inside a trace
//! such a call computes its results too (constants of the caller's trace).
//!
//! # Small tensors
//!
//! The same pinned entries serve companions over small tensors
//! ([`Function::run_small`], which generated code tries first for a
//! function without static arguments): a warm call whose arguments have
//! the pinned entry's shapes and dtypes, outside any trace and with the
//! check of non-finite values off, runs that entry's scalarised plan on
//! the arguments' storage and builds only the tensors the companion
//! returns ([`Flat`]). Anything else takes the general path.
//!
//! # Traced calls
//!
//! Inside an active trace (a differentiable function calling another, or a
//! companion), [`Function::run`] does not execute anything: it inlines the
//! (transformed) graph into the caller's trace. Errors met there are
//! recorded in the caller's trace ([`companion`], [`plain`]) and come back
//! as the outermost companion's `Err`.
//!
//! # Paths of a companion call
//!
//! The code `#[differentiable]` generates tries these in order, each
//! declining (running nothing) for a call it does not serve; every path
//! returns the general path's results.
//!
//! | path | when it serves a call | file |
//! |---|---|---|
//! | [`Function::run_pinned_numbers`] | every argument a number, the transform's pinned plan one native function (a companion that runs the rest out of line) | `numbers.rs` |
//! | [`Function::run_numbers`] | every runtime argument an `f32`/`f64`, every result a number, the plan one scalar region | `numbers.rs` |
//! | [`Function::small_direct`], then [`SmallRun::run`] | no static arguments; the pinned entry's shapes and dtypes; its scalarised plan one native function | `tensors.rs` |
//! | [`Function::run_small`] | no static arguments; the pinned entry's shapes and dtypes, outside any trace, the check of non-finite values off, a scalarised plan | `tensors.rs` |
//! | [`Function::run_to`] (and [`Function::run`]) | every call: the plan cache, the transform's plan, and inside a trace the graph inlined into the caller's | `cache.rs` (plans made in `planning.rs`, the check of non-finite results in `nans.rs`) |
//! | [`Function::run_nth`] | the `n`-th derivative companions | `nth.rs` |
//!
//! Modules, bottom to top (each imports only the ones before it):
//! `transform` (the transforms a companion asks for), `control`
//! (rewritten comparisons, `&&`, `||` and `if`), `glue` (what generated
//! code calls around a trace), `panics` (a panic while tracing, caught
//! without the hook's report), `pins` (what a transform pins for its warm
//! calls), `plan` (a signature's per-transform plans and `n`-th derivative
//! plans, as data), `cache` (the plan cache, [`Function`], and its general
//! runs), then the files that only add methods to `Function`: `nans` (the
//! opt-in check of non-finite results), `planning` (making and compiling
//! the plans), `numbers`, `tensors`, `nth` (the traced graph and `n`-th
//! derivatives of a signature). This module only re-exports them.

mod cache;
mod control;
mod glue;
mod nans;
mod nth;
mod numbers;
mod panics;
mod pins;
mod plan;
mod planning;
mod tensors;
mod transform;

pub use crate::compile::{flat_build, flat_locate, Flat, Located, SmallRun, Take};
pub use crate::value::{Arg, Value, Values};
pub use cache::{
    assert_static, plan_cache_capacity, set_plan_cache_capacity, Function, StaticArg, Tracer,
    MAX_ENTRIES,
};
pub use control::{and, eq, ge, gt, le, lt, ne, or, select, Compare, Cond, Logic, TracedOperand};
pub use glue::{
    companion, companion_at, finish, flat, inputs, number, out_of_line, outputs, plain, plain_at,
    skip, take, Number, Output, Placeholder, Returns,
};
pub use transform::Transform;
