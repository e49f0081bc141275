//! Train a small MLP on two interleaved spirals with `value_and_grad_` and a
//! plain-Rust Adam optimiser.
//!
//! Run with `cargo run --release --example mlp` (or `-- --ci`).

use indicatif::{ProgressBar, ProgressStyle};
use rlx::prelude::*;

const HIDDEN: usize = 32;

/// Mean softmax cross-entropy of a 2-H-H-2 tanh network on `x` (`[n, 2]`)
/// against one-hot labels `y` (`[n, 2]`).
#[differentiable(wrt(w1, b1, w2, b2, w3, b3))]
#[allow(clippy::too_many_arguments)]
pub fn loss(
    x: &Tensor,
    y: &Tensor,
    w1: &Tensor,
    b1: &Tensor,
    w2: &Tensor,
    b2: &Tensor,
    w3: &Tensor,
    b3: &Tensor,
) -> f32 {
    let logits = predict(x, w1, b1, w2, b2, w3, b3);
    logits.cross_entropy_with_logits(y)
}

/// Network outputs (logits); a plain helper over tensors, traced through.
fn predict(
    x: &Tensor,
    w1: &Tensor,
    b1: &Tensor,
    w2: &Tensor,
    b2: &Tensor,
    w3: &Tensor,
    b3: &Tensor,
) -> Tensor {
    let h1 = (x.matmul(w1) + b1).tanh();
    let h2 = (h1.matmul(w2) + b2).tanh();
    h2.matmul(w3) + b3
}

/// A small deterministic generator (xorshift64*), so runs are repeatable.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32) / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.next_f32().max(1e-7), self.next_f32());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f32::consts::PI * v).cos()
    }
}

fn spirals(per_class: usize, rng: &mut Rng) -> (Vec<f32>, Vec<f32>, Vec<usize>) {
    let (mut x, mut y, mut labels) = (vec![], vec![], vec![]);
    for class in 0..2 {
        for i in 0..per_class {
            let t = i as f32 / per_class as f32 * 3.0 * std::f32::consts::PI;
            let r = 0.2 + t / (3.0 * std::f32::consts::PI);
            let angle = t + class as f32 * std::f32::consts::PI;
            x.push(r * angle.cos() + 0.02 * rng.normal());
            x.push(r * angle.sin() + 0.02 * rng.normal());
            y.extend(if class == 0 { [1.0, 0.0] } else { [0.0, 1.0] });
            labels.push(class);
        }
    }
    (x, y, labels)
}

/// Adam state for one parameter tensor.
struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
}

impl Adam {
    fn step(&mut self, w: &mut [f32], g: &[f32], t: i32, lr: f32) {
        let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        for i in 0..w.len() {
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
            let mh = self.m[i] / (1.0 - b1.powi(t));
            let vh = self.v[i] / (1.0 - b2.powi(t));
            w[i] -= lr * mh / (vh.sqrt() + eps);
        }
    }
}

fn main() -> rlx::Result<()> {
    let ci = std::env::args().any(|a| a == "--ci");
    let (per_class, steps) = if ci { (100, 1500) } else { (300, 3000) };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (xs, ys, labels) = spirals(per_class, &mut rng);
    let n = labels.len();
    let x = Tensor::from_slice(&xs, [n, 2]);
    let y = Tensor::from_slice(&ys, [n, 2]);

    let shapes: [&[usize]; 6] = [
        &[2, HIDDEN],
        &[HIDDEN],
        &[HIDDEN, HIDDEN],
        &[HIDDEN],
        &[HIDDEN, 2],
        &[2],
    ];
    let mut params: Vec<Vec<f32>> = shapes
        .iter()
        .map(|s| {
            let fan_in = s[0] as f32;
            let len: usize = s.iter().product();
            let scale = if s.len() == 2 {
                (1.0 / fan_in).sqrt() * 1.5
            } else {
                0.0
            };
            (0..len).map(|_| rng.normal() * scale).collect()
        })
        .collect();
    let mut opt: Vec<Adam> = params
        .iter()
        .map(|p| Adam {
            m: vec![0.0; p.len()],
            v: vec![0.0; p.len()],
        })
        .collect();

    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}").expect("valid template"),
    );
    let mut last = f32::NAN;
    for t in 1..=steps {
        let p: Vec<Tensor> = params
            .iter()
            .zip(&shapes)
            .map(|(v, s)| Tensor::from_slice(v, *s))
            .collect();
        let (l, grads) = value_and_grad_loss(&x, &y, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5])?;
        let grads = [grads.0, grads.1, grads.2, grads.3, grads.4, grads.5];
        for ((w, g), o) in params.iter_mut().zip(&grads).zip(&mut opt) {
            o.step(w, g.as_slice::<f32>()?, t, 0.01);
        }
        last = l;
        if t % 50 == 0 {
            bar.set_message(format!("loss {l:.4}"));
        }
        bar.inc(1);
    }
    bar.finish();

    let p: Vec<Tensor> = params
        .iter()
        .zip(&shapes)
        .map(|(v, s)| Tensor::from_slice(v, *s))
        .collect();
    let logits = predict(&x, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5]).to_vec::<f32>()?;
    let correct = (0..n)
        .filter(|&i| (logits[2 * i + 1] > logits[2 * i]) as usize == labels[i])
        .count();
    let accuracy = correct as f64 / n as f64;
    println!(
        "final loss {last:.4}, training accuracy {:.1}% ({correct}/{n})",
        100.0 * accuracy
    );
    assert!(accuracy > 0.9, "the network did not learn the spirals");
    println!("ok");
    Ok(())
}
