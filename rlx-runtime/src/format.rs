//! `Display` and `Debug` for [`Tensor`], in ndarray's style: nested brackets,
//! one row per line, blank lines between blocks of rank ≥ 3, and elisions
//! (`...`) for long axes of large tensors. The formatter's precision
//! (`{:.3}`) applies to each element. `Debug` adds the shape and dtype; a
//! traced tensor prints as `Tensor(traced %7: f64[3])`.

use std::fmt;

use crate::storage::Storage;
use crate::tensor::{Repr, Tensor};

/// Tensors with more elements than this elide long axes.
const ELIDE_ABOVE: usize = 500;
/// Elements shown at each end of an elided axis.
const EDGE: usize = 3;

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Display,
    Debug,
}

fn elem(f: &mut fmt::Formatter<'_>, s: &Storage, i: usize, style: Style) -> fmt::Result {
    macro_rules! put {
        ($v:expr) => {
            match (style, f.precision()) {
                (Style::Display, Some(p)) => write!(f, "{:.*}", p, $v),
                (Style::Display, None) => write!(f, "{}", $v),
                (Style::Debug, Some(p)) => write!(f, "{:.*?}", p, $v),
                (Style::Debug, None) => write!(f, "{:?}", $v),
            }
        };
    }
    match s {
        Storage::F32(v) => put!(v[i]),
        Storage::F64(v) => put!(v[i]),
        Storage::F16(v) => put!(v[i].to_f32()),
        Storage::BF16(v) => put!(v[i].to_f32()),
        Storage::I64(v) => write!(f, "{}", v[i]),
        Storage::Bool(v) => write!(f, "{}", v[i]),
        Storage::C32(v) => put!(v[i]),
        Storage::C64(v) => put!(v[i]),
    }
}

/// Writes the sub-array at `offset` spanning `dims[depth..]`.
#[allow(clippy::too_many_arguments)]
fn nested(
    f: &mut fmt::Formatter<'_>,
    s: &Storage,
    dims: &[usize],
    strides: &[usize],
    depth: usize,
    offset: usize,
    elide: bool,
    style: Style,
) -> fmt::Result {
    if depth == dims.len() {
        return elem(f, s, offset, style);
    }
    let n = dims[depth];
    let rest = dims.len() - depth - 1;
    f.write_str("[")?;
    let shown: &mut dyn Iterator<Item = Option<usize>> = if elide && n > 2 * EDGE {
        &mut (0..EDGE)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE..n).map(Some))
    } else {
        &mut (0..n).map(Some)
    };
    for (k, item) in shown.enumerate() {
        if k > 0 {
            f.write_str(",")?;
            for _ in 0..rest {
                f.write_str("\n")?;
            }
            if rest == 0 {
                f.write_str(" ")?;
            } else {
                for _ in 0..=depth {
                    f.write_str(" ")?;
                }
            }
        }
        match item {
            Some(i) => nested(
                f,
                s,
                dims,
                strides,
                depth + 1,
                offset + i * strides[depth],
                elide,
                style,
            )?,
            None => f.write_str("...")?,
        }
    }
    f.write_str("]")
}

fn write(t: &Tensor, f: &mut fmt::Formatter<'_>, style: Style) -> fmt::Result {
    match &t.repr {
        Repr::Traced(tr) => write!(f, "Tensor(traced {}: {}{})", tr.node, tr.dtype, tr.shape),
        Repr::Concrete(c) => {
            let dims = c.shape.dims();
            let strides = c.shape.strides();
            let elide = c.shape.numel() > ELIDE_ABOVE;
            nested(f, &c.storage, dims, &strides, 0, 0, elide, style)?;
            if style == Style::Debug {
                write!(f, ", shape={}, dtype={}", c.shape, c.storage.dtype())?;
            }
            Ok(())
        }
    }
}

impl fmt::Display for Tensor {
    /// ```
    /// use rlx::Tensor;
    /// let t = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
    /// assert_eq!(t.to_string(), "[[1, 2],\n [3, 4]]");
    /// assert_eq!(format!("{t:.1}"), "[[1.0, 2.0],\n [3.0, 4.0]]");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write(self, f, Style::Display)
    }
}

impl fmt::Debug for Tensor {
    /// ```
    /// use rlx::Tensor;
    /// let t = Tensor::from_slice(&[1.0f64, 2.5], [2]);
    /// assert_eq!(format!("{t:?}"), "[1.0, 2.5], shape=[2], dtype=f64");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write(self, f, Style::Debug)
    }
}
