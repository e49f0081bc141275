//! Dense Jacobians and Hessians computed from coloured products (when the
//! structural pattern needs few colours) against the basis-product ones
//! (`jacfwd`, `jacrev`, `dense_hessian`) and central finite differences:
//! random sparse graphs, several inputs of several shapes, the extended
//! Rosenbrock Hessian against its analytic form, and what non-finite
//! inputs give (entries outside the pattern are exactly zero).

use rlx_core::autodiff::{dense_hessian, hessian, jacfwd, jacobian, jacrev};
use rlx_core::sparsity::{hessian_pattern, jacobian_pattern};
use rlx_core::{DType, Graph, Literal, NodeId};
use rlx_runtime::{compile, Tensor};

mod common;

use common::Rng;

/// `a` shifted by `k` places along its only axis, zeros shifted in.
fn shift(g: &mut Graph, a: NodeId, n: usize, k: usize) -> NodeId {
    let s = g.slice_range(a, k..n, 0).unwrap();
    let z = g.full([k], 0.0, DType::F64);
    g.concat(&[s, z], 0).unwrap()
}

/// A random banded graph of `x: [n]` with output 0 of shape `[n]`:
/// element-wise ops and shifts by one or two places.
fn banded(rng: &mut Rng, n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let mut nodes = vec![x];
    for _ in 0..4 + rng.below(6) {
        let a = nodes[rng.below(nodes.len())];
        let b = nodes[rng.below(nodes.len())];
        let y = match rng.below(7) {
            0 => g.sin(a).unwrap(),
            1 => g.tanh(a).unwrap(),
            2 => g.mul(a, b).unwrap(),
            3 => g.add(a, b).unwrap(),
            4 => shift(&mut g, a, n, 1),
            5 => shift(&mut g, a, n, 2),
            _ => g.exp(a).unwrap(),
        };
        nodes.push(y);
    }
    let out = *nodes.last().unwrap();
    let y = g.add(out, x).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Vec<f64>> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    compile(g)
        .unwrap()
        .run(&refs)
        .unwrap()
        .iter()
        .map(|o| o.to_vec::<f64>().unwrap())
        .collect()
}

fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}: element {i}: {x} vs {y}"
        );
    }
}

/// The `[n, n]` Jacobian of output 0 by central differences.
fn fd_jacobian(g: &Graph, x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let c = compile(g).unwrap();
    let f = |x: &[f64]| -> Vec<f64> {
        let t = Tensor::from_slice(x, [n]);
        c.run(&[&t]).unwrap()[0].to_vec::<f64>().unwrap()
    };
    let m = f(x).len();
    let mut j = vec![0.0; m * n];
    for k in 0..n {
        let h = 1e-6 * (1.0 + x[k].abs());
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[k] += h;
        xm[k] -= h;
        let (fp, fm) = (f(&xp), f(&xm));
        for i in 0..m {
            j[i * n + k] = (fp[i] - fm[i]) / (2.0 * h);
        }
    }
    j
}

#[test]
fn coloured_jacobians_of_banded_graphs_equal_the_basis_ones_and_differences() {
    let mut rng = Rng::new(0xc0105);
    for case in 0..30 {
        let n = 12 + rng.below(40);
        let g = banded(&mut rng, n);
        let x: Vec<f64> = (0..n).map(|_| rng.uniform(-0.5, 0.5)).collect();
        let t = [Tensor::from_slice(&x, [n])];
        let coloured = run(&jacobian(&g, &[0]).unwrap(), &t);
        let fwd = run(&jacfwd(&g, &[0]).unwrap(), &t);
        let rev = run(&jacrev(&g, &[0]).unwrap(), &t);
        let what = format!("case {case}, n = {n}\n{g}");
        assert_eq!(coloured[0], fwd[0], "{what}: value");
        assert_close(&coloured[1], &fwd[1], 1e-13, &what);
        assert_close(&coloured[1], &rev[1], 1e-13, &what);
        assert_close(&coloured[1], &fd_jacobian(&g, &x), 1e-6, &what);
    }
}

/// `y: [20]` from `a: [4, 5]` (flattened, banded) and `b: [20]` (element-wise).
fn two_inputs() -> Graph {
    let mut g = Graph::new();
    let a = g.input("a", [4, 5], DType::F64);
    let b = g.input("b", [20], DType::F64);
    let af = g.reshape(a, [20]).unwrap();
    let s = shift(&mut g, af, 20, 1);
    let p = g.mul(af, s).unwrap();
    let e = g.exp(b).unwrap();
    let y = g.add(p, e).unwrap();
    let y = g.sin(y).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn coloured_jacobian_blocks_of_several_inputs_keep_their_shapes() {
    let g = two_inputs();
    let mut rng = Rng::new(7);
    let a: Vec<f64> = (0..20).map(|_| rng.uniform(-0.5, 0.5)).collect();
    let b: Vec<f64> = (0..20).map(|_| rng.uniform(-0.5, 0.5)).collect();
    let t = [Tensor::from_slice(&a, [4, 5]), Tensor::from_slice(&b, [20])];
    let j = jacobian(&g, &[0, 1]).unwrap();
    assert_eq!(j.shape(j.outputs()[1]).dims(), &[20, 4, 5]);
    assert_eq!(j.shape(j.outputs()[2]).dims(), &[20, 20]);
    let coloured = run(&j, &t);
    let dense = run(&jacfwd(&g, &[0, 1]).unwrap(), &t);
    assert_close(&coloured[1], &dense[1], 1e-14, "block of a");
    assert_close(&coloured[2], &dense[2], 1e-14, "block of b");
}

/// Extended Rosenbrock `Σ_{i<n-1} 100 (x_{i+1} − x_i²)² + (1 − x_i)²`.
fn rosenbrock(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let lo = g.slice_range(x, 0..n - 1, 0).unwrap();
    let hi = g.slice_range(x, 1..n, 0).unwrap();
    let sq = g.square(lo).unwrap();
    let d = g.sub(hi, sq).unwrap();
    let d2 = g.square(d).unwrap();
    let hundred = g.scalar(100.0, DType::F64);
    let a = g.mul(d2, hundred).unwrap();
    let one = g.scalar(1.0, DType::F64);
    let e = g.sub(one, lo).unwrap();
    let e2 = g.square(e).unwrap();
    let t = g.add(a, e2).unwrap();
    let f = g.sum_all(t).unwrap();
    g.set_outputs(vec![f]);
    g
}

/// Its Hessian, by hand: tridiagonal.
fn rosenbrock_hessian(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mut h = vec![0.0; n * n];
    for i in 0..n - 1 {
        h[i * n + i] += 1200.0 * x[i] * x[i] - 400.0 * x[i + 1] + 2.0;
        h[(i + 1) * n + i + 1] += 200.0;
        h[i * n + i + 1] -= 400.0 * x[i];
        h[(i + 1) * n + i] -= 400.0 * x[i];
    }
    h
}

#[test]
fn coloured_rosenbrock_hessian_is_the_analytic_one_at_every_size() {
    for n in [10, 100, 300] {
        let g = rosenbrock(n);
        let x: Vec<f64> = (0..n).map(|i| 0.3 + 0.01 * i as f64).collect();
        let t = [Tensor::from_slice(&x, [n])];
        let coloured = run(&hessian(&g, &[0]).unwrap(), &t);
        let dense = run(&dense_hessian(&g, &[0]).unwrap(), &t);
        assert_close(&coloured[1], &dense[1], 1e-13, &format!("n = {n}"));
        assert_close(
            &coloured[1],
            &rosenbrock_hessian(&x),
            1e-12,
            &format!("n = {n}"),
        );
    }
}

#[test]
fn coloured_hessian_blocks_of_several_inputs_equal_the_dense_ones() {
    let mut g = two_inputs();
    let y = g.outputs()[0];
    let w: Vec<f64> = (0..20).map(|i| 1.0 + 0.1 * i as f64).collect();
    let wc = g
        .constant(Literal::F64(w.into()), [20], DType::F64)
        .unwrap();
    let p = g.mul(y, wc).unwrap();
    let f = g.sum_all(p).unwrap();
    g.set_outputs(vec![f]);
    let mut rng = Rng::new(11);
    let a: Vec<f64> = (0..20).map(|_| rng.uniform(-0.5, 0.5)).collect();
    let b: Vec<f64> = (0..20).map(|_| rng.uniform(-0.5, 0.5)).collect();
    let t = [Tensor::from_slice(&a, [4, 5]), Tensor::from_slice(&b, [20])];
    let h = hessian(&g, &[0, 1]).unwrap();
    let dims: Vec<&[usize]> = h.outputs()[1..]
        .iter()
        .map(|&o| h.shape(o).dims())
        .collect();
    assert_eq!(
        dims,
        [&[4, 5, 4, 5][..], &[4, 5, 20], &[20, 4, 5], &[20, 20]]
    );
    let coloured = run(&h, &t);
    let dense = run(&dense_hessian(&g, &[0, 1]).unwrap(), &t);
    for k in 1..5 {
        assert_close(&coloured[k], &dense[k], 1e-13, &format!("block {k}"));
    }
}

#[test]
fn entries_outside_the_pattern_are_zero_and_inside_follow_ieee() {
    // y_i = x_i · x_{i+1}: a NaN at x_5 reaches rows 4 and 5 only; a −0.0
    // at x_12 meets the entries of rows 11 and 12 (compared bit for bit).
    let n = 16;
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let s = shift(&mut g, x, n, 1);
    let y = g.mul(x, s).unwrap();
    g.set_outputs(vec![y]);
    let mut v: Vec<f64> = (0..n).map(|i| 0.5 + i as f64).collect();
    v[5] = f64::NAN;
    v[9] = f64::INFINITY;
    v[12] = -0.0;
    let t = [Tensor::from_slice(&v, [n])];
    let j = run(&jacobian(&g, &[0]).unwrap(), &t)[1].clone();
    let dense = run(&jacfwd(&g, &[0]).unwrap(), &t)[1].clone();
    let pattern = jacobian_pattern(&g, &[0]).unwrap();
    for r in 0..n {
        for c in 0..n {
            let (a, b) = (j[r * n + c], dense[r * n + c]);
            if pattern.position(r, c).is_some() {
                assert!(
                    a == b || (a.is_nan() && b.is_nan()),
                    "({r}, {c}): {a} vs {b}"
                );
            } else {
                assert_eq!(
                    a.to_bits(),
                    0.0f64.to_bits(),
                    "({r}, {c}) is outside the pattern"
                );
            }
        }
    }
    assert!(j[4 * n + 4].is_nan() && j[5 * n + 6].is_nan());
    assert_eq!(
        hessian_pattern(&rosenbrock(8), &[0]).unwrap().nnz(),
        8 + 2 * 7
    );
}

#[test]
fn a_scatter_onto_signed_zeros_equals_the_general_scatter_add() {
    // The fast path (a constant base of -0.0 at the distinct indices,
    // +0.0 elsewhere: fill and store) against the same scatter-add with the
    // base passed as an input (the general kernel), bit for bit, on
    // updates holding NaN, ±inf, ±0.0 and subnormals. Also bases that do
    // not qualify (an index twice, a +0.0 at an index, a -0.0 elsewhere).
    let n = 12;
    let idx: Vec<i64> = vec![3, 0, 7, 11, 5];
    let upd = [f64::NAN, -0.0, f64::INFINITY, 5e-324, -2.5];
    let qualifying: Vec<f64> = (0..n)
        .map(|k| if idx.contains(&(k as i64)) { -0.0 } else { 0.0 })
        .collect();
    let mut twice = idx.clone();
    twice[1] = 3;
    let mut positive_at_index = qualifying.clone();
    positive_at_index[7] = 0.0;
    let mut negative_elsewhere = qualifying.clone();
    negative_elsewhere[1] = -0.0;
    for (ix, base) in [
        (&idx, &qualifying),
        (&twice, &qualifying),
        (&idx, &positive_at_index),
        (&idx, &negative_elsewhere),
    ] {
        let build = |constant: bool| {
            let mut g = Graph::new();
            let u = g.input("u", [ix.len()], DType::F64);
            let b = match constant {
                true => g
                    .constant(Literal::F64(base.clone().into()), [n], DType::F64)
                    .unwrap(),
                false => g.input("base", [n], DType::F64),
            };
            let i = g
                .constant(Literal::I64(ix.clone().into()), [ix.len()], DType::I64)
                .unwrap();
            let y = g.scatter_add(b, i, u, 0).unwrap();
            g.set_outputs(vec![y]);
            g
        };
        let u = Tensor::from_slice(&upd, [upd.len()]);
        let fast = run(&build(true), std::slice::from_ref(&u))[0].clone();
        let general = run(&build(false), &[u, Tensor::from_slice(base, [n])])[0].clone();
        let bits = |v: &[f64]| {
            v.iter()
                .map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() })
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&fast), bits(&general), "indices {ix:?}, base {base:?}");
    }
}
