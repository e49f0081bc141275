//! Fused element-wise loops: `io` (the loop's loads and stores), `fold`
//! and `row_sums` (reductions folded into a loop), `interleave`, `chain`
//! (register-resident runs of cheap float ops), `fused` (the block-wise
//! fused loop step), `chain_form` (forming the chains of a fused loop),
//! `absorb` (absorbing producers into a loop).

pub(crate) mod absorb;
pub(crate) mod chain;
pub(crate) mod chain_form;
pub(crate) mod fold;
pub(crate) mod fused;
pub(crate) mod interleave;
pub(crate) mod io;
pub(crate) mod row_sums;
