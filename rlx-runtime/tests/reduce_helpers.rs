//! Reductions that keep their axes, `logsumexp` (value, stability, the
//! gradient against central differences and the softmax) and `concat` of
//! owned tensors.

use rlx_core::{autodiff, DType};
use rlx_runtime::trace::Trace;
use rlx_runtime::{compile, Tensor};

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

#[test]
fn keepdim_reductions_keep_size_one_axes_and_broadcast_back() {
    let x = Tensor::from_slice(&[1.0f64, 5.0, 3.0, 4.0, 2.0, 6.0], [2, 3]);
    let cases = [
        (x.sum_keepdim(&[1]), vec![9.0, 12.0], vec![2, 1]),
        (x.mean_keepdim(&[0]), vec![2.5, 3.5, 4.5], vec![1, 3]),
        (x.max_keepdim(&[1]), vec![5.0, 6.0], vec![2, 1]),
        (x.min_keepdim(&[0, 1]), vec![1.0], vec![1, 1]),
        (x.prod_keepdim(&[1]), vec![15.0, 48.0], vec![2, 1]),
    ];
    for (got, want, dims) in cases {
        assert_eq!(got.shape().dims(), dims.as_slice());
        assert_eq!(vals(&got), want);
    }
    // centring rows needs no reshape
    let c = &x - x.mean_keepdim(&[1]);
    assert_eq!(vals(&c), vec![-2.0, 2.0, 0.0, 0.0, -2.0, 2.0]);
    assert!(x.try_sum(&[2]).is_err());
}

/// ln Σ exp over the last axis, the naive way.
fn naive_lse(row: &[f64]) -> f64 {
    row.iter().map(|v| v.exp()).sum::<f64>().ln()
}

#[test]
fn logsumexp_is_stable_and_its_gradient_is_the_softmax() {
    let rows = [[0.3, -1.2, 2.0], [5.0, 4.5, -3.0]];
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    let x = Tensor::from_slice(&flat, [2, 3]);
    let l = vals(&x.logsumexp(&[1]));
    for (got, row) in l.iter().zip(&rows) {
        assert!((got - naive_lse(row)).abs() < 1e-14);
    }
    // large values do not overflow; all -∞ gives -∞, not NaN
    let big = Tensor::from_slice(
        &[800.0f64, 800.0, f64::NEG_INFINITY, f64::NEG_INFINITY],
        [2, 2],
    );
    let l = vals(&big.logsumexp(&[1]));
    assert_eq!(l, vec![800.0 + std::f64::consts::LN_2, f64::NEG_INFINITY]);

    // gradient of Σ_rows w_r · lse(row) against differences and the softmax
    let w = [1.5, -0.5];
    let t = Trace::enter();
    let xi = t.input("x", [2, 3], DType::F64);
    let wt = Tensor::from_slice(&w, [2]);
    let y = (xi.logsumexp(&[1]) * wt).sum_all();
    let g = t.finish(&[&y]).unwrap();
    let dg = autodiff::grad(&g, &[0]).unwrap();
    let grad = vals(&compile(&dg).unwrap().run(&[&x]).unwrap()[1]);
    let f = |v: &[f64]| w[0] * naive_lse(&v[..3]) + w[1] * naive_lse(&v[3..]);
    let h = 1e-6;
    for i in 0..6 {
        let (mut p, mut m) = (flat.clone(), flat.clone());
        p[i] += h;
        m[i] -= h;
        let fd = (f(&p) - f(&m)) / (2.0 * h);
        assert!((grad[i] - fd).abs() < 1e-7, "d/dx{i}: {} vs {fd}", grad[i]);
    }
    let soft = vals(&x.softmax(1));
    for i in 0..6 {
        assert!((grad[i] - w[i / 3] * soft[i]).abs() < 1e-14);
    }
    // forward mode agrees: the JVP along e_0 is ∂/∂x_0
    let jg = autodiff::jvp(&g, &[0]).unwrap();
    let mut e0 = vec![0.0; 6];
    e0[0] = 1.0;
    let out = compile(&jg)
        .unwrap()
        .run(&[&x, &Tensor::from_slice(&e0, [2, 3])])
        .unwrap();
    assert!((vals(&out[1])[0] - grad[0]).abs() < 1e-14);
}

#[test]
fn concat_takes_owned_tensors_and_references() {
    let parts: Vec<Tensor> = (0..3)
        .map(|i| Tensor::from_slice(&[i as f64, 10.0 + i as f64], [2, 1]))
        .collect();
    let c = Tensor::concat(&parts, 1);
    assert_eq!(c.shape().dims(), &[2, 3]);
    assert_eq!(vals(&c), vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
    let refs: Vec<&Tensor> = parts.iter().rev().collect();
    assert_eq!(vals(&Tensor::concat(&refs, 0))[..2], [2.0, 12.0]);
    assert_eq!(
        Tensor::concat(&[&parts[0], &parts[1]], 0).shape().dims(),
        &[4, 1]
    );
    let bad = [parts[0].clone(), Tensor::from_slice(&[1.0f64; 3], [3, 1])];
    let e = Tensor::try_concat(&bad, 1).unwrap_err().to_string();
    assert!(e.contains("concat"), "{e}");
}
