//! Native code for scalar regions, generated with Cranelift (feature `jit`).
//!
//! A scalar region's instruction list ([`SInstr`]) is straight-line code
//! over `f64` registers, so it translates one to one into Cranelift IR with
//! every register an SSA value: no dispatch, no register-file traffic. The
//! generated function has the C signature `fn(ins: *const f64, outs: *mut
//! f64)`: it reads the region's leaves from `ins` (in the order of its
//! `Load` instructions) and writes each stored value to `outs[target]`.
//! Dtype conversions at the boundary stay in Rust (the caller fills `ins`
//! with `f64` values and converts `outs` to the targets' dtypes), exactly as
//! the interpreter does, so results are bit-identical to it:
//! - the inline `f64` ops (`+ - * /`, neg, abs, square, recip, sqrt,
//!   `mul_zero`, NaN-propagating max/min, comparisons, select) map to the
//!   same IEEE operations, and `powi` to the same square-and-multiply
//!   sequence as [`super::scalar`]'s `powi_f64`;
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

use std::fmt;

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, MemFlagsData, Signature, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module};
use rlx_core::CmpOp;

use super::scalar_code::{SInstr, SType, ACC};

/// The generated function: `ins` holds the leaves, `outs` receives the stores.
type RegionFn = extern "C" fn(*const f64, *mut f64);

/// A unary op of the interpreter, called from native code.
type UnaryFn = fn(f64) -> f64;
/// A binary op of the interpreter, called from native code.
type BinaryFn = fn(f64, f64) -> f64;

extern "C" fn call_unary(f: *const UnaryFn, x: f64) -> f64 {
    // SAFETY: `f` points into a `Native::unary` box, alive while its code is.
    unsafe { (*f)(x) }
}

extern "C" fn call_binary(f: *const BinaryFn, a: f64, b: f64) -> f64 {
    // SAFETY: `f` points into a `Native::binary` box, alive while its code is.
    unsafe { (*f)(a, b) }
}

/// Native code for one region, with what it needs to stay valid.
pub(crate) struct Native {
    func: RegionFn,
    loads: usize,
    stores: usize,
    /// The module owning the code; freed on drop.
    module: Option<JITModule>,
    /// Interpreter functions the code calls through the trampolines; boxed
    /// so their addresses, baked into the code, never move.
    #[allow(dead_code)]
    unary: Box<[UnaryFn]>,
    #[allow(dead_code)]
    binary: Box<[BinaryFn]>,
}

// SAFETY: after `finalize_definitions` the module is never touched again
// except to free it in `drop` (which has `&mut self`); the generated code is
// immutable and reentrant (it only reads `ins` and writes `outs`), and the
// boxed function pointers are plain `fn`s.
unsafe impl Send for Native {}
// SAFETY: as above: shared access only ever calls the immutable code.
unsafe impl Sync for Native {}

impl fmt::Debug for Native {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Native({} loads, {} stores)", self.loads, self.stores)
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the `Native` is being dropped, so nobody holds `func`
            // or can call it any more.
            unsafe { m.free_memory() };
        }
    }
}

impl Native {
    /// Number of leaves the code reads.
    pub(crate) fn loads(&self) -> usize {
        self.loads
    }

    /// Number of values the code stores.
    pub(crate) fn stores(&self) -> usize {
        self.stores
    }

    /// Runs the code on `ins` (the leaves) and `outs` (one slot per target).
    #[inline]
    pub(crate) fn call(&self, ins: &[f64], outs: &mut [f64]) {
        assert!(
            ins.len() >= self.loads && outs.len() >= self.stores,
            "native region called with {} inputs and {} outputs, needs {} and {}",
            ins.len(),
            outs.len(),
            self.loads,
            self.stores
        );
        (self.func)(ins.as_ptr(), outs.as_mut_ptr());
    }
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
    let mut flags = settings::builder();
    flags.set("use_colocated_libcalls", "false").ok()?;
    flags.set("is_pic", "false").ok()?;
    flags.set("opt_level", "speed").ok()?;
    let isa = cranelift_native::builder()
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let ptr = module.target_config().pointer_type();

    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(ptr));
    let id = module
        .declare_function("region", Linkage::Local, &sig)
        .ok()?;

    let mut ctx = Context::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    let mut unary: Vec<UnaryFn> = Vec::new();
    let mut binary: Vec<BinaryFn> = Vec::new();
    for ins in code {
        match ins {
            SInstr::Unary { f, .. } => unary.push(*f),
            SInstr::Binary { f, .. } => binary.push(*f),
            _ => {}
        }
    }
    let unary = unary.into_boxed_slice();
    let binary = binary.into_boxed_slice();
    let mut loads = 0usize;
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        let (ins_ptr, outs_ptr) = (b.block_params(block)[0], b.block_params(block)[1]);
        let mem = MemFlagsData::trusted();

        let mut sig1 = Signature::new(module.isa().default_call_conv());
        sig1.params.push(AbiParam::new(ptr));
        sig1.params.push(AbiParam::new(types::F64));
        sig1.returns.push(AbiParam::new(types::F64));
        let mut sig2 = sig1.clone();
        sig2.params.push(AbiParam::new(types::F64));
        let sig1 = b.import_signature(sig1);
        let sig2 = b.import_signature(sig2);

        let mut regs = vec![None; len];
        for &(r, v) in consts {
            regs[r as usize] = Some(b.ins().f64const(v));
        }
        let zero = b.ins().f64const(0.0);
        let one = b.ins().f64const(1.0);
        let mut acc = zero;
        let (mut next_unary, mut next_binary) = (0usize, 0usize);
        for instr in code {
            let get = |r: u32| -> Option<_> {
                if r == ACC {
                    Some(acc)
                } else {
                    regs[r as usize]
                }
            };
            let (dst, v) = match *instr {
                SInstr::Load { dst, .. } => {
                    let off = (8 * loads) as i32;
                    loads += 1;
                    (dst, b.ins().load(types::F64, mem, ins_ptr, off))
                }
                SInstr::Store { src, target } => {
                    let v = get(src)?;
                    b.ins().store(mem, v, outs_ptr, (8 * target) as i32);
                    continue;
                }
                SInstr::Unary { x, dst, .. } => {
                    let x = get(x)?;
                    let f = &unary[next_unary] as *const UnaryFn as i64;
                    next_unary += 1;
                    let fp = b.ins().iconst(ptr, f);
                    let tramp = b.ins().iconst(ptr, call_unary as *const () as i64);
                    let call = b.ins().call_indirect(sig1, tramp, &[fp, x]);
                    (dst, b.inst_results(call)[0])
                }
                SInstr::Binary { a, b: y, dst, .. } => {
                    let (x, y) = (get(a)?, get(y)?);
                    let f = &binary[next_binary] as *const BinaryFn as i64;
                    next_binary += 1;
                    let fp = b.ins().iconst(ptr, f);
                    let tramp = b.ins().iconst(ptr, call_binary as *const () as i64);
                    let call = b.ins().call_indirect(sig2, tramp, &[fp, x, y]);
                    (dst, b.inst_results(call)[0])
                }
                SInstr::NegF64 { x, dst } => (dst, b.ins().fneg(get(x)?)),
                SInstr::AbsF64 { x, dst } => (dst, b.ins().fabs(get(x)?)),
                SInstr::SquareF64 { x, dst } => {
                    let x = get(x)?;
                    (dst, b.ins().fmul(x, x))
                }
                SInstr::RecipF64 { x, dst } => (dst, b.ins().fdiv(one, get(x)?)),
                SInstr::SqrtF64 { x, dst } => (dst, b.ins().sqrt(get(x)?)),
                SInstr::PowiF64 { n, x, dst } => {
                    let x = get(x)?;
                    (dst, powi(&mut b, x, n, one))
                }
                SInstr::AddF64 { a, b: y, dst } => (dst, b.ins().fadd(get(a)?, get(y)?)),
                SInstr::SubF64 { a, b: y, dst } => (dst, b.ins().fsub(get(a)?, get(y)?)),
                SInstr::MulF64 { a, b: y, dst } => (dst, b.ins().fmul(get(a)?, get(y)?)),
                SInstr::DivF64 { a, b: y, dst } => (dst, b.ins().fdiv(get(a)?, get(y)?)),
                SInstr::MulZeroF64 { a, b: y, dst } => {
                    let (x, y) = (get(a)?, get(y)?);
                    let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
                    let p = b.ins().fmul(x, y);
                    (dst, b.ins().select(is_zero, zero, p))
                }
                // `a` when `a >= b` (resp. `<=`) or `a` is NaN, else `b`.
                SInstr::MaxF64 { a, b: y, dst } | SInstr::MinF64 { a, b: y, dst } => {
                    let (x, y) = (get(a)?, get(y)?);
                    let cc = match instr {
                        SInstr::MaxF64 { .. } => FloatCC::GreaterThanOrEqual,
                        _ => FloatCC::LessThanOrEqual,
                    };
                    let keep = b.ins().fcmp(cc, x, y);
                    let nan = b.ins().fcmp(FloatCC::Unordered, x, x);
                    let keep = b.ins().bor(keep, nan);
                    (dst, b.ins().select(keep, x, y))
                }
                SInstr::Compare { op, a, b: y, dst } => {
                    let cc = match op {
                        CmpOp::Lt => FloatCC::LessThan,
                        CmpOp::Le => FloatCC::LessThanOrEqual,
                        CmpOp::Gt => FloatCC::GreaterThan,
                        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
                        CmpOp::Eq => FloatCC::Equal,
                        CmpOp::Ne => FloatCC::NotEqual,
                    };
                    let c = b.ins().fcmp(cc, get(a)?, get(y)?);
                    (dst, b.ins().select(c, one, zero))
                }
                SInstr::Select { c, a, b: y, dst } => {
                    // `c != 0.0` (true for NaN), as the interpreter tests it.
                    let c = b.ins().fcmp(FloatCC::NotEqual, get(c)?, zero);
                    (dst, b.ins().select(c, get(a)?, get(y)?))
                }
                SInstr::Cast { to, x, dst } => {
                    let x = get(x)?;
                    let v = match to {
                        SType::F64 => x,
                        SType::F32 => {
                            let s = b.ins().fdemote(types::F32, x);
                            b.ins().fpromote(types::F64, s)
                        }
                        SType::Bool => {
                            let c = b.ins().fcmp(FloatCC::NotEqual, x, zero);
                            b.ins().select(c, one, zero)
                        }
                        SType::F16 | SType::BF16 => return None,
                    };
                    (dst, v)
                }
                SInstr::Powi { .. } => return None,
            };
            regs[dst as usize] = Some(v);
            acc = v;
        }
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    module.define_function(id, &mut ctx).ok()?;
    module.clear_context(&mut ctx);
    module.finalize_definitions().ok()?;
    let code = module.get_finalized_function(id);
    // SAFETY: `code` is the finalised function declared above with the
    // signature `(ptr, ptr) -> ()` in the platform's default (C) calling
    // convention, which is `RegionFn`.
    let func = unsafe { std::mem::transmute::<*const u8, RegionFn>(code) };
    Some(Native {
        func,
        loads,
        stores: targets,
        module: Some(module),
        unary,
        binary,
    })
}

/// Whether the translation covers `ins`.
fn covered(ins: &SInstr) -> bool {
    match ins {
        SInstr::Powi { .. } => false,
        SInstr::Cast { to, .. } => !matches!(to, SType::F16 | SType::BF16),
        _ => true,
    }
}

/// `x^n` by the same square-and-multiply steps as `scalar_code::powi_f64`.
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
