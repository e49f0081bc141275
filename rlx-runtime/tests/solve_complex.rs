//! Dense complex `solve` (LU with partial pivoting by modulus), eager and
//! compiled, and its derivatives by JAX's bilinear convention:
//! - the solution multiplies back (`‖A x − b‖` against `‖A‖ ‖x‖`), for
//!   `c64` and `c32`, batched, with a zero leading entry that forces a pivot;
//! - the JVP against central differences along the real and along the
//!   imaginary axis of *every* entry of `A` and `b` separately, and the VJP
//!   against that JVP entry by entry (`Re⟨u, J e⟩ = Re⟨Jᵀ u, e⟩` for `e`
//!   each real and each imaginary unit direction);
//! - a singular complex matrix is an error naming `solve` and the shape.

use num_complex::Complex;
use rlx_core::autodiff::{jvp, vjp};
use rlx_core::{DType, Error, Graph};
use rlx_runtime::{compile, Tensor, C64};

const H: f64 = 1e-6;

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        2.0 * ((self.0 >> 11) as f64 / (1u64 << 53) as f64) - 1.0
    }
    fn complex(&mut self, n: usize) -> Vec<C64> {
        (0..n)
            .map(|_| Complex::new(self.uniform(), self.uniform()))
            .collect()
    }
}

/// `max_i |(A x − b)_i| / (max_ij |A_ij| · max_i |x_i|)` over a batch of
/// `n x n` systems with `k` right-hand sides.
fn residual(a: &[C64], x: &[C64], b: &[C64], n: usize, k: usize) -> f64 {
    let batches = a.len() / (n * n);
    let mut worst = 0.0f64;
    for bt in 0..batches {
        let (a, x, b) = (&a[bt * n * n..], &x[bt * n * k..], &b[bt * n * k..]);
        let amax = a[..n * n].iter().fold(0.0f64, |m, z| m.max(z.norm()));
        let xmax = x[..n * k].iter().fold(0.0f64, |m, z| m.max(z.norm()));
        for i in 0..n {
            for j in 0..k {
                let ax: C64 = (0..n).map(|q| a[i * n + q] * x[q * k + j]).sum();
                worst = worst.max((ax - b[i * k + j]).norm() / (amax * xmax));
            }
        }
    }
    worst
}

fn solve_graph(shape_a: &[usize], shape_b: &[usize], dtype: DType) -> Graph {
    let mut g = Graph::new();
    let a = g.input("a", shape_a.to_vec(), dtype);
    let b = g.input("b", shape_b.to_vec(), dtype);
    let x = g.solve(a, b).unwrap();
    g.set_outputs(vec![x]);
    g
}

#[test]
fn complex_solutions_multiply_back_eager_and_compiled() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (batches, n, k) = (3, 5, 2);
    let mut a = rng.complex(batches * n * n);
    a[0] = Complex::new(0.0, 0.0); // column 0 of batch 0 must pivot
    let b = rng.complex(batches * n * k);
    let (ta, tb) = (
        Tensor::from_slice(&a, [batches, n, n]),
        Tensor::from_slice(&b, [batches, n, k]),
    );
    let eager = ta.try_solve(&tb).unwrap();
    assert_eq!(eager.dtype(), DType::C64);
    let x = eager.to_complex_vec().unwrap();
    let r = residual(&a, &x, &b, n, k);
    assert!(r < 1e-14, "c64 eager residual {r}");

    let g = solve_graph(&[batches, n, n], &[batches, n, k], DType::C64);
    let plan = compile(&g).unwrap();
    let compiled = plan.run(&[&ta, &tb]).unwrap().remove(0);
    let xc = compiled.to_complex_vec().unwrap();
    assert_eq!(xc, x, "compiled and eager run the same elimination");
    // A second run reuses the plan's scratch and gives the same bits.
    let again = plan.run(&[&ta, &tb]).unwrap().remove(0);
    assert_eq!(again.to_complex_vec().unwrap(), x);

    // c32: factored in Complex<f64>, rounded once on the way out.
    let a32: Vec<Complex<f32>> = a
        .iter()
        .map(|z| Complex::new(z.re as f32, z.im as f32))
        .collect();
    let b32: Vec<Complex<f32>> = b
        .iter()
        .map(|z| Complex::new(z.re as f32, z.im as f32))
        .collect();
    let x32 = Tensor::from_slice(&a32, [batches, n, n])
        .try_solve(&Tensor::from_slice(&b32, [batches, n, k]))
        .unwrap();
    assert_eq!(x32.dtype(), DType::C32);
    let back = |v: &[Complex<f32>]| -> Vec<C64> {
        v.iter()
            .map(|z| Complex::new(z.re as f64, z.im as f64))
            .collect()
    };
    let x32 = x32.to_vec::<Complex<f32>>().unwrap();
    let r = residual(&back(&a32), &back(&x32), &back(&b32), n, k);
    assert!(r < 1e-5, "c32 residual {r}");
}

#[test]
fn every_entry_in_both_real_directions_fd_jvp_and_vjp_agree() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (n, k) = (3, 2);
    let mut a = rng.complex(n * n);
    for i in 0..n {
        a[i * n + i] += Complex::new(3.0, 0.5);
    }
    let b = rng.complex(n * k);
    let g = solve_graph(&[n, n], &[n, k], DType::C64);
    let plan = compile(&g).unwrap();
    let value = |a: &[C64], b: &[C64]| -> Vec<C64> {
        let (ta, tb) = (Tensor::from_slice(a, [n, n]), Tensor::from_slice(b, [n, k]));
        plan.run(&[&ta, &tb]).unwrap()[0].to_complex_vec().unwrap()
    };
    let jg = compile(&jvp(&g, &[0, 1]).unwrap()).unwrap();
    let vg = compile(&vjp(&g, &[0, 1]).unwrap()).unwrap();
    let u = rng.complex(n * k);
    let vjps = {
        let (ta, tb) = (
            Tensor::from_slice(&a, [n, n]),
            Tensor::from_slice(&b, [n, k]),
        );
        let tu = Tensor::from_slice(&u, [n, k]);
        let outs = vg.run(&[&ta, &tb, &tu]).unwrap();
        [
            outs[1].to_complex_vec().unwrap(),
            outs[2].to_complex_vec().unwrap(),
        ]
    };
    let zero = Complex::new(0.0, 0.0);
    for (input, len) in [(0usize, n * n), (1, n * k)] {
        for entry in 0..len {
            for dir in [Complex::new(1.0, 0.0), Complex::new(0.0, 1.0)] {
                let mut ta = vec![zero; n * n];
                let mut tb = vec![zero; n * k];
                match input {
                    0 => ta[entry] = dir,
                    _ => tb[entry] = dir,
                }
                let outs = jg
                    .run(&[
                        &Tensor::from_slice(&a, [n, n]),
                        &Tensor::from_slice(&b, [n, k]),
                        &Tensor::from_slice(&ta, [n, n]),
                        &Tensor::from_slice(&tb, [n, k]),
                    ])
                    .unwrap();
                let jv = outs[1].to_complex_vec().unwrap();
                let shifted = |s: f64| {
                    let pa: Vec<C64> = a.iter().zip(&ta).map(|(x, d)| x + d * s).collect();
                    let pb: Vec<C64> = b.iter().zip(&tb).map(|(x, d)| x + d * s).collect();
                    value(&pa, &pb)
                };
                let (plus, minus) = (shifted(H), shifted(-H));
                let what = format!("input {input} entry {entry} direction {dir}");
                for (m, (p, q)) in plus.iter().zip(&minus).enumerate() {
                    let fd = (p - q) / (2.0 * H);
                    assert!(
                        (jv[m] - fd).norm() <= 1e-7 * (1.0 + fd.norm()),
                        "{what}: output {m}: jvp {} vs fd {fd}",
                        jv[m]
                    );
                }
                let lhs: f64 = u.iter().zip(&jv).map(|(u, j)| (u * j).re).sum();
                let rhs = (vjps[input][entry] * dir).re;
                assert!(
                    (lhs - rhs).abs() <= 1e-12 * (1.0 + lhs.abs()),
                    "{what}: Re<u, J e> = {lhs} vs Re<J^T u, e> = {rhs}"
                );
            }
        }
    }
}

#[test]
fn a_singular_complex_matrix_is_an_error_naming_solve_and_the_shape() {
    // Row 1 is (0.5 + 0.5i) times row 0.
    let (r0, r1) = (Complex::new(1.0, 2.0), Complex::new(3.0, -1.0));
    let s = Complex::new(0.5, 0.5);
    let a = Tensor::from_slice(&[r0, r1, s * r0, s * r1], [2, 2]);
    let b = Tensor::from_slice(&[Complex::new(1.0, 0.0), Complex::new(0.0, 1.0)], [2, 1]);
    let e = a.try_solve(&b).unwrap_err();
    assert!(
        matches!(
            e,
            Error::SingularMatrix {
                op: "solve",
                column: 1,
                ..
            }
        ),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(m.contains("solve") && m.contains("[2, 2]"), "{m}");

    let g = solve_graph(&[2, 2], &[2, 1], DType::C64);
    let m = compile(&g).unwrap().run(&[&a, &b]).unwrap_err().to_string();
    assert!(
        m.contains("solve") && m.contains("[2, 2]") && m.contains("singular"),
        "{m}"
    );
}

#[test]
fn mixed_real_and_complex_operands_are_an_error_naming_solve() {
    let a = Tensor::from_slice(&[2.0f64, 0.0, 0.0, 4.0], [2, 2]);
    let b = Tensor::from_slice(&[Complex::new(1.0, 1.0), Complex::new(0.0, 2.0)], [2, 1]);
    let m = a.try_solve(&b).unwrap_err().to_string();
    assert!(
        m.contains("solve") && m.contains("f64") && m.contains("c64"),
        "{m}"
    );
}
