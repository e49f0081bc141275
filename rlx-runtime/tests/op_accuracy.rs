//! The accuracy table of every element-wise op: each primitive
//! ([`UnaryOp::ALL`], [`BinaryOp::ALL`]) and each composite of
//! `ops/std_names.rs`, evaluated eagerly and through a traced, compiled
//! plan, against the `f64` function of std (or libm, or a formula in `f64`
//! stated beside it) by distance in ulps, at points spanning the whole
//! domain: zeros of both signs, subnormals, `1e-300`, values near 1 and
//! near the singular points, the overflow thresholds of `exp`, `x²` and
//! `cosh`, `1e300`, `f64::MAX`, `±∞` and NaN, and random bit patterns.
//!
//! `f64` compares with the std function; `f32` with the std `f64`
//! function of the same input rounded to `f32` (correctly rounded but for
//! rare double roundings). A NaN must meet a NaN, and zeros must have the
//! reference's sign. The bound of each op is the one its doc comment
//! states. A primitive missing from [`unary_case`]/[`binary_case`] is a
//! compile error (the matches have no `_` arm); a composite missing from
//! [`composites`] fails [`every_composite_is_in_the_table`].

use rlx_core::{BinaryOp, DType, UnaryOp};
use rlx_runtime::trace::Trace;
use rlx_runtime::{compile, Tensor};

/// Distance in ulps of two `f64`s (NaN meets only NaN; `+0` and `-0`
/// are "infinitely far").
fn ulps(a: f64, b: f64) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    if a == 0.0 && b == 0.0 {
        return if a.to_bits() == b.to_bits() {
            0
        } else {
            u64::MAX
        };
    }
    let key = |v: f64| {
        let i = v.to_bits() as i64;
        i128::from(if i < 0 { i64::MIN - i } else { i })
    };
    key(a).abs_diff(key(b)).min(u64::MAX as u128) as u64
}

/// [`ulps`] for `f32`s.
fn ulps32(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    if a == 0.0 && b == 0.0 {
        return if a.to_bits() == b.to_bits() {
            0
        } else {
            u64::MAX
        };
    }
    let key = |v: f32| {
        let i = v.to_bits() as i32;
        i64::from(if i < 0 { i32::MIN - i } else { i })
    };
    key(a).abs_diff(key(b))
}

/// What an op is checked against and how closely.
struct Bound {
    /// Ulps from the reference, `f64`.
    f64: u64,
    /// Ulps from the reference, `f32`.
    f32: u64,
    /// Where the reference is below these (`f64`, `f32`) in magnitude,
    /// any result of at most them (with the reference's sign) is
    /// accepted: the op underflows a little early (`sigmoid(-720)` is 0,
    /// not `e^-720`).
    flush: (f64, f64),
    /// Whether the bound grows by `x²` ulp (`gelu`'s left tail, where the
    /// slope of `erfc` amplifies the rounding of `x/√2`).
    grows: bool,
}

const fn ulp(f64: u64, f32: u64) -> Bound {
    Bound {
        f64,
        f32,
        flush: (0.0, 0.0),
        grows: false,
    }
}

/// [`ulp`], flushing results that are subnormal.
const fn flushing(f64: u64, f32: u64) -> Bound {
    Bound {
        f64,
        f32,
        flush: (f64::MIN_POSITIVE, f32::MIN_POSITIVE as f64),
        grows: false,
    }
}

type Ours = Box<dyn Fn(&Tensor, &Tensor) -> Tensor>;
type Reference = Box<dyn Fn(f64, f64) -> f64>;

/// One row of the table.
struct Case {
    name: String,
    /// Whether the op reads its second operand.
    binary: bool,
    ours: Ours,
    reference: Reference,
    bound: Bound,
}

fn case(
    name: impl Into<String>,
    binary: bool,
    ours: impl Fn(&Tensor, &Tensor) -> Tensor + 'static,
    reference: impl Fn(f64, f64) -> f64 + 'static,
    bound: Bound,
) -> Case {
    Case {
        name: name.into(),
        binary,
        ours: Box::new(ours),
        reference: Box::new(reference),
        bound,
    }
}

/// The logistic function in `f64` from std's `exp`, either sign without
/// cancellation or early overflow (within 2 ulp).
fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `x Φ(x) = x erfc(-x/√2) / 2` (at `±∞` the formula's IEEE value:
/// `∞`, and NaN for `-∞ · 0`) with the argument of `erfc` carried to
/// twice the precision (its rounding would cost `x²` ulp in the left
/// tail): `erfc(u + δ) ≈ erfc(u) - δ 2/√π e^{-u²}`.
fn gelu(x: f64) -> f64 {
    let c = std::f64::consts::FRAC_1_SQRT_2;
    if x.is_infinite() {
        return 0.5 * x * libm::erfc(-x * c);
    }
    // 1/√2 - c, from 1/2 - c² (one rounding, of a tiny value).
    let c_lo = (-c).mul_add(c, 0.5) / (2.0 * c);
    let u = -x * c;
    let du = (-x).mul_add(c, -u) - x * c_lo;
    let e = libm::erfc(u) - du * std::f64::consts::FRAC_2_SQRT_PI * (-u * u).exp();
    0.5 * x * e
}

/// The row of a unary primitive; `None` for ops not on floats. An
/// exhaustive match: a new op is a compile error here until it has a row.
fn unary_case(op: UnaryOp) -> Option<Case> {
    let f = move |x: &Tensor, _: &Tensor| x.unary(op);
    let row =
        |r: fn(f64) -> f64, b: Bound| Some(case(format!("{op:?}"), false, f, move |x, _| r(x), b));
    match op {
        UnaryOp::Neg => row(|x| -x, ulp(0, 0)),
        UnaryOp::Exp => row(f64::exp, flushing(1, 1)),
        UnaryOp::Expm1 => row(f64::exp_m1, ulp(2, 2)),
        UnaryOp::Ln => row(f64::ln, ulp(1, 1)),
        UnaryOp::Log1p => row(f64::ln_1p, ulp(2, 2)),
        UnaryOp::Sin => row(f64::sin, ulp(2, 1)),
        UnaryOp::Cos => row(f64::cos, ulp(2, 1)),
        UnaryOp::Tan => row(f64::tan, ulp(0, 1)),
        UnaryOp::Tanh => row(f64::tanh, ulp(3, 3)),
        UnaryOp::Sinh => row(f64::sinh, ulp(0, 2)),
        UnaryOp::Cosh => row(f64::cosh, ulp(0, 1)),
        UnaryOp::Asin => row(f64::asin, ulp(0, 1)),
        UnaryOp::Acos => row(f64::acos, ulp(0, 1)),
        UnaryOp::Atan => row(f64::atan, ulp(0, 1)),
        UnaryOp::Sigmoid => row(sigmoid, flushing(3, 3)),
        UnaryOp::Sqrt => row(f64::sqrt, ulp(0, 0)),
        // `pow` is correctly rounded in practice; its special cases are
        // not `1/sqrt`'s (`-∞` and `-0`).
        UnaryOp::Rsqrt => row(
            |x| {
                if x > 0.0 {
                    x.powf(-0.5)
                } else {
                    1.0 / x.sqrt()
                }
            },
            ulp(1, 1),
        ),
        UnaryOp::Recip => row(f64::recip, ulp(0, 0)),
        UnaryOp::Square => row(|x| x * x, ulp(0, 0)),
        UnaryOp::Powi(_) => None,
        UnaryOp::Abs => row(f64::abs, ulp(0, 0)),
        UnaryOp::Sign => row(
            |x| {
                if x == 0.0 || x.is_nan() {
                    x
                } else {
                    x.signum()
                }
            },
            ulp(0, 0),
        ),
        UnaryOp::Relu => row(|x| if x > 0.0 || x.is_nan() { x } else { 0.0 }, ulp(0, 0)),
        UnaryOp::Gelu => row(
            gelu,
            Bound {
                grows: true,
                ..flushing(4, 4)
            },
        ),
        // `x / (1 + e^-x)` is 0 once `e^-x` overflows (`x < -709.78`,
        // `f32`: `-88.72`), where `silu` is below `4e-306` (`3e-37`).
        UnaryOp::Silu => Some(case(
            "Silu",
            false,
            f,
            |x, _| x * sigmoid(x),
            Bound {
                f64: 4,
                f32: 4,
                flush: (4e-306, 3e-37),
                grows: false,
            },
        )),
        UnaryOp::Erf => row(libm::erf, ulp(0, 1)),
        UnaryOp::Floor => row(f64::floor, ulp(0, 0)),
        UnaryOp::Ceil => row(f64::ceil, ulp(0, 0)),
        UnaryOp::Round => row(f64::round, ulp(0, 0)),
        UnaryOp::Not => None,
        // Complex-only ops (no real values to measure here): their values
        // are checked against `num_complex` in `autodiff_complex.rs`.
        UnaryOp::Conj | UnaryOp::Real | UnaryOp::Imag => None,
    }
}

/// `powi(n)`: the algorithm of std's `powi` (square and multiply, one
/// reciprocal for `n < 0`), so the same bits as `f64::powi` in `f64`;
/// each squaring doubles the error so far, so against the exact power
/// (the `f32` column) it is within `|n|` ulp, flushing for `n < 0` where
/// `x^|n|` overflows.
fn powi_cases() -> Vec<Case> {
    [-3i32, -2, -1, 0, 1, 2, 3, 4, 7, 10]
        .into_iter()
        .map(|n| {
            case(
                format!("Powi({n})"),
                false,
                move |x: &Tensor, _: &Tensor| x.powi(n),
                move |x, _| x.powi(n),
                Bound {
                    f64: 0,
                    f32: n.unsigned_abs().max(1).into(),
                    flush: (
                        0.0,
                        if n < 0 {
                            f64::from(f32::MIN_POSITIVE)
                        } else {
                            0.0
                        },
                    ),
                    grows: false,
                },
            )
        })
        .collect()
}

/// The row of a binary primitive, as [`unary_case`].
fn binary_case(op: BinaryOp) -> Option<Case> {
    let f = move |x: &Tensor, y: &Tensor| x.binary(op, y);
    let row = |r: fn(f64, f64) -> f64, b: Bound| Some(case(format!("{op:?}"), true, f, r, b));
    // NaN-propagating, as IEEE 754-2019 `maximum` (std's `max` drops a NaN).
    let pick = |a: f64, b: f64, first: bool| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else if first {
            a
        } else {
            b
        }
    };
    match op {
        BinaryOp::Add => row(|a, b| a + b, ulp(0, 0)),
        BinaryOp::Sub => row(|a, b| a - b, ulp(0, 0)),
        BinaryOp::Mul => row(|a, b| a * b, ulp(0, 0)),
        BinaryOp::Div => row(|a, b| a / b, ulp(0, 0)),
        BinaryOp::Pow => row(f64::powf, ulp(0, 1)),
        BinaryOp::Min => Some(case(
            "Min",
            true,
            f,
            move |a, b| pick(a, b, a <= b),
            ulp(0, 0),
        )),
        BinaryOp::Max => Some(case(
            "Max",
            true,
            f,
            move |a, b| pick(a, b, a >= b),
            ulp(0, 0),
        )),
        BinaryOp::Atan2 => row(f64::atan2, ulp(0, 1)),
        BinaryOp::MulZero => row(|a, b| if a == 0.0 { 0.0 } else { a * b }, ulp(0, 0)),
        BinaryOp::And | BinaryOp::Or => None,
        // Builds a complex value from two reals: checked in `autodiff_complex.rs`.
        BinaryOp::Complex => None,
    }
}

/// The composites of `ops/std_names.rs` (and `clamp`), by method name.
fn composites() -> Vec<Case> {
    let u = |name: &str, ours: fn(&Tensor) -> Tensor, r: fn(f64) -> f64, b: Bound| {
        case(
            name,
            false,
            move |x: &Tensor, _: &Tensor| ours(x),
            move |x, _| r(x),
            b,
        )
    };
    let b = |name: &str, ours: fn(&Tensor, &Tensor) -> Tensor, r: fn(f64, f64) -> f64, b: Bound| {
        case(name, true, ours, r, b)
    };
    vec![
        b("powf", |x, y| x.powf(y), f64::powf, ulp(0, 1)),
        b("atan2", |x, y| x.atan2(y), f64::atan2, ulp(0, 1)),
        b("hypot", |x, y| x.hypot(y), f64::hypot, ulp(2, 2)),
        b("log", |x, y| x.log(y), f64::log, ulp(4, 3)),
        // A NaN sign gives NaN (see the method's doc).
        b(
            "copysign",
            |x, y| x.copysign(y),
            |x, y| if y.is_nan() { y } else { x.copysign(y) },
            ulp(0, 0),
        ),
        u("log10", Tensor::log10, f64::log10, ulp(2, 2)),
        u("log2", Tensor::log2, f64::log2, ulp(2, 2)),
        u("exp2", Tensor::exp2, f64::exp2, ulp(1, 1)),
        u("exp_m1", Tensor::exp_m1, f64::exp_m1, ulp(2, 2)),
        u("ln_1p", Tensor::ln_1p, f64::ln_1p, ulp(2, 2)),
        u("cbrt", Tensor::cbrt, f64::cbrt, ulp(1, 1)),
        u("to_radians", Tensor::to_radians, f64::to_radians, ulp(0, 1)),
        u("to_degrees", Tensor::to_degrees, f64::to_degrees, ulp(0, 1)),
        u("signum", Tensor::signum, f64::signum, ulp(0, 0)),
        u("trunc", Tensor::trunc, f64::trunc, ulp(0, 0)),
        u("fract", Tensor::fract, f64::fract, ulp(0, 0)),
        // libm (musl) for these three: std's `asinh` overflows to ∞ above
        // `f64::MAX / 2`, and its `atanh` is 2% off near -1 (musl's
        // `acosh` is not NaN below -1).
        u("asinh", Tensor::asinh, libm::asinh, ulp(3, 3)),
        u(
            "acosh",
            Tensor::acosh,
            |x| if x < 1.0 { f64::NAN } else { libm::acosh(x) },
            ulp(3, 3),
        ),
        u("atanh", Tensor::atanh, libm::atanh, ulp(3, 3)),
        u(
            "clamp",
            |x| x.clamp(-1.0, 2.0),
            |x| x.clamp(-1.0, 2.0),
            ulp(0, 0),
        ),
        u("sin_cos", |x| x.sin_cos().1, f64::cos, ulp(2, 1)),
    ]
}

/// The element-wise methods of `ops/std_names.rs` that are not rows of
/// [`composites`], with the reason.
const NOT_ROWS: [(&str, &str); 9] = [
    ("try_atan2", "`atan2` returning `Result`"),
    ("atan2_scalar", "`atan2` with a number"),
    ("max", "the `Max` primitive (or a reduction)"),
    ("min", "the `Min` primitive (or a reduction)"),
    (
        "mul_add",
        "not fused: its bound is mixed, see `mul_add_within_its_stated_bound`",
    ),
    ("is_nan", "a mask (tests/std_names.rs)"),
    ("is_infinite", "a mask (tests/std_names.rs)"),
    ("is_finite", "a mask (tests/std_names.rs)"),
    ("operand_like", "not an op"),
];

/// Points spanning the `f64` domain, both signs, and random bit patterns.
fn points() -> Vec<f64> {
    let eps = f64::EPSILON;
    let mut v = vec![
        0.0,
        5e-324,
        1e-320,
        1e-310,
        f64::MIN_POSITIVE,
        1e-300,
        1e-200,
        1.5e-154,
        1e-100,
        1e-30,
        1e-20,
        1e-16,
        eps,
        1e-10,
        1e-8,
        1e-5,
        1e-3,
        0.01,
        0.1,
        0.3,
        0.5,
        0.7,
        0.9,
        0.99,
        1.0 - eps,
        1.0 - eps / 2.0,
        1.0,
        1.0 + eps,
        1.0 + 4.0 * eps,
        1.001,
        1.1,
        1.5,
        2.0,
        2.5,
        3.0,
        std::f64::consts::PI,
        5.0,
        10.0,
        20.0,
        27.0,
        37.0,
        40.0,
        88.7,
        89.5,
        100.0,
        700.0,
        709.78,
        709.79,
        710.0,
        710.5,
        745.1,
        750.0,
        1e3,
        1e4,
        32768.5,
        1e5,
        1e8,
        268_435_455.0,
        268_435_456.0,
        268_435_457.0,
        1e10,
        1e15,
        9_007_199_254_740_993.0,
        1e20,
        1.8e19,
        1e38,
        3.5e38,
        1e50,
        1e100,
        1.3e154,
        1.4e154,
        1e200,
        1e300,
        1.7e308,
        f64::MAX,
        f64::INFINITY,
    ];
    v.extend(v.clone().iter().map(|x| -x));
    v.push(f64::NAN);
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s
    };
    v.extend((0..4000).map(|_| f64::from_bits(next())));
    v.extend((0..1000).map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0));
    v.extend((0..1000).map(|_| f64::from(next() as u32 as f32) / 2f64.powi(32) * 0.02 + 0.99));
    v
}

/// Second operands for the binary ops (each met with every point).
fn seconds() -> Vec<f64> {
    let mut v = vec![
        0.0,
        5e-324,
        1e-300,
        1e-10,
        0.5,
        1.0,
        1.5,
        2.0,
        3.0,
        10.0,
        1e10,
        1e200,
        1e300,
        f64::MAX,
        f64::INFINITY,
    ];
    v.extend(v.clone().iter().map(|x| -x));
    v.push(f64::NAN);
    v
}

/// The operand pairs of a case.
fn operands(c: &Case) -> (Vec<f64>, Vec<f64>) {
    let p = points();
    if !c.binary {
        let zeros = vec![0.0; p.len()];
        return (p, zeros);
    }
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    let s = seconds();
    for (k, &x) in p.iter().enumerate() {
        // Every point with every second operand, the random points with
        // a few, and each pair both ways round.
        let take = if k < 160 { s.len() } else { 3 };
        for &y in s.iter().cycle().skip(k % s.len()).take(take) {
            xs.extend([x, y]);
            ys.extend([y, x]);
        }
    }
    (xs, ys)
}

/// `ours` on `x, y` as `dtype`, eagerly and through a compiled traced plan.
fn evaluate(ours: &Ours, x: &[f64], y: &[f64], dtype: DType) -> [Vec<f64>; 2] {
    let n = x.len();
    let tensor = |v: &[f64]| Tensor::from_slice(v, [n]).cast(dtype);
    let (xt, yt) = (tensor(x), tensor(y));
    let eager = ours(&xt, &yt).cast(DType::F64).to_vec::<f64>().unwrap();
    let t = Trace::enter();
    let tx = t.input("x", [n], dtype);
    let ty = t.input("y", [n], dtype);
    let out = ours(&tx, &ty).cast(DType::F64);
    let g = t.finish(&[&out, &ty]).unwrap();
    let compiled = compile(&g).unwrap().run(&[&xt, &yt]).unwrap()[0]
        .to_vec::<f64>()
        .unwrap();
    [eager, compiled]
}

/// The worst distance of a case in `dtype`: `(ulps, x, y, got, want)`.
fn worst(c: &Case, dtype: DType) -> (u64, f64, f64, f64, f64) {
    let (mut x, mut y) = operands(c);
    let f32 = dtype == DType::F32;
    if f32 {
        for v in x.iter_mut().chain(y.iter_mut()) {
            *v = f64::from(*v as f32);
        }
    }
    let mut worst = (0, 0.0, 0.0, 0.0, 0.0);
    for got in evaluate(&c.ours, &x, &y, dtype) {
        for i in 0..x.len() {
            let want = (c.reference)(x[i], y[i]);
            let (d, want) = if f32 {
                let w = want as f32;
                (ulps32(got[i] as f32, w), f64::from(w))
            } else {
                (ulps(got[i], want), want)
            };
            let tiny = if f32 {
                c.bound.flush.1
            } else {
                c.bound.flush.0
            };
            let flushed = want.abs() < tiny
                && got[i].abs() <= tiny
                && (got[i] == 0.0 || got[i].signum() == want.signum());
            let allowed = if c.bound.grows {
                (x[i] * x[i]).min(1e18) as u64
            } else {
                0
            };
            let d = d.saturating_sub(allowed);
            if !flushed && d > worst.0 {
                worst = (d, x[i], y[i], got[i], want);
            }
        }
    }
    worst
}

fn all_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = UnaryOp::ALL.into_iter().filter_map(unary_case).collect();
    cases.extend(powi_cases());
    cases.extend(BinaryOp::ALL.into_iter().filter_map(binary_case));
    cases.extend(composites());
    cases
}

#[test]
fn every_op_is_within_its_stated_bound() {
    let report = std::env::var("RLX_ACCURACY_REPORT").is_ok();
    let mut failures = Vec::new();
    println!("{:<12} {:>8} {:>8}", "op", "f64 ulp", "f32 ulp");
    for c in all_cases() {
        let w64 = worst(&c, DType::F64);
        let w32 = worst(&c, DType::F32);
        println!(
            "{:<12} {:>8} {:>8}   (bounds {}, {})",
            c.name, w64.0, w32.0, c.bound.f64, c.bound.f32
        );
        for (w, bound, ty) in [(w64, c.bound.f64, "f64"), (w32, c.bound.f32, "f32")] {
            if w.0 > bound {
                failures.push(format!(
                    "{} {ty}: {} ulp (bound {bound}) at ({:e}, {:e}): {:e}, want {:e}",
                    c.name, w.0, w.1, w.2, w.3, w.4
                ));
            }
        }
    }
    assert!(report || failures.is_empty(), "{}", failures.join("\n"));
    for f in &failures {
        println!("{f}");
    }
}

/// Every `pub fn` of `ops/std_names.rs` taking `&self` is a row of the
/// table or listed in [`NOT_ROWS`].
#[test]
fn every_composite_is_in_the_table() {
    let src = include_str!("../src/ops/std_names.rs");
    let rows: Vec<String> = composites().into_iter().map(|c| c.name).collect();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("pub fn ") else {
            continue;
        };
        let name = rest.split(['(', '<']).next().unwrap();
        let listed = rows.iter().any(|r| r == name) || NOT_ROWS.iter().any(|(n, _)| *n == name);
        assert!(
            listed,
            "`{name}` of std_names.rs has no row in the accuracy table"
        );
    }
}

/// `mul_add` is two roundings: within `u (|x a| + |x a + b|)` of the exact
/// value (`u = 2^-53`), so within that plus `u |fma|` of the fused one.
#[test]
fn mul_add_within_its_stated_bound() {
    let p: Vec<f64> = points()
        .into_iter()
        .filter(|v| v.is_finite() && v.abs() < 1e150)
        .collect();
    let n = p.len();
    let a: Vec<f64> = p.iter().rev().copied().collect();
    let b: Vec<f64> = p.iter().skip(1).chain(&p[..1]).copied().collect();
    let t = |v: &[f64]| Tensor::from_slice(v, [n]);
    let got = t(&p).mul_add(t(&a), t(&b)).to_vec::<f64>().unwrap();
    for i in 0..n {
        let want = p[i].mul_add(a[i], b[i]);
        let u = f64::EPSILON / 2.0;
        let bound = u * ((p[i] * a[i]).abs() + 2.0 * want.abs()) * (1.0 + 4.0 * u) + 5e-324;
        assert!(
            (got[i] - want).abs() <= bound,
            "mul_add({:e}, {:e}, {:e}) = {:e}, fused {want:e}",
            p[i],
            a[i],
            b[i],
            got[i]
        );
    }
}
