//! The `#[differentiable]` attribute of rlx.
