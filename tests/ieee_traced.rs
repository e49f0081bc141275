//! Traced code computes what IEEE arithmetic says, as the plain call does:
//! the optimiser applies no identity that fails for NaN, ±inf or −0.0
//! (`x · 0 = 0`, `x + 0 = x`, ...), so a companion's value is the plain
//! call's value bit for bit (any NaN equal to any NaN), and its derivative
//! is the one the arithmetic gives.

use rlx::prelude::*;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}

fn same_bits(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "{what}: element {i}: got {a:?}, want {b:?}"
        );
    }
}

#[differentiable]
fn times_zero(x: &Tensor) -> Tensor {
    (x * 0.0).sum_all()
}

#[differentiable]
fn signed_zeros(x: &Tensor) -> Tensor {
    // x + 0 turns −0.0 into +0.0; 0 − x of +0.0 is +0.0, not −0.0;
    // x · 0 of a negative x is −0.0.
    let a = x + 0.0;
    let b = 0.0 - x;
    let c = x * 0.0;
    (a.square() + b + c).sum_all() + (x * 0.0).sum_all()
}

#[test]
fn times_zero_of_a_non_finite_value_is_nan_with_the_arithmetics_gradient() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let x = t(&[1.5, bad, -2.0]);
        let plain = times_zero(&x).item::<f64>().unwrap();
        assert!(plain.is_nan(), "plain call with {bad}: {plain}");
        let (v, d) = value_and_grad_times_zero(&x).unwrap();
        let v = v.item::<f64>().unwrap();
        assert!(v.is_nan(), "traced value with {bad}: {v}");
        // d/dx_i Σ x_j · 0 = 0 for every x: the reverse rule multiplies the
        // unit cotangent by the constant 0 (1 · 0 = 0).
        same_bits(
            &d.to_vec::<f64>().unwrap(),
            &[0.0, 0.0, 0.0],
            &format!("gradient with {bad}"),
        );
        let d = grad_times_zero(&x).unwrap();
        same_bits(
            &d.to_vec::<f64>().unwrap(),
            &[0.0, 0.0, 0.0],
            &format!("grad_ with {bad}"),
        );
    }
    // Finite inputs: 0, with the sign IEEE gives the sum.
    let x = t(&[1.5, -3.0, 2.0]);
    let (v, _) = value_and_grad_times_zero(&x).unwrap();
    same_bits(&[v.item::<f64>().unwrap()], &[0.0], "finite");
    let x = t(&[-1.5, -3.0]);
    let want = times_zero(&x).item::<f64>().unwrap();
    let (v, _) = value_and_grad_times_zero(&x).unwrap();
    same_bits(&[v.item::<f64>().unwrap()], &[want], "negative");
}

#[test]
fn signed_zeros_and_infinities_agree_with_the_plain_call() {
    let inputs: [&[f64]; 4] = [
        &[0.0, -0.0],
        &[-0.0, -0.0, -0.0],
        &[f64::INFINITY, -1.0, 5e-324],
        &[-5e-324, f64::NAN, 2.0],
    ];
    for v in inputs {
        let x = t(v);
        let want = signed_zeros(&x).item::<f64>().unwrap();
        let (got, d) = value_and_grad_signed_zeros(&x).unwrap();
        same_bits(
            &[got.item::<f64>().unwrap()],
            &[want],
            &format!("value at {v:?}"),
        );
        // d/dx_i = 2 (x_i + 0) − 1 + 0 + 0.
        let dw: Vec<f64> = v.iter().map(|&xi| 2.0 * (xi + 0.0) - 1.0).collect();
        same_bits(
            &d.to_vec::<f64>().unwrap(),
            &dw,
            &format!("gradient at {v:?}"),
        );
    }
}
