//! Element types of tensors.
//!
//! `F16` and `BF16` are storage types: kernels load them, compute in `f32`
//! and store back. `I64` holds indices and labels, `Bool` holds masks.
//! `C32` and `C64` are complex numbers (`num_complex::Complex<f32>` and
//! `Complex<f64>` at run time, the element types of faer's `c32`/`c64`):
//! differentiable like the real floats, never ordered.

use std::fmt;

/// The element type of a tensor.
///
/// ```
/// use rlx::DType;
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
    /// Complex single precision (`num_complex::Complex<f32>`).
    C32,
    /// Complex double precision (`num_complex::Complex<f64>`).
    C64,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::Bool,
        DType::C32,
        DType::C64,
    ];

    /// Whether values of this type are real floating point numbers.
    #[inline]
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// Whether values of this type are complex numbers.
    ///
    /// ```
    /// use rlx::DType;
    /// assert!(DType::C64.is_complex() && !DType::C64.is_float());
    /// ```
    #[inline]
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C32 | DType::C64)
    }

    /// Whether values of this type are real or complex floating point
    /// numbers, the dtypes that carry derivatives.
    #[inline]
    pub fn is_inexact(self) -> bool {
        self.is_float() || self.is_complex()
    }

    /// The real dtype of a complex one's parts (`c64 -> f64`); a real
    /// dtype is its own.
    ///
    /// ```
    /// use rlx::DType;
    /// assert_eq!(DType::C32.real(), DType::F32);
    /// assert_eq!(DType::F64.real(), DType::F64);
    /// ```
    #[inline]
    pub fn real(self) -> DType {
        match self {
            DType::C32 => DType::F32,
            DType::C64 => DType::F64,
            other => other,
        }
    }

    /// The complex dtype whose parts are `self` (`f64 -> c64`; `f16` and
    /// `bf16` widen to `c32`); `None` for `i64` and `bool`. A complex dtype
    /// is its own.
    ///
    /// ```
    /// use rlx::DType;
    /// assert_eq!(DType::F64.complex(), Some(DType::C64));
    /// assert_eq!(DType::I64.complex(), None);
    /// ```
    #[inline]
    pub fn complex(self) -> Option<DType> {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::C32 => Some(DType::C32),
            DType::F64 | DType::C64 => Some(DType::C64),
            DType::I64 | DType::Bool => None,
        }
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
            DType::C32 => 8,
            DType::C64 => 16,
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
            DType::C32 => "c32",
            DType::C64 => "c64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
