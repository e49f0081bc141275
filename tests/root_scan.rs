//! A root inside a `#[scan]` loop: backward Euler on an RC–diode chain,
//! each step the `rlx::root` of `F(v(t+1), v(t), p) = 0`. The scanned loop
//! against the same loop unrolled (one root node per step), against
//! central differences of the whole simulation, forward against reverse,
//! with and without checkpointing, second order (`hvp_`) against
//! differences of the gradient; its reverse-mode memory flat in the number
//! of steps; `?` in the loop's body.

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;

use rlx::prelude::*;
use rlx::Newton;

/// The time step.
const DT: f64 = 0.1;
/// Conductance between neighbouring nodes and from each end to ground.
const G: f64 = 0.8;
/// Nodes of the test chain.
const N: usize = 4;
/// Steps of the test simulation.
const T: usize = 12;

/// The backward-Euler residual at node voltages `v` after a step from
/// `prev`, with source currents `s`: capacitor, chain conductances, diode
/// to ground (`is (exp(v / nvt) − 1)`), source.
fn kcl(v: &Tensor, prev: &Tensor, s: &Tensor, is: &Tensor, nvt: &Tensor, c: &Tensor) -> Tensor {
    let n = v.shape().dim(0);
    let z = Tensor::zeros([1], DType::F64);
    let p = Tensor::concat(&[&z, v, &z], 0);
    let chain = (v * 2.0 - p.slice_range(0..n, 0) - p.slice_range(2..n + 2, 0)) * G;
    let diode = ((v / nvt).exp() - 1.0) * is;
    (v - prev) * c * (1.0 / DT) + chain + diode - s
}

fn newton() -> Newton {
    Newton::new().tol(1e-13)
}

/// The loss on the waveform: weighted squares of every step's voltages.
fn loss(path: &[Tensor]) -> Tensor {
    let rows: Vec<Tensor> = path.iter().map(|y| y.reshape([1, N])).collect();
    let w = Tensor::from_slice(&[1.0, 0.5, 2.0, 1.5], [1, N]);
    (Tensor::concat(&rows, 0).square() * w).sum_all()
}

/// `T` backward-Euler steps, traced once as a loop.
#[differentiable]
fn transient(v0: &Tensor, src: &Tensor, is: f64, nvt: f64, c: f64) -> f64 {
    let mut v = v0.clone();
    let mut path = Vec::new();
    #[scan]
    for t in 0..src.shape().dim(0) {
        let s = &src[t];
        let prev = v.clone();
        v = rlx::root(|y| kcl(y, &prev, s, &is, &nvt, &c), &prev, newton())?;
        path.push(v.clone());
    }
    loss(&path)
}

/// `transient` with a checkpoint budget of 3 (reverse mode recomputes steps).
#[differentiable]
fn transient_checkpointed(v0: &Tensor, src: &Tensor, is: f64, nvt: f64, c: f64) -> f64 {
    let mut v = v0.clone();
    let mut path = Vec::new();
    #[scan(checkpoints = 3)]
    for t in 0..src.shape().dim(0) {
        let s = &src[t];
        let prev = v.clone();
        v = rlx::root(|y| kcl(y, &prev, s, &is, &nvt, &c), &prev, newton())?;
        path.push(v.clone());
    }
    loss(&path)
}

/// `transient` unrolled at trace time: one root node per step.
#[differentiable]
fn transient_unrolled(v0: &Tensor, src: &Tensor, is: f64, nvt: f64, c: f64) -> f64 {
    let mut v = v0.clone();
    let mut path = Vec::new();
    for t in 0..src.shape().dim(0) {
        let s = src.slice_range(t..t + 1, 0).reshape([N]);
        let prev = v.clone();
        v = rlx::root(|y| kcl(y, &prev, &s, &is, &nvt, &c), &prev, newton())?;
        path.push(v.clone());
    }
    loss(&path)
}

/// `transient` with `rlx::Scan::run_fallible` written by hand.
#[differentiable]
fn transient_by_hand(v0: &Tensor, src: &Tensor, is: f64, nvt: f64, c: f64) -> f64 {
    let (_, path) = rlx::Scan::new().run_fallible(v0.clone(), src, |prev, s| {
        let v = rlx::root(|y| kcl(y, &prev, &s, &is, &nvt, &c), &prev, newton())?;
        Ok((v.clone(), v))
    })?;
    let rows: Vec<Tensor> = (0..T)
        .map(|t| path.slice_range(t..t + 1, 0).reshape([N]))
        .collect();
    loss(&rows)
}

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, [v.len()])
}

fn v(x: &Tensor) -> Vec<f64> {
    x.to_vec::<f64>().unwrap()
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}");
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * scale, "{what}[{i}]: {x} vs {y}");
    }
}

/// A case: `(v0, src, is, nvt, c)`; the sources drive the diodes into
/// conduction (voltages up to several `nvt`).
struct Case {
    v0: Tensor,
    src: Tensor,
    is: f64,
    nvt: f64,
    c: f64,
}

fn cases() -> Vec<Case> {
    let src = |seed: f64, amp: f64| {
        let s: Vec<f64> = (0..T * N)
            .map(|i| amp * (1.0 + (i as f64 * 0.61 + seed).sin()))
            .collect();
        Tensor::from_slice(&s, [T, N])
    };
    vec![
        Case {
            v0: t(&[0.1, -0.2, 0.3, 0.0]),
            src: src(0.3, 0.6),
            is: 0.05,
            nvt: 0.4,
            c: 1.2,
        },
        Case {
            v0: t(&[0.5, 0.4, -0.1, 0.2]),
            src: src(1.7, 1.5),
            is: 0.01,
            nvt: 0.3,
            c: 0.7,
        },
        Case {
            v0: t(&[0.0; N]),
            src: src(-0.4, 0.2),
            is: 0.2,
            nvt: 0.6,
            c: 2.5,
        },
    ]
}

type Grads = (Tensor, Tensor, f64, f64, f64);

/// Every gradient as one flat vector: `v0`, `src`, `is`, `nvt`, `c`.
fn flat(g: &Grads) -> Vec<f64> {
    let mut out = v(&g.0);
    out.extend(v(&g.1));
    out.extend([g.2, g.3, g.4]);
    out
}

const H: f64 = 1e-4;

/// The derivative at 0 of `f` by the five-point central difference (its
/// error is `O(H⁴)`: the diodes' exponentials make the three-point one's
/// `O(H²)` visible at 1e-7).
fn diff(f: impl Fn(f64) -> f64) -> f64 {
    (f(-2.0 * H) - 8.0 * f(-H) + 8.0 * f(H) - f(2.0 * H)) / (12.0 * H)
}

#[test]
fn the_scanned_root_is_the_unrolled_loop_of_roots() {
    for c in cases() {
        let value = transient(&c.v0, &c.src, c.is, c.nvt, c.c);
        let unrolled = transient_unrolled(&c.v0, &c.src, c.is, c.nvt, c.c);
        close("value", &[value], &[unrolled], 1e-13);
        let by_hand = transient_by_hand(&c.v0, &c.src, c.is, c.nvt, c.c);
        close("value by hand", &[value], &[by_hand], 1e-13);
        let g = grad_transient(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        let gu = grad_transient_unrolled(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        close("grad vs unrolled", &flat(&g), &flat(&gu), 1e-11);
        let gh = grad_transient_by_hand(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        close("grad vs by hand", &flat(&g), &flat(&gh), 1e-11);
        let gc = grad_transient_checkpointed(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        close("grad with checkpoints", &flat(&g), &flat(&gc), 1e-11);
        let (value2, g2) = value_and_grad_transient(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        assert_eq!(value2, value);
        assert_eq!(flat(&g2), flat(&g));
    }
}

#[test]
fn the_gradient_matches_central_differences_of_the_whole_simulation() {
    for c in cases() {
        let g = grad_transient_checkpointed(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        let f = |v0: &Tensor, src: &Tensor, p: [f64; 3]| transient(v0, src, p[0], p[1], p[2]);
        let p = [c.is, c.nvt, c.c];
        // the parameters, one by one
        for (i, want) in [g.2, g.3, g.4].into_iter().enumerate() {
            let fd = diff(|h| {
                let mut a = p;
                a[i] += h;
                f(&c.v0, &c.src, a)
            });
            close(&format!("parameter {i}"), &[want], &[fd], 1e-8);
        }
        // the initial voltages and the sources, element by element
        let mut fd_v0 = Vec::new();
        for i in 0..N {
            fd_v0.push(diff(|h| {
                let mut a = v(&c.v0);
                a[i] += h;
                f(&t(&a), &c.src, p)
            }));
        }
        close("v0", &v(&g.0), &fd_v0, 1e-8);
        let s = v(&c.src);
        let mut fd_src = Vec::new();
        for i in 0..T * N {
            fd_src.push(diff(|h| {
                let mut a = s.clone();
                a[i] += h;
                f(&c.v0, &Tensor::from_vec(a, [T, N]), p)
            }));
        }
        close("src", &v(&g.1), &fd_src, 1e-8);
    }
}

#[test]
fn forward_mode_matches_reverse_mode() {
    let dv0 = t(&[0.3, -0.5, 0.2, 0.9]);
    let dsrc = Tensor::from_vec(
        (0..T * N).map(|i| (i as f64 * 0.37).cos()).collect(),
        [T, N],
    );
    let (dis, dnvt, dc) = (0.7, -0.4, 0.25);
    for c in cases() {
        let g = grad_transient(&c.v0, &c.src, c.is, c.nvt, c.c).unwrap();
        let dot = flat(&g)
            .iter()
            .zip(v(&dv0).into_iter().chain(v(&dsrc)).chain([dis, dnvt, dc]))
            .map(|(a, b)| a * b)
            .sum::<f64>();
        let (value, tangent) =
            jvp_transient(&c.v0, &c.src, c.is, c.nvt, c.c, &dv0, &dsrc, dis, dnvt, dc).unwrap();
        assert_eq!(value, transient(&c.v0, &c.src, c.is, c.nvt, c.c));
        close("jvp vs grad", &[tangent], &[dot], 1e-11);
        let (_, unrolled) =
            jvp_transient_unrolled(&c.v0, &c.src, c.is, c.nvt, c.c, &dv0, &dsrc, dis, dnvt, dc)
                .unwrap();
        close("jvp vs unrolled", &[tangent], &[unrolled], 1e-11);
        // and along the same direction, central differences
        let at = |h: f64| {
            let v0 = &c.v0 + &dv0 * h;
            let src = &c.src + &dsrc * h;
            transient(&v0, &src, c.is + dis * h, c.nvt + dnvt * h, c.c + dc * h)
        };
        close("jvp vs fd", &[tangent], &[diff(at)], 1e-8);
    }
}

/// Nodes of the memory test's chain: a carry of 512 bytes.
const WIDE: usize = 64;

/// `steps` backward-Euler steps of a `WIDE`-node chain under a constant
/// source, with a budget of 4 stored carries; the loss on the last state.
#[differentiable(wrt(is, nvt, c))]
fn settle(v0: &Tensor, s: &Tensor, is: f64, nvt: f64, c: f64, steps: usize) -> f64 {
    let mut v = v0.clone();
    #[scan(checkpoints = 4)]
    for _ in 0..steps {
        let prev = v.clone();
        v = rlx::root(|y| kcl(y, &prev, s, &is, &nvt, &c), &prev, newton())?;
    }
    v.square().sum_all()
}

/// Peak heap bytes of one `grad_settle` call over `steps` steps, the first
/// of its signature (tracing, compiling and the plan's buffers included).
fn peak_of_grad(steps: usize) -> (usize, (f64, f64, f64)) {
    let v0 = Tensor::from_vec((0..WIDE).map(|i| (i as f64 * 0.1).sin()).collect(), [WIDE]);
    let s = Tensor::from_vec((0..WIDE).map(|i| (i as f64 * 0.3).cos()).collect(), [WIDE]);
    let mut g = None;
    // One thread: the counting allocator counts this thread's bytes.
    rlx::set_num_threads(1);
    let peak = counting::peak_bytes(|| g = Some(grad_settle(&v0, &s, 0.05, 0.4, 1.2, steps)));
    rlx::set_num_threads(0);
    (peak, g.unwrap().unwrap())
}

#[test]
fn reverse_mode_memory_of_a_scanned_root_is_flat_in_the_number_of_steps() {
    let (short, gs) = peak_of_grad(50);
    let (long, gl) = peak_of_grad(500);
    for g in [gs, gl] {
        assert!(g.0.is_finite() && g.1.is_finite() && g.2.is_finite());
    }
    // Storing every step would take 450 more carries (plus each step's
    // residual state) at 500 steps; checkpointing keeps 4 whatever the
    // length, so ten times the steps costs at most a few more carries.
    let carry = WIDE * 8;
    assert!(
        long <= short + 4 * carry,
        "{short} bytes at 50 steps, {long} at 500"
    );
}

/// `?` in a loop's body leaves the function with the step's error: a
/// root whose tolerance is 0 is refused when traced.
#[differentiable]
fn refused(v0: &Tensor, s: &Tensor) -> f64 {
    let mut v = v0.clone();
    #[scan]
    for _ in 0..3 {
        let prev = v.clone();
        v = rlx::root(|y| y - &prev - s, &prev, Newton::new().tol(0.0))?;
    }
    v.sum_all()
}

#[test]
fn an_error_in_the_loop_body_is_the_companions_error() {
    let e = grad_refused(&t(&[1.0, 2.0]), &t(&[0.5, 0.5])).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("tolerance") && msg.contains("root_scan.rs"),
        "{msg}"
    );
}

#[test]
fn second_order_through_the_scanned_root_matches_differences_of_the_gradient() {
    let dv0 = t(&[0.3, -0.5, 0.2, 0.9]);
    let dsrc = Tensor::from_vec(
        (0..T * N).map(|i| (i as f64 * 0.37).cos()).collect(),
        [T, N],
    );
    let (dis, dnvt, dc) = (0.7, -0.4, 0.25);
    for c in cases().into_iter().take(2) {
        let hv =
            hvp_transient_checkpointed(&c.v0, &c.src, c.is, c.nvt, c.c, &dv0, &dsrc, dis, dnvt, dc)
                .unwrap();
        let grad_at = |h: f64| {
            let v0 = &c.v0 + &dv0 * h;
            let src = &c.src + &dsrc * h;
            let g = (c.is + dis * h, c.nvt + dnvt * h, c.c + dc * h);
            flat(&grad_transient(&v0, &src, g.0, g.1, g.2).unwrap())
        };
        let rows: Vec<Vec<f64>> = [-2.0, -1.0, 1.0, 2.0].map(|k| grad_at(k * H)).into();
        let fd: Vec<f64> = (0..rows[0].len())
            .map(|i| (rows[0][i] - 8.0 * rows[1][i] + 8.0 * rows[2][i] - rows[3][i]) / (12.0 * H))
            .collect();
        close("hvp vs fd of the gradient", &flat(&hv), &fd, 1e-7);
    }
}
