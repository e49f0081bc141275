//! Random graphs: a [`Recipe`] (input shapes and a list of byte-sized
//! steps, which proptest generates and shrinks) is turned into a
//! [`Graph`] with the builder. Steps that the builder rejects (shapes that
//! do not broadcast, an axis out of range) must come back as `Err`, never
//! a panic; they are counted and skipped.
//!
//! Smooth recipes use only ops that are differentiable everywhere on the
//! values they meet (`sqrt` and `ln` are fed `x² + ½`, `exp` is fed
//! `tanh(x)`, `div` divides by `x² + ½`), so finite differences can check
//! every derivative transform.

use proptest::prelude::*;
use rlx::{DType, Graph, NodeId, Op, ReduceOp, Shape, UnaryOp};

/// One step: an op kind, two operand picks and a parameter.
pub type Step = (u8, u16, u16, u16);

/// What proptest generates: the inputs' shapes, their dtype, the steps, a
/// seed for the input values, and whether only smooth ops may be used.
#[derive(Clone, Debug)]
pub struct Recipe {
    pub dtype: DType,
    pub inputs: Vec<Vec<usize>>,
    pub steps: Vec<Step>,
    pub seed: u64,
    pub smooth: bool,
    /// Huge dimensions allowed (see [`hostile_recipe`]).
    pub hostile: bool,
}

/// Small shapes of rank 0 to 3 (dimensions 0 to 4; a 0 now and then).
fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![6 => 1usize..5, 1 => Just(0usize)], 0..4)
}

/// Dimensions no allocation can have (2^58 and up: more bytes than any
/// address space, whatever the dtype), for hostile recipes.
pub const HUGE: [usize; 4] = [1 << 58, 1 << 62, usize::MAX / 2 + 1, usize::MAX];

/// Shapes for hostile recipes: small dimensions, zeros and huge ones.
fn hostile_shape() -> impl Strategy<Value = Vec<usize>> {
    let dim =
        prop_oneof![4 => 1usize..4, 1 => Just(0usize), 2 => prop::sample::select(HUGE.to_vec())];
    prop::collection::vec(dim, 0..4)
}

/// Recipes whose inputs may have huge dimensions: graphs that may be
/// declared (a graph is only types) but never run; every transform and
/// compilation must return `Err` or succeed, never panic or abort.
pub fn hostile_recipe() -> impl Strategy<Value = Recipe> {
    (
        prop::sample::select(vec![DType::F64, DType::F32, DType::F16]),
        prop::collection::vec(hostile_shape(), 1..3),
        prop::collection::vec(any::<Step>(), 1..6),
        any::<u64>(),
    )
        .prop_map(|(dtype, inputs, steps, seed)| Recipe {
            dtype,
            inputs,
            steps,
            seed,
            smooth: false,
            hostile: true,
        })
}

pub fn recipe() -> impl Strategy<Value = Recipe> {
    (
        prop_oneof![3 => Just(DType::F64), 1 => Just(DType::F32)],
        prop::collection::vec(shape(), 1..4),
        prop::collection::vec(any::<Step>(), 1..10),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(dtype, inputs, steps, seed, smooth)| Recipe {
            dtype,
            inputs,
            steps,
            seed,
            smooth,
            hostile: false,
        })
}

/// A graph built from a recipe, with counts of what the builder refused.
pub struct Built {
    pub graph: Graph,
    pub rejected: usize,
}

/// Builds the graph. Output 0 is the last value made, output 1 (when there
/// is one) an earlier value, as an auxiliary output.
pub fn build(r: &Recipe) -> Built {
    let mut g = Graph::new();
    let dt = r.dtype;
    let mut vals: Vec<NodeId> = r
        .inputs
        .iter()
        .enumerate()
        .map(|(i, s)| g.input(format!("x{i}"), s.clone(), dt))
        .collect();
    let mut rejected = 0;
    for &(kind, a, b, p) in &r.steps {
        let x = vals[a as usize % vals.len()];
        let y = vals[b as usize % vals.len()];
        match step(&mut g, r, kind, x, y, p) {
            Ok(v) => vals.push(v),
            Err(_) => rejected += 1,
        }
    }
    let mut outs = vec![*vals.last().expect("at least one input")];
    if vals.len() > 2 {
        outs.push(vals[vals.len() / 2]);
    }
    g.set_outputs(outs);
    Built { graph: g, rejected }
}

/// `x² + ½`: positive, so `sqrt`, `ln` and division are smooth on it.
fn positive(g: &mut Graph, x: NodeId) -> rlx::Result<NodeId> {
    let s = g.square(x)?;
    let h = g.scalar(0.5, g.dtype(x));
    g.add(s, h)
}

/// One step; `Err` when the builder refuses it.
pub fn step(
    g: &mut Graph,
    r: &Recipe,
    kind: u8,
    x: NodeId,
    y: NodeId,
    p: u16,
) -> rlx::Result<NodeId> {
    let rank = g.shape(x).rank();
    let dims = g.shape(x).dims().to_vec();
    let axis = p as usize % (rank + 1); // sometimes out of range
    const SMOOTH: u8 = 17;
    let kind = if r.smooth { kind % SMOOTH } else { kind % 27 };
    match kind {
        0 => g.sin(x),
        1 => g.tanh(x),
        2 => {
            let t = g.tanh(x)?;
            g.exp(t)
        }
        3 => {
            let q = positive(g, x)?;
            g.sqrt(q)
        }
        4 => {
            let q = positive(g, x)?;
            g.ln(q)
        }
        5 => g.add(x, y),
        6 => g.mul(x, y),
        7 => g.sub(x, y),
        8 => {
            let q = positive(g, y)?;
            g.div(x, q)
        }
        9 => {
            // Matmul with its transpose (shapes agree when rank >= 2), or
            // with `y` (often refused).
            if p % 2 == 0 && rank >= 2 {
                let t = g.transpose_last2(x)?;
                g.matmul(x, t)
            } else {
                g.matmul(x, y)
            }
        }
        10 => {
            let axes: Vec<usize> = (0..rank).filter(|a| (p >> a) & 1 == 1).collect();
            let op = if p & 0x100 != 0 {
                ReduceOp::Mean
            } else {
                ReduceOp::Sum
            };
            g.reduce(op, x, &axes)
        }
        11 => {
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.rotate_left(p as usize % rank.max(1));
            g.transpose(x, &perm)
        }
        12 => {
            // Flatten, or split the first axis in two when it is even.
            let n = g.shape(x).numel();
            match dims.first() {
                Some(&d0) if p % 2 == 0 && d0 % 2 == 0 && d0 > 0 => {
                    let mut d = vec![2, d0 / 2];
                    d.extend_from_slice(&dims[1..]);
                    g.reshape(x, d)
                }
                _ => g.reshape(x, [n]),
            }
        }
        13 => {
            let mut d = vec![1 + p as usize % 3];
            d.extend_from_slice(&dims);
            g.broadcast(x, d)
        }
        14 => {
            let size = dims.get(axis).copied().unwrap_or(0);
            let start = (p as usize >> 4) % size.saturating_add(2);
            let len = size.saturating_sub(start) / 2 + (p as usize & 1);
            g.slice_range(x, start..start.saturating_add(len), axis)
        }
        15 => g.concat(&[x, y], axis),
        16 => g.softmax(x, axis),
        // Not smooth everywhere from here on.
        17 => g.abs(x),
        18 => g.relu(x),
        19 => g.max(x, y),
        20 => g.min(x, y),
        21 => {
            let c = g.compare(rlx::CmpOp::Gt, x, y)?;
            g.select(c, x, y)
        }
        22 => g.floor(x),
        23 => {
            let op = if p % 2 == 0 {
                ReduceOp::Max
            } else {
                ReduceOp::Min
            };
            g.reduce(op, x, &[axis])
        }
        24 => {
            // Gather along `axis` with in-range constant indices.
            let size = dims.get(axis).copied().unwrap_or(0);
            if size == 0 {
                return g.push(Op::Gather { axis }, &[x, x]);
            }
            let idx: Vec<i64> = (0..3)
                .map(|k| ((p as usize + 7 * k) % size) as i64)
                .collect();
            let i = g.constant(rlx::Literal::I64(idx.into()), Shape::from([3]), DType::I64)?;
            g.gather(x, i, axis)
        }
        25 => {
            // A splat constant of a huge (or small) shape, broadcast with x.
            let n = if r.hostile && p % 2 == 0 {
                HUGE[p as usize / 2 % 4]
            } else {
                1 + p as usize % 3
            };
            let c = g.full([n, 1], 1.5, g.dtype(x));
            g.mul(x, c)
        }
        _ => {
            let other = if g.dtype(x) == DType::F64 {
                DType::F32
            } else {
                DType::F64
            };
            let c = g.cast(x, other)?;
            let u = g.unary(UnaryOp::Square, c)?;
            g.cast(u, g.dtype(x))
        }
    }
}
