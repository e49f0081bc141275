//! Shape and dtype inference: one exhaustive `match` over [`Op`].
//!
//! [`infer`] is the single place that knows what each op accepts. The graph
//! builder and the runtime's eager path both call it, so a shape error reads
//! the same whether the code is traced or run eagerly.

use crate::{BinaryOp, DType, Error, Op, Result, Shape, UnaryOp};

/// The type of a value: its shape and dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Dimensions.
    pub shape: Shape,
    /// Element type.
    pub dtype: DType,
}

impl TensorType {
    /// A type from a shape and dtype.
    pub fn new(shape: impl Into<Shape>, dtype: DType) -> TensorType {
        TensorType {
            shape: shape.into(),
            dtype,
        }
    }
}

/// Infers the output type of `op` applied to operands of types `inputs`.
///
/// ```
/// use rlx::{core::infer, BinaryOp, DType, Op, Shape, TensorType};
/// let a = TensorType::new([4, 1], DType::F32);
/// let b = TensorType::new([3], DType::F32);
/// let out = infer(&Op::Binary(BinaryOp::Mul), &[&a, &b]).unwrap();
/// assert_eq!(out.shape, Shape::from([4, 3]));
/// ```
///
/// The result's size is checked ([`Shape::check_size`]): an op whose result
/// could not exist in memory (a broadcast, reshape, matmul or concat to
/// more than `isize::MAX` bytes) is an [`Error::TooLarge`] naming the op and
/// the operand shapes, never a wrapped-around element count.
///
/// ```
/// use rlx::{core::infer, DType, Error, Op, Shape, TensorType};
/// let x = TensorType::new([0], DType::F64);
/// let op = Op::Reshape { shape: Shape::from([1 << 32, 1 << 32]) };
/// assert!(matches!(infer(&op, &[&x]), Err(Error::TooLarge { op: "reshape", .. })));
/// ```
pub fn infer(op: &Op, inputs: &[&TensorType]) -> Result<TensorType> {
    // The operand shapes are gathered for the error only: an eager op on
    // small tensors pays for this function on every call.
    let check = |shape: &Shape, dtype: DType| match shape.fits(dtype) {
        true => Ok(()),
        false => {
            let operands: Vec<Shape> = inputs.iter().map(|t| t.shape.clone()).collect();
            shape.check_size(dtype, op.name(), &operands)
        }
    };
    // A target shape given by the caller is checked before it is compared
    // with anything (a reshape of `[0]` to `[1 << 32, 1 << 32]`).
    if let (Op::Reshape { shape } | Op::Broadcast { shape }, Some(x)) = (op, inputs.first()) {
        check(shape, x.dtype)?;
    }
    let ty = infer_unchecked(op, inputs)?;
    check(&ty.shape, ty.dtype)?;
    Ok(ty)
}

/// [`infer`] without the size check of the result.
fn infer_unchecked(op: &Op, inputs: &[&TensorType]) -> Result<TensorType> {
    let name = op.name();
    if let Some(n) = op.arity() {
        if inputs.len() != n {
            return Err(Error::Arity {
                op: name,
                expected: n,
                got: inputs.len(),
            });
        }
    }
    match op {
        Op::Input { .. } | Op::Constant(_) => Err(Error::InvalidArgument {
            op: name,
            message: "inputs and constants are created with `Graph::input` and `Graph::constant`"
                .into(),
        }),
        Op::Unary(u) if inputs[0].dtype.is_complex() || u.complex_only() => {
            let x = inputs[0];
            if !x.dtype.is_complex() {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: x.dtype,
                    expected: "a complex dtype (c32, c64)",
                });
            }
            if !u.has_complex_kernel() {
                return Err(no_complex_kernel(name, x.dtype));
            }
            let dtype = match u {
                UnaryOp::Real | UnaryOp::Imag | UnaryOp::Abs => x.dtype.real(),
                _ => x.dtype,
            };
            Ok(TensorType::new(x.shape.clone(), dtype))
        }
        Op::Unary(u) => {
            let x = inputs[0];
            let ok = match u {
                UnaryOp::Not => x.dtype == DType::Bool,
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign | UnaryOp::Square | UnaryOp::Relu => {
                    x.dtype != DType::Bool
                }
                UnaryOp::Powi(_) => x.dtype.is_float() || x.dtype == DType::I64,
                _ => x.dtype.is_float(),
            };
            if !ok {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: x.dtype,
                    expected: match u {
                        UnaryOp::Not => "bool",
                        _ => "a float dtype (f32, f64, f16, bf16)",
                    },
                });
            }
            Ok(x.clone())
        }
        Op::Binary(BinaryOp::Complex) => {
            let (l, r) = (inputs[0], inputs[1]);
            same_dtype(name, l, r)?;
            let dtype = match l.dtype {
                DType::F32 => DType::C32,
                DType::F64 => DType::C64,
                other => {
                    return Err(Error::UnsupportedDType {
                        op: name,
                        dtype: other,
                        expected: "real and imaginary parts of dtype f32 or f64",
                    })
                }
            };
            Ok(TensorType::new(broadcast(name, &l.shape, &r.shape)?, dtype))
        }
        Op::Binary(b) if inputs[0].dtype.is_complex() => {
            let (l, r) = (inputs[0], inputs[1]);
            same_dtype(name, l, r)?;
            let ok = matches!(
                b,
                BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Pow
                    | BinaryOp::MulZero
            );
            if !ok {
                return Err(no_complex_kernel(name, l.dtype));
            }
            Ok(TensorType::new(
                broadcast(name, &l.shape, &r.shape)?,
                l.dtype,
            ))
        }
        Op::Binary(b) => {
            let (l, r) = (inputs[0], inputs[1]);
            same_dtype(name, l, r)?;
            let logical = matches!(b, BinaryOp::And | BinaryOp::Or);
            if logical != (l.dtype == DType::Bool) {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: l.dtype,
                    expected: if logical { "bool" } else { "a numeric dtype" },
                });
            }
            let needs_float = matches!(
                b,
                BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::MulZero | BinaryOp::Div
            );
            if needs_float && !l.dtype.is_float() {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: l.dtype,
                    expected: "a float dtype (f32, f64, f16, bf16)",
                });
            }
            Ok(TensorType::new(
                broadcast(name, &l.shape, &r.shape)?,
                l.dtype,
            ))
        }
        Op::Compare(c) => {
            let (l, r) = (inputs[0], inputs[1]);
            same_dtype(name, l, r)?;
            if l.dtype.is_complex() && !matches!(c, crate::CmpOp::Eq | crate::CmpOp::Ne) {
                return Err(no_complex_kernel(name, l.dtype));
            }
            Ok(TensorType::new(
                broadcast(name, &l.shape, &r.shape)?,
                DType::Bool,
            ))
        }
        Op::Select => {
            let (c, a, b) = (inputs[0], inputs[1], inputs[2]);
            if c.dtype != DType::Bool {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: c.dtype,
                    expected: "a bool mask as the condition",
                });
            }
            same_dtype(name, a, b)?;
            let ab = broadcast(name, &a.shape, &b.shape)?;
            Ok(TensorType::new(broadcast(name, &c.shape, &ab)?, a.dtype))
        }
        Op::Cast(d) => Ok(TensorType::new(inputs[0].shape.clone(), *d)),
        Op::Reduce { op: r, axes } => {
            let x = inputs[0];
            check_axes(name, axes, x.shape.rank())?;
            if x.dtype.is_complex() && matches!(r, crate::ReduceOp::Max | crate::ReduceOp::Min) {
                return Err(no_complex_kernel(name, x.dtype));
            }
            if x.dtype == DType::Bool {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: x.dtype,
                    expected: "a numeric dtype",
                });
            }
            if matches!(r, crate::ReduceOp::Mean) && !x.dtype.is_inexact() {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: x.dtype,
                    expected: "a float dtype (f32, f64, f16, bf16)",
                });
            }
            let dims: Vec<usize> = x
                .shape
                .dims()
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect();
            Ok(TensorType::new(dims, x.dtype))
        }
        Op::MatMul => {
            let (a, b) = (inputs[0], inputs[1]);
            same_dtype(name, a, b)?;
            if !a.dtype.is_inexact() {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: a.dtype,
                    expected: "a float or complex dtype (f32, f64, f16, bf16, c32, c64)",
                });
            }
            let expected = "operands of shapes [.., m, k] and [.., k, n] (rank >= 2, broadcasting batch dimensions)";
            let mismatch = || Error::ShapeMismatch {
                op: name,
                lhs: a.shape.clone(),
                rhs: b.shape.clone(),
                expected: expected.into(),
            };
            let (ra, rb) = (a.shape.rank(), b.shape.rank());
            if ra < 2 || rb < 2 {
                return Err(mismatch());
            }
            let (m, k) = (a.shape.dim(ra - 2), a.shape.dim(ra - 1));
            let (k2, n) = (b.shape.dim(rb - 2), b.shape.dim(rb - 1));
            if k != k2 {
                return Err(mismatch());
            }
            let batch = Shape::broadcast(
                &Shape::from(&a.shape.dims()[..ra - 2]),
                &Shape::from(&b.shape.dims()[..rb - 2]),
            )
            .ok_or_else(mismatch)?;
            let mut dims = batch.dims().to_vec();
            dims.extend([m, n]);
            Ok(TensorType::new(dims, a.dtype))
        }
        Op::Transpose { perm } => {
            let x = inputs[0];
            let rank = x.shape.rank();
            let mut seen = vec![false; rank];
            let valid = perm.len() == rank
                && perm
                    .iter()
                    .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
            if !valid {
                return Err(Error::InvalidArgument {
                    op: name,
                    message: format!(
                        "{perm:?} is not a permutation of the {rank} axes of a tensor of shape {}",
                        x.shape
                    ),
                });
            }
            let dims: Vec<usize> = perm.iter().map(|&p| x.shape.dim(p)).collect();
            Ok(TensorType::new(dims, x.dtype))
        }
        Op::Reshape { shape } => {
            let x = inputs[0];
            if shape.numel() != x.shape.numel() {
                return Err(Error::ShapeMismatch {
                    op: name,
                    lhs: x.shape.clone(),
                    rhs: shape.clone(),
                    expected: format!(
                        "a target shape with {} elements, like the input",
                        x.shape.numel()
                    ),
                });
            }
            Ok(TensorType::new(shape.clone(), x.dtype))
        }
        Op::Broadcast { shape } => {
            let x = inputs[0];
            if !x.shape.broadcasts_to(shape) {
                return Err(Error::ShapeMismatch {
                    op: name,
                    lhs: x.shape.clone(),
                    rhs: shape.clone(),
                    expected: "the first shape to broadcast to the second (NumPy rules)".into(),
                });
            }
            Ok(TensorType::new(shape.clone(), x.dtype))
        }
        Op::Concat { axis } => {
            let Some(first) = inputs.first() else {
                return Err(Error::Arity {
                    op: name,
                    expected: 1,
                    got: 0,
                });
            };
            let rank = first.shape.rank();
            if *axis >= rank {
                return Err(axis_error(name, *axis, &first.shape));
            }
            let mut dims = first.shape.dims().to_vec();
            dims[*axis] = 0;
            for t in inputs {
                same_dtype(name, first, t)?;
                let same_rest = t.shape.rank() == rank
                    && (0..rank).all(|i| i == *axis || t.shape.dim(i) == first.shape.dim(i));
                if !same_rest {
                    return Err(Error::ShapeMismatch {
                        op: name,
                        lhs: first.shape.clone(),
                        rhs: t.shape.clone(),
                        expected: format!("equal shapes except along axis {axis}"),
                    });
                }
                dims[*axis] = dims[*axis].checked_add(t.shape.dim(*axis)).ok_or_else(|| {
                    Error::InvalidArgument {
                        op: name,
                        message: format!(
                            "the sizes along axis {axis} add up to more than usize::MAX (operand shapes {})",
                            inputs.iter().map(|t| t.shape.to_string()).collect::<Vec<_>>().join(", ")
                        ),
                    }
                })?;
            }
            Ok(TensorType::new(dims, first.dtype))
        }
        Op::Slice { axis, start, len } => {
            let x = inputs[0];
            if *axis >= x.shape.rank() {
                return Err(axis_error(name, *axis, &x.shape));
            }
            let size = x.shape.dim(*axis);
            if start.checked_add(*len).is_none_or(|end| end > size) {
                return Err(Error::InvalidArgument {
                    op: name,
                    message: format!(
                        "elements {start}..{} are out of range for axis {axis} of size {size} (shape {})",
                        start.saturating_add(*len),
                        x.shape
                    ),
                });
            }
            let mut dims = x.shape.dims().to_vec();
            dims[*axis] = *len;
            Ok(TensorType::new(dims, x.dtype))
        }
        Op::Gather { axis } => {
            let (x, idx) = (inputs[0], inputs[1]);
            index_dtype(name, idx)?;
            if *axis >= x.shape.rank() {
                return Err(axis_error(name, *axis, &x.shape));
            }
            Ok(TensorType::new(
                gather_shape(&x.shape, &idx.shape, *axis),
                x.dtype,
            ))
        }
        Op::ScatterAdd { axis } => {
            let (operand, idx, updates) = (inputs[0], inputs[1], inputs[2]);
            index_dtype(name, idx)?;
            same_dtype(name, operand, updates)?;
            if *axis >= operand.shape.rank() {
                return Err(axis_error(name, *axis, &operand.shape));
            }
            let want = gather_shape(&operand.shape, &idx.shape, *axis);
            if updates.shape != want {
                return Err(Error::ShapeMismatch {
                    op: name,
                    lhs: operand.shape.clone(),
                    rhs: updates.shape.clone(),
                    expected: format!("updates of shape {want} for these indices"),
                });
            }
            Ok(operand.clone())
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            let x = inputs[0];
            if !x.dtype.is_float() {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: x.dtype,
                    expected: "a float dtype (f32, f64, f16, bf16)",
                });
            }
            if *axis >= x.shape.rank() {
                return Err(axis_error(name, *axis, &x.shape));
            }
            Ok(x.clone())
        }
        Op::Solve => {
            let (a, b) = (inputs[0], inputs[1]);
            same_dtype(name, a, b)?;
            if !a.dtype.is_inexact() {
                return Err(Error::UnsupportedDType {
                    op: name,
                    dtype: a.dtype,
                    expected: "a float or complex dtype (f32, f64, f16, bf16, c32, c64)",
                });
            }
            let (ra, rb) = (a.shape.rank(), b.shape.rank());
            let ok = ra >= 2
                && ra == rb
                && a.shape.dim(ra - 1) == a.shape.dim(ra - 2)
                && b.shape.dim(rb - 2) == a.shape.dim(ra - 1)
                && a.shape.dims()[..ra - 2] == b.shape.dims()[..rb - 2];
            if !ok {
                return Err(Error::ShapeMismatch {
                    op: name,
                    lhs: a.shape.clone(),
                    rhs: b.shape.clone(),
                    expected: "a square matrix [.., n, n] and a right-hand side [.., n, k] with equal batch dimensions".into(),
                });
            }
            Ok(b.clone())
        }
        Op::StopGradient => Ok(inputs[0].clone()),
        Op::Custom(c) => {
            let f = &c.forward;
            if f.outputs().len() != 1 {
                return Err(Error::InvalidArgument {
                    op: name,
                    message: format!(
                        "custom op `{}` must have exactly one output, it has {}",
                        c.name,
                        f.outputs().len()
                    ),
                });
            }
            for (inp, got) in f.inputs().iter().zip(inputs) {
                let want = f.ty(inp.node);
                if &want != *got {
                    return Err(Error::InputMismatch {
                        name: format!("{}::{}", c.name, inp.name),
                        expected_shape: want.shape,
                        expected_dtype: want.dtype,
                        got_shape: got.shape.clone(),
                        got_dtype: got.dtype,
                    });
                }
            }
            Ok(f.ty(f.outputs()[0]))
        }
        Op::Loop(l) => {
            l.validate_once()?;
            l.infer(inputs)
        }
        Op::Root(r) => r.infer(inputs),
        Op::SparseSolve(s) => s.infer(inputs),
    }
}

/// The shape `Gather` gives: `x[..axis] ++ idx ++ x[axis + 1..]`.
pub fn gather_shape(x: &Shape, idx: &Shape, axis: usize) -> Shape {
    let mut dims = x.dims()[..axis].to_vec();
    dims.extend_from_slice(idx.dims());
    dims.extend_from_slice(&x.dims()[axis + 1..]);
    Shape::new(dims)
}

fn same_dtype(op: &'static str, l: &TensorType, r: &TensorType) -> Result<()> {
    if l.dtype != r.dtype {
        return Err(Error::DTypeMismatch {
            op,
            lhs: l.dtype,
            rhs: r.dtype,
        });
    }
    Ok(())
}

fn broadcast(op: &'static str, l: &Shape, r: &Shape) -> Result<Shape> {
    Shape::broadcast(l, r).ok_or_else(|| Error::ShapeMismatch {
        op,
        lhs: l.clone(),
        rhs: r.clone(),
        expected: "shapes that broadcast (NumPy rules: aligned from the right, each pair of dimensions equal or one of them 1)".into(),
    })
}

fn index_dtype(op: &'static str, idx: &TensorType) -> Result<()> {
    if idx.dtype != DType::I64 {
        return Err(Error::UnsupportedDType {
            op,
            dtype: idx.dtype,
            expected: "i64 indices",
        });
    }
    Ok(())
}

fn axis_error(op: &'static str, axis: usize, shape: &Shape) -> Error {
    Error::InvalidArgument {
        op,
        message: format!(
            "axis {axis} is out of range for a tensor of rank {} (shape {shape})",
            shape.rank()
        ),
    }
}

fn check_axes(op: &'static str, axes: &[usize], rank: usize) -> Result<()> {
    let sorted = axes.windows(2).all(|w| w[0] < w[1]);
    if !sorted || axes.iter().any(|&a| a >= rank) {
        return Err(Error::InvalidArgument {
            op,
            message: format!("axes {axes:?} must be sorted, unique and below the rank {rank}"),
        });
    }
    Ok(())
}

/// The error for a complex operand of an op that has no complex kernel:
/// orderings (`max`, `relu`, `floor`, comparisons other than `eq`/`ne`)
/// and the real special functions. Complex values are never ordered by
/// their real parts.
fn no_complex_kernel(op: &'static str, dtype: DType) -> Error {
    Error::UnsupportedDType {
        op,
        dtype,
        expected: "a real dtype: the op has no complex kernel (complex values are not ordered; take `real`, `imag`, `abs` or `arg` first)",
    }
}
