//! Loops traced once (`rlx::iterate` / `rlx::scan`), each against a
//! hand-written computation in the same run:
//!
//! - `pendula_64x200`: warm `value_and_grad_` of 64 pendula × 200 steps of
//!   symplectic Euler (loss: mean final angle; gradient in the 64 initial
//!   angles and the length) versus a hand-written adjoint that stores the
//!   trajectory and runs it backwards; also the same function with the loop
//!   unrolled at trace time.
//! - `first_call`: trace + differentiate + compile of that function at
//!   T = 200 and T = 10⁵ (what a first call costs besides running).
//! - `steps_1e5`: warm `value_and_grad_` at T = 10⁵ with the default ⌈√T⌉ =
//!   317 checkpoints versus storing every state (budget T): the price of
//!   bounded memory per step; and the hand-written adjoint at T = 10⁵.
//! - `lstm_first_gradient`: a 4-layer LSTM over 1024 steps (batch 4, hidden
//!   32, vocabulary 16): trace + differentiate + compile + one run, as a
//!   first `grad_` call does, and its parts.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rlx::prelude::*;
use rlx::trace::Trace;
use rlx::Scan;

const G: f64 = 9.81;
const DT: f64 = 1e-3;
const N: usize = 64;

/// One step of symplectic Euler for pendula of `rate = g dt / L`.
fn step((theta, omega): (Tensor, Tensor), rate: &Tensor) -> (Tensor, Tensor) {
    let omega = &omega - theta.sin() * rate;
    let theta = &theta + &omega * DT;
    (theta, omega)
}

fn final_angle_body(theta0: &Tensor, length: &Tensor, steps: usize, budget: usize) -> Tensor {
    let rate = length.recip() * (G * DT);
    let (theta, _) =
        Scan::new()
            .checkpoints(budget)
            .iterate((theta0.clone(), theta0 * 0.0), steps, |s| step(s, &rate));
    theta.mean_all()
}

/// The pendula with the loop traced once.
#[differentiable]
fn final_angle(theta0: &Tensor, length: f64, steps: usize, budget: usize) -> f64 {
    final_angle_body(theta0, &length, steps, budget)
}

/// The same, unrolled at trace time.
#[differentiable]
fn final_angle_unrolled(theta0: &Tensor, length: f64, steps: usize) -> f64 {
    let rate = length.recip() * (G * DT);
    let mut s = (theta0.clone(), theta0 * 0.0);
    for _ in 0..steps {
        s = step(s, &rate);
    }
    s.0.mean_all()
}

/// Hand-written value and adjoint: forward storing every angle, then
/// θ̄(t) += θ̄(t+1) − r cos θ(t) ω̄(t+1), ω̄(t+1) += dt θ̄(t+1), r̄ −= sin θ(t) ω̄(t+1).
fn hand(theta0: &[f64], length: f64, steps: usize, path: &mut Vec<f64>) -> (f64, Vec<f64>, f64) {
    let n = theta0.len();
    let r = G * DT / length;
    path.clear();
    path.extend_from_slice(theta0);
    let mut omega = vec![0.0; n];
    for t in 0..steps {
        for i in 0..n {
            let th = path[t * n + i];
            omega[i] -= r * th.sin();
            path.push(th + DT * omega[i]);
        }
    }
    let value = path[steps * n..].iter().sum::<f64>() / n as f64;
    let mut tb = vec![1.0 / n as f64; n];
    let mut ob = vec![0.0; n];
    let mut rb = 0.0;
    for t in (0..steps).rev() {
        for i in 0..n {
            let th = path[t * n + i];
            ob[i] += DT * tb[i];
            tb[i] -= r * th.cos() * ob[i];
            rb -= th.sin() * ob[i];
        }
    }
    (value, tb, rb * -G * DT / (length * length))
}

/// Trace + value_and_grad + compile of the pendula (no run).
fn first_call_plan(steps: usize) -> rlx::Executable {
    let t = Trace::enter();
    let theta0 = t.input("theta0", [N], DType::F64);
    let length = t.input("length", Shape::scalar(), DType::F64);
    let y = final_angle_body(
        &theta0,
        &length,
        steps,
        rlx::core::loops::default_checkpoints(steps),
    );
    let g = t.finish(&[&y]).unwrap();
    let vg = rlx::core::autodiff::value_and_grad(&g, &[0, 1]).unwrap();
    rlx::compile(&vg).unwrap()
}

const V: usize = 16;
const HID: usize = 32;
const B: usize = 4;
const LAYERS: usize = 4;
const SEQ: usize = 1024;

/// Cross-entropy of a 4-layer LSTM predicting `targets` from `xs` (both
/// one-hot `[T, B, V]`), summed over steps. Gates `[i, f, g, o]`.
fn lstm_loss(
    xs: &Tensor,
    targets: &Tensor,
    embed: &Tensor,
    w: &Tensor,
    bias: &Tensor,
    out: &Tensor,
) -> Tensor {
    let h0 = Tensor::zeros([LAYERS, B, HID], DType::F64);
    let init = (h0.clone(), h0, Tensor::scalar(0.0));
    let ((_, _, loss), ()) = rlx::scan(init, (xs, targets), |(h, c, loss), (x, y)| {
        let mut input = x.matmul(embed);
        let (mut hs, mut cs) = (Vec::new(), Vec::new());
        for l in 0..LAYERS {
            let hl = h.slice(0, l, 1).reshape([B, HID]);
            let cl = c.slice(0, l, 1).reshape([B, HID]);
            let wl = w.slice(0, l, 1).reshape([2 * HID, 4 * HID]);
            let bl = bias.slice(0, l, 1).reshape([4 * HID]);
            let z = Tensor::concat(&[&input, &hl], 1).matmul(&wl) + bl;
            let gate = |k: usize| z.slice(1, k * HID, HID);
            let c2 = gate(1).sigmoid() * &cl + gate(0).sigmoid() * gate(2).tanh();
            let h2 = gate(3).sigmoid() * c2.tanh();
            hs.push(h2.reshape([1, B, HID]));
            cs.push(c2.reshape([1, B, HID]));
            input = h2;
        }
        let logits = input.matmul(out);
        let nll = (logits.log_softmax(1) * &y).sum_all() * -1.0;
        let hr: Vec<&Tensor> = hs.iter().collect();
        let cr: Vec<&Tensor> = cs.iter().collect();
        (
            (Tensor::concat(&hr, 0), Tensor::concat(&cr, 0), &loss + nll),
            (),
        )
    });
    loss
}

fn lstm_inputs() -> Vec<Tensor> {
    let one_hot = |seed: usize| {
        let mut v = vec![0.0; SEQ * B * V];
        for t in 0..SEQ {
            for b in 0..B {
                v[(t * B + b) * V + (t * 7 + b * 3 + seed) % V] = 1.0;
            }
        }
        Tensor::from_vec(v, [SEQ, B, V])
    };
    let weights = |shape: &[usize], s: f64| {
        let n: usize = shape.iter().product();
        Tensor::from_vec(
            (0..n).map(|i| (i as f64 * 0.618).sin() * s).collect(),
            shape.to_vec(),
        )
    };
    vec![
        one_hot(0),
        one_hot(1),
        weights(&[V, HID], 0.3),
        weights(&[LAYERS, 2 * HID, 4 * HID], 0.15),
        weights(&[LAYERS, 4 * HID], 0.1),
        weights(&[HID, V], 0.3),
    ]
}

/// What a first `grad_` call does before running: trace, differentiate, compile.
fn lstm_gradient_plan(inputs: &[Tensor]) -> rlx::Executable {
    let t = Trace::enter();
    let ins: Vec<Tensor> = ["xs", "targets", "embed", "w", "bias", "out"]
        .iter()
        .zip(inputs)
        .map(|(name, x)| t.input(name, x.shape().clone(), x.dtype()))
        .collect();
    let loss = lstm_loss(&ins[0], &ins[1], &ins[2], &ins[3], &ins[4], &ins[5]);
    let g = t.finish(&[&loss]).unwrap();
    let grad = rlx::core::autodiff::grad(&g, &[2, 3, 4, 5]).unwrap();
    rlx::compile(&grad).unwrap()
}

fn bench(c: &mut Criterion) {
    let theta0: Vec<f64> = (0..N).map(|i| 0.1 + 2.9 * i as f64 / N as f64).collect();
    let t0 = Tensor::from_slice(&theta0, [N]);
    let length = 1.3;
    let mut path = Vec::new();

    // The three agree.
    let steps = 200;
    let budget = rlx::core::loops::default_checkpoints(steps);
    let (v, (gt, gl)) = value_and_grad_final_angle(&t0, length, steps, budget).unwrap();
    let (hv, hg, hl) = hand(&theta0, length, steps, &mut path);
    let (uv, (ut, _)) = value_and_grad_final_angle_unrolled(&t0, length, steps).unwrap();
    assert!((v - hv).abs() < 1e-12 && (v - uv).abs() < 1e-12);
    assert!((gl - hl).abs() < 1e-9 * hl.abs(), "{gl} vs {hl}");
    for ((a, b), u) in gt
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(&hg)
        .zip(ut.to_vec::<f64>().unwrap())
    {
        assert!((a - b).abs() < 1e-12 && (a - u).abs() < 1e-12, "{a} vs {b}");
    }

    let mut group = c.benchmark_group("pendula_64x200");
    group.bench_function("rlx::iterate value_and_grad_", |b| {
        b.iter(|| value_and_grad_final_angle(black_box(&t0), length, steps, budget).unwrap())
    });
    group.bench_function("rlx::iterate value_and_grad_, every state stored", |b| {
        b.iter(|| value_and_grad_final_angle(black_box(&t0), length, steps, steps).unwrap())
    });
    group.bench_function("unrolled value_and_grad_", |b| {
        b.iter(|| value_and_grad_final_angle_unrolled(black_box(&t0), length, steps).unwrap())
    });
    group.bench_function("hand-written adjoint", |b| {
        b.iter(|| hand(black_box(&theta0), length, steps, &mut path))
    });
    group.finish();

    let mut group = c.benchmark_group("first_call");
    group.sample_size(20);
    for steps in [200, 100_000] {
        group.bench_function(
            format!("trace + differentiate + compile, T = {steps}"),
            |b| b.iter(|| first_call_plan(black_box(steps))),
        );
    }
    group.finish();

    let steps = 100_000;
    let budget = rlx::core::loops::default_checkpoints(steps);
    let t = Instant::now();
    value_and_grad_final_angle(&t0, length, steps, budget).unwrap();
    println!(
        "steps_1e5: first value_and_grad_ call (with its run): {:?}",
        t.elapsed()
    );
    let mut group = c.benchmark_group("steps_1e5");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("checkpointed (317 states)", |b| {
        b.iter(|| value_and_grad_final_angle(black_box(&t0), length, steps, budget).unwrap())
    });
    group.bench_function("every state stored", |b| {
        b.iter(|| value_and_grad_final_angle(black_box(&t0), length, steps, steps).unwrap())
    });
    group.bench_function("hand-written adjoint", |b| {
        b.iter(|| hand(black_box(&theta0), length, steps, &mut path))
    });
    group.finish();

    let inputs = lstm_inputs();
    let mut group = c.benchmark_group("lstm_first_gradient");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    let refs: Vec<&Tensor> = inputs.iter().collect();
    group.bench_function("4 layers x 1024 steps: trace + grad + compile + run", |b| {
        b.iter(|| lstm_gradient_plan(black_box(&inputs)).run(&refs).unwrap())
    });
    group.bench_function("4 layers x 1024 steps: trace + grad + compile", |b| {
        b.iter(|| lstm_gradient_plan(black_box(&inputs)))
    });
    let exe = lstm_gradient_plan(&inputs);
    group.bench_function("4 layers x 1024 steps: warm gradient run", |b| {
        b.iter(|| exe.run(black_box(&refs)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
