//! The plan step of a scalar region of a mixed graph (see
//! `planner::mixed`): a scalarised plan ([`Small`]) run inside a general
//! plan, reading its inputs from the plan's values and writing its outputs
//! into the step's targets. Like `looping`, it holds a compiled program of
//! its own (a plan inside a plan).

use std::sync::Arc;

use crate::compile::base::env::{Env, Val};
use crate::compile::small::io;
use crate::compile::small::program::Small;
use crate::storage::Storage;

/// A scalar region as a step.
#[derive(Clone, Debug)]
pub(crate) struct RegionStep {
    /// The region's element program.
    pub(crate) small: Arc<Small>,
    /// The values it reads, in its inputs' order, with their element counts.
    pub(crate) inputs: Vec<(Val, usize)>,
}

impl RegionStep {
    /// Runs the region: the inputs widened to `f64` on the stack, the
    /// element program, the results written into `targets` (one per
    /// output, `f32`/`f64`, sized by the executor). Allocates nothing
    /// within the stack buffers of [`Small`].
    pub(crate) fn run(&self, env: &Env<'_>, targets: &mut [Storage]) {
        self.small.run_filled(
            |ins| {
                let mut at = 0;
                for &(v, n) in &self.inputs {
                    io::read(env.get(v), &mut ins[at..at + n]);
                    at += n;
                }
            },
            targets,
        );
    }
}
