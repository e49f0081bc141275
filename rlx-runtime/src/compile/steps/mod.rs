//! The plan steps that are not fused loops or products: `reduce`,
//! `solve`, `movement` (copies, slices, concatenations), `scatter`
//! (scatter-adds with constant indices, checked once), `looping` (a loop
//! node: its body compiled into an executable, run once per step), `root`
//! (a root node: its residual and Jacobian compiled the same way, run by
//! Newton's method), `sparse_solve` (faer's sparse LU over a fixed
//! pattern, its symbolic analysis kept), `region` (a region of small values of a mixed graph,
//! run as a scalarised program).

pub(crate) mod looping;
pub(crate) mod movement;
pub(crate) mod reduce;
pub(crate) mod region;
pub(crate) mod root;
pub(crate) mod scatter;
pub(crate) mod solve;
pub(crate) mod sparse_solve;
