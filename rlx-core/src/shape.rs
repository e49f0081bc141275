//! Static tensor shapes and NumPy broadcasting.
//!
//! A [`Shape`] is the list of dimension sizes, outermost first; `[]` is a 0-d
//! scalar. Sizes are always known: a new input size means a new trace, never
//! a symbolic dimension. Layout is row-major (C order) everywhere.
//!
//! # Size limits
//!
//! A tensor may hold at most [`MAX_BYTES`] bytes (`isize::MAX`, the limit
//! Rust puts on every allocation), so at most `isize::MAX / size` elements of
//! a dtype of `size` bytes (2^60 - 1 for `f64`). Shapes are plain lists and
//! may be anything, but every place that turns a shape into a value checks
//! it with [`Shape::check_size`] first: the graph builder (the result of
//! every op), graph verification, `vmap`, the Jacobian transforms and the
//! runtime's constructors. A shape that fails is an [`Error::TooLarge`]
//! naming the op; no size computation ever wraps around.
//!
//! The same check bounds the product of the *non-zero* dimensions (as
//! ndarray does), so that strides never overflow either, even for a shape
//! such as `[0, 1 << 62, 4]` that holds no elements.

use std::fmt;

use smallvec::SmallVec;

use crate::shape_dims::Dims;
use crate::{DType, Error, Result};

/// The largest size in bytes of a tensor's values: `isize::MAX`, the limit
/// of every Rust allocation. See the [module docs](self).
pub const MAX_BYTES: usize = isize::MAX as usize;

/// The dimensions of a tensor, outermost first.
///
/// ```
/// use rlx::Shape;
/// let s = Shape::from([2, 3]);
/// assert_eq!(s.rank(), 2);
/// assert_eq!(s.numel(), 6);
/// assert_eq!(s.to_string(), "[2, 3]");
/// assert_eq!(Shape::scalar().numel(), 1);
/// ```
#[derive(PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Shape(Dims);

impl Clone for Shape {
    /// A copy of the dimensions: inline ones by value, a longer list by
    /// counting a reference (see `shape_dims`); never a heap allocation.
    #[inline]
    fn clone(&self) -> Shape {
        Shape(self.0.clone())
    }
}

impl Shape {
    /// A shape with the given dimensions.
    #[inline]
    pub fn new(dims: impl Into<Vec<usize>>) -> Shape {
        let dims: Vec<usize> = dims.into();
        Shape(Dims::from_slice(&dims))
    }

    /// The 0-d shape `[]`.
    #[inline]
    pub fn scalar() -> Shape {
        Shape(Dims::default())
    }

    /// The dimensions.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        self.0.as_slice()
    }

    /// Number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.0.as_slice().len()
    }

    /// Number of elements (1 for a 0-d shape, 0 if any dimension is 0).
    ///
    /// Exact for every shape that passes [`Shape::check_size`] (the shape of
    /// every tensor and graph node); saturates at `usize::MAX` for a shape
    /// whose element count does not fit, so it never wraps around. Use
    /// [`Shape::checked_numel`] to tell.
    #[inline]
    pub fn numel(&self) -> usize {
        self.checked_numel().unwrap_or(usize::MAX)
    }

    /// Number of elements, or `None` when the product of the non-zero
    /// dimensions exceeds `isize::MAX` (such a shape cannot describe a
    /// tensor, even an empty one: its strides would overflow).
    ///
    /// ```
    /// use rlx::Shape;
    /// assert_eq!(Shape::from([2, 3]).checked_numel(), Some(6));
    /// assert_eq!(Shape::from([0, 1 << 40]).checked_numel(), Some(0));
    /// assert_eq!(Shape::from([1 << 32, 1 << 32]).checked_numel(), None);
    /// assert_eq!(Shape::from([0, usize::MAX, 2]).checked_numel(), None);
    /// ```
    #[inline]
    pub fn checked_numel(&self) -> Option<usize> {
        let mut nonzero: usize = 1;
        for &d in self.dims() {
            if d != 0 {
                nonzero = nonzero.checked_mul(d).filter(|&n| n <= MAX_BYTES)?;
            }
        }
        Some(if self.dims().contains(&0) { 0 } else { nonzero })
    }

    /// The largest element count a tensor of `dtype` may have:
    /// `MAX_BYTES / dtype.size_in_bytes()`.
    ///
    /// ```
    /// use rlx::{DType, Shape};
    /// assert_eq!(Shape::max_numel(DType::F64), (isize::MAX as usize) / 8);
    /// assert_eq!(Shape::max_numel(DType::Bool), isize::MAX as usize);
    /// ```
    #[inline]
    pub fn max_numel(dtype: DType) -> usize {
        MAX_BYTES / dtype.size_in_bytes()
    }

    /// Checks that a tensor of this shape and `dtype` can exist: its element
    /// count fits in [`MAX_BYTES`] bytes (and the product of its non-zero
    /// dimensions in `isize::MAX`). Otherwise an [`Error::TooLarge`] naming
    /// `op` and the shapes of its `operands`.
    ///
    /// ```
    /// use rlx::{DType, Error, Shape};
    /// assert!(Shape::from([1 << 20, 8]).check_size(DType::F64, "zeros", &[]).is_ok());
    /// let e = Shape::from([1 << 32, 1 << 32])
    ///     .check_size(DType::F64, "reshape", &[Shape::from([0])])
    ///     .unwrap_err();
    /// assert!(matches!(e, Error::TooLarge { op: "reshape", .. }));
    /// assert!(e.to_string().contains("18446744073709551616 elements"));
    /// ```
    pub fn check_size(&self, dtype: DType, op: &'static str, operands: &[Shape]) -> Result<()> {
        match self.fits(dtype) {
            true => Ok(()),
            false => Err(Error::TooLarge {
                op,
                shape: self.clone(),
                dtype,
                operands: operands.to_vec(),
            }),
        }
    }

    /// Whether a tensor of this shape and `dtype` can exist: what
    /// [`Shape::check_size`] checks, without building an error.
    ///
    /// ```
    /// use rlx::{DType, Shape};
    /// assert!(Shape::from([3, 4]).fits(DType::F64));
    /// assert!(!Shape::from([1 << 62, 4]).fits(DType::F64));
    /// ```
    #[inline]
    pub fn fits(&self, dtype: DType) -> bool {
        matches!(self.checked_numel(), Some(n) if n <= Shape::max_numel(dtype))
    }

    /// The exact element count as a decimal string, however large (for
    /// messages about shapes too large to have a `usize` count).
    pub(crate) fn numel_string(&self) -> String {
        if self.dims().contains(&0) {
            return "0".into();
        }
        // Base 10^18 limbs, least significant first.
        const BASE: u128 = 1_000_000_000_000_000_000;
        let mut limbs: Vec<u128> = vec![1];
        for &d in self.dims() {
            let mut carry: u128 = 0;
            for l in limbs.iter_mut() {
                let v = *l * d as u128 + carry;
                *l = v % BASE;
                carry = v / BASE;
            }
            while carry > 0 {
                limbs.push(carry % BASE);
                carry /= BASE;
            }
        }
        let mut s = limbs.last().map_or(String::new(), |l| l.to_string());
        for l in limbs.iter().rev().skip(1) {
            s.push_str(&format!("{l:018}"));
        }
        s
    }

    /// Whether this is the 0-d shape.
    #[inline]
    pub fn is_scalar(&self) -> bool {
        self.dims().is_empty()
    }

    /// Size of dimension `axis`; panics if out of range (callers validate).
    #[inline]
    pub fn dim(&self, axis: usize) -> usize {
        self.dims()[axis]
    }

    /// The first element and the length of `range` along `axis` (an
    /// open end is the axis's size): what [`Graph::slice_range`](crate::Graph::slice_range)
    /// and `Tensor::slice_range` take. An error naming `slice` if the axis
    /// is out of range, or the range ends before it starts or past the axis.
    ///
    /// ```
    /// use rlx::Shape;
    /// let s = Shape::from([4, 3]);
    /// assert_eq!(s.range_along(&(1..3), 0).unwrap(), (1, 2));
    /// assert_eq!(s.range_along(&(1..), 1).unwrap(), (1, 2));
    /// assert_eq!(s.range_along(&(..=3), 0).unwrap(), (0, 4));
    /// assert!(s.range_along(&(2..5), 1).is_err());
    /// assert!(s.range_along(&(0..1), 2).is_err());
    /// ```
    pub fn range_along(
        &self,
        range: &impl std::ops::RangeBounds<usize>,
        axis: usize,
    ) -> Result<(usize, usize)> {
        use std::ops::Bound;
        let invalid = |message: String| Error::InvalidArgument {
            op: "slice",
            message,
        };
        let Some(&size) = self.dims().get(axis) else {
            return Err(invalid(format!(
                "axis {axis} is out of range for a tensor of rank {} (shape {self})",
                self.rank()
            )));
        };
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(size),
        };
        let show = |b: Option<usize>| b.map_or("usize::MAX + 1".to_string(), |b| b.to_string());
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= size => Ok((s, e - s)),
            (Some(s), Some(e)) if e < s => Err(invalid(format!(
                "the range {s}..{e} ends before it starts (axis {axis} of shape {self})"
            ))),
            _ => Err(invalid(format!(
                "elements {}..{} are out of range for axis {axis} of size {size} (shape {self})",
                show(start),
                show(end)
            ))),
        }
    }

    /// Row-major strides in elements: `strides[i] = prod(dims[i+1..])`.
    ///
    /// ```
    /// use rlx::Shape;
    /// assert_eq!(Shape::from([2, 3, 4]).strides(), vec![12, 4, 1]);
    /// ```
    pub fn strides(&self) -> Vec<usize> {
        let dims = self.dims();
        let mut strides: Vec<usize> = vec![1; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            // Saturating: exact for every shape that passes `check_size`.
            strides[i] = strides[i + 1].saturating_mul(dims[i + 1]);
        }
        strides
    }

    /// NumPy broadcasting of two shapes: align from the right; each pair of
    /// dimensions must be equal or one of them 1. `None` if incompatible.
    ///
    /// ```
    /// use rlx::Shape;
    /// let a = Shape::from([4, 1, 3]);
    /// let b = Shape::from([5, 1]);
    /// assert_eq!(Shape::broadcast(&a, &b), Some(Shape::from([4, 5, 3])));
    /// assert_eq!(Shape::broadcast(&Shape::from([2]), &Shape::from([3])), None);
    /// ```
    pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out: SmallVec<[usize; 4]> = SmallVec::from_elem(0, rank);
        for (i, o) in out.iter_mut().enumerate() {
            let da = a.dim_from_right(rank - 1 - i);
            let db = b.dim_from_right(rank - 1 - i);
            *o = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => return None,
            };
        }
        Some(Shape(Dims::from_slice(&out)))
    }

    /// Whether `self` broadcasts to `target` (NumPy rules, one direction).
    pub fn broadcasts_to(&self, target: &Shape) -> bool {
        self.rank() <= target.rank()
            && (0..self.rank()).all(|i| {
                let d = self.dim_from_right(i);
                d == 1 || d == target.dim_from_right(i)
            })
    }

    /// Dimension `i` counted from the right (0 = last), 1 past the rank.
    #[inline]
    fn dim_from_right(&self, i: usize) -> usize {
        let dims = self.dims();
        if i < dims.len() {
            dims[dims.len() - 1 - i]
        } else {
            1
        }
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(dims: [usize; N]) -> Shape {
        Shape(Dims::from_slice(&dims))
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Shape {
        Shape(Dims::from_slice(&dims))
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Shape {
        Shape(Dims::from_slice(dims))
    }
}

impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Shape {
        s.clone()
    }
}

impl From<()> for Shape {
    fn from(_: ()) -> Shape {
        Shape::scalar()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_equal_their_shape_at_every_rank() {
        for rank in 0..7 {
            let dims: Vec<usize> = (0..rank).map(|i| 2 + 3 * i).collect();
            let s = Shape::new(dims.clone());
            let c = s.clone();
            assert_eq!(c, s);
            assert_eq!(c.dims(), &dims[..]);
            assert_eq!(c.numel(), s.numel());
        }
    }
}
