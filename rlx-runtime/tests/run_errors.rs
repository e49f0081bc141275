//! Errors met while a compiled graph runs (a singular matrix, an index out
//! of range) name the node of the caller's graph, as its `Display` prints it,
//! even though compilation inlines, optimises and renumbers the graph; their
//! [`Error::root`] is the kernel's error. Eager tensor ops have no graph and
//! keep the kernel's error as it is.

use std::error::Error as _;

use rlx_core::autodiff::custom_op;
use rlx_runtime::{compile, Arg, DType, Error, Graph, NodeId, Shape, Tensor};

/// The line of `g`'s IR dump that defines `node`.
fn ir_line(g: &Graph, node: NodeId) -> String {
    let prefix = format!("{node} = ");
    g.to_string()
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {node} in\n{g}"))
        .to_string()
}

/// `[[1, 0, 0], [0, 1, 0], [0, 0, 0]]`: elimination finds no pivot in column 2.
fn singular3() -> Tensor {
    Tensor::from_slice(&[1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], [3, 3])
}

/// `a x = b` behind nodes that compilation removes or merges (a constant
/// declared before the inputs, dead code, `stop_gradient`, `* 1`), so that
/// the solve's id in the compiled graph (`%2`) is not its id here (`%7`).
fn solve_graph() -> (Graph, NodeId) {
    let mut g = Graph::new();
    let two = g.scalar(2.0, DType::F64);
    let a = g.input("a", [3, 3], DType::F64);
    let b = g.input("b", [3, 1], DType::F64);
    let _dead = g.exp(a).unwrap();
    let s = g.stop_gradient(a).unwrap();
    let one = g.scalar(1.0, DType::F64);
    let a1 = g.mul(s, one).unwrap();
    let x = g.solve(a1, b).unwrap();
    let y = g.mul(x, two).unwrap();
    g.set_outputs(vec![y]);
    assert_eq!(x, NodeId(7), "{g}");
    (g, x)
}

#[test]
fn singular_solve_names_the_node_of_the_callers_graph() {
    let (g, x) = solve_graph();
    assert!(ir_line(&g, x).starts_with("%7 = solve(%6, %2)"), "{g}");
    let exe = compile(&g).unwrap();
    let b = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3, 1]);
    let err = exe.run(&[&singular3(), &b]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`solve`: matrix of shape [3, 3] is singular (zero pivot in column 2)\n  \
         = note: while running node %7 (`solve`)"
    );
    match &err {
        Error::AtNode { node, op, .. } => assert_eq!((*node, *op), (7, "solve")),
        e => panic!("expected AtNode, got {e:?}"),
    }
    match err.root() {
        Error::SingularMatrix { op, shape, column } => {
            assert_eq!((*op, *column), ("solve", 2));
            assert_eq!(shape, &Shape::from([3, 3]));
        }
        e => panic!("expected SingularMatrix, got {e:?}"),
    }
    // The cause is also the `std::error::Error` source.
    let source = err.source().expect("a source");
    assert_eq!(source.to_string(), err.root().to_string());

    // Every way of running wraps the same way.
    let mut outs = vec![Tensor::zeros([3, 1], DType::F64)];
    let e = exe.run_into(&[&singular3(), &b], &mut outs).unwrap_err();
    assert_eq!(e, err);
    let e = exe
        .run_args(&[Arg::Tensor(&singular3()), Arg::Tensor(&b)])
        .unwrap_err();
    assert_eq!(e, err);

    // The executable still works afterwards.
    let eye = Tensor::from_slice(&[1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], [3, 3]);
    let out = exe.run(&[&eye, &b]).unwrap();
    assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![2.0, 4.0, 6.0]);
}

#[test]
fn merged_nodes_are_named_by_the_first_of_them() {
    // CSE merges the two solves into one step: its error names the first.
    let mut g = Graph::new();
    let a = g.input("a", [2, 3, 3], DType::F32);
    let b = g.input("b", [2, 3, 2], DType::F32);
    let x1 = g.solve(a, b).unwrap();
    let x2 = g.solve(a, b).unwrap();
    let y = g.add(x1, x2).unwrap();
    g.set_outputs(vec![y]);
    let mut av = vec![0.0f32; 18];
    for i in 0..3 {
        av[i * 4] = 1.0; // batch 0: the identity
    }
    av[9] = 1.0; // batch 1: only one non-zero entry
    let at = Tensor::from_slice(&av, [2, 3, 3]);
    let bt = Tensor::from_slice(&[1.0f32; 12], [2, 3, 2]);
    let err = compile(&g).unwrap().run(&[&at, &bt]).unwrap_err();
    assert!(
        matches!(err, Error::AtNode { node, op: "solve", .. } if node == x1.0),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with(&format!("while running node {x1} (`solve`)")),
        "{err}"
    );
    assert!(
        matches!(err.root(), Error::SingularMatrix { shape, column: 1, .. } if shape.dims() == [2, 3, 3]),
        "{err}"
    );
}

#[test]
fn gather_out_of_range_names_the_node_of_the_callers_graph() {
    let mut g = Graph::new();
    let x = g.input("x", [3, 2], DType::F64);
    let _dead = g.sin(x).unwrap();
    let idx = g.input("idx", [2], DType::I64);
    let ga = g.gather(x, idx, 0).unwrap();
    let y = g.exp(ga).unwrap();
    g.set_outputs(vec![y]);
    assert_eq!(ga, NodeId(3));
    assert!(ir_line(&g, ga).starts_with("%3 = gather"), "{g}");
    let exe = compile(&g).unwrap();
    let xv = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2]);
    let bad = Tensor::from_slice(&[0i64, 5], [2]);
    let err = exe.run(&[&xv, &bad]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`gather`: index 5 is out of range for axis 0 of size 3\n  \
         = note: while running node %3 (`gather`)"
    );
    assert!(
        matches!(
            err.root(),
            Error::IndexOutOfRange {
                op: "gather",
                index: 5,
                axis: 0,
                size: 3
            }
        ),
        "{err:?}"
    );
    let ok = Tensor::from_slice(&[2i64, 0], [2]);
    let out = exe.run(&[&xv, &ok]).unwrap();
    let want: Vec<f64> = [5.0f64, 6.0, 1.0, 2.0].iter().map(|v| v.exp()).collect();
    assert_eq!(out[0].to_vec::<f64>().unwrap(), want);
}

#[test]
fn scatter_add_out_of_range_names_its_node() {
    let mut g = Graph::new();
    let x = g.input("x", [4], DType::F32);
    let idx = g.input("idx", [2], DType::I64);
    let upd = g.input("upd", [2], DType::F32);
    let two = g.scalar(2.0, DType::F32);
    let x2 = g.mul(x, two).unwrap();
    let sc = g.scatter_add(x2, idx, upd, 0).unwrap();
    g.set_outputs(vec![sc]);
    let exe = compile(&g).unwrap();
    let xv = Tensor::from_slice(&[1.0f32; 4], [4]);
    let uv = Tensor::from_slice(&[1.0f32; 2], [2]);
    let bad = Tensor::from_slice(&[-1i64, 0], [2]);
    let err = exe.run(&[&xv, &bad, &uv]).unwrap_err();
    assert!(
        matches!(err, Error::AtNode { node, op: "scatter_add", .. } if node == sc.0),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&format!("while running node {sc} (`scatter_add`)")),
        "{err}"
    );
    assert!(
        matches!(
            err.root(),
            Error::IndexOutOfRange {
                op: "scatter_add",
                index: -1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn errors_inside_a_custom_op_name_the_custom_node() {
    // The forward graph of the custom op is inlined before planning; the
    // caller's graph has one `custom` node, which the error names.
    let mut f = Graph::new();
    let fx = f.input("x", [3], DType::F64);
    let fi = f.input("i", [2], DType::I64);
    let fs = f.sin(fx).unwrap();
    let fg = f.gather(fs, fi, 0).unwrap();
    f.set_outputs(vec![fg]);
    let op = custom_op("pick_sin", f, None, None).unwrap();

    let mut g = Graph::new();
    let x = g.input("x", [3], DType::F64);
    let i = g.input("i", [2], DType::I64);
    let c = g.custom(op, &[x, i]).unwrap();
    let y = g.neg(c).unwrap();
    g.set_outputs(vec![y]);
    assert_eq!(c, NodeId(2));
    let xv = Tensor::from_slice(&[0.0f64, 1.0, 2.0], [3]);
    let bad = Tensor::from_slice(&[1i64, 3], [2]);
    let err = compile(&g).unwrap().run(&[&xv, &bad]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::AtNode {
                node: 2,
                op: "gather",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        matches!(err.root(), Error::IndexOutOfRange { index: 3, .. }),
        "{err}"
    );
}

#[test]
fn eager_ops_keep_the_kernel_error() {
    let b = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3, 1]);
    let e = singular3().try_solve(&b).unwrap_err();
    assert!(
        matches!(e, Error::SingularMatrix { column: 2, .. }),
        "{e:?}"
    );
    assert!(!e.to_string().contains("while running node"), "{e}");
    let x = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let e = x
        .try_gather(&Tensor::from_slice(&[7i64], [1]), 0)
        .unwrap_err();
    assert!(
        matches!(e, Error::IndexOutOfRange { index: 7, .. }),
        "{e:?}"
    );
}
