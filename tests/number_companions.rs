//! Companions of functions of numbers only (every runtime parameter `f32` or
//! `f64`) whose results are all numbers take a fast path
//! (`Function::run_numbers`: no allocation, no per-value enum). These tests
//! hold that path to the general one: the same bits as the core transforms
//! run on tensors, the same errors, a fallback where it cannot serve, and no
//! heap allocation on a warm call.

use rlx::autodiff;
use rlx::prelude::*;
use rlx::{compile, Graph, TensorType};

/// f64 parameters, a static parameter unrolled at trace time, and an
/// auxiliary output.
#[differentiable(wrt(x, y))]
fn well(x: f64, y: f64, k: f64, n: u32) -> (f64, f64) {
    let mut p = x.clone();
    for _ in 1..n {
        p = &p * &x;
    }
    let e = p * &k + (&y - &x).square() * 0.5 + (&x * &y).sin();
    (e, &x + &y)
}

/// f32 parameters and result.
#[differentiable]
fn cell(a: f32, b: f32) -> f32 {
    (&a * &b).tanh() + a.square() / (b.square() + 1.0)
}

/// An `f32` and an `f64` parameter.
#[differentiable]
fn mixed(a: f32, b: f64) -> f64 {
    a.cast(DType::F64) * &b + b.sin()
}

/// Flat in `x` where `y = 0`, with an infinite slope in `y` there: its
/// gradient multiplies zero cotangents by infinite and zero factors.
#[differentiable]
fn flat_at_zero(x: f64, y: f64) -> f64 {
    x.square() * y.sqrt()
}

/// A function of numbers whose plan is not a single scalar region (it
/// broadcasts to a vector), so the fast path declines it.
#[differentiable]
fn spread(x: f64) -> f64 {
    (x.broadcast_to([4]) * 0.5).exp().sum_all()
}

/// Fails while being traced.
#[differentiable]
fn bad(x: f64) -> f64 {
    x.reshape([2]).sum_all()
}

/// A function over tensors that calls a function of numbers with constants
/// inside traced code: numbers are never traced, so the call computes
/// them (constants of the trace).
#[differentiable]
fn calls_well(x: &Tensor) -> Tensor {
    let (e, _) = well(1.0, 2.0, 3.0, 2);
    (x * e).sum_all()
}

/// A function of a tensor returning a number.
#[differentiable]
fn norm2(x: &Tensor) -> f64 {
    x.square().sum_all()
}

/// The line of the call of `norm2` in `calls_norm2`.
const NORM2_CALL_LINE: u32 = line!() + 5;

/// Calls it with a traced tensor: its `f64` result cannot exist there.
#[differentiable]
fn calls_norm2(x: &Tensor) -> Tensor {
    let e = norm2(x);
    x * e
}

// ---------------------------------------------------------------------------

fn s64(v: f64) -> Tensor {
    Tensor::scalar(v)
}

fn s32(v: f32) -> Tensor {
    Tensor::scalar(v)
}

fn num<T: rlx::runtime::Element>(t: &Tensor) -> T {
    t.item::<T>().unwrap()
}

/// Runs `g` on tensors through `Executable::run` (the general path).
fn run(g: &Graph, inputs: &[&Tensor]) -> Vec<Tensor> {
    compile(g).unwrap().run(inputs).unwrap()
}

fn scalar_types(dtypes: &[DType]) -> Vec<TensorType> {
    dtypes
        .iter()
        .map(|&d| TensorType::new(Shape::scalar(), d))
        .collect()
}

#[test]
fn f64_companions_equal_the_core_transforms_bit_for_bit() {
    let (x, y, k, n) = (0.8, -0.3, 1.7, 3u32);
    let g = __rlx_trace_well(&scalar_types(&[DType::F64; 3]), &__rlx_statics_well(&n)).unwrap();
    let wrt = [0, 1];
    let ins = [s64(x), s64(y), s64(k)];
    let refs: Vec<&Tensor> = ins.iter().collect();

    let call = run(&g, &refs);
    assert_eq!(well(x, y, k, n), (num(&call[0]), num(&call[1])));

    let vg = run(&autodiff::value_and_grad(&g, &wrt).unwrap(), &refs);
    let grads = (num::<f64>(&vg[2]), num::<f64>(&vg[3]));
    assert_eq!(grad_well(x, y, k, n).unwrap(), grads);
    let (value, g2) = value_and_grad_well(x, y, k, n).unwrap();
    assert_eq!(value, (num(&vg[0]), num(&vg[1])));
    assert_eq!(g2, grads);

    let (tx, ty) = (0.25, -1.5);
    let (a, b) = (s64(tx), s64(ty));
    let jvp = run(
        &autodiff::jvp(&g, &wrt).unwrap(),
        &[refs[0], refs[1], refs[2], &a, &b],
    );
    let (value, dir) = jvp_well(x, y, k, n, tx, ty).unwrap();
    assert_eq!(value, (num(&jvp[0]), num(&jvp[1])));
    assert_eq!(dir, num::<f64>(&jvp[2]));

    let c = s64(2.5);
    let vjp = run(
        &autodiff::vjp(&g, &wrt).unwrap(),
        &[refs[0], refs[1], refs[2], &c],
    );
    let (value, cot) = vjp_well(x, y, k, n, 2.5).unwrap();
    assert_eq!(value, (num(&vjp[0]), num(&vjp[1])));
    assert_eq!(cot, (num(&vjp[2]), num(&vjp[3])));

    let hvp = run(
        &autodiff::hvp(&g, &wrt).unwrap(),
        &[refs[0], refs[1], refs[2], &a, &b],
    );
    assert_eq!(
        hvp_well(x, y, k, n, tx, ty).unwrap(),
        (num(&hvp[2]), num(&hvp[3]))
    );

    // The tensor-valued companions (general path) agree with the numbers.
    let (jx, jy) = jacobian_well(x, y, k, n).unwrap();
    assert_eq!((num::<f64>(&jx), num::<f64>(&jy)), grads);
    let ((hxx, hxy), (hyx, hyy)) = hessian_well(x, y, k, n).unwrap();
    let h = [[num::<f64>(&hxx), num(&hxy)], [num(&hyx), num(&hyy)]];
    let (hx, hy) = hvp_well(x, y, k, n, tx, ty).unwrap();
    approx::assert_relative_eq!(hx, h[0][0] * tx + h[0][1] * ty, max_relative = 1e-12);
    approx::assert_relative_eq!(hy, h[1][0] * tx + h[1][1] * ty, max_relative = 1e-12);
}

#[test]
fn zero_cotangents_give_zeros_with_the_exact_signs_on_every_call() {
    // Reverse mode scales cotangents with `mul_zero` (0 * inf = +0). The
    // native code may compute plain products first and hand over to the
    // exact code where a result is zero or NaN: every call, cold or warm,
    // gives `mul_zero`'s bits. By hand: e = a b, a = x², b = √y;
    // de/dx = mul_zero(b, 2x), de/dy = mul_zero(a, 0.5 / b).
    let cases = [
        ((0.0, 0.0), (0.0, 0.0)),
        ((-0.0, 4.0), (-0.0, 0.0)),
        ((3.0, 0.0), (0.0, f64::INFINITY)),
        ((0.0, -0.0), (0.0, 0.0)),
        ((2.0, 4.0), (8.0, 1.0)),
    ];
    for _ in 0..3 {
        for &((x, y), (gx, gy)) in &cases {
            let (v, (dx, dy)) = value_and_grad_flat_at_zero(x, y).unwrap();
            assert_eq!(
                v.to_bits(),
                (x * x * y.sqrt()).to_bits(),
                "value at {x}, {y}"
            );
            let (gx2, gy2) = grad_flat_at_zero(x, y).unwrap();
            for (got, want) in [(dx, gx), (dy, gy), (gx2, gx), (gy2, gy)] {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "at ({x}, {y}): {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn gradients_of_numbers_match_central_differences() {
    let (x, y, k) = (0.8, -0.3, 1.7);
    let e = |x: f64, y: f64| well(x, y, k, 3).0;
    let h = 1e-6;
    let (gx, gy) = grad_well(x, y, k, 3).unwrap();
    approx::assert_relative_eq!(
        gx,
        (e(x + h, y) - e(x - h, y)) / (2.0 * h),
        max_relative = 1e-7
    );
    approx::assert_relative_eq!(
        gy,
        (e(x, y + h) - e(x, y - h)) / (2.0 * h),
        max_relative = 1e-7
    );
    // A different static argument is a different plan.
    let (gx2, _) = grad_well(x, y, k, 2).unwrap();
    approx::assert_relative_eq!(
        gx2,
        2.0 * x * k + (x - y) + y * (x * y).cos(),
        max_relative = 1e-12
    );
}

#[test]
fn f32_and_mixed_companions_equal_the_core_transforms_bit_for_bit() {
    let (a, b) = (0.6f32, -1.3f32);
    let g = __rlx_trace_cell(&scalar_types(&[DType::F32; 2]), &()).unwrap();
    let (ta, tb) = (s32(a), s32(b));
    let vg = run(&autodiff::value_and_grad(&g, &[0, 1]).unwrap(), &[&ta, &tb]);
    let (value, (da, db)) = value_and_grad_cell(a, b).unwrap();
    assert_eq!(value, num::<f32>(&vg[0]));
    assert_eq!((da, db), (num::<f32>(&vg[1]), num::<f32>(&vg[2])));
    assert_eq!(cell(a, b), value);
    let jvp = run(
        &autodiff::jvp(&g, &[0, 1]).unwrap(),
        &[&ta, &tb, &s32(1.0), &s32(0.5)],
    );
    assert_eq!(
        jvp_cell(a, b, 1.0, 0.5).unwrap(),
        (num(&jvp[0]), num(&jvp[1]))
    );

    let (a, b) = (0.6f32, 2.25f64);
    let g = __rlx_trace_mixed(&scalar_types(&[DType::F32, DType::F64]), &()).unwrap();
    let (ta, tb) = (s32(a), s64(b));
    let vg = run(&autodiff::value_and_grad(&g, &[0, 1]).unwrap(), &[&ta, &tb]);
    let (da, db): (f32, f64) = grad_mixed(a, b).unwrap();
    assert_eq!((da, db), (num::<f32>(&vg[1]), num::<f64>(&vg[2])));
    assert_eq!(mixed(a, b), num::<f64>(&vg[0]));
    let hvp = run(
        &autodiff::hvp(&g, &[0, 1]).unwrap(),
        &[&ta, &tb, &s32(1.0), &s64(-2.0)],
    );
    assert_eq!(
        hvp_mixed(a, b, 1.0, -2.0).unwrap(),
        (num(&hvp[1]), num(&hvp[2]))
    );
}

#[test]
fn a_plan_that_is_not_a_scalar_program_falls_back_to_the_general_path() {
    let x = 0.4;
    let (v, dx) = value_and_grad_spread(x).unwrap();
    approx::assert_relative_eq!(v, 4.0 * (0.5 * x).exp(), max_relative = 1e-14);
    approx::assert_relative_eq!(dx, 2.0 * (0.5 * x).exp(), max_relative = 1e-14);
    assert_eq!(spread(x), v);
}

#[test]
fn errors_on_the_number_path_are_those_of_the_general_path() {
    for _ in 0..2 {
        // Errors are not cached: the second call fails the same way.
        let e = grad_bad(1.0).unwrap_err().to_string();
        assert!(e.contains("reshape"), "{e}");
        assert!(e.contains("number_companions.rs"), "{e}");
    }
    // well(1, 2, 3, 2) = 1·1·3 + (2 − 1)²/2 + sin 2
    let g = grad_calls_well(&Tensor::from_slice(&[1.0f64, 2.0], [2])).unwrap();
    let e = 3.0 + 0.5 + 2.0f64.sin();
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![e, e]);
    let e = grad_calls_norm2(&Tensor::from_slice(&[1.0f64, 2.0], [2]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be produced inside traced code"), "{e}");
    let at = format!("number_companions.rs:{NORM2_CALL_LINE}:");
    assert!(e.contains(&at), "expected {at} in: {e}");
}

#[test]
fn number_companions_are_callable_from_many_threads_at_once() {
    let inputs: Vec<(f64, f64)> = (0..8)
        .map(|i| (0.1 * i as f64, 1.0 - 0.2 * i as f64))
        .collect();
    let want: Vec<_> = inputs
        .iter()
        .map(|&(x, y)| grad_well(x, y, 1.5, 3).unwrap())
        .collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    for (&(x, y), w) in inputs.iter().zip(&want) {
                        assert_eq!(grad_well(x, y, 1.5, 3).unwrap(), *w);
                    }
                }
            });
        }
    });
}

// ---------------------------------------------------------------------------
// No allocation on a warm call.

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;
use counting::allocations;

#[test]
fn a_warm_companion_of_numbers_allocates_nothing() {
    // The counter sees allocations at all.
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 8]))), 1);
    let (x, y, k) = (0.8, -0.3, 1.7);
    // Cold calls trace, differentiate and compile (and allocate).
    let want = (grad_well(x, y, k, 3).unwrap(), well(x, y, k, 3));
    let want_jvp = jvp_well(x, y, k, 3, 1.0, 0.5).unwrap();
    let want_cell = grad_cell(0.5, 0.25).unwrap();
    let mut got = None;
    let n = allocations(|| {
        for _ in 0..100 {
            got = Some((
                (grad_well(x, y, k, 3).unwrap(), well(x, y, k, 3)),
                jvp_well(x, y, k, 3, 1.0, 0.5).unwrap(),
                grad_cell(0.5, 0.25).unwrap(),
            ));
        }
    });
    assert_eq!(got, Some((want, want_jvp, want_cell)));
    assert_eq!(n, 0, "warm calls of number companions allocated {n} times");
}
