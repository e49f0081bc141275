//! The instruction set of scalar regions ([`SInstr`] over [`SType`]
//! registers) and the per-op functions it calls: shared by the scalar step
//! that interprets it, the JIT that translates it and the planner that
//! emits it.

use half::{bf16, f16};
use rlx_core::{BinaryOp, CmpOp, DType, UnaryOp};

use crate::compile::base::env::Val;
use crate::compile::base::math;
use crate::compile::base::math::Real;

/// How a register's value is computed and rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SType {
    F64,
    F32,
    F16,
    BF16,
    Bool,
}

impl SType {
    /// The scalar type of `dtype`, or `None` for `I64` and the complex dtypes.
    pub(crate) fn of(dtype: DType) -> Option<SType> {
        match dtype {
            DType::F64 => Some(SType::F64),
            DType::F32 => Some(SType::F32),
            DType::F16 => Some(SType::F16),
            DType::BF16 => Some(SType::BF16),
            DType::Bool => Some(SType::Bool),
            DType::I64 | DType::C32 | DType::C64 => None,
        }
    }

    /// Rounds an exact value to this type.
    #[inline(always)]
    pub(crate) fn round(self, v: f64) -> f64 {
        match self {
            SType::F64 => v,
            SType::F32 => v as f32 as f64,
            // Through f32, as the fused loops and the reference kernels round.
            SType::F16 => f16::from_f32(v as f32).to_f64(),
            SType::BF16 => bf16::from_f32(v as f32).to_f64(),
            SType::Bool => (v != 0.0) as u8 as f64,
        }
    }
}

/// Operand number meaning "the value computed by the previous instruction".
pub(crate) const ACC: u32 = u32::MAX;

/// One scalar instruction; register numbers are relative to the step's base
/// (or [`ACC`]).
#[derive(Clone, Debug)]
pub(crate) enum SInstr {
    Load {
        val: Val,
        dst: u32,
    },
    /// `dst = f(x)`, `f` the op specialised to the value type.
    Unary {
        f: fn(f64) -> f64,
        x: u32,
        dst: u32,
    },
    /// `dst = x^n` in the value type.
    Powi {
        n: i32,
        ty: SType,
        x: u32,
        dst: u32,
    },
    /// `dst = -x` in `f64` (the common unary ops are inline: no call).
    NegF64 {
        x: u32,
        dst: u32,
    },
    /// `dst = |x|` in `f64`.
    AbsF64 {
        x: u32,
        dst: u32,
    },
    /// `dst = x * x` in `f64`.
    SquareF64 {
        x: u32,
        dst: u32,
    },
    /// `dst = 1 / x` in `f64`.
    RecipF64 {
        x: u32,
        dst: u32,
    },
    /// `dst = sqrt(x)` in `f64`.
    SqrtF64 {
        x: u32,
        dst: u32,
    },
    /// `dst = x^n` in `f64`.
    PowiF64 {
        n: i32,
        x: u32,
        dst: u32,
    },
    /// `dst = a + b` in `f64` (the common arithmetic is inline: no call).
    AddF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = a - b` in `f64`.
    SubF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = a * b` in `f64`.
    MulF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = a / b` in `f64`.
    DivF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = mul_zero(a, b)` in `f64` (0 where `a` is 0).
    MulZeroF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = max(a, b)` in `f64` (a NaN operand gives NaN).
    MaxF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = min(a, b)` in `f64`.
    MinF64 {
        a: u32,
        b: u32,
        dst: u32,
    },
    /// `dst = f(a, b)`, `f` the op specialised to the value type.
    Binary {
        f: fn(f64, f64) -> f64,
        a: u32,
        b: u32,
        dst: u32,
    },
    Compare {
        op: CmpOp,
        a: u32,
        b: u32,
        dst: u32,
    },
    Select {
        c: u32,
        a: u32,
        b: u32,
        dst: u32,
    },
    Cast {
        to: SType,
        x: u32,
        dst: u32,
    },
    Store {
        src: u32,
        target: u32,
    },
}

impl SInstr {
    /// Calls `f` on each register operand (a register number or [`ACC`]),
    /// in order, and returns the destination register (`None` for a
    /// store).
    pub(crate) fn visit_operands(&mut self, mut f: impl FnMut(&mut u32)) -> Option<u32> {
        match self {
            SInstr::Load { dst, .. } => Some(*dst),
            SInstr::Unary { x, dst, .. }
            | SInstr::Powi { x, dst, .. }
            | SInstr::NegF64 { x, dst }
            | SInstr::AbsF64 { x, dst }
            | SInstr::SquareF64 { x, dst }
            | SInstr::RecipF64 { x, dst }
            | SInstr::SqrtF64 { x, dst }
            | SInstr::PowiF64 { x, dst, .. }
            | SInstr::Cast { x, dst, .. } => {
                f(x);
                Some(*dst)
            }
            SInstr::Binary { a, b, dst, .. }
            | SInstr::AddF64 { a, b, dst }
            | SInstr::SubF64 { a, b, dst }
            | SInstr::MulF64 { a, b, dst }
            | SInstr::DivF64 { a, b, dst }
            | SInstr::MulZeroF64 { a, b, dst }
            | SInstr::MaxF64 { a, b, dst }
            | SInstr::MinF64 { a, b, dst }
            | SInstr::Compare { a, b, dst, .. } => {
                f(a);
                f(b);
                Some(*dst)
            }
            SInstr::Select { c, a, b, dst } => {
                f(c);
                f(a);
                f(b);
                Some(*dst)
            }
            SInstr::Store { src, .. } => {
                f(src);
                None
            }
        }
    }
}

#[inline(always)]
pub(crate) fn s_unary(op: UnaryOp, ty: SType, x: f64) -> f64 {
    match ty {
        SType::F64 => math::unary(op, x),
        SType::F32 => math::unary(op, x as f32) as f64,
        SType::F16 | SType::BF16 => ty.round(math::unary(op, x as f32) as f64),
        SType::Bool => math::unary_bool(op, x != 0.0) as u8 as f64,
    }
}

#[inline(always)]
fn s_binary(op: BinaryOp, ty: SType, a: f64, b: f64) -> f64 {
    match ty {
        SType::F64 => math::binary(op, a, b),
        SType::F32 => math::binary(op, a as f32, b as f32) as f64,
        SType::F16 | SType::BF16 => ty.round(math::binary(op, a as f32, b as f32) as f64),
        SType::Bool => math::binary_bool(op, a != 0.0, b != 0.0) as u8 as f64,
    }
}

/// The unary op `op` on values of type `ty`, as a plain function (`None`
/// for `Powi`, whose exponent is data).
pub(crate) fn unary_fn(op: UnaryOp, ty: SType) -> Option<fn(f64) -> f64> {
    macro_rules! pick {
        (UnaryOp::Powi($n:ident)) => {{
            let _ = $n;
            None
        }};
        ($k:expr) => {
            Some(match ty {
                SType::F64 => |x| s_unary($k, SType::F64, x),
                SType::F32 => |x| s_unary($k, SType::F32, x),
                SType::F16 => |x| s_unary($k, SType::F16, x),
                SType::BF16 => |x| s_unary($k, SType::BF16, x),
                SType::Bool => |x| s_unary($k, SType::Bool, x),
            })
        };
    }
    each_unary!(op, pick)
}

/// The instruction computing `dst = op(x)` on values of type `ty`.
pub(crate) fn unary_instr(op: UnaryOp, ty: SType, x: u32, dst: u32) -> SInstr {
    match (op, ty) {
        (UnaryOp::Neg, SType::F64) => SInstr::NegF64 { x, dst },
        (UnaryOp::Abs, SType::F64) => SInstr::AbsF64 { x, dst },
        (UnaryOp::Square, SType::F64) => SInstr::SquareF64 { x, dst },
        (UnaryOp::Recip, SType::F64) => SInstr::RecipF64 { x, dst },
        (UnaryOp::Sqrt, SType::F64) => SInstr::SqrtF64 { x, dst },
        (UnaryOp::Powi(n), SType::F64) => SInstr::PowiF64 { n, x, dst },
        (UnaryOp::Powi(n), _) => SInstr::Powi { n, ty, x, dst },
        _ => match unary_fn(op, ty) {
            Some(f) => SInstr::Unary { f, x, dst },
            None => unreachable!("only `powi` has no scalar function"),
        },
    }
}

/// `x^n` as `f64::powi` computes it at run time (see [`Real::powi`]), so
/// results are bit-identical to the reference kernels, without the call.
#[inline(always)]
pub(crate) fn powi_f64(x: f64, n: i32) -> f64 {
    Real::powi(x, n)
}

/// The instruction computing `dst = op(a, b)` on values of type `ty`.
pub(crate) fn binary_instr(op: BinaryOp, ty: SType, a: u32, b: u32, dst: u32) -> SInstr {
    match (op, ty) {
        (BinaryOp::Add, SType::F64) => SInstr::AddF64 { a, b, dst },
        (BinaryOp::Sub, SType::F64) => SInstr::SubF64 { a, b, dst },
        (BinaryOp::Mul, SType::F64) => SInstr::MulF64 { a, b, dst },
        (BinaryOp::Div, SType::F64) => SInstr::DivF64 { a, b, dst },
        (BinaryOp::MulZero, SType::F64) => SInstr::MulZeroF64 { a, b, dst },
        (BinaryOp::Max, SType::F64) => SInstr::MaxF64 { a, b, dst },
        (BinaryOp::Min, SType::F64) => SInstr::MinF64 { a, b, dst },
        _ => SInstr::Binary {
            f: binary_fn(op, ty),
            a,
            b,
            dst,
        },
    }
}

/// The binary op `op` on values of type `ty`, as a plain function.
pub(crate) fn binary_fn(op: BinaryOp, ty: SType) -> fn(f64, f64) -> f64 {
    macro_rules! pick {
        ($k:expr) => {
            match ty {
                SType::F64 => |a, b| s_binary($k, SType::F64, a, b),
                SType::F32 => |a, b| s_binary($k, SType::F32, a, b),
                SType::F16 => |a, b| s_binary($k, SType::F16, a, b),
                SType::BF16 => |a, b| s_binary($k, SType::BF16, a, b),
                SType::Bool => |a, b| s_binary($k, SType::Bool, a, b),
            }
        };
    }
    each_binary!(op, pick)
}
