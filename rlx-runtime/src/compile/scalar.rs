//! Scalar regions: runs of 0-d element-wise ops on a register file.
//!
//! Physics code computes many 0-d values (energies, coefficients). Giving
//! each its own buffer and kernel call would cost far more than the
//! arithmetic, so a run of 0-d ops becomes one [`ScalarStep`]: a compact
//! instruction list over a file of `f64` registers. `f32`, `f16` and
//! `bf16` values are held exactly in `f64` registers and computed in `f32`
//! (then rounded to their dtype), `Bool` values are held as 0 and 1, so
//! results equal the per-op kernels'. `I64` values never enter a scalar
//! region (they would not fit exactly in `f64`).
//!
//! Constant registers are written once when a per-call state is created,
//! so a warm call runs only loads of the region's inputs, the ops, and the
//! stores of the values needed outside.

use half::{bf16, f16};
use rlx_core::{BinaryOp, CmpOp, DType, UnaryOp};

use super::exec::Env;
use super::math;
use super::plan::Val;
use crate::storage::Storage;

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
    /// The scalar type of `dtype`, or `None` for `I64`.
    pub(crate) fn of(dtype: DType) -> Option<SType> {
        match dtype {
            DType::F64 => Some(SType::F64),
            DType::F32 => Some(SType::F32),
            DType::F16 => Some(SType::F16),
            DType::BF16 => Some(SType::BF16),
            DType::Bool => Some(SType::Bool),
            DType::I64 => None,
        }
    }

    /// Rounds an exact value to this type.
    #[inline(always)]
    fn round(self, v: f64) -> f64 {
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

/// A compiled scalar region.
#[derive(Clone, Debug)]
pub(crate) struct ScalarStep {
    /// First register of this region in the shared register file.
    pub(crate) base: usize,
    /// Number of registers.
    pub(crate) len: usize,
    /// Constant registers, written when a state is created.
    pub(crate) consts: Vec<(u32, f64)>,
    pub(crate) code: Vec<SInstr>,
}

#[inline(always)]
fn s_unary(op: UnaryOp, ty: SType, x: f64) -> f64 {
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

/// The instruction computing `dst = op(a, b)` on values of type `ty`.
pub(crate) fn binary_instr(op: BinaryOp, ty: SType, a: u32, b: u32, dst: u32) -> SInstr {
    match (op, ty) {
        (BinaryOp::Add, SType::F64) => SInstr::AddF64 { a, b, dst },
        (BinaryOp::Sub, SType::F64) => SInstr::SubF64 { a, b, dst },
        (BinaryOp::Mul, SType::F64) => SInstr::MulF64 { a, b, dst },
        (BinaryOp::Div, SType::F64) => SInstr::DivF64 { a, b, dst },
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

impl ScalarStep {
    /// Rewrites operands that read the previous instruction's result to
    /// read the accumulator ([`ACC`]) instead.
    pub(crate) fn use_accumulator(&mut self) {
        let mut last: Option<u32> = None;
        for ins in &mut self.code {
            let sub = |x: &mut u32| {
                if Some(*x) == last {
                    *x = ACC;
                }
            };
            let dst = match ins {
                SInstr::Load { dst, .. } => Some(*dst),
                SInstr::Unary { x, dst, .. }
                | SInstr::Powi { x, dst, .. }
                | SInstr::Cast { x, dst, .. } => {
                    sub(x);
                    Some(*dst)
                }
                SInstr::Binary { a, b, dst, .. }
                | SInstr::AddF64 { a, b, dst }
                | SInstr::SubF64 { a, b, dst }
                | SInstr::MulF64 { a, b, dst }
                | SInstr::DivF64 { a, b, dst }
                | SInstr::MaxF64 { a, b, dst }
                | SInstr::MinF64 { a, b, dst }
                | SInstr::Compare { a, b, dst, .. } => {
                    sub(a);
                    sub(b);
                    Some(*dst)
                }
                SInstr::Select { c, a, b, dst } => {
                    sub(c);
                    sub(a);
                    sub(b);
                    Some(*dst)
                }
                SInstr::Store { src, .. } => {
                    sub(src);
                    None
                }
            };
            if dst.is_some() {
                last = dst;
            }
        }
    }

    /// Writes the constant registers (once per state).
    pub(crate) fn init(&self, file: &mut [f64]) {
        let r = &mut file[self.base..self.base + self.len];
        for &(i, v) in &self.consts {
            r[i as usize] = v;
        }
    }

    /// Runs the region.
    ///
    /// The value computed last is also kept in a local accumulator: an
    /// operand equal to [`ACC`] reads it from there instead of the register
    /// file, so a dependent chain does not wait on a store and a reload per op.
    pub(crate) fn run(&self, env: &Env<'_>, file: &mut [f64], targets: &mut [Storage]) {
        let r = &mut file[self.base..self.base + self.len];
        let mut acc = 0.0;
        macro_rules! get {
            ($i:expr) => {
                if $i == ACC {
                    acc
                } else {
                    r[$i as usize]
                }
            };
        }
        for ins in &self.code {
            match *ins {
                SInstr::Load { val, dst } => {
                    acc = env.get(val).get_f64(0);
                    r[dst as usize] = acc;
                }
                SInstr::Unary { f, x, dst } => {
                    acc = f(get!(x));
                    r[dst as usize] = acc;
                }
                SInstr::Powi { n, ty, x, dst } => {
                    acc = s_unary(UnaryOp::Powi(n), ty, get!(x));
                    r[dst as usize] = acc;
                }
                SInstr::AddF64 { a, b, dst } => {
                    acc = get!(a) + get!(b);
                    r[dst as usize] = acc;
                }
                SInstr::SubF64 { a, b, dst } => {
                    acc = get!(a) - get!(b);
                    r[dst as usize] = acc;
                }
                SInstr::MulF64 { a, b, dst } => {
                    acc = get!(a) * get!(b);
                    r[dst as usize] = acc;
                }
                SInstr::DivF64 { a, b, dst } => {
                    acc = get!(a) / get!(b);
                    r[dst as usize] = acc;
                }
                SInstr::MaxF64 { a, b, dst } => {
                    acc = math::binary(BinaryOp::Max, get!(a), get!(b));
                    r[dst as usize] = acc;
                }
                SInstr::MinF64 { a, b, dst } => {
                    acc = math::binary(BinaryOp::Min, get!(a), get!(b));
                    r[dst as usize] = acc;
                }
                SInstr::Binary { f, a, b, dst } => {
                    acc = f(get!(a), get!(b));
                    r[dst as usize] = acc;
                }
                SInstr::Compare { op, a, b, dst } => {
                    acc = math::compare(op, get!(a), get!(b)) as u8 as f64;
                    r[dst as usize] = acc;
                }
                SInstr::Select { c, a, b, dst } => {
                    acc = if get!(c) != 0.0 { get!(a) } else { get!(b) };
                    r[dst as usize] = acc;
                }
                SInstr::Cast { to, x, dst } => {
                    acc = to.round(get!(x));
                    r[dst as usize] = acc;
                }
                SInstr::Store { src, target } => {
                    let v = get!(src);
                    match &mut targets[target as usize] {
                        Storage::F64(s) => s[0] = v,
                        Storage::F32(s) => s[0] = v as f32,
                        Storage::F16(s) => s[0] = f16::from_f64(v),
                        Storage::BF16(s) => s[0] = bf16::from_f64(v),
                        Storage::I64(s) => s[0] = v as i64,
                        Storage::Bool(s) => s[0] = v != 0.0,
                    }
                }
            }
        }
    }
}
