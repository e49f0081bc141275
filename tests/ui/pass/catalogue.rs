//! Every supported form in one file; `main` runs each and checks values.
use rlx::prelude::*;

// Plain helper functions over `Tensor` compose with traced code.
fn mul(a: &Tensor, b: &Tensor) -> Tensor {
    a * b
}
fn add(a: &Tensor, b: &Tensor) -> Tensor {
    a + b
}
fn sin(a: &Tensor) -> Tensor {
    a.sin()
}
fn sum(a: &Tensor) -> Tensor {
    a.sum_all()
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Mode {
    Square,
    Sine,
}

/// Shadowing, blocks, a helper call, a `Tensor` by value.
#[differentiable]
pub fn shadowing(x: Tensor) -> Tensor {
    let x = mul(&x, &x);
    let y = {
        let t = sin(&x);
        add(&t, &x)
    };
    sum(&y)
}

/// Early `return` on a static condition; `for` over a static range unrolls.
#[differentiable]
fn early_return(x: &Tensor, n: usize) -> Tensor {
    if n == 0 {
        return sum(x);
    }
    let mut acc = x.clone();
    for _ in 0..n {
        acc = mul(&acc, x);
    }
    sum(&acc)
}

/// A static enum parameter; `match` on it is static.
#[differentiable]
fn by_mode(x: &Tensor, mode: Mode) -> Tensor {
    let y = match mode {
        Mode::Square => mul(x, x),
        Mode::Sine => sin(x),
    };
    sum(&y)
}

/// Float parameters are 0-d tensors inside; float return.
#[differentiable]
fn scalars(a: f64, b: f64) -> f64 {
    mul(&mul(&a, &a), &b)
}

/// A tuple return: the first element is differentiated, the rest is auxiliary.
#[differentiable]
fn with_aux(x: &Tensor) -> (Tensor, Tensor) {
    let y = sin(x);
    (sum(&y), y)
}

/// `wrt` restricts the differentiated parameters.
#[differentiable(wrt(b))]
fn only_b(a: &Tensor, b: &Tensor) -> Tensor {
    sum(&mul(a, b))
}

/// Comparisons and `if`/`else` on traced values: an element-wise select.
#[differentiable]
fn relu_sum(x: &Tensor) -> Tensor {
    let y = if x > 0.0 { x.clone() } else { 0.0 };
    let z = if 0.5 <= x && x < 1.0 { 1.0 } else { mul(&y, &y) };
    sum(&z)
}

/// Shape queries are static: usable in `if`, `match` and loops.
#[differentiable]
fn shape_static(x: &Tensor) -> Tensor {
    let n = x.shape().dims()[0];
    let mut acc = sum(x);
    while acc.rank() > 0 {
        acc = sum(&acc);
    }
    match n {
        1 => acc,
        _ => mul(&acc, &acc),
    }
}

/// Method chains and operators with scalars on either side.
#[differentiable]
fn chained(x: &Tensor, k: f64) -> f64 {
    let y = (x * 2.0 - 1.0).tanh().square() * &k;
    (1.0 - y).exp().mean_all() + k.sqrt()
}

/// `mut` parameters.
#[differentiable]
fn mutable(mut x: Tensor, mut k: usize) -> Tensor {
    k += 1;
    for _ in 0..k {
        x = sin(&x);
    }
    sum(&x)
}

/// A differentiable function calling another one and a companion.
#[differentiable]
fn composed(x: &Tensor) -> Tensor {
    let g = grad_shadowing(x.clone()).unwrap();
    add(&sum(&g), &relu_sum(x))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-10 * (1.0 + a.abs().max(b.abs()))
}

fn main() {
    let x = Tensor::from_slice(&[0.3f64, -0.7, 1.5], [3]);
    let xs = [0.3f64, -0.7, 1.5];

    let v = shadowing(x.clone()).item::<f64>().unwrap();
    assert!(close(v, xs.iter().map(|x| (x * x).sin() + x * x).sum()));
    let g = grad_shadowing(x.clone()).unwrap().to_vec::<f64>().unwrap();
    for i in 0..3 {
        assert!(close(g[i], 2.0 * xs[i] * ((xs[i] * xs[i]).cos() + 1.0)));
    }

    let v0 = early_return(&x, 0).item::<f64>().unwrap();
    assert!(close(v0, xs.iter().sum()));
    let v2 = early_return(&x, 2).item::<f64>().unwrap();
    assert!(close(v2, xs.iter().map(|x| x * x * x).sum()));

    let sq = by_mode(&x, Mode::Square).item::<f64>().unwrap();
    let si = by_mode(&x, Mode::Sine).item::<f64>().unwrap();
    assert!(close(sq, xs.iter().map(|x| x * x).sum()));
    assert!(close(si, xs.iter().map(|x| x.sin()).sum()));

    assert!(close(scalars(3.0, 2.0), 18.0));
    let (da, db) = grad_scalars(3.0, 2.0).unwrap();
    assert!(close(da, 12.0) && close(db, 9.0));

    let (s, y) = with_aux(&x);
    assert_eq!(y.to_vec::<f64>().unwrap().len(), 3);
    assert!(close(s.item::<f64>().unwrap(), xs.iter().map(|x| x.sin()).sum()));
    let g = grad_with_aux(&x).unwrap().to_vec::<f64>().unwrap();
    assert!(close(g[2], 1.5f64.cos()));

    let b = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let gb = grad_only_b(&x, &b).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(gb, xs.to_vec());

    let r = relu_sum(&x).item::<f64>().unwrap();
    assert!(close(r, 0.09 + 1.5 * 1.5));
    let gr = grad_relu_sum(&x).unwrap().to_vec::<f64>().unwrap();
    assert!(close(gr[0], 0.6) && gr[1] == 0.0 && close(gr[2], 3.0));

    let s = shape_static(&x).item::<f64>().unwrap();
    assert!(close(s, 1.1f64 * 1.1));

    let k = 1.7f64;
    let ch = chained(&x, k);
    let want: f64 = xs
        .iter()
        .map(|x| (1.0 - (2.0 * x - 1.0).tanh().powi(2) * k).exp())
        .sum::<f64>()
        / 3.0
        + k.sqrt();
    assert!(close(ch, want));
    let (gx, gk) = grad_chained(&x, k).unwrap();
    assert_eq!(gx.shape().dims(), &[3]);
    let dk: f64 = xs
        .iter()
        .map(|x| {
            let t2 = (2.0 * x - 1.0).tanh().powi(2);
            -t2 * (1.0 - t2 * k).exp()
        })
        .sum::<f64>()
        / 3.0
        + 0.5 / k.sqrt();
    assert!(close(gk, dk));

    let m = mutable(x.clone(), 0).item::<f64>().unwrap();
    assert!(close(m, xs.iter().map(|x| x.sin()).sum()));

    let c = composed(&x).item::<f64>().unwrap();
    let want: f64 = xs.iter().map(|x| 2.0 * x * ((x * x).cos() + 1.0)).sum::<f64>() + 0.09 + 2.25;
    assert!(close(c, want));
}
