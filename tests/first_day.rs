//! What a new user writes on the first day (issue #18): `?` in a body,
//! scalar helpers written once for numbers and used in traced code, a `let`
//! bound to a traced `if`, bodies that read as written for numbers, and
//! errors that name the caller's line. Derivatives against central
//! differences of the plain call.

use rlx::prelude::*;

const H: f64 = 1e-6;
const FD_TOL: f64 = 1e-7;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * (1.0 + want.abs()),
        "{what}: got {got}, want {want}"
    );
}

/// Central differences of `f` at `x` along each coordinate.
fn fd_grad(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let (mut p, mut m) = (x.to_vec(), x.to_vec());
            p[i] += H;
            m[i] -= H;
            (f(&p) - f(&m)) / (2.0 * H)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Item 1: `?` in the body.

#[differentiable]
fn sumsin(x: &Tensor) -> Tensor {
    (x.sin() * x).sum_all()
}

/// The README's nesting recipe: a function returning a gradient.
#[differentiable]
fn grad_of_sumsin(x: &Tensor) -> Tensor {
    grad_sumsin(x)?
}

/// `?` with an early `return` on a static condition.
#[differentiable]
fn early(x: &Tensor, twice: bool) -> Tensor {
    if !twice {
        return grad_sumsin(x)?;
    }
    let g = grad_sumsin(x)?;
    g.try_mul(&Tensor::scalar(2.0f64))?
}

#[test]
fn question_mark_in_a_body_nests_derivatives() {
    let x0 = [0.3, -1.1, 2.0];
    let x = t(&x0);
    let g = vals(&grad_of_sumsin(&x));
    for (gi, xi) in g.iter().zip(&x0) {
        close(*gi, xi.cos() * xi + xi.sin(), 1e-14, "gradient");
    }
    // the Jacobian of the gradient is the Hessian (diagonal here)
    let j = vals(&jacobian_grad_of_sumsin(&x).unwrap());
    for i in 0..3 {
        let xi = x0[i];
        close(j[i * 3 + i], 2.0 * xi.cos() - xi * xi.sin(), 1e-12, "H_ii");
    }
    assert_eq!(
        vals(&early(&x, true)),
        g.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    );
    assert_eq!(vals(&early(&x, false)), g);
    // a shape error inside the nested companion is the outer `Err`
    #[differentiable]
    fn needs_three(x: &Tensor) -> Tensor {
        (x * Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3])).sum_all()
    }
    #[differentiable]
    fn wraps(x: &Tensor) -> Tensor {
        grad_needs_three(x)?.sum_all()
    }
    assert!(grad_wraps(&x).is_ok());
    let e = grad_wraps(&t(&[1.0, 2.0])).unwrap_err();
    assert!(matches!(e.root(), rlx::Error::ShapeMismatch { .. }), "{e}");
}

// ---------------------------------------------------------------------------
// Item 2: scalar helpers written once.

/// Lennard-Jones in reduced units, a helper of numbers.
#[differentiable]
fn lj(r: f64) -> f64 {
    4.0 * (r.powi(-12) - r.powi(-6))
}

/// Several float parameters.
#[differentiable]
fn pair(r: f64, eps: f64, sigma: f64) -> f64 {
    let s = sigma / r;
    4.0 * eps * (s.powi(12) - s.powi(6))
}

fn lj_num(r: f64) -> f64 {
    4.0 * (r.powi(-12) - r.powi(-6))
}

/// Energy of two particles on a line: helpers called with traced values,
/// with a number, and a closure over numbers.
#[differentiable]
fn two_body(x: &Tensor, eps: f64) -> f64 {
    let r = (x.slice_range(1..2, 0) - x.slice_range(0..1, 0)).sum_all();
    let spring = |d: f64| -> f64 { 0.5 * (d - 1.0) * (d - 1.0) };
    lj(&r) + pair(r.clone(), eps, 1.1) + spring(r) + lj(1.5)
}

fn two_body_num(x: &[f64], eps: f64) -> f64 {
    let r = x[1] - x[0];
    let s = 1.1 / r;
    lj_num(r) + 4.0 * eps * (s.powi(12) - s.powi(6)) + 0.5 * (r - 1.0).powi(2) + lj_num(1.5)
}

/// A chain of bonds: `f64` parameters, and a number computed from them, are
/// passed by value to calls in every iteration, as they would be as `f64`s.
#[differentiable]
fn bond_chain(x: &Tensor, eps: f64, sigma: f64) -> f64 {
    let reach = sigma * 1.5;
    let mut total = x.slice_range(0..1, 0).sum_all() * 0.0;
    for i in 0..3 {
        let r = (x.slice_range(i + 1..i + 1 + 1, 0) - x.slice_range(i..i + 1, 0)).sum_all();
        total = total + pair(&r, eps, sigma) + 0.01 * r.powf(reach) + r.hypot(eps);
    }
    total + lj(sigma) + lj(reach)
}

fn bond_chain_num(x: &[f64], eps: f64, sigma: f64) -> f64 {
    let reach = sigma * 1.5;
    let pair = |r: f64| {
        let s = sigma / r;
        4.0 * eps * (s.powi(12) - s.powi(6))
    };
    let bonds: f64 = (0..3)
        .map(|i| {
            let r = x[i + 1] - x[i];
            pair(r) + 0.01 * r.powf(reach) + r.hypot(eps)
        })
        .sum();
    bonds + lj_num(sigma) + lj_num(reach)
}

#[test]
fn numbers_are_passed_to_calls_by_value_as_often_as_needed() {
    let (x0, eps, sigma) = ([0.0, 1.1, 2.3, 3.2], 0.8, 1.05);
    let x = t(&x0);
    close(
        bond_chain(&x, eps, sigma),
        bond_chain_num(&x0, eps, sigma),
        1e-12,
        "value",
    );
    let f = |v: &[f64]| bond_chain_num(&v[..4], v[4], v[5]);
    let want = fd_grad(f, &[x0[0], x0[1], x0[2], x0[3], eps, sigma]);
    let (gx, ge, gs) = grad_bond_chain(&x, eps, sigma).unwrap();
    for (i, g) in vals(&gx).into_iter().enumerate() {
        close(g, want[i], FD_TOL, "d/dx");
    }
    close(ge, want[4], FD_TOL, "d/deps");
    close(gs, want[5], FD_TOL, "d/dsigma");
}

/// Per-row energies (a helper of numbers applied to a column).
#[differentiable]
fn rows(x: &Tensor) -> Tensor {
    let r = x.slice_range(1..2, 1) - x.slice_range(0..1, 1);
    lj(r.reshape([x.shape().dims()[0]]))
}

#[test]
fn a_helper_of_numbers_still_takes_and_returns_numbers() {
    // The same `powi` steps at run time (through `black_box`: the compiler
    // may fold `lj_num(1.1)` to a constant computed another way, an ulp off).
    assert_eq!(lj(1.1), lj_num(std::hint::black_box(1.1)));
    let e: f64 = pair(1.2, 1.0, 1.0);
    close(e, lj_num(1.2), 1e-14, "pair");
    // a literal argument needs no annotation, and the result is an f64
    assert!(lj(1.5).abs() < 1.0);
    let (v, d) = value_and_grad_lj(1.2).unwrap();
    assert_eq!(v, lj(1.2));
    close(d, fd_grad(|r| lj_num(r[0]), &[1.2])[0], FD_TOL, "dlj");
    // with a tensor it is element-wise and returns a tensor
    let r = t(&[1.1, 1.3]);
    let at_run_time = |r: f64| lj_num(std::hint::black_box(r));
    assert_eq!(vals(&lj(&r)), vec![at_run_time(1.1), at_run_time(1.3)]);
}

#[test]
fn helpers_of_numbers_compose_with_every_companion() {
    let x0 = [0.2, 1.35];
    let eps = 0.7;
    let x = t(&x0);
    close(two_body(&x, eps), two_body_num(&x0, eps), 1e-13, "value");
    let f = |v: &[f64]| two_body_num(&v[..2], v[2]);
    let want = fd_grad(f, &[x0[0], x0[1], eps]);
    let (gx, ge) = grad_two_body(&x, eps).unwrap();
    close(vals(&gx)[0], want[0], FD_TOL, "d/dx0");
    close(vals(&gx)[1], want[1], FD_TOL, "d/dx1");
    close(ge, want[2], FD_TOL, "d/deps");
    // jvp = <grad, tangent>
    let (v, tan) = jvp_two_body(&x, eps, &t(&[1.0, -0.5]), 2.0).unwrap();
    assert_eq!(v, two_body(&x, eps));
    close(tan, want[0] - 0.5 * want[1] + 2.0 * want[2], FD_TOL, "jvp");
    // vjp with cotangent 3 = 3 grad
    let (_, (vx, ve)) = vjp_two_body(&x, eps, 3.0).unwrap();
    close(vals(&vx)[1], 3.0 * want[1], FD_TOL, "vjp");
    close(ve, 3.0 * want[2], FD_TOL, "vjp eps");
    // jacobian of a scalar = gradient
    let (jx, _) = jacobian_two_body(&x, eps).unwrap();
    close(vals(&jx)[0], want[0], FD_TOL, "jacobian");
    // Hessian against differences of the gradient; hvp against the Hessian
    let ((hxx, hxe), _) = hessian_two_body(&x, eps).unwrap();
    let grad_at = |v: &[f64]| -> Vec<f64> {
        let (g, ge) = grad_two_body(&t(&v[..2]), v[2]).unwrap();
        let mut g = vals(&g);
        g.push(ge);
        g
    };
    let hxx = vals(&hxx);
    let hxe = vals(&hxe);
    for j in 0..3 {
        let (mut p, mut m) = (vec![x0[0], x0[1], eps], vec![x0[0], x0[1], eps]);
        p[j] += H;
        m[j] -= H;
        let (gp, gm) = (grad_at(&p), grad_at(&m));
        for i in 0..2 {
            let fd = (gp[i] - gm[i]) / (2.0 * H);
            let got = if j < 2 { hxx[i * 2 + j] } else { hxe[i] };
            close(got, fd, 1e-5, "hessian");
        }
    }
    let (hv, _) = hvp_two_body(&x, eps, &t(&[1.0, 0.0]), 0.0).unwrap();
    close(vals(&hv)[1], hxx[2], 1e-12, "hvp");
    // batch_jacobian of a row-wise function built from the helper
    let xs = Tensor::from_slice(&[0.0, 1.1, 0.5, 1.8, -1.0, 0.3], [3, 2]);
    let bj = vals(&batch_jacobian_rows(&xs).unwrap());
    for (n, (a, b)) in [(0.0, 1.1), (0.5, 1.8), (-1.0, 0.3)]
        .into_iter()
        .enumerate()
    {
        let d = fd_grad(|r| lj_num(r[0]), &[b - a])[0];
        close(bj[n * 2], -d, FD_TOL, "batch_jacobian d/da");
        close(bj[n * 2 + 1], d, FD_TOL, "batch_jacobian d/db");
    }
}

// ---------------------------------------------------------------------------
// Items 3 and 8: a `let` bound to a traced `if`; bodies as written for numbers.

#[differentiable]
fn let_select(x: &Tensor) -> Tensor {
    let y = if x > 0.0 { x.sqrt() } else { 0.0 * x };
    let z = if 0.5 <= x && x < 2.0 { 1.0 } else { 2.0 * &y };
    y.sum_all() + z.sum_all()
}

/// Van der Pol, written as for numbers.
#[differentiable]
fn van_der_pol(x: f64, v: f64, mu: f64) -> f64 {
    mu * (1.0 - x * x) * v - x
}

/// Locals used twice, `-x`, compound assignment, `Tensor::full` of a
/// parameter.
#[differentiable]
fn as_numbers(q: Tensor, vs: f64) -> Tensor {
    let d = q.clone() - vs;
    let mut acc = d * d / vs;
    acc += -vs;
    let level = Tensor::full([2], vs, DType::F64);
    (acc * level).sum_all()
}

#[test]
fn bodies_read_as_written_for_numbers() {
    let x = t(&[-1.0, 0.25, 1.0, 4.0]);
    // y = [0, .5, 1, 2]; z = [0, 1, 1, 4]... where 0.5 <= x < 2: 1, else 2y
    let want = 3.5 + (0.0 + 1.0 + 1.0 + 4.0);
    close(let_select(&x).item::<f64>().unwrap(), want, 1e-14, "select");
    let g = vals(&grad_let_select(&x).unwrap());
    // d/dx of sqrt(x) (+ 2 sqrt(x) outside [0.5, 2)), 0 for x <= 0
    let want = [0.0, 0.5 / 0.5 * 3.0, 0.5, 0.25 * 3.0];
    for (a, b) in g.iter().zip(want) {
        close(*a, b, 1e-14, "select gradient");
    }
    let (x, v, mu) = (0.5, 2.0, 3.0);
    assert_eq!(van_der_pol(x, v, mu), mu * (1.0 - x * x) * v - x);
    let (dx, dv, dmu) = grad_van_der_pol(x, v, mu).unwrap();
    assert_eq!(
        (dx, dv, dmu),
        (
            -2.0 * mu * x * v - 1.0,
            mu * (1.0 - x * x),
            (1.0 - x * x) * v
        )
    );
    let q0 = [0.5, 2.0];
    let f = |v: &[f64]| -> f64 {
        let vs = v[2];
        v[..2]
            .iter()
            .map(|q| ((q - vs) * (q - vs) / vs - vs) * vs)
            .sum()
    };
    close(
        as_numbers(t(&q0), 1.5).item::<f64>().unwrap(),
        f(&[0.5, 2.0, 1.5]),
        1e-14,
        "as_numbers",
    );
    let (gq, gvs) = grad_as_numbers(t(&q0), 1.5).unwrap();
    let want = fd_grad(f, &[0.5, 2.0, 1.5]);
    close(vals(&gq)[0], want[0], FD_TOL, "dq0");
    close(gvs, want[2], FD_TOL, "dvs");
}

// ---------------------------------------------------------------------------
// Item 9: errors name the caller's line.

#[differentiable]
fn only_three(x: &Tensor) -> Tensor {
    (x * Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3])).sum_all()
}

#[test]
fn a_panicking_plain_call_names_the_callers_line() {
    let line = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = line.clone();
    let old = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        *seen.lock().unwrap() = info.location().map(|l| (l.file().to_string(), l.line()));
    }));
    let call_line = line!() + 1;
    let r = std::panic::catch_unwind(|| only_three(&t(&[1.0, 2.0])));
    std::panic::set_hook(old);
    assert!(r.is_err());
    let (file, l) = line.lock().unwrap().clone().expect("a panic location");
    assert!(file.ends_with("first_day.rs"), "{file}");
    assert_eq!(l, call_line);
}

#[test]
fn a_dtype_mismatch_says_how_to_cast() {
    let a = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    let b = Tensor::from_slice(&[1.0f64, 2.0], [2]);
    let e = a.try_add(&b).unwrap_err().to_string();
    assert!(
        e.contains("`.cast(DType::F32)`") && e.contains("`.cast(DType::F64)`"),
        "{e}"
    );
    let i = Tensor::from_slice(&[1i64, 2], [2]);
    let e = b.try_add(&i).unwrap_err().to_string();
    assert!(
        e.contains("cast the i64 operand with `.cast(DType::F64)`"),
        "{e}"
    );
    assert!(!e.contains("DType::I64"), "{e}");
}

// ---------------------------------------------------------------------------
// Item 6: the traced graph, and n-th derivatives.

/// f(x) = e^(x/2) + sin x: f⁽ⁿ⁾(x) = e^(x/2) / 2ⁿ + sin(x + nπ/2).
#[differentiable]
fn exp_sin(x: f64) -> f64 {
    (x * 0.5).exp() + x.sin()
}

/// f(x) = Σ x_i⁴ + x_0 x_1: the third derivative is 24 x_i on the diagonal.
#[differentiable]
fn quartic(x: &Tensor) -> Tensor {
    x.powi(4).sum_all() + (x.slice_range(0..1, 0) * x.slice_range(1..2, 0)).sum_all()
}

#[test]
fn nth_derivatives_match_closed_forms() {
    let x = 0.7f64;
    for n in 0..7 {
        let want = (x * 0.5).exp() / 2f64.powi(n as i32)
            + (x + n as f64 * std::f64::consts::FRAC_PI_2).sin();
        let got = nth_derivative_exp_sin(x, n).unwrap();
        close(got, want, 1e-13, &format!("order {n}"));
    }
    let x0 = [0.5, -1.5, 2.0];
    let d3 = nth_derivative_quartic(&t(&x0), 3).unwrap();
    assert_eq!(d3.shape().dims(), &[3, 3, 3]);
    let d3 = vals(&d3);
    for i in 0..3 {
        for j in 0..3 {
            for k in 0..3 {
                let want = if i == j && j == k { 24.0 * x0[i] } else { 0.0 };
                assert_eq!(d3[(i * 3 + j) * 3 + k], want, "T[{i},{j},{k}]");
            }
        }
    }
    // order 1 is the gradient, order 2 the Hessian
    let g1 = nth_derivative_quartic(&t(&x0), 1).unwrap();
    assert_eq!(vals(&g1), vals(&grad_quartic(&t(&x0)).unwrap()));
    let h2 = nth_derivative_quartic(&t(&x0), 2).unwrap();
    assert_eq!(vals(&h2), vals(&hessian_quartic(&t(&x0)).unwrap()));
    // inside another traced body it is differentiable again
    #[differentiable]
    fn third(x: f64) -> f64 {
        nth_derivative_exp_sin(x, 3)?
    }
    let d4 = grad_third(x).unwrap();
    close(
        d4,
        (x * 0.5).exp() / 16.0 + x.sin(),
        1e-13,
        "d/dx of the third",
    );
    // a non-scalar output is an error naming what to use instead
    #[differentiable]
    fn field(x: &Tensor) -> Tensor {
        x.sin()
    }
    let e = nth_derivative_field(&t(&x0), 2).unwrap_err().to_string();
    assert!(e.contains("scalar"), "{e}");
}

#[test]
fn the_traced_graph_is_public_and_feeds_the_core_transforms() {
    let x0 = [0.5, -1.5, 2.0];
    let g = graph_quartic(&t(&x0)).unwrap();
    let printed = g.to_string();
    assert!(printed.contains("input"), "{printed}");
    let d3 = rlx::autodiff::nth_order_grad(&g, 0, 3).unwrap();
    let out = rlx::compile(&d3).unwrap().run(&[&t(&x0)]).unwrap();
    assert_eq!(
        vals(&out[1]),
        vals(&nth_derivative_quartic(&t(&x0), 3).unwrap())
    );
    // the graph of a function of numbers has a 0-d input
    let g = graph_exp_sin(0.3).unwrap();
    assert_eq!(g.inputs().len(), 1);
}

// ---------------------------------------------------------------------------
// Item 11: the plan cache evicts the least recently used signature.

static TRACES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Counts its traces (the body runs once per new signature).
#[differentiable(cache = 4)]
fn counted(x: &Tensor) -> Tensor {
    TRACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    x.sum_all()
}

#[test]
fn a_hot_signature_survives_a_sweep_of_one_off_shapes() {
    use std::sync::atomic::Ordering::Relaxed;
    let hot = Tensor::zeros([3], DType::F64);
    let traces0 = TRACES.load(Relaxed);
    counted(&hot);
    for n in 10..60 {
        // a one-off shape, then the hot one again
        counted(&Tensor::zeros([n], DType::F64));
        counted(&hot);
        assert!(__rlx_function_counted().cached_signatures() <= 4);
    }
    // 1 hot trace + 50 one-off traces: the hot plan was never evicted
    assert_eq!(TRACES.load(Relaxed) - traces0, 51);
    // the bound can be changed per function; the cache shrinks at the next insert
    __rlx_function_counted().set_capacity(1);
    counted(&Tensor::zeros([7], DType::F64));
    assert_eq!(__rlx_function_counted().cached_signatures(), 1);
    // and globally, for functions without `cache = N`
    assert_eq!(
        rlx::plan_cache_capacity(),
        rlx::runtime::function::MAX_ENTRIES
    );
}

// The last note listed "traced comparisons accept `f64` literals but not
// `f32`" among what a new user must know; every form compiles and selects.
#[differentiable]
fn kink_f64(x: f64) -> f64 {
    if x > 0.5f32 {
        x.sqrt()
    } else {
        -x
    }
}

#[differentiable]
fn kink_f32(x: f32, t: f32) -> f32 {
    let lim: f32 = 0.25;
    if 0.5f32 < x && x > lim {
        x.sqrt() * t
    } else {
        -x
    }
}

#[differentiable]
fn masked_sqrt(x: &Tensor) -> Tensor {
    let y = if x > 0.5f32 { x.sqrt() } else { x * 0.0 };
    y.sum_all()
}

#[test]
fn traced_comparisons_take_f32_literals() {
    assert_eq!(grad_kink_f64(4.0).unwrap(), 0.25);
    assert_eq!(grad_kink_f64(0.25).unwrap(), -1.0);
    assert_eq!(grad_kink_f32(4.0, 2.0).unwrap(), (0.5, 2.0));
    assert_eq!(grad_kink_f32(0.4, 2.0).unwrap(), (-1.0, 0.0));
    let x = Tensor::from_vec(vec![4.0f32, 0.25], [2]);
    assert_eq!(masked_sqrt(&x).item::<f32>().unwrap(), 2.0);
    let g = grad_masked_sqrt(&x).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.25, 0.0]);
}
