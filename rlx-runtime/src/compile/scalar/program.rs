//! [`ScalarProgram`]: a plan that is one scalar region reading its inputs
//! and writing its outputs, run straight from numbers into numbers.

/// A plan that is a single scalar region whose leaves are all 0-d
/// `F32`/`F64` inputs and whose stores write every output, each 0-d
/// `F32`/`F64` (a small physics energy and its gradient, say). Such a plan
/// runs straight from [`Arg`](crate::Arg) numbers into numbers, without a
/// per-call state: see `Executable::run_arg_lists`.
#[derive(Clone, Debug)]
pub(crate) struct ScalarProgram {
    /// The output each target of the region writes.
    pub(crate) output_of_target: Vec<u32>,
    /// The target writing each output (the inverse map).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) target_of_output: Vec<u32>,
    /// The input each `Load` of the region reads, in code order.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) input_of_load: Vec<u32>,
    /// Whether the loads read every input, in order.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) loads_are_inputs: bool,
    /// Whether target `j` writes output `j`, for every output, and every
    /// output is `F64`: native code can then write the results in place.
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) stores_are_outputs: bool,
}
