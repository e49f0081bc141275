//! The warm call path of companions over small tensors, and eager ops on
//! small tensors (issue #15, items 2–4): results equal to the general
//! (unscalarised) plan through every companion, bit for bit; heap
//! allocations counted (a warm call allocates only its results, one
//! allocation per small result; `run_into` nothing); small tensors' own
//! storage (copy on write, reshapes, sizes at the threshold); and the
//! calls the fast path declines (large values, traced arguments, bad
//! input), which still give the general path's results and errors.

#[path = "../rlx-runtime/tests/counting/mod.rs"]
mod counting;

use counting::allocations;
use proptest::prelude::*;
use rlx::__private::{Arg, Transform};
use rlx::core::autodiff;
use rlx::prelude::*;
use rlx::runtime::compile::{compile_with, Options};
use rlx::runtime::Storage;
use rlx::{BinaryOp, Executable, Graph, Op, Result};

/// The LJ energy of three particles in 2-D over one `[6]` tensor, with a
/// spring between particles 0 and 2 scaled by `k`.
#[differentiable]
fn lj(p: &Tensor, k: f64) -> Tensor {
    let d = |i: usize, j: usize| {
        (p.slice_range(2 * i..2 * i + 2, 0) - p.slice_range(2 * j..2 * j + 2, 0))
            .square()
            .sum_all()
    };
    let pair = |r2: Tensor| {
        let s3 = r2.recip().powi(3);
        (s3.square() - &s3) * 4.0
    };
    pair(d(0, 1)) + pair(d(0, 2)) + pair(d(1, 2)) + (d(0, 2).sqrt() - 1.5).square() * k
}

/// A map from `[2]` to `[2]` (the Van der Pol implicit Euler residual).
#[differentiable(wrt(y))]
fn residual(y: &Tensor, y_prev: &Tensor, h: f64) -> Tensor {
    let y0 = y.slice_range(0..1, 0);
    let y1 = y.slice_range(1..2, 0);
    let f1 = ((1.0 - y0.square()) * &y1 - &y0) * 1000.0;
    y - y_prev - Tensor::concat(&[&y1, &f1], 0) * h
}

/// A sum over a vector of any length: small at 8 elements, over the
/// scalarisation threshold at 200.
#[differentiable]
fn wide(x: &Tensor) -> Tensor {
    (x.sin() * x).sum_all()
}

fn general(g: &Graph) -> Executable {
    let options = Options::general();
    compile_with(g, &options).unwrap()
}

/// Runs the unscalarised plan of `transform` of `lj`'s graph on `inputs`.
fn lj_general(
    transform: fn(&Graph, &[usize]) -> rlx::Result<Graph>,
    p: &Tensor,
    k: f64,
    extras: &[&Tensor],
) -> Vec<Vec<f64>> {
    let g = graph_lj(p, k).unwrap();
    let exe = general(&transform(&g, &[0, 1]).unwrap());
    let kt = Tensor::scalar(k);
    let mut inputs = vec![p, &kt];
    inputs.extend_from_slice(extras);
    let outs = exe.run(&inputs).unwrap();
    outs.iter().map(|t| t.to_f64_vec().unwrap()).collect()
}

/// Asserts equal bits (any NaN equals any NaN).
fn same(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
            "{what}: element {i}: {x:?} (general) vs {y:?} (companion)"
        );
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn coords() -> impl Strategy<Value = [f64; 6]> {
    // Particles near a triangle of side ~1 (no two on top of each other).
    (
        prop::array::uniform6(-0.2f64..0.2),
        prop::bool::ANY.prop_map(|b| if b { 1.0 } else { 1.3 }),
    )
        .prop_map(|(j, s)| {
            let base = [0.0, 0.0, s, 0.0, 0.5 * s, 0.9 * s];
            std::array::from_fn(|i| base[i] + j[i])
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every companion of a function of a small tensor and a number gives
    /// the bits of the general plan of the same transform.
    #[test]
    fn companions_over_small_tensors_equal_the_general_plan(
        c in coords(),
        k in 0.5f64..10.0,
        v in prop::array::uniform6(-1.0f64..1.0),
        dk in -1.0f64..1.0,
    ) {
        let p = Tensor::from_slice(&c, [6]);
        let vt = Tensor::from_slice(&v, [6]);
        let dkt = Tensor::scalar(dk);

        let want = lj_general(autodiff::value_and_grad, &p, k, &[]);
        let (e, (gp, gk)) = value_and_grad_lj(&p, k).unwrap();
        same(&want[0], &values(&e), "value_and_grad_: value");
        same(&want[1], &values(&gp), "value_and_grad_: ∂p");
        same(&want[2], &[gk], "value_and_grad_: ∂k");
        let (gp2, gk2) = grad_lj(&p, k).unwrap();
        same(&want[1], &values(&gp2), "grad_: ∂p");
        same(&want[2], &[gk2], "grad_: ∂k");
        same(&want[0], &values(&lj(&p, k)), "plain call");

        let want = lj_general(autodiff::jvp, &p, k, &[&vt, &dkt]);
        let (e, t) = jvp_lj(&p, k, &vt, dk).unwrap();
        same(&want[0], &values(&e), "jvp_: value");
        same(&want[1], &values(&t), "jvp_: tangent");

        let one = Tensor::scalar(1.5f64);
        let want = lj_general(autodiff::vjp, &p, k, &[&one]);
        let (_, (gp, gk)) = vjp_lj(&p, k, &one).unwrap();
        same(&want[1], &values(&gp), "vjp_: ∂p");
        same(&want[2], &[gk], "vjp_: ∂k");

        let want = lj_general(autodiff::jacobian, &p, k, &[]);
        let (jp, jk) = jacobian_lj(&p, k).unwrap();
        same(&want[1], &values(&jp), "jacobian_: ∂p");
        same(&want[2], &values(&jk), "jacobian_: ∂k");

        let want = lj_general(autodiff::hessian, &p, k, &[]);
        // Blocks ((∂p∂p, ∂p∂k), (∂k∂p, ∂k∂k)), after the value.
        let ((hpp, hpk), (hkp, hkk)) = hessian_lj(&p, k).unwrap();
        prop_assert_eq!(want.len(), 5);
        for (i, h) in [hpp, hpk, hkp, hkk].iter().enumerate() {
            same(&want[1 + i], &values(h), "hessian_");
        }

        let want = lj_general(autodiff::hvp, &p, k, &[&vt, &dkt]);
        let (hvp, hvk) = hvp_lj(&p, k, &vt, dk).unwrap();
        same(&want[1], &values(&hvp), "hvp_: p");
        same(&want[2], &[hvk], "hvp_: k");
    }
}

#[test]
fn warm_companions_allocate_one_buffer_per_small_result() {
    let p = Tensor::from_slice(&[0.0, 0.0, 1.1, 0.1, 0.4, 1.2], [6]);
    // The counter sees allocations at all.
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 8]))), 1);
    type Call<'a> = (&'a str, usize, &'a dyn Fn() -> Results);
    let calls: [Call<'_>; 4] = [
        // The value and the `[6]` gradient (the `f64` gradient is a number).
        ("value_and_grad_", 2, &|| {
            let (v, (g, _)) = value_and_grad_lj(&p, 5.0).unwrap();
            (v, Some(g))
        }),
        ("grad_", 1, &|| (grad_lj(&p, 5.0).unwrap().0, None)),
        ("plain call", 1, &|| (lj(&p, 5.0), None)),
        // A scalar output's Jacobian blocks have the parameters' shapes:
        // `[6]` for `p`, `[]` for `k` (a tensor: one allocation each).
        ("jacobian_", 2, &|| {
            let (a, b) = jacobian_lj(&p, 5.0).unwrap();
            (a, Some(b))
        }),
    ];
    for (what, want, call) in calls {
        drop(call()); // cold: trace, differentiate, compile
        only_results_allocate(what, want, call);
    }
    // A `[6, 6]` Hessian block is over the size a tensor owns: its values
    // are shared behind an `Arc` (two allocations, the vector and the
    // `Arc`); the blocks `[6]`, `[6]` and `[]` are owned (one each). The
    // value, skipped, is a number.
    let hess = || hessian_lj(&p, 5.0).unwrap();
    drop(hess());
    only_results_allocate("hessian_", 5, &hess);
}

/// The tensors a warm call returns.
type Results = (Tensor, Option<Tensor>);

/// Checks that 20 warm calls of `call`, whose results need `want`
/// allocations, allocate those and nothing else while their results are
/// kept alive (fewer when the thread still keeps the allocations of
/// earlier results for reuse: at most 8 vectors and 8 shared storages,
/// `rlx_runtime`'s `pool::KEEP`), and nothing at all when each call's
/// results are dropped before the next call.
fn only_results_allocate<T>(what: &str, want: usize, call: &dyn Fn() -> T) {
    let mut kept = Vec::with_capacity(20);
    let n = allocations(|| {
        for _ in 0..20 {
            kept.push(call());
        }
    });
    assert!(
        n <= 20 * want && n + 16 >= 20 * want,
        "20 warm {what}: {n} allocations"
    );
    drop(kept);
    let n = allocations(|| {
        for _ in 0..20 {
            drop(call());
        }
    });
    assert_eq!(
        n, 0,
        "warm {what} whose results are dropped: {n} allocations"
    );
}

#[test]
fn a_tensor_stays_at_most_sixty_four_bytes() {
    // A warm companion returns its tensors by value, moved through every
    // frame between the native code and the caller: a `(Tensor, Tensor)`
    // of 128 bytes is moved with 16-byte copies, one of 160 bytes (80-byte
    // tensors) called `memcpy`, whose wide loads of the narrow stores that
    // had just built the result waited for them (criterion's mean of the
    // `[6]` LJ `value_and_grad_`). 64 = an owned or shared buffer (32), a
    // shape (24: two inline dimensions, or a shared list) and the trace
    // it was created in (8).
    assert!(std::mem::size_of::<Tensor>() <= 64);
    assert!(std::mem::size_of::<rlx::Result<(Tensor, Tensor)>>() <= 128);
    assert_eq!(
        std::mem::size_of::<Option<Tensor>>(),
        std::mem::size_of::<Tensor>()
    );
}

#[test]
fn a_warm_jacobian_builds_only_the_jacobian() {
    // `jacobian_` does not return the function's `[2]` value: it is
    // computed with the Jacobian but never built as a tensor.
    let y = Tensor::from_slice(&[2.0, 0.0], [2]);
    let yp = Tensor::from_slice(&[2.0, 0.1], [2]);
    let call = || jacobian_residual(&y, &yp, 1e-3).unwrap();
    drop(call());
    only_results_allocate("jacobian_ of a [2] -> [2] map", 1, &call);
    // Its values are the general plan's.
    let g = graph_residual(&y, &yp, 1e-3).unwrap();
    let exe = general(&autodiff::jacobian(&g, &[0]).unwrap());
    let want = exe.run(&[&y, &yp, &Tensor::scalar(1e-3)]).unwrap();
    let j = jacobian_residual(&y, &yp, 1e-3).unwrap();
    same(&values(&want[1]), &values(&j), "jacobian_");
    assert_eq!(j.shape().dims(), &[2, 2]);
}

#[test]
fn new_signatures_after_warm_hits_take_their_own_plans() {
    // One tensor argument: an `f64` one is read in place by the native
    // code; the others (`f32`, other shapes) are copied. Each signature,
    // cold and warm, in an order that changes it after every warm hit,
    // gives the bits of its general plan.
    let xs: Vec<f64> = (0..8).map(|i| 0.3 * i as f64 - 1.0).collect();
    let x32: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    let cases = [
        Tensor::from_slice(&xs, [8]),
        Tensor::from_slice(&xs[..5], [5]),
        Tensor::from_slice(&x32, [8]),
        Tensor::from_slice(&xs, [2, 4]),
        Tensor::from_slice(&xs, [8]),
    ];
    for x in &cases {
        let g = graph_wide(x).unwrap();
        let exe = general(&autodiff::value_and_grad(&g, &[0]).unwrap());
        let want = exe.run(&[x]).unwrap();
        for _ in 0..2 {
            let (v, gx) = value_and_grad_wide(x).unwrap();
            same(&values(&want[0]), &values(&v), "value_and_grad_: value");
            same(&values(&want[1]), &values(&gx), "value_and_grad_: gradient");
            assert_eq!(gx.dtype(), x.dtype());
            assert_eq!(gx.shape(), x.shape());
            same(&values(&want[1]), &values(&grad_wide(x).unwrap()), "grad_");
            same(&values(&want[0]), &values(&wide(x)), "plain call");
        }
    }
    // A bad signature after a warm hit: the same error every time, and
    // the warm signature still works afterwards.
    let y = Tensor::from_slice(&[2.0, 0.0], [2]);
    let warm = jacobian_residual(&y, &y, 0.1).unwrap();
    let bad = Tensor::from_slice(&[1.0, 2.0, 3.0], [3]);
    let e1 = jacobian_residual(&bad, &y, 0.1).unwrap_err().to_string();
    let e2 = jacobian_residual(&bad, &y, 0.1).unwrap_err().to_string();
    assert_eq!(e1, e2);
    assert!(e1.contains("[3]") && e1.contains("[2]"), "{e1}");
    same(
        &values(&warm),
        &values(&jacobian_residual(&y, &y, 0.1).unwrap()),
        "after an error",
    );
}

#[test]
fn a_warm_run_into_of_a_companion_plan_allocates_nothing() {
    let p = Tensor::from_slice(&[0.0, 0.0, 1.1, 0.1, 0.4, 1.2], [6]);
    let g = graph_lj(&p, 5.0).unwrap();
    let exe = rlx::compile(&autodiff::value_and_grad(&g, &[0, 1]).unwrap()).unwrap();
    let k = Tensor::scalar(5.0f64);
    let mut outs = exe.run(&[&p, &k]).unwrap();
    let n = allocations(|| exe.run_into(&[&p, &k], &mut outs).unwrap());
    assert_eq!(n, 0, "warm run_into");
}

#[test]
fn eager_ops_on_small_tensors_allocate_only_their_result() {
    let a = Tensor::from_slice(&[4.0, 1.0, 2.0, 3.0], [2, 2]);
    let b = Tensor::from_slice(&[1.0, 2.0], [2, 1]);
    let v = Tensor::from_slice(&[0.5, -0.5], [2]);
    let ops: [(&str, &dyn Fn()); 4] = [
        ("+", &|| drop(&v + &v)),
        ("reshape", &|| drop(b.reshape([2]))),
        ("try_solve 2×2", &|| drop(a.try_solve(&b).unwrap())),
        ("to_vec", &|| drop(v.to_vec::<f64>().unwrap())),
    ];
    for (what, op) in ops {
        op();
        let n = allocations(op);
        assert_eq!(n, 1, "{what} allocated {n} times");
    }
    // The solve is right: [[4, 1], [2, 3]] x = [1, 2].
    let x = a.try_solve(&b).unwrap().to_vec::<f64>().unwrap();
    assert!(
        (4.0 * x[0] + x[1] - 1.0).abs() < 1e-15 && (2.0 * x[0] + 3.0 * x[1] - 2.0).abs() < 1e-15
    );
}

#[test]
fn van_der_pol_newton_step_through_companions() {
    // One Newton iteration of implicit Euler, against the hand-written one.
    let (y0, h) = ([2.0, 0.0], 1e-3);
    let y = Tensor::from_slice(&y0, [2]);
    let r = residual(&y, &y, h);
    let j = jacobian_residual(&y, &y, h).unwrap();
    let dx = j.try_solve(&r.reshape([2, 1])).unwrap();
    let next = (&y - dx.reshape([2])).to_vec::<f64>().unwrap();
    let (r0, r1) = (
        -h * y0[1],
        -h * 1000.0 * ((1.0 - y0[0] * y0[0]) * y0[1] - y0[0]),
    );
    let (a, b) = (1.0, -h);
    let c = -h * 1000.0 * (-2.0 * y0[0] * y0[1] - 1.0);
    let d = 1.0 - h * 1000.0 * (1.0 - y0[0] * y0[0]);
    let det = a * d - b * c;
    let want = [
        y0[0] - (d * r0 - b * r1) / det,
        y0[1] - (a * r1 - c * r0) / det,
    ];
    for (g, w) in next.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
            "{next:?} vs {want:?}"
        );
    }
}

#[test]
fn small_tensors_copy_on_write_at_the_threshold() {
    // 16 elements are owned by the tensor, 17 shared: both behave as values.
    for n in [1usize, 15, 16, 17, 64] {
        let data: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let a = Tensor::from_slice(&data, [n]);
        let mut b = a.clone();
        let r = a.reshape([1, n]);
        let Storage::F64(w) = b.storage_mut().unwrap() else {
            panic!("f64");
        };
        w[0] = -1.0;
        assert_eq!(a.to_vec::<f64>().unwrap(), data, "n = {n}: the original");
        assert_eq!(r.to_vec::<f64>().unwrap(), data, "n = {n}: a reshape");
        assert_eq!(b.to_vec::<f64>().unwrap()[0], -1.0, "n = {n}: the clone");
        // Writing a tensor no other shares changes it in place.
        drop(r);
        let mut a = a;
        let Storage::F64(w) = a.storage_mut().unwrap() else {
            panic!("f64");
        };
        w[n - 1] = 7.0;
        assert_eq!(a.to_vec::<f64>().unwrap()[n - 1], 7.0);
        // Moved out when unshared, copied when shared.
        let c = a.clone();
        assert_eq!(a.into_vec::<f64>().unwrap(), c.to_vec::<f64>().unwrap());
        assert_eq!(c.clone().into_vec::<f64>().unwrap().len(), n);
    }
}

#[test]
fn rank_five_shapes_and_empty_tensors_work_as_before() {
    // Shapes of rank ≤ 4 are inline, longer ones on the heap.
    let t = Tensor::from_slice(&[1.0f32, 2.0], [1, 1, 2, 1, 1]);
    assert_eq!(t.shape().dims(), &[1, 1, 2, 1, 1]);
    let s = t.reshape([2]).sum_all();
    assert_eq!(s.item::<f32>().unwrap(), 3.0);
    let e = Tensor::zeros([0, 3], DType::F64);
    assert_eq!(e.to_vec::<f64>().unwrap(), Vec::<f64>::new());
    assert_eq!((&e + &e).shape().dims(), &[0, 3]);
}

#[test]
fn what_the_fast_path_declines_takes_the_general_path() {
    // Over the scalarisation threshold: the general plan, same results as
    // below it.
    for n in [8usize, 200] {
        let xs: Vec<f64> = (0..n).map(|i| 0.01 * i as f64).collect();
        let x = Tensor::from_slice(&xs, [n]);
        let (v, g) = value_and_grad_wide(&x).unwrap();
        let want: f64 = xs.iter().map(|x| x.sin() * x).sum();
        assert!((v.item::<f64>().unwrap() - want).abs() <= 1e-12 * (1.0 + want.abs()));
        for (gi, xi) in g.to_vec::<f64>().unwrap().iter().zip(&xs) {
            assert!((gi - (xi.cos() * xi + xi.sin())).abs() <= 1e-14, "n = {n}");
        }
    }
    // A wrong shape after a warm call of another: an error naming it.
    let x = Tensor::from_slice(&[1.0, 2.0], [2]);
    residual(&x, &x, 0.1);
    let bad = Tensor::from_slice(&[1.0, 2.0, 3.0], [3]);
    let e = jacobian_residual(&bad, &x, 0.1).unwrap_err();
    assert!(e.to_string().contains("shape"), "{e}");
    // f32 arguments: a new signature, results of their dtype.
    let x32 = Tensor::from_slice(&[0.5f32, 1.5], [2]);
    let (v, g) = value_and_grad_wide(&x32).unwrap();
    assert_eq!(v.dtype(), DType::F32);
    assert_eq!(g.dtype(), DType::F32);
    // Inside a trace the companion is inlined, not run.
    let t = rlx::trace::Trace::enter();
    let p = t.input("p", Shape::from([6]), DType::F64);
    let (e, _) = value_and_grad_lj(&p, 5.0).unwrap();
    assert!(e.is_traced());
    drop(t);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// An eager binary op on small `f64` tensors (equal shapes, or a 0-d
    /// operand on either side) gives the bits of the general kernel: the
    /// same values padded past the small-tensor threshold (17 elements)
    /// take the general path, and their first elements must agree.
    #[test]
    fn eager_binary_ops_on_small_tensors_equal_the_general_kernel(
        a in prop::collection::vec(prop_oneof![-3.0f64..3.0, Just(0.0), Just(f64::INFINITY)], 1..=16),
        b in prop::collection::vec(prop_oneof![-3.0f64..3.0, Just(0.0), Just(-0.0)], 16),
        s in -2.0f64..2.0,
    ) {
        let n = a.len();
        let pad = |v: &[f64]| {
            let mut p = v.to_vec();
            p.resize(17, 1.0);
            Tensor::from_slice(&p, [17])
        };
        let (x, y) = (Tensor::from_slice(&a, [n]), Tensor::from_slice(&b[..n], [n]));
        let (bx, by) = (pad(&a), pad(&b[..n]));
        let k = Tensor::scalar(s);
        // Every arithmetic binary op (the logical ones take `bool`s).
        for op in BinaryOp::ALL.into_iter().filter(|b| !matches!(b, BinaryOp::And | BinaryOp::Or)) {
            let bin = |l: &Tensor, r: &Tensor| Tensor::apply(Op::Binary(op), &[l, r]).unwrap();
            let cases = [
                (bin(&x, &y), bin(&bx, &by), "equal shapes"),
                (bin(&x, &k), bin(&bx, &k), "0-d right"),
                (bin(&k, &y), bin(&k, &by), "0-d left"),
            ];
            for (small, big, what) in cases {
                prop_assert_eq!(small.shape().dims(), &[n]);
                same(&values(&big)[..n], &values(&small), &format!("{op:?} {what}"));
            }
        }
        let r = x.reshape([n, 1]);
        prop_assert_eq!(r.shape().dims(), &[n, 1]);
        same(&a, &values(&r), "reshape");
    }
}

/// What the eager fast path cannot judge still gets the general path's
/// errors: shapes that do not match or broadcast, a reshape to another
/// element count, `&&` on floats, mixed dtypes.
#[test]
fn eager_fast_path_leaves_errors_to_the_general_path() {
    let v = Tensor::from_slice(&[1.0, 2.0], [2]);
    let w = Tensor::from_slice(&[1.0, 2.0, 3.0], [3]);
    let f = Tensor::from_slice(&[1.0f32, 2.0], [2]);
    let err = |r: Result<Tensor>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let e = err(Tensor::apply(Op::Binary(BinaryOp::Add), &[&v, &w]));
    assert!(e.contains("[2]") && e.contains("[3]"), "{e}");
    let e = err(v.try_reshape([3]));
    assert!(e.contains("reshape") && e.contains("2 elements"), "{e}");
    let e = err(Tensor::apply(Op::Binary(BinaryOp::And), &[&v, &v]));
    assert!(e.contains("bool"), "{e}");
    let e = err(Tensor::apply(Op::Binary(BinaryOp::Mul), &[&v, &f]));
    assert!(e.contains("f32") && e.contains("f64"), "{e}");
    // Broadcasting other than a 0-d operand is the general kernel's.
    let col = Tensor::from_slice(&[1.0, 2.0], [2, 1]);
    let out = Tensor::apply(Op::Binary(BinaryOp::Sub), &[&col, &v]).unwrap();
    assert_eq!(values(&out), [0.0, -1.0, 1.0, 0.0]);
}

/// An eager solve of a small `f64` system gives the bits of the general
/// kernel (the same system with more right-hand sides than a small tensor
/// holds), and a singular system is still the general path's error.
#[test]
fn eager_small_solve_equals_the_general_kernel() {
    let systems: [(usize, Vec<f64>); 3] = [
        (2, vec![4.0, 1.0, 2.0, 3.0]),
        (3, vec![0.5, 2.0, -1.0, 3.0, 0.25, 1.5, -2.0, 1.0, 4.0]),
        (2, vec![1.0, -1e3, 2.0, 1.0 - 1e-3]),
    ];
    for (n, a) in systems {
        let am = Tensor::from_slice(&a, [n, n]);
        let rhs: Vec<f64> = (0..n).map(|i| 0.3 + i as f64 * 1.7).collect();
        let small = am.try_solve(&Tensor::from_slice(&rhs, [n, 1])).unwrap();
        // Column 0 is `rhs`, the other 8 columns something else.
        let wide: Vec<f64> = (0..n * 9)
            .map(|e| if e % 9 == 0 { rhs[e / 9] } else { e as f64 })
            .collect();
        let big = am.try_solve(&Tensor::from_slice(&wide, [n, 9])).unwrap();
        let col: Vec<f64> = values(&big).chunks(9).map(|r| r[0]).collect();
        assert_eq!(small.shape().dims(), &[n, 1]);
        same(&col, &values(&small), &format!("solve {n}×{n}"));
    }
    let singular = Tensor::from_slice(&[1.0, 2.0, 2.0, 4.0], [2, 2]);
    let e = singular
        .try_solve(&Tensor::from_slice(&[1.0, 1.0], [2, 1]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("singular"), "{e}");
}

/// Runs transform `t` of `lj` through its plan cache's general path
/// (`Function::run`, which never takes the pinned small-tensor path).
fn lj_run(t: Transform, p: &Tensor, k: f64, extras: &[Arg<'_>]) -> Result<Vec<Vec<f64>>> {
    let outs =
        __rlx_function_lj().run(t, &[Arg::from(p), Arg::F64(k)], extras, &(), __rlx_trace_lj)?;
    Ok(outs.into_iter().map(|v| values(&v.into_tensor())).collect())
}

/// Whether the pinned small-tensor path serves transform `t` of `lj` on
/// these arguments.
fn lj_pinned(t: Transform, p: &Tensor, k: f64, extras: &[Arg<'_>]) -> bool {
    let args = [Arg::from(p), Arg::F64(k)];
    let f = __rlx_function_lj();
    f.run_small(t, &args, extras, &(), 0, |_| Some(()))
        .is_some()
}

#[test]
fn warm_companions_take_the_pinned_path_with_the_bits_of_the_general_path() {
    let p = Tensor::from_slice(&[0.0, 0.1, 1.2, -0.1, 0.5, 1.0], [6]);
    let v = Tensor::from_slice(&[0.5, -0.25, 1.0, 0.0, -1.0, 0.75], [6]);
    let k = 4.0;
    let one = Tensor::scalar(1.5f64);
    // Twice each: the first call may pin, the second is warm.
    for round in 0..2 {
        let want = lj_run(Transform::Call, &p, k, &[]).unwrap();
        same(&want[0], &values(&lj(&p, k)), "plain call");

        let want = lj_run(Transform::Grad, &p, k, &[]).unwrap();
        let (e, (gp, gk)) = value_and_grad_lj(&p, k).unwrap();
        same(&want[0], &values(&e), "value_and_grad_: value");
        same(&want[1], &values(&gp), "value_and_grad_: ∂p");
        same(&want[2], &[gk], "value_and_grad_: ∂k");
        let (gp, gk) = grad_lj(&p, k).unwrap();
        same(&want[1], &values(&gp), "grad_: ∂p");
        same(&want[2], &[gk], "grad_: ∂k");
        // `grad_`'s own plan (the gradient alone) gives the same bits.
        let only = lj_run(Transform::GradOnly, &p, k, &[]).unwrap();
        same(&only[0], &values(&gp), "GradOnly: ∂p");
        same(&only[1], &[gk], "GradOnly: ∂k");

        let tangents = [Arg::from(&v), Arg::F64(0.5)];
        let want = lj_run(Transform::Jvp, &p, k, &tangents).unwrap();
        let (e, t) = jvp_lj(&p, k, &v, 0.5).unwrap();
        same(&want[0], &values(&e), "jvp_: value");
        same(&want[1], &values(&t), "jvp_: tangent");

        let want = lj_run(Transform::Vjp, &p, k, &[Arg::from(&one)]).unwrap();
        let (e, (gp, gk)) = vjp_lj(&p, k, &one).unwrap();
        same(&want[0], &values(&e), "vjp_: value");
        same(&want[1], &values(&gp), "vjp_: ∂p");
        same(&want[2], &[gk], "vjp_: ∂k");

        let want = lj_run(Transform::Jacobian, &p, k, &[]).unwrap();
        let (jp, jk) = jacobian_lj(&p, k).unwrap();
        same(&want[1], &values(&jp), "jacobian_: ∂p");
        same(&want[2], &values(&jk), "jacobian_: ∂k");

        let want = lj_run(Transform::Hessian, &p, k, &[]).unwrap();
        let ((hpp, hpk), (hkp, hkk)) = hessian_lj(&p, k).unwrap();
        for (i, h) in [hpp, hpk, hkp, hkk].iter().enumerate() {
            same(&want[1 + i], &values(h), "hessian_");
        }

        let want = lj_run(Transform::Hvp, &p, k, &tangents).unwrap();
        let (hvp, hvk) = hvp_lj(&p, k, &v, 0.5).unwrap();
        same(&want[1], &values(&hvp), "hvp_: ∂p");
        same(&want[2], &[hvk], "hvp_: ∂k");

        if round == 1 {
            // Every one of these calls was served by the pinned path.
            for (t, extras) in [
                (Transform::Call, &[][..]),
                (Transform::Grad, &[]),
                (Transform::GradOnly, &[]),
                (Transform::Jvp, &tangents),
                (Transform::Vjp, &[Arg::from(&one)]),
                (Transform::Jacobian, &[]),
                (Transform::Hessian, &[]),
                (Transform::Hvp, &tangents),
            ] {
                assert!(lj_pinned(t, &p, k, extras), "{t:?}");
            }
        }
    }
    // Another dtype, shape or rank after the warm hits: the general path,
    // its own results; the pinned signature still served afterwards.
    let p32 = Tensor::from_slice(&[0.0f32, 0.1, 1.2, -0.1, 0.5, 1.0], [6]);
    assert!(!lj_pinned(Transform::Grad, &p32, k, &[]));
    let e = grad_lj(&p32, k).unwrap_err().to_string();
    let want = lj_run(Transform::Grad, &p32, k, &[])
        .unwrap_err()
        .to_string();
    assert_eq!(e, want, "an f32 tensor with an f64 spring constant");
    for bad in [
        Tensor::from_slice(&[0.0; 8], [8]),
        Tensor::from_slice(&[0.0; 6], [3, 2]),
    ] {
        assert!(!lj_pinned(Transform::Grad, &bad, k, &[]));
        // The same error as the general path gives (`slice` out of range
        // for `[8]` is fine, but `[3, 2]` slices the wrong axis).
        match (grad_lj(&bad, k), lj_run(Transform::Grad, &bad, k, &[])) {
            (Ok((gp, gk)), Ok(want)) => {
                same(&want[1], &values(&gp), "another signature: ∂p");
                same(&want[2], &[gk], "another signature: ∂k");
            }
            (Err(e), Err(want)) => assert_eq!(e.to_string(), want.to_string()),
            (got, want) => panic!("{:?} vs {:?}", got.is_ok(), want.is_ok()),
        }
    }
    assert!(lj_pinned(Transform::Grad, &p, k, &[]));
    // A wrong tangent shape: the general path's error.
    let short = Tensor::from_slice(&[0.5; 4], [4]);
    assert!(!lj_pinned(
        Transform::Jvp,
        &p,
        k,
        &[Arg::from(&short), Arg::F64(0.5)]
    ));
    let e = jvp_lj(&p, k, &short, 0.5).unwrap_err();
    let want = lj_run(Transform::Jvp, &p, k, &[Arg::from(&short), Arg::F64(0.5)]);
    assert_eq!(e.to_string(), want.unwrap_err().to_string());
    assert!(e.to_string().contains("tangent_p"), "{e}");
}

#[test]
fn inside_a_trace_a_warm_signature_is_inlined_not_run() {
    let p = Tensor::from_slice(&[0.0, 0.1, 1.2, -0.1, 0.5, 1.0], [6]);
    grad_lj(&p, 5.0).unwrap();
    grad_lj(&p, 5.0).unwrap();
    let t = rlx::trace::Trace::enter();
    // A traced argument of the pinned signature's type.
    let x = t.input("p", Shape::from([6]), DType::F64);
    let (gx, _) = grad_lj(&x, 5.0).unwrap();
    assert!(gx.is_traced());
    let e = lj(&x, 5.0);
    assert!(e.is_traced());
    drop(t);
    // Afterwards the warm signature runs again.
    assert!(!grad_lj(&p, 5.0).unwrap().0.is_traced());
}

/// `Σ sin(s · x)` for a static scale `s`: no entry is pinned, every call
/// goes through the plan cache, keyed by `s`.
#[differentiable]
fn scaled_sines(x: &Tensor, s: i32) -> Tensor {
    (x * f64::from(s)).sin().sum_all()
}

#[test]
fn static_arguments_keep_their_own_plans() {
    let xs = [0.25, -0.5, 1.0];
    let x = Tensor::from_slice(&xs, [3]);
    for s in [1, 3, 1, 2, 3] {
        for _ in 0..2 {
            let (v, g) = value_and_grad_scaled_sines(&x, s).unwrap();
            let sf = f64::from(s);
            let want: f64 = xs.iter().map(|x| (sf * x).sin()).sum();
            assert!((v.item::<f64>().unwrap() - want).abs() < 1e-14, "s = {s}");
            for (gi, xi) in values(&g).iter().zip(xs) {
                assert!((gi - sf * (sf * xi).cos()).abs() < 1e-14, "s = {s}");
            }
        }
    }
    let f = __rlx_function_scaled_sines();
    let args = [Arg::from(&x)];
    assert!(f
        .run_small(Transform::Grad, &args, &[], &(1,), 0, |_| Some(()))
        .is_none());
}
