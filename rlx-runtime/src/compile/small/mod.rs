//! Small values: a graph of small tensors lowered to one scalar program
//! over its elements. `flat` (the results as a companion takes them),
//! `io` (reading arguments and writing results as flat `f64` elements),
//! `program` (the scalarised plan, [`program::Small`]), `call` (the warm
//! call of a pinned signature).

pub(crate) mod call;
pub(crate) mod flat;
pub(crate) mod io;
pub(crate) mod program;
