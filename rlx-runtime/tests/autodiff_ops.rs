//! One test per op, each from a one-line table entry: the JVP against
//! central finite differences along a random direction, the VJP against the
//! JVP through `⟨u, J v⟩ = ⟨Jᵀ u, v⟩`, the batched Jacobians of both modes
//! against the JVP and VJP (`J v`, `uᵀ J`), and (for ops whose second derivative
//! exists at the sampled points) the Hessian-vector product of `⟨u, f(x)⟩`
//! against finite differences of its gradient.

mod common;

use common::*;
use rlx_core::autodiff::{grad, hvp, jacfwd, jacrev, jvp, vjp};
use rlx_core::{CmpOp, DType, Graph, NodeId, ReduceOp, UnaryOp};

const H: f64 = 1e-5;
const TOL: f64 = 1e-6;

fn seed(name: &str) -> u64 {
    name.bytes().fold(1469598103934665603u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(1099511628211)
    })
}

/// Checks the first (and with `second`, second) derivatives of
/// `build(inputs)` at a random point with inputs uniform in `dom`.
fn check(
    name: &str,
    shapes: &[&[usize]],
    dom: (f64, f64),
    second: bool,
    build: impl Fn(&mut Graph, &[NodeId]) -> NodeId,
) {
    let mut rng = Rng::new(seed(name));
    let mut g = Graph::new();
    let xs: Vec<NodeId> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| input(&mut g, &format!("x{i}"), s))
        .collect();
    let out = build(&mut g, &xs);
    g.set_outputs(vec![out]);
    let wrt: Vec<usize> = (0..xs.len()).collect();
    let x: Vec<Vec<f64>> = shapes
        .iter()
        .map(|s| rng.vec(s.iter().product(), dom.0, dom.1))
        .collect();
    let v: Vec<Vec<f64>> = shapes
        .iter()
        .map(|s| rng.vec(s.iter().product(), -1.0, 1.0))
        .collect();
    let y = run(&g, &x).remove(0);
    let u = rng.vec(y.len(), -1.0, 1.0);

    // JVP against central differences.
    let jg = jvp(&g, &wrt).unwrap();
    let mut args = x.clone();
    args.extend(v.iter().cloned());
    let jv = run(&jg, &args).remove(1);
    assert_close(
        &jv,
        &fd(&g, &x, &v, 0, H),
        TOL,
        &format!("{name}: jvp vs fd"),
    );

    // VJP against the JVP: ⟨u, J v⟩ = Σ_i ⟨(Jᵀu)_i, v_i⟩.
    let vg = vjp(&g, &wrt).unwrap();
    let mut args = x.clone();
    args.push(u.clone());
    let outs = run(&vg, &args);
    let lhs = dot(&u, &jv);
    let rhs: f64 = outs[1..].iter().zip(&v).map(|(a, b)| dot(a, b)).sum();
    assert_close(
        &[lhs],
        &[rhs],
        1e-10,
        &format!("{name}: <u, Jv> vs <J^T u, v>"),
    );

    // Jacobians in one batched execution, both modes: J v = jvp, uᵀ J = vjp.
    for (mode, jac) in [
        ("jacfwd", jacfwd(&g, &wrt).unwrap()),
        ("jacrev", jacrev(&g, &wrt).unwrap()),
    ] {
        let blocks = run(&jac, &x);
        let mut jv_from_j = vec![0.0; y.len()];
        for (i, vi) in v.iter().enumerate() {
            let b = &blocks[1 + i];
            let ut_j: Vec<f64> = (0..vi.len())
                .map(|c| (0..y.len()).map(|r| u[r] * b[r * vi.len() + c]).sum())
                .collect();
            assert_close(
                &ut_j,
                &outs[1 + i],
                1e-9,
                &format!("{name}: {mode} u^T J[{i}] vs vjp"),
            );
            for (r, acc) in jv_from_j.iter_mut().enumerate() {
                *acc += dot(&b[r * vi.len()..(r + 1) * vi.len()], vi);
            }
        }
        assert_close(&jv_from_j, &jv, 1e-9, &format!("{name}: {mode} J v vs jvp"));
    }

    if second {
        // s(x) = ⟨u, f(x)⟩; H v from forward-over-reverse vs fd of ∇s.
        let mut sg = g.clone();
        let uc = constant(&mut sg, u.clone(), g.shape(out).dims());
        let p = sg.mul(out, uc).unwrap();
        let s = sg.sum_all(p).unwrap();
        sg.set_outputs(vec![s]);
        let hg = hvp(&sg, &wrt).unwrap();
        let mut args = x.clone();
        args.extend(v.iter().cloned());
        let hv = run(&hg, &args);
        let gg = grad(&sg, &wrt).unwrap();
        for i in 0..xs.len() {
            let want = fd(&gg, &x, &v, 1 + i, H);
            assert_close(
                &hv[1 + i],
                &want,
                1e-5,
                &format!("{name}: hvp[{i}] vs fd of grad"),
            );
        }
    }
}

macro_rules! op_tests {
    ($($name:ident: $shapes:expr, $dom:expr, $second:expr, |$g:ident, $x:ident| $body:expr;)*) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name), $shapes, $dom, $second, |$g: &mut Graph, $x: &[NodeId]| $body);
            }
        )*
    };
}

const ANY: (f64, f64) = (-1.5, 1.5);
const POS: (f64, f64) = (0.5, 2.0);

op_tests! {
    neg: &[&[3, 4]], ANY, true, |g, x| g.neg(x[0]).unwrap();
    exp: &[&[3, 4]], ANY, true, |g, x| g.exp(x[0]).unwrap();
    expm1: &[&[5]], ANY, true, |g, x| g.unary(UnaryOp::Expm1, x[0]).unwrap();
    ln: &[&[3, 4]], POS, true, |g, x| g.ln(x[0]).unwrap();
    log1p: &[&[5]], POS, true, |g, x| g.unary(UnaryOp::Log1p, x[0]).unwrap();
    sin: &[&[3, 4]], ANY, true, |g, x| g.sin(x[0]).unwrap();
    cos: &[&[3, 4]], ANY, true, |g, x| g.cos(x[0]).unwrap();
    tan: &[&[5]], (-1.0, 1.0), true, |g, x| g.tan(x[0]).unwrap();
    tanh: &[&[3, 4]], ANY, true, |g, x| g.tanh(x[0]).unwrap();
    sinh: &[&[5]], ANY, true, |g, x| g.sinh(x[0]).unwrap();
    cosh: &[&[5]], ANY, true, |g, x| g.cosh(x[0]).unwrap();
    asin: &[&[5]], (-0.8, 0.8), true, |g, x| g.asin(x[0]).unwrap();
    acos: &[&[5]], (-0.8, 0.8), true, |g, x| g.acos(x[0]).unwrap();
    atan: &[&[5]], ANY, true, |g, x| g.atan(x[0]).unwrap();
    sigmoid: &[&[3, 4]], ANY, true, |g, x| g.sigmoid(x[0]).unwrap();
    sqrt: &[&[5]], POS, true, |g, x| g.sqrt(x[0]).unwrap();
    rsqrt: &[&[5]], POS, true, |g, x| g.rsqrt(x[0]).unwrap();
    recip: &[&[5]], POS, true, |g, x| g.recip(x[0]).unwrap();
    square: &[&[5]], ANY, true, |g, x| g.square(x[0]).unwrap();
    powi_3: &[&[5]], ANY, true, |g, x| g.powi(x[0], 3).unwrap();
    powi_neg2: &[&[5]], POS, true, |g, x| g.powi(x[0], -2).unwrap();
    powi_0: &[&[5]], ANY, true, |g, x| g.powi(x[0], 0).unwrap();
    abs: &[&[6]], ANY, true, |g, x| g.abs(x[0]).unwrap();
    sign: &[&[6]], ANY, true, |g, x| { let s = g.sign(x[0]).unwrap(); g.mul(s, x[0]).unwrap() };
    relu: &[&[6]], ANY, true, |g, x| g.relu(x[0]).unwrap();
    gelu: &[&[6]], ANY, true, |g, x| g.gelu(x[0]).unwrap();
    silu: &[&[6]], ANY, true, |g, x| g.silu(x[0]).unwrap();
    erf: &[&[6]], ANY, true, |g, x| g.erf(x[0]).unwrap();
    floor: &[&[6]], ANY, true, |g, x| { let f = g.floor(x[0]).unwrap(); g.add(f, x[0]).unwrap() };
    ceil: &[&[6]], ANY, true, |g, x| { let f = g.ceil(x[0]).unwrap(); g.mul(f, x[0]).unwrap() };
    round: &[&[6]], ANY, true, |g, x| { let f = g.round(x[0]).unwrap(); g.mul(f, x[0]).unwrap() };
    add_broadcast: &[&[3, 1], &[1, 4]], ANY, true, |g, x| g.add(x[0], x[1]).unwrap();
    sub_broadcast: &[&[2, 3], &[3]], ANY, true, |g, x| g.sub(x[0], x[1]).unwrap();
    mul_broadcast: &[&[2, 3], &[2, 1]], ANY, true, |g, x| g.mul(x[0], x[1]).unwrap();
    div_broadcast: &[&[4], &[3, 1]], POS, true, |g, x| g.div(x[0], x[1]).unwrap();
    pow_broadcast: &[&[2, 3], &[3]], POS, true, |g, x| g.pow(x[0], x[1]).unwrap();
    max_broadcast: &[&[2, 3], &[3]], ANY, true, |g, x| g.max(x[0], x[1]).unwrap();
    min_broadcast: &[&[3, 1], &[4]], ANY, true, |g, x| g.min(x[0], x[1]).unwrap();
    atan2_broadcast: &[&[2, 3], &[3]], ANY, true, |g, x| g.atan2(x[0], x[1]).unwrap();
    mul_zero: &[&[2, 3], &[3]], ANY, true, |g, x| g.mul_zero(x[0], x[1]).unwrap();
    compare_gives_no_gradient: &[&[3, 4], &[4]], ANY, true, |g, x| {
        let c = g.compare(CmpOp::Lt, x[0], x[1]).unwrap();
        let m = g.cast(c, DType::F64).unwrap();
        g.mul(m, x[0]).unwrap()
    };
    logical_ops: &[&[6]], ANY, true, |g, x| {
        let z = g.scalar(0.0, DType::F64);
        let far = g.scalar(-5.0, DType::F64);
        let p = g.compare(CmpOp::Gt, x[0], z).unwrap();
        let q = g.compare(CmpOp::Lt, x[0], far).unwrap();
        let nq = g.not(q).unwrap();
        let c = g.and(p, nq).unwrap();
        let c = g.or(c, q).unwrap();
        let s = g.sin(x[0]).unwrap();
        let sq = g.square(x[0]).unwrap();
        g.select(c, s, sq).unwrap()
    };
    select_broadcast: &[&[3, 4], &[4]], ANY, true, |g, x| {
        let c = g.compare(CmpOp::Gt, x[0], x[1]).unwrap();
        let a = g.sin(x[0]).unwrap();
        let b = g.square(x[1]).unwrap();
        g.select(c, a, b).unwrap()
    };
    cast_to_int_is_flat: &[&[6]], (0.1, 3.9), true, |g, x| {
        let i = g.cast(x[0], DType::I64).unwrap();
        let f = g.cast(i, DType::F64).unwrap();
        g.mul(f, x[0]).unwrap()
    };
    sum_axes: &[&[2, 3, 4]], ANY, true, |g, x| g.sum(x[0], &[0, 2]).unwrap();
    mean_axes: &[&[2, 3, 4]], ANY, true, |g, x| g.reduce(ReduceOp::Mean, x[0], &[1]).unwrap();
    reduce_max: &[&[3, 4]], ANY, true, |g, x| g.reduce(ReduceOp::Max, x[0], &[1]).unwrap();
    reduce_min: &[&[3, 4]], ANY, true, |g, x| g.reduce(ReduceOp::Min, x[0], &[0]).unwrap();
    prod: &[&[3, 4]], ANY, true, |g, x| g.reduce(ReduceOp::Prod, x[0], &[1]).unwrap();
    prod_all: &[&[2, 3]], POS, true, |g, x| g.reduce(ReduceOp::Prod, x[0], &[0, 1]).unwrap();
    matmul: &[&[3, 4], &[4, 2]], ANY, true, |g, x| g.matmul(x[0], x[1]).unwrap();
    matmul_batch_broadcast: &[&[2, 3, 4], &[4, 5]], ANY, true, |g, x| g.matmul(x[0], x[1]).unwrap();
    matmul_batch_broadcast_rhs: &[&[3, 4], &[2, 1, 4, 2]], ANY, true, |g, x| g.matmul(x[0], x[1]).unwrap();
    transpose: &[&[2, 3, 4]], ANY, true, |g, x| { let t = g.transpose(x[0], &[2, 0, 1]).unwrap(); g.sin(t).unwrap() };
    reshape: &[&[2, 6]], ANY, true, |g, x| { let r = g.reshape(x[0], [3, 4]).unwrap(); let c = g.constant(rlx_core::Literal::F64((0..12).map(f64::from).collect::<Vec<_>>().into()), [3, 4], DType::F64).unwrap(); g.mul(r, c).unwrap() };
    broadcast: &[&[3, 1]], ANY, true, |g, x| { let b = g.broadcast(x[0], [2, 3, 4]).unwrap(); g.sin(b).unwrap() };
    concat: &[&[2, 3], &[2, 1]], ANY, true, |g, x| { let c = g.concat(&[x[0], x[1], x[0]], 1).unwrap(); g.square(c).unwrap() };
    slice: &[&[3, 5]], ANY, true, |g, x| { let s = g.slice_range(x[0], 1..4, 1).unwrap(); g.exp(s).unwrap() };
    gather_repeated: &[&[3, 4]], ANY, true, |g, x| { let i = indices(g, vec![2, 0, 2], &[3]); let y = g.gather(x[0], i, 1).unwrap(); g.sin(y).unwrap() };
    scatter_add: &[&[3, 4], &[3, 4]], ANY, true, |g, x| { let i = indices(g, vec![0, 2, 0], &[3]); let y = g.scatter_add(x[0], i, x[1], 0).unwrap(); g.square(y).unwrap() };
    softmax: &[&[3, 4]], ANY, true, |g, x| g.softmax(x[0], 1).unwrap();
    log_softmax: &[&[3, 4]], ANY, true, |g, x| g.log_softmax(x[0], 0).unwrap();
    solve: &[&[3, 3], &[3, 2]], ANY, true, |g, x| {
        let eye = constant(g, vec![3.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 3.0], &[3, 3]);
        let a = g.add(x[0], eye).unwrap();
        g.solve(a, x[1]).unwrap()
    };
    solve_batched: &[&[2, 3, 3], &[2, 3, 1]], ANY, true, |g, x| {
        let eye = constant(g, vec![3.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 3.0], &[3, 3]);
        let a = g.add(x[0], eye).unwrap();
        g.solve(a, x[1]).unwrap()
    };
}
