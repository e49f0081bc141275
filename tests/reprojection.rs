//! The reprojection residual of `benches/reprojection.rs`: the rlx
//! objective against the hand-written one, and its per-observation
//! Jacobians (`batch_jacobian_`) against hand-written forward mode and
//! central finite differences in f64, including the small-angle branch.

#[path = "../benches/common/reprojection.rs"]
mod reprojection;

use reprojection::{
    batch_jacobian_reprojection, graph_reprojection, jacobian_reprojection, jacobians_by_hand,
    observations, reprojection, residual, residuals_by_hand, INPUTS, OUTPUTS,
};
use rlx::prelude::*;
use rlx::runtime::compile::{compile_items, compile_with, Options};

fn assert_close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |a, w| a.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * (1.0 + w.abs()).max(1e-3 * scale),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// Observations with the camera of rows 0 and 5 not rotated (θ = 0: the
/// first-order branch of the rotation).
fn problem(n: usize) -> Vec<f64> {
    let mut x = observations(n);
    for row in [0, 5] {
        x[row * INPUTS..row * INPUTS + 3].fill(0.0);
    }
    x
}

/// The batched Jacobians of the rows `x` (`n` of them), flat.
fn batch_jacobians(x: &[f64], n: usize) -> Vec<f64> {
    batch_jacobian_reprojection(&Tensor::from_slice(x, [n, INPUTS]))
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

/// Asserts that `got` and `want` hold the same shapes and bits.
fn assert_same_bits(got: &[Tensor], want: &[Tensor], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: outputs");
    for (k, (a, b)) in got.iter().zip(want).enumerate() {
        assert_eq!(a.shape(), b.shape(), "{what}: output {k}");
        let (a, b) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            assert_eq!(
                p.to_bits(),
                q.to_bits(),
                "{what}: output {k}[{i}]: {p} vs {q}"
            );
        }
    }
}

#[test]
fn the_objective_matches_the_hand_written_residual() {
    let n = 37;
    let x = problem(n);
    let got = reprojection(&Tensor::from_slice(&x, [n, INPUTS]));
    assert_eq!(got.shape().dims(), &[n, OUTPUTS]);
    let mut want = vec![0.0; n * OUTPUTS];
    residuals_by_hand(&x, &mut want);
    assert_close("residuals", &got.to_vec::<f64>().unwrap(), &want, 1e-12);
}

#[test]
fn batch_jacobians_match_forward_mode_and_finite_differences() {
    let n = 37;
    let x = problem(n);
    let jac = batch_jacobian_reprojection(&Tensor::from_slice(&x, [n, INPUTS])).unwrap();
    assert_eq!(jac.shape().dims(), &[n, OUTPUTS, INPUTS]);
    let jac = jac.to_vec::<f64>().unwrap();
    assert!(jac.iter().all(|v| v.is_finite()), "a non-finite derivative");

    let mut hand = vec![0.0; n * OUTPUTS * INPUTS];
    jacobians_by_hand(&x, &mut hand);
    assert_close("jacobian vs forward mode", &jac, &hand, 1e-10);

    // Central differences of the hand-written f64 residual, input by input.
    let mut fd = vec![0.0; n * OUTPUTS * INPUTS];
    for (i, xi) in x.chunks_exact(INPUTS).enumerate() {
        for k in 0..INPUTS {
            let h = 1e-6 * (1.0 + xi[k].abs());
            let at = |s: f64| {
                let mut p: [f64; INPUTS] = xi.try_into().unwrap();
                p[k] += s;
                residual(&p)
            };
            let (hi, lo) = (at(h), at(-h));
            for o in 0..OUTPUTS {
                fd[(i * OUTPUTS + o) * INPUTS + k] = (hi[o] - lo[o]) / (2.0 * h);
            }
        }
    }
    assert_close("jacobian vs finite differences", &jac, &fd, 1e-5);
}

#[test]
fn batch_jacobians_equal_per_observation_jacobians() {
    // `batch_jacobian_` runs one observation's Jacobian program per row
    // (an item plan); `jacobian_` of each row alone is a separate plan.
    let n = 12;
    let x = problem(n);
    let all = batch_jacobians(&x, n);
    let m = OUTPUTS * INPUTS;
    for (i, row) in x.chunks_exact(INPUTS).enumerate() {
        let one = jacobian_reprojection(&Tensor::from_slice(row, [1, INPUTS])).unwrap();
        assert_eq!(one.shape().dims(), &[1, OUTPUTS, 1, INPUTS]);
        let one = one.to_vec::<f64>().unwrap();
        assert_close(&format!("row {i}"), &all[i * m..(i + 1) * m], &one, 1e-13);
    }
}

#[test]
fn the_item_plan_equals_the_general_plan_bit_for_bit() {
    // The companion's plan: the Jacobian of one observation, compiled once
    // and run over the rows. Same bits as the general plan of the batched
    // Jacobian (fused loops over all rows), with and without native code,
    // on 1 to 4 threads, including the small-angle rows.
    let n = 300;
    let x = Tensor::from_slice(&problem(n), [n, INPUTS]);
    let g = graph_reprojection(&x).unwrap();
    let jac = rlx::autodiff::batch_jacobian(&g, &[0]).unwrap();
    let mut item = rlx::core::vmap::unbatch(&g, n).expect("rows are independent");
    assert_eq!(item.batched, [true]);
    item.graph = rlx::autodiff::batch_jacobian(&item.graph, &[0]).unwrap();
    let general = compile_with(&jac, &Options::general()).unwrap();
    let want = general.run(&[&x]).unwrap();
    for jit in [true, false] {
        let options = Options {
            jit,
            ..Options::default()
        };
        let exe = compile_items(&jac, &item, &options)
            .unwrap()
            .expect("an item plan");
        let stats = exe.stats();
        assert_eq!(stats.item_runs, n, "{stats:?}");
        assert_eq!((stats.steps, stats.buffers), (1, 0), "{stats:?}");
        assert_eq!(stats.native_regions, usize::from(jit), "{stats:?}");
        for threads in 1..=4 {
            rlx::runtime::set_num_threads(threads);
            let got = exe.run(&[&x]).unwrap();
            assert_same_bits(&got, &want, &format!("jit {jit}, {threads} threads"));
        }
        rlx::runtime::set_num_threads(0);
    }
}

#[test]
fn one_observation_and_a_large_batch_agree_row_by_row() {
    // The same row alone and inside a batch of 1000 gives the same Jacobian.
    let n = 1000;
    let x = problem(n);
    let all = batch_jacobians(&x, n);
    for i in [0, 1, 5, 999] {
        let one = batch_jacobian_reprojection(&Tensor::from_slice(
            &x[i * INPUTS..(i + 1) * INPUTS],
            [1, INPUTS],
        ))
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
        let m = OUTPUTS * INPUTS;
        assert_close("row", &all[i * m..(i + 1) * m], &one, 1e-14);
    }
}

#[test]
fn ten_observations_run_as_one_scalar_region_equal_to_the_general_plan() {
    // At 10 observations every value but the Jacobian's assembly has at
    // most 30 elements: one region of small values, lowered element by
    // element, one connected component per observation (the region's code
    // computes one observation after another). Same bits as the general
    // plan of fused loops, with and without native code.
    let n = 10;
    let x = Tensor::from_slice(&problem(n), [n, INPUTS]);
    let g = rlx::autodiff::batch_jacobian(&graph_reprojection(&x).unwrap(), &[0]).unwrap();
    let general = compile_with(&g, &Options::general()).unwrap();
    assert_eq!(general.stats().small_regions, 0);
    let want = general.run(&[&x]).unwrap();
    for jit in [true, false] {
        let exe = compile_with(
            &g,
            &Options {
                jit,
                ..Options::default()
            },
        )
        .unwrap();
        let stats = exe.stats();
        assert_eq!(stats.small_regions, 1, "{stats:?}");
        assert_eq!(
            stats.steps, 2,
            "the region and the Jacobian's assembly: {stats:?}"
        );
        let got = exe.run(&[&x]).unwrap();
        assert_same_bits(&got, &want, &format!("jit {jit}"));
    }
}

#[test]
fn the_batched_jacobian_graph_is_made_when_a_trace_or_the_nan_check_needs_it() {
    // The companion's plan runs one observation's Jacobian per row and
    // transforms the batch only when something needs the batched graph:
    // inlining the companion into a trace, or naming the node of a
    // non-finite result.
    let n = 40;
    let x = problem(n);
    let xt = Tensor::from_slice(&x, [n, INPUTS]);
    let direct = batch_jacobian_reprojection(&xt).unwrap();
    // Inlined into a trace (a new signature first, then the warm one).
    for _ in 0..2 {
        let t = rlx::trace::Trace::enter();
        let xin = t.input("x", [n, INPUTS], DType::F64);
        let j = batch_jacobian_reprojection(&xin).unwrap();
        let g = t.finish(&[&j]).unwrap();
        let traced = rlx::compile(&g).unwrap().run(&[&xt]).unwrap();
        assert_close(
            "traced",
            &traced[0].to_vec::<f64>().unwrap(),
            &direct.to_vec::<f64>().unwrap(),
            1e-13,
        );
    }
    // A NaN in a row: the check names a node of the batched graph.
    let mut bad = x.clone();
    bad[3 * INPUTS + 9] = f64::NAN;
    let bad = Tensor::from_slice(&bad, [n, INPUTS]);
    rlx::set_debug_nans(true);
    let err = batch_jacobian_reprojection(&bad);
    rlx::set_debug_nans(false);
    let err = err.expect_err("a NaN in the results");
    assert!(matches!(err.root(), rlx::Error::NonFinite(_)), "{err}");
    // Without the check, the same call computes (a NaN row, the others as before).
    let got = batch_jacobian_reprojection(&bad)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let m = OUTPUTS * INPUTS;
    assert!(got[3 * m..4 * m].iter().any(|v| v.is_nan()));
    let want = direct.to_vec::<f64>().unwrap();
    assert_eq!(&got[..3 * m], &want[..3 * m]);
}
