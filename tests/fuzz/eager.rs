//! The eager API with random, often invalid, arguments: shapes with huge
//! dimensions, axes and bounds out of range, wrong dtypes, bad indices.
//!
//! Properties: a `try_` method returns `Err` and never panics; its
//! panicking form panics exactly when it errs, with the error's message at
//! the caller's line; an `Ok` result has the shape that shape inference
//! gives and the values of the naive reference.
//!
//! Huge dimensions are at least 2^58, so any tensor that has one (and no
//! zero dimension) needs more bytes than any address space holds: a
//! request is refused outright, and the fuzzer never makes the machine
//! allocate a large buffer.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rlx::{BinaryOp, CmpOp, DType, Error, Graph, Op, ReduceOp, Shape, Tensor, UnaryOp};

use crate::common;
use crate::panics::try_panic_of;

/// A size: usually small, sometimes one no allocation can have.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        12 => 0usize..5,
        1 => Just(1usize << 58),
        1 => Just(1usize << 62),
        1 => Just(usize::MAX / 2 + 1),
        1 => Just(usize::MAX),
    ]
}

fn hostile_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(size(), 0..5)
}

fn dtype() -> impl Strategy<Value = DType> {
    // The real dtypes: the reference interpreter computes in `f64`.
    let real: Vec<DType> = DType::ALL.into_iter().filter(|d| !d.is_complex()).collect();
    prop::sample::select(real)
}

/// A small tensor argument: shape, dtype and a seed for its values.
#[derive(Clone, Debug)]
pub struct Arg {
    shape: Vec<usize>,
    dtype: DType,
    seed: u64,
}

/// Small tensors, and now and then an empty one with a huge axis
/// (`[2^58, 0]`): it holds nothing, but loops over its other axes would
/// never end.
fn arg() -> impl Strategy<Value = Arg> {
    let dim = prop_oneof![12 => 0usize..4, 1 => Just(1usize << 58)];
    (prop::collection::vec(dim, 0..4), dtype(), any::<u64>()).prop_map(
        |(mut shape, dtype, seed)| {
            // One huge axis at most (so the shape is valid), and then a 0.
            let mut seen = false;
            for d in shape.iter_mut().filter(|d| **d > 4) {
                *d = if seen { 1 } else { *d };
                seen = true;
            }
            if seen && !shape.contains(&0) {
                shape.push(0);
            }
            Arg { shape, dtype, seed }
        },
    )
}

impl Arg {
    fn tensor(&self) -> Tensor {
        let n = Shape::new(self.shape.clone()).numel();
        common::tensor(
            &common::values(n, self.seed, -3.0, 3.0),
            &self.shape,
            self.dtype,
        )
    }
}

/// One call of the eager API.
#[derive(Clone, Debug)]
pub enum Call {
    /// `try_zeros`, `try_ones`, `try_full` (by `which`).
    Full(u8, Vec<usize>, DType),
    /// `try_from_vec` / `try_from_slice` of `len` values.
    FromVec(bool, usize, Vec<usize>),
    /// An op on up to three tensors.
    Op(Op, Vec<Arg>),
}

fn op() -> impl Strategy<Value = Op> {
    let axis = || prop_oneof![4 => 0usize..4, 1 => size()];
    prop_oneof![
        hostile_shape().prop_map(|s| Op::Reshape {
            shape: Shape::new(s)
        }),
        hostile_shape().prop_map(|s| Op::Broadcast {
            shape: Shape::new(s)
        }),
        (axis(), size(), size()).prop_map(|(axis, start, len)| Op::Slice { axis, start, len }),
        prop::collection::vec(0usize..5, 0..5).prop_map(|perm| Op::Transpose { perm }),
        axis().prop_map(|axis| Op::Concat { axis }),
        axis().prop_map(|axis| Op::Gather { axis }),
        axis().prop_map(|axis| Op::ScatterAdd { axis }),
        Just(Op::MatMul),
        Just(Op::Solve),
        Just(Op::Select),
        prop::sample::select(vec![
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Max,
            BinaryOp::And
        ])
        .prop_map(Op::Binary),
        prop::sample::select(vec![CmpOp::Lt, CmpOp::Eq]).prop_map(Op::Compare),
        (
            prop::sample::select(vec![ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max]),
            prop::collection::vec(0usize..5, 0..3)
        )
            .prop_map(|(op, axes)| Op::Reduce { op, axes }),
        prop::sample::select(vec![
            UnaryOp::Sin,
            UnaryOp::Neg,
            UnaryOp::Not,
            UnaryOp::Relu,
            UnaryOp::Powi(3)
        ])
        .prop_map(Op::Unary),
        axis().prop_map(|axis| Op::Softmax { axis }),
        dtype().prop_map(Op::Cast),
    ]
}

pub fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        1 => (0u8..3, hostile_shape(), dtype()).prop_map(|(w, s, d)| Call::Full(w, s, d)),
        1 => (any::<bool>(), 0usize..30, hostile_shape()).prop_map(|(b, n, s)| Call::FromVec(b, n, s)),
        6 => (op(), prop::collection::vec(arg(), 3)).prop_map(|(op, args)| Call::Op(op, args)),
    ]
}

type Res = Result<(), TestCaseError>;

/// Checks one call.
pub fn check(c: &Call) -> Res {
    crate::progress(c);
    match c {
        Call::Full(which, shape, dt) => {
            let got = match which {
                0 => Tensor::try_zeros(shape.clone(), *dt),
                1 => Tensor::try_ones(shape.clone(), *dt),
                _ => Tensor::try_full(shape.clone(), 2.0, *dt),
            };
            let s = Shape::new(shape.clone());
            let fits = s.check_size(*dt, "full", &[]).is_ok();
            match got {
                Ok(t) => {
                    prop_assert!(fits, "{} accepted", s);
                    prop_assert_eq!(t.storage().unwrap().len(), s.numel());
                }
                Err(Error::TooLarge { .. }) => prop_assert!(!fits, "{} refused", s),
                // Huge sizes are beyond any address space.
                Err(Error::OutOfMemory { bytes, .. }) => prop_assert!(bytes >= 1 << 58),
                Err(e) => prop_assert!(false, "unexpected error {}", e),
            }
            let panicked = try_panic_of(|| Tensor::zeros(shape.clone(), *dt)).is_some();
            prop_assert_eq!(panicked, !fits || s.numel() >= 1 << 58);
        }
        Call::FromVec(slice, len, shape) => {
            let data: Vec<f32> = (0..*len).map(|i| i as f32).collect();
            let s = Shape::new(shape.clone());
            let got = if *slice {
                Tensor::try_from_slice(&data, shape.clone())
            } else {
                Tensor::try_from_vec(data.clone(), shape.clone())
            };
            let ok = s.checked_numel() == Some(*len);
            prop_assert_eq!(got.is_ok(), ok, "{:?}", got.map(|t| t.ty()));
            if let Ok(t) = got {
                prop_assert_eq!(t.to_vec::<f32>().unwrap(), data);
            }
        }
        Call::Op(op, args) => check_op(op, args)?,
    }
    Ok(())
}

/// Operands an op takes from the three generated arguments.
fn arity(op: &Op) -> usize {
    match op {
        Op::Select | Op::ScatterAdd { .. } => 3,
        Op::Concat { .. }
        | Op::Gather { .. }
        | Op::MatMul
        | Op::Solve
        | Op::Binary(_)
        | Op::Compare(_) => 2,
        _ => 1,
    }
}

/// The op through its public method (`try_` or, with `panicking`, the
/// panicking form; ops without a `try_` method go through `Tensor::apply`).
fn call_method(op: &Op, t: &[Tensor], panicking: bool) -> rlx::Result<Tensor> {
    let (x, y, z) = (&t[0], &t[1], &t[2]);
    let refs = [x, y, z];
    let ok = Ok;
    match (op, panicking) {
        (Op::Reshape { shape }, false) => x.try_reshape(shape.clone()),
        (Op::Reshape { shape }, true) => ok(x.reshape(shape.clone())),
        (Op::Broadcast { shape }, false) => x.try_broadcast_to(shape.clone()),
        (Op::Broadcast { shape }, true) => ok(x.broadcast_to(shape.clone())),
        (Op::Slice { axis, start, len }, false) => {
            x.try_slice_range(*start..start.saturating_add(*len), *axis)
        }
        (Op::Slice { axis, start, len }, true) => {
            ok(x.slice_range(*start..start.saturating_add(*len), *axis))
        }
        (Op::Transpose { perm }, false) => x.try_transpose(perm),
        (Op::Transpose { perm }, true) => ok(x.transpose(perm)),
        (Op::Concat { axis }, false) => Tensor::try_concat(&[x, y], *axis),
        (Op::Concat { axis }, true) => ok(Tensor::concat(&[x, y], *axis)),
        (Op::Gather { axis }, false) => x.try_gather(y, *axis),
        (Op::Gather { axis }, true) => ok(x.gather(y, *axis)),
        (Op::ScatterAdd { axis }, false) => x.try_scatter_add(y, z, *axis),
        (Op::ScatterAdd { axis }, true) => ok(x.scatter_add(y, z, *axis)),
        (Op::MatMul, false) => x.try_matmul(y),
        (Op::MatMul, true) => ok(x.matmul(y)),
        (Op::Solve, false) => x.try_solve(y),
        (Op::Solve, true) => ok(x.solve(y)),
        (Op::Select, false) => x.try_select(y, z),
        (Op::Select, true) => ok(x.select(y, z)),
        (Op::Binary(BinaryOp::Add), false) => x.try_add(y),
        (Op::Binary(BinaryOp::Add), true) => ok(x.add(y)),
        (Op::Compare(CmpOp::Lt), false) => x.try_lt(y),
        (Op::Compare(CmpOp::Lt), true) => ok(x.lt(y)),
        (
            Op::Reduce {
                op: ReduceOp::Sum,
                axes,
            },
            false,
        ) => x.try_sum(axes),
        (
            Op::Reduce {
                op: ReduceOp::Sum,
                axes,
            },
            true,
        ) => ok(x.sum(axes)),
        (
            Op::Reduce {
                op: ReduceOp::Mean,
                axes,
            },
            false,
        ) => x.try_mean(axes),
        (
            Op::Reduce {
                op: ReduceOp::Mean,
                axes,
            },
            true,
        ) => ok(x.mean(axes)),
        (Op::Reduce { op: _, axes }, false) => x.try_max(axes),
        (Op::Reduce { op: _, axes }, true) => ok(x.max(axes)),
        (op, false) => Tensor::apply(op.clone(), &refs[..arity(op)]),
        (op, true) => ok(Tensor::apply_or_panic(op.clone(), &refs[..arity(op)])),
    }
}

fn check_op(op: &Op, args: &[Arg]) -> Res {
    let mut tensors: Vec<Tensor> = args.iter().map(Arg::tensor).collect();
    // Gather and scatter need i64 indices (in range or not); select a mask.
    match op {
        Op::Gather { .. } | Op::ScatterAdd { .. } => {
            let a = &args[1];
            let n = Shape::new(a.shape.clone()).numel();
            let idx: Vec<i64> = common::values(n, a.seed, -2.0, 6.0)
                .iter()
                .map(|v| *v as i64)
                .collect();
            tensors[1] = Tensor::from_vec(idx, a.shape.clone());
        }
        Op::Select => tensors[0] = tensors[0].cast(DType::Bool),
        _ => {}
    }
    let n = arity(op);
    let result = call_method(op, &tensors, false);
    // Shape inference on the same types, through the graph builder.
    let mut g = Graph::new();
    let ids: Vec<_> = tensors[..n]
        .iter()
        .enumerate()
        .map(|(i, t)| g.input(format!("a{i}"), t.shape().clone(), t.dtype()))
        .collect();
    let inferred = match op {
        // The methods take axes in any order; the op wants them sorted.
        Op::Reduce { op, axes } => g.reduce(*op, ids[0], axes),
        op => g.push(op.clone(), &ids),
    };
    let panic = try_panic_of(|| call_method(op, &tensors, true).map(drop));
    match &result {
        Err(e) => {
            let p = panic.ok_or_else(|| {
                TestCaseError::fail(format!(
                    "the panicking form of {op} returned, the try_ form erred: {e}"
                ))
            })?;
            prop_assert!(
                p.message.contains(&e.root().to_string()),
                "panic {:?} vs error {}",
                p.message,
                e
            );
            // `call_method` is the caller of the panicking method.
            prop_assert!(
                p.file.ends_with("eager.rs"),
                "the panic names {}:{}",
                p.file,
                p.line
            );
        }
        Ok(t) => {
            prop_assert!(panic.is_none(), "the panicking form panicked: {:?}", panic);
            let id = inferred
                .clone()
                .map_err(|e| TestCaseError::fail(format!("eager Ok, builder Err: {e}")))?;
            prop_assert_eq!(t.ty(), g.ty(id));
            prop_assert_eq!(t.storage().unwrap().len(), t.shape().numel());
            g.set_outputs(vec![id]);
            let in_range = !matches!(op, Op::Gather { .. } | Op::ScatterAdd { .. }) || {
                let size = tensors[0]
                    .shape()
                    .dims()
                    .get(op_axis(op))
                    .copied()
                    .unwrap_or(0) as i64;
                tensors[1]
                    .to_vec::<i64>()
                    .unwrap()
                    .iter()
                    .all(|&i| (0..size).contains(&i))
            };
            prop_assert!(in_range, "{} accepted an index out of range", op);
            if !matches!(op, Op::Solve) {
                let refs: Vec<&Tensor> = tensors[..n].iter().collect();
                let want = &common::reference::eval_tensors(&g, &refs)[0].data;
                let got = t.to_f64_vec().unwrap();
                // Two units in the last place of the result's dtype.
                let rtol = match t.dtype() {
                    DType::F64 | DType::C64 => 1e-12,
                    DType::F32 | DType::C32 => 1e-5,
                    DType::F16 => 2e-3,
                    DType::BF16 => 1.6e-2,
                    DType::I64 | DType::Bool => 0.0,
                };
                for (k, (a, b)) in got.iter().zip(want).enumerate() {
                    let close = (a.is_nan() && b.is_nan())
                        || a == b
                        || (a - b).abs() <= rtol * (1.0 + b.abs());
                    prop_assert!(close, "{} element {}: got {}, want {}", op, k, a, b);
                }
            }
        }
    }
    if let (Err(e), Ok(_)) = (&result, &inferred) {
        // Only run-time errors may happen when the types are fine (and
        // only huge requests are refused: see the module docs).
        let oom = matches!(e.root(), Error::OutOfMemory { bytes, .. } if *bytes >= 1 << 58);
        prop_assert!(
            oom || matches!(
                e.root(),
                Error::IndexOutOfRange { .. } | Error::SingularMatrix { .. }
            ),
            "the builder accepted what the eager call refused: {}",
            e
        );
    }
    Ok(())
}

fn op_axis(op: &Op) -> usize {
    match op {
        Op::Gather { axis } | Op::ScatterAdd { axis } => *axis,
        _ => 0,
    }
}

/// The eager property over `cases` calls; returns the number of calls.
pub fn run_eager(cases: u32) -> u32 {
    let mut runner = crate::runner(cases, 2);
    let n = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&call(), |c| {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        check(&c)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    n.into_inner()
}
