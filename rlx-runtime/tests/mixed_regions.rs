//! Scalar regions of mixed graphs (`planner::mixed`): small values inside a
//! graph that also has large ones run as one scalar program per region.
//!
//! - random graphs mixing small and large values, and their derivative
//!   graphs (value-and-grad, JVP, HVP, Jacobian), give the same bits with
//!   regions as the general plan without them (proptest);
//! - the threshold: a 256-element chain is a region, a 257-element one is
//!   not, and a large value never crosses a region's boundary;
//! - the boundary counts of a few graphs, pinned;
//! - the pay rule: one op, or a run of 0-d element-wise nodes, is no region.

#[path = "common/mod.rs"]
mod common;

use common::assert_same_values;
use proptest::prelude::*;
use rlx_core::autodiff;
use rlx_runtime::compile::{compile_with, Options, PlanStats};
use rlx_runtime::{compile, DType, Executable, Graph, NodeId, Tensor};

/// `g` without scalarisation: the general plan, kernels and fused loops.
fn general(g: &Graph) -> Executable {
    let options = Options::general();
    compile_with(g, &options).unwrap()
}

fn inputs_of(g: &Graph, seed: u64) -> Vec<Tensor> {
    g.inputs()
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let ty = g.ty(i.node);
            let v = common::values(ty.shape.numel(), seed + k as u64, -1.0, 1.0);
            Tensor::from_vec(v, ty.shape.clone())
        })
        .collect()
}

/// Runs `g` with regions (the default) and without, asserting equal bits
/// (the sign of a zero included: the optimiser keeps `x + (+0.0)`, so a
/// sum of `-0.0` terms is `+0.0` in a region as in the kernel; proptest's
/// regressions file keeps the case, an exact cancellation `p - p`, that
/// once found them different); returns the default plan's counts.
fn same_bits(g: &Graph, seed: u64, what: &str) -> PlanStats {
    let mixed = compile(g).unwrap();
    let plain = general(g);
    let ins = inputs_of(g, seed);
    let refs: Vec<&Tensor> = ins.iter().collect();
    let (a, b) = (mixed.run(&refs).unwrap(), plain.run(&refs).unwrap());
    for (j, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_same_values(x, y, &format!("{what}: output {j}"));
    }
    // A warm `run_into` rewrites the same values.
    let mut outs = a.clone();
    mixed.run_into(&refs, &mut outs).unwrap();
    for (j, (x, y)) in outs.iter().zip(&b).enumerate() {
        assert_same_values(x, y, &format!("{what}: output {j}, run_into"));
    }
    mixed.stats()
}

/// The diode model: 5 parameters `p` (saturation current, emission
/// coefficient, temperature, band gap, gain) through a chain of small ops
/// (thermal voltage, scaled saturation current), then the diode law over
/// `v: [n]` against measured currents, squared and summed.
fn diode(n: usize) -> Graph {
    let mut g = Graph::new();
    let p = g.input("p", [5], DType::F64);
    let v = g.input("v", [n], DType::F64);
    let meas = g.input("i_meas", [n], DType::F64);
    let c = |g: &mut Graph, x: f64| g.scalar(x, DType::F64);
    let at = |g: &mut Graph, k: usize| g.slice_range(p, k..k + 1, 0).unwrap();
    let (is0, em, temp, eg, gain) = (
        at(&mut g, 0),
        at(&mut g, 1),
        at(&mut g, 2),
        at(&mut g, 3),
        at(&mut g, 4),
    );
    let kq = c(&mut g, 0.1);
    let vt = g.mul(temp, kq).unwrap();
    let one = c(&mut g, 1.0);
    let ratio = g.add(temp, one).unwrap();
    let r3 = g.powi(ratio, 3).unwrap();
    let rm1 = g.sub(ratio, one).unwrap();
    let a = g.mul(rm1, eg).unwrap();
    let a = g.div(a, vt).unwrap();
    let a = g.exp(a).unwrap();
    let is = g.mul(is0, r3).unwrap();
    let is = g.mul(is, a).unwrap();
    let nvt = g.mul(em, vt).unwrap();
    // Large: [n].
    let x = g.div(v, nvt).unwrap();
    let x = g.exp(x).unwrap();
    let x = g.sub(x, one).unwrap();
    let i = g.mul(x, is).unwrap();
    let i = g.mul(i, gain).unwrap();
    let d = g.sub(i, meas).unwrap();
    let d2 = g.mul(d, d).unwrap();
    let loss = g.sum_all(d2).unwrap();
    g.set_outputs(vec![loss]);
    g
}

#[test]
fn diode_forward_and_gradient_pin_their_boundary() {
    let g = diode(1000);
    let st = same_bits(&g, 1, "diode");
    // One region: the five slices and the parameter chain; it reads `p`
    // and writes `is`, `gain` and `n·vt` for the large loop.
    assert_eq!(
        (
            st.small_regions,
            st.small_region_nodes,
            st.small_region_inputs,
            st.small_region_outputs
        ),
        (1, 15, 1, 3),
        "{st:?}"
    );
    assert_eq!(st.steps, 2, "{st:?}");
    let vg = autodiff::value_and_grad(&g, &[0]).unwrap();
    let st = same_bits(&vg, 2, "diode value_and_grad");
    let plain = general(&vg).stats();
    assert!(st.small_regions >= 2, "{st:?}");
    assert!(st.steps < plain.steps, "{st:?} vs {plain:?}");
    assert_eq!(plain.small_regions, 0);
}

/// A chain of `k`-element small values (slice, scale, sin, sum) next to a
/// large one.
fn chain(k: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [k + 3], DType::F64);
    let big = g.input("big", [4096], DType::F64);
    let s = g.slice_range(x, 1..1 + k, 0).unwrap();
    let half = g.scalar(0.5, DType::F64);
    let t = g.mul(s, half).unwrap();
    let t = g.sin(t).unwrap();
    let r = g.sum_all(t).unwrap();
    let b = g.mul(big, r).unwrap();
    let b = g.tanh(b).unwrap();
    g.set_outputs(vec![b, t]);
    g
}

#[test]
fn the_threshold_is_256_elements() {
    // The slice reads the 259-element input, so it stays outside: the
    // region is the scale, the sine and the sum; it reads the slice and
    // writes the sine (an output) and the sum (read by the large loop).
    let st = same_bits(&chain(256), 3, "chain 256");
    assert_eq!(
        (
            st.small_regions,
            st.small_region_nodes,
            st.small_region_inputs,
            st.small_region_outputs
        ),
        (1, 3, 1, 2),
        "{st:?}"
    );
    let st = same_bits(&chain(257), 4, "chain 257");
    assert_eq!(st.small_regions, 0, "{st:?}");
}

#[test]
fn a_large_value_between_small_ones_splits_the_region() {
    // small → large → small: the large product reads the first chain,
    // which is sealed; its reduction feeds a second chain.
    let mut g = Graph::new();
    let p = g.input("p", [4], DType::F64);
    let big = g.input("big", [2048], DType::F64);
    let a = g.sin(p).unwrap();
    let a = g.mul(a, a).unwrap();
    let s = g.sum_all(a).unwrap();
    let l = g.mul(big, s).unwrap();
    let l = g.exp(l).unwrap();
    let r = g.sum_all(l).unwrap();
    let q = g.mul(p, r).unwrap();
    let q = g.cos(q).unwrap();
    let q = g.sum_all(q).unwrap();
    g.set_outputs(vec![q, a]);
    let st = same_bits(&g, 5, "split");
    // Region 1: sin, mul, sum (reads p; writes a and s). Region 2: mul,
    // cos, sum (reads p and the large reduction; writes q).
    assert_eq!(
        (
            st.small_regions,
            st.small_region_nodes,
            st.small_region_inputs,
            st.small_region_outputs
        ),
        (2, 6, 3, 3),
        "{st:?}"
    );
}

#[test]
fn one_op_or_a_scalar_chain_is_no_region() {
    // One computing op on a small vector: left to a kernel.
    let mut g = Graph::new();
    let p = g.input("p", [4], DType::F64);
    let big = g.input("big", [1024], DType::F64);
    let s = g.sum_all(p).unwrap();
    let b = g.mul(big, s).unwrap();
    g.set_outputs(vec![b]);
    assert_eq!(same_bits(&g, 6, "one op").small_regions, 0);
    // 0-d element-wise nodes only: the general plan's scalar region.
    let mut g = Graph::new();
    let k = g.input("k", [], DType::F64);
    let big = g.input("big", [1024], DType::F64);
    let a = g.sin(k).unwrap();
    let a = g.mul(a, k).unwrap();
    let b = g.mul(big, a).unwrap();
    g.set_outputs(vec![b]);
    let st = same_bits(&g, 7, "0-d chain");
    assert_eq!((st.small_regions, st.scalar_regions), (0, 1), "{st:?}");
}

/// One random step of a mixed graph (see [`random_graph`]).
#[derive(Clone, Debug)]
enum Step {
    /// A unary op on a small value.
    SmallUnary(u8, usize),
    /// A binary op of two small values.
    SmallBinary(u8, usize, usize),
    /// A slice of a small vector to `[2]`, or a sum of one to 0-d.
    SmallShape(bool, usize),
    /// A large value scaled by the 0-d sum of a small one, then a unary op.
    LargeFromSmall(u8, usize, usize),
    /// The sum of a large value, into the small pool.
    LargeToSmall(u8, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..4, any::<usize>()).prop_map(|(o, a)| Step::SmallUnary(o, a)),
        (0u8..4, any::<usize>(), any::<usize>()).prop_map(|(o, a, b)| Step::SmallBinary(o, a, b)),
        (any::<bool>(), any::<usize>()).prop_map(|(s, a)| Step::SmallShape(s, a)),
        (0u8..3, any::<usize>(), any::<usize>())
            .prop_map(|(o, a, b)| Step::LargeFromSmall(o, a, b)),
        (0u8..2, any::<usize>()).prop_map(|(o, a)| Step::LargeToSmall(o, a)),
    ]
}

fn unary(g: &mut Graph, op: u8, x: NodeId) -> NodeId {
    match op {
        0 => g.sin(x),
        1 => g.tanh(x),
        2 => g.cos(x),
        _ => g.mul(x, x),
    }
    .unwrap()
}

/// A graph of inputs `p: [4]`, `k: []` (small) and `x: [n]` (large), then
/// `steps`; its output is a 0-d sum over the last values of both pools
/// (so every path is differentiable into a scalar), and the last small value.
fn random_graph(n: usize, steps: &[Step]) -> Graph {
    let mut g = Graph::new();
    let p = g.input("p", [4], DType::F64);
    let k = g.input("k", [], DType::F64);
    let x = g.input("x", [n], DType::F64);
    let mut small = vec![p, k];
    let mut large = vec![x];
    let pick = |v: &[NodeId], i: usize| v[i % v.len()];
    for s in steps {
        match *s {
            Step::SmallUnary(o, a) => {
                let y = unary(&mut g, o, pick(&small, a));
                small.push(y);
            }
            Step::SmallBinary(o, a, b) => {
                let (a, b) = (pick(&small, a), pick(&small, b));
                // Shapes [4], [2] and [] mix only through 0-d values.
                let (a, b) =
                    if g.shape(a) == g.shape(b) || g.shape(a).rank() == 0 || g.shape(b).rank() == 0
                    {
                        (a, b)
                    } else {
                        (a, g.sum_all(b).unwrap())
                    };
                let y = match o {
                    0 => g.add(a, b),
                    1 => g.sub(a, b),
                    2 => g.mul(a, b),
                    _ => {
                        let c = g.scalar(2.0, DType::F64);
                        let d = g.mul(b, b).unwrap();
                        let d = g.add(d, c).unwrap();
                        g.div(a, d)
                    }
                }
                .unwrap();
                small.push(y);
            }
            Step::SmallShape(slice, a) => {
                let a = pick(&small, a);
                let y = if slice && g.shape(a).numel() >= 4 {
                    g.slice_range(a, 1..3, 0).unwrap()
                } else {
                    g.sum_all(a).unwrap()
                };
                small.push(y);
            }
            Step::LargeFromSmall(o, a, b) => {
                let s = pick(&small, b);
                let s = if g.shape(s).rank() == 0 {
                    s
                } else {
                    g.sum_all(s).unwrap()
                };
                let y = g.mul(pick(&large, a), s).unwrap();
                let y = unary(&mut g, o, y);
                large.push(y);
            }
            Step::LargeToSmall(o, a) => {
                let l = pick(&large, a);
                let y = match o {
                    0 => g.sum_all(l).unwrap(),
                    _ => {
                        let m = g.reduce(rlx_runtime::ReduceOp::Max, l, &[0]).unwrap();
                        g.reshape(m, []).unwrap()
                    }
                };
                small.push(y);
            }
        }
    }
    let ls = g.sum_all(*large.last().unwrap()).unwrap();
    let last = *small.last().unwrap();
    let ss = g.sum_all(last).unwrap();
    let out = g.add(ls, ss).unwrap();
    g.set_outputs(vec![out, last]);
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Every companion's graph of a random mixed graph gives the same bits
    /// with scalar regions as without.
    #[test]
    fn mixed_plans_equal_the_general_plan_bit_for_bit(
        n in 300usize..700,
        steps in prop::collection::vec(step(), 4..16),
        seed in 0u64..1000,
    ) {
        let g = random_graph(n, &steps);
        same_bits(&g, seed, "forward");
        let mut loss = g.clone();
        loss.set_outputs(vec![g.outputs()[0]]);
        let wrt = [0, 1, 2];
        same_bits(&autodiff::value_and_grad(&loss, &wrt).unwrap(), seed, "value_and_grad");
        same_bits(&autodiff::jvp(&g, &wrt).unwrap(), seed, "jvp");
        same_bits(&autodiff::vjp(&g, &wrt).unwrap(), seed, "vjp");
        same_bits(&autodiff::hvp(&loss, &[0, 1]).unwrap(), seed, "hvp");
        same_bits(&autodiff::jacobian(&g, &[0, 1]).unwrap(), seed, "jacobian");
    }
}
