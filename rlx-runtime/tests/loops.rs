//! Loop nodes built with the core API: value, gradient, JVP and HVP graphs
//! of a scan run by the reference interpreter, the compiled plan (with the
//! spine or residual fusion of a value-and-gradient) and the plain-math evaluator of
//! `tests/common`, which computes the scan step by step and the adjoint
//! from its two-scan lowering; the JVP against central differences.

mod common;
mod counting;
use common::*;

use rlx_core::autodiff::{grad, hvp, jvp, value_and_grad};
use rlx_core::{DType, Graph, LoopOp};
use rlx_runtime::{compile, Tensor};

/// carries (u [3], v [3]), per-step input f [3], invariant w [3]:
/// u' = u + 0.1 tanh(v * w), v' = v - 0.1 sin(u) + f, y = u * v.
/// Output: sum of the stacked ys plus sum(u_T).
fn looped(steps: usize, reverse: bool, budget: Option<usize>) -> Graph {
    let mut b = Graph::new();
    let u = input(&mut b, "u", &[3]);
    let v = input(&mut b, "v", &[3]);
    let f = input(&mut b, "f", &[3]);
    let w = input(&mut b, "w", &[3]);
    let vw = b.mul(v, w).unwrap();
    let th = b.tanh(vw).unwrap();
    let tenth = b.scalar(0.1, DType::F64);
    let du = b.mul(th, tenth).unwrap();
    let u2 = b.add(u, du).unwrap();
    let su = b.sin(u).unwrap();
    let dv = b.mul(su, tenth).unwrap();
    let v1 = b.sub(v, dv).unwrap();
    let v2 = b.add(v1, f).unwrap();
    let y = b.mul(u, v).unwrap();
    b.set_outputs(vec![u2, v2, y]);
    let l = LoopOp::scan("test loop", b, 2, 1, steps, reverse, budget).unwrap();
    let mut g = Graph::new();
    let u0 = input(&mut g, "u0", &[3]);
    let v0 = input(&mut g, "v0", &[3]);
    let fs = input(&mut g, "fs", &[steps, 3]);
    let w = input(&mut g, "w", &[3]);
    let p = g.looped(l.clone(), &[u0, v0, fs, w]).unwrap();
    let parts = rlx_core::loops::unpack(&mut g, p, &l.segments()).unwrap();
    let ys = g.sum_all(parts[2]).unwrap();
    let uu = g.sum_all(parts[0]).unwrap();
    let sq = g.mul(ys, ys).unwrap();
    let out = g.add(sq, uu).unwrap();
    g.set_outputs(vec![out]);
    g
}

fn point(rng: &mut Rng, steps: usize) -> Vec<Vec<f64>> {
    vec![
        rng.vec(3, -1.0, 1.0),
        rng.vec(3, -1.0, 1.0),
        rng.vec(3 * steps, -0.5, 0.5),
        rng.vec(3, -1.0, 1.0),
    ]
}

#[test]
fn loop_graphs_agree_across_interpreter_compiler_and_plain_math() {
    let mut rng = Rng::new(7);
    for (steps, reverse, budget) in [
        (1, false, None),
        (5, false, None),
        (6, true, Some(2)),
        (9, false, Some(9)),
    ] {
        let g = looped(steps, reverse, budget);
        let x = point(&mut rng, steps);
        run(&g, &x);
        run(&grad(&g, &[0, 1, 2, 3]).unwrap(), &x);
        let vg = value_and_grad(&g, &[0, 1, 2, 3]).unwrap();
        run(&vg, &x);
        // A budget of T compiles to a scan storing residuals and an
        // adjoint reading them; a smaller one to a spine and checkpoints.
        let fused = rlx_core::loops::spine::fuse_spines(&vg)
            .unwrap()
            .expect("a scan and its adjoint")
            .0
            .to_string();
        let stored = budget.unwrap_or(steps) == steps;
        assert_eq!(fused.contains(" residuals"), stored, "{fused}");
        assert_eq!(fused.contains(" spine"), !stored, "{fused}");
        let mut xt = x.clone();
        xt.extend(point(&mut rng, steps));
        let jv = run(&jvp(&g, &[0, 1, 2, 3]).unwrap(), &xt);
        // forward mode against central differences along the tangents
        let fd_v = fd(&g, &x, &xt[4..], 0, 1e-6);
        assert_close(&jv[1], &fd_v, 1e-6, "jvp vs finite differences");
        run(&hvp(&g, &[0, 1, 2, 3]).unwrap(), &xt);
    }
}

/// Tensors of `g`'s input types holding `x` (one flat vector per input).
fn tensors(g: &Graph, x: &[Vec<f64>]) -> Vec<Tensor> {
    g.inputs()
        .iter()
        .zip(x)
        .map(|(inp, v)| Tensor::from_vec(v.clone(), g.ty(inp.node).shape))
        .collect()
}

/// Zeros of `exe`'s output types, for `run_into`.
fn zero_outputs(exe: &rlx_runtime::Executable) -> Vec<Tensor> {
    exe.output_types()
        .iter()
        .map(|t| Tensor::zeros(t.shape.clone(), t.dtype))
        .collect()
}

/// The values of `ts`.
fn numbers_of(ts: &[Tensor]) -> Vec<Vec<f64>> {
    ts.iter().map(|t| t.to_f64_vec().unwrap()).collect()
}

/// Heap allocations of one warm `run_into` of the compiled value and
/// gradient of `looped(steps, false, Some(budget))`.
fn warm_loop_allocations(steps: usize, budget: usize) -> usize {
    let g = value_and_grad(&looped(steps, false, Some(budget)), &[0, 1, 2, 3]).unwrap();
    let exe = compile(&g).unwrap();
    let x = point(&mut Rng::new(3), steps);
    let ts = tensors(&g, &x);
    let refs: Vec<&Tensor> = ts.iter().collect();
    let mut outs = zero_outputs(&exe);
    exe.run_into(&refs, &mut outs).unwrap();
    let first = numbers_of(&outs);
    let n = counting::allocations(|| exe.run_into(&refs, &mut outs).unwrap());
    let again = numbers_of(&outs);
    assert_eq!(first, again, "a warm run gives the cold run's numbers");
    n
}

#[test]
fn a_warm_loop_allocates_nothing_per_step_nor_per_checkpoint() {
    // A scan fused with its checkpointed adjoint, 8 and 64 steps with the
    // same budget, and 64 steps with 5x the budget: the carries, checkpoint
    // slots and step buffers of the first call are reused by the next, so
    // whatever a warm call allocates does not grow with the steps or the
    // stored carries.
    let short = warm_loop_allocations(8, 3);
    let long = warm_loop_allocations(64, 3);
    let wide = warm_loop_allocations(64, 16);
    assert_eq!(
        (short, wide),
        (long, long),
        "allocations: {short} at T = 8, {long} at T = 64, {wide} with 16 checkpoints"
    );
    // Every carry stored: the scan records residuals and the adjoint
    // replays them, with the same reuse of buffers.
    let stored_short = warm_loop_allocations(8, 8);
    let stored_long = warm_loop_allocations(64, 64);
    assert_eq!(
        stored_short, stored_long,
        "allocations with residuals: {stored_short} at T = 8, {stored_long} at T = 64"
    );
}

#[test]
fn buffers_are_allocated_by_the_first_run_not_by_the_plan_build() {
    // 20 000 steps storing every carry: the scan's packed result holds every
    // step's residuals (megabytes). Building the plan allocates none of it,
    // the first run allocates it (from zeroed memory, written only by the
    // loop), and a warm run reuses it.
    let steps = 20_000;
    let g = value_and_grad(&looped(steps, false, Some(steps)), &[0, 1, 2, 3]).unwrap();
    let (fused, _) = rlx_core::loops::spine::fuse_spines(&g)
        .unwrap()
        .expect("a scan and its adjoint");
    let per_step: usize = fused
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            rlx_core::Op::Loop(l) if l.residuals.is_some() => Some(l.residual_types()),
            _ => None,
        })
        .expect("residuals")
        .iter()
        .map(|t| t.shape.numel() * 8)
        .sum();
    let residuals = steps * per_step;
    assert!(residuals >= 1 << 20, "{residuals} bytes");
    let mut exe = None;
    let build = counting::peak_bytes(|| exe = Some(compile(&g).unwrap()));
    let exe = exe.unwrap();
    assert!(build < residuals / 4, "building took {build} bytes");
    let x = point(&mut Rng::new(5), steps);
    let ts = tensors(&g, &x);
    let refs: Vec<&Tensor> = ts.iter().collect();
    let mut outs = zero_outputs(&exe);
    let first = counting::peak_bytes(|| exe.run_into(&refs, &mut outs).unwrap());
    assert!(first >= residuals, "the first run took {first} bytes");
    let cold = numbers_of(&outs);
    let warm = counting::peak_bytes(|| exe.run_into(&refs, &mut outs).unwrap());
    assert!(warm < residuals / 100, "a warm run took {warm} bytes");
    let again = numbers_of(&outs);
    assert_eq!(cold, again);
}

/// A recurrent layer over `steps` steps: carry `h: [rows, 32]`, per-step
/// input `x: [rows, 8]`, invariants `W: [32, 32]`, `U: [8, 32]`, `b: [32]`;
/// `h' = tanh(h·W + x·U + b)`, `y = h'`. Output: `Σ ys² + Σ h(T)`. Its
/// weight cotangents are the sums of `hᵀ·z̄` and `xᵀ·z̄` over the steps.
fn recurrent(rows: usize, steps: usize, budget: Option<usize>) -> Graph {
    recurrent_in(DType::F64, rows, steps, budget)
}

/// [`recurrent`] with inputs of `dtype`.
fn recurrent_in(dtype: DType, rows: usize, steps: usize, budget: Option<usize>) -> Graph {
    let input = |g: &mut Graph, name: &str, dims: &[usize]| g.input(name, dims, dtype);
    let mut s = Graph::new();
    let h = input(&mut s, "h", &[rows, 32]);
    let x = input(&mut s, "x", &[rows, 8]);
    let w = input(&mut s, "w", &[32, 32]);
    let u = input(&mut s, "u", &[8, 32]);
    let b = input(&mut s, "b", &[32]);
    let hw = s.matmul(h, w).unwrap();
    let xu = s.matmul(x, u).unwrap();
    let z = s.add(hw, xu).unwrap();
    let bb = s.broadcast(b, [rows, 32]).unwrap();
    let z = s.add(z, bb).unwrap();
    let h2 = s.tanh(z).unwrap();
    s.set_outputs(vec![h2, h2]);
    let l = LoopOp::scan("recurrent", s, 1, 1, steps, false, budget).unwrap();
    let mut g = Graph::new();
    let h0 = input(&mut g, "h0", &[rows, 32]);
    let xs = input(&mut g, "xs", &[steps, rows, 8]);
    let w = input(&mut g, "w", &[32, 32]);
    let u = input(&mut g, "u", &[8, 32]);
    let b = input(&mut g, "b", &[32]);
    let p = g.looped(l.clone(), &[h0, xs, w, u, b]).unwrap();
    let parts = rlx_core::loops::unpack(&mut g, p, &l.segments()).unwrap();
    let sq = g.mul(parts[1], parts[1]).unwrap();
    let ys = g.sum_all(sq).unwrap();
    let last = g.sum_all(parts[0]).unwrap();
    let out = g.add(ys, last).unwrap();
    g.set_outputs(vec![out]);
    g
}

/// The hoisting of the loop of `g`'s fused gradient, if any.
fn hoisted_of(vg: &Graph) -> Option<rlx_core::loops::hoist::Hoisted> {
    let (fused, _) = rlx_core::loops::spine::fuse_spines(vg).unwrap()?;
    fused.nodes().iter().find_map(|n| match &n.op {
        rlx_core::Op::Loop(l) => l.residuals.as_ref()?.hoisted.clone(),
        _ => None,
    })
}

/// Random inputs of `recurrent(rows, steps, ..)`: h0, xs, W, U, b.
fn recurrent_inputs(rng: &mut Rng, rows: usize, steps: usize) -> Vec<Vec<f64>> {
    vec![
        rng.vec(rows * 32, -0.5, 0.5),
        rng.vec(steps * rows * 8, -1.0, 1.0),
        rng.vec(32 * 32, -0.3, 0.3),
        rng.vec(8 * 32, -0.3, 0.3),
        rng.vec(32, -0.2, 0.2),
    ]
}

#[test]
fn weight_gradient_products_are_hoisted_out_of_the_reverse_sweep() {
    let (rows, steps) = (4, 12);
    let mut rng = Rng::new(11);
    let x = recurrent_inputs(&mut rng, rows, steps);
    let g = recurrent(rows, steps, None);
    let vg = value_and_grad(&g, &[0, 1, 2, 3, 4]).unwrap();
    // W̄ and Ū are all products and b̄ a sum of z̄'s rows, all computed
    // after the sweep (nothing left per step). Three factors: h and z̄
    // for W, x and z̄ for U, z̄ for b (z̄ stored once).
    let h = hoisted_of(&vg).expect("hoisted products");
    assert_eq!(h.per_step, vec![false, false, false]);
    assert_eq!(h.targets, vec![0, 1, 2]);
    assert_eq!(h.factors, 3);
    // Interpreter (the unsplit reverse step), compiled plan (hoisted) and
    // plain math agree (`run` checks them against each other).
    let got = run(&vg, &x);
    // The same plan with one stored carry fewer: checkpoints, no
    // residuals, each step's products summed in the sweep. The hoisted
    // product adds the same T·rows terms in another order: each element
    // differs by at most about 2·T·rows·ε·Σ|terms| (about 1e-14 here).
    let checkpointed =
        value_and_grad(&recurrent(rows, steps, Some(steps - 1)), &[0, 1, 2, 3, 4]).unwrap();
    assert!(hoisted_of(&checkpointed).is_none());
    let ts = tensors(&vg, &x);
    let refs: Vec<&Tensor> = ts.iter().collect();
    let want: Vec<Vec<f64>> = compile(&checkpointed)
        .unwrap()
        .run(&refs)
        .unwrap()
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect();
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_close(
            a,
            b,
            1e-12,
            &format!("output {k}, hoisted vs summed per step"),
        );
    }
    // The gradient against central differences along a random direction.
    let v: Vec<Vec<f64>> = x.iter().map(|xi| rng.vec(xi.len(), -1.0, 1.0)).collect();
    let slope = fd(&g, &x, &v, 0, 1e-6)[0];
    let along: f64 = got[1..].iter().zip(&v).map(|(gi, vi)| dot(gi, vi)).sum();
    assert!(
        (slope - along).abs() <= 1e-6 * (1.0 + along.abs()),
        "{slope} vs {along}"
    );
    // 32 rows: storing the factors (32·(32 + 32) per step) would take more
    // than the products (32·32): nothing is hoisted.
    let wide = value_and_grad(&recurrent(32, 4, None), &[0, 1, 2, 3, 4]).unwrap();
    assert!(hoisted_of(&wide).is_none());
}

#[test]
fn hoisted_factors_are_stacked_in_groups_that_fit_the_stack_budget() {
    // 300 steps of 4 rows: the factors (h, x, z̄: 288 f64 a step) of all
    // steps would take 675 KiB, more than `STACK_BYTES`: the sweep stacks
    // them in groups (227 steps, then 73 with zero rows after them) and
    // adds each group's products. Against the same plan with one stored
    // carry fewer (no residuals, each step's products summed in the
    // sweep): the same T·rows terms in another order, each element within
    // about 2·T·rows·ε·Σ|terms| (1e-11 relative here).
    use rlx_core::loops::hoist::STACK_BYTES;
    let (rows, steps) = (4, 300);
    let mut rng = Rng::new(13);
    let x = recurrent_inputs(&mut rng, rows, steps);
    let vg = value_and_grad(&recurrent(rows, steps, None), &[0, 1, 2, 3, 4]).unwrap();
    let h = hoisted_of(&vg).expect("hoisted products");
    let step_bytes = 4 * (32 + 8 + 32) * 8;
    assert_eq!(h.steps, STACK_BYTES / step_bytes);
    assert!(h.steps < steps && steps % h.steps != 0);
    let checkpointed =
        value_and_grad(&recurrent(rows, steps, Some(steps - 1)), &[0, 1, 2, 3, 4]).unwrap();
    assert!(hoisted_of(&checkpointed).is_none());
    let ts = tensors(&vg, &x);
    let refs: Vec<&Tensor> = ts.iter().collect();
    let run = |g: &Graph| -> Vec<Vec<f64>> {
        compile(g)
            .unwrap()
            .run(&refs)
            .unwrap()
            .iter()
            .map(|t| t.to_f64_vec().unwrap())
            .collect()
    };
    let (got, want) = (run(&vg), run(&checkpointed));
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_close(
            a,
            b,
            1e-11,
            &format!("output {k}, grouped vs summed per step"),
        );
    }
}

#[test]
fn an_f32_loop_with_hoisted_products_computes_in_f32() {
    let (rows, steps) = (4, 12);
    let mut rng = Rng::new(11);
    let x = recurrent_inputs(&mut rng, rows, steps);
    let g = recurrent_in(DType::F32, rows, steps, None);
    let vg = value_and_grad(&g, &[0, 1, 2, 3, 4]).unwrap();
    assert!(hoisted_of(&vg).is_some());
    let ts: Vec<Tensor> = (g.inputs().iter().zip(&x))
        .map(|(inp, v)| {
            let ty = g.ty(inp.node);
            let s = rlx_runtime::Storage::from_f64(DType::F32, v.iter().copied());
            Tensor::from_storage(s, ty.shape).unwrap()
        })
        .collect();
    let refs: Vec<&Tensor> = ts.iter().collect();
    // The hoisted products' results are `f32` (they were once written into
    // `f64` storages, and the products panicked on the mismatch).
    let got = compile(&vg).unwrap().run(&refs).unwrap();
    // The same gradient in `f64`, to `f32` rounding.
    let want = run(
        &value_and_grad(&recurrent(rows, steps, None), &[0, 1, 2, 3, 4]).unwrap(),
        &x,
    );
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.dtype(), DType::F32);
        assert_close(&a.to_f64_vec().unwrap(), b, 1e-4, &format!("output {k}"));
    }
}

#[test]
fn a_warm_call_overwrites_the_last_calls_loop_results() {
    // A loop keeps its buffers (carries, checkpoint slots, step buffers)
    // and its packed result's slot from call to call. A warm call on new
    // inputs gives the numbers of a new plan's first call, bit for bit:
    // nothing of the last call's stacked residuals, carries or cotangents
    // shows through. With residuals (every carry stored, the recurrent
    // layer's hoisted products), with a checkpointed spine, and a plain
    // scan.
    let (rows, steps) = (4, 12);
    let mut rng = Rng::new(17);
    let graphs = [
        value_and_grad(&recurrent(rows, steps, None), &[0, 1, 2, 3, 4]).unwrap(),
        value_and_grad(&looped(steps, false, Some(3)), &[0, 1, 2, 3]).unwrap(),
        looped(steps, true, None),
    ];
    for g in &graphs {
        let points: Vec<Vec<Vec<f64>>> = (0..2)
            .map(|_| {
                g.inputs()
                    .iter()
                    .map(|inp| rng.vec(g.ty(inp.node).shape.numel(), -0.5, 0.5))
                    .collect()
            })
            .collect();
        let exe = compile(g).unwrap();
        let mut outs = zero_outputs(&exe);
        for x in &points {
            let ts = tensors(g, x);
            let refs: Vec<&Tensor> = ts.iter().collect();
            exe.run_into(&refs, &mut outs).unwrap();
            let fresh = compile(g).unwrap().run(&refs).unwrap();
            assert_eq!(numbers_of(&outs), numbers_of(&fresh));
        }
    }
}

#[test]
fn a_new_plans_first_run_on_a_dropped_plans_memory_gives_the_warm_bits() {
    // The first run of a plan gives the packed result of each loop (every
    // step's residuals, megabytes here) room the loop fills, not zeros. A
    // plan built after another one was dropped gets the dropped plan's
    // memory back from the allocator, holding the residuals of other
    // inputs: had the loop left an element unwritten, they would show in
    // the new plan's first results. Against a warm plan, bit for bit, at
    // alternating inputs.
    let (rows, steps) = (4, 4000);
    let mut rng = Rng::new(23);
    let g = value_and_grad(&recurrent(rows, steps, None), &[0, 1, 2, 3, 4]).unwrap();
    assert!(hoisted_of(&g).is_some(), "residuals with hoisted products");
    let points: Vec<Vec<Vec<f64>>> = (0..2)
        .map(|_| recurrent_inputs(&mut rng, rows, steps))
        .collect();
    let warm = compile(&g).unwrap();
    for round in 0..4 {
        let ts = tensors(&g, &points[round % 2]);
        let refs: Vec<&Tensor> = ts.iter().collect();
        let fresh = compile(&g).unwrap().run(&refs).unwrap();
        let want = warm.run(&refs).unwrap();
        assert_eq!(numbers_of(&fresh), numbers_of(&want), "round {round}");
    }
}
