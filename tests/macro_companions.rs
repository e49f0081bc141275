//! Companions of `#[differentiable]` functions: against the core transforms
//! called directly on the traced graph, against central finite differences
//! of the plain call, composition, errors and thread safety.

use rlx::prelude::*;
use rlx::{autodiff, compile, Graph, TensorType};

#[path = "../benches/common/device.rs"]
mod device;
use device::{batch_jacobian_device, device, device_jacobian_by_hand, jacobian_device};

/// E(q, k) = k · Σ sin(q_i) q_i + Σ exp(k q_i) / 10
#[differentiable]
fn energy(q: &Tensor, k: f64) -> f64 {
    let a = (q.sin() * q).sum_all() * &k;
    let b = (q * &k).exp().sum_all();
    a + b * 0.1
}

/// y_i = sin(x_i) · Σ_j x_j (a dense Jacobian)
#[differentiable]
fn field(x: &Tensor) -> Tensor {
    x.sin() * x.sum_all()
}

/// Row-local: y_n = Σ_j exp(x_nj) sin(x_nj)
#[differentiable]
fn rows(x: &Tensor) -> Tensor {
    (x.exp() * x.sin()).sum(&[1])
}

/// Uses another differentiable function's plain call and a companion.
#[differentiable]
fn outer(x: &Tensor) -> Tensor {
    let inner = field(x).sum_all();
    let g = grad_sumsin(x).unwrap();
    inner + g.sum_all()
}

#[differentiable]
fn sumsin(x: &Tensor) -> Tensor {
    (x.sin() * x).sum_all()
}

/// The gradient of `sumsin`, differentiable again (nesting).
#[differentiable]
fn grad_of_sumsin(x: &Tensor) -> Tensor {
    grad_sumsin(x).unwrap()
}

/// The line of the multiplication in `needs_three`, which fails for inputs
/// that are not of length 3.
const NEEDS_THREE_LINE: u32 = line!() + 6;

/// A function that is wrong for some input shapes (a shape error in traced code).
#[differentiable]
fn needs_three(x: &Tensor) -> Tensor {
    let w = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    (x * &w).sum_all()
}

thread_local! {
    static CAPTURED: Tensor = Tensor::from_slice(&[1.0f64, 2.0], [2]);
}

/// Captures a concrete tensor created outside the trace.
#[differentiable]
fn captures(x: &Tensor) -> Tensor {
    let c = CAPTURED.with(|c| c.clone());
    (x * &c).sum_all()
}

/// f32 parameters and result.
#[differentiable]
fn single(a: f32, b: &Tensor) -> f32 {
    (b * b).sum_all() * &a
}

// ---------------------------------------------------------------------------

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}
fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
fn axpy(a: f64, x: &[f64], y: &[f64]) -> Vec<f64> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
}
fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * (1.0 + want.abs()),
        "{what}: got {got}, want {want}"
    );
}

const H: f64 = 1e-5;
const FD_TOL: f64 = 1e-7;

/// The traced graph of `energy` at this signature, from the generated tracer.
fn energy_graph(n: usize) -> Graph {
    let types = [
        TensorType::new([n], DType::F64),
        TensorType::new(Shape::scalar(), DType::F64),
    ];
    __rlx_trace_energy(&types, &()).unwrap()
}

fn run(g: &Graph, inputs: &[&Tensor]) -> Vec<Tensor> {
    compile(g).unwrap().run(inputs).unwrap()
}

#[test]
fn every_companion_agrees_with_the_core_transform_called_directly() {
    let mut rng = Rng(1);
    let q = t(&rng.vec(4));
    let (k, kt) = (0.7, Tensor::scalar(0.7f64));
    let g = energy_graph(4);
    let wrt = [0, 1];

    let direct = run(&autodiff::grad(&g, &wrt).unwrap(), &[&q, &kt]);
    let (dq, dk) = grad_energy(&q, k).unwrap();
    assert_eq!(vals(&dq), vals(&direct[1]));
    assert_eq!(dk, direct[2].item::<f64>().unwrap());
    let (v, (dq2, dk2)) = value_and_grad_energy(&q, k).unwrap();
    assert_eq!(v, direct[0].item::<f64>().unwrap());
    assert_eq!(v, energy(&q, k), "plain call runs the same plan");
    assert_eq!((vals(&dq2), dk2), (vals(&dq), dk));

    let tq = t(&rng.vec(4));
    let direct = run(
        &autodiff::jvp(&g, &wrt).unwrap(),
        &[&q, &kt, &tq, &Tensor::scalar(0.3f64)],
    );
    let (v, dir) = jvp_energy(&q, k, &tq, 0.3).unwrap();
    assert_eq!(v, direct[0].item::<f64>().unwrap());
    assert_eq!(dir, direct[1].item::<f64>().unwrap());

    let direct = run(
        &autodiff::vjp(&g, &wrt).unwrap(),
        &[&q, &kt, &Tensor::scalar(2.0f64)],
    );
    let (_, (cq, ck)) = vjp_energy(&q, k, 2.0).unwrap();
    assert_eq!(vals(&cq), vals(&direct[1]));
    assert_eq!(ck, direct[2].item::<f64>().unwrap());

    let direct = run(&autodiff::jacobian(&g, &wrt).unwrap(), &[&q, &kt]);
    let (jq, jk) = jacobian_energy(&q, k).unwrap();
    assert_eq!(vals(&jq), vals(&direct[1]));
    assert_eq!(vals(&jk), vals(&direct[2]));

    let direct = run(&autodiff::hessian(&g, &wrt).unwrap(), &[&q, &kt]);
    let ((hqq, hqk), (hkq, hkk)) = hessian_energy(&q, k).unwrap();
    for (i, h) in [hqq, hqk, hkq, hkk].iter().enumerate() {
        assert_eq!(vals(h), vals(&direct[1 + i]));
    }
    assert_eq!(hqq_shape(&direct[1]), vec![4, 4]);

    let vq = t(&rng.vec(4));
    let direct = run(
        &autodiff::hvp(&g, &wrt).unwrap(),
        &[&q, &kt, &vq, &Tensor::scalar(-0.4f64)],
    );
    let (hq, hk) = hvp_energy(&q, k, &vq, -0.4).unwrap();
    assert_eq!(vals(&hq), vals(&direct[1]));
    assert_eq!(hk, direct[2].item::<f64>().unwrap());
}

fn expect_err<T>(r: rlx::Result<T>) -> rlx::Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn hqq_shape(t: &Tensor) -> Vec<usize> {
    t.shape().dims().to_vec()
}

#[test]
fn grad_and_jvp_match_central_differences() {
    let mut rng = Rng(2);
    for n in [1, 3, 6] {
        let q0 = rng.vec(n);
        let k = 0.5 + rng.next().abs();
        let (vq, vk) = (rng.vec(n), rng.next());
        let f = |e: f64| energy(&t(&axpy(e, &vq, &q0)), k + e * vk);
        let fd = (f(H) - f(-H)) / (2.0 * H);
        let (dq, dk) = grad_energy(&t(&q0), k).unwrap();
        assert_close(dot(&vals(&dq), &vq) + dk * vk, fd, FD_TOL, "grad · v");
        let (_, jv) = jvp_energy(&t(&q0), k, &t(&vq), vk).unwrap();
        assert_close(jv, fd, FD_TOL, "jvp");
    }
}

#[test]
fn vjp_is_the_transpose_of_jvp() {
    let mut rng = Rng(3);
    let x = t(&rng.vec(5));
    let (u, v) = (rng.vec(5), rng.vec(5));
    let (_, jv) = jvp_field(&x, &t(&v)).unwrap();
    let (_, jtu) = vjp_field(&x, &t(&u)).unwrap();
    assert_close(
        dot(&u, &vals(&jv)),
        dot(&vals(&jtu), &v),
        1e-12,
        "<u, Jv> = <Jᵀu, v>",
    );
}

#[test]
fn jacobian_of_a_vector_valued_function() {
    let mut rng = Rng(4);
    let x0 = rng.vec(4);
    let j = jacobian_field(&t(&x0)).unwrap();
    assert_eq!(j.shape().dims(), &[4, 4]);
    let j = vals(&j);
    // ∂y_i/∂x_j = δ_ij cos(x_i) Σx + sin(x_i)
    let s: f64 = x0.iter().sum();
    for i in 0..4 {
        for k in 0..4 {
            let want = if i == k { x0[i].cos() * s } else { 0.0 } + x0[i].sin();
            assert_close(j[i * 4 + k], want, 1e-12, "jacobian entry");
        }
    }
    // and column by column against central differences
    for k in 0..4 {
        let mut e = vec![0.0; 4];
        e[k] = 1.0;
        let p = vals(&field(&t(&axpy(H, &e, &x0))));
        let m = vals(&field(&t(&axpy(-H, &e, &x0))));
        for i in 0..4 {
            assert_close(
                j[i * 4 + k],
                (p[i] - m[i]) / (2.0 * H),
                FD_TOL,
                "jacobian vs fd",
            );
        }
    }
}

#[test]
fn hessian_of_a_scalar_function_matches_differences_of_the_gradient() {
    let mut rng = Rng(5);
    let q0 = rng.vec(3);
    let k = 0.9;
    let ((hqq, hqk), (hkq, hkk)) = hessian_energy(&t(&q0), k).unwrap();
    let (hqq, hqk, hkq) = (vals(&hqq), vals(&hqk), vals(&hkq));
    let hkk = hkk.item::<f64>().unwrap();
    for j in 0..3 {
        let mut e = vec![0.0; 3];
        e[j] = 1.0;
        let (gp, _) = grad_energy(&t(&axpy(H, &e, &q0)), k).unwrap();
        let (gm, _) = grad_energy(&t(&axpy(-H, &e, &q0)), k).unwrap();
        let (gp, gm) = (vals(&gp), vals(&gm));
        for i in 0..3 {
            assert_close(hqq[i * 3 + j], (gp[i] - gm[i]) / (2.0 * H), FD_TOL, "H_qq");
            assert_close(hqq[i * 3 + j], hqq[j * 3 + i], 1e-12, "H symmetric");
        }
        assert_close(hqk[j], hkq[j], 1e-12, "H_qk = H_kqᵀ");
    }
    let (_, dkp) = grad_energy(&t(&q0), k + H).unwrap();
    let (_, dkm) = grad_energy(&t(&q0), k - H).unwrap();
    assert_close(hkk, (dkp - dkm) / (2.0 * H), FD_TOL, "H_kk");
    // hvp = H · v
    let (vq, vk) = (rng.vec(3), rng.next());
    let (hvq, hvk) = hvp_energy(&t(&q0), k, &t(&vq), vk).unwrap();
    let hvq = vals(&hvq);
    for i in 0..3 {
        let want = dot(&hqq[i * 3..i * 3 + 3], &vq) + hqk[i] * vk;
        assert_close(hvq[i], want, 1e-12, "hvp");
    }
    assert_close(hvk, dot(&hkq, &vq) + hkk * vk, 1e-12, "hvp k");
}

/// The device's per-item Jacobians (one JVP per basis vector, seeds
/// folded) equal each device's own `jacobian_`, central differences of the
/// plain call (every device moved at once: no row reads another) and the
/// analytic Jacobians.
#[test]
fn batch_jacobian_of_a_device_equals_per_device_jacobians_and_differences() {
    let mut rng = Rng(16);
    let n = 7;
    let u: Vec<f64> = rng.vec(3 * n).iter().map(|v| 0.2 * v).collect();
    let bj = batch_jacobian_device(&Tensor::from_slice(&u, [n, 3])).unwrap();
    assert_eq!(bj.shape().dims(), &[n, 3, 3]);
    let bj = vals(&bj);
    for i in 0..n {
        let one = jacobian_device(&Tensor::from_slice(&u[3 * i..3 * i + 3], [1, 3])).unwrap();
        assert_eq!(one.shape().dims(), &[1, 3, 1, 3]);
        for (k, want) in vals(&one).iter().enumerate() {
            assert_close(bj[9 * i + k], *want, 1e-14, &format!("device {i} [{k}]"));
        }
    }
    for k in 0..3 {
        let moved = |h: f64| {
            let mut v = u.clone();
            for i in 0..n {
                v[3 * i + k] += h;
            }
            vals(&device(&Tensor::from_slice(&v, [n, 3])))
        };
        let (p, m) = (moved(H), moved(-H));
        for i in 0..n {
            for r in 0..3 {
                let fd = (p[3 * i + r] - m[3 * i + r]) / (2.0 * H);
                assert_close(bj[9 * i + 3 * r + k], fd, FD_TOL, "central difference");
            }
        }
    }
    let mut hand = vec![0.0; 9 * n];
    device_jacobian_by_hand(&u, &mut hand);
    for (k, (g, w)) in bj.iter().zip(&hand).enumerate() {
        assert_close(*g, *w, 1e-13, &format!("analytic [{k}]"));
    }
}

#[test]
fn batch_jacobian_gives_the_diagonal_blocks_of_the_full_jacobian() {
    let mut rng = Rng(6);
    let (n, m) = (4, 3);
    let x = Tensor::from_slice(&rng.vec(n * m), [n, m]);
    let bj = batch_jacobian_rows(&x).unwrap();
    assert_eq!(bj.shape().dims(), &[n, m]);
    let full = jacobian_rows(&x).unwrap();
    assert_eq!(full.shape().dims(), &[n, n, m]);
    let (bj, full) = (vals(&bj), vals(&full));
    for i in 0..n {
        for j in 0..m {
            assert_eq!(bj[i * m + j], full[(i * n + i) * m + j]);
        }
    }
    // a function that mixes rows is an error found from the graph
    let err = expect_err(batch_jacobian_field(&Tensor::from_slice(&rng.vec(4), [4])));
    assert!(err.to_string().contains("batch_jacobian"), "{err}");
}

#[test]
fn differentiable_functions_and_companions_compose() {
    let mut rng = Rng(7);
    let x0 = rng.vec(3);
    let x = t(&x0);
    // outer = Σ field(x) + Σ ∂sumsin/∂x
    let s: f64 = x0.iter().sum();
    let want: f64 = x0.iter().map(|x| x.sin() * s + x.cos() * x + x.sin()).sum();
    assert_close(outer(&x).item::<f64>().unwrap(), want, 1e-12, "outer value");
    let g = vals(&grad_outer(&x).unwrap());
    for (i, &gi) in g.iter().enumerate() {
        let mut e = vec![0.0; 3];
        e[i] = 1.0;
        let fp = outer(&t(&axpy(H, &e, &x0))).item::<f64>().unwrap();
        let fm = outer(&t(&axpy(-H, &e, &x0))).item::<f64>().unwrap();
        assert_close(gi, (fp - fm) / (2.0 * H), FD_TOL, "grad of composition");
    }
    // the Jacobian of a function returning a gradient is the Hessian
    let j = vals(&jacobian_grad_of_sumsin(&x).unwrap());
    let h = vals(&hessian_sumsin(&x).unwrap());
    assert_eq!(j.len(), 9);
    for (a, b) in j.iter().zip(&h) {
        assert_close(*a, *b, 1e-12, "jacobian(grad) = hessian");
    }
    // third derivative by nesting: d/dx_i Σ_j ∂²f/∂x_i∂x_j via hvp of the nested gradient
    let (_, jv) = jvp_grad_of_sumsin(&x, &t(&[1.0, 0.0, 0.0])).unwrap();
    // ∂²(Σ sin(x) x)/∂x0² = 2cos(x0) − x0 sin(x0)
    assert_close(
        vals(&jv)[0],
        2.0 * x0[0].cos() - x0[0] * x0[0].sin(),
        1e-12,
        "nested",
    );
}

#[test]
fn wrong_tangent_and_cotangent_shapes_name_the_parameter() {
    let q = t(&[0.1, 0.2, 0.3]);
    let err = expect_err(jvp_energy(&q, 1.0, &t(&[1.0, 2.0]), 0.0));
    let msg = err.to_string();
    assert!(
        msg.contains("tangent_q") && msg.contains("[3]") && msg.contains("[2]"),
        "{msg}"
    );
    let err = expect_err(hvp_energy(&q, 1.0, &t(&[1.0]), 0.0));
    assert!(err.to_string().contains("v_q"), "{err}");
    let err = expect_err(vjp_field(&q, &t(&[1.0])));
    assert!(err.to_string().contains("cotangent"), "{err}");
}

#[test]
fn a_shape_error_in_traced_code_names_the_line_and_the_signature() {
    assert!(needs_three(&t(&[1.0, 2.0, 3.0])).item::<f64>().is_ok());
    let err = expect_err(grad_needs_three(&t(&[1.0, 2.0])));
    let msg = err.to_string();
    let at = format!("macro_companions.rs:{NEEDS_THREE_LINE}:");
    assert!(msg.contains(&at), "expected {at} in: {msg}");
    assert!(msg.contains("needs_three(x: f64[2])"), "{msg}");
    assert!(
        matches!(err.root(), rlx::Error::ShapeMismatch { .. }),
        "{err:?}"
    );
    // the plain call panics with the same message
    let Err(panic) = std::panic::catch_unwind(|| needs_three(&t(&[1.0, 2.0]))) else {
        panic!("expected a panic");
    };
    let text = panic.downcast_ref::<String>().unwrap();
    assert!(text.contains("needs_three(x: f64[2])"), "{text}");
}

#[test]
fn errors_inside_a_nested_companion_surface_as_the_outer_err() {
    #[differentiable]
    fn wraps(x: &Tensor) -> Tensor {
        grad_needs_three(x).unwrap().sum_all()
    }
    assert!(grad_wraps(&t(&[1.0, 2.0, 3.0])).is_ok());
    let err = expect_err(grad_wraps(&t(&[1.0, 2.0])));
    assert!(
        matches!(err.root(), rlx::Error::ShapeMismatch { .. }),
        "{err}"
    );
}

#[test]
fn grad_of_a_non_scalar_output_points_to_vjp_and_jacobian() {
    let err = expect_err(grad_field(&t(&[1.0, 2.0])));
    let msg = err.to_string();
    assert!(
        msg.contains("vjp_field") && msg.contains("jacobian_field"),
        "{msg}"
    );
}

#[test]
fn a_captured_concrete_tensor_is_an_error_not_a_stale_constant() {
    // The thread-local is created here, outside any trace.
    CAPTURED.with(|c| assert_eq!(c.numel(), 2));
    let err = expect_err(grad_captures(&t(&[1.0, 2.0])));
    assert!(
        err.to_string()
            .contains("created outside the traced function"),
        "{err}"
    );
}

#[test]
fn f32_parameters_get_f32_gradients() {
    let b = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    let (da, db) = grad_single(3.0f32, &b).unwrap();
    assert_eq!(da, 5.0f32);
    assert_eq!(b.dtype(), DType::F32);
    assert_eq!(db.to_vec::<f32>().unwrap(), vec![6.0, 12.0]);
    assert_eq!(single(3.0, &b), 15.0);
}

#[test]
fn companions_are_callable_from_many_threads_at_once() {
    let sizes = [1usize, 2, 3, 5, 8];
    let inputs: Vec<Vec<f64>> = sizes
        .iter()
        .map(|&n| (0..n).map(|i| 0.1 * i as f64 - 0.2).collect())
        .collect();
    let expected: Vec<(Vec<f64>, f64)> = inputs
        .iter()
        .map(|q| {
            let (dq, dk) = grad_energy(&t(q), 0.8).unwrap();
            (vals(&dq), dk)
        })
        .collect();
    std::thread::scope(|s| {
        for th in 0..8 {
            let (inputs, expected) = (&inputs, &expected);
            s.spawn(move || {
                for it in 0..40 {
                    let i = (th + it) % inputs.len();
                    let (dq, dk) = grad_energy(&t(&inputs[i]), 0.8).unwrap();
                    assert_eq!((vals(&dq), dk), expected[i]);
                    let h = hessian_sumsin(&t(&inputs[i])).unwrap();
                    assert_eq!(h.numel(), inputs[i].len() * inputs[i].len());
                }
            });
        }
    });
}

#[test]
fn the_plan_cache_is_bounded() {
    for n in 1..=80 {
        rows(&Tensor::zeros([n, 1], DType::F64));
    }
    let cached = __rlx_function_rows().cached_signatures();
    assert!(cached <= rlx::runtime::function::MAX_ENTRIES, "{cached}");
    assert!(cached >= 1);
}
