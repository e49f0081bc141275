//! The opt-in check of non-finite values (`rlx::set_debug_nans`, or
//! `RLX_DEBUG_NANS=1`): off, NaN and infinities come back as computed; on,
//! the call fails naming the first node that produced one from finite
//! operands, whatever path the plan took (the number path and its native
//! scalar code, fused loops over tensors, a backward pass), whatever ran
//! it (a dense or sparse companion, an `n`-th derivative, a plan the user
//! compiled), with the line of the user's code, also inside a nested
//! `#[differentiable]` call.

use std::sync::{Mutex, MutexGuard, PoisonError};

use rlx::prelude::*;
use rlx::Error;

/// The check is process-wide: tests that set it run one at a time.
static CHECK: Mutex<()> = Mutex::new(());

fn check(on: bool) -> MutexGuard<'static, ()> {
    let guard = CHECK.lock().unwrap_or_else(PoisonError::into_inner);
    rlx::set_debug_nans(on);
    guard
}

/// The fields of a [`Error::NonFinite`], wherever it is wrapped.
fn non_finite(e: &Error) -> (String, u32, String, f64) {
    match e.root() {
        Error::NonFinite(n) => (n.function.clone(), n.node, n.op.clone(), n.value),
        other => panic!("expected Error::NonFinite, got {other}"),
    }
}

/// `file:line:` of the first line of this file that holds `code`.
fn line_of(code: &str) -> String {
    let n = include_str!("debug_nans.rs")
        .lines()
        .position(|l| l.contains(code))
        .expect("the code is in this file");
    format!("{}:{}:", file!(), n + 1)
}

#[differentiable]
fn log_of_shifted(x: f64) -> f64 {
    (x - 1.0).ln() * 3.0
}

#[differentiable]
fn root(x: f64) -> f64 {
    x.sqrt() + x
}

#[differentiable]
fn ratio(x: f64, y: f64) -> f64 {
    &x / &y + x
}

#[differentiable]
fn log_sum(x: &Tensor) -> Tensor {
    ((x - 1.0).ln() * 2.0 + x.square()).sum_all()
}

#[test]
fn off_the_non_finite_results_come_back_unchanged() {
    let _on = check(false);
    assert_eq!(log_of_shifted(1.0), f64::NEG_INFINITY);
    assert!(grad_log_of_shifted(1.0).unwrap().is_infinite());
    assert!(grad_root(0.0).unwrap().is_infinite());
    assert!(ratio(0.0, 0.0).is_nan());
    let (v, (gx, gy)) = value_and_grad_ratio(0.0, 0.0).unwrap();
    // d/dx (x / y) = 1 / y, d/dy = -x / y².
    assert!(v.is_nan() && gx.is_infinite() && gy.is_nan());
    let x = Tensor::from_vec(vec![2.0, 1.0, 3.0], [3]);
    assert!(grad_log_sum(&x).unwrap().to_f64_vec().unwrap()[1].is_infinite());
}

#[test]
fn a_log_at_zero_is_named_through_the_number_path() {
    let _on = check(true);
    // Finite results pass.
    assert_eq!(grad_log_of_shifted(3.0).unwrap(), 1.5);
    let e = grad_log_of_shifted(1.0).unwrap_err();
    let (function, _, op, value) = non_finite(&e);
    assert_eq!(function, "the gradient of `log_of_shifted`");
    assert_eq!(op, "ln");
    assert_eq!(value, f64::NEG_INFINITY);
    let msg = e.to_string();
    assert!(
        msg.contains("(`ln`) produced -inf from finite operands"),
        "{msg}"
    );
    // The line of the body that traced the node.
    let traced = format!("= note: traced at {}", line_of("(x - 1.0).ln() * 3.0"));
    assert!(msg.contains(&traced), "{msg}");
    // The caller's line.
    assert!(msg.contains(&format!("{}:", file!())), "{msg}");
    // The plain call panics with the same message.
    let p = std::panic::catch_unwind(|| log_of_shifted(1.0)).unwrap_err();
    let p = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(p.contains("`log_of_shifted`: node %"), "{p}");
    assert!(p.contains("(`ln`) produced -inf"), "{p}");
}

#[test]
fn a_sqrt_at_zero_names_the_backward_node() {
    let _on = check(true);
    // The value, sqrt(0) = 0, is finite: the infinity is the derivative
    // 1 / (2 sqrt(x)), a node of the backward pass.
    assert_eq!(root(0.0), 0.0);
    let e = grad_root(0.0).unwrap_err();
    let (function, node, op, value) = non_finite(&e);
    assert_eq!(function, "the gradient of `root`");
    assert_ne!(op, "sqrt", "{e}");
    assert!(value.is_infinite(), "{e}");
    // Named by the forward node it is the derivative of, and its line.
    let from = format!(
        "the derivative of `sqrt`, traced at {}",
        line_of("x.sqrt() + x")
    );
    assert!(e.to_string().contains(&from), "{e}");
    let graph = graph_root(0.0).unwrap();
    assert!(
        node as usize >= graph.len(),
        "node %{node} is not a node of the backward pass (the forward graph has {} nodes)\n{e}",
        graph.len()
    );
}

#[test]
fn zero_over_zero_is_named_on_every_companion() {
    let _on = check(true);
    let (_, _, op, value) = non_finite(&value_and_grad_ratio(0.0, 0.0).unwrap_err());
    assert_eq!(op, "div");
    assert!(value.is_nan());
    let (function, _, op, _) = non_finite(&jvp_ratio(0.0, 0.0, 1.0, 0.0).unwrap_err());
    assert_eq!(function, "the Jacobian-vector product of `ratio`");
    assert_eq!(op, "div");
    // Not a number argument: an input that holds a NaN is named as such.
    let e = grad_ratio(f64::NAN, 1.0).unwrap_err();
    let (_, _, op, _) = non_finite(&e);
    assert_eq!(op, "input `x`", "{e}");
}

#[test]
fn tensors_through_compiled_loops_are_checked() {
    let _on = check(true);
    let x = Tensor::from_vec((0..64).map(|i| 2.0 + i as f64).collect(), [64]);
    let g = grad_log_sum(&x).unwrap().to_f64_vec().unwrap();
    // 2 / (x - 1) + 2 x at x = 2.
    assert!((g[0] - 6.0).abs() < 1e-12);
    let mut v = x.to_f64_vec().unwrap();
    v[17] = 1.0;
    let x = Tensor::from_vec(v, [64]);
    let e = grad_log_sum(&x).unwrap_err();
    let (function, _, op, value) = non_finite(&e);
    assert_eq!(function, "the gradient of `log_sum`");
    assert_eq!(op, "ln");
    assert_eq!(value, f64::NEG_INFINITY);
    assert!(e.to_string().contains("result of shape [64]"), "{e}");
    let traced = format!("traced at {}", line_of("((x - 1.0).ln() * 2.0"));
    assert!(e.to_string().contains(&traced), "{e}");
}

/// 2 ln x_i: a diagonal Jacobian, 2 / x_i, infinite at 0.
#[differentiable]
fn logs(x: &Tensor) -> Tensor {
    x.ln() * 2.0
}

/// Σ ln x_i: the Hessian is diag(-1 / x_i²), infinite at 0.
#[differentiable]
fn log_total(x: &Tensor) -> Tensor {
    x.ln().sum_all()
}

/// Asserts that `e` is the check's error for `function`, with an infinite
/// value, naming the derivative of the `ln` on the line holding `code`.
fn assert_derivative_of_ln(e: &Error, function: &str, code: &str) {
    let (got, _, _, value) = non_finite(e);
    assert_eq!(got, function, "{e}");
    assert!(value.is_infinite(), "{e}");
    let from = format!("the derivative of `ln`, traced at {}", line_of(code));
    assert!(e.to_string().contains(&from), "{e}");
}

#[test]
fn sparse_companions_are_checked() {
    let _on = check(true);
    let fine = Tensor::from_vec(vec![1.0, 0.5, 2.0], [3]);
    let zero = Tensor::from_vec(vec![1.0, 0.0, 2.0], [3]);
    // Finite results pass.
    let mut j = sparse_jacobian_logs(&fine).unwrap();
    assert_eq!(j.values(), &[2.0, 4.0, 1.0]);
    let mut h = sparse_hessian_log_total(&fine).unwrap();
    assert_eq!(h.values(), &[-1.0, -4.0, -0.25]);
    let (jacobian, hessian) = (
        "the sparse Jacobian of `logs`",
        "the sparse Hessian of `log_total`",
    );
    let e = sparse_jacobian_logs(&zero).unwrap_err();
    assert_derivative_of_ln(&e, jacobian, "x.ln() * 2.0");
    let e = sparse_jacobian_into_logs(&zero, &mut j).unwrap_err();
    assert_derivative_of_ln(&e, jacobian, "x.ln() * 2.0");
    let e = sparse_hessian_log_total(&zero).unwrap_err();
    assert_derivative_of_ln(&e, hessian, "x.ln().sum_all()");
    let e = sparse_hessian_into_log_total(&zero, &mut h).unwrap_err();
    assert_derivative_of_ln(&e, hessian, "x.ln().sum_all()");
    // The value form names `ln` itself: ln 0 = -inf comes first.
    let e = value_and_sparse_jacobian_logs(&zero).unwrap_err();
    let (_, _, op, value) = non_finite(&e);
    assert_eq!((op.as_str(), value), ("ln", f64::NEG_INFINITY), "{e}");
    // Off, the infinity comes back.
    rlx::set_debug_nans(false);
    assert!(sparse_jacobian_logs(&zero).unwrap().values()[1].is_infinite());
}

#[test]
fn nth_derivatives_are_checked() {
    let _on = check(true);
    // d³/dx³ ln(x - 1) · 3 = 6 / (x - 1)³.
    assert_eq!(nth_derivative_log_of_shifted(2.0, 3).unwrap(), 6.0);
    let e = nth_derivative_log_of_shifted(1.0, 3).unwrap_err();
    let (function, _, _, _) = non_finite(&e);
    assert_eq!(function, "the derivative of order 3 of `log_of_shifted`");
    let traced = format!("traced at {}", line_of("(x - 1.0).ln() * 3.0"));
    assert!(e.to_string().contains(&traced), "{e}");
    let x = Tensor::from_vec(vec![2.0, 1.0, 3.0], [3]);
    let e = nth_derivative_log_sum(&x, 2).unwrap_err();
    assert_eq!(non_finite(&e).0, "the derivative of order 2 of `log_sum`");
}

#[test]
fn a_plan_the_user_compiled_is_checked() {
    let _on = check(true);
    let x = Tensor::from_vec(vec![2.0, 1.0, 3.0], [3]);
    let exe = rlx::compile(&graph_log_sum(&x).unwrap()).unwrap();
    let fine = Tensor::from_vec(vec![2.0, 4.0, 3.0], [3]);
    assert!(exe.run(&[&fine]).unwrap()[0].to_f64_vec().unwrap()[0].is_finite());
    // `run`, `run_into` and `run_args` all check, naming the node of the
    // graph given to `compile` and the line of the traced function.
    let mut outs = exe.run(&[&fine]).unwrap();
    let errors = [
        exe.run(&[&x]).unwrap_err(),
        exe.run_into(&[&x], &mut outs).unwrap_err(),
        exe.run_args(&[rlx::Arg::Tensor(&x)]).unwrap_err(),
    ];
    for e in &errors {
        let (function, _, op, value) = non_finite(e);
        assert_eq!(
            (function.as_str(), op.as_str()),
            ("a compiled graph", "ln"),
            "{e}"
        );
        assert_eq!(value, f64::NEG_INFINITY);
        let traced = format!("traced at {}", line_of("((x - 1.0).ln() * 2.0"));
        assert!(e.to_string().contains(&traced), "{e}");
    }
    // Off, the run returns what it computed.
    rlx::set_debug_nans(false);
    assert_eq!(
        exe.run(&[&x]).unwrap()[0].to_f64_vec().unwrap()[0],
        f64::NEG_INFINITY
    );
}

/// ln(x - 1) / 2: called inside `outer` (on traced tensors), its nodes are
/// inlined into `outer`'s graph.
#[differentiable]
fn inner(x: &Tensor) -> Tensor {
    (x - 1.0).ln() / 2.0
}

#[differentiable]
fn outer(x: &Tensor) -> Tensor {
    (inner(x) * 4.0).sum_all()
}

#[differentiable]
fn outer_again(x: &Tensor) -> Tensor {
    inner(x).square().sum_all()
}

#[test]
fn nodes_of_a_nested_call_name_the_line_in_its_body() {
    let _on = check(true);
    let x = Tensor::from_vec(vec![2.0, 1.0, 3.0], [3]);
    let body = format!("traced at {}", line_of("(x - 1.0).ln() / 2.0"));
    // `inner` traced inside `outer`, then its cached graph inlined into
    // `outer_again`.
    let e = grad_outer(&x).unwrap_err();
    let (function, _, op, _) = non_finite(&e);
    assert_eq!(
        (function.as_str(), op.as_str()),
        ("the gradient of `outer`", "ln"),
        "{e}"
    );
    assert!(e.to_string().contains(&body), "{e}");
    let e = value_and_grad_outer_again(&x).unwrap_err();
    let (function, _, op, _) = non_finite(&e);
    assert_eq!(function, "the gradient of `outer_again`", "{e}");
    assert_eq!(op, "ln", "{e}");
    assert!(e.to_string().contains(&body), "{e}");
}

/// Σ over the rows: mixes them.
#[differentiable]
fn row_total(x: &Tensor) -> Tensor {
    x.sum(&[0]).square()
}

#[differentiable]
fn per_row(x: &Tensor) -> Tensor {
    x.square() + row_total(x)
}

/// Not a NaN: an error that names a node of the graph (a function that
/// mixes rows has no batch Jacobian) shows the line of the node in the
/// nested function's body.
#[test]
fn graph_errors_name_the_line_in_a_nested_body() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], [2, 2]);
    let e = batch_jacobian_per_row(&x).unwrap_err().to_string();
    assert!(e.contains("mixes rows"), "{e}");
    let body = format!("traced at {}", line_of("x.sum(&[0]).square()"));
    assert!(e.contains(&body), "{e}");
}
/// In a child process (this test run again with `RLX_DEBUG_NANS=1` and
/// nothing else), the environment variable turns the check on.
#[test]
fn the_environment_variable_turns_the_check_on() {
    if std::env::var_os("RLX_DEBUG_NANS_CHILD").is_some() {
        assert!(rlx::debug_nans());
        assert!(grad_log_of_shifted(1.0).is_err());
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "the_environment_variable_turns_the_check_on",
            "--exact",
            "--test-threads=1",
        ])
        .env("RLX_DEBUG_NANS", "1")
        .env("RLX_DEBUG_NANS_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// A function of one small tensor: warm, its companions take the pinned
/// small-tensor path (`Function::run_small`), which the check turns off.
#[differentiable]
fn log_pair(x: &Tensor) -> Tensor {
    (x - 1.0).ln().sum_all() * 2.0
}

#[test]
fn warm_small_tensor_calls_are_checked_when_the_check_is_on() {
    let good = Tensor::from_vec(vec![2.0, 3.0], [2]);
    let bad = Tensor::from_vec(vec![1.0, 3.0], [2]);
    {
        let _off = check(false);
        // Warm calls of this signature: infinities come back unchanged.
        for _ in 0..2 {
            let (v, g) = value_and_grad_log_pair(&bad).unwrap();
            assert_eq!(v.item::<f64>().unwrap(), f64::NEG_INFINITY);
            assert!(g.to_f64_vec().unwrap()[0].is_infinite());
            assert!(grad_log_pair(&good).is_ok());
            assert!(log_pair(&bad).item::<f64>().unwrap().is_infinite());
        }
    }
    let _on = check(true);
    // The same warm signature: every companion and the plain call check.
    let (v, _) = value_and_grad_log_pair(&good).unwrap();
    assert_eq!(v.item::<f64>().unwrap(), 2.0 * 2f64.ln());
    for e in [
        value_and_grad_log_pair(&bad).map(|_| ()).unwrap_err(),
        grad_log_pair(&bad).map(|_| ()).unwrap_err(),
    ] {
        let (_, _, op, value) = non_finite(&e);
        assert_eq!((op.as_str(), value), ("ln", f64::NEG_INFINITY), "{e}");
    }
    // The Hessian's plan does not compute the value: a node of the
    // derivative is named.
    let e = hessian_log_pair(&bad).map(|_| ()).unwrap_err();
    assert!(non_finite(&e).3.is_infinite() || non_finite(&e).3.is_nan());
    let p = std::panic::catch_unwind(|| log_pair(&bad)).unwrap_err();
    let p = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(p.contains("(`ln`) produced -inf"), "{p}");
}

/// Row-wise and long (its per-row Jacobian is a program of a few hundred
/// scalar operations, the kind `batch_jacobian_` runs as an item plan),
/// with a logarithm that is NaN for entries below 2.
#[differentiable]
fn long_rows(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    for _ in 0..6 {
        y = (y.sin() + &y * x).tanh() + x;
    }
    (x - 2.0).ln() * y // LONG_ROWS_LN
}

#[test]
fn a_batch_jacobian_run_per_row_checks_too() {
    let xs: Vec<f64> = (0..64 * 4).map(|i| 2.5 + (i % 7) as f64 * 0.1).collect();
    let mut bad = xs.clone();
    bad[4 * 37 + 2] = 1.5;
    let (good, bad) = (
        Tensor::from_vec(xs, [64, 4]),
        Tensor::from_vec(bad, [64, 4]),
    );
    {
        let _off = check(false);
        let j = batch_jacobian_long_rows(&bad)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        assert!(j.iter().any(|v| v.is_nan()));
        assert!(batch_jacobian_long_rows(&good).is_ok());
    }
    let _on = check(true);
    let j = batch_jacobian_long_rows(&good)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert!(j.iter().all(|v| v.is_finite()));
    let e = batch_jacobian_long_rows(&bad).unwrap_err();
    let (_, _, op, v) = non_finite(&e);
    assert!(op.contains("ln"), "{e}");
    assert!(v.is_nan(), "{e}");
    assert!(e.to_string().contains(&line_of("// LONG_ROWS_LN")), "{e}");
}
