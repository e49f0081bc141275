//! Static tensor shapes and NumPy broadcasting.
//!
//! A [`Shape`] is the list of dimension sizes, outermost first; `[]` is a 0-d
//! scalar. Sizes are always known: a new input size means a new trace, never
//! a symbolic dimension. Layout is row-major (C order) everywhere.

use std::fmt;

/// The dimensions of a tensor, outermost first.
///
/// ```
/// use rlx_core::Shape;
/// let s = Shape::from([2, 3]);
/// assert_eq!(s.rank(), 2);
/// assert_eq!(s.numel(), 6);
/// assert_eq!(s.to_string(), "[2, 3]");
/// assert_eq!(Shape::scalar().numel(), 1);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Shape(Vec<usize>);

impl Shape {
    /// A shape with the given dimensions.
    pub fn new(dims: impl Into<Vec<usize>>) -> Shape {
        Shape(dims.into())
    }

    /// The 0-d shape `[]`.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for a 0-d shape, 0 if any dimension is 0).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Whether this is the 0-d shape.
    pub fn is_scalar(&self) -> bool {
        self.0.is_empty()
    }

    /// Size of dimension `axis`; panics if out of range (callers validate).
    pub fn dim(&self, axis: usize) -> usize {
        self.0[axis]
    }

    /// Row-major strides in elements: `strides[i] = prod(dims[i+1..])`.
    ///
    /// ```
    /// use rlx_core::Shape;
    /// assert_eq!(Shape::from([2, 3, 4]).strides(), vec![12, 4, 1]);
    /// ```
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.0.len()];
        for i in (0..self.0.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.0[i + 1];
        }
        strides
    }

    /// NumPy broadcasting of two shapes: align from the right; each pair of
    /// dimensions must be equal or one of them 1. `None` if incompatible.
    ///
    /// ```
    /// use rlx_core::Shape;
    /// let a = Shape::from([4, 1, 3]);
    /// let b = Shape::from([5, 1]);
    /// assert_eq!(Shape::broadcast(&a, &b), Some(Shape::from([4, 5, 3])));
    /// assert_eq!(Shape::broadcast(&Shape::from([2]), &Shape::from([3])), None);
    /// ```
    pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out = vec![0; rank];
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
        Some(Shape(out))
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
    fn dim_from_right(&self, i: usize) -> usize {
        if i < self.0.len() {
            self.0[self.0.len() - 1 - i]
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
        for (i, d) in self.0.iter().enumerate() {
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
        Shape(dims.to_vec())
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Shape {
        Shape(dims)
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Shape {
        Shape(dims.to_vec())
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
