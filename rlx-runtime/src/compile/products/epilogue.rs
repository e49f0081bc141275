//! Matrix-product epilogues: a product and the element-wise loop that is
//! its only reader, run as one step over one buffer.
//!
//! An MLP layer is `tanh(x · w + b)`; its backward pass is
//! `(g · wᵀ) * (1 - h²)` with the bias gradient, a column sum of that,
//! folded into the same loop. Planned apart, the product is a step writing
//! a buffer of its own, and the fused loop a second step reading it and
//! writing another. Here the product is written straight into the buffer
//! of the loop's result (the layer's `h`, the cotangent `dz`); the loop
//! then reads each block of it into a register
//! ([`Instr::LoadTarget`](crate::compile::fusion::fused::Instr), first in its body) before
//! anything writes that block, and overwrites it with the result. The
//! product's value never has a buffer of its own, and the loop's writes
//! go to the cache lines it has just read.
//!
//! The product is computed whole (`matrixmultiply` offers no hook to run
//! code on a block of `C` as it is finished, and splitting the product
//! into row panels would pack `B` once per panel), split across threads
//! as any product; so is the loop. Both do exactly what their separate
//! steps would, in the same order: the results are bit-identical to the
//! plan without epilogues, for every thread count.

use crate::compile::base::env::Env;
use crate::compile::fusion::fused::{FusedStep, LoopScratch};
use crate::compile::products::matmul::{HalfScratch, MatMulStep};
use crate::storage::Storage;

/// A product written into target `target` of `body`, which then runs over it.
#[derive(Clone, Debug)]
pub(crate) struct EpilogueStep {
    pub(crate) product: MatMulStep,
    /// The target of `body` the product is written into (a value of the
    /// product's shape and dtype that `body` stores).
    pub(crate) target: u32,
    pub(crate) body: FusedStep,
}

impl EpilogueStep {
    /// Runs the product, then the loop; `targets` are the loop's.
    pub(crate) fn run(
        &self,
        env: &Env<'_>,
        targets: &mut [Storage],
        scratch: &mut LoopScratch,
        half: &mut HalfScratch,
    ) {
        self.product
            .run(env, &mut targets[self.target as usize], half);
        self.body.run(env, targets, |_| None, scratch);
    }
}
