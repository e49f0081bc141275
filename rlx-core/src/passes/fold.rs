//! Constant folding.
//!
//! A node whose operands are all constants is replaced by a constant when
//! the op is element-wise or moves data (reshape, broadcast, transpose,
//! slice, concat, gather, select, stop_gradient) or is a float
//! `scatter_add` (added in the kernel's order) and the result has at most
//! [`MAX_FOLD_ELEMENTS`] elements, or is a splat (every operand a splat
//! gives a splat of any size).
//!
//! Exactness is the rule: a folded value must equal bit for bit what the
//! runtime's kernels compute, so only ops whose IEEE result is defined
//! exactly are folded: `neg`, `abs`, `sqrt`, `recip`, `square`, `floor`,
//! `ceil`, `round`, `relu`, `add`, `sub`, `mul`, `div`, `mul_zero`, `min`,
//! `max`, comparisons, logical ops and casts whose rounding is unambiguous.
//! Transcendental functions (`exp`, `sin`, `pow`, ...) differ between libm
//! implementations and between the f32 and f64 paths: they are never
//! folded. Reductions are folded only over splats and only where the order
//! of accumulation cannot matter (sums of zeros or of small integers, their
//! means, max/min, products of one). Arithmetic follows the kernels'
//! precision: f64 in f64, f32 in f32, f16/bf16 computed in f32 and rounded
//! to the storage type (with `half`, round to nearest even). Cases whose
//! result is not pinned down (`min`/`max`/`relu` of NaN or of zeros of
//! different signs, integer overflow) are left to the runtime.
//!
//! Constants whose elements are all bitwise equal are rewritten as splats,
//! which lets [`cse`](super::cse) and [`simplify`](super::simplify()) see them.

use half::{bf16, f16};

use super::{copy, rewrite, verified};
use crate::{
    BinaryOp, CmpOp, DType, Graph, Literal, Node, NodeId, Op, ReduceOp, Result, Shape, UnaryOp,
};

/// Largest non-splat constant (in elements) that folding creates.
pub const MAX_FOLD_ELEMENTS: usize = 4096;

/// Replaces nodes computable at compile time by constants (see the module
/// docs for which ones).
///
/// ```
/// use rlx::{core::passes::fold_constants, DType, Graph, Literal, Op};
/// let mut g = Graph::new();
/// let a = g.full([3], 2.0, DType::F32);
/// let b = g.scalar(0.5, DType::F32);
/// let c = g.mul(a, b).unwrap();
/// g.set_outputs(vec![c]);
/// let f = fold_constants(&g).unwrap();
/// assert_eq!(f.node(f.outputs()[0]).op, Op::Constant(Literal::Splat(1.0)));
/// ```
pub fn fold_constants(g: &Graph) -> Result<Graph> {
    verified(traced(g)?.0)
}

/// [`fold_constants`] creating non-splat constants of up to `limit`
/// elements: for programs whose large constant subgraphs are worth
/// computing once (the seed-matrix products of a sparse Jacobian).
pub fn fold_constants_up_to(g: &Graph, limit: usize) -> Result<Graph> {
    verified(traced_up_to(g, limit)?.0)
}

/// [`fold_constants`] and the origins of the result's nodes.
pub(super) fn traced(g: &Graph) -> Result<(Graph, Vec<NodeId>)> {
    traced_up_to(g, MAX_FOLD_ELEMENTS)
}

fn traced_up_to(g: &Graph, limit: usize) -> Result<(Graph, Vec<NodeId>)> {
    rewrite(g, |out, node, args| {
        if let Op::Constant(lit) = &node.op {
            if let Some(v) = uniform(lit) {
                return out.constant(splat(v, node.dtype), node.shape.clone(), node.dtype);
            }
        }
        match fold_node(out, node, args, limit) {
            Some(lit) => out.constant(lit, node.shape.clone(), node.dtype),
            None => Ok(copy(out, node, args)),
        }
    })
}

/// One element of a constant: integers for `I64` nodes, `f64` otherwise
/// (exact for every float dtype and for `Bool` as 0/1).
#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    F(f64),
    I(i64),
}

/// The folded literal for `node`, or `None` if it must stay a computation.
fn fold_node(out: &Graph, node: &Node, args: &[NodeId], limit: usize) -> Option<Literal> {
    let mut ops = Vec::with_capacity(args.len());
    for &a in args {
        let n = out.node(a);
        match &n.op {
            Op::Constant(lit) => ops.push((lit, &n.shape, n.dtype)),
            _ => return None,
        }
    }
    let dt = node.dtype;
    // A literal holds real values: complex results are never folded.
    if dt.is_complex() || ops.iter().any(|o| o.2.is_complex()) {
        return None;
    }
    let shape = &node.shape;
    match &node.op {
        Op::Input { .. } | Op::Constant(_) => None,
        Op::Unary(u) => elementwise(&ops, shape, dt, limit, |v| unary(*u, v[0], dt)),
        Op::Binary(b) => elementwise(&ops, shape, dt, limit, |v| binary(*b, v[0], v[1], ops[0].2)),
        Op::Compare(c) => elementwise(&ops, shape, dt, limit, |v| compare(*c, v[0], v[1])),
        Op::Select => elementwise(&ops, shape, dt, limit, |v| match v[0] {
            V::F(c) => Some(if c != 0.0 { v[1] } else { v[2] }),
            V::I(_) => None,
        }),
        Op::Cast(to) => elementwise(&ops, shape, dt, limit, |v| cast(ops[0].2, *to, v[0])),
        Op::StopGradient | Op::Reshape { .. } => movement(&ops, shape, dt, limit, |f| Some((0, f))),
        Op::Broadcast { .. } => {
            // `movement` reads `src` only for results it folds (at most
            // `limit` elements): no table for a huge broadcast.
            let src = if shape.numel() <= limit {
                broadcast_sources(shape, ops[0].1)
            } else {
                Vec::new()
            };
            movement(&ops, shape, dt, limit, |f| Some((0, src[f])))
        }
        Op::Transpose { perm } => {
            let xs = ops[0].1;
            let xst = xs.strides();
            let coords = Coords::new(shape);
            movement(&ops, shape, dt, limit, |f| {
                let c = coords.of(f);
                Some((0, perm.iter().zip(&c).map(|(&p, &k)| k * xst[p]).sum()))
            })
        }
        Op::Slice { axis, start, .. } => {
            let xst = ops[0].1.strides();
            let coords = Coords::new(shape);
            movement(&ops, shape, dt, limit, |f| {
                let mut c = coords.of(f);
                c[*axis] += start;
                Some((0, c.iter().zip(&xst).map(|(k, s)| k * s).sum()))
            })
        }
        Op::Concat { axis } => {
            let coords = Coords::new(shape);
            let strides: Vec<Vec<usize>> = ops.iter().map(|o| o.1.strides()).collect();
            movement(&ops, shape, dt, limit, |f| {
                let mut c = coords.of(f);
                for (k, o) in ops.iter().enumerate() {
                    let d = o.1.dim(*axis);
                    if c[*axis] < d {
                        return Some((k, c.iter().zip(&strides[k]).map(|(a, s)| a * s).sum()));
                    }
                    c[*axis] -= d;
                }
                None
            })
        }
        Op::Reduce { op, axes } => {
            let (lit, xs, xdt) = ops[0];
            if !is_splat(lit) {
                return None;
            }
            let count: usize = axes.iter().map(|&a| xs.dim(a)).product();
            Some(splat(reduce_splat(*op, get(lit, xdt, 0), count, dt)?, dt))
        }
        Op::Gather { axis } => {
            // Element `(o, i, q)` of `[outer, count, inner]` reads
            // `(o, idx[i], q)` of `x` (`[outer, size, inner]`); a bad
            // index is left to the kernel, which reports it.
            let (xs, (idx, is, _)) = (ops[0].1, ops[1]);
            let (size, count) = (xs.dim(*axis), is.numel());
            let inner: usize = xs.dims()[axis + 1..].iter().product();
            movement(&ops, shape, dt, limit, |f| {
                let (q, rest) = (f % inner, f / inner);
                let (i, o) = (rest % count, rest / count);
                let j = idx.get_i64(i);
                (j >= 0 && (j as u64) < size as u64)
                    .then(|| (0, (o * size + j as usize) * inner + q))
            })
        }
        Op::ScatterAdd { axis } => scatter_add(&ops, *axis, dt, limit),
        Op::MatMul
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::Solve
        | Op::Custom(_)
        | Op::Loop(_)
        | Op::Root(_)
        | Op::SparseSolve(_) => None,
    }
}

type Operand<'a> = (&'a Literal, &'a Shape, DType);

/// Folds `scatter_add(operand, idx, updates)` along `axis`: the operand,
/// then each update added at its index in the kernel's order (updates in
/// row-major order), at the kernel's precision. A bad index is left for
/// the kernel to report.
fn scatter_add(ops: &[Operand<'_>], axis: usize, dt: DType, limit: usize) -> Option<Literal> {
    let [(x, xs, _), (idx, is, _), (upd, us, _)] = ops else {
        return None;
    };
    let n = xs.numel();
    if n > limit || !dt.is_float() {
        return None;
    }
    let (size, count) = (xs.dim(axis), is.numel());
    let inner: usize = xs.dims()[axis + 1..].iter().product();
    let mut vals: Vec<V> = (0..n).map(|i| get(x, dt, i)).collect();
    for u in 0..us.numel() {
        let (q, rest) = (u % inner, u / inner);
        let (i, o) = (rest % count, rest / count);
        let j = idx.get_i64(i);
        if j < 0 || j as u64 >= size as u64 {
            return None;
        }
        let at = (o * size + j as usize) * inner + q;
        vals[at] = binary(BinaryOp::Add, vals[at], get(upd, dt, u), dt)?;
    }
    array(vals, dt)
}

fn get(lit: &Literal, dt: DType, i: usize) -> V {
    if dt == DType::I64 {
        V::I(lit.get_i64(i))
    } else {
        V::F(lit.get_f64(i))
    }
}

fn splat(v: V, dt: DType) -> Literal {
    match (v, dt) {
        (V::I(i), _) => Literal::SplatI64(i),
        (V::F(x), DType::I64) => Literal::SplatI64(x as i64),
        (V::F(x), _) => Literal::Splat(x),
    }
}

fn array(vals: Vec<V>, dt: DType) -> Option<Literal> {
    if let Some(first) = vals.first() {
        if vals.iter().all(|v| same_bits(v, first)) {
            return Some(splat(*first, dt));
        }
    }
    if dt == DType::I64 {
        let mut out = Vec::with_capacity(vals.len());
        for v in vals {
            out.push(match v {
                V::I(i) => i,
                V::F(_) => return None,
            });
        }
        Some(Literal::I64(out.into()))
    } else {
        let mut out = Vec::with_capacity(vals.len());
        for v in vals {
            out.push(match v {
                V::F(x) => x,
                V::I(_) => return None,
            });
        }
        Some(Literal::F64(out.into()))
    }
}

fn same_bits(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::F(x), V::F(y)) => x.to_bits() == y.to_bits(),
        (V::I(x), V::I(y)) => x == y,
        _ => false,
    }
}

/// The common value of a literal whose elements are all bitwise equal.
fn uniform(lit: &Literal) -> Option<V> {
    match lit {
        Literal::Splat(_) | Literal::SplatI64(_) => None,
        Literal::F64(d) => {
            let first = *d.first()?;
            d.iter()
                .all(|x| x.to_bits() == first.to_bits())
                .then_some(V::F(first))
        }
        Literal::I64(d) => {
            let first = *d.first()?;
            d.iter().all(|&x| x == first).then_some(V::I(first))
        }
    }
}

fn is_splat(lit: &Literal) -> bool {
    matches!(lit, Literal::Splat(_) | Literal::SplatI64(_))
}

/// Folds an element-wise op with broadcasting.
fn elementwise(
    ops: &[Operand<'_>],
    out: &Shape,
    dt: DType,
    limit: usize,
    f: impl Fn(&[V]) -> Option<V>,
) -> Option<Literal> {
    if ops.iter().all(|o| is_splat(o.0)) {
        let vals: Vec<V> = ops.iter().map(|o| get(o.0, o.2, 0)).collect();
        return Some(splat(f(&vals)?, dt));
    }
    let n = out.numel();
    if n > limit {
        return None;
    }
    let srcs: Vec<Vec<usize>> = ops.iter().map(|o| broadcast_sources(out, o.1)).collect();
    let mut args = vec![V::F(0.0); ops.len()];
    let vals = (0..n)
        .map(|i| {
            for ((a, o), src) in args.iter_mut().zip(ops).zip(&srcs) {
                *a = get(o.0, o.2, src[i]);
            }
            f(&args)
        })
        .collect::<Option<Vec<V>>>()?;
    array(vals, dt)
}

/// Folds a data-movement op: `src(f)` names the operand and element that
/// output element `f` copies.
fn movement(
    ops: &[Operand<'_>],
    out: &Shape,
    dt: DType,
    limit: usize,
    src: impl Fn(usize) -> Option<(usize, usize)>,
) -> Option<Literal> {
    if ops.iter().all(|o| is_splat(o.0)) {
        let first = get(ops[0].0, ops[0].2, 0);
        if ops.iter().all(|o| same_bits(&get(o.0, o.2, 0), &first)) {
            return Some(splat(first, dt));
        }
    }
    let n = out.numel();
    if n > limit {
        return None;
    }
    let mut vals = Vec::with_capacity(n);
    for f in 0..n {
        let (k, i) = src(f)?;
        vals.push(get(ops[k].0, ops[k].2, i));
    }
    array(vals, dt)
}

/// Row-major coordinates of flat indices of one shape.
struct Coords {
    dims: Vec<usize>,
    strides: Vec<usize>,
}

impl Coords {
    fn new(s: &Shape) -> Coords {
        Coords {
            dims: s.dims().to_vec(),
            strides: s.strides(),
        }
    }

    fn of(&self, f: usize) -> Vec<usize> {
        self.strides
            .iter()
            .zip(&self.dims)
            .map(|(&s, &d)| if d == 0 { 0 } else { (f / s) % d })
            .collect()
    }
}

/// For each element of `out`, the element of `src` that NumPy broadcasting
/// reads (`src` broadcasts to `out`).
fn broadcast_sources(out: &Shape, src: &Shape) -> Vec<usize> {
    let coords = Coords::new(out);
    let sst = src.strides();
    let lead = out.rank() - src.rank();
    (0..out.numel())
        .map(|f| {
            let c = coords.of(f);
            (0..src.rank())
                .map(|k| {
                    if src.dim(k) == 1 {
                        0
                    } else {
                        c[lead + k] * sst[k]
                    }
                })
                .sum()
        })
        .collect()
}

/// Applies `op` at the kernels' precision for float dtype `dt`: f64 in f64,
/// the others in f32, then rounded to the storage type.
fn at_precision(
    dt: DType,
    x: &[f64],
    f64op: fn(&[f64]) -> f64,
    f32op: fn(&[f32]) -> f32,
) -> Option<f64> {
    let x32 = || x.iter().map(|&v| v as f32).collect::<Vec<f32>>();
    match dt {
        DType::F64 => Some(f64op(x)),
        DType::F32 => Some(f64::from(f32op(&x32()))),
        DType::F16 => Some(f16::from_f32(f32op(&x32())).to_f64()),
        DType::BF16 => Some(bf16::from_f32(f32op(&x32())).to_f64()),
        DType::I64 | DType::Bool | DType::C32 | DType::C64 => None,
    }
}

fn unary(u: UnaryOp, x: V, dt: DType) -> Option<V> {
    let x = match x {
        V::I(i) => {
            return match u {
                UnaryOp::Neg => i.checked_neg().map(V::I),
                UnaryOp::Abs => i.checked_abs().map(V::I),
                UnaryOp::Square => i.checked_mul(i).map(V::I),
                UnaryOp::Relu => Some(V::I(i.max(0))),
                UnaryOp::Sign => Some(V::I(i.signum())),
                _ => None,
            }
        }
        V::F(x) => x,
    };
    if dt == DType::Bool {
        return match u {
            UnaryOp::Not => Some(V::F(if x != 0.0 { 0.0 } else { 1.0 })),
            _ => None,
        };
    }
    let r = match u {
        UnaryOp::Neg => at_precision(dt, &[x], |v| -v[0], |v| -v[0]),
        UnaryOp::Abs => at_precision(dt, &[x], |v| v[0].abs(), |v| v[0].abs()),
        UnaryOp::Sqrt => at_precision(dt, &[x], |v| v[0].sqrt(), |v| v[0].sqrt()),
        UnaryOp::Recip => at_precision(dt, &[x], |v| 1.0 / v[0], |v| 1.0 / v[0]),
        UnaryOp::Square => at_precision(dt, &[x], |v| v[0] * v[0], |v| v[0] * v[0]),
        UnaryOp::Floor => at_precision(dt, &[x], |v| v[0].floor(), |v| v[0].floor()),
        UnaryOp::Ceil => at_precision(dt, &[x], |v| v[0].ceil(), |v| v[0].ceil()),
        UnaryOp::Round => at_precision(dt, &[x], |v| v[0].round(), |v| v[0].round()),
        // relu of NaN and of -0 depends on how the kernel is written.
        UnaryOp::Relu if x.is_nan() || x == 0.0 => None,
        UnaryOp::Relu => Some(if x > 0.0 { x } else { 0.0 }),
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Ln
        | UnaryOp::Log1p
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Tanh
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sigmoid
        | UnaryOp::Rsqrt
        | UnaryOp::Powi(_)
        | UnaryOp::Sign
        | UnaryOp::Gelu
        | UnaryOp::Silu
        | UnaryOp::Erf
        | UnaryOp::Not
        | UnaryOp::Conj
        | UnaryOp::Real
        | UnaryOp::Imag => None,
    };
    r.map(V::F)
}

fn binary(b: BinaryOp, x: V, y: V, dt: DType) -> Option<V> {
    let (x, y) = match (x, y) {
        (V::I(a), V::I(c)) => {
            return match b {
                BinaryOp::Add => a.checked_add(c).map(V::I),
                BinaryOp::Sub => a.checked_sub(c).map(V::I),
                BinaryOp::Mul => a.checked_mul(c).map(V::I),
                BinaryOp::Min => Some(V::I(a.min(c))),
                BinaryOp::Max => Some(V::I(a.max(c))),
                _ => None,
            }
        }
        (V::F(a), V::F(c)) => (a, c),
        _ => return None,
    };
    if dt == DType::Bool {
        let (p, q) = (x != 0.0, y != 0.0);
        return match b {
            BinaryOp::And => Some(V::F(f64::from(u8::from(p && q)))),
            BinaryOp::Or => Some(V::F(f64::from(u8::from(p || q)))),
            _ => None,
        };
    }
    let r = match b {
        BinaryOp::Add => at_precision(dt, &[x, y], |v| v[0] + v[1], |v| v[0] + v[1]),
        BinaryOp::Sub => at_precision(dt, &[x, y], |v| v[0] - v[1], |v| v[0] - v[1]),
        BinaryOp::Mul => at_precision(dt, &[x, y], |v| v[0] * v[1], |v| v[0] * v[1]),
        BinaryOp::Div => at_precision(dt, &[x, y], |v| v[0] / v[1], |v| v[0] / v[1]),
        BinaryOp::MulZero if x == 0.0 => Some(0.0),
        BinaryOp::MulZero => at_precision(dt, &[x, y], |v| v[0] * v[1], |v| v[0] * v[1]),
        // NaN handling and the sign of min(0, -0) depend on the kernel.
        BinaryOp::Min | BinaryOp::Max if x.is_nan() || y.is_nan() || (x == 0.0 && y == 0.0) => None,
        BinaryOp::Min => Some(x.min(y)),
        BinaryOp::Max => Some(x.max(y)),
        BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::And | BinaryOp::Or | BinaryOp::Complex => None,
    };
    r.map(V::F)
}

/// A reduction over `count > 0` copies of `v`, where the result does not
/// depend on the order of accumulation: sums whose partial sums are all
/// exact (integers below `2^24` in the f32 accumulator of f32/f16/bf16,
/// `2^53` in f64), their means, max/min of a non-NaN value, products of 1
/// and +0.
fn reduce_splat(op: ReduceOp, v: V, count: usize, dt: DType) -> Option<V> {
    if count == 0 {
        return None;
    }
    let x = match v {
        V::I(i) => {
            return match op {
                ReduceOp::Sum => i64::try_from(count).ok()?.checked_mul(i).map(V::I),
                ReduceOp::Max | ReduceOp::Min => Some(V::I(i)),
                ReduceOp::Prod if i == 0 || i == 1 => Some(V::I(i)),
                ReduceOp::Prod | ReduceOp::Mean => None,
            }
        }
        V::F(x) => x,
    };
    let limit = if dt == DType::F64 {
        2f64.powi(53)
    } else {
        2f64.powi(24)
    };
    let exact_sum = x.fract() == 0.0 && (count as f64) * x.abs() <= limit;
    let r = match op {
        ReduceOp::Sum if x == 0.0 => 0.0,
        ReduceOp::Sum if exact_sum => round_to(dt, count as f64 * x),
        ReduceOp::Mean if x == 0.0 || exact_sum => x + 0.0,
        ReduceOp::Max | ReduceOp::Min if !x.is_nan() => x,
        ReduceOp::Prod if x == 1.0 || x.to_bits() == 0 => x,
        ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min | ReduceOp::Prod => {
            return None
        }
    };
    Some(V::F(r))
}

fn compare(c: CmpOp, x: V, y: V) -> Option<V> {
    let r = match (x, y) {
        (V::I(a), V::I(b)) => cmp(c, a, b),
        (V::F(a), V::F(b)) => cmp(c, a, b),
        _ => return None,
    };
    Some(V::F(f64::from(u8::from(r))))
}

fn cmp<T: PartialOrd>(c: CmpOp, a: T, b: T) -> bool {
    match c {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

/// `v` rounded to float dtype `dt` (round to nearest even).
fn round_to(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F64 | DType::I64 | DType::Bool | DType::C32 | DType::C64 => v,
        DType::F32 => f64::from(v as f32),
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
    }
}

/// A cast folded only where its result is unambiguous: exact conversions,
/// and the single roundings f64 -> f32 and f32 -> f16/bf16.
fn cast(from: DType, to: DType, v: V) -> Option<V> {
    match v {
        V::I(i) => match to {
            DType::I64 => Some(V::I(i)),
            DType::Bool => Some(V::F(f64::from(u8::from(i != 0)))),
            DType::C32 | DType::C64 => None,
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => {
                // i64 -> f64 is one rounding; narrower targets only when exact.
                let x = i as f64;
                (to == DType::F64 || (x as i64 == i && round_to(to, x) == x))
                    .then_some(V::F(round_to(to, x)))
            }
        },
        V::F(x) => match to {
            DType::Bool if x.is_nan() => None,
            DType::Bool => Some(V::F(f64::from(u8::from(x != 0.0)))),
            DType::I64 if x.is_finite() && x.abs() < 9.2e18 => Some(V::I(x.trunc() as i64)),
            DType::I64 | DType::C32 | DType::C64 => None,
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => {
                let r = round_to(to, x);
                let single_rounding = matches!(
                    (from, to),
                    (DType::F64, DType::F32) | (DType::F32, DType::F16) | (DType::F32, DType::BF16)
                );
                (x.is_nan() || r == x || single_rounding).then_some(V::F(r))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Graph;

    fn lit_of(g: &Graph) -> Literal {
        match &g.node(g.outputs()[0]).op {
            Op::Constant(l) => l.clone(),
            op => panic!("output not folded: {op}\n{g}"),
        }
    }

    #[test]
    fn folds_splat_arithmetic_in_the_node_dtype() {
        // 1/3 in f32 is 0.3333333432674408 (f32 rounding), not the f64 value.
        let mut g = Graph::new();
        let one = g.scalar(1.0, DType::F32);
        let three = g.full([2], 3.0, DType::F32);
        let q = g.div(one, three).unwrap();
        g.set_outputs(vec![q]);
        let before = g.to_string();
        let f = fold_constants(&g).unwrap();
        assert!(before.contains("div(%0, %1)"), "{before}");
        assert_eq!(
            f.to_string(),
            "%0 = constant 0.3333333432674408() : f32[2]\nreturn (%0)"
        );
        assert_eq!(lit_of(&f), Literal::Splat(f64::from(1.0f32 / 3.0)));
    }

    #[test]
    fn f16_rounds_after_f32_arithmetic() {
        // 1 + 2^-11 is exactly between two f16 values: rounds to even (1.0).
        let mut g = Graph::new();
        let a = g.scalar(1.0, DType::F16);
        let b = g.scalar(2f64.powi(-11), DType::F16);
        let c = g.add(a, b).unwrap();
        g.set_outputs(vec![c]);
        assert_eq!(lit_of(&fold_constants(&g).unwrap()), Literal::Splat(1.0));
        let mut g = Graph::new();
        let a = g.scalar(1.0, DType::F64);
        let b = g.scalar(2f64.powi(-11), DType::F64);
        let c = g.add(a, b).unwrap();
        g.set_outputs(vec![c]);
        assert_eq!(
            lit_of(&fold_constants(&g).unwrap()),
            Literal::Splat(1.0 + 2f64.powi(-11))
        );
    }

    #[test]
    fn folds_small_arrays_with_broadcasting() {
        let mut g = Graph::new();
        let a = g
            .constant(Literal::F64(vec![1.0, 2.0, 3.0].into()), [3], DType::F64)
            .unwrap();
        let b = g
            .constant(Literal::F64(vec![10.0, 20.0].into()), [2, 1], DType::F64)
            .unwrap();
        let c = g.add(a, b).unwrap();
        let t = g.transpose(c, &[1, 0]).unwrap();
        let s = g.slice_range(t, 1..3, 0).unwrap();
        g.set_outputs(vec![s]);
        let f = fold_constants(&g).unwrap();
        assert_eq!(f.len(), 1, "{f}");
        // c = [[11, 12, 13], [21, 22, 23]]; t = c^T; rows 1..3 of t.
        assert_eq!(
            lit_of(&f),
            Literal::F64(vec![12.0, 22.0, 13.0, 23.0].into())
        );
        assert_eq!(f.shape(f.outputs()[0]), &Shape::from([2, 2]));
    }

    #[test]
    fn folds_concat_select_compare_and_casts() {
        let mut g = Graph::new();
        let a = g.full([2], 1.0, DType::F64);
        let b = g
            .constant(Literal::F64(vec![0.5, 3.0].into()), [2], DType::F64)
            .unwrap();
        let cat = g.concat(&[a, b], 0).unwrap();
        let two = g.scalar(2.0, DType::F64);
        let m = g.compare(CmpOp::Gt, cat, two).unwrap();
        let z = g.scalar(0.0, DType::F64);
        let sel = g.select(m, cat, z).unwrap();
        let i = g.cast(sel, DType::I64).unwrap();
        g.set_outputs(vec![cat, m, sel, i]);
        let f = fold_constants(&g).unwrap();
        let lits: Vec<Literal> = f
            .outputs()
            .iter()
            .map(|o| match &f.node(*o).op {
                Op::Constant(l) => l.clone(),
                op => panic!("not folded: {op}"),
            })
            .collect();
        assert_eq!(lits[0], Literal::F64(vec![1.0, 1.0, 0.5, 3.0].into()));
        assert_eq!(lits[1], Literal::F64(vec![0.0, 0.0, 0.0, 1.0].into()));
        assert_eq!(lits[2], Literal::F64(vec![0.0, 0.0, 0.0, 3.0].into()));
        assert_eq!(lits[3], Literal::I64(vec![0, 0, 0, 3].into()));
    }

    #[test]
    fn never_folds_transcendentals_reductions_or_ambiguous_cases() {
        let mut g = Graph::new();
        let a = g.full([3], 0.5, DType::F32);
        let e = g.exp(a).unwrap();
        let s = g.sum(a, &[0]).unwrap();
        let nan = g.scalar(f64::NAN, DType::F64);
        let one = g.scalar(1.0, DType::F64);
        let mx = g.max(nan, one).unwrap();
        let big = g.scalar(i64::MAX as f64, DType::I64);
        let ov = g.add(big, big).unwrap();
        let x = g.scalar(0.1, DType::F64);
        let h = g.cast(x, DType::F16).unwrap(); // f64 -> f16 may round twice
        g.set_outputs(vec![e, s, mx, ov, h]);
        let f = fold_constants(&g).unwrap();
        for o in f.outputs() {
            assert!(
                !matches!(f.node(*o).op, Op::Constant(_)),
                "folded {}",
                f.format_node(*o)
            );
        }
    }

    #[test]
    fn large_non_splat_results_stay_computed_but_splats_fold_at_any_size() {
        let mut g = Graph::new();
        let n = MAX_FOLD_ELEMENTS + 1;
        let a = g
            .constant(
                Literal::F64((0..n).map(|i| i as f64).collect::<Vec<_>>().into()),
                [n],
                DType::F64,
            )
            .unwrap();
        let b = g.neg(a).unwrap();
        let big = g.full([100, 100], 2.0, DType::F64);
        let c = g.neg(big).unwrap();
        g.set_outputs(vec![b, c]);
        let f = fold_constants(&g).unwrap();
        assert_eq!(f.node(f.outputs()[0]).op, Op::Unary(UnaryOp::Neg));
        assert_eq!(
            f.node(f.outputs()[1]).op,
            Op::Constant(Literal::Splat(-2.0))
        );
    }

    #[test]
    fn folds_reductions_of_splats_only_when_order_cannot_matter() {
        let mut g = Graph::new();
        let threes = g.full([4, 5], 3.0, DType::F16);
        let halves = g.full([4, 5], 0.5, DType::F32);
        let s = g.sum(threes, &[0, 1]).unwrap(); // 60, exact
        let m = g.reduce(ReduceOp::Mean, threes, &[1]).unwrap(); // 3
        let mx = g.reduce(ReduceOp::Max, halves, &[0]).unwrap(); // 0.5
        let h = g.sum(halves, &[1]).unwrap(); // not an integer sum: kept
        let empty = g.full([0, 3], 1.0, DType::F64);
        let e = g.sum(empty, &[0]).unwrap(); // empty reduction: kept
        g.set_outputs(vec![s, m, mx, h, e]);
        let f = fold_constants(&g).unwrap();
        let o = f.outputs();
        assert_eq!(f.node(o[0]).op, Op::Constant(Literal::Splat(60.0)));
        assert_eq!(f.node(o[1]).op, Op::Constant(Literal::Splat(3.0)));
        assert_eq!(f.shape(o[1]), &Shape::from([4]));
        assert_eq!(f.node(o[2]).op, Op::Constant(Literal::Splat(0.5)));
        assert!(matches!(f.node(o[3]).op, Op::Reduce { .. }), "{f}");
        assert!(matches!(f.node(o[4]).op, Op::Reduce { .. }), "{f}");
    }

    #[test]
    fn uniform_arrays_become_splats() {
        let mut g = Graph::new();
        let a = g
            .constant(Literal::I64(vec![4, 4, 4].into()), [3], DType::I64)
            .unwrap();
        g.set_outputs(vec![a]);
        assert_eq!(lit_of(&fold_constants(&g).unwrap()), Literal::SplatI64(4));
    }
}
