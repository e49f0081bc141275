//! Transcendental functions written to vectorise: `exp`, `expm1`, `tanh`,
//! `ln`, `log1p`, `sin`, `cos`, `erf` and `pow` for `f32` and `f64`.
//!
//! # One definition, the same bits everywhere
//!
//! Each function is ordinary scalar Rust without branches on the value:
//! range reduction, a polynomial and a rescaling made of IEEE additions,
//! multiplications, divisions, bit operations and selects (`if c { a } else
//! { b }` on two computed values, which LLVM turns into a blend). Inlined
//! into a loop, LLVM vectorises it; the fused loops run that loop compiled
//! for AVX2 (see `compile::base::math`, which checks the CPU at run time), 8 `f32`
//! or 4 `f64` lanes per instruction, and the interpreter, the scalar regions
//! and their native code call the very same function on one value. Every
//! operation in it is correctly rounded by IEEE 754 whatever the width, so
//! a lane computes exactly the bits the scalar call computes.
//!
//! No fused multiply-add: Rust never contracts `a * b + c`, and an explicit
//! `mul_add` would be a slow library call on x86-64 CPUs without FMA (the
//! default target), in the scalar fallback and the native scalar regions
//! alike. The polynomials are evaluated with separate multiplies and adds
//! everywhere; they are short enough that this costs about a fifth of the
//! arithmetic of an FMA version and a fraction of an ulp of accuracy.
//!
//! Where a branch-free form would be slow or inexact — `sin`/`cos` of huge
//! arguments (Payne–Hanek reduction), `pow` of `f64` and its many special
//! cases, `erf` of `f64` — the function has a *core* (branch-free, valid on
//! most of the domain) and a *rare* predicate; the scalar function is
//! `if rare(x) { libm(x) } else { core(x) }`. Block loops compute the core
//! over a chunk, then redo the lanes where `rare` holds with the scalar
//! function ([`crate::kernels::scalar::unary_core`] and
//! [`crate::kernels::scalar::unary_rare`]), so they still agree bit for bit.
//!
//! # Accuracy
//!
//! Measured against a correctly rounded reference (for `f32`: the `f64` std
//! function rounded to `f32`, over every `f32` bit pattern in the ignored
//! test `exhaustive_f32` of `tests/vmath_accuracy.rs`; for `f64`: the std
//! (glibc) result, itself within 1 ulp, on millions of samples over the
//! whole range), in units in the last place:
//!
//! | function | `f32` | `f64` | method |
//! | --- | --- | --- | --- |
//! | `exp` | 1 | 1 | `x = k ln2 + r`, Cody–Waite, degree-6 / 11 polynomial, `1 + r` exact (Fast2Sum), `2^k` in two steps (gradual underflow exact) |
//! | `expm1` | 2 | 2 | same reduction, `2^k (e^r - 1) + (2^k - 1)` |
//! | `tanh` | 3 | 3 | `e / (e + 2)`, `e = expm1(2|x|)` |
//! | `ln` | 1 | 1 | `x = 2^k m`, `m` in `[√½, √2)`, `2 atanh(s)` series in `s = f / (2 + f)` |
//! | `log1p` | 2 | 2 | `ln(1 + x)` plus the rounding error of `1 + x` |
//! | `sin`, `cos` | 1 | 2 | `x = k π/2 + r`, 3-part Cody–Waite (`|x| ≤ 2^20` for `f32`, computed in `f64`; `|x| ≤ 2^15` for `f64`), libm beyond |
//! | `erf` | 1 | libm | `f32` computed in `f64`: odd polynomial below 1, `1 - e^(-x²) P(1/x)` above |
//! | `pow` | 1 | libm | `f32` computed in `f64` as `exp(y ln x)` for `x > 0`, libm for the special cases |
//!
//! (Exact bounds are the ones the tests assert.) `sigmoid` and `silu` are
//! built on `exp`, `tanh` on `expm1`. Special values follow C99 Annex F:
//! `±0`, `±∞` and NaN give the IEEE results, subnormal inputs and results are
//! handled, overflow gives `±∞` and underflow gradual zeros. The polynomial
//! coefficients were fitted with `mpmath.chebyfit` (near minimax) and
//! rounded to the type; `fit.py` beside this file regenerates them.

mod erf;
mod exp;
mod float;
mod log;
mod pow;
mod trig;

pub use exp::{exp, expm1, tanh};
pub use float::VFloat;
pub use log::{ln, log1p};

/// `if c { a } else { b }` on two already computed values (a blend in a
/// vector loop, never a jump).
#[inline(always)]
fn select<T: Copy>(c: bool, a: T, b: T) -> T {
    if c {
        a
    } else {
        b
    }
}

/// `c[0] + x c[1] + x² c[2] + …` by Horner's rule (separate multiply and
/// add, see the module doc).
#[inline(always)]
fn poly<T: VFloat>(x: T, c: &[T]) -> T {
    let mut acc = c[c.len() - 1];
    for &k in c[..c.len() - 1].iter().rev() {
        acc = acc * x + k;
    }
    acc
}
