//! Running plans: buffer reuse, outputs that are inputs or repeated, input
//! errors, shared outputs, concurrency.

use super::*;

#[test]
fn buffers_are_reused_by_liveness() {
    // A chain of 10 matmuls with a sum between each: 20 materialised values,
    // but only a couple are alive at any time.
    let mut g = Graph::new();
    let w = g.input("w", [8, 8], DType::F64);
    let mut v = g.input("x", [8, 8], DType::F64);
    for _ in 0..10 {
        let m = g.matmul(v, w).unwrap();
        let s = g.sum(m, &[0]).unwrap();
        let r = g.reshape(s, [1, 8]).unwrap();
        v = g.add(m, r).unwrap();
    }
    g.set_outputs(vec![v]);
    let wv = tensor(&values(64, 61, -0.3, 0.3), &[8, 8], DType::F64);
    let xv = tensor(&values(64, 62, -1.0, 1.0), &[8, 8], DType::F64);
    let exe = check(&g, &[&wv, &xv], 1e-10, "reuse");
    assert!(exe.stats().buffers <= 3, "{:?}", exe.stats());
}

#[test]
fn outputs_that_are_inputs_constants_or_repeated() {
    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F32);
    let c = g.full([2], 2.5, DType::F32);
    let y = g.exp(x).unwrap();
    let r = g.reshape(y, [3, 1]).unwrap();
    g.set_outputs(vec![x, c, y, y, r]);
    let xv = tensor(&[0.0, 1.0, -1.0], &[3], DType::F32);
    check(&g, &[&xv], 0.0, "outputs");
}

fn small_graph() -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let y = g.input("y", (), DType::F32);
    let e = g.exp(x).unwrap();
    let z = g.sin(y).unwrap();
    g.set_outputs(vec![e, z]);
    g
}

#[test]
fn input_errors_name_the_input() {
    let exe = compile(&small_graph()).unwrap();
    let x = Tensor::zeros([2, 3], DType::F64);
    let y = Tensor::zeros((), DType::F32);
    match run_err(&exe, &[&x]) {
        Error::CountMismatch {
            expected: 2,
            got: 1,
            what,
        } => assert_eq!(what, "inputs"),
        e => panic!("{e}"),
    }
    let bad_shape = Tensor::zeros([3, 2], DType::F64);
    let e = run_err(&exe, &[&bad_shape, &y]);
    assert!(
        matches!(&e, Error::InputMismatch { name, .. } if name == "x"),
        "{e}"
    );
    assert!(e.to_string().contains("[3, 2]"), "{e}");
    let bad_dtype = Tensor::zeros((), DType::F64);
    let e = run_err(&exe, &[&x, &bad_dtype]);
    assert!(
        matches!(&e, Error::InputMismatch { name, expected_dtype: DType::F32, got_dtype: DType::F64, .. } if name == "y"),
        "{e}"
    );
    // run_into checks the outputs too.
    let mut outs = vec![Tensor::zeros([2, 3], DType::F64)];
    let e = exe.run_into(&[&x, &y], &mut outs).unwrap_err();
    assert!(
        matches!(&e, Error::CountMismatch { what, .. } if what == "outputs"),
        "{e}"
    );
    let mut outs = vec![
        Tensor::zeros([2, 3], DType::F64),
        Tensor::zeros((), DType::F64),
    ];
    let e = exe.run_into(&[&x, &y], &mut outs).unwrap_err();
    assert!(e.to_string().contains("output #1"), "{e}");
    // Good inputs into good outputs work.
    let mut outs = vec![
        Tensor::zeros([2, 3], DType::F64),
        Tensor::zeros((), DType::F32),
    ];
    exe.run_into(&[&x, &y], &mut outs).unwrap();
    assert_eq!(outs[0].to_vec::<f64>().unwrap(), vec![1.0; 6]);
}

#[test]
fn run_into_does_not_disturb_shared_outputs() {
    let exe = compile(&small_graph()).unwrap();
    let x = Tensor::zeros([2, 3], DType::F64);
    let y = Tensor::zeros((), DType::F32);
    let mut outs = vec![
        Tensor::full([2, 3], 7.0, DType::F64),
        Tensor::zeros((), DType::F32),
    ];
    let keep = outs[0].clone();
    exe.run_into(&[&x, &y], &mut outs).unwrap();
    assert_eq!(outs[0].to_vec::<f64>().unwrap(), vec![1.0; 6]);
    assert_eq!(keep.to_vec::<f64>().unwrap(), vec![7.0; 6]);
}

#[test]
fn executable_is_send_sync_and_runs_concurrently() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Executable>();
    let mut g = Graph::new();
    let x = g.input("x", [64], DType::F64);
    let w = g.input("w", [64, 64], DType::F64);
    let xr = g.reshape(x, [1, 64]).unwrap();
    let p = g.matmul(xr, w).unwrap();
    let t = g.tanh(p).unwrap();
    let s = g.sum_all(t).unwrap();
    g.set_outputs(vec![s]);
    let exe = compile(&g).unwrap();
    let wv = tensor(&values(64 * 64, 71, -0.2, 0.2), &[64, 64], DType::F64);
    let inputs: Vec<Tensor> = (0..8)
        .map(|i| tensor(&values(64, 100 + i, -1.0, 1.0), &[64], DType::F64))
        .collect();
    let serial: Vec<f64> = inputs
        .iter()
        .map(|x| exe.run(&[x, &wv]).unwrap()[0].item::<f64>().unwrap())
        .collect();
    let parallel: Vec<f64> = std::thread::scope(|s| {
        let hs: Vec<_> = inputs
            .iter()
            .map(|x| {
                let (exe, wv) = (&exe, &wv);
                s.spawn(move || {
                    (0..20)
                        .map(|_| exe.run(&[x, wv]).unwrap()[0].item::<f64>().unwrap())
                        .last()
                        .unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(serial, parallel);
}
