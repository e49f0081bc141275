//! Errors met while a companion's compiled plan runs (an index out of
//! range in a `gather` or `scatter_add`, a singular `solve`) name the
//! line of the user's code that traced the failing op, as errors met
//! while tracing do; a panic while tracing becomes an `Err` naming the
//! line that panicked and its message, without the default panic hook's
//! report on stderr.

use rlx::prelude::*;

/// The `file:line:` of the line of this file that holds `marker` (in a
/// trailing comment), as an error's `-->` names it.
fn at(marker: &str) -> String {
    let src = include_str!("run_error_lines.rs");
    let i = src
        .lines()
        .position(|l| l.ends_with(&format!("// {marker}")))
        .expect("marker in this file");
    format!("{}:{}:", file!(), i + 1)
}

#[differentiable(wrt(x))]
fn pick(x: &Tensor, idx: &Tensor) -> f64 {
    let y = x.square();
    let g = y.gather(idx, 0); // GATHER
    g.sum_all()
}

#[differentiable(wrt(x))]
fn spread(x: &Tensor, idx: &Tensor) -> Tensor {
    let base = x * 0.0;
    base.scatter_add(idx, &x.exp(), 0) // SCATTER
}

#[differentiable(wrt(a))]
fn solved(a: &Tensor, b: &Tensor) -> f64 {
    let a2 = a * 2.0;
    let x = a2.solve(b); // SOLVE
    x.square().sum_all()
}

#[differentiable(wrt(x))]
fn looped(x: &Tensor, idx: &Tensor) -> f64 {
    let y = rlx::iterate(x.clone(), 3, |c| {
        let picked = c.gather(idx, 0); // LOOP_GATHER
        &c + &picked
    });
    y.sum_all()
}

#[test]
fn a_gather_index_out_of_range_names_the_users_line() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let idx = Tensor::from_slice(&[0i64, 7], [2]);
    for e in [
        grad_pick(&x, &idx).unwrap_err(),
        value_and_grad_pick(&x, &idx).unwrap_err(),
        jacobian_pick(&x, &idx).unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(msg.contains("index 7 is out of range"), "{msg}");
        assert!(msg.contains(&format!("--> {}", at("GATHER"))), "{msg}");
        // The cause is still the kernel's error.
        assert!(
            matches!(e.root(), rlx::Error::IndexOutOfRange { .. }),
            "{e:?}"
        );
    }
}

#[test]
fn a_scatter_add_index_out_of_range_names_the_users_line() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let idx = Tensor::from_slice(&[0i64, 1, -9], [3]);
    let e = jvp_spread(&x, &idx, &x).unwrap_err();
    assert!(
        e.to_string().contains(&format!("--> {}", at("SCATTER"))),
        "{e}"
    );
    let ct = Tensor::from_slice(&[1.0f64; 3], [3]);
    let e = vjp_spread(&x, &idx, &ct).unwrap_err();
    assert!(
        e.to_string().contains(&format!("--> {}", at("SCATTER"))),
        "{e}"
    );
}

#[test]
fn a_singular_solve_names_the_users_line() {
    let a = Tensor::from_slice(&[1.0f64, 2.0, 2.0, 4.0], [2, 2]);
    let b = Tensor::from_slice(&[1.0f64, 1.0], [2, 1]);
    let e = grad_solved(&a, &b).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("singular"), "{msg}");
    assert!(msg.contains(&format!("--> {}", at("SOLVE"))), "{msg}");
    assert!(
        matches!(e.root(), rlx::Error::SingularMatrix { .. }),
        "{e:?}"
    );
}

#[test]
fn an_error_in_a_loop_body_names_the_bodys_line() {
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let idx = Tensor::from_slice(&[2i64, 3, 0], [3]);
    let e = grad_looped(&x, &idx).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("--> {}", at("LOOP_GATHER"))), "{msg}");
}

#[test]
fn a_graph_traced_and_compiled_by_hand_names_the_line_too() {
    use rlx::trace::Trace;
    let t = Trace::enter();
    let x = t.input("x", [3], DType::F64);
    let idx = t.input("idx", [1], DType::I64);
    let y = x.gather(&idx, 0); // HAND
    let g = t.finish(&[&y]).unwrap();
    let exe = rlx::compile(&g).unwrap();
    let xs = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let bad = Tensor::from_slice(&[3i64], [1]);
    let e = exe.run(&[&xs, &bad]).unwrap_err();
    assert!(
        e.to_string().contains(&format!("--> {}", at("HAND"))),
        "{e}"
    );
    // A graph built without tracing has no lines: the node alone.
    let mut h = rlx::Graph::new();
    let x = h.input("x", [3], DType::F64);
    let i = h.input("idx", [1], DType::I64);
    let y = h.gather(x, i, 0).unwrap();
    h.set_outputs(vec![y]);
    let e = rlx::compile(&h).unwrap().run(&[&xs, &bad]).unwrap_err();
    assert!(!e.to_string().contains("-->"), "{e}");
    assert!(e.to_string().contains("while running node"), "{e}");
}

/// Row-wise: each row of `x` gathered by `idx` (shared by every row).
#[differentiable(wrt(x))]
fn rows_picked(x: &Tensor, idx: &Tensor) -> Tensor {
    let y = x.sin() * x;
    y.gather(idx, 1) // ROW_GATHER
}

/// Row-wise and all-`F64`: the form whose `batch_jacobian_` may run as an
/// item plan (one scalarised row per item).
#[differentiable(wrt(x))]
fn rows_smooth(x: &Tensor) -> Tensor {
    let y = x.sin() * x; // ROW_SMOOTH
    y.exp()
}

#[test]
fn a_batch_jacobian_error_names_the_users_line() {
    let xs = Tensor::from_slice(&[0.1f64, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3]);
    let bad = Tensor::from_slice(&[0i64, 5], [2]);
    let e = batch_jacobian_rows_picked(&xs, &bad).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("index 5 is out of range"), "{msg}");
    assert!(msg.contains(&format!("--> {}", at("ROW_GATHER"))), "{msg}");
    // A wrong-shaped batch to the item-plan form names the caller's line
    // (this call) and the shapes.
    let j = batch_jacobian_rows_smooth(&xs).unwrap();
    assert_eq!(j.shape().dims(), &[2, 3, 3]);
    let v = j.to_vec::<f64>().unwrap();
    let x0 = 0.1f64;
    let d = (x0.cos() * x0 + x0.sin()) * (x0.sin() * x0).exp();
    assert!((v[0] - d).abs() < 1e-12, "{} vs {d}", v[0]);
    assert_eq!(v[1], 0.0);
}
