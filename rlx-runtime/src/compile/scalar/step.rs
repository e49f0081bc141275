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
use rlx_core::{BinaryOp, DType, TensorType, UnaryOp};

use crate::compile::base::env::{concrete, Env, Loc, Val};
use crate::compile::base::math;
use crate::compile::scalar::code::{powi_f64, s_unary, SInstr, ACC};
#[cfg(feature = "jit")]
use crate::compile::scalar::native::call::Native;
use crate::storage::Storage;
use crate::value::Arg;

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
    /// The region compiled to native code, when the `jit` feature is on
    /// and the translation covers it.
    #[cfg(feature = "jit")]
    pub(crate) native: Option<std::sync::Arc<Native>>,
}

impl ScalarStep {
    /// Rewrites operands that read the previous instruction's result to
    /// read the accumulator ([`ACC`]) instead.
    pub(crate) fn use_accumulator(&mut self) {
        let mut last: Option<u32> = None;
        for ins in &mut self.code {
            let dst = ins.visit_operands(|x| {
                if Some(*x) == last {
                    *x = ACC;
                }
            });
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

    /// Runs the region, reading operands from `env` and writing `targets`.
    pub(crate) fn run(&self, env: &Env<'_>, file: &mut [f64], targets: &mut [Storage]) {
        self.exec(file, &mut EnvIo { env, targets });
    }

    /// Registers of `file` that [`ScalarStep::exec_with_consts`] uses.
    pub(crate) fn scratch_len(&self) -> usize {
        #[cfg(feature = "jit")]
        if let Some(n) = &self.native {
            return self.base + n.loads() + n.stores();
        }
        self.base + self.len
    }

    /// Runs the region through `io` on a register file that is not kept
    /// between calls (the interpreter's constant registers are written first).
    pub(crate) fn exec_with_consts(&self, file: &mut [f64], io: &mut impl ScalarIo) {
        #[cfg(feature = "jit")]
        if self.native.is_some() {
            return self.exec(file, io);
        }
        self.init(file);
        self.exec(file, io);
    }

    /// Runs the region through `io`: its native code if it has some (the
    /// leaves are gathered into `file`'s window, the code writes the stored
    /// values after them), else the interpreter.
    #[inline(always)]
    pub(crate) fn exec(&self, file: &mut [f64], io: &mut impl ScalarIo) {
        #[cfg(feature = "jit")]
        if let Some(n) = &self.native {
            let window = &mut file[self.base..self.base + n.loads() + n.stores()];
            let (ins, outs) = window.split_at_mut(n.loads());
            // `jit::compile` only accepts regions whose loads come first.
            for (slot, ins) in ins.iter_mut().zip(&self.code) {
                if let SInstr::Load { val, .. } = ins {
                    *slot = io.load(*val);
                }
            }
            n.call(ins, outs);
            for (t, &v) in outs.iter().enumerate() {
                io.store(t as u32, v);
            }
            return;
        }
        self.interpret(file, io)
    }

    /// Interprets the region with loads and stores through `io`.
    ///
    /// The value computed last is also kept in a local accumulator: an
    /// operand equal to [`ACC`] reads it from there instead of the register
    /// file, so a dependent chain does not wait on a store and a reload per op.
    #[inline(always)]
    fn interpret(&self, file: &mut [f64], io: &mut impl ScalarIo) {
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
        macro_rules! set {
            ($dst:expr, $v:expr) => {{
                acc = $v;
                r[$dst as usize] = acc;
            }};
        }
        for ins in &self.code {
            match *ins {
                SInstr::Load { val, dst } => set!(dst, io.load(val)),
                SInstr::Unary { f, x, dst } => set!(dst, f(get!(x))),
                SInstr::Powi { n, ty, x, dst } => {
                    set!(dst, s_unary(UnaryOp::Powi(n), ty, get!(x)))
                }
                SInstr::NegF64 { x, dst } => set!(dst, -get!(x)),
                SInstr::AbsF64 { x, dst } => set!(dst, get!(x).abs()),
                SInstr::SquareF64 { x, dst } => set!(dst, get!(x) * get!(x)),
                SInstr::RecipF64 { x, dst } => set!(dst, 1.0 / get!(x)),
                SInstr::SqrtF64 { x, dst } => set!(dst, get!(x).sqrt()),
                SInstr::PowiF64 { n, x, dst } => set!(dst, powi_f64(get!(x), n)),
                SInstr::AddF64 { a, b, dst } => set!(dst, get!(a) + get!(b)),
                SInstr::SubF64 { a, b, dst } => set!(dst, get!(a) - get!(b)),
                SInstr::MulF64 { a, b, dst } => set!(dst, get!(a) * get!(b)),
                SInstr::DivF64 { a, b, dst } => set!(dst, get!(a) / get!(b)),
                SInstr::MulZeroF64 { a, b, dst } => {
                    let x = get!(a);
                    set!(dst, if x == 0.0 { 0.0 } else { x * get!(b) })
                }
                SInstr::MaxF64 { a, b, dst } => {
                    set!(dst, math::binary(BinaryOp::Max, get!(a), get!(b)))
                }
                SInstr::MinF64 { a, b, dst } => {
                    set!(dst, math::binary(BinaryOp::Min, get!(a), get!(b)))
                }
                SInstr::Binary { f, a, b, dst } => set!(dst, f(get!(a), get!(b))),
                SInstr::Compare { op, a, b, dst } => {
                    set!(dst, math::compare(op, get!(a), get!(b)) as u8 as f64)
                }
                SInstr::Select { c, a, b, dst } => {
                    set!(dst, if get!(c) != 0.0 { get!(a) } else { get!(b) })
                }
                SInstr::Cast { to, x, dst } => set!(dst, to.round(get!(x))),
                SInstr::Store { src, target } => io.store(target, get!(src)),
            }
        }
    }
}

/// Where a scalar region reads its leaves and writes its stored values.
pub(crate) trait ScalarIo {
    /// The value of leaf `val` (a 0-d value outside the region).
    fn load(&mut self, val: Val) -> f64;
    /// Writes `v` to the region's target `target`.
    fn store(&mut self, target: u32, v: f64);
}

/// The value of a 0-d argument, as a scalar region holds it.
#[inline(always)]
pub(crate) fn arg_f64(a: &Arg<'_>) -> f64 {
    match *a {
        Arg::F64(v) => v,
        Arg::F32(v) => v as f64,
        Arg::Tensor(t) => concrete(t).get_f64(0),
    }
}

/// Leaves from input numbers (the inputs of a scalar program, widened to
/// `f64`), stored values into result numbers.
pub(crate) struct NumberIo<'a> {
    pub(crate) locs: &'a [Loc],
    /// One number per input.
    pub(crate) inputs: &'a [f64],
    pub(crate) output_of_target: &'a [u32],
    /// The type of each output (`F32` results are rounded to `f32`).
    pub(crate) types: &'a [TensorType],
    /// One number per output, overwritten by the stores.
    pub(crate) out: &'a mut [f64],
}

impl ScalarIo for NumberIo<'_> {
    #[inline(always)]
    fn load(&mut self, val: Val) -> f64 {
        let Loc::Input(i) = self.locs[val as usize] else {
            // A scalar program loads inputs only (see `planner::scalar_program`).
            return f64::NAN;
        };
        self.inputs[i as usize]
    }

    #[inline(always)]
    fn store(&mut self, target: u32, v: f64) {
        let j = self.output_of_target[target as usize] as usize;
        self.out[j] = round_to(self.types[j].dtype, v);
    }
}

/// `v` as a number of type `dtype` would hold it, widened back to `f64`
/// (`F32` rounds; every other float type of a scalar program is `F64`).
#[inline(always)]
pub(crate) fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        _ => v,
    }
}

/// Leaves from a run's [`Env`], stored values into the step's targets.
struct EnvIo<'a, 'e> {
    env: &'a Env<'e>,
    targets: &'a mut [Storage],
}

impl ScalarIo for EnvIo<'_, '_> {
    #[inline(always)]
    fn load(&mut self, val: Val) -> f64 {
        self.env.get(val).get_f64(0)
    }

    #[inline(always)]
    fn store(&mut self, target: u32, v: f64) {
        match &mut self.targets[target as usize] {
            Storage::F64(s) => s[0] = v,
            Storage::F32(s) => s[0] = v as f32,
            Storage::F16(s) => s[0] = f16::from_f64(v),
            Storage::BF16(s) => s[0] = bf16::from_f64(v),
            Storage::I64(s) => s[0] = v as i64,
            Storage::Bool(s) => s[0] = v != 0.0,
            Storage::C32(_) | Storage::C64(_) => {
                unreachable!("complex values run through kernel steps")
            }
        }
    }
}
