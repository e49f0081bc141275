//! Complex values, one test per op from a one-line table entry, by JAX's
//! convention (tangents and cotangents have their primal's dtype; reverse
//! mode transposes for the bilinear pairing `⟨u, v⟩ = Re Σ u·v`, with no
//! conjugation):
//! - the value of the compiled plan against the reference interpreter;
//! - the JVP against central finite differences in *both* real directions
//!   of every complex input (a tangent along the real axis, then one
//!   along the imaginary axis);
//! - the VJP against the JVP through `Re⟨u, J v⟩ = Re⟨Jᵀ u, v⟩`, for a
//!   random complex direction `v` and cotangent `u`.
//!
//! Then the pinned values of the convention (`grad |z|²` at `3 + 4i` is
//! `6 − 8i`, `grad |z|` at `i` is `−i`, the VJP of `a·z` is `ct·a`, of
//! `conj` is `conj(ct)`) and the errors of ops without a complex kernel.

use num_complex::Complex;
use rlx_core::autodiff::{grad, jvp, vjp};
use rlx_core::{BinaryOp, CmpOp, DType, Error, Graph, NodeId, ReduceOp, UnaryOp};
use rlx_runtime::{compile, interpret, Tensor, C64};

const H: f64 = 1e-6;
const TOL: f64 = 1e-6;

/// A small deterministic generator (xorshift), seeded per test.
struct Rng(u64);

impl Rng {
    fn new(name: &str) -> Rng {
        Rng(name.bytes().fold(1469598103934665603u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(1099511628211)
        }) | 1)
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// An input's type and the box its values are drawn from: real parts in
/// `re`, imaginary parts in `im` (ignored for a real input).
#[derive(Clone, Copy)]
struct In {
    shape: &'static [usize],
    dtype: DType,
    re: (f64, f64),
    im: (f64, f64),
}

const fn c(shape: &'static [usize]) -> In {
    In {
        shape,
        dtype: DType::C64,
        re: (-1.5, 1.5),
        im: (-1.5, 1.5),
    }
}

/// Away from the branch cut of `ln`, `sqrt`, `arg` (the negative real axis) and from 0.
const fn right(shape: &'static [usize]) -> In {
    In {
        shape,
        dtype: DType::C64,
        re: (0.5, 2.0),
        im: (-1.5, 1.5),
    }
}

const fn r(shape: &'static [usize]) -> In {
    In {
        shape,
        dtype: DType::F64,
        re: (-1.5, 1.5),
        im: (0.0, 0.0),
    }
}

fn tensor(v: &[C64], shape: &[usize], dtype: DType) -> Tensor {
    match dtype {
        DType::C64 => Tensor::from_slice(v, shape.to_vec()),
        _ => Tensor::from_vec(v.iter().map(|z| z.re).collect::<Vec<f64>>(), shape.to_vec()),
    }
}

/// Runs `g` compiled, checks it against the interpreter, and returns
/// every output as complex numbers.
fn run(g: &Graph, args: &[Tensor]) -> Vec<Vec<C64>> {
    let refs: Vec<&Tensor> = args.iter().collect();
    let got = compile(g).unwrap().run(&refs).unwrap();
    let want = interpret(g, &refs).unwrap();
    let got: Vec<Vec<C64>> = got.iter().map(|t| t.to_complex_vec().unwrap()).collect();
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        let b = b.to_complex_vec().unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x - y).norm() <= 1e-12 * (1.0 + y.norm()) || (x.is_nan() && y.is_nan()),
                "output {k}: compiled {x} vs interpreted {y}"
            );
        }
    }
    got
}

/// `Re Σ a·b`, the pairing of tangents and cotangents.
fn pair(a: &[C64], b: &[C64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x * y).re).sum()
}

fn close(a: &[C64], b: &[C64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).norm() <= tol * (1.0 + y.norm()),
            "{what}: element {i}: {x} vs {y}"
        );
    }
}

fn check(name: &str, ins: &[In], build: impl Fn(&mut Graph, &[NodeId]) -> NodeId) {
    let mut rng = Rng::new(name);
    let mut g = Graph::new();
    let xs: Vec<NodeId> = ins
        .iter()
        .enumerate()
        .map(|(i, t)| g.input(format!("x{i}"), t.shape.to_vec(), t.dtype))
        .collect();
    let out = build(&mut g, &xs);
    g.set_outputs(vec![out]);
    let wrt: Vec<usize> = (0..xs.len()).collect();
    let numel = |t: &In| t.shape.iter().product::<usize>();
    let point: Vec<Vec<C64>> = ins
        .iter()
        .map(|t| {
            (0..numel(t))
                .map(|_| {
                    let re = rng.uniform(t.re.0, t.re.1);
                    let im = if t.dtype.is_complex() {
                        rng.uniform(t.im.0, t.im.1)
                    } else {
                        0.0
                    };
                    Complex::new(re, im)
                })
                .collect()
        })
        .collect();
    let args = |p: &[Vec<C64>]| -> Vec<Tensor> {
        p.iter()
            .zip(ins)
            .map(|(v, t)| tensor(v, t.shape, t.dtype))
            .collect()
    };
    let y = run(&g, &args(&point)).remove(0);
    let out_complex = g.dtype(out).is_complex();

    // JVP against central differences, one real direction at a time.
    let jg = jvp(&g, &wrt).unwrap();
    let directions: &[C64] = &[Complex::new(1.0, 0.0), Complex::new(0.0, 1.0)];
    for &axis in directions {
        for (k, t) in ins.iter().enumerate() {
            if axis.im != 0.0 && !t.dtype.is_complex() {
                continue;
            }
            let v: Vec<Vec<C64>> = ins
                .iter()
                .enumerate()
                .map(|(j, tj)| {
                    (0..numel(tj))
                        .map(|_| match j == k {
                            true => axis * rng.uniform(-1.0, 1.0),
                            false => Complex::new(0.0, 0.0),
                        })
                        .collect()
                })
                .collect();
            let mut a = args(&point);
            a.extend(args(&v));
            let jv = run(&jg, &a).remove(1);
            let shifted = |s: f64| -> Vec<C64> {
                let p: Vec<Vec<C64>> = point
                    .iter()
                    .zip(&v)
                    .map(|(x, d)| x.iter().zip(d).map(|(x, d)| x + d * s).collect())
                    .collect();
                run(&g, &args(&p)).remove(0)
            };
            let (plus, minus) = (shifted(H), shifted(-H));
            let fd: Vec<C64> = plus
                .iter()
                .zip(&minus)
                .map(|(p, m)| (p - m) / (2.0 * H))
                .collect();
            let dir = if axis.im != 0.0 { "imaginary" } else { "real" };
            close(
                &jv,
                &fd,
                TOL,
                &format!("{name}: jvp vs fd along the {dir} axis of x{k}"),
            );
        }
    }

    // VJP against the JVP in the bilinear pairing, random complex v and u.
    let v: Vec<Vec<C64>> = ins
        .iter()
        .map(|t| {
            (0..numel(t))
                .map(|_| {
                    let im = if t.dtype.is_complex() {
                        rng.uniform(-1.0, 1.0)
                    } else {
                        0.0
                    };
                    Complex::new(rng.uniform(-1.0, 1.0), im)
                })
                .collect()
        })
        .collect();
    let u: Vec<C64> = (0..y.len())
        .map(|_| {
            let im = if out_complex {
                rng.uniform(-1.0, 1.0)
            } else {
                0.0
            };
            Complex::new(rng.uniform(-1.0, 1.0), im)
        })
        .collect();
    let mut a = args(&point);
    a.extend(args(&v));
    let jv = run(&jg, &a).remove(1);
    let vg = vjp(&g, &wrt).unwrap();
    let mut a = args(&point);
    let out_shape = g.shape(out).dims().to_vec();
    a.push(tensor(&u, &out_shape, g.dtype(out)));
    let outs = run(&vg, &a);
    let lhs = pair(&u, &jv);
    let rhs: f64 = outs[1..].iter().zip(&v).map(|(b, v)| pair(b, v)).sum();
    assert!(
        (lhs - rhs).abs() <= 1e-10 * (1.0 + lhs.abs()),
        "{name}: Re<u, Jv> = {lhs} vs Re<J^T u, v> = {rhs}"
    );
    // Cotangents have their inputs' dtypes.
    for (k, t) in ins.iter().enumerate() {
        assert_eq!(
            vg.dtype(vg.outputs()[1 + k]),
            t.dtype,
            "{name}: dtype of x{k}'s cotangent"
        );
    }
}

macro_rules! op_tests {
    ($($name:ident: $ins:expr, |$g:ident, $x:ident| $body:expr;)*) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name), $ins, |$g: &mut Graph, $x: &[NodeId]| $body);
            }
        )*
    };
}

op_tests! {
    neg: &[c(&[3])], |g, x| g.neg(x[0]).unwrap();
    exp: &[c(&[3])], |g, x| g.exp(x[0]).unwrap();
    ln: &[right(&[3])], |g, x| g.ln(x[0]).unwrap();
    sin: &[c(&[3])], |g, x| g.sin(x[0]).unwrap();
    cos: &[c(&[3])], |g, x| g.cos(x[0]).unwrap();
    tan: &[c(&[3])], |g, x| g.tan(x[0]).unwrap();
    tanh: &[c(&[3])], |g, x| g.tanh(x[0]).unwrap();
    sinh: &[c(&[3])], |g, x| g.sinh(x[0]).unwrap();
    cosh: &[c(&[3])], |g, x| g.cosh(x[0]).unwrap();
    asin: &[c(&[3])], |g, x| g.asin(x[0]).unwrap();
    acos: &[c(&[3])], |g, x| g.acos(x[0]).unwrap();
    atan: &[c(&[3])], |g, x| g.atan(x[0]).unwrap();
    sigmoid: &[c(&[3])], |g, x| g.sigmoid(x[0]).unwrap();
    sqrt: &[right(&[3])], |g, x| g.sqrt(x[0]).unwrap();
    rsqrt: &[right(&[3])], |g, x| g.rsqrt(x[0]).unwrap();
    recip: &[right(&[3])], |g, x| g.recip(x[0]).unwrap();
    square: &[c(&[3])], |g, x| g.square(x[0]).unwrap();
    powi_3: &[c(&[3])], |g, x| g.powi(x[0], 3).unwrap();
    powi_neg2: &[right(&[3])], |g, x| g.powi(x[0], -2).unwrap();
    conj: &[c(&[3])], |g, x| g.conj(x[0]).unwrap();
    real: &[c(&[3])], |g, x| g.real(x[0]).unwrap();
    imag: &[c(&[3])], |g, x| g.imag(x[0]).unwrap();
    abs: &[right(&[3])], |g, x| g.abs(x[0]).unwrap();
    arg: &[right(&[3])], |g, x| {
        let (re, im) = (g.real(x[0]).unwrap(), g.imag(x[0]).unwrap());
        g.atan2(im, re).unwrap()
    };
    complex_from_parts: &[r(&[3]), r(&[1])], |g, x| g.complex(x[0], x[1]).unwrap();
    add_broadcast: &[c(&[2, 3]), c(&[3])], |g, x| g.add(x[0], x[1]).unwrap();
    sub_broadcast: &[c(&[2, 1]), c(&[3])], |g, x| g.sub(x[0], x[1]).unwrap();
    mul_broadcast: &[c(&[2, 3]), c(&[1, 3])], |g, x| g.mul(x[0], x[1]).unwrap();
    div: &[c(&[3]), right(&[3])], |g, x| g.div(x[0], x[1]).unwrap();
    pow: &[right(&[3]), c(&[3])], |g, x| g.pow(x[0], x[1]).unwrap();
    mul_zero: &[c(&[3]), c(&[3])], |g, x| g.mul_zero(x[0], x[1]).unwrap();
    real_times_complex: &[r(&[2, 3]), c(&[3])], |g, x| g.mul(x[0], x[1]).unwrap();
    complex_over_real: &[c(&[3]), r(&[1])], |g, x| {
        let two = g.scalar(2.0, DType::F64);
        let d = g.add(x[1], two).unwrap();
        let s = g.square(d).unwrap();
        g.div(x[0], s).unwrap()
    };
    sum: &[c(&[2, 3])], |g, x| g.sum(x[0], &[1]).unwrap();
    mean: &[c(&[2, 3])], |g, x| g.reduce(ReduceOp::Mean, x[0], &[0]).unwrap();
    prod: &[c(&[2, 3])], |g, x| g.reduce(ReduceOp::Prod, x[0], &[1]).unwrap();
    matmul: &[c(&[2, 3]), c(&[3, 2])], |g, x| g.matmul(x[0], x[1]).unwrap();
    matmul_batched_real_left: &[r(&[2, 2, 3]), c(&[3, 2])], |g, x| g.matmul(x[0], x[1]).unwrap();
    transpose: &[c(&[2, 3])], |g, x| g.transpose(x[0], &[1, 0]).unwrap();
    conj_transpose: &[c(&[2, 3])], |g, x| {
        let t = g.transpose(x[0], &[1, 0]).unwrap();
        g.conj(t).unwrap()
    };
    reshape: &[c(&[2, 3])], |g, x| g.reshape(x[0], [3, 2]).unwrap();
    slice: &[c(&[4])], |g, x| g.slice_range(x[0], 1..3, 0).unwrap();
    concat: &[c(&[2]), c(&[3])], |g, x| g.concat(&[x[0], x[1]], 0).unwrap();
    broadcast: &[c(&[3])], |g, x| g.broadcast(x[0], [2, 3]).unwrap();
    select_by_real_part: &[c(&[4]), c(&[4])], |g, x| {
        let re = g.real(x[0]).unwrap();
        let z = g.scalar(0.0, DType::F64);
        let m = g.compare(CmpOp::Gt, re, z).unwrap();
        g.select(m, x[0], x[1]).unwrap()
    };
    gather: &[c(&[4])], |g, x| {
        let idx = g.constant(rlx_core::Literal::I64(vec![3, 0, 3].into()), [3], DType::I64).unwrap();
        g.gather(x[0], idx, 0).unwrap()
    };
    norm_sqr_sum: &[c(&[3])], |g, x| {
        let (re, im) = (g.real(x[0]).unwrap(), g.imag(x[0]).unwrap());
        let (a, b) = (g.square(re).unwrap(), g.square(im).unwrap());
        let s = g.add(a, b).unwrap();
        g.sum_all(s).unwrap()
    };
    solve: &[c(&[3, 3]), c(&[3, 2])], |g, x| {
        let a = dominant(g, x[0], 3);
        g.solve(a, x[1]).unwrap()
    };
    solve_batched: &[c(&[2, 3, 3]), c(&[2, 3, 1])], |g, x| {
        let a = dominant(g, x[0], 3);
        g.solve(a, x[1]).unwrap()
    };
    nonholomorphic_chain: &[c(&[3])], |g, x| {
        // z ↦ conj(z) · exp(z) + |z|: neither holomorphic nor real.
        let cz = g.conj(x[0]).unwrap();
        let e = g.exp(x[0]).unwrap();
        let p = g.mul(cz, e).unwrap();
        let a = g.abs(x[0]).unwrap();
        g.add(p, a).unwrap()
    };
}

/// `a + 4·I` (a real identity broadcast over `a`'s batch): well
/// conditioned for entries in the boxes above.
fn dominant(g: &mut Graph, a: NodeId, n: usize) -> NodeId {
    let eye: Vec<f64> = (0..n * n)
        .map(|i| if i % (n + 1) == 0 { 4.0 } else { 0.0 })
        .collect();
    let eye = g
        .constant(rlx_core::Literal::F64(eye.into()), [n, n], DType::F64)
        .unwrap();
    g.add(a, eye).unwrap()
}

/// The gradient of a real function of one complex input at `z`.
fn grad_at(build: impl Fn(&mut Graph, NodeId) -> NodeId, z: &[C64]) -> Vec<C64> {
    let mut g = Graph::new();
    let x = g.input("z", [z.len()], DType::C64);
    let y = build(&mut g, x);
    g.set_outputs(vec![y]);
    let gg = grad(&g, &[0]).unwrap();
    run(&gg, &[Tensor::from_slice(z, [z.len()])]).remove(1)
}

#[test]
fn grad_of_norm_sqr_at_3_plus_4i_is_6_minus_8i() {
    let got = grad_at(
        |g, x| {
            let (re, im) = (g.real(x).unwrap(), g.imag(x).unwrap());
            let (a, b) = (g.square(re).unwrap(), g.square(im).unwrap());
            let s = g.add(a, b).unwrap();
            g.sum_all(s).unwrap()
        },
        &[Complex::new(3.0, 4.0)],
    );
    assert_eq!(got, vec![Complex::new(6.0, -8.0)]);
}

#[test]
fn grad_of_abs_at_i_is_minus_i_and_0_at_0() {
    let abs_sum = |g: &mut Graph, x| {
        let a = g.abs(x).unwrap();
        g.sum_all(a).unwrap()
    };
    let got = grad_at(abs_sum, &[Complex::new(0.0, 1.0), Complex::new(0.0, 0.0)]);
    assert_eq!(got, vec![Complex::new(0.0, -1.0), Complex::new(0.0, 0.0)]);
}

#[test]
fn vjp_of_a_times_z_is_ct_times_a_and_of_conj_is_conj_ct() {
    let a = Complex::new(2.0, -1.0);
    let (z, ct) = (Complex::new(0.5, 0.25), Complex::new(-1.0, 3.0));
    for conj in [false, true] {
        let mut g = Graph::new();
        let x = g.input("z", [1], DType::C64);
        let y = match conj {
            false => {
                let av = g
                    .constant(rlx_core::Literal::F64(vec![0.0].into()), [1], DType::F64)
                    .unwrap();
                let re = g.scalar(a.re, DType::F64);
                let im = g.scalar(a.im, DType::F64);
                let ac = g.complex(re, im).unwrap();
                let ac = g.add(ac, av).unwrap();
                g.mul(ac, x).unwrap()
            }
            true => g.conj(x).unwrap(),
        };
        g.set_outputs(vec![y]);
        let vg = vjp(&g, &[0]).unwrap();
        let out = run(
            &vg,
            &[
                Tensor::from_slice(&[z], [1]),
                Tensor::from_slice(&[ct], [1]),
            ],
        );
        let want = match conj {
            false => ct * a,
            true => ct.conj(),
        };
        assert_eq!(out[1], vec![want], "conj = {conj}");
    }
}

#[test]
fn a_complex_output_has_no_gradient_and_points_to_vjp() {
    let mut g = Graph::new();
    let x = g.input("z", [], DType::C64);
    let y = g.square(x).unwrap();
    g.set_outputs(vec![y]);
    let e = grad(&g, &[0]).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("c64") && m.contains("vjp_") && m.contains("holomorphic"),
        "{m}"
    );
}

#[test]
fn ops_without_a_complex_kernel_are_errors_naming_the_op_and_dtype() {
    let z = Tensor::from_slice(&[Complex::new(1.0, 2.0), Complex::new(-1.0, 0.5)], [2]);
    let w = z.clone();
    let cases: Vec<(&str, Result<Tensor, Error>)> = vec![
        (
            "lt",
            Tensor::apply(rlx_core::Op::Compare(CmpOp::Lt), &[&z, &w]),
        ),
        ("max", z.try_binary(BinaryOp::Max, &w)),
        (
            "relu",
            Tensor::apply(rlx_core::Op::Unary(UnaryOp::Relu), &[&z]),
        ),
        (
            "floor",
            Tensor::apply(rlx_core::Op::Unary(UnaryOp::Floor), &[&z]),
        ),
        (
            "sign",
            Tensor::apply(rlx_core::Op::Unary(UnaryOp::Sign), &[&z]),
        ),
        ("reduce_max", z.try_max(&[0])),
    ];
    for (op, r) in cases {
        let m = r.unwrap_err().to_string();
        assert!(
            m.contains(op) && m.contains("c64") && m.contains("not ordered"),
            "{op}: {m}"
        );
    }
    // The same in a graph: an error when the node is built, not a panic.
    let mut g = Graph::new();
    let x = g.input("z", [2], DType::C64);
    let e = g.relu(x).unwrap_err().to_string();
    assert!(e.contains("relu") && e.contains("c64"), "{e}");
    // `eq`/`ne` are defined (no ordering).
    let eq = z.compare(CmpOp::Eq, &w).to_vec::<bool>().unwrap();
    assert_eq!(eq, vec![true, true]);
}

#[test]
fn eager_values_follow_num_complex() {
    let zs = [
        Complex::new(0.5, -1.25),
        Complex::new(-2.0, 0.75),
        Complex::new(1.5, 2.0),
    ];
    let z = Tensor::from_slice(&zs, [3]);
    let unary: Vec<(&str, Tensor, Vec<C64>)> = vec![
        ("exp", z.exp(), zs.iter().map(|z| z.exp()).collect()),
        ("ln", z.ln(), zs.iter().map(|z| z.ln()).collect()),
        ("sqrt", z.sqrt(), zs.iter().map(|z| z.sqrt()).collect()),
        ("sin", z.sin(), zs.iter().map(|z| z.sin()).collect()),
        ("tanh", z.tanh(), zs.iter().map(|z| z.tanh()).collect()),
        ("recip", z.recip(), zs.iter().map(|z| 1.0 / z).collect()),
        ("powi", z.powi(3), zs.iter().map(|z| z * z * z).collect()),
        ("conj", z.conj(), zs.iter().map(|z| z.conj()).collect()),
        (
            "mh",
            z.reshape([1, 3]).mh(),
            zs.iter().map(|z| z.conj()).collect(),
        ),
        ("sum", z.sum_all(), vec![zs.iter().sum()]),
        ("prod", z.prod_all(), vec![zs.iter().product()]),
    ];
    for (name, got, want) in unary {
        close(&got.to_complex_vec().unwrap(), &want, 1e-15, name);
    }
    let real = |t: Tensor| t.to_vec::<f64>().unwrap();
    assert_eq!(
        real(z.abs()),
        zs.iter().map(|z| z.norm()).collect::<Vec<_>>()
    );
    assert_eq!(real(z.real()), zs.iter().map(|z| z.re).collect::<Vec<_>>());
    assert_eq!(real(z.imag()), zs.iter().map(|z| z.im).collect::<Vec<_>>());
    assert_eq!(
        real(z.arg()),
        zs.iter().map(|z| z.arg()).collect::<Vec<_>>()
    );
    assert_eq!(
        real(z.norm_sqr()),
        zs.iter().map(|z| z.norm_sqr()).collect::<Vec<_>>()
    );
    // Promotion: a real tensor or an f64 with a complex tensor is complex.
    let x = Tensor::from_slice(&[2.0, -1.0, 0.5], [3]);
    close(
        &x.mul(&z).to_complex_vec().unwrap(),
        &zs.iter()
            .zip([2.0, -1.0, 0.5])
            .map(|(z, x)| z * x)
            .collect::<Vec<_>>(),
        0.0,
        "real * complex",
    );
    close(
        &z.add_scalar(1.0).to_complex_vec().unwrap(),
        &zs.iter().map(|z| z + 1.0).collect::<Vec<_>>(),
        0.0,
        "complex + f64",
    );
    // Constructors and readers.
    let p = Tensor::polar(
        &Tensor::from_slice(&[2.0], [1]),
        &Tensor::from_slice(&[0.5], [1]),
    );
    close(
        &p.to_complex_vec().unwrap(),
        &[Complex::from_polar(2.0, 0.5)],
        1e-15,
        "polar",
    );
    let c = Tensor::complex(&Tensor::scalar(1.0), &Tensor::scalar(-2.0));
    assert_eq!(c.item::<C64>().unwrap(), Complex::new(1.0, -2.0));
    assert!(
        c.to_f64().is_err(),
        "a complex value is not read as a real one"
    );
    assert!(Tensor::try_from_slice(&zs, [4]).is_err(), "wrong length");
    // The explicit cast keeps the real part.
    assert_eq!(
        z.cast(DType::F64).to_vec::<f64>().unwrap(),
        vec![0.5, -2.0, 1.5]
    );
}

#[test]
fn complex_matmul_matches_a_naive_product() {
    let (m, k, n) = (5, 7, 3);
    let mut rng = Rng::new("matmul");
    let mut draw = |len: usize| -> Vec<C64> {
        (0..len)
            .map(|_| Complex::new(rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)))
            .collect()
    };
    let (a, b) = (draw(2 * m * k), draw(k * n));
    let got = Tensor::from_slice(&a, [2, m, k])
        .matmul(&Tensor::from_slice(&b, [k, n]))
        .to_complex_vec()
        .unwrap();
    let mut want = vec![Complex::new(0.0, 0.0); 2 * m * n];
    for bi in 0..2 {
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    want[bi * m * n + i * n + j] += a[bi * m * k + i * k + p] * b[p * n + j];
                }
            }
        }
    }
    close(&got, &want, 1e-14, "matmul");
}
