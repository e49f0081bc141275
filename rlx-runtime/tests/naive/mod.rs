//! A deliberately naive reference evaluator for the compiler tests: every value
//! is a `Vec<f64>` plus dims, every op an index loop over the output with
//! `unravel`/`ravel`, results rounded to the node's dtype after each op.
//! It shares no code with the compiler.

#![allow(dead_code)]

use rlx_runtime::{BinaryOp, CmpOp, DType, Graph, Op, ReduceOp, Tensor, UnaryOp};

#[derive(Clone, Debug)]
pub struct Val {
    pub data: Vec<f64>,
    pub dims: Vec<usize>,
}

fn unravel(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = i % dims[d];
        i /= dims[d];
    }
    idx
}

fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (i, d)| acc * d + i)
}

/// Index into `dims` (broadcast to `out`) of output multi-index `idx`.
fn bcast(idx: &[usize], dims: &[usize]) -> usize {
    let lead = idx.len() - dims.len();
    let sub: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
        .collect();
    ravel(&sub, dims)
}

pub fn round(v: f64, dt: DType) -> f64 {
    match dt {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        DType::I64 => {
            // As Rust's `as i64`: NaN is 0, out of range saturates (the
            // max of nothing is i64::MIN, not -inf).
            v as i64 as f64
        }
        DType::Bool => (v != 0.0) as u8 as f64,
    }
}

/// erf by composite Simpson integration of 2/√π e^{-t²} (independent of the runtime's series).
pub fn erf_ref(x: f64) -> f64 {
    let n = 20_000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        let w = if i % 2 == 1 { 4.0 } else { 2.0 };
        s += w * f(i as f64 * h);
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

fn unary(op: UnaryOp, x: f64) -> f64 {
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
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Erf => erf_ref(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::Not => (x == 0.0) as u8 as f64,
    }
}

fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
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
    }
}

fn compare(op: CmpOp, a: f64, b: f64) -> f64 {
    (match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }) as u8 as f64
}

/// Evaluates `g` naively on f64 copies of the inputs.
pub fn eval(g: &Graph, inputs: &[&Tensor]) -> Vec<Val> {
    let mut vals: Vec<Val> = Vec::new();
    for n in g.nodes() {
        let out_dims = n.shape.dims().to_vec();
        let numel: usize = out_dims.iter().product();
        let a = |k: usize| &vals[n.inputs[k].index()];
        let data: Vec<f64> = match &n.op {
            Op::Input { index } => inputs[*index].to_f64_vec().unwrap(),
            Op::Constant(lit) => (0..numel).map(|i| lit.get_f64(i)).collect(),
            Op::Unary(u) => a(0).data.iter().map(|&x| unary(*u, x)).collect(),
            Op::Binary(b) => (0..numel)
                .map(|i| {
                    let idx = unravel(i, &out_dims);
                    binary(
                        *b,
                        a(0).data[bcast(&idx, &a(0).dims)],
                        a(1).data[bcast(&idx, &a(1).dims)],
                    )
                })
                .collect(),
            Op::Compare(c) => (0..numel)
                .map(|i| {
                    let idx = unravel(i, &out_dims);
                    compare(
                        *c,
                        a(0).data[bcast(&idx, &a(0).dims)],
                        a(1).data[bcast(&idx, &a(1).dims)],
                    )
                })
                .collect(),
            Op::Select => (0..numel)
                .map(|i| {
                    let idx = unravel(i, &out_dims);
                    if a(0).data[bcast(&idx, &a(0).dims)] != 0.0 {
                        a(1).data[bcast(&idx, &a(1).dims)]
                    } else {
                        a(2).data[bcast(&idx, &a(2).dims)]
                    }
                })
                .collect(),
            Op::Cast(_) | Op::StopGradient | Op::Reshape { .. } => a(0).data.clone(),
            Op::Broadcast { .. } => (0..numel)
                .map(|i| a(0).data[bcast(&unravel(i, &out_dims), &a(0).dims)])
                .collect(),
            Op::Reduce { op, axes } => {
                let x = a(0);
                let init = match op {
                    ReduceOp::Sum | ReduceOp::Mean => 0.0,
                    ReduceOp::Prod => 1.0,
                    ReduceOp::Max => f64::NEG_INFINITY,
                    ReduceOp::Min => f64::INFINITY,
                };
                let mut acc = vec![init; numel];
                for (i, &v) in x.data.iter().enumerate() {
                    let idx = unravel(i, &x.dims);
                    let kept: Vec<usize> = idx
                        .iter()
                        .enumerate()
                        .filter(|(d, _)| !axes.contains(d))
                        .map(|(_, &v)| v)
                        .collect();
                    let o = ravel(&kept, &out_dims);
                    acc[o] = match op {
                        ReduceOp::Sum | ReduceOp::Mean => acc[o] + v,
                        ReduceOp::Prod => acc[o] * v,
                        ReduceOp::Max if acc[o].is_nan() || v.is_nan() => f64::NAN,
                        ReduceOp::Min if acc[o].is_nan() || v.is_nan() => f64::NAN,
                        ReduceOp::Max => acc[o].max(v),
                        ReduceOp::Min => acc[o].min(v),
                    };
                }
                if let ReduceOp::Mean = op {
                    let c: usize = axes.iter().map(|&d| x.dims[d]).product();
                    acc.iter_mut().for_each(|v| *v /= c as f64);
                }
                acc
            }
            Op::MatMul => {
                let (x, y) = (a(0), a(1));
                let r = out_dims.len();
                let (m, nn) = (out_dims[r - 2], out_dims[r - 1]);
                let k = x.dims[x.dims.len() - 1];
                (0..numel)
                    .map(|i| {
                        let idx = unravel(i, &out_dims);
                        let (bi, ii, jj) = (&idx[..r - 2], idx[r - 2], idx[r - 1]);
                        let _ = m;
                        let _ = nn;
                        (0..k)
                            .map(|p| {
                                let mut ia = bi.to_vec();
                                ia.extend([ii, p]);
                                let mut ib = bi.to_vec();
                                ib.extend([p, jj]);
                                x.data[bcast(&ia, &x.dims)] * y.data[bcast(&ib, &y.dims)]
                            })
                            .sum()
                    })
                    .collect()
            }
            Op::Transpose { perm } => (0..numel)
                .map(|i| {
                    let idx = unravel(i, &out_dims);
                    let mut src = vec![0; idx.len()];
                    for (o, &p) in perm.iter().enumerate() {
                        src[p] = idx[o];
                    }
                    a(0).data[ravel(&src, &a(0).dims)]
                })
                .collect(),
            Op::Concat { axis } => (0..numel)
                .map(|i| {
                    let mut idx = unravel(i, &out_dims);
                    for p in &n.inputs {
                        let v = &vals[p.index()];
                        if idx[*axis] < v.dims[*axis] {
                            return v.data[ravel(&idx, &v.dims)];
                        }
                        idx[*axis] -= v.dims[*axis];
                    }
                    unreachable!()
                })
                .collect(),
            Op::Slice { axis, start, .. } => (0..numel)
                .map(|i| {
                    let mut idx = unravel(i, &out_dims);
                    idx[*axis] += start;
                    a(0).data[ravel(&idx, &a(0).dims)]
                })
                .collect(),
            Op::Gather { axis } => {
                let (x, ix) = (a(0), a(1));
                let r = ix.dims.len();
                (0..numel)
                    .map(|i| {
                        let idx = unravel(i, &out_dims);
                        let j = ravel(&idx[*axis..*axis + r], &ix.dims);
                        let mut src = idx[..*axis].to_vec();
                        src.push(ix.data[j] as usize);
                        src.extend_from_slice(&idx[*axis + r..]);
                        x.data[ravel(&src, &x.dims)]
                    })
                    .collect()
            }
            Op::ScatterAdd { axis } => {
                let (x, ix, u) = (a(0), a(1), a(2));
                let r = ix.dims.len();
                let mut out = x.data.clone();
                for (i, &v) in u.data.iter().enumerate() {
                    let idx = unravel(i, &u.dims);
                    let j = ravel(&idx[*axis..*axis + r], &ix.dims);
                    let mut dst = idx[..*axis].to_vec();
                    dst.push(ix.data[j] as usize);
                    dst.extend_from_slice(&idx[*axis + r..]);
                    out[ravel(&dst, &x.dims)] += v;
                }
                out
            }
            Op::Softmax { axis } | Op::LogSoftmax { axis } => {
                let x = a(0);
                let log = matches!(n.op, Op::LogSoftmax { .. });
                (0..numel)
                    .map(|i| {
                        let idx = unravel(i, &out_dims);
                        let row: Vec<f64> = (0..out_dims[*axis])
                            .map(|j| {
                                let mut t = idx.clone();
                                t[*axis] = j;
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
            Op::Solve => {
                let (am, bm) = (a(0), a(1));
                let r = am.dims.len();
                let nn = am.dims[r - 1];
                let k = bm.dims[r - 1];
                let batches: usize = am.dims[..r - 2].iter().product();
                let mut out = Vec::new();
                for bi in 0..batches {
                    // Gauss-Jordan on the augmented matrix [A | B].
                    let mut aug: Vec<Vec<f64>> = (0..nn)
                        .map(|i| {
                            let mut row: Vec<f64> = am.data
                                [bi * nn * nn + i * nn..bi * nn * nn + (i + 1) * nn]
                                .to_vec();
                            row.extend_from_slice(
                                &bm.data[bi * nn * k + i * k..bi * nn * k + (i + 1) * k],
                            );
                            row
                        })
                        .collect();
                    for c in 0..nn {
                        let p = (c..nn)
                            .max_by(|&x, &y| aug[x][c].abs().partial_cmp(&aug[y][c].abs()).unwrap())
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
            Op::Custom(_) => panic!("inline custom ops before evaluating"),
        };
        let data = data.into_iter().map(|v| round(v, n.dtype)).collect();
        vals.push(Val {
            data,
            dims: out_dims,
        });
    }
    g.outputs()
        .iter()
        .map(|o| vals[o.index()].clone())
        .collect()
}

/// Asserts that `got` equals `want` within a relative tolerance (NaN == NaN).
pub fn assert_close(got: &[f64], want: &[f64], rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rtol * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Deterministic pseudo-random values in `[lo, hi)`.
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// A tensor of `dtype` holding `values` (converted).
pub fn tensor(values: &[f64], dims: &[usize], dtype: DType) -> Tensor {
    let storage = rlx_runtime::Storage::from_f64(dtype, values.iter().copied());
    Tensor::from_storage(storage, dims.to_vec()).unwrap()
}
