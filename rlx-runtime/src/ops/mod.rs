//! Tensor methods and operators.
