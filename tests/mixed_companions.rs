//! A model with a few scalar parameters driving a large element-wise
//! computation (`benches/common/diode_fit.rs`) through its companions:
//! its plan runs the parameter chains as scalar regions (issue #15), and
//! the value and gradient agree with the hand-written analytic gradient
//! and with central finite differences.

#[path = "../benches/common/diode_fit.rs"]
mod diode_fit;

use diode_fit::{currents, data, diode_fit_body, START};
use rlx::prelude::*;
use rlx::runtime::compile::{compile_with, Options};

const N: usize = 2000;

fn tensors() -> (Tensor, Tensor, Tensor) {
    let (v, i) = data(N);
    (
        Tensor::from_slice(&START, [5]),
        Tensor::from_slice(&v, [N]),
        Tensor::from_slice(&i, [N]),
    )
}

fn close(got: f64, want: f64, rtol: f64, what: &str) {
    assert!(
        (got - want).abs() <= rtol * want.abs().max(1e-300),
        "{what}: {got:e} vs {want:e}"
    );
}

#[test]
fn value_and_grad_matches_the_analytic_gradient_and_differences() {
    let (p, v, m) = tensors();
    let (loss, grad) = diode_fit::value_and_grad_diode_fit(&p, &v, &m).unwrap();
    let grad = grad.to_vec::<f64>().unwrap();
    let (vv, mv) = (v.to_vec::<f64>().unwrap(), m.to_vec::<f64>().unwrap());
    let mut i = vec![0.0; N];
    let mut want = [0.0; 5];
    let want_loss = currents(&START, &vv, &mv, &mut i, &mut want);
    close(loss, want_loss, 1e-10, "loss");
    for k in 0..5 {
        close(grad[k], want[k], 1e-8, &format!("d loss / d p[{k}]"));
    }
    // Central differences in each parameter, step relative to it.
    for k in 0..5 {
        let h = 1e-5 * START[k].abs();
        let mut at = |d: f64| {
            let mut q = START;
            q[k] += d;
            let mut g = [0.0; 5];
            currents(&q, &vv, &mv, &mut i, &mut g)
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        close(grad[k], fd, 1e-5, &format!("finite difference in p[{k}]"));
    }
}

#[test]
fn the_parameter_chains_are_scalar_regions() {
    let t = rlx::trace::Trace::enter();
    let p = t.input("p", [5], DType::F64);
    let v = t.input("v", [N], DType::F64);
    let m = t.input("i_meas", [N], DType::F64);
    let loss = diode_fit_body(&p, &v, &m);
    let g = t.finish(&[&loss]).unwrap();
    let vg = rlx::core::autodiff::value_and_grad(&g, &[0]).unwrap();
    let mixed = rlx::compile(&vg).unwrap();
    let general = compile_with(&vg, &Options::general()).unwrap();
    let (a, b) = (mixed.stats(), general.stats());
    assert!(a.small_regions >= 2, "{a:?}");
    assert!(a.steps < b.steps, "{a:?} vs {b:?}");
    // The same bits as the general plan, and as the companion.
    let (pt, vt, mt) = tensors();
    let x = mixed.run(&[&pt, &vt, &mt]).unwrap();
    let y = general.run(&[&pt, &vt, &mt]).unwrap();
    for (x, y) in x.iter().zip(&y) {
        assert_eq!(x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
    }
    let (loss, grad) = diode_fit::value_and_grad_diode_fit(&pt, &vt, &mt).unwrap();
    assert_eq!(loss, x[0].to_vec::<f64>().unwrap()[0]);
    assert_eq!(grad.to_vec::<f64>().unwrap(), x[1].to_vec::<f64>().unwrap());
}
