use rlx::prelude::*;

#[differentiable]
fn spring_loop(q0: &Tensor, k: f64, steps: usize) -> f64 {
    let (q, p) = rlx::iterate((q0.clone(), q0 * 0.0), steps, |(q, p)| {
        let p2 = &p - (&q * &k) * 0.1;
        let q2 = &q + &p2 * 0.1;
        (q2, p2)
    });
    q.sin().sum_all() + p.square().sum_all()
}

#[differentiable]
fn spring_unrolled(q0: &Tensor, k: f64, steps: usize) -> f64 {
    let mut q = q0.clone();
    let mut p = q0 * 0.0;
    for _ in 0..steps {
        let p2 = &p - (&q * &k) * 0.1;
        let q2 = &q + &p2 * 0.1;
        q = q2;
        p = p2;
    }
    q.sin().sum_all() + p.square().sum_all()
}

#[test]
fn smoke() {
    let q0 = Tensor::from_slice(&[0.3, -0.2, 1.0], [3]);
    let a = spring_loop(&q0, 2.0, 7);
    let b = spring_unrolled(&q0, 2.0, 7);
    println!("{a} {b}");
    let (ga, ka) = grad_spring_loop(&q0, 2.0, 7).unwrap();
    let (gb, kb) = grad_spring_unrolled(&q0, 2.0, 7).unwrap();
    println!(
        "{:?} {ka}\n{:?} {kb}",
        ga.to_vec::<f64>(),
        gb.to_vec::<f64>()
    );
    let ha = hessian_spring_loop(&q0, 2.0, 7).unwrap();
    let hb = hessian_spring_unrolled(&q0, 2.0, 7).unwrap();
    println!(
        "{:?}\n{:?}",
        ha.0 .0.to_vec::<f64>(),
        hb.0 .0.to_vec::<f64>()
    );
}
