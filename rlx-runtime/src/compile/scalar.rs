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

/// One scalar instruction; register numbers are relative to the step's base.
#[derive(Clone, Debug)]
pub(crate) enum SInstr {
    Load {
        val: Val,
        dst: u32,
    },
    Unary {
        op: UnaryOp,
        ty: SType,
        x: u32,
        dst: u32,
    },
    Binary {
        op: BinaryOp,
        ty: SType,
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

impl ScalarStep {
    /// Writes the constant registers (once per state).
    pub(crate) fn init(&self, file: &mut [f64]) {
        let r = &mut file[self.base..self.base + self.len];
        for &(i, v) in &self.consts {
            r[i as usize] = v;
        }
    }

    /// Runs the region.
    pub(crate) fn run(&self, env: &Env<'_>, file: &mut [f64], targets: &mut [Storage]) {
        let r = &mut file[self.base..self.base + self.len];
        for ins in &self.code {
            match *ins {
                SInstr::Load { val, dst } => r[dst as usize] = env.get(val).get_f64(0),
                SInstr::Unary { op, ty, x, dst } => {
                    r[dst as usize] = s_unary(op, ty, r[x as usize])
                }
                SInstr::Binary { op, ty, a, b, dst } => {
                    r[dst as usize] = s_binary(op, ty, r[a as usize], r[b as usize])
                }
                SInstr::Compare { op, a, b, dst } => {
                    r[dst as usize] = math::compare(op, r[a as usize], r[b as usize]) as u8 as f64
                }
                SInstr::Select { c, a, b, dst } => {
                    r[dst as usize] = if r[c as usize] != 0.0 {
                        r[a as usize]
                    } else {
                        r[b as usize]
                    }
                }
                SInstr::Cast { to, x, dst } => r[dst as usize] = to.round(r[x as usize]),
                SInstr::Store { src, target } => {
                    let v = r[src as usize];
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
