//! Every op's kernel against a naive reference written here, independently
//! of the runtime: plain f64 loops over multi-indices. Each op is checked in
//! f64 and f32 (and f16/bf16 within their precision) with broadcasting, 0-d
//! scalars and size-0 dimensions; then errors, printing and the traced path.

use rlx_runtime::{
    interpret, trace::Trace, BinaryOp, CmpOp, DType, Error, Graph, Op, ReduceOp, Shape, Storage,
    Tensor, UnaryOp,
};

// ---------- data and comparison ----------

/// A small deterministic generator (xorshift), values in `[-2, 2)`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// A tensor of `dtype` from f64 values (rounded to the dtype).
fn tensor(values: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    Tensor::from_storage(Storage::from_f64(dtype, values.iter().copied()), shape).unwrap()
}

/// The values a tensor actually holds, as f64.
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

/// Relative and absolute tolerance per dtype: about the rounding of one
/// result, with room for the f32 computation of f16/bf16.
fn tol(d: DType) -> (f64, f64) {
    match d {
        DType::F64 => (1e-11, 1e-12),
        DType::F32 => (1e-5, 1e-6),
        DType::F16 => (2e-3, 1e-3),
        DType::BF16 => (1.6e-2, 1e-2),
        DType::I64 | DType::Bool => (0.0, 0.0),
    }
}

#[track_caller]
fn assert_close(got: &Tensor, want: &[f64], want_shape: &[usize], dtype: DType, what: &str) {
    assert_eq!(got.shape().dims(), want_shape, "{what}: shape");
    assert_eq!(got.dtype(), dtype, "{what}: dtype");
    let g = vals(got);
    assert_eq!(g.len(), want.len(), "{what}: length");
    let (rel, abs) = tol(dtype);
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * b.abs() + abs;
        assert!(
            ok,
            "{what} [{dtype}] element {i}: got {a}, want {b}\n got  {g:?}\n want {want:?}"
        );
    }
}

// ---------- index helpers of the reference ----------

fn numel(d: &[usize]) -> usize {
    d.iter().product()
}

fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = i % dims[k];
        i /= dims[k];
    }
    idx
}

fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

fn bcast_shape(shapes: &[&[usize]]) -> Vec<usize> {
    let r = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..r)
        .map(|k| {
            let mut d = 1;
            for s in shapes {
                if k + s.len() >= r {
                    let e = s[k + s.len() - r];
                    if e != 1 {
                        assert!(d == 1 || d == e, "reference: shapes do not broadcast");
                        d = e;
                    }
                }
            }
            d
        })
        .collect()
}

/// Index into `src` for the broadcast point `out_idx`.
fn bcast_index(out_idx: &[usize], src: &[usize]) -> usize {
    let lead = out_idx.len() - src.len();
    let idx: Vec<usize> = src
        .iter()
        .enumerate()
        .map(|(k, &d)| if d == 1 { 0 } else { out_idx[lead + k] })
        .collect();
    ravel(&idx, src)
}

/// Reference element-wise op over broadcast operands.
fn ref_elementwise(
    ins: &[(&[f64], &[usize])],
    f: impl Fn(&[f64]) -> f64,
) -> (Vec<f64>, Vec<usize>) {
    let shapes: Vec<&[usize]> = ins.iter().map(|x| x.1).collect();
    let out = bcast_shape(&shapes);
    let v = (0..numel(&out))
        .map(|i| {
            let oi = unravel(i, &out);
            let args: Vec<f64> = ins.iter().map(|(x, s)| x[bcast_index(&oi, s)]).collect();
            f(&args)
        })
        .collect();
    (v, out)
}

// ---------- reference scalar math ----------

/// erf by its Maclaurin series, good to ~1e-14 for |x| <= 3.
fn erf_ref(x: f64) -> f64 {
    let mut term = x; // (-1)^n x^(2n+1) / n!
    let mut sum = 0.0;
    for n in 0..200 {
        let c = term / (2 * n + 1) as f64;
        sum += c;
        if c.abs() < 1e-18 {
            break;
        }
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Ln => x.ln(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Square => x * x,
        UnaryOp::Powi(n) => (0..n.unsigned_abs())
            .fold(1.0, |p, _| p * x)
            .powi(n.signum()),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        UnaryOp::Relu => {
            if x > 0.0 {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Erf => erf_ref(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => {
            let f = x.abs().floor();
            let r = if x.abs() - f >= 0.5 { f + 1.0 } else { f };
            r.copysign(x)
        }
        UnaryOp::Not => f64::from(u8::from(x == 0.0)),
    }
}

/// Maps generated values into the op's domain (and away from poles).
fn domain(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Ln | UnaryOp::Sqrt | UnaryOp::Rsqrt => x.abs() + 0.1,
        UnaryOp::Log1p => x.abs() - 0.5,
        UnaryOp::Asin | UnaryOp::Acos => x / 2.5,
        UnaryOp::Tan => x * 0.6,
        UnaryOp::Recip => x + 0.5f64.copysign(x),
        _ => x,
    }
}

fn binary_ref(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => (b * a.ln()).exp(),
        BinaryOp::Min => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else if a < b {
                a
            } else {
                b
            }
        }
        BinaryOp::Max => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else if a > b {
                a
            } else {
                b
            }
        }
        BinaryOp::Atan2 => a.atan2(b),
        BinaryOp::MulZero => {
            if a == 0.0 {
                0.0
            } else {
                a * b
            }
        }
        BinaryOp::And => f64::from(u8::from(a != 0.0 && b != 0.0)),
        BinaryOp::Or => f64::from(u8::from(a != 0.0 || b != 0.0)),
    }
}

const FLOATS: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];

// ---------- element-wise ----------

#[test]
fn unary_ops_match_reference_in_every_float_dtype() {
    let mut rng = Rng(7);
    let shapes: [&[usize]; 4] = [&[2, 3], &[], &[0, 4], &[5]];
    for op in UnaryOp::ALL
        .into_iter()
        .chain([UnaryOp::Powi(-2), UnaryOp::Powi(0)])
    {
        if op == UnaryOp::Not {
            continue;
        }
        for dt in FLOATS {
            for s in shapes {
                let data: Vec<f64> = rng
                    .vec(numel(s))
                    .into_iter()
                    .map(|x| domain(op, x))
                    .collect();
                let x = tensor(&data, s, dt);
                let want: Vec<f64> = vals(&x).iter().map(|&v| unary_ref(op, v)).collect();
                let got = x.unary(op);
                assert_close(&got, &want, s, dt, op.name());
            }
        }
    }
}

#[test]
fn unary_special_values() {
    let x = tensor(&[2.5, -2.5, 0.5, -0.5, 1.49], &[5], DType::F64);
    assert_eq!(vals(&x.round()), vec![3.0, -3.0, 1.0, -1.0, 1.0]);
    let s = tensor(&[0.0, -3.0, 4.0, f64::NAN], &[4], DType::F64).sign();
    let s = vals(&s);
    assert_eq!(&s[..3], &[0.0, -1.0, 1.0]);
    assert!(s[3].is_nan());
    // Gelu's left tail: x Φ(x) with Φ(-10) = 7.61985302416e-24 (normal tables).
    let g = Tensor::scalar(-10.0f64).gelu().item::<f64>().unwrap();
    let want = -10.0 * 7.61985302416e-24;
    assert!(((g - want) / want).abs() < 1e-11, "{g}");
    // erf(1) from tables.
    let e = Tensor::scalar(1.0f64).erf().item::<f64>().unwrap();
    assert!((e - 0.842_700_792_949_714_9).abs() < 1e-15);
    // Sigmoid of large magnitudes neither overflows nor gives NaN.
    let sg = vals(&tensor(&[-800.0, 800.0], &[2], DType::F64).sigmoid());
    assert_eq!(sg, vec![0.0, 1.0]);
    let relu = vals(&tensor(&[f64::NAN], &[1], DType::F64).relu());
    assert!(relu[0].is_nan());
}

#[test]
fn unary_on_integers_and_bools() {
    let x = Tensor::from_slice(&[-3i64, 0, 5], [3]);
    assert_eq!(x.neg().to_vec::<i64>().unwrap(), vec![3, 0, -5]);
    assert_eq!(x.abs().to_vec::<i64>().unwrap(), vec![3, 0, 5]);
    assert_eq!(x.sign().to_vec::<i64>().unwrap(), vec![-1, 0, 1]);
    assert_eq!(x.square().to_vec::<i64>().unwrap(), vec![9, 0, 25]);
    assert_eq!(x.relu().to_vec::<i64>().unwrap(), vec![0, 0, 5]);
    assert_eq!(x.powi(3).to_vec::<i64>().unwrap(), vec![-27, 0, 125]);
    let b = Tensor::from_slice(&[true, false], [2]);
    assert_eq!(b.not().to_vec::<bool>().unwrap(), vec![false, true]);
}

const SHAPE_PAIRS: [(&[usize], &[usize]); 6] = [
    (&[2, 3], &[3]),
    (&[4, 1, 3], &[2, 1]),
    (&[], &[2, 2]),
    (&[0, 3], &[3]),
    (&[2, 2], &[2, 2]),
    (&[1], &[]),
];

#[test]
fn binary_ops_match_reference_with_broadcasting() {
    let mut rng = Rng(11);
    for op in BinaryOp::ALL {
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            continue;
        }
        for dt in FLOATS {
            for (sa, sb) in SHAPE_PAIRS {
                let mut a = rng.vec(numel(sa));
                let mut b = rng.vec(numel(sb));
                if op == BinaryOp::Pow {
                    a.iter_mut().for_each(|v| *v = v.abs() + 0.1);
                }
                if op == BinaryOp::Div {
                    b.iter_mut().for_each(|v| *v += 0.5f64.copysign(*v));
                }
                if op == BinaryOp::MulZero && !a.is_empty() {
                    a[0] = 0.0;
                }
                let (ta, tb) = (tensor(&a, sa, dt), tensor(&b, sb, dt));
                let (va, vb) = (vals(&ta), vals(&tb));
                let (want, shape) =
                    ref_elementwise(&[(&va, sa), (&vb, sb)], |v| binary_ref(op, v[0], v[1]));
                let got = ta.binary(op, &tb);
                assert_close(&got, &want, &shape, dt, op.name());
            }
        }
    }
}

#[test]
fn binary_special_values() {
    let z = tensor(&[0.0, 0.0, 2.0], &[3], DType::F64);
    let w = tensor(&[f64::INFINITY, f64::NAN, 3.0], &[3], DType::F64);
    assert_eq!(vals(&z.mul_zero(&w)), vec![0.0, 0.0, 6.0]);
    let n = tensor(&[f64::NAN, 1.0], &[2], DType::F64);
    let one = tensor(&[1.0, f64::NAN], &[2], DType::F64);
    assert!(vals(&n.maximum(&one)).iter().all(|v| v.is_nan()));
    assert!(vals(&n.minimum(&one)).iter().all(|v| v.is_nan()));
    let p = tensor(&[2.0, 4.0], &[2], DType::F32).pow_scalar(0.5);
    assert_close(&p, &[2f64.sqrt(), 2.0], &[2], DType::F32, "pow");
}

#[test]
fn binary_on_integers_and_bools() {
    let a = Tensor::from_slice(&[1i64, -2, 3, 4, 5, 6], [2, 3]);
    let b = Tensor::from_slice(&[10i64, 0, -1], [3]);
    let check = |op: BinaryOp, f: fn(i64, i64) -> i64| {
        let got = a.binary(op, &b).to_vec::<i64>().unwrap();
        let av = a.to_vec::<i64>().unwrap();
        let bv = b.to_vec::<i64>().unwrap();
        let want: Vec<i64> = (0..6).map(|i| f(av[i], bv[i % 3])).collect();
        assert_eq!(got, want, "{}", op.name());
    };
    check(BinaryOp::Add, |x, y| x + y);
    check(BinaryOp::Sub, |x, y| x - y);
    check(BinaryOp::Mul, |x, y| x * y);
    check(BinaryOp::Min, |x, y| if x < y { x } else { y });
    check(BinaryOp::Max, |x, y| if x > y { x } else { y });
    let p = Tensor::from_slice(&[true, true, false, false], [4]);
    let q = Tensor::from_slice(&[true, false, true, false], [4]);
    assert_eq!(
        p.and(&q).to_vec::<bool>().unwrap(),
        vec![true, false, false, false]
    );
    assert_eq!(
        p.or(&q).to_vec::<bool>().unwrap(),
        vec![true, true, true, false]
    );
}

#[test]
fn comparisons_give_bool_masks() {
    let mut rng = Rng(5);
    for op in CmpOp::ALL {
        for dt in [DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64] {
            for (sa, sb) in SHAPE_PAIRS {
                // Rounded to halves so equality cases occur.
                let a: Vec<f64> = rng
                    .vec(numel(sa))
                    .iter()
                    .map(|v| (v * 2.0).round() / 2.0)
                    .collect();
                let b: Vec<f64> = rng
                    .vec(numel(sb))
                    .iter()
                    .map(|v| (v * 2.0).round() / 2.0)
                    .collect();
                let (a, b) = if dt == DType::I64 {
                    (
                        a.iter().map(|v| v.round()).collect(),
                        b.iter().map(|v| v.round()).collect(),
                    )
                } else {
                    (a, b)
                };
                let (ta, tb) = (tensor(&a, sa, dt), tensor(&b, sb, dt));
                let (va, vb) = (vals(&ta), vals(&tb));
                let (want, shape) = ref_elementwise(&[(&va, sa), (&vb, sb)], |v| {
                    let r = match op {
                        CmpOp::Lt => v[0] < v[1],
                        CmpOp::Le => v[0] <= v[1],
                        CmpOp::Gt => v[0] > v[1],
                        CmpOp::Ge => v[0] >= v[1],
                        CmpOp::Eq => v[0] == v[1],
                        CmpOp::Ne => v[0] != v[1],
                    };
                    f64::from(u8::from(r))
                });
                let got = ta.compare(op, &tb);
                assert_close(&got, &want, &shape, DType::Bool, op.name());
            }
        }
    }
    let n = Tensor::from_slice(&[f64::NAN], [1]);
    assert_eq!(n.eq_t(&n).to_vec::<bool>().unwrap(), vec![false]);
    assert_eq!(n.ne_t(&n).to_vec::<bool>().unwrap(), vec![true]);
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], [3]);
    assert_eq!(
        x.le_scalar(2.0).to_vec::<bool>().unwrap(),
        vec![true, true, false]
    );
    assert_eq!(
        x.ge_scalar(2.0).to_vec::<bool>().unwrap(),
        vec![false, true, true]
    );
    assert_eq!(
        x.gt_scalar(2.0).to_vec::<bool>().unwrap(),
        vec![false, false, true]
    );
    assert_eq!(
        x.eq_scalar(2.0).to_vec::<bool>().unwrap(),
        vec![false, true, false]
    );
}

#[test]
fn select_broadcasts_all_three_operands() {
    let mut rng = Rng(3);
    for dt in [DType::F64, DType::F32, DType::F16, DType::I64] {
        let mask = Tensor::from_slice(&[true, false], [2, 1]);
        let a = tensor(&rng.vec(3), &[3], dt);
        let b = tensor(&[7.0], &[], dt);
        let (vm, va, vb) = (vec![1.0, 0.0], vals(&a), vals(&b));
        let (want, shape) = ref_elementwise(&[(&vm, &[2, 1]), (&va, &[3]), (&vb, &[])], |v| {
            if v[0] != 0.0 {
                v[1]
            } else {
                v[2]
            }
        });
        assert_close(&Tensor::select(&mask, &a, &b), &want, &shape, dt, "select");
    }
    let empty = Tensor::select(
        &Tensor::from_slice::<bool>(&[], [0]),
        &Tensor::scalar(1.0f64),
        &Tensor::scalar(2.0f64),
    );
    assert_eq!(empty.shape().dims(), &[0]);
}

#[test]
fn cast_between_all_dtypes() {
    let src = [0.0, 1.5, -2.75, 3.0, -0.25];
    for from in DType::ALL {
        for to in DType::ALL {
            let x = tensor(&src, &[5], from);
            let held = vals(&x);
            let want: Vec<f64> = held
                .iter()
                .map(|&v| match to {
                    DType::I64 => v.trunc(),
                    DType::Bool => f64::from(u8::from(v != 0.0)),
                    _ => v,
                })
                .collect();
            let got = x.cast(to);
            assert_close(&got, &want, &[5], to, &format!("cast {from} -> {to}"));
        }
    }
    let big = Tensor::from_slice(&[i64::MAX, i64::MIN], [2]);
    let via = Tensor::apply(Op::Cast(DType::I64), &[&big]).unwrap();
    assert_eq!(via.to_vec::<i64>().unwrap(), vec![i64::MAX, i64::MIN]);
}

// ---------- reductions ----------

fn ref_reduce(op: ReduceOp, x: &[f64], dims: &[usize], axes: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let out: Vec<usize> = dims
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, &d)| d)
        .collect();
    let mut acc: Vec<Vec<f64>> = vec![Vec::new(); numel(&out)];
    for (i, &v) in x.iter().enumerate() {
        let idx = unravel(i, dims);
        let kept: Vec<usize> = idx
            .iter()
            .enumerate()
            .filter(|(k, _)| !axes.contains(k))
            .map(|(_, &j)| j)
            .collect();
        acc[ravel(&kept, &out)].push(v);
    }
    let v = acc
        .iter()
        .map(|xs| match op {
            ReduceOp::Sum => xs.iter().sum(),
            ReduceOp::Mean => xs.iter().sum::<f64>() / xs.len() as f64,
            ReduceOp::Prod => xs.iter().product(),
            ReduceOp::Max => {
                if xs.iter().any(|v| v.is_nan()) {
                    f64::NAN
                } else {
                    xs.iter()
                        .fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m })
                }
            }
            ReduceOp::Min => {
                if xs.iter().any(|v| v.is_nan()) {
                    f64::NAN
                } else {
                    xs.iter()
                        .fold(f64::INFINITY, |m, &v| if v < m { v } else { m })
                }
            }
        })
        .collect();
    (v, out)
}

#[test]
fn reductions_over_any_axes() {
    let mut rng = Rng(17);
    let cases: [(&[usize], &[usize]); 9] = [
        (&[2, 3, 4], &[]),
        (&[2, 3, 4], &[0]),
        (&[2, 3, 4], &[1]),
        (&[2, 3, 4], &[0, 2]),
        (&[2, 3, 4], &[0, 1, 2]),
        (&[], &[]),
        (&[2, 0, 3], &[1]),
        (&[2, 0, 3], &[0]),
        (&[0], &[0]),
    ];
    for op in ReduceOp::ALL {
        for dt in FLOATS {
            for (dims, axes) in cases {
                // Values near 1 keep products well scaled.
                let data: Vec<f64> = rng.vec(numel(dims)).iter().map(|v| 1.0 + v / 8.0).collect();
                let x = tensor(&data, dims, dt);
                let (want, shape) = ref_reduce(op, &vals(&x), dims, axes);
                let got = Tensor::apply(
                    Op::Reduce {
                        op,
                        axes: axes.to_vec(),
                    },
                    &[&x],
                )
                .unwrap();
                assert_close(
                    &got,
                    &want,
                    &shape,
                    dt,
                    &format!("{} {dims:?} {axes:?}", op.name()),
                );
            }
        }
    }
    // Empty reductions give the identities.
    let e = Tensor::zeros([0, 2], DType::F64);
    assert_eq!(vals(&e.sum(&[0])), vec![0.0, 0.0]);
    assert_eq!(vals(&e.prod(&[0])), vec![1.0, 1.0]);
    assert_eq!(vals(&e.max(&[0])), vec![f64::NEG_INFINITY; 2]);
    assert_eq!(vals(&e.min(&[0])), vec![f64::INFINITY; 2]);
    assert!(vals(&e.mean(&[0])).iter().all(|v| v.is_nan()));
    // NaN propagates through max and min.
    let n = Tensor::from_slice(&[1.0f32, f32::NAN, 3.0], [3]);
    assert!(n.max_all().item::<f32>().unwrap().is_nan());
    assert!(n.min_all().item::<f32>().unwrap().is_nan());
    // Axes in any order.
    let x = Tensor::arange(24, DType::F64).reshape([2, 3, 4]);
    assert_eq!(vals(&x.sum(&[2, 0])), vals(&x.sum(&[0, 2])));
}

#[test]
fn long_f32_sums_do_not_accumulate_rounding() {
    // 2^20 copies of 0.1f32: a naive f32 running sum is off by ~1e-3
    // relative; the exact sum rounded once is within f32's half ulp.
    let n = 1 << 20;
    let x = Tensor::full(0.1, [n], DType::F32);
    let exact = n as f64 * f64::from(0.1f32);
    let got = f64::from(x.sum_all().item::<f32>().unwrap());
    assert!(((got - exact) / exact).abs() < 1e-7, "{got} vs {exact}");
    let mean = f64::from(x.mean_all().item::<f32>().unwrap());
    assert!((mean - f64::from(0.1f32)).abs() < 1e-8, "{mean}");
}

#[test]
fn integer_reductions() {
    let x = Tensor::from_slice(&[3i64, -1, 4, 1, -5, 9], [2, 3]);
    assert_eq!(x.sum(&[1]).to_vec::<i64>().unwrap(), vec![6, 5]);
    assert_eq!(x.max(&[0]).to_vec::<i64>().unwrap(), vec![3, -1, 9]);
    assert_eq!(x.min_all().item::<i64>().unwrap(), -5);
    assert_eq!(x.prod(&[0]).to_vec::<i64>().unwrap(), vec![3, 5, 36]);
}

// ---------- linear algebra ----------

fn ref_matmul(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k, n) = (sa[ra - 2], sa[ra - 1], sb[rb - 1]);
    let batch = bcast_shape(&[&sa[..ra - 2], &sb[..rb - 2]]);
    let mut out_dims = batch.clone();
    out_dims.extend([m, n]);
    let mut out = vec![0.0; numel(&out_dims)];
    for (o, v) in out.iter_mut().enumerate() {
        let idx = unravel(o, &out_dims);
        let bi = &idx[..idx.len() - 2];
        let (i, j) = (idx[idx.len() - 2], idx[idx.len() - 1]);
        let ab = bcast_index(bi, &sa[..ra - 2]);
        let bb = bcast_index(bi, &sb[..rb - 2]);
        for p in 0..k {
            *v += a[ab * m * k + i * k + p] * b[bb * k * n + p * n + j];
        }
    }
    (out, out_dims)
}

#[test]
fn matmul_batched_and_broadcast() {
    let mut rng = Rng(23);
    let cases: [(&[usize], &[usize]); 7] = [
        (&[2, 3], &[3, 4]),
        (&[3, 7], &[2, 7, 70]),
        (&[2, 1, 2, 3], &[3, 3, 4]),
        (&[1, 1], &[1, 5]),
        (&[2, 0], &[0, 3]),
        (&[0, 3], &[3, 2]),
        (&[3, 2, 5], &[5, 1]),
    ];
    for dt in FLOATS {
        for (sa, sb) in cases {
            let a = tensor(&rng.vec(numel(sa)), sa, dt);
            let b = tensor(&rng.vec(numel(sb)), sb, dt);
            let (want, shape) = ref_matmul(&vals(&a), sa, &vals(&b), sb);
            // Accumulation of k products: scale the tolerance by k.
            let got = a.matmul(&b);
            assert_close(&got, &want, &shape, dt, &format!("matmul {sa:?} {sb:?}"));
        }
    }
    let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    assert_eq!(vals(&Tensor::eye(2, DType::F64).matmul(&a)), vals(&a));
    assert_eq!(
        vals(&Tensor::zeros([2, 0], DType::F64).matmul(&Tensor::zeros([0, 3], DType::F64))),
        vec![0.0; 6]
    );
}

#[test]
fn solve_satisfies_the_system() {
    let mut rng = Rng(29);
    for dt in [DType::F64, DType::F32] {
        for (n, k, batch) in [(3usize, 2usize, 2usize), (1, 1, 1), (5, 3, 1), (4, 1, 3)] {
            let mut a = rng.vec(batch * n * n);
            // Diagonally dominant: well conditioned, but pivoting still happens
            // because one row is permuted to the top.
            for bt in 0..batch {
                for i in 0..n {
                    a[bt * n * n + i * n + i] += 4.0f64.copysign(a[bt * n * n + i * n + i]);
                }
                if n > 1 {
                    for j in 0..n {
                        a.swap(bt * n * n + j, bt * n * n + n + j);
                    }
                }
            }
            let b = rng.vec(batch * n * k);
            let ta = tensor(&a, &[batch, n, n], dt);
            let tb = tensor(&b, &[batch, n, k], dt);
            let x = ta.solve(&tb);
            assert_eq!(x.shape().dims(), &[batch, n, k]);
            let (ax, _) = ref_matmul(&vals(&ta), &[batch, n, n], &vals(&x), &[batch, n, k]);
            let held_b = vals(&tb);
            let eps = if dt == DType::F64 { 1e-12 } else { 1e-5 };
            for (i, (&p, &q)) in ax.iter().zip(&held_b).enumerate() {
                assert!(
                    (p - q).abs() < eps * 10.0,
                    "{dt} n={n} residual {i}: {p} vs {q}"
                );
            }
        }
    }
    // Pivoting: a zero on the diagonal needs a row swap.
    let a = Tensor::from_slice(&[0.0f64, 1.0, 1.0, 0.0], [2, 2]);
    let b = Tensor::from_slice(&[2.0f64, 3.0], [2, 1]);
    assert_eq!(vals(&a.solve(&b)), vec![3.0, 2.0]);
    // f16 is solved in f64 and rounded.
    let a = tensor(&[2.0, 0.0, 0.0, 4.0], &[2, 2], DType::F16);
    let b = tensor(&[1.0, 1.0], &[2, 1], DType::F16);
    assert_close(&a.solve(&b), &[0.5, 0.25], &[2, 1], DType::F16, "solve f16");
}

#[test]
fn singular_solve_is_an_error() {
    let b = Tensor::from_slice(&[1.0f64, 1.0], [2, 1]);
    let a = Tensor::from_slice(&[1.0f64, 2.0, 2.0, 4.0], [2, 2]);
    match a.try_solve(&b).unwrap_err() {
        Error::SingularMatrix { op, shape, column } => {
            assert_eq!((op, column), ("solve", 1));
            assert_eq!(shape, Shape::from([2, 2]));
        }
        e => panic!("unexpected {e}"),
    }
    let z = Tensor::zeros([2, 2], DType::F64);
    assert!(matches!(
        z.try_solve(&b).unwrap_err(),
        Error::SingularMatrix { column: 0, .. }
    ));
    // Numerically singular: the second row differs from twice the first by
    // far less than n·ε·max|A|.
    let near = Tensor::from_slice(&[1.0f64, 2.0, 2.0, 4.0 + 1e-17], [2, 2]);
    assert!(near.try_solve(&b).is_err());
    let msg = a.try_solve(&b).unwrap_err().to_string();
    assert!(
        msg.contains("solve") && msg.contains("[2, 2]") && msg.contains("singular"),
        "{msg}"
    );
}

// ---------- layout ----------

#[test]
fn transpose_reshape_broadcast() {
    let mut rng = Rng(31);
    for dt in [DType::F64, DType::F32, DType::BF16, DType::I64, DType::Bool] {
        let dims = [2usize, 3, 4];
        let data: Vec<f64> = rng.vec(24).iter().map(|v| v.round()).collect();
        let x = tensor(&data, &dims, dt);
        let held = vals(&x);
        for perm in [[0usize, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]] {
            let od: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
            let want: Vec<f64> = (0..24)
                .map(|o| {
                    let oi = unravel(o, &od);
                    let mut ii = [0; 3];
                    for (k, &p) in perm.iter().enumerate() {
                        ii[p] = oi[k];
                    }
                    held[ravel(&ii, &dims)]
                })
                .collect();
            assert_close(&x.transpose(&perm), &want, &od, dt, "transpose");
        }
        assert_close(&x.reshape([4, 6]), &held, &[4, 6], dt, "reshape");
        let row = tensor(&data[..4], &[4], dt);
        let (want, shape) =
            ref_elementwise(&[(&vals(&row), &[4]), (&[0.0; 6], &[2, 3, 1])], |v| v[0]);
        assert_close(&row.broadcast_to([2, 3, 4]), &want, &shape, dt, "broadcast");
    }
    let s = Tensor::scalar(5.0f32).broadcast_to([2, 0]);
    assert_eq!(s.shape().dims(), &[2, 0]);
    let m = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [1, 2, 3]);
    assert_eq!(m.t().shape().dims(), &[1, 3, 2]);
    assert_eq!(vals(&m.t()), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
}

#[test]
fn concat_and_slice() {
    for dt in [DType::F64, DType::F32, DType::F16, DType::I64] {
        let a = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2], dt);
        let b = tensor(&[5.0, 6.0], &[2, 1], dt);
        let e = tensor(&[], &[2, 0], dt);
        let c = Tensor::concat(&[&a, &e, &b], 1);
        assert_close(
            &c,
            &[1.0, 2.0, 5.0, 3.0, 4.0, 6.0],
            &[2, 3],
            dt,
            "concat axis 1",
        );
        let r = Tensor::concat(&[&a, &a.slice(0, 1, 1)], 0);
        assert_close(
            &r,
            &[1.0, 2.0, 3.0, 4.0, 3.0, 4.0],
            &[3, 2],
            dt,
            "concat axis 0",
        );
        let x = tensor(&(0..24).map(f64::from).collect::<Vec<_>>(), &[2, 3, 4], dt);
        // Reference: keep elements whose axis-1 index lies in 1..3.
        let want: Vec<f64> = (0..24)
            .filter(|&i| (1..3).contains(&unravel(i, &[2, 3, 4])[1]))
            .map(|i| i as f64)
            .collect();
        assert_close(&x.slice(1, 1, 2), &want, &[2, 2, 4], dt, "slice");
        assert_eq!(x.slice(2, 4, 0).shape().dims(), &[2, 3, 0]);
    }
}

#[test]
fn gather_and_scatter_add() {
    let mut rng = Rng(37);
    for dt in [DType::F64, DType::F32, DType::F16] {
        let dims = [2usize, 4, 3];
        let x = tensor(&rng.vec(24), &dims, dt);
        let held = vals(&x);
        let idx_vals = [3i64, 0, 3, 1, 2, 2];
        let idx = Tensor::from_slice(&idx_vals, [2, 3]);
        // Gather along axis 1: out[p, i, j, q] = x[p, idx[i, j], q].
        let od = [2usize, 2, 3, 3];
        let want: Vec<f64> = (0..numel(&od))
            .map(|o| {
                let v = unravel(o, &od);
                let j = idx_vals[v[1] * 3 + v[2]] as usize;
                held[ravel(&[v[0], j, v[3]], &dims)]
            })
            .collect();
        let g = x.gather(&idx, 1);
        assert_close(&g, &want, &od, dt, "gather");
        // Scatter-add back: every update lands on its index, repeats accumulate.
        let upd = tensor(&rng.vec(numel(&od)), &od, dt);
        let uv = vals(&upd);
        let mut want = held.clone();
        for (o, &u) in uv.iter().enumerate() {
            let v = unravel(o, &od);
            let j = idx_vals[v[1] * 3 + v[2]] as usize;
            want[ravel(&[v[0], j, v[3]], &dims)] += u;
        }
        assert_close(
            &x.scatter_add(&idx, &upd, 1),
            &want,
            &dims,
            dt,
            "scatter_add",
        );
    }
    // 0-d index: takes one row and drops the axis.
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    let g = x.gather(&Tensor::scalar(1i64), 0);
    assert_eq!(g.shape().dims(), &[2]);
    assert_eq!(vals(&g), vec![3.0, 4.0]);
}

#[test]
fn index_out_of_range_is_an_error() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    for bad in [3i64, -1, i64::MIN] {
        let idx = Tensor::from_slice(&[0i64, bad], [2]);
        match x.try_gather(&idx, 0).unwrap_err() {
            Error::IndexOutOfRange {
                op,
                index,
                axis,
                size,
            } => {
                assert_eq!((op, index, axis, size), ("gather", bad, 0, 3));
            }
            e => panic!("unexpected {e}"),
        }
        let upd = Tensor::from_slice(&[1.0f64, 1.0], [2]);
        let e = x.try_scatter_add(&idx, &upd, 0).unwrap_err();
        assert!(
            matches!(
                e,
                Error::IndexOutOfRange {
                    op: "scatter_add",
                    ..
                }
            ),
            "{e}"
        );
    }
}

fn ref_softmax(x: &[f64], dims: &[usize], axis: usize, log: bool) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for (i, o) in out.iter_mut().enumerate() {
        let idx = unravel(i, dims);
        let row: Vec<f64> = (0..dims[axis])
            .map(|j| {
                let mut k = idx.clone();
                k[axis] = j;
                x[ravel(&k, dims)]
            })
            .collect();
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        *o = if log {
            x[i] - m - s.ln()
        } else {
            (x[i] - m).exp() / s
        };
    }
    out
}

#[test]
fn softmax_and_log_softmax_are_stable() {
    let mut rng = Rng(41);
    for dt in FLOATS {
        for (dims, axis) in [
            (&[2usize, 3, 4][..], 1usize),
            (&[2, 3, 4], 2),
            (&[5], 0),
            (&[3, 0], 0),
            (&[0, 3], 1),
        ] {
            let x = tensor(
                &rng.vec(numel(dims))
                    .iter()
                    .map(|v| v * 3.0)
                    .collect::<Vec<_>>(),
                dims,
                dt,
            );
            for log in [false, true] {
                let want = ref_softmax(&vals(&x), dims, axis, log);
                let got = if log {
                    x.log_softmax(axis)
                } else {
                    x.softmax(axis)
                };
                assert_close(
                    &got,
                    &want,
                    dims,
                    dt,
                    if log { "log_softmax" } else { "softmax" },
                );
            }
        }
    }
    let big = Tensor::from_slice(&[1000.0f32, 1001.0, 999.0], [3]);
    let p = vals(&big.softmax(0));
    assert!(p.iter().all(|v| v.is_finite()) && (p.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    assert!(vals(&big.log_softmax(0)).iter().all(|v| v.is_finite()));
}

// ---------- composites and operators ----------

#[test]
fn composites_match_their_formulas() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 9.0], [2, 3]);
    assert_eq!(x.dot(&x).item::<f64>().unwrap(), 136.0);
    assert!((x.norm().item::<f64>().unwrap() - 136f64.sqrt()).abs() < 1e-14);
    // var of [1,2,3] = 2/3, of [4,5,9] = (4+1+... ) mean 6: (4+1+9)/3 = 14/3.
    let v = vals(&x.var(&[1]));
    assert!((v[0] - 2.0 / 3.0).abs() < 1e-15 && (v[1] - 14.0 / 3.0).abs() < 1e-14);
    let ln = x.layer_norm(1, 0.0);
    let rows = vals(&ln);
    for r in 0..2 {
        let row = &rows[r * 3..r * 3 + 3];
        let m: f64 = row.iter().sum::<f64>() / 3.0;
        let var: f64 = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 3.0;
        assert!(m.abs() < 1e-15 && (var - 1.0).abs() < 1e-14, "{row:?}");
    }
    let logits = Tensor::from_slice(&[2.0f64, 1.0, 0.0, 0.0, 0.0, 3.0], [2, 3]);
    let labels = Tensor::from_slice(&[1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0], [2, 3]);
    let ce = Tensor::cross_entropy_with_logits(&logits, &labels)
        .item::<f64>()
        .unwrap();
    let l0 = -(2.0 - (2f64.exp() + 1f64.exp() + 1.0).ln());
    let l1 = -(0.0 - (1.0 + 1.0 + 3f64.exp()).ln());
    assert!((ce - (l0 + l1) / 2.0).abs() < 1e-14);
    assert_eq!(vals(&x.clamp(2.0, 4.0)), vec![2.0, 2.0, 3.0, 4.0, 4.0, 4.0]);
    assert_eq!(vals(&x.mean_all()), vec![4.0]);
}

#[test]
fn operators_on_values_references_and_scalars() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    let b = Tensor::from_slice(&[3.0f32, 5.0], [2]);
    assert_eq!(vals(&(&a + &b)), vec![4.0, 7.0]);
    assert_eq!(vals(&(a.clone() - &b)), vec![-2.0, -3.0]);
    assert_eq!(vals(&(&a * b.clone())), vec![3.0, 10.0]);
    assert_eq!(
        vals(&(a.clone() / b.clone())),
        vec![(1.0f32 / 3.0) as f64, (2.0f32 / 5.0) as f64]
    );
    assert_eq!(vals(&(2.0 * &a)), vec![2.0, 4.0]);
    assert_eq!(vals(&(&a - 1.0)), vec![0.0, 1.0]);
    assert_eq!(vals(&(1.0 / a.clone())), vec![1.0, 0.5]);
    assert_eq!(vals(&(10.0 - b.clone())), vec![7.0, 5.0]);
    assert_eq!(vals(&-&a), vec![-1.0, -2.0]);
    assert_eq!((2.0 * &a).dtype(), DType::F32);
    let mut c = a.clone();
    c += &b;
    c *= 2.0;
    c -= Tensor::scalar(1.0f32);
    c /= 0.5;
    assert_eq!(vals(&c), vec![14.0, 26.0]);
}

// ---------- interpreter ----------

#[test]
fn interpreter_runs_graphs_and_checks_inputs() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let w = g.input("w", [3], DType::F64);
    let c = g
        .constant(
            rlx_core::Literal::F64(vec![1.0, -1.0, 0.5].into()),
            [3],
            DType::F64,
        )
        .unwrap();
    let y = g.mul(x, w).unwrap();
    let y = g.add(y, c).unwrap();
    let s = g.sum(y, &[1]).unwrap();
    let e = g.exp(s).unwrap();
    g.set_outputs(vec![e, y]);
    let xv = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let wv = Tensor::from_slice(&[1.0f64, 0.0, 2.0], [3]);
    let out = interpret(&g, &[&xv, &wv]).unwrap();
    let eager = ((&xv * &wv) + Tensor::from_slice(&[1.0f64, -1.0, 0.5], [3]))
        .sum(&[1])
        .exp();
    assert_eq!(vals(&out[0]), vals(&eager));
    assert_eq!(out[1].shape().dims(), &[2, 3]);

    let e = interpret(&g, &[&xv]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::CountMismatch {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{e}"
    );
    let bad = Tensor::from_slice(&[1.0f32, 0.0, 2.0], [3]);
    let e = interpret(&g, &[&xv, &bad]).unwrap_err();
    match &e {
        Error::InputMismatch { name, .. } => assert_eq!(name, "w"),
        other => panic!("unexpected {other}"),
    }
    assert!(e.to_string().contains("`w`"), "{e}");
}

#[test]
fn interpreter_runs_custom_ops_by_their_forward_graph() {
    let mut f = Graph::new();
    let a = f.input("a", [2], DType::F64);
    let y = f.square(a).unwrap();
    let y = f.sum(y, &[0]).unwrap();
    f.set_outputs(vec![y]);
    let op = std::sync::Arc::new(rlx_core::CustomOp {
        name: "sumsq".into(),
        forward: f,
        vjp: None,
        jvp: None,
    });
    let mut g = Graph::new();
    let x = g.input("x", [2], DType::F64);
    let c = g.custom(op, &[x]).unwrap();
    g.set_outputs(vec![c]);
    let out = interpret(&g, &[&Tensor::from_slice(&[3.0f64, 4.0], [2])]).unwrap();
    assert_eq!(out[0].item::<f64>().unwrap(), 25.0);
}

// ---------- errors, printing, tracing ----------

#[test]
fn shape_errors_name_the_op_and_both_shapes() {
    let a = Tensor::zeros([2, 3], DType::F64);
    let b = Tensor::zeros([4], DType::F64);
    let msg = a.try_add(&b).unwrap_err().to_string();
    assert!(
        msg.contains("`add`") && msg.contains("[2, 3]") && msg.contains("[4]"),
        "{msg}"
    );
    let msg = a.try_matmul(&b.reshape([4, 1])).unwrap_err().to_string();
    assert!(
        msg.contains("`matmul`") && msg.contains("[2, 3]") && msg.contains("[4, 1]"),
        "{msg}"
    );
    let msg = a.try_reshape([5]).unwrap_err().to_string();
    assert!(msg.contains("reshape") && msg.contains("[5]"), "{msg}");
    // The panicking form names this file and line.
    let line = line!() + 1;
    let err = std::panic::catch_unwind(|| a.mul(&b)).unwrap_err();
    let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        text.contains("`mul`") && text.contains(&format!("ops_reference.rs:{line}")),
        "{text}"
    );
}

#[test]
fn display_matches_ndarray_style() {
    let m = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    assert_eq!(m.to_string(), "[[1, 2],\n [3, 4]]");
    assert_eq!(
        format!("{m:?}"),
        "[[1.0, 2.0],\n [3.0, 4.0]], shape=[2, 2], dtype=f64"
    );
    let c = Tensor::arange(8, DType::I64).reshape([2, 2, 2]);
    assert_eq!(
        c.to_string(),
        "[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]]"
    );
    assert_eq!(Tensor::scalar(2.5f32).to_string(), "2.5");
    assert_eq!(Tensor::zeros([0], DType::F32).to_string(), "[]");
    assert_eq!(Tensor::zeros([2, 0], DType::F32).to_string(), "[[],\n []]");
    assert_eq!(
        Tensor::from_slice(&[true, false], [2]).to_string(),
        "[true, false]"
    );
    assert_eq!(
        format!("{:.2}", Tensor::from_slice(&[1.0f64, 1.0 / 3.0], [2])),
        "[1.00, 0.33]"
    );
    let h = tensor(&[1.5, -2.0], &[2], DType::F16);
    assert_eq!(format!("{h:?}"), "[1.5, -2.0], shape=[2], dtype=f16");
    let long = Tensor::arange(1000, DType::I64);
    assert_eq!(long.to_string(), "[0, 1, 2, ..., 997, 998, 999]");
}

#[test]
fn traced_tensors_record_ops_and_errors() {
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let y = (x.sin() * 2.0 + 1.0).sum_all();
    assert_eq!(
        format!("{y}"),
        format!("Tensor(traced %{}: f64[])", y.traced_node().unwrap().0)
    );
    assert!(format!("{x:?}").starts_with("Tensor(traced %0: f64[3]"));
    let g = t.finish(&[&y]).unwrap();
    g.verify().unwrap();
    let ops: Vec<&str> = g.nodes().iter().map(|n| n.op.name()).collect();
    assert_eq!(
        ops,
        ["input", "sin", "constant", "mul", "constant", "add", "sum"]
    );
    let out = interpret(&g, &[&Tensor::from_slice(&[0.0f64, 0.0, 0.0], [3])]).unwrap();
    assert_eq!(out[0].item::<f64>().unwrap(), 3.0);

    // A shape error is recorded with this file and line, and tracing goes on.
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let line = line!() + 1;
    let bad = x.add(&Tensor::zeros([2], DType::F64));
    let after = bad.exp();
    let err = t.finish(&[&after]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`add`") && msg.contains("[3]") && msg.contains("[2]"),
        "{msg}"
    );
    assert!(msg.contains(&format!("ops_reference.rs:{line}")), "{msg}");

    // A concrete tensor created outside the trace is refused.
    let captured = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let y = &x * &captured;
    let err = t.finish(&[&y]).unwrap_err();
    assert!(err.to_string().contains("created outside"), "{err}");

    // ... also after eager arithmetic on it inside the trace, while values
    // created inside the trace are legal constants.
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let local = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]).exp() * 2.0;
    let ok = &x * &local;
    let laundered = (captured.sin() + 1.0).reshape([3]);
    let y = &ok + &laundered;
    let err = t.finish(&[&y]).unwrap_err();
    assert!(err.to_string().contains("created outside"), "{err}");
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let local = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]).exp() * 2.0;
    let g = t.finish(&[&(&x * &local)]).unwrap();
    let out = interpret(&g, &[&Tensor::from_slice(&[1.0f64, 1.0, 1.0], [3])]).unwrap();
    let want: Vec<f64> = [1.0f64, 2.0, 3.0]
        .iter()
        .map(|&v| rlx_runtime::kernels::vmath::exp(v) * 2.0)
        .collect();
    assert_eq!(vals(&out[0]), want);
}

#[test]
fn eval_into_reports_bad_calls() {
    use rlx_runtime::kernels::{eval_into, Operand};
    let s = Shape::from([2]);
    let x = Storage::F64(vec![1.0, 2.0]);
    let mut out = Storage::F64(vec![0.0; 2]);
    let e = eval_into(&Op::Input { index: 0 }, &[], &s, &mut out).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "input", .. }),
        "{e}"
    );
    let mut short = Storage::F64(vec![0.0; 1]);
    let e = eval_into(
        &Op::Unary(UnaryOp::Exp),
        &[Operand::new(&x, &s)],
        &s,
        &mut short,
    );
    assert!(e.unwrap_err().to_string().contains("output buffer"));
    let mut wrong = Storage::F32(vec![0.0; 2]);
    let e = eval_into(
        &Op::Unary(UnaryOp::Exp),
        &[Operand::new(&x, &s)],
        &s,
        &mut wrong,
    );
    assert!(matches!(
        e.unwrap_err(),
        Error::DTypeMismatch { op: "exp", .. }
    ));
    let e = eval_into(
        &Op::Binary(BinaryOp::Add),
        &[Operand::new(&x, &s)],
        &s,
        &mut out,
    );
    assert!(matches!(
        e.unwrap_err(),
        Error::Arity {
            op: "add",
            expected: 2,
            got: 1
        }
    ));
    // Shapes that do not agree with the output are refused, not indexed out of bounds.
    let s3 = Shape::from([3]);
    let mut out3 = Storage::F64(vec![0.0; 3]);
    let ops = [
        Op::Binary(BinaryOp::Mul),
        Op::Concat { axis: 0 },
        Op::MatMul,
    ];
    for op in &ops {
        let e = eval_into(
            op,
            &[Operand::new(&x, &s), Operand::new(&x, &s)],
            &s3,
            &mut out3,
        );
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("[2], [2]") && msg.contains("[3]"), "{msg}");
    }
    let e = eval_into(
        &Op::Slice {
            axis: 0,
            start: 1,
            len: 3,
        },
        &[Operand::new(&x, &s)],
        &s3,
        &mut out3,
    );
    assert!(e.is_err());
    // A constant fills its literal, converted to the output dtype.
    let mut c = Storage::I64(vec![0; 3]);
    let lit = rlx_core::Literal::F64(vec![1.9, -2.0, 3.0].into());
    eval_into(&Op::Constant(lit), &[], &Shape::from([3]), &mut c).unwrap();
    assert_eq!(c, Storage::I64(vec![1, -2, 3]));
}
