//! `mul_zero` as a plain product, checked once at the end.
//!
//! Reverse mode multiplies every cotangent by its local derivative with
//! `mul_zero` (`0 * inf = 0`), three instructions where the product is one:
//! in the native code of a small gradient they were a fifth of the
//! instructions (the number-form Lennard-Jones gradient: 31 of 153). A
//! region whose `mul_zero` results only flow through operations that keep
//! the difference visible gets a second function, the *fast* one, with
//! plain products; it runs first, and the exact one only when the fast
//! one's results could differ.
//!
//! Why that is exact: call a value *guarded* if it depends on a `mul_zero`
//! result (the others are computed by the same operations in both
//! functions, so they are equal). Replacing `mul_zero(a, b)` (which gives
//! `+0` where `a` is ±0) by `a * b` changes a guarded value only in two
//! ways: a zero whose sign differs, or a NaN (`0 * inf`) where the exact
//! value is not NaN. Each operation [`checked_stores`] lets a guarded
//! value into keeps that so: `+ - *`, `mul_zero`, negation, `|x|`, `x²`,
//! `√x`, positive integer powers, a division *of* it (not by it: `1 / ±0`
//! is `±inf`, a difference no check at the end would see), an `f32`
//! rounding, and a `select` choosing it (not one deciding on it). So
//! where every guarded stored value of the fast function is neither zero
//! nor NaN, it equals the exact one, bit for bit; otherwise it runs the
//! exact code ([`Exact`], compiled when first needed) on its own leaves,
//! which rewrites every target. The check multiplies the stored values four
//! at a time and tests each product for zero or NaN (a product that
//! underflows to 0 only sends the call to the exact code). The fast
//! function does that itself, not its caller, so that the caller need not
//! keep the arguments alive across the call.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{
    types, AbiParam, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::FunctionBuilder;

use crate::compile::base::env::Val;
use crate::compile::scalar::code::{SInstr, SType};
use crate::compile::scalar::native::call::Native;
use crate::compile::scalar::step::{ScalarIo, ScalarStep};

/// For a region (operands resolved) that has a `mul_zero` and whose
/// guarded values only reach the operations named in the module doc: per
/// instruction, whether it is a `Store` of a guarded value (the values the
/// fast function checks). `None` where the fast function would not be
/// exact, or would be the same code.
pub(super) fn checked_stores(code: &[SInstr], len: usize) -> Option<Vec<bool>> {
    let mut guarded = vec![false; len];
    let mut checked = vec![false; code.len()];
    let mut any_mul_zero = false;
    for (i, ins) in code.iter().enumerate() {
        let g = |r: &u32| guarded.get(*r as usize).copied();
        let (dst, is_guarded) = match ins {
            SInstr::Load { dst, .. } => (*dst, false),
            SInstr::MulZeroF64 { dst, .. } => {
                any_mul_zero = true;
                (*dst, true)
            }
            SInstr::NegF64 { x, dst }
            | SInstr::AbsF64 { x, dst }
            | SInstr::SquareF64 { x, dst }
            | SInstr::SqrtF64 { x, dst } => (*dst, g(x)?),
            SInstr::PowiF64 { n, x, dst } => {
                let gx = g(x)?;
                if gx && *n <= 0 {
                    return None;
                }
                (*dst, gx)
            }
            SInstr::Cast {
                to: SType::F64 | SType::F32,
                x,
                dst,
            } => (*dst, g(x)?),
            SInstr::AddF64 { a, b, dst }
            | SInstr::SubF64 { a, b, dst }
            | SInstr::MulF64 { a, b, dst } => (*dst, g(a)? || g(b)?),
            SInstr::DivF64 { a, b, dst } => {
                if g(b)? {
                    return None;
                }
                (*dst, g(a)?)
            }
            SInstr::Select { c, a, b, dst } => {
                if g(c)? {
                    return None;
                }
                (*dst, g(a)? || g(b)?)
            }
            SInstr::Store { src, .. } => {
                checked[i] = g(src)?;
                continue;
            }
            // Anything else either decides on its operands (comparisons,
            // max/min, casts to bool), may turn a NaN or a zero into
            // something else (the interpreter's functions, `1 / x`), or
            // is not translated at all: a guarded operand disqualifies.
            other => {
                let mut bad = false;
                let dst = other.clone().visit_operands(|r| {
                    bad |= guarded.get(*r as usize).copied().unwrap_or(true);
                });
                if bad {
                    return None;
                }
                (dst?, false)
            }
        };
        *guarded.get_mut(dst as usize)? = is_guarded;
    }
    any_mul_zero.then_some(checked)
}

/// Stored values multiplied together before one test (see the module doc).
const GROUP: usize = 4;

/// Hand-overs after which a fast function runs the exact code directly.
const SWITCH_AFTER: u32 = 32;

/// The exact code of a region that runs as a fast function: compiled the
/// first time a call needs it (most never do, and a first call then pays
/// for one function, not two), interpreted if that compile fails. A region
/// whose checked results are often zero (a gradient entry that is exactly
/// 0 at the points it is called on) would pay for both functions on each
/// of those calls: after [`SWITCH_AFTER`] hand-overs its fast function
/// runs the exact code at once (one flag tested on entry).
pub(crate) struct Exact {
    code: Vec<SInstr>,
    len: usize,
    consts: Vec<(u32, f64)>,
    loads: usize,
    targets: usize,
    native: OnceLock<Option<Native>>,
    handed_over: AtomicU32,
    /// Set after [`SWITCH_AFTER`] hand-overs; read by the fast function.
    switched: AtomicBool,
}

impl Exact {
    /// The exact code of `code` (operands resolved; `loads` leading loads).
    pub(super) fn new(
        code: &[SInstr],
        len: usize,
        consts: &[(u32, f64)],
        targets: usize,
        loads: usize,
    ) -> Exact {
        Exact {
            code: code.to_vec(),
            len,
            consts: consts.to_vec(),
            loads,
            targets,
            native: OnceLock::new(),
            handed_over: AtomicU32::new(0),
            switched: AtomicBool::new(false),
        }
    }

    /// Runs the exact code on `ins` into `outs`.
    fn run(&self, ins: &[f64], outs: &mut [f64]) {
        let native = self.native.get_or_init(|| {
            crate::compile::scalar::native::compile_as(
                &self.code,
                self.len,
                &self.consts,
                self.targets,
                false,
            )
        });
        match native {
            Some(n) => n.call(ins, outs),
            None => {
                let step = ScalarStep {
                    base: 0,
                    len: self.len,
                    consts: self.consts.clone(),
                    code: self.code.clone(),
                    native: None,
                };
                let mut file = vec![0.0; self.len];
                step.exec_with_consts(&mut file, &mut SliceIo { ins, next: 0, outs });
            }
        }
    }
}

/// Leaves read in order from a slice, targets written into another.
struct SliceIo<'a> {
    ins: &'a [f64],
    next: usize,
    outs: &'a mut [f64],
}

impl ScalarIo for SliceIo<'_> {
    fn load(&mut self, _: Val) -> f64 {
        // A region's loads come first, one per leaf, in order.
        let v = self.ins[self.next];
        self.next += 1;
        v
    }

    fn store(&mut self, target: u32, v: f64) {
        self.outs[target as usize] = v;
    }
}

/// Called by a fast function's cold path: runs `exact` on the region's
/// leaves at `ins` into its targets at `outs`.
extern "C" fn run_exact(exact: *const Exact, ins: *const f64, outs: *mut f64) {
    // SAFETY: `exact` is the boxed `Exact` of the `Native` whose fast
    // function is running (alive while its code is); `ins` points at its
    // `loads` leaves and `outs` at room for its `targets` (the fast
    // function's own arguments, or its stack copy of the leaves).
    let exact = unsafe { &*exact };
    let ins = unsafe { std::slice::from_raw_parts(ins, exact.loads) };
    let outs = unsafe { std::slice::from_raw_parts_mut(outs, exact.targets) };
    exact.run(ins, outs);
    // Counted until the switch only (so the count never wraps).
    if !exact.switched.load(Ordering::Relaxed)
        && exact.handed_over.fetch_add(1, Ordering::Relaxed) >= SWITCH_AFTER - 1
    {
        exact.switched.store(true, Ordering::Relaxed);
    }
}

/// Where a fast function holds its leaves.
pub(super) enum Leaves {
    /// `f64` values (a function taking its leaves in registers).
    Values(Vec<Value>),
    /// The address of the leaves in memory.
    At(Value),
}

/// What a fast function needs to call [`run_exact`].
pub(super) struct Call<'a> {
    pub(super) ptr: types::Type,
    pub(super) call_conv: CallConv,
    pub(super) exact: &'a Exact,
}

impl Call<'_> {
    /// Ends a fast function: where the product of some group of [`GROUP`]
    /// of the checked stored values `vals` (`f64`s) is zero or NaN, runs
    /// the exact code on `leaves` into `outs` (rewriting every target), on
    /// a cold path.
    pub(super) fn or_run_exact(
        &self,
        b: &mut FunctionBuilder<'_>,
        vals: &[Value],
        leaves: Leaves,
        outs: Value,
    ) {
        let zero = b.ins().f64const(0.0);
        let mut redo: Option<Value> = None;
        for group in vals.chunks(GROUP) {
            let p = group[1..].iter().fold(group[0], |p, &v| b.ins().fmul(p, v));
            let bad = b.ins().fcmp(FloatCC::UnorderedOrEqual, p, zero);
            redo = Some(match redo {
                None => bad,
                Some(r) => b.ins().bor(r, bad),
            });
        }
        if let Some(redo) = redo {
            self.on(b, redo, leaves, outs);
        }
    }

    /// Starts a fast function: once [`SWITCH_AFTER`] calls were handed
    /// over, runs the exact code on `leaves` into `outs` and returns.
    pub(super) fn or_switched(&self, b: &mut FunctionBuilder<'_>, leaves: Leaves, outs: Value) {
        let flag = b
            .ins()
            .iconst(self.ptr, &self.exact.switched as *const AtomicBool as i64);
        // A relaxed read of the `AtomicBool` (a byte load on every target
        // Cranelift supports).
        let switched = b.ins().load(types::I8, MemFlagsData::trusted(), flag, 0);
        self.on(b, switched, leaves, outs);
    }

    /// Where `cond` (an `i8`) is nonzero, runs the exact code on `leaves`
    /// into `outs` and returns, on a cold path; the function goes on in a
    /// new block otherwise.
    fn on(&self, b: &mut FunctionBuilder<'_>, cond: Value, leaves: Leaves, outs: Value) {
        let (cold, done) = (b.create_block(), b.create_block());
        b.set_cold_block(cold);
        b.ins().brif(cond, cold, &[], done, &[]);
        b.switch_to_block(cold);
        let ins = match leaves {
            Leaves::At(ins) => ins,
            Leaves::Values(values) => {
                let size = u32::try_from(8 * values.len().max(1)).unwrap_or(u32::MAX);
                let slot = b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    size,
                    3,
                ));
                for (k, v) in (0..).zip(values) {
                    b.ins().stack_store(self.ptr, v, slot, 8 * k);
                }
                b.ins().stack_addr(self.ptr, slot, 0)
            }
        };
        let mut sig = Signature::new(self.call_conv);
        for _ in 0..3 {
            sig.params.push(AbiParam::new(self.ptr));
        }
        let sig = b.import_signature(sig);
        let f = b.ins().iconst(self.ptr, run_exact as *const () as i64);
        let exact = b.ins().iconst(self.ptr, self.exact as *const Exact as i64);
        b.ins().call_indirect(sig, f, &[exact, ins, outs]);
        b.ins().return_(&[]);
        b.switch_to_block(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(dst: u32) -> SInstr {
        SInstr::Load { val: dst, dst }
    }

    #[test]
    fn a_cotangent_chain_is_checked_where_it_is_stored() {
        // x0, x1 leaves; r2 = mul_zero(x0, x1); r3 = r2 + x1; r4 = x0 * x1;
        // stores r3 (guarded) and r4 (not).
        let code = vec![
            load(0),
            load(1),
            SInstr::MulZeroF64 { a: 0, b: 1, dst: 2 },
            SInstr::AddF64 { a: 2, b: 1, dst: 3 },
            SInstr::MulF64 { a: 0, b: 1, dst: 4 },
            SInstr::Store { src: 3, target: 0 },
            SInstr::Store { src: 4, target: 1 },
        ];
        let checked = checked_stores(&code, 5).expect("qualifies");
        assert_eq!(checked, [false, false, false, false, false, true, false]);
    }

    #[test]
    fn no_mul_zero_or_a_guarded_value_in_a_deciding_place_disqualifies() {
        let plain = vec![
            load(0),
            SInstr::SquareF64 { x: 0, dst: 1 },
            SInstr::Store { src: 1, target: 0 },
        ];
        assert!(checked_stores(&plain, 2).is_none(), "nothing to gain");
        let deciding: [fn() -> SInstr; 6] = [
            || SInstr::RecipF64 { x: 2, dst: 3 },
            || SInstr::DivF64 { a: 0, b: 2, dst: 3 },
            || SInstr::PowiF64 {
                n: -2,
                x: 2,
                dst: 3,
            },
            || SInstr::MaxF64 { a: 2, b: 0, dst: 3 },
            || SInstr::Select {
                c: 2,
                a: 0,
                b: 1,
                dst: 3,
            },
            || SInstr::Cast {
                to: SType::Bool,
                x: 2,
                dst: 3,
            },
        ];
        for op in deciding {
            let code = vec![
                load(0),
                load(1),
                SInstr::MulZeroF64 { a: 0, b: 1, dst: 2 },
                op(),
                SInstr::Store { src: 3, target: 0 },
            ];
            assert!(checked_stores(&code, 4).is_none(), "{:?}", code[3]);
        }
        // The same operations on values that are not guarded are fine.
        let code = vec![
            load(0),
            load(1),
            SInstr::RecipF64 { x: 0, dst: 2 },
            SInstr::MulZeroF64 { a: 1, b: 2, dst: 3 },
            SInstr::DivF64 { a: 3, b: 0, dst: 4 },
            SInstr::Store { src: 4, target: 0 },
        ];
        assert_eq!(
            checked_stores(&code, 5).expect("qualifies"),
            [false, false, false, false, false, true]
        );
    }

    /// `mul_zero` as the interpreter computes it.
    fn mul_zero(a: f64, b: f64) -> f64 {
        if a == 0.0 {
            0.0
        } else {
            a * b
        }
    }

    #[test]
    fn the_fast_function_gives_the_exact_bits_or_hands_over() {
        // Leaves a, b, c; f = 1/b; g = mul_zero(a, f); h = mul_zero(g, c);
        // stores h, h + c, -g * f, sqrt(g), f, then g / c.
        let code = vec![
            load(0),
            load(1),
            load(2),
            SInstr::RecipF64 { x: 1, dst: 3 },
            SInstr::MulZeroF64 { a: 0, b: 3, dst: 4 },
            SInstr::MulZeroF64 { a: 4, b: 2, dst: 5 },
            SInstr::Store { src: 5, target: 0 },
            SInstr::AddF64 { a: 5, b: 2, dst: 6 },
            SInstr::Store { src: 6, target: 1 },
            SInstr::NegF64 { x: 4, dst: 7 },
            SInstr::MulF64 { a: 7, b: 3, dst: 8 },
            SInstr::Store { src: 8, target: 2 },
            SInstr::SqrtF64 { x: 4, dst: 9 },
            SInstr::Store { src: 9, target: 3 },
            SInstr::Store { src: 3, target: 4 },
            SInstr::DivF64 {
                a: 4,
                b: 2,
                dst: 10,
            },
            SInstr::Store { src: 10, target: 5 },
        ];
        let special = [
            0.0,
            -0.0,
            1.5,
            -2.0,
            1e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let mut handed_over = 0;
        for &a in &special {
            // A fresh region for each `a`, so that most calls run the fast
            // function (a region switches to its exact code after
            // `SWITCH_AFTER` hand-overs).
            let native =
                crate::compile::scalar::native::compile(&code, 11, &[], 6).expect("compiles");
            assert!(native.exact.is_some(), "the region has a fast function");
            for &b in &special {
                for &c in &special {
                    let f = 1.0 / b;
                    let g = mul_zero(a, f);
                    let h = mul_zero(g, c);
                    let want = [h, h + c, -g * f, g.sqrt(), f, g / c];
                    let mut got = [0.25; 6];
                    native.call(&[a, b, c], &mut got);
                    let at = format!("a = {a}, b = {b}, c = {c}");
                    // Every zero's sign as the exact code gives it; NaNs'
                    // sign bits depend on the operand order chosen.
                    for (g, w) in got.iter().zip(want) {
                        assert!(
                            g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
                            "{at}"
                        );
                    }
                    let fast = [a * f, a * f * c];
                    handed_over += usize::from(fast.iter().any(|v| *v != *v || *v == 0.0));
                }
            }
        }
        assert!(handed_over > 0, "some inputs need the exact function");
    }

    #[test]
    fn the_exact_code_interpreted_gives_the_bits_of_the_exact_code_compiled() {
        let code = vec![
            load(0),
            load(1),
            SInstr::RecipF64 { x: 1, dst: 2 },
            SInstr::MulZeroF64 { a: 0, b: 2, dst: 3 },
            SInstr::NegF64 { x: 3, dst: 4 },
            SInstr::Store { src: 4, target: 0 },
            SInstr::Store { src: 2, target: 1 },
        ];
        let compiled = Exact::new(&code, 5, &[], 2, 2);
        let interpreted = Exact::new(&code, 5, &[], 2, 2);
        assert!(interpreted.native.set(None).is_ok());
        for (a, b) in [(0.0, 0.0), (-0.0, 2.0), (3.0, 0.0), (1.5, -4.0)] {
            let (mut x, mut y) = ([0.5; 2], [0.25; 2]);
            compiled.run(&[a, b], &mut x);
            interpreted.run(&[a, b], &mut y);
            assert_eq!(x.map(f64::to_bits), y.map(f64::to_bits), "{a}, {b}");
            let want = [-mul_zero(a, 1.0 / b), 1.0 / b];
            assert_eq!(x.map(f64::to_bits), want.map(f64::to_bits), "{a}, {b}");
        }
        assert!(matches!(compiled.native.get(), Some(Some(_))));
    }

    #[test]
    fn a_fast_function_reading_its_leaves_from_memory_hands_over_too() {
        // Ten leaves (more than fit in registers): g_k = mul_zero(x_k, 1/x_9)
        // for k < 9, stored, then their sum.
        let mut code: Vec<SInstr> = (0..10).map(load).collect();
        code.push(SInstr::RecipF64 { x: 9, dst: 10 });
        let mut sum = None;
        for k in 0..9u32 {
            code.push(SInstr::MulZeroF64 {
                a: k,
                b: 10,
                dst: 11 + 2 * k,
            });
            code.push(SInstr::Store {
                src: 11 + 2 * k,
                target: k,
            });
            let s = match sum {
                None => 11 + 2 * k,
                Some(s) => {
                    code.push(SInstr::AddF64 {
                        a: s,
                        b: 11 + 2 * k,
                        dst: 12 + 2 * k,
                    });
                    12 + 2 * k
                }
            };
            sum = Some(s);
        }
        code.push(SInstr::Store {
            src: sum.expect("nine terms"),
            target: 9,
        });
        let native = crate::compile::scalar::native::compile(&code, 30, &[], 10).expect("compiles");
        assert!(native.exact.is_some(), "the region has a fast function");
        assert!(matches!(
            native.entry,
            crate::compile::scalar::native::Entry::Memory(_)
        ));
        for last in [0.0, -0.0, 2.0, f64::INFINITY] {
            for first in [0.0, -0.0, 1.5] {
                let mut xs = [1.0; 10];
                xs[0] = first;
                xs[9] = last;
                let f = 1.0 / last;
                let mut want = [0.0; 10];
                for k in 0..9 {
                    want[k] = mul_zero(xs[k], f);
                }
                want[9] = want[1..9].iter().fold(want[0], |s, g| s + g);
                let mut got = [0.5; 10];
                native.call(&xs, &mut got);
                let at = format!("first = {first}, last = {last}");
                assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{at}");
            }
        }
    }

    #[test]
    fn a_region_handing_over_often_switches_to_its_exact_code() {
        // g = mul_zero(a, 1/b), stored: zero for a = 0, on every call.
        let code = vec![
            load(0),
            load(1),
            SInstr::RecipF64 { x: 1, dst: 2 },
            SInstr::MulZeroF64 { a: 0, b: 2, dst: 3 },
            SInstr::Store { src: 3, target: 0 },
        ];
        let native = crate::compile::scalar::native::compile(&code, 4, &[], 1).expect("compiles");
        let exact = native.exact.as_ref().expect("a fast function");
        for (n, (a, b)) in [(1.5, 2.0), (-0.0, 2.0), (0.0, 0.0), (3.0, 0.5)]
            .into_iter()
            .cycle()
            .take(4 * SWITCH_AFTER as usize)
            .enumerate()
        {
            let mut got = [0.25];
            native.call(&[a, b], &mut got);
            assert_eq!(got[0].to_bits(), mul_zero(a, 1.0 / b).to_bits(), "call {n}");
            let handed = exact.handed_over.load(Ordering::Relaxed);
            // Two of every four calls hand over until the switch.
            assert_eq!(
                exact.switched.load(Ordering::Relaxed),
                handed >= SWITCH_AFTER,
                "call {n}"
            );
        }
        assert!(exact.switched.load(Ordering::Relaxed));
    }
}
