//! Element-wise ops: unary and binary ops in every float dtype with
//! broadcasting, special values, integers and bools, comparisons, select,
//! casts.

use super::*;

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
                let want: Vec<f64> = vals(&x).iter().map(|&v| reference::unary(op, v)).collect();
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
                let Val {
                    data: want,
                    dims: shape,
                } = broadcast_map(&[&Val::new(va, sa), &Val::new(vb, sb)], |v| {
                    reference::binary(op, v[0], v[1])
                });
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
                let Val {
                    data: want,
                    dims: shape,
                } = broadcast_map(&[&Val::new(va, sa), &Val::new(vb, sb)], |v| {
                    reference::compare(op, v[0], v[1])
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
        let args = [
            &Val::new(vm, &[2, 1]),
            &Val::new(va, &[3]),
            &Val::new(vb, &[]),
        ];
        let Val {
            data: want,
            dims: shape,
        } = broadcast_map(&args, |v| if v[0] != 0.0 { v[1] } else { v[2] });
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
