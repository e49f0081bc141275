//! Loops traced once (`rlx::scan`, `rlx::iterate`): every companion of a
//! loop against the same function with the loop unrolled at trace time,
//! against central finite differences, every checkpoint budget, memory
//! bounds (counting allocator), 10⁵ steps, bad input, and the eager path.

use rlx::prelude::*;
use rlx::Scan;

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;

#[path = "common/driven.rs"]
mod driven_case;
use driven_case::{close, direction, inputs, t, v, H, T};

/// Damped springs driven by a per-step force: carries `(q, p)`, per-step
/// input `f_t`, per-step output `sin(q_t)`; the loss mixes the trajectory
/// and the final state.
#[differentiable]
fn driven(q0: &Tensor, forces: &Tensor, k: f64) -> f64 {
    let p0 = q0 * 0.0;
    let ((q, p), path) = rlx::scan((q0.clone(), p0), forces, |(q, p), f| {
        let p = &p + (&f - &q * &k - &p * 0.1) * H;
        let q = &q + &p * H;
        ((q.clone(), p), q.sin())
    });
    (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all()
}

/// `driven` with the loop unrolled at trace time.
#[differentiable]
fn driven_unrolled(q0: &Tensor, forces: &Tensor, k: f64, steps: usize) -> f64 {
    let mut q = q0.clone();
    let mut p = q0 * 0.0;
    let mut path = Vec::new();
    for t in 0..steps {
        let f = forces.slice_range(t..t + 1, 0).reshape(q0.shape().clone());
        p = &p + (&f - &q * &k - &p * 0.1) * H;
        q = &q + &p * H;
        path.push(q.sin().reshape([1, q0.shape().dim(0)]));
    }
    let refs: Vec<&Tensor> = path.iter().collect();
    let path = Tensor::concat(&refs, 0);
    (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all()
}

/// A nonlinear map iterated with a given checkpoint budget.
#[differentiable]
fn chain(x0: &Tensor, k: f64, steps: usize, budget: usize) -> f64 {
    chain_body(x0, &k, steps, budget)
}

/// The body of `chain`, for tracing by hand.
fn chain_body(x0: &Tensor, k: &Tensor, steps: usize, budget: usize) -> Tensor {
    let x = Scan::new()
        .checkpoints(budget)
        .iterate(x0.clone(), steps, |x| &x + (&x * k).sin() * 0.01);
    x.square().sum_all()
}

/// `chain` with the default budget.
#[differentiable]
fn chain_default(x0: &Tensor, k: f64, steps: usize) -> f64 {
    let x = rlx::iterate(x0.clone(), steps, |x| &x + (&x * &k).sin() * 0.01);
    x.square().sum_all()
}

/// `chain` unrolled.
#[differentiable]
fn chain_unrolled(x0: &Tensor, k: f64, steps: usize) -> f64 {
    let mut x = x0.clone();
    for _ in 0..steps {
        x = &x + (&x * &k).sin() * 0.01;
    }
    x.square().sum_all()
}

/// A loop inside a loop: the inner one reads the outer carry and a parameter.
#[differentiable]
fn nested(x0: &Tensor, k: f64) -> f64 {
    let x = rlx::iterate(x0.clone(), 3, |x| {
        let y = rlx::iterate(x.clone(), 4, |y| &y * 0.9 + (&x * &k).cos() * 0.1);
        &x + y.tanh() * 0.2
    });
    x.sum_all()
}

#[differentiable]
fn nested_unrolled(x0: &Tensor, k: f64) -> f64 {
    let mut x = x0.clone();
    for _ in 0..3 {
        let mut y = x.clone();
        for _ in 0..4 {
            y = &y * 0.9 + (&x * &k).cos() * 0.1;
        }
        x = &x + y.tanh() * 0.2;
    }
    x.sum_all()
}

/// `chain_default` over tensors only (callable from traced code).
#[differentiable]
fn chain_t(x0: &Tensor, k: &Tensor) -> Tensor {
    let x = rlx::iterate(x0.clone(), 6, |x| &x + (&x * k).sin() * 0.01);
    x.square().sum_all()
}

#[differentiable]
fn chain_t_unrolled(x0: &Tensor, k: &Tensor) -> Tensor {
    let mut x = x0.clone();
    for _ in 0..6 {
        x = &x + (&x * k).sin() * 0.01;
    }
    x.square().sum_all()
}

/// The gradient of `chain_t`, differentiable again (grad of grad).
#[differentiable]
fn chain_grad(x0: &Tensor, k: &Tensor) -> f64 {
    let (gx, gk) = grad_chain_t(x0, k).unwrap();
    (gx * x0).sum_all() + gk
}

#[differentiable]
fn chain_grad_unrolled(x0: &Tensor, k: &Tensor) -> f64 {
    let (gx, gk) = grad_chain_t_unrolled(x0, k).unwrap();
    (gx * x0).sum_all() + gk
}

#[test]
fn every_companion_of_a_loop_matches_the_unrolled_loop() {
    let (q0, f, k) = inputs();
    let tq = t(&[0.2, 0.5, -0.3]);
    let tf = Tensor::from_vec(
        (0..T * 3).map(|i| (i as f64 * 0.37).sin()).collect(),
        [T, 3],
    );
    close(
        "value",
        &[driven(&q0, &f, k)],
        &[driven_unrolled(&q0, &f, k, T)],
    );
    let (a, b) = (
        grad_driven(&q0, &f, k).unwrap(),
        grad_driven_unrolled(&q0, &f, k, T).unwrap(),
    );
    close("grad q0", &v(&a.0), &v(&b.0));
    close("grad forces", &v(&a.1), &v(&b.1));
    close("grad k", &[a.2], &[b.2]);
    let (va, ga) = value_and_grad_driven(&q0, &f, k).unwrap();
    let (vb, gb) = value_and_grad_driven_unrolled(&q0, &f, k, T).unwrap();
    close("value_and_grad", &[va, ga.2], &[vb, gb.2]);
    close("value_and_grad forces", &v(&ga.1), &v(&gb.1));
    let (ja, jb) = (
        jvp_driven(&q0, &f, k, &tq, &tf, 0.4).unwrap(),
        jvp_driven_unrolled(&q0, &f, k, T, &tq, &tf, 0.4).unwrap(),
    );
    close("jvp", &[ja.0, ja.1], &[jb.0, jb.1]);
    let (_, ca) = vjp_driven(&q0, &f, k, 1.5).unwrap();
    let (_, cb) = vjp_driven_unrolled(&q0, &f, k, T, 1.5).unwrap();
    close("vjp", &v(&ca.1), &v(&cb.1));
    let (ja, jb) = (
        jacobian_driven(&q0, &f, k).unwrap(),
        jacobian_driven_unrolled(&q0, &f, k, T).unwrap(),
    );
    close("jacobian q0", &v(&ja.0), &v(&jb.0));
    close("jacobian forces", &v(&ja.1), &v(&jb.1));
    let (ha, hb) = (
        hessian_driven(&q0, &f, k).unwrap(),
        hessian_driven_unrolled(&q0, &f, k, T).unwrap(),
    );
    close("hessian q0 q0", &v(&ha.0 .0), &v(&hb.0 .0));
    close("hessian forces forces", &v(&ha.1 .1), &v(&hb.1 .1));
    close("hessian forces k", &v(&ha.1 .2), &v(&hb.1 .2));
    close("hessian k k", &v(&ha.2 .2), &v(&hb.2 .2));
    let (pa, pb) = (
        hvp_driven(&q0, &f, k, &tq, &tf, -0.6).unwrap(),
        hvp_driven_unrolled(&q0, &f, k, T, &tq, &tf, -0.6).unwrap(),
    );
    close("hvp q0", &v(&pa.0), &v(&pb.0));
    close("hvp forces", &v(&pa.1), &v(&pb.1));
    close("hvp k", &[pa.2], &[pb.2]);
}

#[test]
fn loop_derivatives_match_central_differences() {
    let (q0, f, k) = inputs();
    let d = direction();
    let grad = grad_driven(&q0, &f, k).unwrap();
    let (_, jv) = jvp_driven(&q0, &f, k, &d.dq, &d.df, d.dk).unwrap();
    d.check_first_order(driven, grad, jv);
    // second order: the Hessian-vector product against differences of the gradient
    let e = 1e-5;
    let g_at = |e: f64| {
        let (q, f, k) = d.at(e);
        grad_driven(&q, &f, k).unwrap()
    };
    let (hq, hf, hk) = hvp_driven(&q0, &f, k, &d.dq, &d.df, d.dk).unwrap();
    let (p, m) = (g_at(e), g_at(-e));
    let fd_k = (p.2 - m.2) / (2.0 * e);
    assert!(
        (fd_k - hk).abs() < 1e-6 * hk.abs().max(1.0),
        "{fd_k} vs {hk}"
    );
    for (i, ((a, b), h)) in v(&p.0).iter().zip(v(&m.0)).zip(v(&hq)).enumerate() {
        let fd = (a - b) / (2.0 * e);
        assert!(
            (fd - h).abs() < 1e-6 * h.abs().max(1.0),
            "hvp q0[{i}]: {fd} vs {h}"
        );
    }
    for (i, ((a, b), h)) in v(&p.1).iter().zip(v(&m.1)).zip(v(&hf)).enumerate() {
        let fd = (a - b) / (2.0 * e);
        assert!(
            (fd - h).abs() < 1e-6 * h.abs().max(1.0),
            "hvp forces[{i}]: {fd} vs {h}"
        );
    }
}

#[test]
fn every_checkpoint_budget_gives_the_same_gradient() {
    let x0 = t(&[0.4, -1.2, 2.0, 0.1]);
    let steps = 13;
    let (want_x, want_k) = grad_chain_unrolled(&x0, 3.0, steps).unwrap();
    for budget in 1..=steps {
        let (gx, gk) = grad_chain(&x0, 3.0, steps, budget).unwrap();
        close(&format!("budget {budget}"), &v(&gx), &v(&want_x));
        close(&format!("budget {budget} k"), &[gk], &[want_k]);
    }
}

#[test]
fn nested_loops_and_grad_of_grad_match_the_unrolled_loops() {
    let x0 = t(&[0.4, -1.2, 2.0]);
    close(
        "nested value",
        &[nested(&x0, 1.3)],
        &[nested_unrolled(&x0, 1.3)],
    );
    let (a, b) = (
        grad_nested(&x0, 1.3).unwrap(),
        grad_nested_unrolled(&x0, 1.3).unwrap(),
    );
    close("nested grad", &v(&a.0), &v(&b.0));
    close("nested grad k", &[a.1], &[b.1]);
    let (a, b) = (
        hessian_nested(&x0, 1.3).unwrap(),
        hessian_nested_unrolled(&x0, 1.3).unwrap(),
    );
    close("nested hessian", &v(&a.0 .0), &v(&b.0 .0));
    let k = Tensor::scalar(2.0);
    close(
        "grad of grad value",
        &[chain_grad(&x0, &k)],
        &[chain_grad_unrolled(&x0, &k)],
    );
    let (a, b) = (
        grad_chain_grad(&x0, &k).unwrap(),
        grad_chain_grad_unrolled(&x0, &k).unwrap(),
    );
    close("grad of grad", &v(&a.0), &v(&b.0));
    close("grad of grad k", &v(&a.1), &v(&b.1));
}

#[test]
fn a_plain_call_equals_the_eager_loop() {
    // Outside a trace `scan` runs the closure once per step on concrete tensors.
    let (q0, f, k) = inputs();
    let kt = Tensor::scalar(k);
    let ((q, p), path) = rlx::scan((q0.clone(), &q0 * 0.0), &f, |(q, p), ft| {
        let p = &p + (&ft - &q * &kt - &p * 0.1) * H;
        let q = &q + &p * H;
        ((q.clone(), p), q.sin())
    });
    assert_eq!(path.shape().dims(), &[T, 3]);
    let eager = (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all();
    close(
        "eager",
        &[eager.item::<f64>().unwrap()],
        &[driven(&q0, &f, k)],
    );
    // reversed: the per-step inputs are visited from the last, outputs stored in place
    let xs = t(&[1.0, 2.0, 3.0, 4.0]);
    let (_, running) = Scan::new()
        .reverse(true)
        .run(Tensor::scalar(0.0), &xs, |acc, x| {
            let n = &acc + &x;
            (n.clone(), n)
        });
    assert_eq!(v(&running), vec![10.0, 9.0, 7.0, 4.0]);
}

/// Reversed scan with a per-step output, traced.
#[differentiable]
fn suffix_sums(xs: &Tensor) -> Tensor {
    let (_, running) = Scan::new()
        .reverse(true)
        .run(xs.sum_all() * 0.0, xs, |acc, x| {
            let n = &acc + &x * &x;
            (n.clone(), n)
        });
    running
}

#[test]
fn a_reversed_traced_scan_and_its_jacobian() {
    let xs = t(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(v(&suffix_sums(&xs)), vec![30.0, 29.0, 25.0, 16.0]);
    // d running[i] / d x_j = 2 x_j for j >= i
    let j = jacobian_suffix_sums(&xs).unwrap();
    let mut want = vec![0.0; 16];
    for i in 0..4 {
        for jj in i..4 {
            want[i * 4 + jj] = 2.0 * (jj + 1) as f64;
        }
    }
    assert_eq!(v(&j), want);
}

/// The line of the `iterate` call in `grows`.
const GROWS_LINE: u32 = line!() + 4;

#[differentiable]
fn grows(x0: &Tensor) -> f64 {
    let x = rlx::iterate(x0.clone(), 3, |x| {
        Tensor::concat(&[&x, &x], 0).slice_range(0..3, 0)
    });
    x.sum_all()
}

const LENGTHS_LINE: u32 = line!() + 4;

#[differentiable]
fn two_lengths(a: &Tensor, b: &Tensor) -> f64 {
    let (c, ()) = rlx::scan(a.sum_all(), (a, b), |c, (x, y)| (&c + &x * &y, ()));
    c
}

#[differentiable]
fn with_budget(x0: &Tensor, budget: usize) -> f64 {
    let x = Scan::new()
        .checkpoints(budget)
        .iterate(x0.clone(), 5, |x| x.sin());
    x.sum_all()
}

fn message<T>(r: rlx::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_loops_are_errors_naming_the_loop_the_shapes_and_the_line() {
    let here = format!("tests/loops.rs:{GROWS_LINE}");
    let m = message(grad_grows(&t(&[1.0, 2.0])));
    assert!(m.contains("`rlx::iterate` at") && m.contains(&here), "{m}");
    assert!(
        m.contains("carry 0") && m.contains("f64[2]") && m.contains("f64[3]"),
        "{m}"
    );

    let m = message(grad_two_lengths(
        &Tensor::zeros([4, 2], DType::F64),
        &Tensor::zeros([5, 2], DType::F64),
    ));
    assert!(m.contains(&format!("tests/loops.rs:{LENGTHS_LINE}")), "{m}");
    assert!(
        m.contains("[4, 2]") && m.contains("[5, 2]") && m.contains("first axes"),
        "{m}"
    );

    for budget in [0, 6, 1000] {
        let m = message(grad_with_budget(&t(&[1.0]), budget));
        assert!(m.contains(&format!("checkpoint budget of {budget}")), "{m}");
        assert!(m.contains("1..=5"), "{m}");
    }
    // on concrete tensors, the checked variant returns the error
    let e = Scan::new()
        .checkpoints(0)
        .try_iterate(t(&[1.0]), 3, |x| x.sin())
        .unwrap_err();
    assert!(e.to_string().contains("checkpoint budget of 0"), "{e}");
    let e = Scan::new()
        .try_iterate(t(&[1.0]), 3, |x| Tensor::concat(&[&x, &x], 0))
        .unwrap_err();
    assert!(e.to_string().contains("carry 0"), "{e}");
}

/// Carries of 4096 `f64` (32 KiB) make the loop's memory visible.
const WIDE: usize = 4096;
const CARRY: usize = WIDE * 8;

/// The gradient graph of `chain` (over `WIDE` values) in `x0`.
fn chain_gradient(steps: usize, budget: usize) -> rlx::Graph {
    let t = rlx::trace::Trace::enter();
    let x = t.input("x0", [WIDE], DType::F64);
    let k = t.input("k", Shape::scalar(), DType::F64);
    let y = chain_body(&x, &k, steps, budget);
    let g = t.finish(&[&y]).unwrap();
    rlx::core::autodiff::grad(&g, &[0]).unwrap()
}

/// Peak heap bytes of the first run of the compiled gradient of `chain`:
/// the run that allocates the plan's buffers and the loop's carries,
/// checkpoint slots and step buffers (the plan keeps them for its next
/// runs, which allocate none of them again; see `rlx-runtime/tests/loops.rs`).
fn peak_of_grad(steps: usize, budget: usize) -> usize {
    let exe = rlx::compile(&chain_gradient(steps, budget)).unwrap();
    let x0 = Tensor::from_vec((0..WIDE).map(|i| (i as f64 * 0.01).sin()).collect(), [WIDE]);
    let k = Tensor::scalar(1.5);
    counting::peak_bytes(|| {
        exe.run(&[&x0, &k]).unwrap();
    })
}

/// Peak heap bytes of compiling the gradient of `chain` and running it
/// once: the plan's own buffers (which hold a scan's packed result) too.
/// On one thread: the counting allocator counts this thread's bytes, and
/// with more threads the pool's workers compile some of the loops' step
/// graphs (allocated there, freed here).
fn peak_of_compile_and_grad(steps: usize, budget: usize) -> usize {
    let g = chain_gradient(steps, budget);
    let x0 = Tensor::from_vec((0..WIDE).map(|i| (i as f64 * 0.01).sin()).collect(), [WIDE]);
    let k = Tensor::scalar(1.5);
    // No other test of this file sets the count (every count gives the
    // same plan and bits, so the setting only changes where work runs).
    rlx::set_num_threads(1);
    let peak = counting::peak_bytes(|| {
        rlx::compile(&g).unwrap().run(&[&x0, &k]).unwrap();
    });
    rlx::set_num_threads(0);
    peak
}

#[test]
fn reverse_mode_memory_is_the_checkpoints_plus_a_constant_independent_of_the_length() {
    let short = peak_of_grad(40, 10);
    let long = peak_of_grad(400, 10);
    let more = peak_of_grad(400, 30);
    // The documented bound: the stored carries, plus the adjoint's working
    // carry, body output, carry cotangent and reverse step output, the
    // scan's carry and body output (the plan keeps both loops' buffers for
    // its next runs, so they are live together), and the gradient; and the
    // plan's buffers, which the first run allocates: the scan's result,
    // c(T) and the K carries of its spine (which the adjoint reads in
    // place), c(T) sliced out of it, the adjoint's result (c̄(0), k̄).
    let spine = |budget| rlx::core::loops::schedule::spine(400, budget).len();
    let bound = |budget| (budget + spine(budget) + 4 + 2 + 1 + 3) * CARRY + CARRY / 2;
    assert!(long <= bound(10), "{long} bytes");
    assert!(more <= bound(30), "{more} bytes");
    // Ten times the steps, the same memory.
    assert!(long.abs_diff(short) < CARRY / 8, "{short} vs {long} bytes");
    // Twenty more checkpoints, twenty more carries, in the slots and in
    // the spine.
    let grown = 20 + spine(30) - spine(10);
    assert!(
        (more - long).abs_diff(grown * CARRY) < CARRY / 2,
        "{long} vs {more} bytes"
    );
}

#[test]
fn storing_every_carry_stores_every_steps_residuals_and_nothing_more() {
    // With a budget of T the compiler splits the reverse step: the scan
    // stores each step's residuals (here cos(k x) and x: 2 carries) and the
    // reverse sweep recomputes nothing.
    let fused = rlx::core::loops::spine::fuse_spines(&chain_gradient(400, 400))
        .unwrap()
        .expect("a scan and its adjoint")
        .0;
    let per_step: usize = fused
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            rlx::core::Op::Loop(l) if l.residuals.is_some() => Some(l.residual_types()),
            _ => None,
        })
        .expect("residuals")
        .iter()
        .map(|t| t.shape.numel() * 8)
        .sum();
    assert_eq!(per_step, 2 * CARRY);
    let short = peak_of_compile_and_grad(40, 40);
    let long = peak_of_compile_and_grad(400, 400);
    // The documented bound: T steps' residuals (inside the scan's result),
    // plus a constant number of carries (the loops' step buffers, the
    // plan's other values, the compiled bodies: 15.7 carries measured, so
    // 24 is a chosen margin; the growth per step below is the real check).
    assert!(long <= 400 * per_step + 24 * CARRY, "{long} bytes");
    // 360 more steps, 360 more steps of residuals.
    assert!(
        (long - short).abs_diff(360 * per_step) < CARRY / 2,
        "{short} vs {long} bytes"
    );
}

#[test]
fn a_hundred_thousand_steps_with_a_gradient_in_bounded_memory() {
    const N: usize = 64;
    const STEPS: usize = 100_000;
    let x0 = Tensor::from_vec((0..N).map(|i| (i as f64 * 0.1).cos()).collect(), [N]);
    let mut grad = None;
    let peak = counting::peak_bytes(|| {
        grad = Some(grad_chain_default(&x0, 0.5, STEPS).unwrap());
    });
    let (gx, gk) = grad.unwrap();
    assert!(v(&gx).iter().all(|g| g.is_finite()) && gk.is_finite());
    // ⌈√T⌉ = 317 stored carries of 512 bytes, plus 4 working ones; the rest
    // (compiled plans, the trace) does not grow with the number of steps.
    let budget = rlx::core::loops::default_checkpoints(STEPS);
    assert_eq!(budget, 317);
    let carries = (budget + 4) * N * 8;
    assert!(peak < carries + (4 << 20), "{peak} bytes");
    assert!(peak < STEPS * N * 8 / 10, "{peak} bytes");
    // The adjoint written by hand: x(t+1) = x + sin(k x) / 100, loss Σ x(T)²,
    // ā(T) = 2 x(T), ā(t) = ā(t+1) (1 + k cos(k x(t)) / 100),
    // k̄ = Σ_t ā(t+1) x(t) cos(k x(t)) / 100.
    let k = 0.5;
    let mut want_k = 0.0;
    for (i, (x, g)) in v(&x0).into_iter().zip(v(&gx)).enumerate() {
        let mut path = vec![x];
        for t in 0..STEPS {
            let x = path[t];
            path.push(x + (x * k).sin() * 0.01);
        }
        let mut a = 2.0 * path[STEPS];
        for t in (0..STEPS).rev() {
            let x = path[t];
            want_k += a * x * (k * x).cos() * 0.01;
            a *= 1.0 + k * (k * x).cos() * 0.01;
        }
        assert!((a - g).abs() <= 1e-9 * a.abs(), "x0[{i}]: {g} vs {a}");
    }
    assert!(
        (want_k - gk).abs() <= 1e-9 * want_k.abs(),
        "{gk} vs {want_k}"
    );
}

/// The graph of `driven` traced by hand (without the macro).
fn driven_graph() -> rlx::Graph {
    let tr = rlx::trace::Trace::enter();
    let q0 = tr.input("q0", [3], DType::F64);
    let forces = tr.input("forces", [T, 3], DType::F64);
    let k = tr.input("k", Shape::scalar(), DType::F64);
    let p0 = &q0 * 0.0;
    let ((q, p), path) = rlx::scan((q0.clone(), p0), &forces, |(q, p), f| {
        let p = &p + (&f - &q * &k - &p * 0.1) * H;
        let q = &q + &p * H;
        ((q.clone(), p), q.sin())
    });
    let y = (path.square() * 0.5).sum_all() + q.sum_all() * p.sum_all();
    tr.finish(&[&y]).unwrap()
}

#[test]
fn compiled_loops_agree_with_the_reference_interpreter() {
    let g = driven_graph();
    let (q0, f, k) = inputs();
    let k = Tensor::scalar(k);
    let args = [&q0, &f, &k];
    for (what, h) in [
        ("value", g.clone()),
        ("grad", rlx::autodiff::grad(&g, &[0, 1, 2]).unwrap()),
        ("jvp", rlx::autodiff::jvp(&g, &[0, 1, 2]).unwrap()),
        ("hvp", rlx::autodiff::hvp(&g, &[0, 1, 2]).unwrap()),
    ] {
        let mut ins: Vec<Tensor> = args.iter().map(|t| (*t).clone()).collect();
        // the extra inputs of jvp/hvp: tangents shaped like the parameters
        for (i, inp) in h.inputs().iter().enumerate().skip(3) {
            let ty = h.ty(inp.node);
            let n = ty.shape.numel();
            ins.push(Tensor::from_vec(
                (0..n).map(|j| ((i + j) as f64 * 0.7).cos()).collect(),
                ty.shape,
            ));
        }
        let refs: Vec<&Tensor> = ins.iter().collect();
        let want = rlx::runtime::interpret(&h, &refs).unwrap();
        let got = rlx::compile(&h).unwrap().run(&refs).unwrap();
        for (a, b) in got.iter().zip(&want) {
            close(what, &v(a), &v(b));
        }
    }
}

#[test]
fn a_batched_loop_equals_the_loop_per_item() {
    // vmap over q0 and the forces, k shared
    let g = driven_graph();
    let b = rlx::core::vmap(&g, &[true, true, false], 3).unwrap();
    let (q0, f, k) = inputs();
    let qs: Vec<f64> = (0..3)
        .flat_map(|i| v(&q0).into_iter().map(move |x| x + i as f64 * 0.3))
        .collect();
    let fs: Vec<f64> = (0..3)
        .flat_map(|i| v(&f).into_iter().map(move |x| x * (1.0 - 0.2 * i as f64)))
        .collect();
    let qb = Tensor::from_slice(&qs, [3, 3]);
    let fb = Tensor::from_slice(&fs, [3, T, 3]);
    let k = Tensor::scalar(k);
    let out = rlx::compile(&b).unwrap().run(&[&qb, &fb, &k]).unwrap();
    let exe = rlx::compile(&g).unwrap();
    for i in 0..3 {
        let qi = t(&qs[i * 3..i * 3 + 3]);
        let fi = Tensor::from_slice(&fs[i * T * 3..(i + 1) * T * 3], [T, 3]);
        let one = exe.run(&[&qi, &fi, &k]).unwrap();
        close("vmap", &[v(&out[0])[i]], &v(&one[0]));
    }
}
