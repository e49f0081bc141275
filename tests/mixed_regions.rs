use rlx::prelude::*;
use rlx::runtime::compile::{compile_with, Options};

const K_OVER_Q: f64 = 8.617_333_262e-5;
const TNOM: f64 = 300.15;

fn diode_body(p: &Tensor, v: &Tensor, i_meas: &Tensor) -> Tensor {
    let is0 = p.slice(0, 0, 1);
    let n = p.slice(0, 1, 1);
    let temp = p.slice(0, 2, 1);
    let eg = p.slice(0, 3, 1);
    let gain = p.slice(0, 4, 1);
    let vt = &temp * K_OVER_Q;
    let ratio = &temp * (1.0 / TNOM);
    let is = is0 * ratio.powi(3) * ((ratio - 1.0) * eg / &vt).exp();
    let nvt = n * vt;
    let i = is * ((v / nvt).exp() - 1.0) * gain;
    (i - i_meas).square().sum_all()
}

#[test]
fn explore() {
    let t = rlx::trace::Trace::enter();
    let p = t.input("p", [5], DType::F64);
    let v = t.input("v", [10000], DType::F64);
    let im = t.input("i_meas", [10000], DType::F64);
    let y = diode_body(&p, &v, &im);
    let g = t.finish(&[&y]).unwrap();
    let vg = rlx::core::autodiff::value_and_grad(&g, &[0]).unwrap();
    for (name, graph) in [("forward", &g), ("value_and_grad", &vg)] {
        let mixed = rlx::compile(graph).unwrap();
        let general = compile_with(
            graph,
            &Options {
                scalarize: false,
                ..Options::default()
            },
        )
        .unwrap();
        println!(
            "{name}\n mixed   {:?}\n general {:?}",
            mixed.stats(),
            general.stats()
        );
    }
}

#[test]
fn explore_time() {
    let t = rlx::trace::Trace::enter();
    let p = t.input("p", [5], DType::F64);
    let v = t.input("v", [10000], DType::F64);
    let im = t.input("i_meas", [10000], DType::F64);
    let y = diode_body(&p, &v, &im);
    let g = t.finish(&[&y]).unwrap();
    let vg = rlx::core::autodiff::value_and_grad(&g, &[0]).unwrap();
    let pt = Tensor::from_slice(&[1e-14, 1.5, 310.0, 1.1, 2.0], [5]);
    let vv: Vec<f64> = (0..10000)
        .map(|i| 0.3 + 0.4 * (i as f64) / 10000.0)
        .collect();
    let vt = Tensor::from_slice(&vv, [10000]);
    let imt = Tensor::from_slice(&vv, [10000]);
    for graph in [&g, &vg] {
        let mixed = rlx::compile(graph).unwrap();
        let general = compile_with(
            graph,
            &Options {
                scalarize: false,
                ..Options::default()
            },
        )
        .unwrap();
        let a = mixed.run(&[&pt, &vt, &imt]).unwrap();
        let b = general.run(&[&pt, &vt, &imt]).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
        }
        let mut outs = a;
        for (name, exe) in [
            ("mixed", &mixed),
            ("general", &general),
            ("mixed", &mixed),
            ("general", &general),
        ] {
            let t0 = std::time::Instant::now();
            for _ in 0..2000 {
                exe.run_into(&[&pt, &vt, &imt], &mut outs).unwrap();
            }
            println!("{name}: {:?}", t0.elapsed() / 2000);
        }
    }
}
