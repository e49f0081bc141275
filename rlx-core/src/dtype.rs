//! Element types of tensors.
//!
//! `F16` and `BF16` are storage types: kernels load them, compute in `f32`
//! and store back. `I64` holds indices and labels, `Bool` holds masks.

use std::fmt;

/// The element type of a tensor.
///
/// ```
/// use rlx_core::DType;
/// assert!(DType::F64.is_float());
/// assert_eq!(DType::BF16.size_in_bytes(), 2);
/// assert_eq!(DType::F32.to_string(), "f32");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE 754 single precision.
    F32,
    /// IEEE 754 double precision.
    F64,
    /// IEEE 754 half precision (stored as `half::f16`, computed in `f32`).
    F16,
    /// bfloat16 (stored as `half::bf16`, computed in `f32`).
    BF16,
    /// 64-bit signed integer, for indices and labels.
    I64,
    /// Boolean, for masks.
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::Bool,
    ];

    /// Whether values of this type are floating point (and so differentiable).
    #[inline]
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// Size of one element in bytes.
    #[inline]
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
            DType::F16 | DType::BF16 => 2,
            DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// The name used in messages and IR dumps (`f32`, `bf16`, `i64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
