//! Shared support of the autodiff tests: running graphs, random points and
//! directions, finite differences.
//!
//! `run` executes a graph with the runtime's reference interpreter
//! (`rlx_runtime::interpret`) and cross-checks every result against the
//! compiled plan (`rlx_runtime::compile`) and against a small f64 evaluator
//! written here from plain math, independently of the kernels (bool and i64
//! values held as 0/1 and integral f64), so a derivative test fails whether
//! the rule, the kernel or the compiler is wrong, and says which.
#![allow(dead_code)]

use rlx_core::{BinaryOp, CmpOp, DType, Graph, Literal, NodeId, Op, ReduceOp, Shape, UnaryOp};
use rlx_runtime::{compile, interpret, Storage, Tensor};

/// Runs `g` on `inputs` (one flat row-major vector per input, converted to
/// the declared dtypes) with the interpreter; checks against [`reference`].
pub fn run(g: &Graph, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    assert_eq!(inputs.len(), g.inputs().len(), "number of inputs");
    let ts: Vec<Tensor> = g
        .inputs()
        .iter()
        .zip(inputs)
        .map(|(inp, v)| {
            let ty = g.ty(inp.node);
            Tensor::from_storage(Storage::from_f64(ty.dtype, v.iter().copied()), ty.shape).unwrap()
        })
        .collect();
    let refs: Vec<&Tensor> = ts.iter().collect();
    let out: Vec<Vec<f64>> = interpret(g, &refs)
        .unwrap_or_else(|e| panic!("interpret: {e}\n{g}"))
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect();
    let compiled: Vec<Vec<f64>> = compile(g)
        .and_then(|exe| exe.run(&refs))
        .unwrap_or_else(|e| panic!("compile: {e}\n{g}"))
        .iter()
        .map(|t| t.to_f64_vec().unwrap())
        .collect();
    let want = reference(g, inputs);
    // f32/f16 kernels round differently from f64-then-round: compare loosely there
    let tol = if g
        .nodes()
        .iter()
        .any(|n| n.dtype.is_float() && n.dtype != DType::F64)
    {
        1e-4
    } else {
        1e-9
    };
    for (k, (a, b)) in out.iter().zip(&want).enumerate() {
        let same = a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs())
            });
        assert!(
            same,
            "output {k}: interpreter {a:?} != reference {b:?}\n{g}"
        );
    }
    for (k, (a, b)) in compiled.iter().zip(&out).enumerate() {
        let same = a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * (1.0 + y.abs())
            });
        assert!(same, "output {k}: compiled {a:?} != interpreter {b:?}\n{g}");
    }
    out
}

/// Evaluates `g` with the f64 reference evaluator of this module.
pub fn reference(g: &Graph, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    g.verify().unwrap();
    assert_eq!(inputs.len(), g.inputs().len(), "number of inputs");
    let mut vals: Vec<Vec<f64>> = Vec::with_capacity(g.len());
    let live = g.live_nodes();
    for (i, node) in g.nodes().iter().enumerate() {
        if !live[i] {
            vals.push(Vec::new());
            continue;
        }
        let args: Vec<(&[f64], &Shape)> = node
            .inputs
            .iter()
            .map(|j| (vals[j.index()].as_slice(), g.shape(*j)))
            .collect();
        let v = match &node.op {
            Op::Input { index } => {
                let x = inputs[*index].clone();
                assert_eq!(x.len(), node.shape.numel(), "input #{index} length");
                x
            }
            op => eval_op(op, &args, &node.shape, node.dtype),
        };
        vals.push(v);
    }
    g.outputs()
        .iter()
        .map(|o| vals[o.index()].clone())
        .collect()
}

fn eval_op(op: &Op, args: &[(&[f64], &Shape)], out: &Shape, dt: DType) -> Vec<f64> {
    let n = out.numel();
    match op {
        Op::Input { .. } => unreachable!("inputs are read by `run`"),
        Op::Constant(l) => (0..n).map(|i| l.get_f64(i)).collect(),
        Op::Unary(u) => args[0].0.iter().map(|&x| unary(*u, x)).collect(),
        Op::Binary(b) => elementwise(args, out, |v| binary(*b, v[0], v[1])),
        Op::Compare(c) => elementwise(args, out, |v| {
            let (a, b) = (v[0], v[1]);
            let r = match c {
                CmpOp::Lt => a < b,
                CmpOp::Le => a <= b,
                CmpOp::Gt => a > b,
                CmpOp::Ge => a >= b,
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
            };
            f64::from(u8::from(r))
        }),
        Op::Select => elementwise(args, out, |v| if v[0] != 0.0 { v[1] } else { v[2] }),
        Op::Cast(d) => args[0]
            .0
            .iter()
            .map(|&x| match d {
                DType::I64 => x.trunc(),
                DType::Bool => f64::from(u8::from(x != 0.0)),
                _ => x,
            })
            .collect(),
        Op::Reduce { op, axes } => reduce(*op, axes, args[0].0, args[0].1),
        Op::MatMul => matmul(args[0], args[1], out),
        Op::Transpose { perm } => {
            let (x, xs) = args[0];
            let xst = xs.strides();
            let os = out.strides();
            (0..n)
                .map(|f| {
                    let mut src = 0;
                    for (k, &p) in perm.iter().enumerate() {
                        src += (f / os[k]) % out.dim(k) * xst[p];
                    }
                    x[src]
                })
                .collect()
        }
        Op::Reshape { .. } | Op::StopGradient => args[0].0.to_vec(),
        Op::Broadcast { .. } => elementwise(args, out, |v| v[0]),
        Op::Concat { axis } => {
            let outer: usize = out.dims()[..*axis].iter().product();
            let inner: usize = out.dims()[axis + 1..].iter().product();
            let mut v = Vec::with_capacity(n);
            for o in 0..outer {
                for (x, xs) in args {
                    let chunk = xs.dim(*axis) * inner;
                    v.extend_from_slice(&x[o * chunk..(o + 1) * chunk]);
                }
            }
            v
        }
        Op::Slice { axis, start, len } => {
            let (x, xs) = args[0];
            let outer: usize = xs.dims()[..*axis].iter().product();
            let inner: usize = xs.dims()[axis + 1..].iter().product();
            let size = xs.dim(*axis);
            let mut v = Vec::with_capacity(n);
            for o in 0..outer {
                let base = (o * size + start) * inner;
                v.extend_from_slice(&x[base..base + len * inner]);
            }
            v
        }
        Op::Gather { axis } => {
            let ((x, xs), (idx, _)) = (args[0], args[1]);
            let outer: usize = xs.dims()[..*axis].iter().product();
            let inner: usize = xs.dims()[axis + 1..].iter().product();
            let size = xs.dim(*axis);
            let mut v = Vec::with_capacity(n);
            for o in 0..outer {
                for &k in idx {
                    let base = (o * size + k as usize) * inner;
                    v.extend_from_slice(&x[base..base + inner]);
                }
            }
            v
        }
        Op::ScatterAdd { axis } => {
            let ((x, xs), (idx, _), (upd, _)) = (args[0], args[1], args[2]);
            let outer: usize = xs.dims()[..*axis].iter().product();
            let inner: usize = xs.dims()[axis + 1..].iter().product();
            let size = xs.dim(*axis);
            let mut v = x.to_vec();
            let mut u = 0;
            for o in 0..outer {
                for &k in idx {
                    let base = (o * size + k as usize) * inner;
                    for e in 0..inner {
                        v[base + e] += upd[u];
                        u += 1;
                    }
                }
            }
            v
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            let log = matches!(op, Op::LogSoftmax { .. });
            let (x, xs) = args[0];
            let outer: usize = xs.dims()[..*axis].iter().product();
            let inner: usize = xs.dims()[axis + 1..].iter().product();
            let size = xs.dim(*axis);
            let mut v = vec![0.0; n];
            for o in 0..outer {
                for e in 0..inner {
                    let at = |k: usize| (o * size + k) * inner + e;
                    let m = (0..size)
                        .map(|k| x[at(k)])
                        .fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = (0..size).map(|k| (x[at(k)] - m).exp()).sum();
                    for k in 0..size {
                        v[at(k)] = if log {
                            x[at(k)] - m - s.ln()
                        } else {
                            (x[at(k)] - m).exp() / s
                        };
                    }
                }
            }
            v
        }
        Op::Solve => solve(args[0], args[1]),
        Op::Custom(c) => {
            let ins: Vec<Vec<f64>> = args.iter().map(|(x, _)| x.to_vec()).collect();
            reference(&c.forward, &ins).remove(0)
        }
        Op::Loop(l) => {
            let ins: Vec<Vec<f64>> = args.iter().map(|(x, _)| x.to_vec()).collect();
            match &l.kind {
                rlx_core::LoopKind::Scan => naive_scan(l, &ins),
                rlx_core::LoopKind::Adjoint { .. } => {
                    let lowered = rlx_core::loops::lower::lower_adjoint(l).unwrap();
                    reference(&lowered, &ins).remove(0)
                }
            }
        }
    }
    .into_iter()
    .map(|x| if dt == DType::F32 { x as f32 as f64 } else { x })
    .collect()
}

/// `c(t+1), ys[s(t)] = body(c(t), xs[s(t)], k)`, packed `[c(T).., ys..]`.
fn naive_scan(l: &rlx_core::LoopOp, ins: &[Vec<f64>]) -> Vec<f64> {
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
        let mut outs = reference(&l.body, &step);
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

fn unary(u: UnaryOp, x: f64) -> f64 {
    match u {
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
        UnaryOp::Powi(k) => x.powi(k),
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
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Gelu => x * 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Erf => erf(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Not => f64::from(u8::from(x == 0.0)),
    }
}

/// erf by its Maclaurin series (|x| < 3, about 1e-14 absolute) and the
/// asymptotic tail beyond.
pub fn erf(x: f64) -> f64 {
    if x.abs() >= 3.0 {
        let t = 1.0 / (x * x);
        let tail = (-x * x).exp() / (x.abs() * std::f64::consts::PI.sqrt())
            * (1.0 - 0.5 * t + 0.75 * t * t - 1.875 * t * t * t);
        return x.signum() * (1.0 - tail);
    }
    let mut term = x;
    let mut sum = x;
    for k in 1..200 {
        term *= -x * x / k as f64;
        let add = term / (2 * k + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 {
            break;
        }
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

fn binary(b: BinaryOp, a: f64, c: f64) -> f64 {
    match b {
        BinaryOp::Add => a + c,
        BinaryOp::Sub => a - c,
        BinaryOp::Mul => a * c,
        BinaryOp::Div => a / c,
        BinaryOp::Pow => a.powf(c),
        BinaryOp::Min => a.min(c),
        BinaryOp::Max => a.max(c),
        BinaryOp::Atan2 => a.atan2(c),
        BinaryOp::MulZero => {
            if a == 0.0 {
                0.0
            } else {
                a * c
            }
        }
        BinaryOp::And => f64::from(u8::from(a != 0.0 && c != 0.0)),
        BinaryOp::Or => f64::from(u8::from(a != 0.0 || c != 0.0)),
    }
}

/// Flat index into an operand of shape `s` broadcast to `out`.
fn bindex(out: &Shape, s: &Shape, flat: usize) -> usize {
    let lead = out.rank() - s.rank();
    let os = out.strides();
    let ss = s.strides();
    let mut idx = 0;
    for k in 0..s.rank() {
        let i = (flat / os[lead + k]) % out.dim(lead + k);
        if s.dim(k) != 1 {
            idx += i * ss[k];
        }
    }
    idx
}

fn elementwise(args: &[(&[f64], &Shape)], out: &Shape, f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut buf = vec![0.0; args.len()];
    (0..out.numel())
        .map(|i| {
            for (b, (x, s)) in buf.iter_mut().zip(args) {
                *b = x[bindex(out, s, i)];
            }
            f(&buf)
        })
        .collect()
}

fn reduce(op: ReduceOp, axes: &[usize], x: &[f64], xs: &Shape) -> Vec<f64> {
    let kept: Vec<usize> = (0..xs.rank()).filter(|a| !axes.contains(a)).collect();
    let out = Shape::new(kept.iter().map(|&a| xs.dim(a)).collect::<Vec<_>>());
    let os = out.strides();
    let xst = xs.strides();
    let init = match op {
        ReduceOp::Sum | ReduceOp::Mean => 0.0,
        ReduceOp::Prod => 1.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    };
    let mut acc = vec![init; out.numel()];
    for (f, &v) in x.iter().enumerate() {
        let mut o = 0;
        for (k, &a) in kept.iter().enumerate() {
            o += (f / xst[a]) % xs.dim(a) * os[k];
        }
        acc[o] = match op {
            ReduceOp::Sum | ReduceOp::Mean => acc[o] + v,
            ReduceOp::Prod => acc[o] * v,
            ReduceOp::Max => acc[o].max(v),
            ReduceOp::Min => acc[o].min(v),
        };
    }
    if op == ReduceOp::Mean {
        let c: usize = axes.iter().map(|&a| xs.dim(a)).product();
        acc.iter_mut().for_each(|v| *v /= c as f64);
    }
    acc
}

fn matmul((a, as_): (&[f64], &Shape), (b, bs): (&[f64], &Shape), out: &Shape) -> Vec<f64> {
    let (ra, rb, ro) = (as_.rank(), bs.rank(), out.rank());
    let (m, k, nn) = (as_.dim(ra - 2), as_.dim(ra - 1), bs.dim(rb - 1));
    let batch = Shape::from(&out.dims()[..ro - 2]);
    let ab = Shape::from(&as_.dims()[..ra - 2]);
    let bb = Shape::from(&bs.dims()[..rb - 2]);
    let mut v = vec![0.0; out.numel()];
    for p in 0..batch.numel().max(1) {
        let pa = if batch.rank() == 0 {
            0
        } else {
            bindex(&batch, &ab, p)
        };
        let pb = if batch.rank() == 0 {
            0
        } else {
            bindex(&batch, &bb, p)
        };
        for i in 0..m {
            for j in 0..nn {
                let mut s = 0.0;
                for l in 0..k {
                    s += a[pa * m * k + i * k + l] * b[pb * k * nn + l * nn + j];
                }
                v[p * m * nn + i * nn + j] = s;
            }
        }
    }
    v
}

fn solve((a, as_): (&[f64], &Shape), (b, bs): (&[f64], &Shape)) -> Vec<f64> {
    let r = as_.rank();
    let n = as_.dim(r - 1);
    let k = bs.dim(r - 1);
    let batch: usize = as_.dims()[..r - 2].iter().product();
    let mut out = vec![0.0; b.len()];
    for p in 0..batch {
        let mut m: Vec<f64> = a[p * n * n..(p + 1) * n * n].to_vec();
        let mut x: Vec<f64> = b[p * n * k..(p + 1) * n * k].to_vec();
        for c in 0..n {
            let piv = (c..n)
                .max_by(|&i, &j| m[i * n + c].abs().total_cmp(&m[j * n + c].abs()))
                .unwrap();
            for e in 0..n {
                m.swap(c * n + e, piv * n + e);
            }
            for e in 0..k {
                x.swap(c * k + e, piv * k + e);
            }
            for i in c + 1..n {
                let f = m[i * n + c] / m[c * n + c];
                for e in c..n {
                    m[i * n + e] -= f * m[c * n + e];
                }
                for e in 0..k {
                    x[i * k + e] -= f * x[c * k + e];
                }
            }
        }
        for c in (0..n).rev() {
            for e in 0..k {
                let mut s = x[c * k + e];
                for j in c + 1..n {
                    s -= m[c * n + j] * x[j * k + e];
                }
                x[c * k + e] = s / m[c * n + c];
            }
        }
        out[p * n * k..(p + 1) * n * k].copy_from_slice(&x);
    }
    out
}

// ---- random points, directions and finite differences ----

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// `⟨a, b⟩`.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Central difference `(f(x + h v) - f(x - h v)) / 2h` of output `k` of `g`
/// along direction `v` (one vector per input; empty for inputs held fixed).
pub fn fd(g: &Graph, x: &[Vec<f64>], v: &[Vec<f64>], k: usize, h: f64) -> Vec<f64> {
    let shift = |s: f64| -> Vec<Vec<f64>> {
        x.iter()
            .zip(v)
            .map(|(xi, vi)| {
                if vi.is_empty() {
                    xi.clone()
                } else {
                    xi.iter().zip(vi).map(|(a, b)| a + s * b).collect()
                }
            })
            .collect()
    };
    let p = run(g, &shift(h)).remove(k);
    let m = run(g, &shift(-h)).remove(k);
    p.iter().zip(&m).map(|(a, b)| (a - b) / (2.0 * h)).collect()
}

/// Asserts `|a - b| <= tol * (1 + |b|)` element-wise.
#[track_caller]
pub fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}: element {i}: got {x}, expected {y}\n got {a:?}\nwant {b:?}"
        );
    }
}

/// An f64 input of the given shape.
pub fn input(g: &mut Graph, name: &str, shape: &[usize]) -> NodeId {
    g.input(name, Shape::from(shape), DType::F64)
}

/// A constant f64 tensor.
pub fn constant(g: &mut Graph, v: Vec<f64>, shape: &[usize]) -> NodeId {
    g.constant(Literal::F64(v.into()), Shape::from(shape), DType::F64)
        .unwrap()
}

/// A constant i64 tensor.
pub fn indices(g: &mut Graph, v: Vec<i64>, shape: &[usize]) -> NodeId {
    g.constant(Literal::I64(v.into()), Shape::from(shape), DType::I64)
        .unwrap()
}
