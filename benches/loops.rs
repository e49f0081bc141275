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
//!   first `grad_` call does, and its parts; the warm run against a
//!   hand-written forward and backpropagation through time that stores
//!   every step (`matrixmultiply` for the products), and the same with
//!   each layer's weight gradient computed as one product over all steps
//!   after the sweep (how far a better hand-written version gets). Before
//!   criterion, the bench prints the fastest of 15 alternating runs of the
//!   first gradient, the warm gradient and both hand-written versions
//!   (`common/batches.rs`: criterion's means wander with the machine's
//!   load).
//! - `lstm_f32_first_gradient`: the same LSTM and hand-written code in
//!   `f32` (JAX's default dtype), reported apart from the `f64` rows.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rlx::prelude::*;

#[path = "common/batches.rs"]
mod batches;
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
    // The weights' dtype (`f64`, or `f32` for the `f32` variant).
    let dtype = w.dtype();
    let h0 = Tensor::zeros([LAYERS, B, HID], dtype);
    let init = (h0.clone(), h0, Tensor::zeros(Shape::scalar(), dtype));
    let ((_, _, loss), ()) = rlx::scan(init, (xs, targets), |(h, c, loss), (x, y)| {
        let mut input = x.matmul(embed);
        let (mut hs, mut cs) = (Vec::new(), Vec::new());
        for l in 0..LAYERS {
            let hl = h.slice_range(l..l + 1, 0).reshape([B, HID]);
            let cl = c.slice_range(l..l + 1, 0).reshape([B, HID]);
            let wl = w.slice_range(l..l + 1, 0).reshape([2 * HID, 4 * HID]);
            let bl = bias.slice_range(l..l + 1, 0).reshape([4 * HID]);
            let z = Tensor::concat(&[&input, &hl], 1).matmul(&wl) + bl;
            let gate = |k: usize| z.slice_range(k * HID..k * HID + HID, 1);
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

/// The float types the hand-written LSTM is written over (`f64`, and `f32`
/// for the `f32` variant): the same code, `matrixmultiply`'s `dgemm` or
/// `sgemm` for the products.
trait Real:
    rlx::runtime::Element
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::fmt::Display
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INFINITY: Self;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn ln(self) -> Self;
    fn max(self, o: Self) -> Self;
    /// `C ← A·B + βC` for `(pointer, row stride, column stride)` operands.
    ///
    /// # Safety
    /// As `matrixmultiply::dgemm`: every addressed element valid, `c`
    /// overlapping neither `a` nor `b`.
    unsafe fn gemm(
        mkn: (usize, usize, usize),
        a: (*const Self, isize, isize),
        b: (*const Self, isize, isize),
        beta: Self,
        c: (*mut Self, isize, isize),
    );
}

macro_rules! real {
    ($t:ty, $gemm:path) => {
        impl Real for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const NEG_INFINITY: $t = <$t>::NEG_INFINITY;
            fn exp(self) -> $t {
                <$t>::exp(self)
            }
            fn tanh(self) -> $t {
                <$t>::tanh(self)
            }
            fn ln(self) -> $t {
                <$t>::ln(self)
            }
            fn max(self, o: $t) -> $t {
                <$t>::max(self, o)
            }
            unsafe fn gemm(
                (m, k, n): (usize, usize, usize),
                (a, rsa, csa): (*const $t, isize, isize),
                (b, rsb, csb): (*const $t, isize, isize),
                beta: $t,
                (c, rsc, csc): (*mut $t, isize, isize),
            ) {
                // SAFETY: forwarded from the caller.
                unsafe { $gemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}
real!(f64, matrixmultiply::dgemm);
real!(f32, matrixmultiply::sgemm);

/// `C ← A·B + βC` through `matrixmultiply` (as a hand-written Rust
/// program would multiply), for row-major `A: [m, k]` and `B: [k, n]`
/// given by their strides (`(k, 1)` plain, `(1, rows)` transposed).
#[allow(clippy::too_many_arguments)]
fn dgemm<T: Real>(
    (m, k, n): (usize, usize, usize),
    a: &[T],
    (rsa, csa): (usize, usize),
    b: &[T],
    (rsb, csb): (usize, usize),
    beta: T,
    c: &mut [T],
) {
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs;
    assert!(last(m, k, rsa, csa) < a.len() && last(k, n, rsb, csb) < b.len() && m * n <= c.len());
    let i = |x: usize| x as isize;
    // SAFETY: the assertion shows every addressed element is inside its
    // slice, and `c` is a unique borrow (no overlap with `a` or `b`).
    unsafe {
        T::gemm(
            (m, k, n),
            (a.as_ptr(), i(rsa), i(csa)),
            (b.as_ptr(), i(rsb), i(csb)),
            beta,
            (c.as_mut_ptr(), i(n), 1),
        )
    }
}

fn sigmoid<T: Real>(x: T) -> T {
    T::ONE / (T::ONE + (-x).exp())
}

/// Hand-written loss and gradient (embed, w, bias, out) of [`lstm_loss`]:
/// forward storing every step's gates, then backpropagation through time.
/// With `batched`, each layer's weight gradient is one product over all
/// steps after the sweep (`[2H, T·B] · [T·B, 4H]`, from the stored inputs
/// and gate cotangents) instead of `T` small ones during it.
// The buffers stay on the heap, as they were when this was `f64` only
// (clippy sees fixed sizes in the generic version).
#[allow(clippy::too_many_arguments, clippy::useless_vec)]
fn hand_lstm<T: Real>(
    x: &[T],
    y: &[T],
    embed: &[T],
    w: &[T],
    bias: &[T],
    out: &[T],
    batched: bool,
) -> (T, [Vec<T>; 4]) {
    let (h4, h2) = (4 * HID, 2 * HID);
    let mut h = vec![T::ZERO; LAYERS * B * HID];
    let mut c = vec![T::ZERO; LAYERS * B * HID];
    // Per step and layer: `[input, h]` `[B, 2H]`, the activated gates
    // `[i, f, g, o]` `[B, 4H]`, the previous cell and tanh of the new one.
    let n = SEQ * LAYERS * B;
    let (mut inps, mut gates) = (vec![T::ZERO; n * h2], vec![T::ZERO; n * h4]);
    let (mut c_prevs, mut tanh_cs) = (vec![T::ZERO; n * HID], vec![T::ZERO; n * HID]);
    let mut probs = vec![T::ZERO; SEQ * B * V];
    let mut tops = vec![T::ZERO; SEQ * B * HID];
    let mut loss = T::ZERO;
    let mut input = vec![T::ZERO; B * HID];
    let mut z = vec![T::ZERO; B * h4];
    let mut logits = vec![T::ZERO; B * V];
    for t in 0..SEQ {
        dgemm(
            (B, V, HID),
            &x[t * B * V..(t + 1) * B * V],
            (V, 1),
            embed,
            (HID, 1),
            T::ZERO,
            &mut input,
        );
        for l in 0..LAYERS {
            let at = (l * SEQ + t) * B;
            let inp = &mut inps[at * h2..(at + B) * h2];
            let gates = &mut gates[at * h4..(at + B) * h4];
            let c_prev = &mut c_prevs[at * HID..(at + B) * HID];
            let tanh_c = &mut tanh_cs[at * HID..(at + B) * HID];
            c_prev.copy_from_slice(&c[l * B * HID..(l + 1) * B * HID]);
            for b in 0..B {
                inp[b * h2..b * h2 + HID].copy_from_slice(&input[b * HID..(b + 1) * HID]);
                inp[b * h2 + HID..(b + 1) * h2]
                    .copy_from_slice(&h[(l * B + b) * HID..(l * B + b + 1) * HID]);
            }
            dgemm(
                (B, h2, h4),
                inp,
                (h2, 1),
                &w[l * h2 * h4..(l + 1) * h2 * h4],
                (h4, 1),
                T::ZERO,
                &mut z,
            );
            for b in 0..B {
                for j in 0..HID {
                    let zz = |g: usize| z[b * h4 + g * HID + j] + bias[l * h4 + g * HID + j];
                    let (i, f, g, o) =
                        (sigmoid(zz(0)), sigmoid(zz(1)), zz(2).tanh(), sigmoid(zz(3)));
                    for (k, v) in [i, f, g, o].into_iter().enumerate() {
                        gates[b * h4 + k * HID + j] = v;
                    }
                    let at = (l * B + b) * HID + j;
                    c[at] = f * c_prev[b * HID + j] + i * g;
                    tanh_c[b * HID + j] = c[at].tanh();
                    h[at] = o * tanh_c[b * HID + j];
                    input[b * HID + j] = h[at];
                }
            }
        }
        tops[t * B * HID..(t + 1) * B * HID].copy_from_slice(&input);
        dgemm(
            (B, HID, V),
            &input,
            (HID, 1),
            out,
            (V, 1),
            T::ZERO,
            &mut logits,
        );
        for b in 0..B {
            let row = &logits[b * V..(b + 1) * V];
            let mx = row.iter().cloned().fold(T::NEG_INFINITY, T::max);
            let lse = mx
                + row
                    .iter()
                    .map(|v| (*v - mx).exp())
                    .fold(T::ZERO, |s, v| s + v)
                    .ln();
            for v in 0..V {
                let lsm = row[v] - lse;
                loss -= lsm * y[(t * B + b) * V + v];
                probs[(t * B + b) * V + v] = lsm.exp();
            }
        }
    }
    let (mut ge, mut gw, mut gb, mut go) = (
        vec![T::ZERO; V * HID],
        vec![T::ZERO; w.len()],
        vec![T::ZERO; bias.len()],
        vec![T::ZERO; HID * V],
    );
    let mut dh = vec![T::ZERO; LAYERS * B * HID];
    let mut dc = vec![T::ZERO; LAYERS * B * HID];
    let (mut dlog, mut dtop) = (vec![T::ZERO; B * V], vec![T::ZERO; B * HID]);
    let mut dzs = vec![T::ZERO; if batched { n * h4 } else { B * h4 }];
    let mut din = vec![T::ZERO; B * h2];
    for t in (0..SEQ).rev() {
        for b in 0..B {
            let ysum = y[(t * B + b) * V..(t * B + b + 1) * V]
                .iter()
                .fold(T::ZERO, |s, &v| s + v);
            for v in 0..V {
                let k = (t * B + b) * V + v;
                dlog[b * V + v] = probs[k] * ysum - y[k];
            }
        }
        dgemm(
            (HID, B, V),
            &tops[t * B * HID..(t + 1) * B * HID],
            (1, HID),
            &dlog,
            (V, 1),
            T::ONE,
            &mut go,
        );
        dgemm((B, V, HID), &dlog, (V, 1), out, (1, V), T::ZERO, &mut dtop);
        for l in (0..LAYERS).rev() {
            let at = (l * SEQ + t) * B;
            let inp = &inps[at * h2..(at + B) * h2];
            let gates = &gates[at * h4..(at + B) * h4];
            let c_prev = &c_prevs[at * HID..(at + B) * HID];
            let tanh_c = &tanh_cs[at * HID..(at + B) * HID];
            let dz = match batched {
                true => &mut dzs[at * h4..(at + B) * h4],
                false => &mut dzs[..],
            };
            for b in 0..B {
                for j in 0..HID {
                    let at = (l * B + b) * HID + j;
                    let dhh = dh[at] + dtop[b * HID + j];
                    let g = |k: usize| gates[b * h4 + k * HID + j];
                    let tc = tanh_c[b * HID + j];
                    let dcc = dc[at] + dhh * g(3) * (T::ONE - tc * tc);
                    let zb = b * h4 + j;
                    dz[zb] = dcc * g(2) * g(0) * (T::ONE - g(0));
                    dz[zb + HID] = dcc * c_prev[b * HID + j] * g(1) * (T::ONE - g(1));
                    dz[zb + 2 * HID] = dcc * g(0) * (T::ONE - g(2) * g(2));
                    dz[zb + 3 * HID] = dhh * tc * g(3) * (T::ONE - g(3));
                    dc[at] = dcc * g(1);
                }
            }
            let wl = l * h2 * h4;
            if !batched {
                dgemm(
                    (h2, B, h4),
                    inp,
                    (1, h2),
                    dz,
                    (h4, 1),
                    T::ONE,
                    &mut gw[wl..wl + h2 * h4],
                );
            }
            for b in 0..B {
                for (o, d) in gb[l * h4..(l + 1) * h4]
                    .iter_mut()
                    .zip(&dz[b * h4..(b + 1) * h4])
                {
                    *o += *d;
                }
            }
            dgemm(
                (B, h4, h2),
                dz,
                (h4, 1),
                &w[wl..wl + h2 * h4],
                (1, h4),
                T::ZERO,
                &mut din,
            );
            for b in 0..B {
                dtop[b * HID..(b + 1) * HID].copy_from_slice(&din[b * h2..b * h2 + HID]);
                dh[(l * B + b) * HID..(l * B + b + 1) * HID]
                    .copy_from_slice(&din[b * h2 + HID..(b + 1) * h2]);
            }
        }
        dgemm(
            (V, B, HID),
            &x[t * B * V..(t + 1) * B * V],
            (1, V),
            &dtop,
            (HID, 1),
            T::ONE,
            &mut ge,
        );
    }
    if batched {
        // Steps are contiguous per layer: `[T·B, 2H]` inputs, `[T·B, 4H]`
        // gate cotangents.
        for l in 0..LAYERS {
            let (rows, wl) = (l * SEQ * B, l * h2 * h4);
            dgemm(
                (h2, SEQ * B, h4),
                &inps[rows * h2..(rows + SEQ * B) * h2],
                (1, h2),
                &dzs[rows * h4..(rows + SEQ * B) * h4],
                (h4, 1),
                T::ONE,
                &mut gw[wl..wl + h2 * h4],
            );
        }
    }
    (loss, [ge, gw, gb, go])
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

    lstm::<f64>(c, "lstm_first_gradient", 1e-9);
    lstm::<f32>(c, "lstm_f32_first_gradient", F32_TOLERANCE);
}

/// How far the `f32` gradients of rlx and the hand-written code may be
/// apart, relative to `1 + |value|`: the same sums in other orders,
/// through 1024 steps of `f32` rounding.
const F32_TOLERANCE: f64 = 2e-3;

/// The LSTM rows in `T` (`f64`; `f32`, JAX's default dtype, as a separate
/// group): rlx against the hand-written code in the same type, which
/// agree within `tol` relative to `1 + |value|`.
fn lstm<T: Real>(c: &mut Criterion, name: &str, tol: f64) {
    let inputs: Vec<Tensor> = lstm_inputs().iter().map(|t| t.cast(T::DTYPE)).collect();
    let data: Vec<Vec<T>> = inputs.iter().map(|t| t.to_vec::<T>().unwrap()).collect();
    let close = |a: T, b: T| (a.to_f64() - b.to_f64()).abs() <= tol * (1.0 + b.to_f64().abs());
    // rlx and the hand-written gradient agree.
    let exe = lstm_gradient_plan(&inputs);
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let got = exe.run(&refs).unwrap();
    let (loss, want) = hand_lstm(
        &data[0], &data[1], &data[2], &data[3], &data[4], &data[5], false,
    );
    // The batched weight gradient agrees (to rounding: other sums' order).
    let (loss_b, want_b) = hand_lstm(
        &data[0], &data[1], &data[2], &data[3], &data[4], &data[5], true,
    );
    assert_eq!(loss.to_f64(), loss_b.to_f64());
    for (&a, &b) in want.iter().flatten().zip(want_b.iter().flatten()) {
        assert!(close(a, b), "{a} vs {b}");
    }
    // `grad` graphs return the value, then the gradients.
    let value = got[0].to_vec::<T>().unwrap()[0].to_f64();
    assert!((value - loss.to_f64()).abs() <= tol * loss.to_f64().abs());
    for (g, w) in got[1..].iter().zip(&want) {
        for (&a, &b) in g.to_vec::<T>().unwrap().iter().zip(w) {
            assert!(close(a, b), "{a} vs {b}");
        }
    }
    let hand = |batched: bool| {
        hand_lstm(
            black_box(&data[0]),
            &data[1],
            &data[2],
            &data[3],
            &data[4],
            &data[5],
            batched,
        )
    };
    let [first, warm, by_hand, batched] = batches::fastest(
        &mut [
            &mut || {
                let exe = lstm_gradient_plan(black_box(&inputs));
                drop(black_box(exe.run(black_box(&refs)).unwrap()))
            },
            &mut || drop(black_box(exe.run(black_box(&refs)).unwrap())),
            &mut || drop(black_box(hand(false))),
            &mut || drop(black_box(hand(true))),
        ],
        15,
        Duration::from_millis(1),
    )
    .map(|t| t * 1e3);
    println!(
        "{name}, fastest of 15 alternating runs (ms): rlx first gradient (trace + grad + \
         compile + run) {first:.1}, rlx warm gradient {warm:.1}, hand-written {by_hand:.1} \
         ({:.2}x), weight gradients batched {batched:.1} ({:.2}x)",
        warm / by_hand,
        warm / batched
    );
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("4 layers x 1024 steps: trace + grad + compile + run", |b| {
        b.iter(|| lstm_gradient_plan(black_box(&inputs)).run(&refs).unwrap())
    });
    group.bench_function("4 layers x 1024 steps: trace + grad + compile", |b| {
        b.iter(|| lstm_gradient_plan(black_box(&inputs)))
    });
    group.bench_function("4 layers x 1024 steps: warm gradient run", |b| {
        b.iter(|| exe.run(black_box(&refs)).unwrap())
    });
    for (batched, name) in [
        (false, "hand-written forward + backward"),
        (true, "hand-written, weight gradients batched over steps"),
    ] {
        group.bench_function(format!("4 layers x 1024 steps: {name}"), |b| {
            b.iter(|| hand(batched))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
