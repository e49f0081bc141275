//! Element-wise ops in fused loops and scalar regions: every unary and binary
//! op, comparisons, select, casts, half precision, 0-d integers.

use super::*;

#[test]
fn every_unary_op_fused_and_scalar() {
    for dtype in [DType::F64, DType::F32] {
        for op in UnaryOp::ALL {
            if op == UnaryOp::Not {
                continue;
            }
            let (lo, hi) = domain(op);
            // A [5, 7] chain: op(x) * 1.5 + x, fused into one loop.
            let mut g = Graph::new();
            let x = g.input("x", [5, 7], dtype);
            let y = g.unary(op, x).unwrap();
            let c = g.scalar(1.5, dtype);
            let z = g.mul(y, c).unwrap();
            let w = g.add(z, x).unwrap();
            g.set_outputs(vec![w, y]);
            let xv = tensor(&values(35, 1, lo, hi), &[5, 7], dtype);
            let exe = check(&g, &[&xv], tol(dtype), &format!("{op:?} {dtype}"));
            assert_eq!(exe.stats().fused_loops, 1);
            // The same on 0-d values: a scalar region.
            let mut g = Graph::new();
            let x = g.input("x", (), dtype);
            let y = g.unary(op, x).unwrap();
            let c = g.scalar(1.5, dtype);
            let z = g.mul(y, c).unwrap();
            g.set_outputs(vec![z]);
            let xv = tensor(&values(1, 2, lo, hi), &[], dtype);
            let exe = check(&g, &[&xv], tol(dtype), &format!("0-d {op:?} {dtype}"));
            assert_eq!(exe.stats().scalar_regions, 1);
        }
    }
}

#[test]
fn every_binary_op_with_broadcasting() {
    for dtype in [DType::F64, DType::F32] {
        for op in BinaryOp::ALL {
            if matches!(op, BinaryOp::And | BinaryOp::Or) {
                continue;
            }
            let mut g = Graph::new();
            let a = g.input("a", [4, 1], dtype);
            let b = g.input("b", [3], dtype);
            let s = g.input("s", (), dtype);
            let ab = g.binary(op, a, b).unwrap();
            let abs_ = g.binary(op, ab, s).unwrap();
            let sb = g.binary(op, s, b).unwrap();
            // 0-d operands: a scalar region (both orders, and a NaN operand).
            let t = g.input("t", (), dtype);
            let st = g.binary(op, s, t).unwrap();
            let ts = g.binary(op, t, s).unwrap();
            let nan = g.scalar(f64::NAN, dtype);
            let sn = g.binary(op, s, nan).unwrap();
            g.set_outputs(vec![abs_, sb, st, ts, sn]);
            let av = tensor(&values(4, 3, 0.2, 2.0), &[4, 1], dtype);
            let mut bvals = values(3, 4, -2.0, 2.0);
            bvals[1] = 0.0;
            let bv = tensor(&bvals, &[3], dtype);
            let sv = tensor(&[0.7], &[], dtype);
            let tv = tensor(&[-1.25], &[], dtype);
            check(
                &g,
                &[&av, &bv, &sv, &tv],
                tol(dtype),
                &format!("{op:?} {dtype}"),
            );
        }
    }
}

#[test]
fn logical_compare_select_and_integers() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let y = g.input("y", [3], DType::F64);
    let i = g.input("i", [2, 3], DType::I64);
    let lt = g.compare(CmpOp::Lt, x, y).unwrap();
    let ge = g.compare(CmpOp::Ge, x, y).unwrap();
    let eq = g.compare(CmpOp::Eq, x, y).unwrap();
    let ne = g.compare(CmpOp::Ne, lt, ge).unwrap();
    let both = g.and(lt, ne).unwrap();
    let either = g.or(both, eq).unwrap();
    let not = g.not(either).unwrap();
    let sel = g.select(not, x, y).unwrap();
    let two = g.full((), 2.0, DType::I64);
    let ii = g.mul(i, two).unwrap();
    let im = g.max(ii, i).unwrap();
    let ineg = g.neg(im).unwrap();
    let ip = g.powi(ineg, 3).unwrap();
    let ile = g.compare(CmpOp::Le, ip, i).unwrap();
    let fi = g.cast(ip, DType::F64).unwrap();
    let r = g.add(sel, fi).unwrap();
    g.set_outputs(vec![r, ile, either]);
    let xv = tensor(&[0.0, 1.0, 2.0, 3.0, -1.0, 0.5], &[2, 3], DType::F64);
    let yv = tensor(&[1.0, 1.0, 0.0], &[3], DType::F64);
    let iv = tensor(&[-3.0, -1.0, 0.0, 1.0, 2.0, 5.0], &[2, 3], DType::I64);
    check(&g, &[&xv, &yv, &iv], 0.0, "logical");
}

#[test]
fn casts_between_all_dtypes() {
    let dts = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::Bool,
    ];
    for from in dts {
        for to in dts {
            for dims in [vec![3, 2], vec![]] {
                let mut g = Graph::new();
                let x = g.input("x", dims.clone(), from);
                let c = g.cast(x, to).unwrap();
                g.set_outputs(vec![c]);
                let n: usize = dims.iter().product();
                let raw = [-2.75, 0.0, 1.5, 3.25, -0.5, 7.0];
                let xv = tensor(&raw[..n], &dims, from);
                check(&g, &[&xv], 0.0, &format!("cast {from}->{to} {dims:?}"));
            }
        }
    }
}

#[test]
fn half_precision_chains_round_after_each_op() {
    for dtype in [DType::F16, DType::BF16] {
        let mut g = Graph::new();
        let x = g.input("x", [17], dtype);
        let e = g.exp(x).unwrap();
        let s = g.sin(e).unwrap();
        let m = g.mul(s, x).unwrap();
        g.set_outputs(vec![m]);
        let xv = tensor(&values(17, 5, -1.0, 1.0), &[17], dtype);
        check(&g, &[&xv], tol(dtype), &format!("{dtype} chain"));
        let mut g = Graph::new();
        let x = g.input("x", (), dtype);
        let e = g.exp(x).unwrap();
        let s = g.sin(e).unwrap();
        g.set_outputs(vec![s]);
        let xv = tensor(&[0.3], &[], dtype);
        check(&g, &[&xv], tol(dtype), &format!("{dtype} scalar"));
    }
}

#[test]
fn zero_d_integers_and_mixed_dtypes() {
    // 0-d i64 values run in a (one-element) fused loop; the f64 part after
    // the cast is a scalar region; bool masks select between branches.
    let mut g = Graph::new();
    let n = g.input("n", (), DType::I64);
    let x = g.input("x", (), DType::F32);
    let three = g.full((), 3.0, DType::I64);
    let m = g.mul(n, three).unwrap();
    let p = g.powi(m, 2).unwrap();
    let f = g.cast(p, DType::F64).unwrap();
    let xf = g.cast(x, DType::F64).unwrap();
    let s = g.add(f, xf).unwrap();
    let pos = g.compare(CmpOp::Gt, s, f).unwrap();
    let neg = g.neg(s).unwrap();
    let r = g.select(pos, s, neg).unwrap();
    let h = g.cast(r, DType::F16).unwrap();
    let h2 = g.sqrt(h).unwrap();
    g.set_outputs(vec![r, p, h2, pos]);
    for (nv, xv) in [(2.0, 0.5), (-3.0, -1.25), (0.0, 0.0)] {
        let nt = tensor(&[nv], &[], DType::I64);
        let xt = tensor(&[xv], &[], DType::F32);
        check(&g, &[&nt, &xt], 1e-3, &format!("mixed 0-d n={nv} x={xv}"));
    }
}
