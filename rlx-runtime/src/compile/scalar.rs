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
use rlx_core::{BinaryOp, CmpOp, DType, TensorType, UnaryOp};

use super::exec::{concrete, Env};
use super::math;
use super::plan::{Loc, Val};
use crate::storage::Storage;
use crate::value::Arg;

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
    pub(crate) native: Option<std::sync::Arc<super::jit::Native>>,
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

/// `x^n` as `f64::powi` computes it at run time (compiler-builtins'
/// `__powidf2`: square-and-multiply over `|n|`, then one reciprocal for a
/// negative `n`), so results are bit-identical to the reference kernels,
/// without the call.
#[inline(always)]
fn powi_f64(x: f64, n: i32) -> f64 {
    let mut a = x;
    let mut b = n.unsigned_abs();
    let mut r = 1.0;
    loop {
        if b & 1 != 0 {
            r *= a;
        }
        b >>= 1;
        if b == 0 {
            break;
        }
        a *= a;
    }
    if n < 0 {
        1.0 / r
    } else {
        r
    }
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
                | SInstr::NegF64 { x, dst }
                | SInstr::AbsF64 { x, dst }
                | SInstr::SquareF64 { x, dst }
                | SInstr::RecipF64 { x, dst }
                | SInstr::SqrtF64 { x, dst }
                | SInstr::PowiF64 { x, dst, .. }
                | SInstr::Cast { x, dst, .. } => {
                    sub(x);
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
            // A scalar program loads inputs only (see `plan::scalar_program`).
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
        }
    }
}
