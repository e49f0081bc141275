use rlx_runtime::{compile, DType, Graph, Tensor};

#[test]
fn smoke() {
    let mut g = Graph::new();
    let x = g.input("x", [2, 3], DType::F64);
    let b = g.input("b", [3], DType::F64);
    let y = g.mul(x, b).unwrap();
    let z = g.sin(y).unwrap();
    let s = g.sum(z, &[1]).unwrap();
    let w = g.input("w", [3, 2], DType::F64);
    let wt = g.transpose_last2(w).unwrap();
    let m = g.matmul(z, wt).unwrap_err();
    let _ = m;
    let w2 = g.input("w2", [2, 3], DType::F64);
    let w2t = g.transpose_last2(w2).unwrap();
    let mm = g.matmul(z, w2t).unwrap();
    g.set_outputs(vec![s, mm, z]);
    let exe = compile(&g).unwrap();
    let xs = Tensor::from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let bs = Tensor::from_slice(&[0.5, -1.0, 2.0], [3]);
    let ws = Tensor::from_slice(&[1.0; 6], [3, 2]);
    let w2s = Tensor::from_slice(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0], [2, 3]);
    let out = exe.run(&[&xs, &bs, &ws, &w2s]).unwrap();
    println!("{:?}", exe.stats());
    let zz = out[2].to_vec::<f64>().unwrap();
    let want: Vec<f64> = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .enumerate()
        .map(|(i, v)| (v * [0.5, -1.0, 2.0][i % 3]).sin())
        .collect();
    assert_eq!(zz, want);
    let s = out[0].to_vec::<f64>().unwrap();
    assert!((s[0] - (want[0] + want[1] + want[2])).abs() < 1e-12);
    let mm = out[1].to_vec::<f64>().unwrap();
    assert_eq!(mm, vec![want[0], want[1], want[3], want[4]]);
}
