//! Loops under `batch_jacobian_` (forward and reverse mode) and
//! second-order derivatives through loops with checkpointing: against
//! per-item Jacobians, the unrolled loop, central differences, every
//! checkpoint budget, and the memory bound (counting allocator).

use rlx::prelude::*;
use rlx::Scan;

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;

const H: f64 = 0.1;
const STEPS: usize = 7;

/// A per-step force, the same for every row.
fn force(t: usize) -> f64 {
    ((t * 5 % 7) as f64 - 3.0) * 0.4
}

/// Rows `[q, p]` of independent pendula, driven by a per-step force, stepped
/// `STEPS` times; the final rows `[q, p]`.
#[differentiable]
fn pendula(s: &Tensor) -> Tensor {
    let forces = Tensor::from_vec((0..STEPS).map(force).collect(), [STEPS, 1]);
    let ((q, p), ()) = rlx::scan(
        (s.slice_range(0..1, 1), s.slice_range(1..2, 1)),
        &forces,
        |(q, p), f| {
            let p = &p + (&f - q.sin() * 1.5 - &p * 0.1) * H;
            let q = &q + &p * H;
            ((q, p), ())
        },
    );
    Tensor::concat(&[&q, &p], 1)
}

#[differentiable]
fn pendula_unrolled(s: &Tensor) -> Tensor {
    let (mut q, mut p) = (s.slice_range(0..1, 1), s.slice_range(1..2, 1));
    for t in 0..STEPS {
        p = &p + (-(q.sin() * 1.5) - &p * 0.1 + force(t)) * H;
        q = &q + &p * H;
    }
    Tensor::concat(&[&q, &p], 1)
}

/// Rows `[q, p, k]`: oscillators with a stiffness `k` per row (a loop
/// invariant), one energy per row.
#[differentiable]
fn energies(s: &Tensor) -> Tensor {
    let k = s.slice_range(2..3, 1);
    let (q, p) = rlx::iterate(
        (s.slice_range(0..1, 1), s.slice_range(1..2, 1)),
        STEPS,
        |(q, p)| {
            let p = &p - ((&q * &k).sin() + &p * 0.1) * H;
            let q = &q + &p * H;
            (q, p)
        },
    );
    (q.square() * 0.5 + p.square() * &k).sum(&[1])
}

#[differentiable]
fn energies_unrolled(s: &Tensor) -> Tensor {
    let k = s.slice_range(2..3, 1);
    let (mut q, mut p) = (s.slice_range(0..1, 1), s.slice_range(1..2, 1));
    for _ in 0..STEPS {
        p = &p - ((&q * &k).sin() + &p * 0.1) * H;
        q = &q + &p * H;
    }
    (q.square() * 0.5 + p.square() * &k).sum(&[1])
}

/// A loop whose carry mixes the rows.
#[differentiable]
fn coupled(s: &Tensor) -> Tensor {
    rlx::iterate(s.clone(), 3, |x| &x * 0.5 + x.sum_all() * 0.1)
}

fn v(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}

/// Values agree to `tol` relative to the largest of `b`.
fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}");
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * scale, "{what}[{i}]: {x} vs {y}");
    }
}

/// `n` rows of `m` values.
fn rows(n: usize, m: usize) -> Tensor {
    Tensor::from_vec(
        (0..n * m)
            .map(|i| 0.3 + ((i * 7 % 13) as f64 - 6.0) * 0.17)
            .collect(),
        [n, m],
    )
}

/// Checks a batch Jacobian `bj` (`[n, item]`) against the unrolled loop's
/// and against `per_item(row i)` (shaped `[1, out.., 1, in..]`) for each row
/// of `s`; returns its values.
fn check_batch(
    bj: &Tensor,
    unrolled: &Tensor,
    s: &Tensor,
    per_item: impl Fn(&Tensor) -> rlx::Result<Tensor>,
) -> Vec<f64> {
    close("unrolled", &v(bj), &v(unrolled), 1e-13);
    let bj = v(bj);
    let n = s.shape().dim(0);
    let item = bj.len() / n;
    for i in 0..n {
        let j = per_item(&s.slice_range(i..i + 1, 0)).unwrap();
        assert_eq!(j.shape().numel(), item);
        close(
            &format!("row {i}"),
            &bj[i * item..(i + 1) * item],
            &v(&j),
            1e-13,
        );
    }
    bj
}

#[test]
fn forward_batch_jacobian_through_a_loop_matches_per_item_jacobians() {
    // one item: 2 outputs, 2 inputs: forward mode
    let (n, m) = (5, 2);
    let s = rows(n, m);
    let bj = batch_jacobian_pendula(&s).unwrap();
    assert_eq!(bj.shape().dims(), &[n, 2, m]);
    let unrolled = batch_jacobian_pendula_unrolled(&s).unwrap();
    check_batch(&bj, &unrolled, &s, jacobian_pendula);
}

#[test]
fn reverse_batch_jacobian_through_a_loop_matches_per_item_jacobians() {
    // one item: 1 output, 3 inputs (one of them a loop invariant): reverse mode
    let (n, m) = (4, 3);
    let s = rows(n, m);
    let bj = batch_jacobian_energies(&s).unwrap();
    assert_eq!(bj.shape().dims(), &[n, m]);
    let unrolled = batch_jacobian_energies_unrolled(&s).unwrap();
    let bj = check_batch(&bj, &unrolled, &s, jacobian_energies);
    // and central differences
    for i in 0..n {
        let row = s.slice_range(i..i + 1, 0);
        let e = 1e-6;
        for c in 0..m {
            let at = |d: f64| {
                let mut x = v(&row);
                x[c] += d;
                v(&energies(&Tensor::from_vec(x, [1, m])))[0]
            };
            let fd = (at(e) - at(-e)) / (2.0 * e);
            assert!(
                (fd - bj[i * m + c]).abs() < 1e-7 * fd.abs().max(1.0),
                "row {i} column {c}: {fd} vs {}",
                bj[i * m + c]
            );
        }
    }
}

#[test]
fn a_loop_that_mixes_rows_is_refused_by_batch_jacobian() {
    let e = batch_jacobian_coupled(&rows(3, 2)).unwrap_err().to_string();
    assert!(
        e.contains("batch_jacobian") && e.contains("mixes rows"),
        "{e}"
    );
}

/// A nonlinear map iterated `steps` times with a checkpoint budget.
#[differentiable]
fn chain(x0: &Tensor, k: &Tensor, steps: usize, budget: usize) -> f64 {
    chain_body(x0, k, steps, budget)
}

fn chain_body(x0: &Tensor, k: &Tensor, steps: usize, budget: usize) -> Tensor {
    let x = Scan::new()
        .checkpoints(budget)
        .iterate(x0.clone(), steps, |x| &x + (&x * k).sin() * 0.3);
    (x.square() * x.sin()).sum_all()
}

#[differentiable]
fn chain_unrolled(x0: &Tensor, k: &Tensor, steps: usize) -> f64 {
    let mut x = x0.clone();
    for _ in 0..steps {
        x = &x + (&x * k).sin() * 0.3;
    }
    (x.square() * x.sin()).sum_all()
}

/// A nonlinear function of `chain`'s gradient: its own gradient is grad
/// of grad through the loop.
#[differentiable]
fn chain_grad(x0: &Tensor, k: &Tensor, steps: usize, budget: usize) -> f64 {
    chain_grad_body(x0, k, steps, budget)
}

fn chain_grad_body(x0: &Tensor, k: &Tensor, steps: usize, budget: usize) -> Tensor {
    let (gx, gk) = grad_chain(x0, k, steps, budget).unwrap();
    (gx.sin() * x0).sum_all() + &gk * &gk
}

#[differentiable]
fn chain_grad_unrolled(x0: &Tensor, k: &Tensor, steps: usize) -> f64 {
    let (gx, gk) = grad_chain_unrolled(x0, k, steps).unwrap();
    (gx.sin() * x0).sum_all() + &gk * &gk
}

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}

#[test]
fn second_order_through_a_loop_is_the_same_at_every_budget() {
    let x0 = t(&[0.4, -1.2, 2.0, 0.1]);
    let k = Tensor::scalar(1.3);
    let dir = t(&[0.3, 0.5, -0.2, 0.9]);
    let dk = Tensor::scalar(-0.7);
    let want_h = hessian_chain_unrolled(&x0, &k, STEPS).unwrap();
    let want_hv = hvp_chain_unrolled(&x0, &k, STEPS, &dir, &dk).unwrap();
    let want_gg = grad_chain_grad_unrolled(&x0, &k, STEPS).unwrap();
    for budget in 1..=STEPS {
        let at = format!("budget {budget}");
        let h = hessian_chain(&x0, &k, STEPS, budget).unwrap();
        close(&at, &v(&h.0 .0), &v(&want_h.0 .0), 1e-12);
        close(&at, &v(&h.0 .1), &v(&want_h.0 .1), 1e-12);
        close(&at, &v(&h.1 .1), &v(&want_h.1 .1), 1e-12);
        let hv = hvp_chain(&x0, &k, STEPS, budget, &dir, &dk).unwrap();
        close(&at, &v(&hv.0), &v(&want_hv.0), 1e-12);
        close(&at, &v(&hv.1), &v(&want_hv.1), 1e-12);
        let gg = grad_chain_grad(&x0, &k, STEPS, budget).unwrap();
        close(&at, &v(&gg.0), &v(&want_gg.0), 1e-12);
        close(&at, &v(&gg.1), &v(&want_gg.1), 1e-12);
    }
}

#[test]
fn second_order_through_a_loop_matches_central_differences() {
    let x0 = t(&[0.4, -1.2, 2.0]);
    let k = Tensor::scalar(1.3);
    let budget = 3;
    let h = hessian_chain(&x0, &k, STEPS, budget).unwrap();
    let (hxx, hxk) = (v(&h.0 .0), v(&h.0 .1));
    let e = 1e-5;
    for i in 0..3 {
        let g_at = |d: f64| {
            let mut x = v(&x0);
            x[i] += d;
            grad_chain(&t(&x), &k, STEPS, budget).unwrap()
        };
        let (p, m) = (g_at(e), g_at(-e));
        for (j, (a, b)) in v(&p.0).iter().zip(v(&m.0)).enumerate() {
            let fd = (a - b) / (2.0 * e);
            let got = hxx[j * 3 + i];
            assert!(
                (fd - got).abs() < 1e-6 * got.abs().max(1.0),
                "H[{j}][{i}]: {fd} vs {got}"
            );
        }
        let fd = (v(&p.1)[0] - v(&m.1)[0]) / (2.0 * e);
        assert!(
            (fd - hxk[i]).abs() < 1e-6 * fd.abs().max(1.0),
            "H[k][{i}]: {fd} vs {}",
            hxk[i]
        );
    }
    // grad of grad: a directional derivative of chain_grad
    let gg = grad_chain_grad(&x0, &k, STEPS, budget).unwrap();
    let dir = [0.7, -0.2, 0.4];
    let at = |d: f64| {
        let x: Vec<f64> = v(&x0).iter().zip(dir).map(|(a, b)| a + d * b).collect();
        chain_grad(&t(&x), &k, STEPS, budget)
    };
    let fd = (at(e) - at(-e)) / (2.0 * e);
    let dot: f64 = v(&gg.0).iter().zip(dir).map(|(a, b)| a * b).sum();
    assert!((fd - dot).abs() < 1e-6 * fd.abs().max(1.0), "{fd} vs {dot}");
}

/// Carries of 4096 `f64` (32 KiB) make the loop's memory visible.
const WIDE: usize = 4096;
const CARRY: usize = WIDE * 8;

/// Peak heap bytes of the first run of a compiled second-order graph of
/// `chain` (`hvp`, or grad of grad when `twice`).
fn peak_of_second_order(steps: usize, budget: usize, twice: bool) -> usize {
    let (exe, n_inputs) = {
        let tr = rlx::trace::Trace::enter();
        let x = tr.input("x0", [WIDE], DType::F64);
        let k = tr.input("k", Shape::scalar(), DType::F64);
        let g = if twice {
            let y = chain_grad_body(&x, &k, steps, budget);
            let g = tr.finish(&[&y]).unwrap();
            rlx::core::autodiff::grad(&g, &[0]).unwrap()
        } else {
            let y = chain_body(&x, &k, steps, budget);
            let g = tr.finish(&[&y]).unwrap();
            rlx::core::autodiff::hvp(&g, &[0]).unwrap()
        };
        (rlx::compile(&g).unwrap(), g.inputs().len())
    };
    let x0 = Tensor::from_vec((0..WIDE).map(|i| (i as f64 * 0.01).sin()).collect(), [WIDE]);
    let k = Tensor::scalar(0.8);
    let dir = Tensor::from_vec((0..WIDE).map(|i| (i as f64 * 0.03).cos()).collect(), [WIDE]);
    let args: Vec<&Tensor> = [&x0, &k, &dir][..n_inputs].to_vec();
    counting::peak_bytes(|| {
        exe.run(&args).unwrap();
    })
}

#[test]
fn second_order_memory_is_checkpoints_times_a_constant_plus_a_constant_independent_of_the_length() {
    // `hvp`: the adjoint of the JVP scan stores pairs (c, ċ), 2 carries per
    // checkpoint. Grad of grad: the gradient's adjoint (1 carry per
    // checkpoint), then the adjoints of the JVP scan (2) and of the scan (1),
    // 4 carries per checkpoint. The plan keeps every loop's buffers between
    // runs, so they add up. The first run also allocates the plan's own
    // buffers (they are allocated lazily), and for grad of grad these hold
    // spines: the carries its fused scans record for their adjoints (one
    // per checkpoint and carry, read in place by the adjoints), 2 more
    // carries per checkpoint (measured: 6 in all).
    for (twice, per_checkpoint) in [(false, 2), (true, 6)] {
        let short = peak_of_second_order(40, 10, twice);
        let long = peak_of_second_order(400, 10, twice);
        let more = peak_of_second_order(400, 30, twice);
        // Ten times the steps, the same memory.
        assert!(long.abs_diff(short) < CARRY / 8, "{short} vs {long} bytes");
        // Twenty more checkpoints, twenty more stored carries of each adjoint.
        assert!(
            (more - long).abs_diff(per_checkpoint * 20 * CARRY) < CARRY / 2,
            "{long} vs {more} bytes"
        );
        // The rest (each loop's working carries, step buffers and
        // cotangents, the results, and a spine's extra entry: K = 11
        // entries for 10 checkpoints) is a few carries per loop.
        assert!(
            long < (per_checkpoint * 11 + 32) * CARRY,
            "{long} bytes at 10 checkpoints"
        );
    }
}
