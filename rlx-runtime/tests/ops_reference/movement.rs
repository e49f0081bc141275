//! Movement and indexing ops, softmax.

use super::*;

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
        let Val {
            data: want,
            dims: shape,
        } = broadcast_map(
            &[
                &Val::new(vals(&row), &[4]),
                &Val::new(vec![0.0; 6], &[2, 3, 1]),
            ],
            |v| v[0],
        );
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
        let r = Tensor::concat(&[&a, &a.slice_range(1..2, 0)], 0);
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
        assert_close(&x.slice_range(1..3, 1), &want, &[2, 2, 4], dt, "slice");
        assert_eq!(x.slice_range(4..4, 2).shape().dims(), &[2, 3, 0]);
    }
}

/// Every form of range `slice_range` takes, its errors (no panic from the
/// `try_` form, a message naming `slice`, the axis and the shape), and the
/// deprecated `slice(axis, start, len)` giving the same elements.
#[test]
fn slice_range_forms_errors_and_the_deprecated_order() {
    let x = tensor(
        &(0..12).map(f64::from).collect::<Vec<_>>(),
        &[3, 4],
        DType::F64,
    );
    let v = |t: &Tensor| t.to_f64_vec().unwrap();
    assert_eq!(v(&x.slice_range(1..3, 1)), [1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
    assert_eq!(v(&x.slice_range(1..=2, 1)), v(&x.slice_range(1..3, 1)));
    assert_eq!(v(&x.slice_range(2.., 0)), [8.0, 9.0, 10.0, 11.0]);
    assert_eq!(v(&x.slice_range(..1, 0)), [0.0, 1.0, 2.0, 3.0]);
    assert_eq!(v(&x.slice_range(.., 1)), v(&x));
    assert_eq!(x.slice_range(4.., 1).shape().dims(), &[3, 0]);
    for (r, axis, says) in [
        (
            (2, 5),
            1,
            "elements 2..5 are out of range for axis 1 of size 4 (shape [3, 4])",
        ),
        (
            (3, 1),
            0,
            "the range 3..1 ends before it starts (axis 0 of shape [3, 4])",
        ),
        (
            (0, 1),
            2,
            "axis 2 is out of range for a tensor of rank 2 (shape [3, 4])",
        ),
    ] {
        let e = x.try_slice_range(r.0..r.1, axis).unwrap_err();
        assert!(
            matches!(e, rlx_runtime::Error::InvalidArgument { op: "slice", .. }),
            "{e}"
        );
        assert!(e.to_string().contains(says), "{e}");
        let panic = std::panic::catch_unwind(|| x.slice_range(r.0..r.1, axis)).unwrap_err();
        let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains(says) && msg.contains("movement.rs"), "{msg}");
    }
    let e = x.try_slice_range(..=usize::MAX, 0).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    #[allow(deprecated)]
    {
        assert_eq!(v(&x.slice(1, 1, 2)), v(&x.slice_range(1..3, 1)));
        assert!(x.try_slice(0, 2, 2).is_err());
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

/// Sorted element indices take the kernel's one-pass path (chunks of 4096
/// elements copied, then added into): indices at and across chunk edges,
/// repeats, several rows, against the element-by-element definition.
#[test]
fn scatter_add_with_sorted_indices() {
    let mut rng = Rng(43);
    let idx_vals = [0i64, 0, 5, 4095, 4096, 4096, 8191, 8192, 8999];
    let n = idx_vals.len();
    for dt in [DType::F64, DType::F32] {
        let dims = [2usize, 9000];
        let x = tensor(&rng.vec(2 * 9000), &dims, dt);
        let upd = tensor(&rng.vec(2 * n), &[2, n], dt);
        let (mut want, uv) = (vals(&x), vals(&upd));
        for row in 0..2 {
            for (k, &j) in idx_vals.iter().enumerate() {
                want[row * 9000 + j as usize] += uv[row * n + k];
            }
        }
        let idx = Tensor::from_slice(&idx_vals, [n]);
        let got = x.scatter_add(&idx, &upd, 1);
        assert_close(&got, &want, &dims, dt, "scatter_add (sorted)");
    }
    // Sorted but out of range at either end.
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let upd = Tensor::from_slice(&[1.0f64, 1.0], [2]);
    for bad in [[-1i64, 0], [0, 3]] {
        let e = x
            .try_scatter_add(&Tensor::from_slice(&bad, [2]), &upd, 0)
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::IndexOutOfRange {
                    op: "scatter_add",
                    size: 3,
                    ..
                }
            ),
            "{e}"
        );
    }
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
                let want = reference::softmax(&Val::new(vals(&x), dims), axis, log);
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
