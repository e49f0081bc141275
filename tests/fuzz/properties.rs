//! Properties of random graphs: compiled plans, the interpreter and the
//! naive reference agree; for smooth `f64` graphs every derivative
//! transform agrees with central finite differences and with the others.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rlx::compile::{compile_with, Options};
use rlx::runtime::interpret;
use rlx::{autodiff, DType, Graph, Literal, Tensor};

use crate::common;
use crate::compare::{all_close, blocks_times, close, dot, Res};
use crate::graphs::{build, recipe, Recipe};

/// Finite-difference step (central differences in `f64`).
const H: f64 = 1e-5;

/// Compiles `g` (native scalar code or not) and runs it; outputs as `f64`.
fn run(g: &Graph, inputs: &[Tensor], jit: bool) -> Result<Vec<Vec<f64>>, TestCaseError> {
    let exe = compile_with(
        g,
        &Options {
            jit,
            ..Options::default()
        },
    )
    .map_err(|e| TestCaseError::fail(format!("a valid graph must compile: {e}\n{g}")))?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let outs = exe
        .run(&refs)
        .map_err(|e| TestCaseError::fail(format!("run failed: {e}\n{g}")))?;
    Ok(outs.iter().map(|t| t.to_f64_vec().unwrap()).collect())
}

fn values(shape: &[usize], seed: u64) -> Vec<f64> {
    common::values(shape.iter().product(), seed, -2.0, 2.0)
}

/// `x + t v`, input by input.
fn shifted(xs: &[Vec<f64>], vs: &[Vec<f64>], t: f64, g: &Graph, dt: DType) -> Vec<Tensor> {
    xs.iter()
        .zip(vs)
        .zip(g.inputs())
        .map(|((x, v), inp)| {
            let s: Vec<f64> = x.iter().zip(v).map(|(a, b)| a + t * b).collect();
            common::tensor(&s, g.shape(inp.node).dims(), dt)
        })
        .collect()
}

/// Runs one recipe through every check. Returns whether the derivative
/// checks ran.
pub fn check(r: &Recipe) -> Result<bool, TestCaseError> {
    crate::progress(r);
    let built = build(r);
    let g = &built.graph;
    g.verify()
        .map_err(|e| TestCaseError::fail(format!("the builder made an invalid graph: {e}")))?;
    let dt = r.dtype;
    let xs: Vec<Vec<f64>> = g
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, inp)| values(g.shape(inp.node).dims(), r.seed.wrapping_add(i as u64)))
        .collect();
    let inputs: Vec<Tensor> = xs
        .iter()
        .zip(g.inputs())
        .map(|(x, inp)| common::tensor(x, g.shape(inp.node).dims(), dt))
        .collect();
    let jit = r.seed % 2 == 0;
    let compiled = run(g, &inputs, jit)?;
    wrong_inputs(g, &inputs)?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let interpreted: Vec<Vec<f64>> = interpret(g, &refs)
        .map_err(|e| TestCaseError::fail(format!("interpret failed: {e}\n{g}")))?
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect();
    let reference: Vec<Vec<f64>> = common::reference::eval_tensors(g, &refs)
        .into_iter()
        .map(|v| v.data)
        .collect();
    let (rtol_run, rtol_ref) = if dt == DType::F64 {
        (1e-12, 1e-9)
    } else {
        (1e-5, 1e-3)
    };
    for (k, ((c, i), n)) in compiled
        .iter()
        .zip(&interpreted)
        .zip(&reference)
        .enumerate()
    {
        all_close(
            c,
            i,
            rtol_run,
            &format!("output {k}: compiled vs interpreted\n{g}"),
        )?;
        all_close(
            c,
            n,
            rtol_ref,
            &format!("output {k}: compiled vs reference\n{g}"),
        )?;
    }
    let o = g.outputs()[0];
    let differentiable = r.smooth
        && dt == DType::F64
        && g.dtype(o) == DType::F64
        && compiled.iter().flatten().all(|v| v.is_finite());
    if differentiable {
        derivatives(g, &xs, r.seed, jit)?;
    }
    Ok(differentiable)
}

/// A compiled graph and the interpreter given one input too few, or an
/// input of another shape or dtype, return `Err`.
fn wrong_inputs(g: &Graph, inputs: &[Tensor]) -> Res {
    let exe = compile_with(
        g,
        &Options {
            jit: false,
            ..Options::default()
        },
    )
    .expect("compiled once already");
    let mut refs: Vec<&Tensor> = inputs.iter().collect();
    let last = refs.pop().expect("at least one input");
    prop_assert!(exe.run(&refs).is_err() && interpret(g, &refs).is_err());
    let other = if last.dtype() == DType::F64 {
        last.cast(DType::F32)
    } else {
        Tensor::zeros([last.numel() + 1], last.dtype())
    };
    refs.push(&other);
    prop_assert!(exe.run(&refs).is_err() && interpret(g, &refs).is_err());
    Ok(())
}

/// `sum(out0 * w)` for fixed random weights `w`: a scalar whose gradient
/// sees every element of output 0.
fn scalarized(g: &Graph, seed: u64) -> Graph {
    let mut s = g.clone();
    let o = g.outputs()[0];
    let shape = g.shape(o).clone();
    let w = common::values(shape.numel(), seed ^ 0xabc, -1.0, 1.0);
    let c = s
        .constant(Literal::F64(w.into()), shape, DType::F64)
        .unwrap();
    let m = s.mul(o, c).unwrap();
    let t = s.sum_all(m).unwrap();
    s.set_outputs(vec![t]);
    s
}

/// Every derivative transform of a smooth `f64` graph, checked.
fn derivatives(g: &Graph, xs: &[Vec<f64>], seed: u64, jit: bool) -> Res {
    let dt = DType::F64;
    let n = g.inputs().len();
    let all: Vec<usize> = (0..n).collect();
    let m = g.outputs().len();
    let shapes: Vec<Vec<usize>> = g
        .inputs()
        .iter()
        .map(|i| g.shape(i.node).dims().to_vec())
        .collect();
    let vs: Vec<Vec<f64>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| values(s, seed ^ (77 + i as u64)))
        .collect();
    let at = |t: f64| shifted(xs, vs.as_slice(), t, g, dt);
    let tensors = |vals: &[Vec<f64>]| -> Vec<Tensor> {
        vals.iter()
            .zip(&shapes)
            .map(|(v, s)| common::tensor(v, s, dt))
            .collect()
    };
    let fail = |what: &str, e: rlx::Error| TestCaseError::fail(format!("{what} failed: {e}\n{g}"));

    // JVP against finite differences of output 0.
    let jg = autodiff::jvp(g, &all).map_err(|e| fail("jvp", e))?;
    let mut args = at(0.0);
    args.extend(tensors(&vs));
    let jv = run(&jg, &args, jit)?;
    let plus = run(g, &at(H), jit)?;
    let minus = run(g, &at(-H), jit)?;
    let fd: Vec<f64> = plus[0]
        .iter()
        .zip(&minus[0])
        .map(|(p, q)| (p - q) / (2.0 * H))
        .collect();
    all_close(
        &jv[m],
        &fd,
        1e-5,
        &format!("jvp vs finite differences\n{g}"),
    )?;

    // VJP: <u, J v> = <Jᵀ u, v>.
    let vg = autodiff::vjp(g, &all).map_err(|e| fail("vjp", e))?;
    let u = common::values(jv[m].len(), seed ^ 0x77, -1.0, 1.0);
    let mut args = at(0.0);
    args.push(common::tensor(&u, g.shape(g.outputs()[0]).dims(), dt));
    let bars = run(&vg, &args, jit)?;
    let lhs = dot(&u, &jv[m]);
    let rhs: f64 = (0..n).map(|i| dot(&bars[m + i], &vs[i])).sum();
    prop_assert!(
        close(lhs, rhs, 1e-9),
        "<u, Jv> = {} but <Jᵀu, v> = {}\n{}",
        lhs,
        rhs,
        g
    );

    // Jacobian (forward or reverse, as the transform picks) times v.
    let jac = autodiff::jacobian(g, &all).map_err(|e| fail("jacobian", e))?;
    let blocks = run(&jac, &at(0.0), jit)?;
    let jv_from_j = blocks_times(&blocks[m..], &vs, jv[m].len())?;
    all_close(&jv_from_j, &jv[m], 1e-9, &format!("J v vs jvp\n{g}"))?;

    // Gradient and Hessian-vector product of a scalarization.
    let s = scalarized(g, seed);
    let gg = autodiff::grad(&s, &all).map_err(|e| fail("grad", e))?;
    let grads = run(&gg, &at(0.0), jit)?;
    let fs = |t: f64| run(&s, &at(t), jit).map(|o| o[0][0]);
    let fd = (fs(H)? - fs(-H)?) / (2.0 * H);
    let ad: f64 = (0..n).map(|i| dot(&grads[1 + i], &vs[i])).sum();
    prop_assert!(
        close(ad, fd, 1e-5),
        "grad·v = {} but finite differences give {}\n{}",
        ad,
        fd,
        g
    );

    let hg = autodiff::hvp(&s, &all).map_err(|e| fail("hvp", e))?;
    let mut args = at(0.0);
    args.extend(tensors(&vs));
    let hv = run(&hg, &args, jit)?;
    let gp = run(&gg, &at(H), jit)?;
    let gm = run(&gg, &at(-H), jit)?;
    for i in 0..n {
        let fd: Vec<f64> = gp[1 + i]
            .iter()
            .zip(&gm[1 + i])
            .map(|(a, b)| (a - b) / (2.0 * H))
            .collect();
        all_close(
            &hv[1 + i],
            &fd,
            1e-4,
            &format!("hvp input {i} vs finite differences\n{g}"),
        )?;
    }
    Ok(())
}

/// The random-graph property over `cases` recipes; returns (cases, with
/// derivative checks, builder refusals).
pub fn run_graphs(cases: u32) -> (u32, u32, usize) {
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
    let (done, derived, refused) = (AtomicU32::new(0), AtomicU32::new(0), AtomicUsize::new(0));
    let mut runner = crate::runner(cases, 1);
    let result = runner.run(&recipe(), |r| {
        let d = check(&r)?;
        done.fetch_add(1, Ordering::Relaxed);
        derived.fetch_add(d as u32, Ordering::Relaxed);
        refused.fetch_add(build(&r).rejected, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (
        done.into_inner(),
        derived.into_inner(),
        refused.into_inner(),
    )
}

/// Hostile graphs (inputs and constants with huge dimensions): building,
/// verifying, every transform and compilation return `Ok` or `Err`, never
/// panic or abort; a size error is [`rlx::Error::TooLarge`] or
/// [`rlx::Error::OutOfMemory`]. Graphs whose every value is small are
/// also run.
pub fn check_hostile(r: &Recipe) -> Res {
    crate::progress(r);
    let g = build(r).graph;
    let sized = |e: &rlx::Error| {
        matches!(
            e.root(),
            rlx::Error::TooLarge { .. } | rlx::Error::OutOfMemory { .. }
        ) || matches!(e, rlx::Error::InvalidGraph { message, .. } if message.contains("too large"))
    };
    if let Err(e) = g.verify() {
        prop_assert!(sized(&e), "verify: {}", e);
    }
    let n = g.inputs().len();
    let all: Vec<usize> = (0..n).collect();
    let o = g.outputs()[0];
    let mut scalar = g.clone();
    if let Ok(s) = scalar.sum_all(o) {
        scalar.set_outputs(vec![s]);
    }
    let huge = crate::graphs::HUGE[r.seed as usize % 4];
    let batched = vec![true; n];
    let results = [
        autodiff::jvp(&g, &all),
        autodiff::vjp(&g, &all),
        autodiff::jacobian(&g, &all),
        autodiff::batch_jacobian(&g, &all),
        autodiff::grad(&scalar, &all),
        autodiff::hvp(&scalar, &all),
        autodiff::hessian(&scalar, &all),
        rlx::core::vmap(&g, &batched, huge),
        rlx::core::vmap(&g, &batched, 3),
        Ok(g.clone()),
    ];
    for t in results.into_iter().flatten() {
        let Ok(exe) = compile_with(
            &t,
            &Options {
                jit: false,
                ..Options::default()
            },
        ) else {
            continue;
        };
        let small = t.nodes().iter().all(|n| n.shape.numel() <= 1 << 12);
        if small {
            let inputs: Vec<Tensor> = t
                .inputs()
                .iter()
                .map(|i| {
                    let ty = t.ty(i.node);
                    common::tensor(&values(ty.shape.dims(), r.seed), ty.shape.dims(), ty.dtype)
                })
                .collect();
            let refs: Vec<&Tensor> = inputs.iter().collect();
            if let Err(e) = exe.run(&refs) {
                prop_assert!(sized(&e), "run of a small graph failed: {}\n{}", e, t);
            }
        }
    }
    Ok(())
}

/// The hostile-graph property over `cases` recipes.
pub fn run_hostile_graphs(cases: u32) -> u32 {
    let mut runner = crate::runner(cases, 4);
    let n = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&crate::graphs::hostile_recipe(), |r| {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        check_hostile(&r)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    n.into_inner()
}
