//! Train a small MLP on two interleaved spirals with `value_and_grad_` and a
//! plain-Rust Adam optimiser; the loss curve and the learned decision
//! regions are plotted to `target/plots/mlp.svg`.
//!
//! Run with `cargo run --release --example mlp` (or `-- --ci`).

use std::error::Error;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
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

/// Half the side of the square plotted around the spirals.
const EXTENT: f32 = 1.4;
/// Cells per side of the decision-region grid.
const CELLS: usize = 90;

/// What the plot shows: the loss per step, the data, and the network's
/// probability of class 1 on a `CELLS × CELLS` grid over the plane.
struct Picture<'a> {
    losses: &'a [f32],
    xs: &'a [f32],
    labels: &'a [usize],
    p1: &'a [f32],
}

fn plot(pic: &Picture) -> Result<PathBuf, Box<dyn Error>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/plots");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("mlp.svg");
    draw(&path, pic)?;
    Ok(path)
}

fn draw(path: &Path, pic: &Picture) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "A 2-32-32-2 tanh network trained on two spirals (Adam, value_and_grad_loss)",
        ("sans-serif", 22),
    )?;
    let (left, right) = root.split_horizontally(620);
    let (class0, class1) = (RGBColor(31, 119, 180), RGBColor(214, 39, 40));

    let steps = pic.losses.len();
    let (lo, hi) = pic
        .losses
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &l| (a.min(l), b.max(l)));
    let mut loss = ChartBuilder::on(&left)
        .caption("training loss", ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            1..steps,
            (f64::from(lo) * 0.8..f64::from(hi) * 1.2).log_scale(),
        )?;
    loss.configure_mesh()
        .x_desc("Adam step")
        .y_desc("mean cross-entropy (log scale)")
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .draw()?;
    loss.draw_series(LineSeries::new(
        pic.losses
            .iter()
            .enumerate()
            .map(|(i, &l)| (i + 1, f64::from(l))),
        BLACK.stroke_width(2),
    ))?;

    let e = f64::from(EXTENT);
    let mut regions = ChartBuilder::on(&right)
        .caption("decision regions and training data", ("sans-serif", 18))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(50)
        .build_cartesian_2d(-e..e, -e..e)?;
    regions
        .configure_mesh()
        .disable_mesh()
        .x_desc("x₁")
        .y_desc("x₂")
        .draw()?;
    // Each cell is shaded by the predicted class, paler near the boundary
    // (four levels of confidence); runs of equal cells in a row are drawn
    // as one rectangle, which keeps the SVG small.
    let cell = 2.0 * e / CELLS as f64;
    let shade = |p: f32| {
        (
            p > 0.5,
            (f64::from((2.0 * p - 1.0).abs()) * 3.0).round() as u8,
        )
    };
    let mut runs = Vec::new();
    for (i, row) in pic.p1.chunks(CELLS).enumerate() {
        let mut start = 0;
        for j in 1..=CELLS {
            if j == CELLS || shade(row[j]) != shade(row[start]) {
                runs.push((i, start, j, shade(row[start])));
                start = j;
            }
        }
    }
    regions.draw_series(runs.into_iter().map(|(i, j0, j1, (is1, level))| {
        let (y0, y1) = (-e + i as f64 * cell, -e + (i + 1) as f64 * cell);
        let (x0, x1) = (-e + j0 as f64 * cell, -e + j1 as f64 * cell);
        let colour = if is1 { class1 } else { class0 };
        Rectangle::new(
            [(x0, y0), (x1, y1)],
            colour.mix(0.12 + 0.1 * f64::from(level)).filled(),
        )
    }))?;
    for (class, colour) in [(0, class0), (1, class1)] {
        regions
            .draw_series(
                pic.labels
                    .iter()
                    .enumerate()
                    .filter(|(_, &l)| l == class)
                    .map(|(i, _)| {
                        let (x, y) = (f64::from(pic.xs[2 * i]), f64::from(pic.xs[2 * i + 1]));
                        Circle::new((x, y), 3, colour.filled())
                    }),
            )?
            .label(format!("class {class}"))
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, colour.filled()));
    }
    regions
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The network's probability of class 1 at the centre of each grid cell.
fn probabilities(p: &[Tensor]) -> rlx::Result<Vec<f32>> {
    let cell = 2.0 * EXTENT / CELLS as f32;
    let grid: Vec<f32> = (0..CELLS * CELLS)
        .flat_map(|k| {
            let (i, j) = (k / CELLS, k % CELLS);
            [
                -EXTENT + (j as f32 + 0.5) * cell,
                -EXTENT + (i as f32 + 0.5) * cell,
            ]
        })
        .collect();
    let g = Tensor::from_slice(&grid, [CELLS * CELLS, 2]);
    let probs = predict(&g, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5]).softmax(1);
    let probs = probs.to_vec::<f32>()?;
    Ok(probs.chunks(2).map(|c| c[1]).collect())
}

fn main() -> Result<(), Box<dyn Error>> {
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
    let mut losses = Vec::with_capacity(steps);
    for t in 1..=steps {
        let p: Vec<Tensor> = params
            .iter()
            .zip(&shapes)
            .map(|(v, s)| Tensor::from_slice(v, *s))
            .collect();
        let (l, grads) = value_and_grad_loss(&x, &y, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5])?;
        let grads = [grads.0, grads.1, grads.2, grads.3, grads.4, grads.5];
        for ((w, g), o) in params.iter_mut().zip(&grads).zip(&mut opt) {
            o.step(w, g.as_slice::<f32>()?, t as i32, 0.01);
        }
        losses.push(l);
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
    println!("{:>6}  {:>8}", "step", "loss");
    for t in (0..steps).step_by(steps / 6).chain([steps - 1]) {
        println!("{:>6}  {:>8.4}", t + 1, losses[t]);
    }
    println!("training accuracy {:.1}% ({correct}/{n})", 100.0 * accuracy);
    assert!(accuracy > 0.9, "the network did not learn the spirals");
    let p1 = probabilities(&p)?;
    let path = plot(&Picture {
        losses: &losses,
        xs: &xs,
        labels: &labels,
        p1: &p1,
    })?;
    println!(
        "loss curve and decision regions plotted to {}",
        path.display()
    );
    println!("ok");
    Ok(())
}
