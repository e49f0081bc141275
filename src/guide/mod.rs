//! The rlx guide: chapters whose every code block is a doc test, compiled
//! and run by `cargo test --doc`, so none of it can go stale silently.
//!
//! Read them in order the first time; each is a short runnable story.
//!
//! 1. [A first gradient](c01_first_gradient): `#[differentiable]`, the plain
//!    call, `grad_`, `value_and_grad_`, numbers and tensors, the graph.
//! 2. [Gradients, Jacobians, Hessians, JVPs](c02_modes), and which mode
//!    when.
//! 3. [Checking derivatives](c03_checking): central differences, the
//!    transpose test, finding where a NaN is born.
//! 4. [Newton's method](c04_newton) with dense and sparse Jacobians.
//! 5. [Loops and checkpointing](c05_loops): `#[scan]`, `rlx::scan`, memory.
//! 6. [Custom rules](c06_custom_rules): numerical stability, conventions at
//!    a boundary.
//! 7. [Solvers and implicit derivatives](c07_solvers): `rlx::root`,
//!    `rlx::fixed_point`, `rlx::sparse_solve`.
//! 8. [Complex numbers](c08_complex): JAX's convention, holomorphic
//!    functions.
//! 9. [The performance model](c09_performance): what gets compiled to what,
//!    first calls, threads.
//! 10. [Pitfalls](c10_pitfalls): NaN through selects, kinks, `f32` vs `f64`.
//! 11. [Coming from num-dual or JAX](c11_coming_from).
//!
//! # Pictures
//!
//! rustdoc shows no files from `target/`, so the pictures are made by the
//! examples; each writes an SVG (plotters, no system libraries) when run
//! with `cargo run --release --example NAME` (`-- --ci` for a smaller
//! instance):
//!
//! | example | picture | what to look for |
//! |---|---|---|
//! | `circuit` | `target/plots/circuit.svg` | the residual norm per Newton iteration on a log scale, sparse grid and dense ladder: a few slow damped steps, then quadratic convergence (the digits double per step) |
//! | `ac_sweep` | `target/plots/bode.svg` | the gain of a 5th-order Butterworth LC ladder (flat at −6 dB, the ½ of a doubly terminated filter, then −100 dB per decade past ω = 1), its phase, and the largest sensitivities `∂ln|H|/∂ln p` of the gain to the components, all from one reverse pass per frequency |
//! | `fit_transient` | `target/plots/fit_transient.svg` | the waveform at two nodes: measured, the starting guess and the fit on top of the measurement |
//! | `pendulum` | `target/plots/pendulum.svg` | the paths of the two bobs, their angles over time, and the energy drift `E(t) − E(0)` of the integrator, which stays small and does not grow |
//! | `mlp` | `target/plots/mlp.svg` | the training loss falling and the learned decision regions wrapping around the two spirals |
//!
//! Chapters [4](c04_newton), [5](c05_loops), [7](c07_solvers) and
//! [8](c08_complex) say which example goes further than their snippets.
//! Chapter [4](c04_newton) also shows one small picture inline (Newton's
//! residual per iteration), drawn by its doc test, which fails when the
//! picture no longer matches what the code computes.

#[doc = include_str!("c01_first_gradient.md")]
pub mod c01_first_gradient {}

#[doc = include_str!("c02_modes.md")]
pub mod c02_modes {}

#[doc = include_str!("c03_checking.md")]
pub mod c03_checking {}

#[doc = include_str!("c04_newton.md")]
pub mod c04_newton {}

#[doc = include_str!("c05_loops.md")]
pub mod c05_loops {}

#[doc = include_str!("c06_custom_rules.md")]
pub mod c06_custom_rules {}

#[doc = include_str!("c07_solvers.md")]
pub mod c07_solvers {}

#[doc = include_str!("c08_complex.md")]
pub mod c08_complex {}

#[doc = include_str!("c09_performance.md")]
pub mod c09_performance {}

#[doc = include_str!("c10_pitfalls.md")]
pub mod c10_pitfalls {}

#[doc = include_str!("c11_coming_from.md")]
pub mod c11_coming_from {}
