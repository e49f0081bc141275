//! Outputs a fused loop writes whole (`PlanStats::unzeroed_outputs`): a
//! run whose output storage is fresh (moved out to the caller by the
//! previous call, as `run_args` does) allocates it without zeros and lets
//! the loop fill it. Every result of such a run must equal, bit for bit,
//! the same plan run into zeroed outputs (`run`) and the plan without
//! fusion through movement ops (separate steps, zeroed outputs), and an
//! output that the loop writes only in part must keep its zeros.

use rlx_core::autodiff::{batch_jacobian, value_and_grad};

use crate::common::{assert_same_values, tensor, values};
use crate::device::device;
use crate::lj::lj;
use rlx_runtime::compile::{compile_with, Options};
use rlx_runtime::{Arg, DType, Executable, Graph, Tensor, Value};

/// `g` planned without fusion through movement ops (each piece of a
/// concat its own step).
fn unfused(g: &Graph) -> Executable {
    let options = Options {
        fuse_movement: false,
        ..Options::general()
    };
    compile_with(g, &options).unwrap()
}

/// The outputs of one `run_args` call, numbers as 0-d tensors.
fn tensors(exe: &Executable, inputs: &[&Tensor]) -> Vec<Tensor> {
    let args: Vec<Arg<'_>> = inputs.iter().map(|&t| Arg::Tensor(t)).collect();
    exe.run_args(&args)
        .unwrap()
        .into_iter()
        .map(|v| match v {
            Value::Tensor(t) => t,
            Value::F64(x) => Tensor::from_slice(&[x], []),
            other => panic!("an f64 output, got {other:?}"),
        })
        .collect()
}

/// The 3-terminal device of `benches/common/device.rs` over `n` items,
/// `u: [n, 3]` → `[n, 3]`: a diode `IS (exp((v0 − v1)/VT) − 1)`, a tanh
/// channel `0.5 tanh(2 (v1 − v2)) (1 + 0.1 v0)`, a leak `0.01 v0 v2`, the
/// three terminal currents concatenated (every Jacobian entry is
/// computed, none is an input column).
fn device3(n: usize) -> Graph {
    let (is, vt) = (1e-3, 0.05);
    let mut g = Graph::new();
    let u = g.input("u", [n, 3], DType::F64);
    let v: Vec<_> = (0..3)
        .map(|k| g.slice_range(u, k..k + 1, 1).unwrap())
        .collect();
    let mut c = |x: f64| g.scalar(x, DType::F64);
    let (inv_vt, is_c, two, half, tenth, one, leak, minus) = (
        c(1.0 / vt),
        c(is),
        c(2.0),
        c(0.5),
        c(0.1),
        c(1.0),
        c(0.01),
        c(-1.0),
    );
    let d = g.sub(v[0], v[1]).unwrap();
    let d = g.mul(d, inv_vt).unwrap();
    let e = g.exp(d).unwrap();
    let e = g.mul(e, is_c).unwrap();
    let id = g.sub(e, is_c).unwrap();
    let s = g.sub(v[1], v[2]).unwrap();
    let s = g.mul(s, two).unwrap();
    let t = g.tanh(s).unwrap();
    let t = g.mul(t, half).unwrap();
    let w = g.mul(v[0], tenth).unwrap();
    let w = g.add(w, one).unwrap();
    let it = g.mul(t, w).unwrap();
    let il = g.mul(v[0], v[2]).unwrap();
    let il = g.mul(il, leak).unwrap();
    let i0 = g.add(id, il).unwrap();
    let i1 = g.sub(it, id).unwrap();
    let i2 = g.add(it, il).unwrap();
    let i2 = g.mul(i2, minus).unwrap();
    let cat = g.concat(&[i0, i1, i2], 1).unwrap();
    g.set_outputs(vec![cat]);
    g
}

/// Runs `g`'s general plan three times through `run_args` (the second
/// and third into fresh storage), and checks every result against `run`
/// of the same plan and of the unfused plan, bit for bit. Returns the
/// plan.
fn check_fresh(g: &Graph, inputs: &[&Tensor], what: &str) -> Executable {
    let exe = compile_with(g, &Options::general()).unwrap();
    let zeroed = exe.run(inputs).unwrap();
    let plain = unfused(g).run(inputs).unwrap();
    for call in 0..3 {
        let fresh = tensors(&exe, inputs);
        for (j, ((a, b), c)) in fresh.iter().zip(&zeroed).zip(&plain).enumerate() {
            assert_same_values(a, b, &format!("{what}: call {call}, output {j} vs run"));
            assert_same_values(a, c, &format!("{what}: call {call}, output {j} vs unfused"));
        }
    }
    exe
}

#[test]
fn per_item_jacobians_are_written_whole_without_zeros() {
    let n = 3000;
    let mut j = batch_jacobian(&device3(n), &[0]).unwrap();
    // The Jacobian alone, as `batch_jacobian_` returns it: every entry is
    // computed by the one loop.
    let last = *j.outputs().last().unwrap();
    j.set_outputs(vec![last]);
    let j = rlx_core::passes::dce(&j).unwrap();
    let u = tensor(&values(3 * n, 3, -0.2, 0.2), &[n, 3], DType::F64);
    let exe = check_fresh(&j, &[&u], "device jacobian");
    let s = exe.stats();
    assert_eq!((s.steps, s.fused_loops), (1, 1), "{s:?}");
    assert_eq!(s.unzeroed_outputs, 1, "{s:?}");
    assert_eq!(unfused(&j).stats().unzeroed_outputs, 0);
}

#[test]
fn a_jacobian_with_a_copied_column_is_zeroed() {
    // The shared device's ∂i0/∂v2 is the input column v0, copied by a
    // step of its own: the loop writes the other eight entries, so the
    // Jacobian is not written whole by it. Its currents are.
    let n = 3000;
    let j = batch_jacobian(&device(n), &[0]).unwrap();
    let u = tensor(&values(3 * n, 3, -0.2, 0.2), &[n, 3], DType::F64);
    let exe = check_fresh(&j, &[&u], "shared device jacobian");
    assert_eq!(exe.stats().unzeroed_outputs, 1, "{:?}", exe.stats());
}

#[test]
fn an_output_written_in_part_by_the_loop_keeps_its_zeros() {
    // ∂/∂x Σ exp(x[1..n-1]): the gradient is the cotangent padded with a
    // zero at each end; the loop writes the middle, the ends are zeros
    // of the fill, so the fill must stay.
    let n = 2000;
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let mid = g.slice_range(x, 1..1 + n - 2, 0).unwrap();
    let e = g.exp(mid).unwrap();
    let f = g.sum_all(e).unwrap();
    g.set_outputs(vec![f]);
    let vg = value_and_grad(&g, &[0]).unwrap();
    let xv = tensor(&values(n, 7, -1.0, 1.0), &[n], DType::F64);
    let exe = check_fresh(&vg, &[&xv], "padded gradient");
    assert_eq!(exe.stats().unzeroed_outputs, 0, "{:?}", exe.stats());
    let grad = tensors(&exe, &[&xv])
        .pop()
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!((grad[0], grad[n - 1]), (0.0, 0.0));
    assert!(grad[1..n - 1].iter().all(|&v| v > 0.0));
}

#[test]
fn concat_pieces_one_loop_writes_make_a_whole_output() {
    // Three pieces of one loop on the last axis: written whole. With a
    // fourth piece that is the input itself (a copy step), the loop's
    // writes no longer cover the output.
    let (rows, cols) = (700, 3);
    for with_input in [false, true] {
        let mut g = Graph::new();
        let x = g.input("x", [rows, cols], DType::F64);
        let a = g.exp(x).unwrap();
        let b = g.sin(x).unwrap();
        let c = g.mul(a, b).unwrap();
        let pieces = if with_input {
            vec![a, c, b, x]
        } else {
            vec![a, c, b]
        };
        let cat = g.concat(&pieces, 1).unwrap();
        g.set_outputs(vec![cat]);
        let xv = tensor(
            &values(rows * cols, 5, -1.0, 1.0),
            &[rows, cols],
            DType::F64,
        );
        let exe = check_fresh(&g, &[&xv], &format!("concat, input piece {with_input}"));
        let s = exe.stats();
        assert_eq!(s.unzeroed_outputs, usize::from(!with_input), "{s:?}");
    }
}

#[test]
fn targets_written_whole_by_folded_reductions_and_reduce_steps_skip_zeros() {
    // The gradient of the broadcast LJ energy: its buffer slots hold
    // values of several sizes ([n, n, 3], [n, n], [n, 3]) over a call, and
    // the reductions folded into loops or run as steps of their own
    // finish into targets whose slot last held another value. Every call
    // with new positions must equal the first call of a new plan (all
    // slots freshly zeroed) and the unfused plan, bit for bit.
    let n = 24;
    let vg = value_and_grad(&lj(n), &[0]).unwrap();
    let mut eye = vec![0.0; n * n];
    (0..n).for_each(|i| eye[i * n + i] = 1.0);
    let eye = tensor(&eye, &[n, n], DType::F64);
    let exe = compile_with(&vg, &Options::general()).unwrap();
    let s = exe.stats();
    assert!(s.unzeroed_targets > 0, "{s:?}");
    for call in 0..4u64 {
        // Particles on a jittered grid: no two closer than about 0.5.
        let jitter = values(3 * n, 11 + call, -0.2, 0.2);
        let pos: Vec<f64> = (0..3 * n)
            .map(|k| {
                ((k / 3) as f64 * 1.3 + (k % 3) as f64 * 0.7) % 5.0 + (k % 3) as f64 + jitter[k]
            })
            .collect();
        let p = tensor(&pos, &[n, 3], DType::F64);
        let warm = tensors(&exe, &[&p, &eye]);
        let first = compile_with(&vg, &Options::general())
            .unwrap()
            .run(&[&p, &eye])
            .unwrap();
        let plain = unfused(&vg).run(&[&p, &eye]).unwrap();
        for (j, ((a, b), c)) in warm.iter().zip(&first).zip(&plain).enumerate() {
            assert_same_values(a, b, &format!("lj: call {call}, output {j} vs a new plan"));
            assert_same_values(a, c, &format!("lj: call {call}, output {j} vs unfused"));
        }
    }
}

#[test]
fn integer_reductions_keep_their_zeroed_targets() {
    // An integer sum folds into its target in place (from the identity):
    // it is not given room without zeros, and repeated calls agree.
    let mut g = Graph::new();
    let x = g.input("x", [40, 7], DType::I64);
    let s = g.sum(x, &[0]).unwrap();
    g.set_outputs(vec![s]);
    let exe = compile_with(&g, &Options::general()).unwrap();
    assert_eq!(exe.stats().unzeroed_targets, 0, "{:?}", exe.stats());
    let xv = tensor(&values(280, 3, -50.0, 50.0), &[40, 7], DType::I64);
    let want = exe.run(&[&xv]).unwrap();
    for _ in 0..3 {
        assert_same_values(&tensors(&exe, &[&xv])[0], &want[0], "integer sum");
    }
}
