//! Eager ops on small tensors (issue #15, item 3): the fast paths for
//! reshape, float unary and binary ops and small `f64` solves give the
//! general kernel's bits (`kernels::eval_into` on the same operands, with
//! the type `infer` gives), the general path's errors for what they
//! decline, and allocate only their result.

mod counting;

use counting::allocations;
use half::{bf16, f16};
use proptest::prelude::*;
use rlx_core::{infer, BinaryOp, DType, Op, Shape, TensorType, UnaryOp};
use rlx_runtime::kernels::{eval_into, Operand};
use rlx_runtime::{Storage, Tensor};

/// `op` on `inputs` by the general kernel: the type from `infer`, a zeroed
/// result, `eval_into`.
fn general(op: &Op, inputs: &[&Tensor]) -> rlx_core::Result<Tensor> {
    let tys: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = infer(op, &tys.iter().collect::<Vec<_>>())?;
    let operands: Vec<Operand<'_>> = inputs
        .iter()
        .map(|t| Operand::new(t.storage().unwrap(), t.shape()))
        .collect();
    let mut storage = Storage::zeros(out.dtype, out.shape.numel());
    eval_into(op, &operands, &out.shape, &mut storage)?;
    Tensor::from_storage(storage, out.shape)
}

/// The eager result equals the general kernel's: the same shape, dtype
/// and bits, or the same error.
fn same_as_general(op: &Op, inputs: &[&Tensor]) -> Result<(), TestCaseError> {
    let eager = Tensor::apply(op.clone(), inputs);
    match (eager, general(op, inputs)) {
        (Ok(e), Ok(g)) => {
            prop_assert_eq!(e.shape(), g.shape(), "{:?}", op);
            prop_assert_eq!(e.dtype(), g.dtype(), "{:?}", op);
            let bits = |t: &Tensor| -> Vec<u64> {
                t.to_f64_vec()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            prop_assert_eq!(bits(&e), bits(&g), "{:?} on {:?}", op, inputs[0].ty());
        }
        (Err(e), Err(g)) => prop_assert_eq!(e, g, "{:?}", op),
        (e, g) => prop_assert!(false, "{op:?}: eager {:?}, general {:?}", e.err(), g.err()),
    }
    Ok(())
}

/// Values that reach every branch of the scalar functions: ordinary
/// numbers, signed zeros, infinities, NaN, subnormals, huge and tiny
/// magnitudes, halves (for `round`).
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -3.0f64..3.0,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(2.5),
        1 => Just(-0.5),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(f64::NAN),
        1 => Just(5e-324),
        1 => Just(1e300),
        1 => Just(-1e-30),
    ]
}

/// A tensor of `dtype` holding `values` (converted) in `shape`.
fn tensor(values: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    Tensor::from_storage(Storage::from_f64(dtype, values.iter().copied()), shape).unwrap()
}

/// A shape of at most 18 elements (past the fast paths' limit of 16) and
/// rank at most 3.
fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        Just(vec![]),
        (0usize..=17).prop_map(|n| vec![n]),
        (1usize..=4, 1usize..=4).prop_map(|(a, b)| vec![a, b]),
        (1usize..=2, 1usize..=3, 1usize..=3).prop_map(|(a, b, c)| vec![a, b, c]),
    ]
}

const FLOATS: [DType; 4] = [DType::F64, DType::F32, DType::F16, DType::BF16];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Every unary op on every dtype and small shape: the bits of the
    /// general kernel, or its error (`Not` on floats, float ops on
    /// integers and `bool`s).
    #[test]
    fn unary_ops_equal_the_general_kernel(
        shape in shape(),
        values in prop::collection::vec(value(), 18),
    ) {
        let n: usize = shape.iter().product();
        for dtype in FLOATS.into_iter().chain([DType::I64, DType::Bool]) {
            let x = tensor(&values[..n], &shape, dtype);
            for op in UnaryOp::ALL.into_iter().chain([UnaryOp::Powi(-3), UnaryOp::Powi(0)]) {
                same_as_general(&Op::Unary(op), &[&x])?;
            }
        }
    }

    /// Every binary op on every float dtype, with equal shapes, a 0-d
    /// operand on either side, and shapes that only broadcast or do not
    /// match (which the general path computes or refuses).
    #[test]
    fn binary_ops_equal_the_general_kernel(
        shape in shape(),
        other in shape(),
        values in prop::collection::vec(value(), 18),
        more in prop::collection::vec(value(), 18),
    ) {
        let (n, m) = (shape.iter().product::<usize>(), other.iter().product::<usize>());
        for dtype in FLOATS {
            let x = tensor(&values[..n], &shape, dtype);
            let pairs = [
                (x.clone(), tensor(&more[..n], &shape, dtype)),
                (x.clone(), tensor(&more[..1], &[], dtype)),
                (tensor(&more[..1], &[], dtype), x.clone()),
                (x.clone(), tensor(&more[..m], &other, dtype)),
            ];
            for op in BinaryOp::ALL {
                for (a, b) in &pairs {
                    same_as_general(&Op::Binary(op), &[a, b])?;
                }
            }
        }
    }

    /// Small `f64` systems `[n, n] x = [n, k]`: the general kernel's bits,
    /// or its singular-matrix error naming the same column.
    #[test]
    fn small_solves_equal_the_general_kernel(
        n in 1usize..=4,
        k in 1usize..=4,
        a in prop::collection::vec(prop_oneof![4 => -3.0f64..3.0, 1 => Just(0.0), 1 => Just(1.0)], 16),
        b in prop::collection::vec(value(), 16),
        singular_row in any::<bool>(),
    ) {
        let mut a = a[..n * n].to_vec();
        if singular_row && n > 1 {
            // Row n-1 a multiple of row 0: singular at some column.
            for j in 0..n {
                a[(n - 1) * n + j] = 2.0 * a[j];
            }
        }
        let (am, bm) = (tensor(&a, &[n, n], DType::F64), tensor(&b[..n * k], &[n, k], DType::F64));
        same_as_general(&Op::Solve, &[&am, &bm])?;
    }

    /// A reshape keeps the values and takes the new shape; one to another
    /// element count is the general path's error.
    #[test]
    fn reshapes_equal_the_general_path(
        shape in shape(),
        to in shape(),
        values in prop::collection::vec(value(), 18),
    ) {
        let n: usize = shape.iter().product();
        let x = tensor(&values[..n], &shape, DType::F64);
        same_as_general(&Op::Reshape { shape: Shape::new(to) }, &[&x])?;
    }
}

#[test]
fn solves_the_fast_path_declines_still_give_the_general_errors() {
    let v = |d: &[f64], s: &[usize]| tensor(d, s, DType::F64);
    let a = v(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let cases = [
        // A right-hand side of rank 1, of the wrong height, non-square.
        (a.clone(), v(&[1.0, 2.0], &[2])),
        (a.clone(), v(&[1.0, 2.0, 3.0], &[3, 1])),
        (v(&[1.0; 6], &[2, 3]), v(&[1.0, 2.0], &[2, 1])),
        // Mixed dtypes; integers.
        (a.clone(), tensor(&[1.0, 2.0], &[2, 1], DType::F32)),
        (
            tensor(&[1.0, 0.0, 0.0, 1.0], &[2, 2], DType::I64),
            tensor(&[1.0, 2.0], &[2, 1], DType::I64),
        ),
        // Singular at column 0 and at column 1.
        (v(&[0.0, 1.0, 0.0, 1.0], &[2, 2]), v(&[1.0, 2.0], &[2, 1])),
        (v(&[1.0, 2.0, 2.0, 4.0], &[2, 2]), v(&[1.0, 2.0], &[2, 1])),
    ];
    for (a, b) in cases {
        let eager = a.try_solve(&b).unwrap_err();
        assert_eq!(Some(&eager), general(&Op::Solve, &[&a, &b]).err().as_ref());
        let message = eager.to_string();
        assert!(message.contains("solve"), "{message}");
    }
}

#[test]
fn fast_paths_allocate_only_their_result() {
    let v = Tensor::from_slice(&[0.5, -0.5], [2]);
    let f = Tensor::from_slice(&[0.5f32, 2.0, 3.0], [3]);
    let h = Tensor::from_slice(&[f16::from_f64(0.5), f16::ONE], [2]);
    let b = Tensor::from_slice(&[bf16::from_f64(0.5), bf16::ONE], [2]);
    let a = Tensor::from_slice(&[4.0, 1.0, 2.0, 3.0], [2, 2]);
    let rhs = Tensor::from_slice(&[1.0, 2.0], [2, 1]);
    let two = Tensor::scalar(2.0);
    let ops: [(&str, &dyn Fn() -> Tensor); 10] = [
        ("f64 -", &|| &v - &v),
        ("f64 * 0-d", &|| &v * &two),
        ("f64 exp", &|| v.exp()),
        ("f64 powi", &|| v.powi(3)),
        ("f32 sqrt", &|| f.sqrt()),
        ("f32 /", &|| &f / &f),
        ("f16 tanh", &|| h.tanh()),
        ("bf16 +", &|| &b + &b),
        ("reshape", &|| rhs.reshape([2])),
        ("solve 2×2", &|| a.try_solve(&rhs).unwrap()),
    ];
    for (what, op) in ops {
        drop(op());
        let n = allocations(|| drop(op()));
        assert_eq!(n, 1, "{what} allocated {n} times");
    }
}
