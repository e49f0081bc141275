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

/// `Σ |A⁻¹ b|²`: a real function of a complex solve.
#[differentiable]
fn solved_energy(a: &Tensor, b: &Tensor) -> f64 {
    a.solve(b).norm_sqr().sum_all()
}

#[test]
fn grad_of_a_real_function_of_a_complex_solve_matches_central_differences() {
    let a = vec![c(2.0, 0.5), c(0.3, -1.0), c(-0.4, 0.2), c(1.5, 1.0)];
    let b = vec![c(1.0, -0.5), c(0.25, 2.0)];
    let f = |a: &[C64], b: &[C64]| {
        solved_energy(
            &Tensor::from_slice(a, [2, 2]),
            &Tensor::from_slice(b, [2, 1]),
        )
    };
    let (ga, gb) = grad_solved_energy(
        &Tensor::from_slice(&a, [2, 2]),
        &Tensor::from_slice(&b, [2, 1]),
    )
    .unwrap();
    let (ga, gb) = (ga.to_vec::<C64>().unwrap(), gb.to_vec::<C64>().unwrap());
    let h = 1e-6;
    // grad = ∂f/∂x − i ∂f/∂y: its real part along the real axis of an
    // entry, minus its imaginary part along the imaginary axis.
    for (input, grads) in [(0, &ga), (1, &gb)] {
        for (q, gq) in grads.iter().enumerate() {
            for dir in [c(1.0, 0.0), c(0.0, 1.0)] {
                let at = |s: f64| {
                    let (mut pa, mut pb) = (a.clone(), b.clone());
                    match input {
                        0 => pa[q] += dir * s,
                        _ => pb[q] += dir * s,
                    }
                    f(&pa, &pb)
                };
                let fd = (at(h) - at(-h)) / (2.0 * h);
                let want = (gq * dir).re;
                assert!(
                    (fd - want).abs() <= 1e-7 * (1.0 + fd.abs()),
                    "input {input} entry {q} direction {dir}: grad {want} vs fd {fd}"
                );
            }
        }
    }
}

/// `z²`, declared holomorphic: `grad_`/`jacobian_` give `f′(z) = 2z`.
#[differentiable(holomorphic)]
fn square_h(z: &Tensor) -> Tensor {
    z.square()
}

/// `Σ (A⁻¹ b)`, holomorphic in `A` and `b`.
#[differentiable(holomorphic)]
fn solved_sum(a: &Tensor, b: &Tensor) -> Tensor {
    a.solve(b).sum_all()
}

/// `Σ |z|²`, real-valued: the holomorphic option does not apply.
#[differentiable(holomorphic)]
fn energy_h(z: &Tensor) -> f64 {
    z.norm_sqr().sum_all()
}

#[test]
fn holomorphic_grad_of_z_squared_at_1_plus_i_is_2_plus_2i() {
    let z = Tensor::from_slice(&[c(1.0, 1.0)], [1]);
    assert_eq!(
        grad_square_h(&z).unwrap().to_vec::<C64>().unwrap(),
        vec![c(2.0, 2.0)]
    );
    let (y, g) = value_and_grad_square_h(&z).unwrap();
    assert_eq!(y.to_vec::<C64>().unwrap(), vec![c(0.0, 2.0)]);
    assert_eq!(g.to_vec::<C64>().unwrap(), vec![c(2.0, 2.0)]);
    // The Jacobian of the element-wise square is diag(2z).
    let zs = [c(1.0, 1.0), c(-0.5, 2.0), c(3.0, 0.0)];
    let j = jacobian_square_h(&Tensor::from_slice(&zs, [3])).unwrap();
    assert_eq!(j.shape().dims(), &[3, 3]);
    let j = j.to_vec::<C64>().unwrap();
    for r in 0..3 {
        for k in 0..3 {
            let want = if r == k { zs[r] * 2.0 } else { c(0.0, 0.0) };
            assert_eq!(j[r * 3 + k], want, "J[{r}, {k}]");
        }
    }
    // Without the option the same function has no gradient (see
    // `a_complex_output_has_no_gradient_but_a_bilinear_vjp`); with it, a
    // real-valued one is an error pointing back.
    let e = grad_energy_h(&z).unwrap_err().to_string();
    assert!(
        e.contains("holomorphic") && e.contains("complex output"),
        "{e}"
    );
}

#[test]
fn holomorphic_grad_of_a_complex_solve_matches_differences_along_both_axes() {
    let a = vec![c(2.0, 0.5), c(0.3, -1.0), c(-0.4, 0.2), c(1.5, 1.0)];
    let b = vec![c(1.0, -0.5), c(0.25, 2.0)];
    let f = |a: &[C64], b: &[C64]| {
        solved_sum(
            &Tensor::from_slice(a, [2, 2]),
            &Tensor::from_slice(b, [2, 1]),
        )
        .item::<C64>()
        .unwrap()
    };
    let (ga, gb) = grad_solved_sum(
        &Tensor::from_slice(&a, [2, 2]),
        &Tensor::from_slice(&b, [2, 1]),
    )
    .unwrap();
    let (ga, gb) = (ga.to_vec::<C64>().unwrap(), gb.to_vec::<C64>().unwrap());
    let h = 1e-6;
    // For a holomorphic f, f′ is the difference quotient along either axis.
    for (input, grads) in [(0, &ga), (1, &gb)] {
        for (q, gq) in grads.iter().enumerate() {
            for dir in [c(1.0, 0.0), c(0.0, 1.0)] {
                let at = |s: f64| {
                    let (mut pa, mut pb) = (a.clone(), b.clone());
                    match input {
                        0 => pa[q] += dir * s,
                        _ => pb[q] += dir * s,
                    }
                    f(&pa, &pb)
                };
                let fd = (at(h) - at(-h)) / (dir * (2.0 * h));
                assert!(
                    (fd - gq).norm() <= 1e-7 * (1.0 + fd.norm()),
                    "input {input} entry {q} direction {dir}: f′ {gq} vs difference {fd}"
                );
            }
        }
    }
}

/// `z · s`, holomorphic in `z`, with a real `s`.
#[differentiable(holomorphic)]
fn scaled(z: &Tensor, s: f64) -> Tensor {
    (z * &s).sum_all()
}

/// The same with only `z` differentiated.
#[differentiable(holomorphic, wrt(z))]
fn scaled_z(z: &Tensor, s: f64) -> Tensor {
    (z * &s).sum_all()
}

#[test]
fn a_holomorphic_derivative_is_with_respect_to_complex_parameters_only() {
    let z = Tensor::from_slice(&[c(1.0, 1.0), c(0.0, -2.0)], [2]);
    let e = grad_scaled(&z, 3.0).unwrap_err().to_string();
    assert!(e.contains("complex inputs") && e.contains("f64"), "{e}");
    let g = grad_scaled_z(&z, 3.0).unwrap();
    assert_eq!(g.to_vec::<C64>().unwrap(), vec![c(3.0, 0.0), c(3.0, 0.0)]);
}

/// `Σ |w_T|²` with `w ← w · a + 0.1 w²` for `steps` steps in a `#[scan]`
/// loop (a complex carry and a complex invariant).
#[differentiable]
fn rotated(z: &Tensor, a: &Tensor, steps: usize) -> f64 {
    let mut w = z.clone();
    #[scan]
    for _ in 0..steps {
        w = &w * a + 0.1 * &w.square();
    }
    w.norm_sqr().sum_all()
}

/// The same loop unrolled at trace time.
#[differentiable]
fn rotated_unrolled(z: &Tensor, a: &Tensor, steps: usize) -> f64 {
    let mut w = z.clone();
    for _ in 0..steps {
        w = &w * a + 0.1 * &w.square();
    }
    w.norm_sqr().sum_all()
}

#[test]
fn complex_carries_flow_through_scan_loops() {
    let z = Tensor::from_slice(&[c(0.3, 0.4), c(-0.2, 0.1)], [2]);
    let a = Tensor::from_slice(&[c(0.5, 0.25), c(0.9, -0.3)], [2]);
    let (g_scan, ga_scan) = grad_rotated(&z, &a, 5).unwrap();
    let (g_unr, ga_unr) = grad_rotated_unrolled(&z, &a, 5).unwrap();
    assert!((rotated(&z, &a, 5) - rotated_unrolled(&z, &a, 5)).abs() < 1e-15);
    for (s, u) in [(&g_scan, &g_unr), (&ga_scan, &ga_unr)] {
        for (x, y) in s
            .to_vec::<C64>()
            .unwrap()
            .iter()
            .zip(u.to_vec::<C64>().unwrap())
        {
            assert!((x - y).norm() < 1e-14, "{x} vs {y}");
        }
    }
    // Central differences along both axes of each element of z:
    // grad = ∂f/∂x − i ∂f/∂y.
    let zs = z.to_vec::<C64>().unwrap();
    let f = |zs: &[C64]| rotated(&Tensor::from_slice(zs, [2]), &a, 5);
    let h = 1e-6;
    for (k, g) in g_scan.to_vec::<C64>().unwrap().iter().enumerate() {
        let mut d = [0.0; 2];
        for (axis, step) in [c(h, 0.0), c(0.0, h)].into_iter().enumerate() {
            let (mut up, mut dn) = (zs.clone(), zs.clone());
            up[k] += step;
            dn[k] -= step;
            d[axis] = (f(&up) - f(&dn)) / (2.0 * h);
        }
        assert!((g - c(d[0], -d[1])).norm() < 1e-8, "{g} vs {d:?}");
    }
}
