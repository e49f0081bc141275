//! What a `#[scan]` loop of `#[differentiable]` code expands to calls.
//!
//! ```text
//! #[scan(checkpoints = 4)]
//! for t in 0..steps {              // a static range
//!     p = &p - q.sin() * 0.1;      // `q`, `p`: carries (declared before, assigned inside)
//!     q = &q + &p * 0.1 + &forces[t];  // `forces[t]`: a per-step input
//!     path.push(q.clone());        // `path`: a per-step output
//! }
//! ```
//! becomes (the macro's `marked` module writes it)
//! ```text
//! let range = scan_range(0, steps, false);
//! let xs = (steps_of(&forces, range),);
//! let (carries, ys) = scan_for(Scan::new().checkpoints(4), range,
//!     (carry(q), carry(p)), xs,
//!     |(mut q, mut p), (x0,)| { let mut path = Vec::new(); { ..body.. }; ((q, p), (step_outputs(path),)) });
//! (q, p) = carries;
//! if let Some((y0,)) = ys { extend_steps(&mut path, y0, range, false) }
//! ```
//! The body is traced once, into one loop node (`rlx::scan`). The traits
//! here exist for their compile errors: each names what the loop needs of
//! a value and points at the user's assignment or `push`.

use rlx_runtime::scan::{PerStep, Scan, Tensors};
use rlx_runtime::Tensor;

/// A `#[scan]` loop's static range: `(first step, number of steps)`;
/// `start..end` or `start..=end`, empty when it ends before it starts.
pub fn scan_range(start: usize, end: usize, inclusive: bool) -> (usize, usize) {
    let end = if inclusive {
        end.saturating_add(1)
    } else {
        end
    };
    (start, end.saturating_sub(start))
}

/// A value assigned in a `#[scan]` loop and declared before it: carried
/// from step to step.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is assigned in a `#[scan]` loop and declared before it, so it is carried from step to step, but a carry must be tensors",
    label = "assigned in the loop",
    note = "a carry is a `Tensor`, a tuple of up to four carries or a `Vec` of them",
    note = "compute values of other types before the loop, or declare them inside it"
)]
pub trait Carry: Tensors {}

impl<T: Tensors> Carry for T {}

/// A carry, unchanged (its bound gives the error).
pub fn carry<C: Carry>(c: C) -> C {
    c
}

/// A value pushed to a per-step output of a `#[scan]` loop.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is pushed to a per-step output of a `#[scan]` loop, but the outputs are stacked along a new first axis, so they must be tensors",
    label = "per-step output",
    note = "push a `Tensor`, a tuple of up to four of them or a `Vec` of them"
)]
pub trait StepOutput: Tensors {}

impl<T: Tensors> StepOutput for T {}

/// One step's pushed values, unchanged (its bound gives the error).
pub fn step_outputs<Y: StepOutput>(step: Vec<Y>) -> Vec<Y> {
    step
}

/// What collects a `#[scan]` loop's per-step outputs with `push`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` collects the per-step outputs of a `#[scan]` loop with `push`, but only a `Vec` can",
    label = "pushed to in the loop",
    note = "declare it as `let mut ys = Vec::new();` before the loop"
)]
pub trait CollectSteps<Y> {
    /// Appends one value per step and pushed item, in the order the steps
    /// ran, each a slice of the stacked `step`.
    fn extend_steps(&mut self, stacked: Vec<Y>, steps: usize, reverse: bool);
}

impl<Y: Tensors> CollectSteps<Y> for Vec<Y> {
    #[track_caller]
    fn extend_steps(&mut self, stacked: Vec<Y>, steps: usize, reverse: bool) {
        let leaves: Vec<Vec<Tensor>> = stacked.iter().map(Tensors::tensors).collect();
        // The unrolled loop pushes in the order the steps run; a reverse
        // loop's row `s` holds the step that read `xs[s]`.
        let rows: Vec<usize> = if reverse {
            (0..steps).rev().collect()
        } else {
            (0..steps).collect()
        };
        for row in rows {
            for (item, leaves) in stacked.iter().zip(&leaves) {
                let mut sliced = leaves.iter().map(|l| {
                    let rest = l.shape().dims()[1..].to_vec();
                    l.slice_range(row..row + 1, 0).reshape(rest)
                });
                self.push(item.rebuild(&mut sliced));
            }
        }
    }
}

/// Appends the stacked per-step outputs `ys` of a loop over `range` to `out`.
#[track_caller]
pub fn extend_steps<Y, O: CollectSteps<Y>>(
    out: &mut O,
    ys: Vec<Y>,
    range: (usize, usize),
    reverse: bool,
) {
    out.extend_steps(ys, range.1, reverse);
}

/// The rows of a per-step input `xs` a loop over `range` reads as `xs[t]`:
/// `xs` itself when they are all of them.
#[track_caller]
pub fn steps_of(xs: &Tensor, range: (usize, usize)) -> Tensor {
    let (start, len) = range;
    if start == 0 && xs.rank() > 0 && xs.shape().dim(0) == len {
        xs.clone()
    } else {
        xs.slice_range(start..start + len, 0)
    }
}

/// Runs the loop: `(last carries, Some(stacked outputs))`, or for an empty
/// range the carries unchanged and `None`, as the unrolled loop would. The
/// body is an `Fn`: it runs once, while tracing, so it may not change
/// captured variables (those it assigns are carries, passed in and out).
#[track_caller]
pub fn scan_for<C: Tensors, X: PerStep, Y: Tensors>(
    settings: Scan,
    range: (usize, usize),
    init: C,
    xs: X,
    body: impl Fn(C, X::Step) -> (C, Y),
) -> (C, Option<Y>) {
    if range.1 == 0 {
        return (init, None);
    }
    let (c, y) = settings.length(range.1).run(init, xs, body);
    (c, Some(y))
}

/// [`scan_for`] for a body that uses `?` (the macro writes it then, with a
/// `?` after the call): the body returns `Ok((carries, outputs))`, and its
/// first error is returned, so `?` in the loop leaves the enclosing
/// function as it would in the unrolled loop.
#[track_caller]
pub fn try_scan_for<C: Tensors, X: PerStep, Y: Tensors>(
    settings: Scan,
    range: (usize, usize),
    init: C,
    xs: X,
    body: impl Fn(C, X::Step) -> rlx_runtime::Result<(C, Y)>,
) -> rlx_runtime::Result<(C, Option<Y>)> {
    if range.1 == 0 {
        return Ok((init, None));
    }
    let (c, y) = settings.length(range.1).run_fallible(init, xs, body)?;
    Ok((c, Some(y)))
}
