//! Complex tensors through `#[differentiable]` companions, by JAX's
//! convention: `grad_f` of a real-valued `f` of a complex `z` is
//! `∂f/∂x − i ∂f/∂y`; a complex-valued output has no gradient (an error
//! pointing to `vjp_`/`jvp_`), and its VJP is bilinear (`ct · f′(z)` for a
//! holomorphic `f`, no conjugation).

use rlx::prelude::*;

/// `Σ |z|²`: real-valued, not holomorphic.
#[differentiable]
fn energy(z: &Tensor) -> f64 {
    z.norm_sqr().sum_all()
}

/// `Σ |z − w| · s`: a real scale, a complex `w`.
#[differentiable]
fn distance(z: &Tensor, w: &Tensor, s: f64) -> f64 {
    (z - w).abs().sum_all() * s
}

/// `z²`, complex-valued.
#[differentiable]
fn square(z: &Tensor) -> Tensor {
    z.square()
}

fn c(re: f64, im: f64) -> C64 {
    C64::new(re, im)
}

#[test]
fn grad_of_norm_sqr_is_the_conjugate_direction() {
    let z = Tensor::from_slice(&[c(3.0, 4.0), c(-1.0, 0.5)], [2]);
    let g = grad_energy(&z).unwrap();
    assert_eq!(
        g.to_vec::<C64>().unwrap(),
        vec![c(6.0, -8.0), c(-2.0, -1.0)]
    );
    let (e, g2) = value_and_grad_energy(&z).unwrap();
    assert_eq!(e, 25.0 + 1.25);
    assert_eq!(g2.to_vec::<C64>().unwrap(), g.to_vec::<C64>().unwrap());
    // A plain call runs the same plan.
    assert_eq!(energy(&z), e);
}

#[test]
fn grad_of_a_distance_with_a_real_scale() {
    // d/dz |z − w| = conj(z − w)/|z − w| (the unit vector, conjugated);
    // at z − w = i that is −i; the gradient of s is the distance.
    let z = Tensor::from_slice(&[c(1.0, 1.0)], [1]);
    let w = Tensor::from_slice(&[c(1.0, 0.0)], [1]);
    let (dz, dw, ds) = grad_distance(&z, &w, 2.0).unwrap();
    assert_eq!(dz.to_vec::<C64>().unwrap(), vec![c(0.0, -2.0)]);
    assert_eq!(dw.to_vec::<C64>().unwrap(), vec![c(0.0, 2.0)]);
    assert_eq!(ds, 1.0);
}

#[test]
fn a_complex_output_has_no_gradient_but_a_bilinear_vjp() {
    let z = Tensor::from_slice(&[c(1.0, 1.0)], [1]);
    let e = grad_square(&z).unwrap_err().to_string();
    assert!(e.contains("vjp_") && e.contains("c64"), "{e}");
    // vjp: ct · 2z, no conjugation.
    let ct = Tensor::from_slice(&[c(0.5, -2.0)], [1]);
    let (y, g) = vjp_square(&z, &ct).unwrap();
    assert_eq!(y.to_vec::<C64>().unwrap(), vec![c(0.0, 2.0)]);
    assert_eq!(g.to_vec::<C64>().unwrap(), vec![c(0.5, -2.0) * c(2.0, 2.0)]);
    // jvp: 2z · t.
    let (_, t) = jvp_square(&z, &ct).unwrap();
    assert_eq!(t.to_vec::<C64>().unwrap(), vec![c(2.0, 2.0) * c(0.5, -2.0)]);
}
