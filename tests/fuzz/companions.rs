//! `#[differentiable]` functions through every companion, with random
//! (often mismatched, empty or 0-d) input shapes and random static
//! arguments (often out of range or huge).
//!
//! Properties: no companion panics; the companions of one call agree on
//! success or on the error; the plain call panics exactly when they err,
//! and otherwise gives their value bit for bit; derivatives agree with
//! central finite differences (JVP, gradient, HVP) and with each other
//! (`<u, J v> = <Jᵀu, v>`, `J v`, `H v`).

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rlx::prelude::*;

use crate::common;
use crate::compare::{all_close, blocks_times, close, dot};
use crate::panics::try_panic_of;

/// Scalar; `axis` static. Fails when `x` and `y` do not broadcast or
/// `axis` is out of range.
#[differentiable]
fn mix(x: &Tensor, y: &Tensor, axis: usize) -> Tensor {
    let z = x.sin() * y + x.square() * 0.5;
    z.sum(&[axis]).tanh().sum_all()
}

/// Vector-valued; the reshape target is static (fails unless it has as
/// many elements as `x`, or is too large for any tensor).
#[differentiable]
fn fold(x: &Tensor, rows: usize, cols: usize) -> Tensor {
    let m = x.reshape([rows, cols]);
    m.matmul(&m.t()).sigmoid()
}

/// Scalar, with a runtime parameter that is not differentiated and a
/// static slice width.
#[differentiable(wrt(q))]
fn spring(q: &Tensor, k: f64, n: usize) -> f64 {
    let d = q.slice_range(n..n + n, 0) - q.slice_range(0..n, 0);
    0.5 * k * d.square().sum_all()
}

/// Vector-valued; tiles `x` into `n` rows (a huge `n` must be refused).
#[differentiable]
pub(crate) fn tile(x: &Tensor, n: usize) -> Tensor {
    let flat = x.reshape([1, x.numel()]);
    flat.broadcast_to([n, x.numel()]).atan() * flat.cos()
}

type Values = Result<Vec<Tensor>>;
type Blocks = Result<Vec<Vec<Tensor>>>;
type WithTangent = Result<(Tensor, Tensor)>;
type WithGrads = Result<(Tensor, Vec<Tensor>)>;

/// What the generic checks need of one function, at one static argument.
struct Model<'a> {
    scalar: bool,
    plain: &'a dyn Fn(&[Tensor]) -> Tensor,
    jvp: &'a dyn Fn(&[Tensor], &[Tensor]) -> WithTangent,
    vjp: &'a dyn Fn(&[Tensor], &Tensor) -> WithGrads,
    jacobian: &'a dyn Fn(&[Tensor]) -> Values,
    grad: &'a dyn Fn(&[Tensor]) -> Values,
    hvp: &'a dyn Fn(&[Tensor], &[Tensor]) -> Values,
    hessian: &'a dyn Fn(&[Tensor]) -> Blocks,
}

/// A size or static argument: usually small, sometimes huge.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![10 => 0usize..5, 1 => Just(1usize << 58), 1 => Just(usize::MAX)]
}

#[derive(Clone, Debug)]
pub struct Case {
    function: u8,
    shapes: [Vec<usize>; 2],
    statics: [usize; 2],
    k: f64,
    seed: u64,
}

pub fn case() -> impl Strategy<Value = Case> {
    let shape = || prop::collection::vec(0usize..5, 0..3);
    (
        0u8..4,
        [shape(), shape()],
        [size(), size()],
        -2.0..2.0f64,
        any::<u64>(),
    )
        .prop_map(|(function, shapes, statics, k, seed)| Case {
            function,
            shapes,
            statics,
            k,
            seed,
        })
}

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    common::tensor(&common::values(n, seed, -1.5, 1.5), shape, DType::F64)
}

fn flat(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().expect("a concrete result")
}

/// Runs every companion of the case's function and checks them.
/// Returns whether the call succeeded (and its derivatives were checked).
pub fn check(c: &Case) -> Result<bool, TestCaseError> {
    crate::progress(c);
    let [a, b] = &c.statics;
    let (a, b, k) = (*a, *b, c.k);
    let x = tensor(&c.shapes[0], c.seed);
    let y = tensor(&c.shapes[1], c.seed ^ 1);
    match c.function {
        0 => check_model(
            c,
            &[x, y],
            &Model {
                scalar: true,
                plain: &|t| mix(&t[0], &t[1], a),
                jvp: &|t, v| jvp_mix(&t[0], &t[1], a, &v[0], &v[1]),
                vjp: &|t, u| vjp_mix(&t[0], &t[1], a, u).map(|(v, (g, h))| (v, vec![g, h])),
                jacobian: &|t| jacobian_mix(&t[0], &t[1], a).map(|(g, h)| vec![g, h]),
                grad: &|t| grad_mix(&t[0], &t[1], a).map(|(g, h)| vec![g, h]),
                hvp: &|t, v| hvp_mix(&t[0], &t[1], a, &v[0], &v[1]).map(|(g, h)| vec![g, h]),
                hessian: &|t| {
                    hessian_mix(&t[0], &t[1], a)
                        .map(|((p, q), (r, s))| vec![vec![p, q], vec![r, s]])
                },
            },
        ),
        1 => check_model(
            c,
            &[x],
            &Model {
                scalar: false,
                plain: &|t| fold(&t[0], a, b),
                jvp: &|t, v| jvp_fold(&t[0], a, b, &v[0]),
                vjp: &|t, u| vjp_fold(&t[0], a, b, u).map(|(v, g)| (v, vec![g])),
                jacobian: &|t| jacobian_fold(&t[0], a, b).map(|j| vec![j]),
                grad: &|t| grad_fold(&t[0], a, b).map(|g| vec![g]),
                hvp: &|t, v| hvp_fold(&t[0], a, b, &v[0]).map(|h| vec![h]),
                hessian: &|t| hessian_fold(&t[0], a, b).map(|h| vec![vec![h]]),
            },
        ),
        2 => check_model(
            c,
            &[x],
            &Model {
                scalar: true,
                plain: &|t| Tensor::scalar(spring(&t[0], k, a)),
                jvp: &|t, v| {
                    jvp_spring(&t[0], k, a, &v[0])
                        .map(|(e, d)| (Tensor::scalar(e), Tensor::scalar(d)))
                },
                vjp: &|t, u| {
                    let u = u.item::<f64>()?;
                    vjp_spring(&t[0], k, a, u).map(|(v, g)| (Tensor::scalar(v), vec![g]))
                },
                jacobian: &|t| jacobian_spring(&t[0], k, a).map(|j| vec![j]),
                grad: &|t| grad_spring(&t[0], k, a).map(|g| vec![g]),
                hvp: &|t, v| hvp_spring(&t[0], k, a, &v[0]).map(|h| vec![h]),
                hessian: &|t| hessian_spring(&t[0], k, a).map(|h| vec![vec![h]]),
            },
        ),
        _ => check_model(
            c,
            &[x],
            &Model {
                scalar: false,
                plain: &|t| tile(&t[0], a),
                jvp: &|t, v| jvp_tile(&t[0], a, &v[0]),
                vjp: &|t, u| vjp_tile(&t[0], a, u).map(|(v, g)| (v, vec![g])),
                jacobian: &|t| jacobian_tile(&t[0], a).map(|j| vec![j]),
                grad: &|t| grad_tile(&t[0], a).map(|g| vec![g]),
                hvp: &|t, v| hvp_tile(&t[0], a, &v[0]).map(|h| vec![h]),
                hessian: &|t| hessian_tile(&t[0], a).map(|h| vec![vec![h]]),
            },
        ),
    }
}

/// The root message of an error (what every companion should agree on).
fn root(e: &Error) -> String {
    e.root().to_string()
}

fn check_model(c: &Case, xs: &[Tensor], m: &Model<'_>) -> Result<bool, TestCaseError> {
    const H: f64 = 1e-5;
    let vs: Vec<Tensor> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| tensor(x.shape().dims(), c.seed ^ (10 + i as u64)))
        .collect();
    let shifted = |t: f64| -> Vec<Tensor> {
        xs.iter()
            .zip(&vs)
            .map(|(x, v)| {
                let s: Vec<f64> = flat(x)
                    .iter()
                    .zip(flat(v))
                    .map(|(a, b)| a + t * b)
                    .collect();
                common::tensor(&s, x.shape().dims(), DType::F64)
            })
            .collect()
    };
    let jvp = (m.jvp)(xs, &vs);
    let plain = try_panic_of(std::panic::AssertUnwindSafe(|| (m.plain)(xs)));
    // Wrong tangent shapes are an error, never a panic.
    let wrong: Vec<Tensor> = vs.iter().map(|v| tensor(&[v.numel() + 1], 3)).collect();
    prop_assert!(
        (m.jvp)(xs, &wrong).is_err(),
        "jvp took tangents of the wrong shape, {:?}",
        c
    );
    let (value, jv) = match jvp {
        Err(e) => {
            let want = root(&e);
            let p = plain.ok_or_else(|| {
                TestCaseError::fail(format!("the plain call returned, jvp erred: {e}"))
            })?;
            prop_assert!(
                p.message.contains(&want),
                "plain call panicked with {:?}, jvp erred {}",
                p.message,
                want
            );
            let u = Tensor::scalar(1.0f64);
            let errs = [
                (m.vjp)(xs, &u).map(drop),
                (m.jacobian)(xs).map(drop),
                (m.grad)(xs).map(drop),
                (m.hvp)(xs, &vs).map(drop),
                (m.hessian)(xs).map(drop),
            ];
            for (i, r) in errs.iter().enumerate() {
                prop_assert!(
                    r.is_err(),
                    "companion {} succeeded where jvp erred ({}), {:?}",
                    i,
                    want,
                    c
                );
            }
            return Ok(false);
        }
        Ok(r) => r,
    };
    prop_assert!(plain.is_none(), "the plain call panicked: {:?}", plain);
    let plain = (m.plain)(xs);
    prop_assert_eq!(flat(&plain), flat(&value), "plain call vs companion value");
    let (value, jv) = (flat(&value), flat(&jv));
    if !value.iter().all(|v| v.is_finite()) {
        return Ok(true);
    }
    // JVP against central differences.
    let jvp_fd = |t: f64| (m.jvp)(&shifted(t), &vs).map(|(v, _)| flat(&v));
    let fwd = |e: Error| TestCaseError::fail(format!("{e}, {c:?}"));
    let (p, q) = (jvp_fd(H).map_err(fwd)?, jvp_fd(-H).map_err(fwd)?);
    let fd: Vec<f64> = p.iter().zip(&q).map(|(a, b)| (a - b) / (2.0 * H)).collect();
    all_close(&jv, &fd, 1e-5, &format!("jvp vs finite differences, {c:?}"))?;
    // VJP: <u, J v> = <Jᵀu, v>, and the same value.
    let u = tensor(plain.shape().dims(), c.seed ^ 99);
    let (v2, bars) = (m.vjp)(xs, &u).map_err(fwd)?;
    prop_assert_eq!(flat(&v2), value.clone(), "vjp value");
    let lhs = dot(&flat(&u), &jv);
    let rhs: f64 = bars
        .iter()
        .zip(&vs)
        .map(|(b, v)| dot(&flat(b), &flat(v)))
        .sum();
    prop_assert!(
        close(lhs, rhs, 1e-9),
        "<u, Jv> = {} vs <Jᵀu, v> = {}, {:?}",
        lhs,
        rhs,
        c
    );
    // Jacobian times v.
    let blocks = (m.jacobian)(xs).map_err(fwd)?;
    let blocks: Vec<Vec<f64>> = blocks.iter().map(flat).collect();
    let vflat: Vec<Vec<f64>> = vs.iter().map(flat).collect();
    let jv2 = blocks_times(&blocks, &vflat, jv.len())?;
    all_close(&jv2, &jv, 1e-9, &format!("J v vs jvp, {c:?}"))?;
    if !m.scalar {
        prop_assert!(
            (m.grad)(xs).is_err() || value.len() == 1,
            "grad of a non-scalar output"
        );
        return Ok(true);
    }
    // Gradient, Hessian-vector product and Hessian of a scalar function.
    let grads = (m.grad)(xs).map_err(fwd)?;
    let gv: f64 = grads
        .iter()
        .zip(&vs)
        .map(|(g, v)| dot(&flat(g), &flat(v)))
        .sum();
    prop_assert!(
        close(gv, jv[0], 1e-9),
        "grad·v = {} vs jvp {}, {:?}",
        gv,
        jv[0],
        c
    );
    let hv = (m.hvp)(xs, &vs).map_err(fwd)?;
    let gp = (m.grad)(&shifted(H)).map_err(fwd)?;
    let gm = (m.grad)(&shifted(-H)).map_err(fwd)?;
    for (i, h) in hv.iter().enumerate() {
        let fd: Vec<f64> = flat(&gp[i])
            .iter()
            .zip(flat(&gm[i]))
            .map(|(a, b)| (a - b) / (2.0 * H))
            .collect();
        all_close(
            &flat(h),
            &fd,
            1e-5,
            &format!("hvp vs finite differences, {c:?}"),
        )?;
    }
    let hess = (m.hessian)(xs).map_err(fwd)?;
    for (i, row) in hess.iter().enumerate() {
        let row: Vec<Vec<f64>> = row.iter().map(flat).collect();
        let hv2 = blocks_times(&row, &vflat, hv[i].numel())?;
        all_close(&hv2, &flat(&hv[i]), 1e-9, &format!("H v vs hvp, {c:?}"))?;
    }
    Ok(true)
}

/// The companion property over `cases` calls; returns the number of
/// cases and how many of them succeeded.
pub fn run_companions(cases: u32) -> (u32, u32) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let mut runner = crate::runner(cases, 3);
    let (n, ok) = (AtomicU32::new(0), AtomicU32::new(0));
    let result = runner.run(&case(), |c| {
        n.fetch_add(1, Ordering::Relaxed);
        ok.fetch_add(check(&c)? as u32, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (n.into_inner(), ok.into_inner())
}
