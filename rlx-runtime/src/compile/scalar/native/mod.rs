//! Native code for scalar regions, generated with Cranelift (feature `jit`).
//!
//! A scalar region's instruction list ([`SInstr`]) is straight-line code
//! over `f64` registers, so it translates one to one into Cranelift IR with
//! every register an SSA value (held in lane 0 of an `f64x2`, so that
//! comparisons give masks and `mul_zero`, `select` and max/min need no
//! branch): no dispatch, no register-file traffic. The
//! generated function has the C signature `fn(ins: *const f64, outs: *mut
//! f64, spill: *mut f64)`: it reads the region's leaves from `ins` (in the
//! order of its `Load` instructions) and writes each stored value to
//! `outs[target]`; a region in one function with at most [`REG_LEAVES`]
//! leaves takes them as `f64` arguments instead, `fn(x0, …, outs)`. A
//! long region (a scalarised pair loop has tens of thousands of
//! instructions) becomes several such functions of at most
//! [`CHUNK`] instructions, run in order, passing values through `spill`.
//! Dtype conversions at the boundary stay in Rust (the caller fills `ins`
//! with `f64` values and converts `outs` to the targets' dtypes), exactly as
//! the interpreter does, so results are bit-identical to it:
//! - the inline `f64` ops (`+ - * /`, neg, abs, square, recip, sqrt,
//!   `mul_zero`, NaN-propagating max/min, comparisons, select) map to the
//!   same IEEE operations (lane 0 of a packed op is the scalar op), and
//!   `powi` to the same square-and-multiply sequence as
//!   [`crate::compile::scalar::step`]'s `powi_f64`;
//! - every other op calls the interpreter's own function for it (through
//!   one `extern "C"` trampoline per arity), so the op math is never
//!   written twice.
//!
//! Regions the translation does not cover (a `powi` or a cast in `f16` or
//! `bf16`) keep running in the interpreter.
//!
//! Safety: the code pointer is only turned into a function after
//! Cranelift finalised it, the module is freed only when the [`Native`]
//! holding it is dropped (plans own it, so no call can be running), and the
//! buffers passed in are checked to be long enough on every call.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{
    types, AbiParam, Endianness, InstBuilder, MemFlagsData, Signature, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use rlx_core::CmpOp;

use crate::compile::scalar::code::{SInstr, SType, ACC};

pub(crate) mod call;
pub(crate) mod guard;
pub(crate) mod layout;

use crate::compile::scalar::native::layout::{Layout, CHUNK};

use crate::compile::scalar::native::call::{
    BinaryFn, Entry, LeafFn, Native, RegionFn, UnaryFn, REG_LEAVES,
};

extern "C" fn call_unary(f: *const UnaryFn, x: f64) -> f64 {
    // SAFETY: `f` points into a `Native::unary` box, alive while its code is.
    unsafe { (*f)(x) }
}

extern "C" fn call_binary(f: *const BinaryFn, a: f64, b: f64) -> f64 {
    // SAFETY: `f` points into a `Native::binary` box, alive while its code is.
    unsafe { (*f)(a, b) }
}

/// Cranelift's optimisation level for a region of `len` instructions.
/// Our passes already eliminated common subexpressions and folded
/// constants per element, so on a long region Cranelift's e-graph
/// optimiser found little to gain (the 10-observation reprojection
/// Jacobian ran as fast without it: 3.13 against 3.2 µs) at a large part
/// of the compile time (a half with the backtracking register allocator,
/// a seventh with the single-pass one). A region of one function is
/// cheap to compile either way, and there it still schedules loads and
/// keeps fewer values live across the code: the number-form Lennard-Jones
/// gradient's code went from 189 to 180 instructions a call (callgrind)
/// for about 0.1 ms more on its first call (1.46-1.58 against 1.57-1.68 ms).
fn opt_level(len: usize) -> &'static str {
    if len <= CHUNK {
        "speed"
    } else {
        "none"
    }
}

/// Regions longer than this many instructions are register-allocated in
/// one pass (see [`regalloc`]).
const ONE_PASS_REGALLOC: usize = 2 * CHUNK;

/// Cranelift's register allocator for a region of `len` instructions.
/// The backtracking allocator gives the faster code, but its time grows
/// quickly with the number of values live across the calls a region
/// makes (each call clobbers every float register). On the 3550
/// instructions (20 calls) of the 10-observation reprojection Jacobian it
/// took 30-60 ms against 5 ms for the single-pass allocator, whose code
/// ran 20% slower (3.75 µs against 3.13 µs a call): tens of thousands of
/// calls to pay back. Short regions keep the better code.
fn regalloc(len: usize) -> &'static str {
    if len > ONE_PASS_REGALLOC {
        "single_pass"
    } else {
        "backtracking"
    }
}

/// `code` with every [`ACC`] operand replaced by the register it stands for
/// (the destination of the previous instruction that has one).
fn resolve_accumulator(code: &[SInstr]) -> Vec<SInstr> {
    let mut last = ACC;
    code.iter()
        .map(|ins| {
            let mut ins = ins.clone();
            let dst = ins.visit_operands(|x| {
                if *x == ACC {
                    *x = last;
                }
            });
            if let Some(d) = dst {
                last = d;
            }
            ins
        })
        .collect()
}

/// Compiles a scalar region (its `code` over `len` registers, with
/// constant registers `consts`) to native code; `None` if the region holds an
/// instruction the translation does not cover, or Cranelift fails (the
/// interpreter then runs the region, so this is never an error).
pub(crate) fn compile(
    code: &[SInstr],
    len: usize,
    consts: &[(u32, f64)],
    targets: usize,
) -> Option<Native> {
    compile_as(code, len, consts, targets, true)
}

/// [`compile`], with a fast function (see `guard`) where `fast` and the
/// region allows one.
fn compile_as(
    code: &[SInstr],
    len: usize,
    consts: &[(u32, f64)],
    targets: usize,
    fast: bool,
) -> Option<Native> {
    let leading_loads = code
        .iter()
        .take_while(|i| matches!(i, SInstr::Load { .. }))
        .count();
    let all_loads = code
        .iter()
        .filter(|i| matches!(i, SInstr::Load { .. }))
        .count();
    // The callers gather the leaves from the leading `Load`s.
    if leading_loads != all_loads || !code.iter().all(covered) {
        return None;
    }
    let code = resolve_accumulator(code);
    if code
        .clone()
        .iter_mut()
        .any(|i| i.visit_operands(|_| {}).is_some_and(|d| d as usize >= len))
    {
        return None;
    }
    let layout = Layout::new(&code, len, consts);
    let mut flags = settings::builder();
    flags.set("use_colocated_libcalls", "false").ok()?;
    flags.set("is_pic", "false").ok()?;
    flags.set("opt_level", opt_level(code.len())).ok()?;
    flags.set("regalloc_algorithm", regalloc(code.len())).ok()?;
    // Cranelift's IR verifier re-checks the IR built here: a debugging aid
    // that was about a quarter of Cranelift's instructions on first calls.
    // Debug builds (and so the test suite) keep it; optimised builds skip it.
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    flags.set("enable_verifier", verify).ok()?;
    let isa = cranelift_native::builder()
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();

    let mut unary: Vec<UnaryFn> = Vec::new();
    let mut binary: Vec<BinaryFn> = Vec::new();
    for ins in &code {
        match ins {
            SInstr::Unary { f, .. } => unary.push(*f),
            SInstr::Binary { f, .. } => binary.push(*f),
            _ => {}
        }
    }
    let unary = unary.into_boxed_slice();
    let binary = binary.into_boxed_slice();

    // A region of one function with few leaves takes them in registers.
    let in_regs = code.len() <= CHUNK && all_loads <= REG_LEAVES;
    let mut sig = module.make_signature();
    if in_regs {
        for _ in 0..all_loads {
            sig.params.push(AbiParam::new(types::F64));
        }
        sig.params.push(AbiParam::new(ptr));
    } else {
        for _ in 0..3 {
            sig.params.push(AbiParam::new(ptr));
        }
    }
    // A region in one function whose `mul_zero`s can run as plain products
    // becomes that fast function instead (see `guard`); its exact code is
    // compiled only if a call needs it.
    let checked = (fast && code.len() <= CHUNK)
        .then(|| guard::checked_stores(&code, len))
        .flatten();
    let exact = checked
        .is_some()
        .then(|| Box::new(guard::Exact::new(&code, len, consts, targets, all_loads)));
    let mut ctx = Context::new();
    let mut fctx = FunctionBuilderContext::new();
    let mut ids = Vec::new();
    let mut define = |name: String,
                      chunk: &[SInstr],
                      checked: Option<(&[bool], &guard::Exact)>,
                      calls: &mut (usize, usize)| {
        let id = module.declare_function(&name, Linkage::Local, &sig).ok()?;
        ctx.func.signature = sig.clone();
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let gen = Gen {
            layout: &layout,
            unary: &unary,
            binary: &binary,
            ptr,
            call_conv: module.isa().default_call_conv(),
            in_regs,
            checked,
        };
        gen.chunk(&mut b, chunk, len, calls)?;
        b.finalize(module.target_config());
        module.define_function(id, &mut ctx).ok()?;
        module.clear_context(&mut ctx);
        Some(id)
    };
    let mut calls = (0, 0);
    match (&checked, &exact) {
        (Some(checked), Some(exact)) => {
            ids.push(define(
                "fast".into(),
                &code,
                Some((checked, exact)),
                &mut calls,
            )?);
        }
        _ => {
            for (c, chunk) in code.chunks(CHUNK).enumerate() {
                ids.push(define(format!("region{c}"), chunk, None, &mut calls)?);
            }
        }
    }
    module.finalize_definitions().ok()?;
    let (entry, spill) = if in_regs {
        let code = module.get_finalized_function(*ids.first()?);
        (Entry::Registers(LeafFn(code)), 0)
    } else {
        let funcs = ids
            .into_iter()
            .map(|id| {
                let code = module.get_finalized_function(id);
                // SAFETY: `code` is a finalised function declared above with
                // the signature `(ptr, ptr, ptr) -> ()` in the platform's
                // default (C) calling convention, which is `RegionFn`.
                unsafe { std::mem::transmute::<*const u8, RegionFn>(code) }
            })
            .collect::<Vec<_>>();
        let spill = if funcs.len() > 1 { len } else { 0 };
        (Entry::Memory(funcs), spill)
    };
    Some(Native {
        entry,
        exact,
        spill,
        loads: all_loads,
        stores: targets,
        module: Some(module),
        unary,
        binary,
    })
}

/// The type every register is held in: lane 0 holds its `f64` value.
/// Comparisons then give lane masks (`cmppd`), so `mul_zero`, `select`,
/// comparisons and max/min run without branches (a scalar `select` on a
/// float comparison is two conditional jumps on x86). Lane 1 is never
/// read: loads and constants leave it zero, and ops on zeros keep it zero
/// or NaN (never a subnormal, which would slow packed ops down).
const V: types::Type = types::F64X2;

/// The values of a region's registers inside one generated function.
struct Regs<'a> {
    layout: &'a Layout,
    vals: Vec<Option<Value>>,
    leaves: Leaves,
    /// The spill buffer (`None` for a function taking its leaves in
    /// registers, which is a whole region).
    spill: Option<Value>,
    /// `+0` in both lanes.
    zero: Value,
}

/// Where a function's leaves come from.
enum Leaves {
    /// Loaded from `ins`.
    Memory(Value),
    /// Its `f64` parameters, in order.
    Registers(Vec<Value>),
}

impl Regs<'_> {
    /// The value of register `r`: computed in this function, a leaf, a
    /// constant, or a value of an earlier function read from the spill
    /// buffer (`None` for a register never written: the region is refused).
    fn get(&mut self, b: &mut FunctionBuilder<'_>, r: u32) -> Option<Value> {
        let ri = r as usize;
        if let Some(v) = *self.vals.get(ri)? {
            return Some(v);
        }
        let v = if let Some(k) = self.layout.load_of[ri] {
            match &self.leaves {
                Leaves::Memory(ins) => load(b, *ins, 8 * k),
                Leaves::Registers(args) => in_lane0(b, self.zero, *args.get(k as usize)?),
            }
        } else if let Some(c) = self.layout.const_of[ri] {
            constant(b, c)
        } else if let (true, Some(spill)) = (self.layout.spilled[ri], self.spill) {
            load(b, spill, 8 * r)
        } else {
            return None;
        };
        self.vals[ri] = Some(v);
        Some(v)
    }
}

/// `x` (an `f64` in a register) in lane 0 over `zero`'s lane 1: one
/// `movsd` between registers (`scalar_to_vector` zeroes a fresh register
/// for each value first: three instructions).
fn in_lane0(b: &mut FunctionBuilder<'_>, zero: Value, x: Value) -> Value {
    b.ins().insertlane(zero, x, 0)
}

/// The `f64` at `base + offset` into lane 0 (one `movsd`).
fn load(b: &mut FunctionBuilder<'_>, base: Value, offset: u32) -> Value {
    let x = b
        .ins()
        .load(types::F64, MemFlagsData::trusted(), base, offset as i32);
    b.ins().scalar_to_vector(V, x)
}

/// Lane 0 of `v` stored at `base + offset` (one `movsd`).
fn store(b: &mut FunctionBuilder<'_>, v: Value, base: Value, offset: u32) {
    let x = b.ins().extractlane(v, 0);
    b.ins()
        .store(MemFlagsData::trusted(), x, base, offset as i32);
}

/// The constant `c` in lane 0, zero in lane 1.
fn constant(b: &mut FunctionBuilder<'_>, c: f64) -> Value {
    bits(b, c.to_bits())
}

/// The sign bit of an `f64`.
const SIGN: u64 = 1 << 63;

/// The `f64` of bits `x` in lane 0, zero in lane 1.
fn bits(b: &mut FunctionBuilder<'_>, x: u64) -> Value {
    let mut bytes = x.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0; 8]);
    let k = b.func.dfg.constants.insert(bytes.into());
    b.ins().vconst(V, k)
}

/// The lane mask of `cc(x, y)`, as floats (all ones where it holds).
fn mask(b: &mut FunctionBuilder<'_>, cc: FloatCC, x: Value, y: Value) -> Value {
    let m = b.ins().fcmp(cc, x, y);
    as_floats(b, m)
}

/// The bits of `m` (an integer vector) as `f64` lanes.
fn as_floats(b: &mut FunctionBuilder<'_>, m: Value) -> Value {
    let little = MemFlagsData::new().with_endianness(Endianness::Little);
    b.ins().bitcast(V, little, m)
}

/// What the translation of each function of a region shares.
struct Gen<'a> {
    layout: &'a Layout,
    unary: &'a [UnaryFn],
    binary: &'a [BinaryFn],
    ptr: types::Type,
    call_conv: cranelift_codegen::isa::CallConv,
    /// Whether the function takes its leaves as `f64` arguments (see
    /// [`REG_LEAVES`]).
    in_regs: bool,
    /// For the fast function of a region (see `guard`): per instruction,
    /// whether it stores a value the function checks before returning, and
    /// the region's exact code, run where the check fails.
    checked: Option<(&'a [bool], &'a guard::Exact)>,
}

impl Gen<'_> {
    /// Translates `chunk` (operands resolved) into the function `b` builds;
    /// `calls` counts the unary and binary calls translated so far.
    fn chunk(
        &self,
        b: &mut FunctionBuilder<'_>,
        chunk: &[SInstr],
        len: usize,
        calls: &mut (usize, usize),
    ) -> Option<()> {
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        let params = b.block_params(block).to_vec();
        let (leaves, outs_ptr, spill_ptr) = if self.in_regs {
            let (outs, args) = params.split_last()?;
            (Leaves::Registers(args.to_vec()), *outs, None)
        } else {
            (Leaves::Memory(params[0]), params[1], Some(params[2]))
        };
        let guard = self.checked.map(|(_, exact)| guard::Call {
            ptr: self.ptr,
            call_conv: self.call_conv,
            exact,
        });
        if let Some(guard) = &guard {
            let at = match &leaves {
                Leaves::Registers(args) => guard::Leaves::Values(args.clone()),
                Leaves::Memory(ins) => guard::Leaves::At(*ins),
            };
            guard.or_switched(b, at, outs_ptr);
        }

        let mut sig1 = Signature::new(self.call_conv);
        sig1.params.push(AbiParam::new(self.ptr));
        sig1.params.push(AbiParam::new(types::F64));
        sig1.returns.push(AbiParam::new(types::F64));
        let mut sig2 = sig1.clone();
        sig2.params.push(AbiParam::new(types::F64));
        let sig1 = b.import_signature(sig1);
        let sig2 = b.import_signature(sig2);

        let zero = constant(b, 0.0);
        let one = constant(b, 1.0);
        let mut regs = Regs {
            layout: self.layout,
            vals: vec![None; len],
            leaves,
            spill: spill_ptr,
            zero,
        };
        let (mut checked_values, mut leaves) = (Vec::new(), Vec::new());
        for (i, instr) in chunk.iter().enumerate() {
            let (dst, v) = match *instr {
                SInstr::Load { dst, .. } => {
                    let v = regs.get(b, dst)?;
                    leaves.push(v);
                    (dst, v)
                }
                SInstr::Store { src, target } => {
                    let v = regs.get(b, src)?;
                    store(b, v, outs_ptr, 8 * target);
                    if self.checked.is_some_and(|(c, _)| c[i]) {
                        checked_values.push(b.ins().extractlane(v, 0));
                    }
                    continue;
                }
                SInstr::Unary { x, dst, .. } => {
                    let x = regs.get(b, x)?;
                    let x = b.ins().extractlane(x, 0);
                    let f = &self.unary[calls.0] as *const UnaryFn as i64;
                    calls.0 += 1;
                    let fp = b.ins().iconst(self.ptr, f);
                    let tramp = b.ins().iconst(self.ptr, call_unary as *const () as i64);
                    let call = b.ins().call_indirect(sig1, tramp, &[fp, x]);
                    let r = b.inst_results(call)[0];
                    (dst, in_lane0(b, zero, r))
                }
                SInstr::Binary { a, b: y, dst, .. } => {
                    let (x, y) = (regs.get(b, a)?, regs.get(b, y)?);
                    let (x, y) = (b.ins().extractlane(x, 0), b.ins().extractlane(y, 0));
                    let f = &self.binary[calls.1] as *const BinaryFn as i64;
                    calls.1 += 1;
                    let fp = b.ins().iconst(self.ptr, f);
                    let tramp = b.ins().iconst(self.ptr, call_binary as *const () as i64);
                    let call = b.ins().call_indirect(sig2, tramp, &[fp, x, y]);
                    let r = b.inst_results(call)[0];
                    (dst, in_lane0(b, zero, r))
                }
                // The sign bit flipped (resp. cleared) with one constant
                // mask: `fneg`/`fabs` of an `f64x2` build their masks
                // from all-ones each time (two more instructions).
                SInstr::NegF64 { x, dst } => (dst, {
                    let x = regs.get(b, x)?;
                    let sign = bits(b, SIGN);
                    b.ins().bxor(x, sign)
                }),
                SInstr::AbsF64 { x, dst } => (dst, {
                    let x = regs.get(b, x)?;
                    let magnitude = bits(b, !SIGN);
                    b.ins().band(x, magnitude)
                }),
                SInstr::SquareF64 { x, dst } => {
                    let x = regs.get(b, x)?;
                    (dst, b.ins().fmul(x, x))
                }
                SInstr::RecipF64 { x, dst } => {
                    let x = regs.get(b, x)?;
                    (dst, b.ins().fdiv(one, x))
                }
                SInstr::SqrtF64 { x, dst } => {
                    let x = regs.get(b, x)?;
                    (dst, b.ins().sqrt(x))
                }
                SInstr::PowiF64 { n, x, dst } => {
                    let x = regs.get(b, x)?;
                    (dst, powi(b, x, n, one))
                }
                SInstr::AddF64 { a, b: y, dst }
                | SInstr::SubF64 { a, b: y, dst }
                | SInstr::MulF64 { a, b: y, dst }
                | SInstr::DivF64 { a, b: y, dst } => {
                    let (x, y) = (regs.get(b, a)?, regs.get(b, y)?);
                    let v = match instr {
                        SInstr::AddF64 { .. } => b.ins().fadd(x, y),
                        SInstr::SubF64 { .. } => b.ins().fsub(x, y),
                        SInstr::MulF64 { .. } => b.ins().fmul(x, y),
                        _ => b.ins().fdiv(x, y),
                    };
                    (dst, v)
                }
                // `x * y` with the lanes where `x == 0` (either sign, not
                // NaN) cleared to `+0`.
                SInstr::MulZeroF64 { a, b: y, dst } => {
                    let (x, y) = (regs.get(b, a)?, regs.get(b, y)?);
                    if self.checked.is_some() {
                        // The fast function's plain product (see `guard`).
                        (dst, b.ins().fmul(x, y))
                    } else {
                        let is_zero = mask(b, FloatCC::Equal, x, zero);
                        let p = b.ins().fmul(x, y);
                        (dst, b.ins().band_not(p, is_zero))
                    }
                }
                // `a` when `a >= b` (resp. `<=`) or `a` is NaN, else `b`.
                SInstr::MaxF64 { a, b: y, dst } | SInstr::MinF64 { a, b: y, dst } => {
                    let (x, y) = (regs.get(b, a)?, regs.get(b, y)?);
                    let cc = match instr {
                        SInstr::MaxF64 { .. } => FloatCC::GreaterThanOrEqual,
                        _ => FloatCC::LessThanOrEqual,
                    };
                    let keep = mask(b, cc, x, y);
                    let nan = mask(b, FloatCC::Unordered, x, x);
                    let keep = b.ins().bor(keep, nan);
                    (dst, b.ins().bitselect(keep, x, y))
                }
                // 1 where the comparison holds, else +0.
                SInstr::Compare { op, a, b: y, dst } => {
                    let cc = match op {
                        CmpOp::Lt => FloatCC::LessThan,
                        CmpOp::Le => FloatCC::LessThanOrEqual,
                        CmpOp::Gt => FloatCC::GreaterThan,
                        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
                        CmpOp::Eq => FloatCC::Equal,
                        CmpOp::Ne => FloatCC::NotEqual,
                    };
                    let (x, y) = (regs.get(b, a)?, regs.get(b, y)?);
                    let holds = mask(b, cc, x, y);
                    (dst, b.ins().band(holds, one))
                }
                SInstr::Select { c, a, b: y, dst } => {
                    // `c != 0.0` (true for NaN), as the interpreter tests it.
                    let (c, x, y) = (regs.get(b, c)?, regs.get(b, a)?, regs.get(b, y)?);
                    let c = mask(b, FloatCC::NotEqual, c, zero);
                    (dst, b.ins().bitselect(c, x, y))
                }
                SInstr::Cast { to, x, dst } => {
                    let x = regs.get(b, x)?;
                    let v = match to {
                        SType::F64 => x,
                        SType::F32 => {
                            let s = b.ins().fvdemote(x);
                            b.ins().fvpromote_low(s)
                        }
                        SType::Bool => {
                            let c = mask(b, FloatCC::NotEqual, x, zero);
                            b.ins().band(c, one)
                        }
                        SType::F16 | SType::BF16 => return None,
                    };
                    (dst, v)
                }
                SInstr::Powi { .. } => return None,
            };
            *regs.vals.get_mut(dst as usize)? = Some(v);
            // A value later functions read is stored where it is made, so
            // that it does not stay live to the end of this one.
            if self.layout.spilled[dst as usize] {
                store(b, v, spill_ptr?, 8 * dst);
            }
        }
        if let Some(guard) = &guard {
            // The leaves as the body holds them (in lane 0), so that the
            // parameters need not stay alive too.
            let leaves = if self.in_regs {
                let leaves = leaves.iter().map(|&v| b.ins().extractlane(v, 0));
                guard::Leaves::Values(leaves.collect())
            } else {
                guard::Leaves::At(params[0])
            };
            guard.or_run_exact(b, &checked_values, leaves, outs_ptr);
        }
        b.ins().return_(&[]);
        b.seal_all_blocks();
        Some(())
    }
}

/// Whether the translation covers `ins`.
fn covered(ins: &SInstr) -> bool {
    match ins {
        SInstr::Powi { .. } => false,
        SInstr::Cast { to, .. } => !matches!(to, SType::F16 | SType::BF16),
        _ => true,
    }
}

/// `x^n` by the same square-and-multiply steps as `code::powi_f64`.
fn powi(
    b: &mut FunctionBuilder<'_>,
    x: cranelift_codegen::ir::Value,
    n: i32,
    one: cranelift_codegen::ir::Value,
) -> cranelift_codegen::ir::Value {
    let mut a = x;
    let mut e = n.unsigned_abs();
    let mut r: Option<cranelift_codegen::ir::Value> = None;
    loop {
        if e & 1 != 0 {
            // `1.0 * a` is exactly `a`: skip the multiply by the initial 1.
            r = Some(match r {
                None => a,
                Some(r) => b.ins().fmul(r, a),
            });
        }
        e >>= 1;
        if e == 0 {
            break;
        }
        a = b.ins().fmul(a, a);
    }
    let r = r.unwrap_or(one);
    if n < 0 {
        b.ins().fdiv(one, r)
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::scalar::native::call::Whole;

    /// `n` leaves `x_k`, a chain `acc = (acc - x_k) * x_k` from 1.5 and
    /// two stores (`acc`, `acc - x_0`).
    fn chain(n: u32) -> (Vec<SInstr>, usize) {
        let mut code: Vec<SInstr> = (0..n).map(|k| SInstr::Load { val: k, dst: k }).collect();
        // Register `n` is the constant 1.5.
        let mut acc = n;
        let mut next = n + 1;
        for k in 0..n {
            let d = next;
            code.push(SInstr::SubF64 {
                a: acc,
                b: k,
                dst: d,
            });
            code.push(SInstr::MulF64 {
                a: d,
                b: k,
                dst: d + 1,
            });
            acc = d + 1;
            next += 2;
        }
        code.push(SInstr::Store {
            src: acc,
            target: 0,
        });
        code.push(SInstr::SubF64 {
            a: acc,
            b: 0,
            dst: next,
        });
        code.push(SInstr::Store {
            src: next,
            target: 1,
        });
        (code, next as usize + 1)
    }

    /// The same chain in Rust.
    fn expected(xs: &[f64]) -> [f64; 2] {
        let acc = xs.iter().fold(1.5, |acc, &x| (acc - x) * x);
        [acc, acc - xs[0]]
    }

    #[test]
    fn up_to_eight_leaves_come_in_registers_and_both_entries_agree() {
        for n in 1..=11u32 {
            let (code, len) = chain(n);
            let native = compile(&code, len, &[(n, 1.5)], 2).expect("compiles");
            let in_regs = matches!(native.entry, Entry::Registers(_));
            assert_eq!(in_regs, n as usize <= REG_LEAVES, "{n} leaves");
            let xs: Vec<f64> = (0..n).map(|k| 0.25 + f64::from(k) * 0.5).collect();
            let want = expected(&xs);
            let mut outs = [f64::NAN; 2];
            assert!(native.call_whole(&xs, &mut outs));
            assert_eq!(outs.map(f64::to_bits), want.map(f64::to_bits), "{n} leaves");
            // `call` with more inputs than leaves reads the first ones.
            let mut longer = xs.clone();
            longer.push(f64::NAN);
            let mut outs = [f64::NAN; 3];
            native.call(&longer, &mut outs);
            assert_eq!(outs[..2], want, "{n} leaves through `call`");
            let arc = std::sync::Arc::new(native);
            let whole = Whole::of(&arc).expect("one function");
            let mut outs = [f64::NAN; 2];
            assert!(
                !whole.call(&longer, &mut outs),
                "wrong leaf count is declined"
            );
            assert!(whole.call(&xs, &mut outs));
            assert_eq!(outs, want);
            // The number path's entry (leaves in a local array) agrees.
            let mut local = [f64::NAN; 2];
            assert!(!whole.call_local(&longer, &mut local));
            assert!(whole.call_local(&xs, &mut local));
            assert_eq!(local.map(f64::to_bits), want.map(f64::to_bits));
        }
    }
}
