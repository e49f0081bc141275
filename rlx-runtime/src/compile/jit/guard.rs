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
//! nor NaN, it equals the exact one, bit for bit; otherwise it calls the
//! exact function on its own arguments, which rewrites every target. The
//! check multiplies the stored values four at a time and tests each
//! product for zero or NaN (a product that underflows to 0 only sends the
//! call to the exact function). The call is made by the fast function, not
//! its caller, so that the caller need not keep the arguments.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{FuncRef, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use crate::compile::scalar_code::{SInstr, SType};

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

/// Ends a fast function: where the product of some group of [`GROUP`] of
/// the checked stored values `vals` (`f64`s) is zero or NaN, calls the
/// exact function `exact` on the function's own parameters `params`
/// (which rewrites every target), on a cold path.
pub(super) fn or_call_exact(
    b: &mut FunctionBuilder<'_>,
    vals: &[Value],
    exact: FuncRef,
    params: &[Value],
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
    let Some(redo) = redo else {
        return;
    };
    let (cold, done) = (b.create_block(), b.create_block());
    b.set_cold_block(cold);
    b.ins().brif(redo, cold, &[], done, &[]);
    b.switch_to_block(cold);
    b.ins().call(exact, params);
    b.ins().return_(&[]);
    b.switch_to_block(done);
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
        let native = super::super::compile(&code, 11, &[], 6).expect("compiles");
        assert!(native.fast, "the region has a fast function");
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
}
