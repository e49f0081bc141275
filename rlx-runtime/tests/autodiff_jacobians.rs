//! Jacobians: analytic in every mode, batched into one execution, and
//! per-item Jacobians (`batch_jacobian`) in forward and reverse mode,
//! through products, reshapes and custom ops; functions that mix rows
//! are refused.

mod common;

use common::*;
use rlx_core::autodiff::{batch_jacobian, custom_op, jacfwd, jacobian, jacrev, jvp};
use rlx_core::{vmap, Graph, NodeId, ReduceOp};

/// R(x) = A x + x³ (element-wise cube): J = A + diag(3x²).
fn residual() -> (Graph, Vec<f64>) {
    let a = vec![2.0, -1.0, 0.5, 0.0, 1.0, 3.0, -2.0, 0.25, 1.5];
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[3]);
    let am = constant(&mut g, a.clone(), &[3, 3]);
    let xc = g.reshape(x, [3, 1]).unwrap();
    let ax = g.matmul(am, xc).unwrap();
    let ax = g.reshape(ax, [3]).unwrap();
    let x3 = g.powi(x, 3).unwrap();
    let r = g.add(ax, x3).unwrap();
    g.set_outputs(vec![r]);
    (g, a)
}

#[test]
fn jacobian_of_nonlinear_residual_is_analytic_in_every_mode() {
    let (g, a) = residual();
    let x = vec![0.5, -1.2, 2.0];
    let mut want = a.clone();
    for i in 0..3 {
        want[i * 3 + i] += 3.0 * x[i] * x[i];
    }
    for (name, j) in [
        ("jacfwd", jacfwd(&g, &[0]).unwrap()),
        ("jacrev", jacrev(&g, &[0]).unwrap()),
        ("jacobian", jacobian(&g, &[0]).unwrap()),
    ] {
        assert_eq!(j.shape(j.outputs()[1]).dims(), &[3, 3], "{name}");
        let out = run(&j, std::slice::from_ref(&x));
        assert_close(&out[1], &want, 1e-12, name);
    }
}

#[test]
fn batched_jacobian_equals_column_by_column() {
    // y = tanh(W x) ⊙ sum(x²) with x [4], W [2, 4]: a [2] output of two inputs.
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4]);
    let w = input(&mut g, "w", &[2, 4]);
    let xc = g.reshape(x, [4, 1]).unwrap();
    let wx = g.matmul(w, xc).unwrap();
    let wx = g.reshape(wx, [2]).unwrap();
    let t = g.tanh(wx).unwrap();
    let x2 = g.square(x).unwrap();
    let s = g.sum_all(x2).unwrap();
    let y = g.mul(t, s).unwrap();
    g.set_outputs(vec![y]);
    let mut rng = Rng::new(3);
    let args = vec![rng.vec(4, -1.0, 1.0), rng.vec(8, -1.0, 1.0)];
    let jg = jvp(&g, &[0, 1]).unwrap();
    for (name, jac) in [
        ("jacfwd", jacfwd(&g, &[0, 1]).unwrap()),
        ("jacrev", jacrev(&g, &[0, 1]).unwrap()),
    ] {
        let out = run(&jac, &args); // one execution
        assert_eq!(jac.shape(jac.outputs()[1]).dims(), &[2, 4]);
        assert_eq!(jac.shape(jac.outputs()[2]).dims(), &[2, 2, 4]);
        for (wi, n) in [(0usize, 4usize), (1, 8)] {
            for col in 0..n {
                let mut t = vec![vec![0.0; 4], vec![0.0; 8]];
                t[wi][col] = 1.0;
                let ydot = run(&jg, &[args.clone(), t].concat()).remove(1);
                for (r, yd) in ydot.iter().enumerate() {
                    let got = out[1 + wi][r * n + col];
                    assert!((got - yd).abs() < 1e-12, "{name}: J{wi}[{r},{col}]");
                }
            }
        }
    }
}

/// Rows [x0, x1] ↦ [sin(x0) x1 w, x0² + e^{x1}] for a shared weight `w`.
fn per_row(g: &mut Graph, x: NodeId, w: NodeId) -> NodeId {
    let x0 = g.slice_range(x, 0..1, 1).unwrap();
    let x1 = g.slice_range(x, 1..2, 1).unwrap();
    let s = g.sin(x0).unwrap();
    let a = g.mul(s, x1).unwrap();
    let a = g.mul(a, w).unwrap();
    let b0 = g.square(x0).unwrap();
    let b1 = g.exp(x1).unwrap();
    let b = g.add(b0, b1).unwrap();
    g.concat(&[a, b], 1).unwrap()
}

#[test]
fn batch_jacobian_gives_per_item_jacobians() {
    let n = 5;
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2]);
    let w = input(&mut g, "w", &[]);
    let y = per_row(&mut g, x, w);
    g.set_outputs(vec![y]);
    let bj = batch_jacobian(&g, &[0]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 2, 2]);
    let mut rng = Rng::new(11);
    let xs = rng.vec(n * 2, -1.0, 1.0);
    let wv = 1.7;
    let out = run(&bj, &[xs.clone(), vec![wv]]);
    for i in 0..n {
        let (a, b) = (xs[2 * i], xs[2 * i + 1]);
        let want = [a.cos() * b * wv, a.sin() * wv, 2.0 * a, b.exp()];
        assert_close(
            &out[1][4 * i..4 * i + 4],
            &want,
            1e-12,
            &format!("item {i}"),
        );
    }
}

/// Items of at most 8 inputs get their Jacobians from one JVP per basis
/// vector, each seeded with a constant unit vector that the cleanup folds
/// away. The values equal those of the JVP batched over the basis with the
/// seeds passed as values (nothing folded): folding only leaves out
/// products by 1 and sums with 0, so they compare equal (`==`; only the
/// sign of a zero could differ). Two differentiated inputs and one that is
/// not; also checked against central differences.
#[test]
fn batch_jacobian_with_folded_seeds_equals_the_batched_jvp() {
    let n = 6;
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2]);
    let y = input(&mut g, "y", &[n, 1]);
    let w = input(&mut g, "w", &[]);
    let a = per_row(&mut g, x, w);
    let x0 = g.slice_range(x, 0..1, 1).unwrap();
    let e = g.exp(y).unwrap();
    let b = g.mul(e, x0).unwrap();
    let c = g.sin(b).unwrap();
    let out = g.concat(&[a, c], 1).unwrap();
    g.set_outputs(vec![out]);
    let bj = batch_jacobian(&g, &[0, 1]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 3, 2]);
    assert_eq!(bj.shape(bj.outputs()[2]).dims(), &[n, 3, 1]);
    let mut rng = Rng::new(16);
    let args = vec![rng.vec(2 * n, -1.0, 1.0), rng.vec(n, -1.0, 1.0), vec![0.7]];
    let got = run(&bj, &args);
    // The batched reference: basis vector j seeds input element j of
    // every item ([3, n, 2] for x, [3, n, 1] for y).
    let batched = vmap(
        &jvp(&g, &[0, 1]).unwrap(),
        &[false, false, false, true, true],
        3,
    )
    .unwrap();
    let (mut tx, mut ty) = (vec![0.0; 3 * n * 2], vec![0.0; 3 * n]);
    for i in 0..n {
        tx[i * 2] = 1.0;
        tx[(n + i) * 2 + 1] = 1.0;
        ty[2 * n + i] = 1.0;
    }
    let refs = run(&batched, &[args.clone(), vec![tx, ty]].concat());
    let dout = refs.last().unwrap(); // [3, n, 3]
    assert_eq!(dout.len(), 3 * n * 3);
    for i in 0..n {
        for r in 0..3 {
            for j in 0..3 {
                let want = dout[(j * n + i) * 3 + r];
                let have = match j {
                    0 | 1 => got[1][(i * 3 + r) * 2 + j],
                    _ => got[2][i * 3 + r],
                };
                assert!(have == want, "item {i}: J[{r}, {j}] {have} vs {want}");
            }
        }
    }
    for j in 0..3 {
        let mut v = vec![vec![0.0; 2 * n], vec![0.0; n], vec![]];
        for i in 0..n {
            match j {
                0 | 1 => v[0][2 * i + j] = 1.0,
                _ => v[1][i] = 1.0,
            }
        }
        let d = fd(&g, &args, &v, 0, 1e-6);
        for i in 0..n {
            for r in 0..3 {
                let have = match j {
                    0 | 1 => got[1][(i * 3 + r) * 2 + j],
                    _ => got[2][i * 3 + r],
                };
                assert_close(&[have], &[d[i * 3 + r]], 1e-8, "central difference");
            }
        }
    }
}

#[test]
fn batch_jacobian_in_reverse_mode_matches_the_full_jacobian() {
    // Items of 6 inputs (x: [2, 2] and y: [2] per item) and 2 outputs:
    // fewer outputs than inputs, so 2 cotangents instead of 6 tangents.
    // Each item's block must equal the diagonal block of the full Jacobian,
    // whose other blocks are zero.
    let n = 4;
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2, 2]);
    let y = input(&mut g, "y", &[n, 2]);
    let xs = g.sum(x, &[2]).unwrap(); // [n, 2]
    let e = g.exp(xs).unwrap();
    let p = g.mul(e, y).unwrap();
    let s = g.sin(y).unwrap();
    let xf = g.reshape(x, [n, 4]).unwrap();
    let q = g.square(xf).unwrap();
    let q = g.sum(q, &[1]).unwrap();
    let q = g.reshape(q, [n, 1]).unwrap();
    let t = g.mul(s, q).unwrap();
    let out = g.add(p, t).unwrap(); // [n, 2]
    g.set_outputs(vec![out]);
    let bj = batch_jacobian(&g, &[0, 1]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 2, 2, 2]);
    assert_eq!(bj.shape(bj.outputs()[2]).dims(), &[n, 2, 2]);
    let mut rng = Rng::new(5);
    let ins = vec![rng.vec(n * 4, -1.0, 1.0), rng.vec(n * 2, -1.0, 1.0)];
    let got = run(&bj, &ins);
    let full = run(&jacfwd(&g, &[0, 1]).unwrap(), &ins);
    assert_close(&got[0], &full[0], 0.0, "value");
    // full[1]: [n, 2, n, 2, 2]; full[2]: [n, 2, n, 2].
    for (w, k) in [(1, 4), (2, 2)] {
        for i in 0..n {
            for o in 0..2 {
                for j in 0..n {
                    let block = &full[w][((i * 2 + o) * n + j) * k..][..k];
                    if i == j {
                        let mine = &got[w][(i * 2 + o) * k..][..k];
                        assert_close(
                            mine,
                            block,
                            1e-14,
                            &format!("input {w}, item {i}, output {o}"),
                        );
                    } else {
                        assert!(block.iter().all(|&v| v == 0.0));
                    }
                }
            }
        }
    }
}

#[test]
fn batch_jacobian_rejects_functions_that_mix_rows() {
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let m = g.reduce(ReduceOp::Mean, x, &[0]).unwrap();
    let y = g.sub(x, m).unwrap();
    g.set_outputs(vec![y]);
    let e = batch_jacobian(&g, &[0]).unwrap_err().to_string();
    assert!(e.contains("mixes rows") && e.contains("mean"), "{e}");
    // a row mixing that carries no tangent is fine: stop_gradient of the mean
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let m = g.reduce(ReduceOp::Mean, x, &[0]).unwrap();
    let m = g.stop_gradient(m).unwrap();
    let y = g.sub(x, m).unwrap();
    g.set_outputs(vec![y]);
    let bj = batch_jacobian(&g, &[0]).unwrap();
    let out = run(&bj, &[vec![1.0; 8]]);
    let eye = [1.0, 0.0, 0.0, 1.0];
    assert_close(&out[1], &eye.repeat(4), 0.0, "identity per item");
    // matmul contracting axis 0 and transposes mix rows too
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let t = g.transpose(x, &[1, 0]).unwrap();
    let p = g.matmul(t, x).unwrap();
    let s = g.sum(p, &[1]).unwrap();
    let y = g.reshape(s, [2, 1]).unwrap();
    g.set_outputs(vec![y]);
    assert!(batch_jacobian(&g, &[0]).is_err());
}

#[test]
fn batch_jacobian_through_matmul_reshape_and_custom_ops() {
    // rows: y_i = tanh(x_i W) through a custom op, x [N, 2], W [2, 3] shared
    let n = 4;
    let mut f = Graph::new();
    let a = input(&mut f, "a", &[n, 3]);
    let t = f.tanh(a).unwrap();
    f.set_outputs(vec![t]);
    let op = custom_op("tanh_rows", f, None, None).unwrap();
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[n, 2]);
    let w = input(&mut g, "w", &[2, 3]);
    let xr = g.reshape(x, [n, 1, 2]).unwrap();
    let xr = g.reshape(xr, [n, 2]).unwrap();
    let z = g.matmul(xr, w).unwrap();
    let y = g.custom(op, &[z]).unwrap();
    let y = g.softmax(y, 1).unwrap();
    g.set_outputs(vec![y]);
    let bj = batch_jacobian(&g, &[0]).unwrap();
    assert_eq!(bj.shape(bj.outputs()[1]).dims(), &[n, 3, 2]);
    let mut rng = Rng::new(21);
    let xs = rng.vec(n * 2, -1.0, 1.0);
    let ws = rng.vec(6, -1.0, 1.0);
    let out = run(&bj, &[xs.clone(), ws.clone()]);
    // against the full Jacobian [N, 3, N, 2]: its diagonal blocks
    let full = run(&jacobian(&g, &[0]).unwrap(), &[xs, ws]);
    for i in 0..n {
        for r in 0..3 {
            for c in 0..2 {
                let want = full[1][((i * 3 + r) * n + i) * 2 + c];
                let got = out[1][(i * 3 + r) * 2 + c];
                assert!((got - want).abs() < 1e-12, "item {i} [{r},{c}]");
            }
        }
    }
    // a reshape that moves elements across rows is rejected
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[4, 2]);
    let y = g.reshape(x, [2, 4]).unwrap();
    let y = g.reshape(y, [4, 2]).unwrap();
    g.set_outputs(vec![y]);
    let e = batch_jacobian(&g, &[0]).unwrap_err().to_string();
    assert!(e.contains("reshape"), "{e}");
}
