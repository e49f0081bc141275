//! The reference kernels do not allocate: every op except `Solve` (given a
//! warm scratch through `solve_into` it does not either) and `Custom` runs
//! `eval_into` with zero heap allocations, counted by a global allocator.

use rlx_core::{infer, Literal, TensorType};
use rlx_runtime::kernels::{eval_into, solve_into, solve_scratch_len, Operand};
use rlx_runtime::{BinaryOp, CmpOp, DType, Op, ReduceOp, Shape, Storage, UnaryOp};

mod counting;
use counting::allocations;

fn val(shape: &[usize], dtype: DType) -> (Storage, Shape) {
    let n: usize = shape.iter().product();
    let s = Storage::from_f64(dtype, (0..n).map(|i| (i % 3) as f64 + 1.0));
    (s, Shape::from(shape))
}

#[test]
fn kernels_run_without_allocating() {
    // The counter sees allocations at all.
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 8]))), 1);
    let f = DType::F64;
    let h = DType::F16;
    let idx = (Storage::I64(vec![2, 0, 1]), Shape::from([3]));
    let mask = (Storage::Bool(vec![true, false, true]), Shape::from([3]));
    // Rank 5 with broadcasting exercises the strided walk.
    let cases: Vec<(Op, Vec<(Storage, Shape)>)> = vec![
        (Op::Constant(Literal::Splat(2.0)), vec![]),
        (Op::Unary(UnaryOp::Gelu), vec![val(&[4, 3], f)]),
        (Op::Unary(UnaryOp::Exp), vec![val(&[4, 3], h)]),
        (
            Op::Binary(BinaryOp::Add),
            vec![val(&[2, 1, 3, 1, 2], f), val(&[3, 4, 1], f)],
        ),
        (
            Op::Binary(BinaryOp::Mul),
            vec![val(&[4, 3], h), val(&[3], h)],
        ),
        (Op::Compare(CmpOp::Lt), vec![val(&[4, 3], f), val(&[3], f)]),
        (Op::Select, vec![mask.clone(), val(&[2, 3], f), val(&[], f)]),
        (Op::Cast(DType::BF16), vec![val(&[4, 3], f)]),
        (
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![0, 2],
            },
            vec![val(&[2, 3, 4], f)],
        ),
        (
            Op::Reduce {
                op: ReduceOp::Max,
                axes: vec![1],
            },
            vec![val(&[2, 3, 4], h)],
        ),
        (Op::MatMul, vec![val(&[2, 1, 3, 4], f), val(&[3, 4, 2], f)]),
        (
            Op::Transpose {
                perm: vec![2, 0, 1],
            },
            vec![val(&[2, 3, 4], f)],
        ),
        (
            Op::Reshape {
                shape: Shape::from([6, 4]),
            },
            vec![val(&[2, 3, 4], f)],
        ),
        (
            Op::Broadcast {
                shape: Shape::from([5, 2, 3]),
            },
            vec![val(&[2, 1], f)],
        ),
        (
            Op::Concat { axis: 1 },
            vec![val(&[2, 3], f), val(&[2, 1], f), val(&[2, 0], f)],
        ),
        (
            Op::Slice {
                axis: 1,
                start: 1,
                len: 2,
            },
            vec![val(&[2, 4, 3], f)],
        ),
        (
            Op::Gather { axis: 1 },
            vec![val(&[2, 3, 2], f), idx.clone()],
        ),
        (
            Op::ScatterAdd { axis: 0 },
            vec![val(&[3, 2], f), idx.clone(), val(&[3, 2], f)],
        ),
        (Op::Softmax { axis: 1 }, vec![val(&[2, 3, 4], f)]),
        (Op::LogSoftmax { axis: 0 }, vec![val(&[2, 3], h)]),
        (Op::StopGradient, vec![val(&[3], f)]),
    ];
    for (op, ins) in &cases {
        let out_ty = match op {
            Op::Constant(_) => TensorType::new([2, 2], f),
            _ => {
                let tys: Vec<TensorType> = ins
                    .iter()
                    .map(|(s, sh)| TensorType::new(sh.clone(), s.dtype()))
                    .collect();
                let refs: Vec<&TensorType> = tys.iter().collect();
                infer(op, &refs).unwrap()
            }
        };
        let operands: Vec<Operand<'_>> = ins.iter().map(|(s, sh)| Operand::new(s, sh)).collect();
        let mut out = Storage::zeros(out_ty.dtype, out_ty.shape.numel());
        let n = allocations(|| eval_into(op, &operands, &out_ty.shape, &mut out).unwrap());
        assert_eq!(n, 0, "`{op}` allocated {n} times");
    }

    // Solve: the first call sizes the scratch, later calls reuse it.
    let a = Storage::F64(vec![4.0, 1.0, 0.0, 1.0, 5.0, 2.0, 0.0, 2.0, 6.0]);
    let b = Storage::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let (sa, sb) = (Shape::from([3, 3]), Shape::from([3, 2]));
    let mut out = Storage::zeros(f, 6);
    let mut scratch = Vec::with_capacity(solve_scratch_len(3, 2));
    let n = allocations(|| {
        for _ in 0..3 {
            solve_into(
                Operand::new(&a, &sa),
                Operand::new(&b, &sb),
                &mut out,
                &mut scratch,
            )
            .unwrap();
        }
    });
    assert_eq!(n, 0, "warm solve allocated {n} times");
}
