//! The naive reference math of the ops, written once for every test binary.
//!
//! Every value is a `Vec<f64>` with its dims ([`Val`]), every op an index
//! loop over multi-indices ([`unravel`]/[`ravel`]), and every result is
//! rounded to its dtype ([`round`]: `I64` values held integral, `Bool` as
//! 0/1). It shares no code with the runtime, so a wrong kernel, compiler
//! step or derivative rule shows as a disagreement with it.

use rlx_runtime::{BinaryOp, CmpOp, DType, Graph, Op, ReduceOp, Tensor, UnaryOp};

/// A value: row-major data and its dims.
#[derive(Clone, Debug, PartialEq)]
pub struct Val {
    pub data: Vec<f64>,
    pub dims: Vec<usize>,
}

impl Val {
    /// A value from data and dims.
    pub fn new(data: Vec<f64>, dims: &[usize]) -> Val {
        assert_eq!(
            data.len(),
            numel(dims),
            "reference: data does not fill {dims:?}"
        );
        Val {
            data,
            dims: dims.to_vec(),
        }
    }
}

// ---------- multi-indices ----------

/// Number of elements of `dims`.
pub fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The multi-index of flat index `i` in `dims` (row-major).
pub fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = i % dims[d];
        i /= dims[d];
    }
    idx
}

/// The flat index of multi-index `idx` in `dims` (row-major).
pub fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (i, d)| acc * d + i)
}

/// The flat index into an operand of `dims` broadcast (NumPy rules) to the
/// output multi-index `idx`.
pub fn bcast(idx: &[usize], dims: &[usize]) -> usize {
    let lead = idx.len() - dims.len();
    let sub: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
        .collect();
    ravel(&sub, dims)
}

/// The dims `shapes` broadcast to (NumPy rules).
pub fn broadcast_dims(shapes: &[&[usize]]) -> Vec<usize> {
    let r = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..r)
        .map(|k| {
            let mut d = 1;
            for s in shapes {
                if k + s.len() >= r {
                    let e = s[k + s.len() - r];
                    if e != 1 {
                        assert!(d == 1 || d == e, "reference: shapes do not broadcast");
                        d = e;
                    }
                }
            }
            d
        })
        .collect()
}

// ---------- scalar math ----------

/// `v` as a value of `dt` holds it, widened back to `f64`.
pub fn round(v: f64, dt: DType) -> f64 {
    match dt {
        DType::F64 | DType::C64 => v,
        DType::F32 | DType::C32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        // As Rust's `as i64`: NaN is 0, out of range saturates (the max of
        // nothing is i64::MIN, not -inf).
        DType::I64 => v as i64 as f64,
        DType::Bool => (v != 0.0) as u8 as f64,
    }
}

/// erf: its Maclaurin series for `|x| < 3` (about 1e-14 absolute), beyond
/// that composite Simpson integration of `2/√π e^{-t²}` over `[0, x]`.
pub fn erf(x: f64) -> f64 {
    if x.abs() >= 3.0 {
        let n = 20_000;
        let h = x / n as f64;
        let f = |t: f64| (-t * t).exp();
        let mut s = f(0.0) + f(x);
        for i in 1..n {
            let w = if i % 2 == 1 { 4.0 } else { 2.0 };
            s += w * f(i as f64 * h);
        }
        return s * h / 3.0 * std::f64::consts::FRAC_2_SQRT_PI;
    }
    let mut term = x; // (-1)^k x^(2k+1) / k!
    let mut sum = 0.0;
    for k in 0..200 {
        let c = term / (2 * k + 1) as f64;
        sum += c;
        if c.abs() < 1e-18 {
            break;
        }
        term *= -x * x / (k + 1) as f64;
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// A unary op on one value (NaN propagates through `relu`, as in IEEE `max`
/// with NaN-propagation).
pub fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Ln => x.ln(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Square => x * x,
        UnaryOp::Powi(n) => x.powi(n),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnaryOp::Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Erf => erf(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Not => (x == 0.0) as u8 as f64,
        // Real values: their own conjugate and real part, no imaginary
        // part (complex values are checked in `autodiff_complex.rs`).
        UnaryOp::Conj | UnaryOp::Real => x,
        UnaryOp::Imag => 0.0,
    }
}

/// A binary op on two values (`min`/`max` propagate NaN).
pub fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Min => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
        BinaryOp::Max => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        BinaryOp::Atan2 => a.atan2(b),
        BinaryOp::MulZero => {
            if a == 0.0 {
                0.0
            } else {
                a * b
            }
        }
        BinaryOp::And => (a != 0.0 && b != 0.0) as u8 as f64,
        BinaryOp::Or => (a != 0.0 || b != 0.0) as u8 as f64,
        // The real part of `a + ib` (this reference is real-valued).
        BinaryOp::Complex => a,
    }
}

/// A comparison as 0/1.
pub fn compare(op: CmpOp, a: f64, b: f64) -> f64 {
    (match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }) as u8 as f64
}

// ---------- ops on values ----------

/// `f` of the operands broadcast to `out` (NumPy rules), element by element.
pub fn elementwise(args: &[&Val], out: &[usize], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut buf = vec![0.0; args.len()];
    (0..numel(out))
        .map(|i| {
            let idx = unravel(i, out);
            for (b, x) in buf.iter_mut().zip(args) {
                *b = x.data[bcast(&idx, &x.dims)];
            }
            f(&buf)
        })
        .collect()
}

/// `f` of the operands broadcast together (NumPy rules): the result and its
/// dims.
pub fn broadcast_map(args: &[&Val], f: impl Fn(&[f64]) -> f64) -> Val {
    let shapes: Vec<&[usize]> = args.iter().map(|x| &x.dims[..]).collect();
    let dims = broadcast_dims(&shapes);
    let data = elementwise(args, &dims, f);
    Val { data, dims }
}

/// Reduces `x` over `axes` (the other axes are kept, in order; `max`/`min`
/// propagate NaN).
pub fn reduce(op: ReduceOp, axes: &[usize], x: &Val) -> Val {
    let out: Vec<usize> = (0..x.dims.len())
        .filter(|d| !axes.contains(d))
        .map(|d| x.dims[d])
        .collect();
    let init = match op {
        ReduceOp::Sum | ReduceOp::Mean => 0.0,
        ReduceOp::Prod => 1.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut acc = vec![init; numel(&out)];
    for (i, &v) in x.data.iter().enumerate() {
        let kept: Vec<usize> = unravel(i, &x.dims)
            .into_iter()
            .enumerate()
            .filter(|(d, _)| !axes.contains(d))
            .map(|(_, j)| j)
            .collect();
        let o = ravel(&kept, &out);
        acc[o] = match op {
            ReduceOp::Sum | ReduceOp::Mean => acc[o] + v,
            ReduceOp::Prod => acc[o] * v,
            ReduceOp::Max if acc[o].is_nan() || v.is_nan() => f64::NAN,
            ReduceOp::Min if acc[o].is_nan() || v.is_nan() => f64::NAN,
            ReduceOp::Max => acc[o].max(v),
            ReduceOp::Min => acc[o].min(v),
        };
    }
    if op == ReduceOp::Mean {
        let c: usize = axes.iter().map(|&d| x.dims[d]).product();
        acc.iter_mut().for_each(|v| *v /= c as f64);
    }
    Val {
        data: acc,
        dims: out,
    }
}

/// The (batched, broadcast) matrix product `a b`.
pub fn matmul(a: &Val, b: &Val) -> Val {
    let (ra, rb) = (a.dims.len(), b.dims.len());
    let (m, k, n) = (a.dims[ra - 2], a.dims[ra - 1], b.dims[rb - 1]);
    let mut out = broadcast_dims(&[&a.dims[..ra - 2], &b.dims[..rb - 2]]);
    out.extend([m, n]);
    let r = out.len();
    let data = (0..numel(&out))
        .map(|o| {
            let idx = unravel(o, &out);
            let (bi, i, j) = (&idx[..r - 2], idx[r - 2], idx[r - 1]);
            (0..k)
                .map(|p| {
                    let mut ia = bi.to_vec();
                    ia.extend([i, p]);
                    let mut ib = bi.to_vec();
                    ib.extend([p, j]);
                    a.data[bcast(&ia, &a.dims)] * b.data[bcast(&ib, &b.dims)]
                })
                .sum()
        })
        .collect();
    Val { data, dims: out }
}

/// Softmax (or log-softmax) of `x` along `axis`, shifted by the maximum.
pub fn softmax(x: &Val, axis: usize, log: bool) -> Vec<f64> {
    (0..x.data.len())
        .map(|i| {
            let idx = unravel(i, &x.dims);
            let row: Vec<f64> = (0..x.dims[axis])
                .map(|j| {
                    let mut t = idx.clone();
                    t[axis] = j;
                    x.data[ravel(&t, &x.dims)]
                })
                .collect();
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
            let v = x.data[i] - m;
            if log {
                v - s.ln()
            } else {
                v.exp() / s
            }
        })
        .collect()
}

/// The solution `X` of `A X = B` for each batch (Gauss-Jordan elimination
/// with partial pivoting on the augmented matrix `[A | B]`).
pub fn solve(a: &Val, b: &Val) -> Vec<f64> {
    let r = a.dims.len();
    let nn = a.dims[r - 1];
    let k = b.dims[r - 1];
    let batches: usize = a.dims[..r - 2].iter().product();
    let mut out = Vec::new();
    for bi in 0..batches {
        let mut aug: Vec<Vec<f64>> = (0..nn)
            .map(|i| {
                let at = bi * nn * nn + i * nn;
                let mut row: Vec<f64> = a.data[at..at + nn].to_vec();
                let bt = bi * nn * k + i * k;
                row.extend_from_slice(&b.data[bt..bt + k]);
                row
            })
            .collect();
        for c in 0..nn {
            let p = (c..nn)
                .max_by(|&x, &y| aug[x][c].abs().total_cmp(&aug[y][c].abs()))
                .unwrap();
            aug.swap(c, p);
            let d = aug[c][c];
            for v in aug[c].iter_mut() {
                *v /= d;
            }
            for rr in 0..nn {
                if rr != c {
                    let f = aug[rr][c];
                    let pivot = aug[c].clone();
                    for (v, pv) in aug[rr].iter_mut().zip(pivot) {
                        *v -= f * pv;
                    }
                }
            }
        }
        for row in &aug {
            out.extend_from_slice(&row[nn..]);
        }
    }
    out
}

/// One op of a graph on its operands, giving a value of dims `out` (not yet
/// rounded to the node's dtype). Inputs and custom ops are evaluated by
/// [`eval`].
pub fn op(op: &Op, args: &[&Val], out: &[usize]) -> Vec<f64> {
    let n = numel(out);
    match op {
        Op::Input { .. } | Op::Custom(_) | Op::Loop(_) | Op::Root(_) => {
            unreachable!("evaluated by `eval`")
        }
        Op::Constant(lit) => (0..n).map(|i| lit.get_f64(i)).collect(),
        Op::Unary(u) => args[0].data.iter().map(|&x| unary(*u, x)).collect(),
        Op::Binary(b) => elementwise(args, out, |v| binary(*b, v[0], v[1])),
        Op::Compare(c) => elementwise(args, out, |v| compare(*c, v[0], v[1])),
        Op::Select => elementwise(args, out, |v| if v[0] != 0.0 { v[1] } else { v[2] }),
        Op::Cast(_) | Op::StopGradient | Op::Reshape { .. } => args[0].data.clone(),
        Op::Broadcast { .. } => elementwise(args, out, |v| v[0]),
        Op::Reduce { op, axes } => reduce(*op, axes, args[0]).data,
        Op::MatMul => matmul(args[0], args[1]).data,
        Op::Transpose { perm } => (0..n)
            .map(|i| {
                let idx = unravel(i, out);
                let mut src = vec![0; idx.len()];
                for (o, &p) in perm.iter().enumerate() {
                    src[p] = idx[o];
                }
                args[0].data[ravel(&src, &args[0].dims)]
            })
            .collect(),
        Op::Concat { axis } => (0..n)
            .map(|i| {
                let mut idx = unravel(i, out);
                for v in args {
                    if idx[*axis] < v.dims[*axis] {
                        return v.data[ravel(&idx, &v.dims)];
                    }
                    idx[*axis] -= v.dims[*axis];
                }
                unreachable!("the output of a concat is as long as its operands")
            })
            .collect(),
        Op::Slice { axis, start, .. } => (0..n)
            .map(|i| {
                let mut idx = unravel(i, out);
                idx[*axis] += start;
                args[0].data[ravel(&idx, &args[0].dims)]
            })
            .collect(),
        Op::Gather { axis } => {
            let (x, ix) = (args[0], args[1]);
            let r = ix.dims.len();
            (0..n)
                .map(|i| {
                    let idx = unravel(i, out);
                    let j = ravel(&idx[*axis..*axis + r], &ix.dims);
                    let mut src = idx[..*axis].to_vec();
                    src.push(ix.data[j] as usize);
                    src.extend_from_slice(&idx[*axis + r..]);
                    x.data[ravel(&src, &x.dims)]
                })
                .collect()
        }
        Op::ScatterAdd { axis } => {
            let (x, ix, u) = (args[0], args[1], args[2]);
            let r = ix.dims.len();
            let mut acc = x.data.clone();
            for (i, &v) in u.data.iter().enumerate() {
                let idx = unravel(i, &u.dims);
                let j = ravel(&idx[*axis..*axis + r], &ix.dims);
                let mut dst = idx[..*axis].to_vec();
                dst.push(ix.data[j] as usize);
                dst.extend_from_slice(&idx[*axis + r..]);
                acc[ravel(&dst, &x.dims)] += v;
            }
            acc
        }
        Op::Softmax { axis } => softmax(args[0], *axis, false),
        Op::LogSoftmax { axis } => softmax(args[0], *axis, true),
        Op::Solve => solve(args[0], args[1]),
        Op::SparseSolve(s) => sparse_solve(s, args[0], args[1]),
    }
}

/// A sparse solve by the dense [`solve`]: each matrix made dense from its
/// values (transposed for `Aᵀ`), each right-hand side a column.
fn sparse_solve(s: &rlx_core::SparseSolveOp, v: &Val, b: &Val) -> Vec<f64> {
    let (n, nnz) = (s.pattern.nrows(), s.pattern.nnz());
    let items = b.data.len() / n.max(1);
    let mut out = Vec::with_capacity(b.data.len());
    for item in 0..items {
        let off = if v.dims.len() > 1 { item * nnz } else { 0 };
        let mut a = vec![0.0; n * n];
        for (k, (r, c)) in s.pattern.entries().enumerate() {
            let (r, c) = if s.transpose { (c, r) } else { (r, c) };
            a[r * n + c] = v.data[off + k];
        }
        let a = Val::new(a, &[n, n]);
        let rhs = Val::new(b.data[item * n..(item + 1) * n].to_vec(), &[n, 1]);
        out.extend(solve(&a, &rhs));
    }
    out
}

/// Evaluates the live nodes of `g` on `inputs` (one flat row-major vector
/// per input), rounding every value to its node's dtype; a custom op runs
/// its forward graph. Returns the outputs.
pub fn eval(g: &Graph, inputs: &[Vec<f64>]) -> Vec<Val> {
    assert_eq!(inputs.len(), g.inputs().len(), "number of inputs");
    let live = g.live_nodes();
    let mut vals: Vec<Val> = Vec::with_capacity(g.len());
    for (i, node) in g.nodes().iter().enumerate() {
        let dims = node.shape.dims();
        if !live[i] {
            vals.push(Val {
                data: Vec::new(),
                dims: dims.to_vec(),
            });
            continue;
        }
        let args: Vec<&Val> = node.inputs.iter().map(|j| &vals[j.index()]).collect();
        let data = match &node.op {
            Op::Input { index } => {
                let x = inputs[*index].clone();
                assert_eq!(x.len(), node.shape.numel(), "input #{index} length");
                x
            }
            Op::Custom(c) => {
                let ins: Vec<Vec<f64>> = args.iter().map(|v| v.data.clone()).collect();
                eval(&c.forward, &ins).remove(0).data
            }
            Op::Loop(l) => {
                let ins: Vec<Vec<f64>> = args.iter().map(|v| v.data.clone()).collect();
                match &l.kind {
                    rlx_core::LoopKind::Scan => scan(l, &ins),
                    rlx_core::LoopKind::Adjoint { .. } => {
                        let lowered = rlx_core::loops::lower::lower_adjoint(l).unwrap();
                        eval(&lowered, &ins).remove(0).data
                    }
                }
            }
            Op::Root(r) => {
                let ins: Vec<Vec<f64>> = args.iter().map(|v| v.data.clone()).collect();
                newton(r, &ins)
            }
            o => op(o, &args, dims),
        };
        let data = data.into_iter().map(|v| round(v, node.dtype)).collect();
        vals.push(Val::new(data, dims));
    }
    g.outputs()
        .iter()
        .map(|o| vals[o.index()].clone())
        .collect()
}

/// Plain Newton (full steps, Gaussian elimination with partial pivoting)
/// on a root's residual and Jacobian graphs, to its tolerance.
fn newton(r: &rlx_core::RootOp, ins: &[Vec<f64>]) -> Vec<f64> {
    let mut args = ins.to_vec();
    let n = args[0].len();
    for _ in 0..=r.newton.max_iter {
        let f = eval(&r.residual, &args).remove(0).data;
        if f.iter().all(|v| v.abs() <= r.newton.tol) {
            return args[0].clone();
        }
        let mut a = match &r.jacobian {
            rlx_core::solvers::RootJacobian::Dense(j) => eval(j, &args).remove(0).data,
            rlx_core::solvers::RootJacobian::Sparse { values, pattern } => {
                let v = eval(values, &args).remove(0).data;
                let mut a = vec![0.0; n * n];
                for (k, (row, col)) in pattern.entries().enumerate() {
                    a[row * n + col] = v[k];
                }
                a
            }
        };
        let mut b = f;
        for c in 0..n {
            let p = (c..n)
                .max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs()))
                .unwrap();
            for k in 0..n {
                a.swap(c * n + k, p * n + k);
            }
            b.swap(c, p);
            for i in c + 1..n {
                let m = a[i * n + c] / a[c * n + c];
                for k in c..n {
                    a[i * n + k] -= m * a[c * n + k];
                }
                b[i] -= m * b[c];
            }
        }
        for c in (0..n).rev() {
            let s: f64 = (c + 1..n).map(|k| a[c * n + k] * b[k]).sum();
            b[c] = (b[c] - s) / a[c * n + c];
        }
        for (x, d) in args[0].iter_mut().zip(&b) {
            *x -= d;
        }
    }
    panic!("reference Newton did not converge")
}

/// A scan step by step: `c(t+1), ys[s(t)] = body(c(t), xs[s(t)], k)`,
/// packed `[c(T).., ys..]`.
fn scan(l: &rlx_core::LoopOp, ins: &[Vec<f64>]) -> Vec<f64> {
    let (c, k, t_len) = (l.carries, l.xs, l.length);
    let mut carry: Vec<Vec<f64>> = ins[..c].to_vec();
    let mut ys: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); t_len]; l.ys()];
    for t in 0..t_len {
        let s = if l.reverse { t_len - 1 - t } else { t };
        let mut step = carry.clone();
        for x in &ins[c..c + k] {
            let n = x.len() / t_len;
            step.push(x[s * n..(s + 1) * n].to_vec());
        }
        step.extend_from_slice(&ins[c + k..l.body.inputs().len()]);
        let mut outs: Vec<Vec<f64>> = eval(&l.body, &step).into_iter().map(|v| v.data).collect();
        for (j, y) in outs.drain(c..).enumerate() {
            ys[j][s] = y;
        }
        carry = outs;
    }
    let mut packed: Vec<f64> = carry.concat();
    for y in ys {
        packed.extend(y.concat());
    }
    packed
}

/// [`eval`] on the values of tensors.
pub fn eval_tensors(g: &Graph, inputs: &[&Tensor]) -> Vec<Val> {
    let inputs: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64_vec().unwrap()).collect();
    eval(g, &inputs)
}
