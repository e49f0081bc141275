//! `rlx::root`: Newton's method as one node whose derivatives are the
//! implicit function theorem's. Every companion through a root against
//! central differences of the whole solve, against Newton's iteration
//! unrolled at trace time, forward against reverse, second order against
//! differences of the gradient; a diode + resistor operating point and its
//! sensitivities; the eager path; bad input.

use rlx::prelude::*;
use rlx::Newton;

/// A symmetric coupling (the 1-D Laplacian).
const M: [f64; 9] = [2.0, -1.0, 0.0, -1.0, 2.0, -1.0, 0.0, -1.0, 2.0];

/// Weights of the loss.
const W: [f64; 3] = [1.0, 2.0, 3.0];

/// `F(x) = x³ + x + k M x − p`: strictly monotone for `k >= 0`, one root.
fn residual(x: &Tensor, p: &Tensor, k: &Tensor) -> Tensor {
    let m = Tensor::from_slice(&M, [3, 3]);
    let mx = m.matmul(&x.reshape([3, 1])).reshape([3]);
    x * x * x + x + mx * k - p
}

/// The loss at a solution.
fn loss(x: &Tensor) -> Tensor {
    (x.square() * Tensor::from_slice(&W, [3])).sum_all() + x.sin().sum_all()
}

/// The loss at the root of `residual`.
#[differentiable]
fn solved(p: &Tensor, k: f64) -> f64 {
    let x0 = p * 0.0;
    let x = rlx::root(|x| residual(x, p, &k), &x0, Newton::new().tol(1e-13))?;
    loss(&x)
}

/// The root itself.
#[differentiable]
fn solution(p: &Tensor, k: f64) -> Tensor {
    let x0 = p * 0.0;
    rlx::root(|x| residual(x, p, &k), &x0, Newton::new().tol(1e-13))?
}

/// `solved` with `steps` full Newton steps unrolled at trace time (the
/// Jacobian written by hand), from the same guess.
#[differentiable]
fn solved_unrolled(p: &Tensor, k: f64, steps: usize) -> f64 {
    let m = Tensor::from_slice(&M, [3, 3]);
    let mut x = p * 0.0;
    for _ in 0..steps {
        let f = residual(&x, p, &k);
        let d = (x.square() * 3.0 + 1.0).reshape([1, 3]);
        let j = Tensor::eye(3, DType::F64) * d + &m * &k;
        let step = j.solve(&f.reshape([3, 1])).reshape([3]);
        x = &x - &step;
    }
    loss(&x)
}

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}

fn v(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}");
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * scale, "{what}[{i}]: {x} vs {y}");
    }
}

/// Parameter values: several right-hand sides and couplings.
fn cases() -> Vec<(Vec<f64>, f64)> {
    vec![
        (vec![0.5, -1.2, 2.0], 0.7),
        (vec![3.0, 0.1, -0.4], 0.0),
        (vec![-2.5, 1.5, 0.3], 2.3),
        (vec![0.05, 0.02, -0.01], 0.4),
    ]
}

const H: f64 = 1e-5;

/// Central differences of `f` at `(p, k)`: `[∂f/∂p_0.., ∂f/∂k]`.
fn fd(f: impl Fn(&Tensor, f64) -> f64, p: &[f64], k: f64) -> Vec<f64> {
    let mut out = Vec::new();
    for i in 0..p.len() {
        let (mut a, mut b) = (p.to_vec(), p.to_vec());
        a[i] += H;
        b[i] -= H;
        out.push((f(&t(&a), k) - f(&t(&b), k)) / (2.0 * H));
    }
    out.push((f(&t(p), k + H) - f(&t(p), k - H)) / (2.0 * H));
    out
}

#[test]
fn the_root_solves_the_residual() {
    for (p, k) in cases() {
        let x = solution(&t(&p), k);
        let f = residual(&x, &t(&p), &Tensor::scalar(k));
        assert!(v(&f).iter().all(|r| r.abs() <= 1e-13), "{:?}", v(&f));
        // The eager path (concrete tensors, no trace) gives the same root.
        let pt = t(&p);
        let kt = Tensor::scalar(k);
        let eager = rlx::root(
            |x| residual(x, &pt, &kt),
            &t(&[0.0; 3]),
            Newton::new().tol(1e-13),
        )
        .unwrap();
        close("eager root", &v(&eager), &v(&x), 1e-14);
    }
}

#[test]
fn the_gradient_matches_central_differences_of_the_whole_solve() {
    for (p, k) in cases() {
        let (dp, dk) = grad_solved(&t(&p), k).unwrap();
        let mut got = v(&dp);
        got.push(dk);
        let want = fd(solved, &p, k);
        close("grad vs fd", &got, &want, 1e-8);
        let (value, (dp2, dk2)) = value_and_grad_solved(&t(&p), k).unwrap();
        assert_eq!(value, solved(&t(&p), k));
        assert_eq!((v(&dp2), dk2), (v(&dp), dk));
    }
}

#[test]
fn the_implicit_gradient_is_the_unrolled_newton_gradient_at_convergence() {
    for (p, k) in cases() {
        let (dp, dk) = grad_solved(&t(&p), k).unwrap();
        let (up, uk) = grad_solved_unrolled(&t(&p), k, 30).unwrap();
        let mut got = v(&dp);
        got.push(dk);
        let mut want = v(&up);
        want.push(uk);
        close("implicit vs unrolled", &got, &want, 1e-11);
        let (fv, uv) = (solved(&t(&p), k), solved_unrolled(&t(&p), k, 30));
        assert!((fv - uv).abs() <= 1e-12 * fv.abs().max(1.0), "{fv} vs {uv}");
    }
}

#[test]
fn forward_mode_matches_reverse_mode() {
    let (tp, tk) = (t(&[0.3, -0.8, 0.45]), -0.6);
    for (p, k) in cases() {
        let (dp, dk) = grad_solved(&t(&p), k).unwrap();
        let (value, tangent) = jvp_solved(&t(&p), k, &tp, tk).unwrap();
        let dot: f64 = v(&dp).iter().zip(v(&tp)).map(|(a, b)| a * b).sum::<f64>() + dk * tk;
        assert!(
            (tangent - dot).abs() <= 1e-12 * dot.abs().max(1.0),
            "{tangent} vs {dot}"
        );
        assert_eq!(value, solved(&t(&p), k));
        // The root's own Jacobian, by jacobian_ (forward or reverse, all
        // columns batched) against vjp_ and jvp_ of the root.
        let (jp, jk) = jacobian_solution(&t(&p), k).unwrap();
        let (jp, jk) = (v(&jp), v(&jk));
        let u = t(&[1.5, -0.5, 0.25]);
        let (_, (vp, vk)) = vjp_solution(&t(&p), k, &u).unwrap();
        let uj: Vec<f64> = (0..3)
            .map(|c| (0..3).map(|r| v(&u)[r] * jp[r * 3 + c]).sum())
            .collect();
        close("vjp vs jacobian", &v(&vp), &uj, 1e-12);
        let ujk: f64 = (0..3).map(|r| v(&u)[r] * jk[r]).sum();
        assert!((vk - ujk).abs() <= 1e-12 * ujk.abs().max(1.0));
        let (_, xdot) = jvp_solution(&t(&p), k, &tp, tk).unwrap();
        let jt: Vec<f64> = (0..3)
            .map(|r| (0..3).map(|c| jp[r * 3 + c] * v(&tp)[c]).sum::<f64>() + jk[r] * tk)
            .collect();
        close("jvp vs jacobian", &v(&xdot), &jt, 1e-12);
        // and against differences of the solution
        for c in 0..3 {
            let (mut a, mut b) = (p.clone(), p.clone());
            a[c] += H;
            b[c] -= H;
            let col: Vec<f64> = v(&solution(&t(&a), k))
                .iter()
                .zip(v(&solution(&t(&b), k)))
                .map(|(x, y)| (x - y) / (2.0 * H))
                .collect();
            let want: Vec<f64> = (0..3).map(|r| jp[r * 3 + c]).collect();
            close("jacobian column vs fd", &want, &col, 1e-8);
        }
    }
}

#[test]
fn second_order_through_a_root_matches_differences_of_the_gradient() {
    for (p, k) in cases() {
        let hess = hessian_solved(&t(&p), k).unwrap();
        let ((hpp, hpk), (hkp, hkk)) = hess;
        // Row i of the Hessian: differences of the gradient along input i.
        let g = |p: &Tensor, k: f64| {
            let (dp, dk) = grad_solved(p, k).unwrap();
            let mut out = v(&dp);
            out.push(dk);
            out
        };
        let mut rows = Vec::new();
        for i in 0..4 {
            let (mut a, mut b) = ((p.clone(), k), (p.clone(), k));
            if i < 3 {
                a.0[i] += H;
                b.0[i] -= H;
            } else {
                a.1 += H;
                b.1 -= H;
            }
            let (ga, gb) = (g(&t(&a.0), a.1), g(&t(&b.0), b.1));
            rows.push(
                ga.iter()
                    .zip(&gb)
                    .map(|(x, y)| (x - y) / (2.0 * H))
                    .collect::<Vec<f64>>(),
            );
        }
        let (hpp, hpk, hkp) = (v(&hpp), v(&hpk), v(&hkp));
        let mut got = Vec::new();
        for i in 0..3 {
            got.extend_from_slice(&hpp[i * 3..i * 3 + 3]);
            got.push(hpk[i]);
        }
        got.extend_from_slice(&hkp);
        got.push(hkk.item::<f64>().unwrap());
        let want: Vec<f64> = rows.concat();
        close("hessian vs fd of the gradient", &got, &want, 1e-7);
        // The Hessian is symmetric, and hvp_ is its product.
        for i in 0..3 {
            assert!((hpk[i] - hkp[i]).abs() <= 1e-12 * hpk[i].abs().max(1.0));
        }
        let (wp, wk) = (t(&[0.2, -0.1, 0.4]), 0.3);
        let (vp, vk) = hvp_solved(&t(&p), k, &wp, wk).unwrap();
        let w = [v(&wp), vec![wk]].concat();
        let hw: Vec<f64> = (0..4)
            .map(|i| (0..4).map(|j| got[i * 4 + j] * w[j]).sum())
            .collect();
        close("hvp vs hessian", &[v(&vp), vec![vk]].concat(), &hw, 1e-11);
    }
}

/// The thermal voltage at 300 K, volts.
const VT: f64 = 0.025852;

/// The DC operating point of a source `vs` driving a diode (saturation
/// current `is`, ideality 1) through a resistor `r`: the node voltage `v`
/// with KCL `is (e^{v/Vt} − 1) − (vs − v)/r = 0`, from 0 V; returns the
/// power in the diode, `v · i_d`.
#[differentiable]
fn diode_power(is: f64, r: f64, vs: f64) -> f64 {
    let v0 = &vs * 0.0;
    let v = rlx::root(
        |v| (v / VT).exp_m1() * &is - (&vs - v) / &r,
        &v0,
        Newton::new().tol(1e-16),
    )?;
    let i = (&vs - &v) / &r;
    &v * i
}

/// The operating point's voltage.
#[differentiable]
fn diode_voltage(is: f64, r: f64, vs: f64) -> f64 {
    let v0 = &vs * 0.0;
    rlx::root(
        |v| (v / VT).exp_m1() * &is - (&vs - v) / &r,
        &v0,
        Newton::new().tol(1e-16),
    )?
}

#[test]
fn a_diode_operating_point_and_its_sensitivities() {
    for (is, r, vs) in [(1e-14, 1e3, 5.0), (2.5e-12, 220.0, 1.5), (1e-9, 10e3, 12.0)] {
        let v = diode_voltage(is, r, vs);
        let kcl = is * (v / VT).exp_m1() - (vs - v) / r;
        assert!(kcl.abs() <= 1e-16, "KCL residual {kcl}");
        // dv/dθ = −F_θ / F_v (the implicit function theorem by hand)
        let fv = is / VT * (v / VT).exp() + 1.0 / r;
        let (fis, fr, fvs) = ((v / VT).exp_m1(), (vs - v) / (r * r), -1.0 / r);
        let want = [-fis / fv, -fr / fv, -fvs / fv];
        let (dis, dr, dvs) = grad_diode_voltage(is, r, vs).unwrap();
        close(
            "dv/d(is, r, vs)",
            &[dis * is, dr * r, dvs],
            &[want[0] * is, want[1] * r, want[2]],
            1e-12,
        );
        // The power's gradient against central differences of the solve,
        // with relative steps.
        let (pis, pr, pvs) = grad_diode_power(is, r, vs).unwrap();
        let d = |f: &dyn Fn(f64) -> f64, x: f64| {
            let h = 1e-6 * x.abs();
            (f(x + h) - f(x - h)) / (2.0 * h)
        };
        let fd = [
            d(&|x| diode_power(x, r, vs), is) * is,
            d(&|x| diode_power(is, x, vs), r) * r,
            d(&|x| diode_power(is, r, x), vs) * vs,
        ];
        close("dP/dθ · θ vs fd", &[pis * is, pr * r, pvs * vs], &fd, 1e-7);
    }
}

#[test]
fn bad_input_is_an_error_naming_the_solver_and_its_line() {
    let x0 = t(&[0.0, 0.0, 0.0]);
    let p = t(&[1.0, 2.0, 3.0]);
    let message = |e: Error| e.to_string();
    // A residual of another shape than the unknown.
    let e = rlx::root(|x| x.sum_all(), &x0, Newton::new()).unwrap_err();
    let m = message(e);
    assert!(
        m.contains("the residual returns f64[] but the unknown is f64[3]"),
        "{m}"
    );
    assert!(m.contains("tests/root.rs"), "{m}");
    // A tolerance <= 0, or not a number.
    for tol in [0.0, -1e-9, f64::NAN] {
        let e = rlx::root(|x| x - &p, &x0, Newton::new().tol(tol)).unwrap_err();
        assert!(message(e).contains("it must be finite and positive"));
    }
    // NaN in the residual at the guess.
    let e = rlx::root(|x| (x - 2.0).sqrt() - &p, &x0, Newton::new()).unwrap_err();
    assert!(message(e).contains("the residual is NaN at the initial guess"));
    // No real root: the cap, with the residual's norm reached.
    let e = rlx::root(|x| x * x + 1.0, &t(&[0.5]), Newton::new().max_iter(20)).unwrap_err();
    assert!(
        matches!(e.root(), Error::NoConvergence { norm, .. } if *norm >= 1.0),
        "{e}"
    );
    let m = message(e);
    assert!(
        m.contains("did not converge") && m.contains("tests/root.rs"),
        "{m}"
    );
    // A singular Jacobian on the way (x² − 1 from 0)...
    let e = rlx::root(|x| x * x - 1.0, &t(&[0.0]), Newton::new()).unwrap_err();
    assert!(message(e).contains("singular at iterate 0"));
    // ... and at the solution, where the derivative does not exist.
    let mask = t(&[1.0, 0.0]);
    let e = rlx::root(|x| (x - 1.0) * &mask, &t(&[1.0, 5.0]), Newton::new()).unwrap_err();
    let m = message(e);
    assert!(
        m.contains("singular at the solution") && m.contains("does not exist"),
        "{m}"
    );
}

/// A root that never converges, inside a companion.
#[differentiable]
fn unsolvable(p: &Tensor) -> f64 {
    let x0 = p * 0.7 + 0.1;
    let x = rlx::root(|x| x * x + p, &x0, Newton::new().max_iter(10))?;
    x.sum_all()
}

/// A residual of the wrong shape, inside a companion.
#[differentiable]
fn misshapen(p: &Tensor) -> f64 {
    let x = rlx::root(|x| (x - p).sum_all(), p, Newton::new())?;
    x.sum_all()
}

#[test]
fn companions_return_solver_errors() {
    let p = t(&[1.0, 2.0]);
    let e = grad_unsolvable(&p).unwrap_err();
    assert!(
        matches!(e.root(), Error::NoConvergence { norm, .. } if *norm > 1.0),
        "{e}"
    );
    assert!(e.to_string().contains("tests/root.rs"), "{e}");
    let e = value_and_grad_misshapen(&p).unwrap_err();
    assert!(
        e.to_string()
            .contains("the residual returns f64[] but the unknown is f64[2]"),
        "{e}"
    );
}

/// The fixed point of `x = tanh(A x + b) · s`, a small recurrent
/// network's equilibrium (a contraction for these weights).
fn layer(x: &Tensor, b: &Tensor, s: &Tensor) -> Tensor {
    let a = Tensor::from_slice(&[0.3, -0.2, 0.1, 0.25, 0.2, -0.3, -0.1, 0.15, 0.2], [3, 3]);
    (a.matmul(&x.reshape([3, 1])).reshape([3]) + b).tanh() * s
}

#[differentiable]
fn equilibrium(b: &Tensor, s: f64) -> f64 {
    let x0 = b * 0.0;
    let x = rlx::fixed_point(|x| layer(x, b, &s), &x0, Newton::new().tol(1e-14))?;
    loss(&x)
}

/// The same equilibrium by the plain iteration `x ← g(x)`, unrolled.
#[differentiable]
fn equilibrium_iterated(b: &Tensor, s: f64, steps: usize) -> f64 {
    let mut x = b * 0.0;
    for _ in 0..steps {
        x = layer(&x, b, &s);
    }
    loss(&x)
}

#[test]
fn a_fixed_point_and_its_implicit_derivatives() {
    for (b, s) in [(vec![0.5, -1.0, 0.2], 0.9), (vec![-0.3, 0.8, 1.4], 1.3)] {
        let (db, ds) = grad_equilibrium(&t(&b), s).unwrap();
        let mut got = v(&db);
        got.push(ds);
        close("fixed point vs fd", &got, &fd(equilibrium, &b, s), 1e-8);
        // The plain iteration converges linearly; after 200 steps its
        // derivative agrees with the implicit one.
        let (ib, is) = grad_equilibrium_iterated(&t(&b), s, 200).unwrap();
        close(
            "fixed point vs iterated",
            &got,
            &[v(&ib), vec![is]].concat(),
            1e-11,
        );
        let hess = hessian_equilibrium(&t(&b), s).unwrap();
        let (wb, ws) = (t(&[0.1, 0.3, -0.2]), 0.5);
        let (hb, hs) = hvp_equilibrium(&t(&b), s, &wb, ws).unwrap();
        let ((hbb, hbs), (hsb, hss)) = hess;
        let (hsb, hss) = (v(&hsb), hss.item::<f64>().unwrap());
        let last: f64 = (0..3).map(|j| hsb[j] * v(&wb)[j]).sum::<f64>() + hss * ws;
        assert!(
            (hs - last).abs() <= 1e-11 * last.abs().max(1.0),
            "{hs} vs {last}"
        );
        let (hbb, hbs) = (v(&hbb), v(&hbs));
        let row: Vec<f64> = (0..3)
            .map(|i| (0..3).map(|j| hbb[i * 3 + j] * v(&wb)[j]).sum::<f64>() + hbs[i] * ws)
            .collect();
        close("fixed point hvp vs hessian", &v(&hb), &row, 1e-11);
    }
    let e = rlx::fixed_point(|x| x + 1.0, &t(&[0.0]), Newton::new()).unwrap_err();
    assert!(
        e.to_string()
            .contains("`rlx::fixed_point` at tests/root.rs"),
        "{e}"
    );
}

#[test]
fn a_batched_root_solves_every_item() {
    use rlx::core::{vmap, RootRef};
    use rlx::Graph;
    // F(x, p) = x³ + x − p, for x, p: [2]
    let mut f = Graph::new();
    let x = f.input("x", [2], DType::F64);
    let p = f.input("p", [2], DType::F64);
    let x3 = f.powi(x, 3).unwrap();
    let s = f.add(x3, x).unwrap();
    let r = f.sub(s, p).unwrap();
    f.set_outputs(vec![r]);
    let op = RootRef::new("test root", f, Newton::new().tol(1e-14)).unwrap();
    let mut g = Graph::new();
    let x0 = g.input("x0", [2], DType::F64);
    let p = g.input("p", [2], DType::F64);
    let y = g.push(rlx::Op::Root(op), &[x0, p]).unwrap();
    g.set_outputs(vec![y]);
    // Three items of p, one shared guess.
    let b = vmap(&g, &[false, true], 3).unwrap();
    let ps = [0.5, -1.0, 2.0, 10.0, 0.0, -3.0];
    let args = [&t(&[0.0, 0.0]), &Tensor::from_slice(&ps, [3, 2])];
    let out = rlx::compile(&b).unwrap().run(&args).unwrap();
    let xs = v(&out[0]);
    // The reference interpreter runs the same Newton kernel on its graphs.
    let interpreted = rlx::runtime::interpret(&b, &args).unwrap();
    close("interpreted", &v(&interpreted[0]), &xs, 1e-15);
    assert_eq!(out[0].shape().dims(), &[3, 2]);
    for (xi, pi) in xs.iter().zip(ps) {
        assert!((xi * xi * xi + xi - pi).abs() <= 1e-14, "{xi} for {pi}");
    }
}
