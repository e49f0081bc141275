//! Accuracy of the vectorisable math (`kernels::vmath`) against libm, in
//! ulps, over wide ranges and at the edges.
//!
//! `f32`: the reference is the `f64` std function rounded to `f32` (correctly
//! rounded but for rare double roundings); `f64`: the std (glibc) function.
//! `cargo test` samples; `cargo test --release -p rlx-runtime --test
//! vmath_accuracy -- --ignored` runs every `f32` bit pattern.

use rlx_runtime::kernels::vmath::{self, VFloat};

/// A float type's bits in a form whose difference counts ulps.
trait Ulps: Copy + PartialEq {
    fn key(self) -> i128;
    fn nan(self) -> bool;
    fn zero(self) -> bool;
}

impl Ulps for f32 {
    fn key(self) -> i128 {
        let i = self.to_bits() as i32;
        i128::from(if i < 0 { i32::MIN - i } else { i })
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn zero(self) -> bool {
        self == 0.0
    }
}

impl Ulps for f64 {
    fn key(self) -> i128 {
        let i = self.to_bits() as i64;
        i128::from(if i < 0 { i64::MIN - i } else { i })
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn zero(self) -> bool {
        self == 0.0
    }
}

/// Distance in ulps; equal NaN-ness and infinities count as 0, a NaN
/// against a number or a sign-mismatched zero as "infinitely far".
fn ulps<T: Ulps>(a: T, b: T) -> u64 {
    if a.nan() || b.nan() {
        return if a.nan() && b.nan() { 0 } else { u64::MAX };
    }
    if a.zero() && b.zero() && a.key() != b.key() {
        return u64::MAX;
    }
    a.key().abs_diff(b.key()) as u64
}

type F32 = fn(f32) -> f32;
type F64 = fn(f64) -> f64;

/// One function: ours and the reference, for both types, with the bounds
/// the module doc states.
struct Case {
    name: &'static str,
    ours32: F32,
    ref32: F64,
    bound32: u64,
    ours64: Option<F64>,
    ref64: F64,
    bound64: u64,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "exp",
            ours32: vmath::exp,
            ref32: f64::exp,
            bound32: 1,
            ours64: Some(vmath::exp),
            ref64: f64::exp,
            bound64: 1,
        },
        Case {
            name: "expm1",
            ours32: vmath::expm1,
            ref32: f64::exp_m1,
            bound32: 2,
            ours64: Some(vmath::expm1),
            ref64: f64::exp_m1,
            bound64: 2,
        },
        Case {
            name: "tanh",
            ours32: vmath::tanh,
            ref32: f64::tanh,
            bound32: 3,
            ours64: Some(vmath::tanh),
            ref64: f64::tanh,
            bound64: 3,
        },
        Case {
            name: "ln",
            ours32: vmath::ln,
            ref32: f64::ln,
            bound32: 1,
            ours64: Some(vmath::ln),
            ref64: f64::ln,
            bound64: 1,
        },
        Case {
            name: "log1p",
            ours32: vmath::log1p,
            ref32: f64::ln_1p,
            bound32: 2,
            ours64: Some(vmath::log1p),
            ref64: f64::ln_1p,
            bound64: 2,
        },
        Case {
            name: "sin",
            ours32: VFloat::sin,
            ref32: f64::sin,
            bound32: 1,
            ours64: Some(VFloat::sin),
            ref64: f64::sin,
            bound64: 2,
        },
        Case {
            name: "cos",
            ours32: VFloat::cos,
            ref32: f64::cos,
            bound32: 1,
            ours64: Some(VFloat::cos),
            ref64: f64::cos,
            bound64: 2,
        },
        Case {
            name: "erf",
            ours32: VFloat::erf,
            ref32: libm::erf,
            bound32: 1,
            ours64: None,
            ref64: libm::erf,
            bound64: 0,
        },
    ]
}

/// Worst ulp error of `ours` against `reference` over `xs`, with the
/// argument.
fn worst<T: Ulps + Default>(
    ours: impl Fn(T) -> T,
    reference: impl Fn(T) -> T,
    xs: impl Iterator<Item = T>,
) -> (u64, T) {
    let mut worst = (0, T::default());
    for x in xs {
        let d = ulps(ours(x), reference(x));
        if d > worst.0 {
            worst = (d, x);
        }
    }
    worst
}

/// [`worst`] for the `f32` version of `case`.
fn worst32(case: &Case, xs: impl Iterator<Item = f32>) -> (u64, f32) {
    worst(case.ours32, |x| (case.ref32)(f64::from(x)) as f32, xs)
}

/// Every `step`-th `f32` bit pattern, both signs, plus the edges.
fn f32_samples(step: u32) -> impl Iterator<Item = f32> {
    (0..=u32::MAX / step)
        .map(move |i| f32::from_bits(i.wrapping_mul(step)))
        .chain(edges32())
}

fn edges32() -> Vec<f32> {
    let mut v = vec![
        0.0,
        f32::INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::MAX,
        f32::EPSILON,
        1.0,
        88.722_83,
        88.722_84,
        89.0,
        -87.336_55,
        -103.972_08,
        -103.972_09,
        -104.0,
        -17.0,
        -18.0,
        9.0,
        10.0,
        std::f32::consts::FRAC_PI_2,
        std::f32::consts::PI,
        1.5e6,
        1.6e6,
        3.9,
        4.0,
    ];
    v.extend(v.clone().iter().map(|x| -x));
    v
}

/// Random bit patterns (an LCG), uniform samples in `[-r, r]` for a few
/// radii, and the edges.
fn f64_samples(n: usize) -> Vec<f64> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s
    };
    let mut v: Vec<f64> = (0..n).map(|_| f64::from_bits(next())).collect();
    for r in [1e-8, 0.5, 1.0, 4.0, 30.0, 750.0, 4e4] {
        v.extend((0..n / 4).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 * r - r));
    }
    let mut edges = vec![
        0.0,
        f64::INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::MAX,
        f64::EPSILON,
        1.0,
        709.782_712_893_384,
        709.782_712_893_384_1,
        710.0,
        -708.396_418_532_264_1,
        -745.133_219_101_941_1,
        -745.133_219_101_941_2,
        -746.0,
        -37.0,
        -40.0,
        19.0,
        22.0,
        std::f64::consts::FRAC_PI_2,
        32768.0,
        32769.0,
    ];
    edges.extend(edges.clone().iter().map(|x| -x));
    v.extend(edges);
    v
}

#[test]
fn f32_within_bounds_sampled() {
    for case in cases() {
        let (d, x) = worst32(&case, f32_samples(1999));
        println!("{} f32: {d} ulp at {x:e}", case.name);
        assert!(
            d <= case.bound32 || std::env::var("VMATH_REPORT").is_ok(),
            "{} f32: {d} ulp at {x:e} ({:e} vs {:e})",
            case.name,
            (case.ours32)(x),
            (case.ref32)(f64::from(x)) as f32
        );
    }
}

#[test]
fn f64_within_bounds_sampled() {
    let xs = f64_samples(200_000);
    for case in cases() {
        let Some(ours) = case.ours64 else { continue };
        let (d, x) = worst(ours, case.ref64, xs.iter().copied());
        println!("{} f64: {d} ulp at {x:e}", case.name);
        assert!(
            d <= case.bound64 || std::env::var("VMATH_REPORT").is_ok(),
            "{} f64: {d} ulp at {x:e} ({:e} vs {:e})",
            case.name,
            ours(x),
            (case.ref64)(x)
        );
    }
}

/// The `f64` arguments nearest to multiples of `π/2` within the Cody–Waite
/// range, where the reduction cancels most: the hardest inputs of `sin`
/// and `cos`.
#[test]
fn f64_sin_cos_near_multiples_of_half_pi() {
    let mut worst = 0;
    for k in 1..=20_861u32 {
        let x = f64::from(k) * std::f64::consts::FRAC_PI_2;
        for x in [
            x,
            f64::from_bits(x.to_bits() + 1),
            f64::from_bits(x.to_bits() - 1),
        ] {
            worst = worst
                .max(ulps(VFloat::sin(x), x.sin()))
                .max(ulps(VFloat::cos(x), x.cos()));
        }
    }
    assert!(worst <= 1, "{worst} ulp");
}

#[test]
fn f32_pow_within_one_ulp() {
    let xs = [
        0.0f32, 1e-40, 1e-30, 0.1, 0.5, 0.99, 1.0, 1.01, 2.0, 3.7, 10.0, 1e5, 1e30, 3e38,
    ];
    let ys = [
        0.0f32, 1e-7, 0.5, 1.0, 2.0, 2.5, 3.0, 7.3, 40.0, 100.0, 1000.0,
    ];
    let mut worst = (0, 0.0, 0.0);
    for &x in xs.iter().chain(&[f32::INFINITY, f32::NAN]) {
        for &y in ys.iter().chain(&[f32::INFINITY, f32::NAN]) {
            for (x, y) in [(x, y), (x, -y), (-x, y), (-x, -y)] {
                let want = f64::from(x).powf(f64::from(y)) as f32;
                let d = ulps(x.pow(y), want);
                if d > worst.0 {
                    worst = (d, x, y);
                }
            }
        }
    }
    assert!(worst.0 <= 1, "{worst:?}");
}

/// Signed zeros, infinities and NaN give the IEEE results, bit for bit
/// where the sign of zero matters.
#[test]
fn special_values() {
    let z32 = |v: f32| v.to_bits();
    assert_eq!(z32(vmath::expm1(-0.0f32)), z32(-0.0));
    assert_eq!(z32(vmath::tanh(-0.0f32)), z32(-0.0));
    assert_eq!(z32(vmath::log1p(-0.0f32)), z32(-0.0));
    assert_eq!(z32(VFloat::sin(-0.0f32)), z32(-0.0));
    assert_eq!(z32(VFloat::erf(-0.0f32)), z32(-0.0));
    assert_eq!(vmath::ln(-0.0f64), f64::NEG_INFINITY);
    assert_eq!(vmath::ln(f64::INFINITY), f64::INFINITY);
    assert!(vmath::ln(-1e-300f64).is_nan() && vmath::log1p(-2.0f32).is_nan());
    assert_eq!(vmath::exp(f64::NEG_INFINITY), 0.0);
    assert_eq!(vmath::expm1(f32::NEG_INFINITY), -1.0);
    assert_eq!(vmath::expm1(f64::INFINITY), f64::INFINITY);
    assert_eq!(vmath::tanh(f64::NEG_INFINITY), -1.0);
    assert!(VFloat::sin(f64::INFINITY).is_nan() && VFloat::cos(f32::NEG_INFINITY).is_nan());
    for f in [
        vmath::exp,
        vmath::expm1,
        vmath::tanh,
        vmath::ln,
        vmath::log1p,
    ] {
        assert!(f(f32::NAN).is_nan());
    }
    for f in [
        vmath::exp,
        vmath::expm1,
        vmath::tanh,
        vmath::ln,
        vmath::log1p,
    ] {
        assert!(f(f64::NAN).is_nan());
    }
    // Results at the overflow and underflow thresholds.
    for x in [
        88.722_83f32,
        88.722_84,
        -87.336_55,
        -103.972_08,
        -103.972_09,
    ] {
        assert_eq!(vmath::exp(x), f64::from(x).exp() as f32, "exp({x})");
    }
    assert_eq!(vmath::exp(88.8f32), f32::INFINITY);
    assert_eq!(vmath::exp(-745.2f64), 0.0);
    assert_eq!(vmath::exp(-745.0f64), f64::from_bits(1));
}

/// Every `f32` bit pattern (about a minute per function in release mode on
/// an idle core; `VMATH_ONLY=tanh` runs one function).
#[test]
#[ignore]
fn exhaustive_f32() {
    let only = std::env::var("VMATH_ONLY").ok();
    for case in cases() {
        if only.as_deref().is_some_and(|o| o != case.name) {
            continue;
        }
        let (d, x) = worst32(&case, f32_samples(1));
        println!("{}: {d} ulp at {x:e}", case.name);
        assert!(d <= case.bound32, "{} f32: {d} ulp at {x:e}", case.name);
    }
}
