//! The register banks of fused loops and the operand and destination
//! addresses of their instructions: shared by the fused step, its register
//! chains, the planner and the per-call state (imports nothing of `compile`).

use rlx_core::DType;

/// Elements per block: a 1024-element `f32` register is 4 KiB, so a chain
/// with a handful of live values stays in L1 (L2 for wide `f64` chains)
/// while the per-block dispatch is spread over enough elements to vanish.
pub(crate) const BLOCK: usize = 1024;

/// A register bank (compute type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bank {
    F32,
    F64,
    I64,
    Bool,
}

impl Bank {
    /// The bank values of `dtype` are computed in.
    pub(crate) fn of(dtype: DType) -> Bank {
        match dtype {
            DType::F32 | DType::F16 | DType::BF16 => Bank::F32,
            DType::F64 => Bank::F64,
            DType::I64 => Bank::I64,
            DType::Bool => Bank::Bool,
            DType::C32 | DType::C64 => unreachable!("complex values run through kernel steps"),
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Bank::F32 => 0,
            Bank::F64 => 1,
            Bank::I64 => 2,
            Bank::Bool => 3,
        }
    }
}

/// A register: bank and index within the bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reg {
    pub(crate) bank: Bank,
    pub(crate) idx: u32,
}

/// Where an element-wise op reads an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// A register.
    Reg(Reg),
    /// Element 0 of a splat register (a broadcast scalar).
    Splat(Reg),
    /// A contiguous leaf of the register's element type, read in place.
    Direct(u32),
}

/// Where an element-wise op writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Out {
    /// A register.
    Reg(Reg),
    /// Straight into target `t` of the step (its dtype is the bank's own).
    Target(u32),
}

/// The per-call register banks, `BLOCK` elements per register.
#[derive(Debug, Default)]
pub(crate) struct Registers {
    pub(crate) f32: Vec<f32>,
    pub(crate) f64: Vec<f64>,
    pub(crate) i64: Vec<i64>,
    pub(crate) bool: Vec<bool>,
}

impl Registers {
    /// Banks holding `counts[bank]` registers each.
    pub(crate) fn new(counts: [usize; 4]) -> Registers {
        Registers {
            f32: vec![0.0; counts[0] * BLOCK],
            f64: vec![0.0; counts[1] * BLOCK],
            i64: vec![0; counts[2] * BLOCK],
            bool: vec![false; counts[3] * BLOCK],
        }
    }
}

/// Register `r` of a bank.
pub(crate) fn reg<T>(bank: &[T], r: Reg) -> &[T] {
    let s = r.idx as usize * BLOCK;
    &bank[s..s + BLOCK]
}

/// Register `r` of a bank, mutably.
pub(crate) fn reg_mut<T>(bank: &mut [T], r: Reg) -> &mut [T] {
    let s = r.idx as usize * BLOCK;
    &mut bank[s..s + BLOCK]
}
