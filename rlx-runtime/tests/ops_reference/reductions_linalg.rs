//! Reductions, matrix products and solves.

use super::*;

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
                let Val {
                    data: want,
                    dims: shape,
                } = reference::reduce(op, axes, &Val::new(vals(&x), dims));
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
    let x = Tensor::full([n], 0.1, DType::F32);
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
            let Val {
                data: want,
                dims: shape,
            } = reference::matmul(&Val::new(vals(&a), sa), &Val::new(vals(&b), sb));
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
            let ax = reference::matmul(
                &Val::new(vals(&ta), &[batch, n, n]),
                &Val::new(vals(&x), &[batch, n, k]),
            )
            .data;
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
