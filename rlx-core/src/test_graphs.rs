//! Graphs shared by the unit tests of several modules.

use crate::{DType, Graph};

/// `y_i = x_{i-1} - 2 x_i + x_{i+1} - exp(x_i)` with zero boundaries, built
/// with concat and slices (a tridiagonal Jacobian); output 1 is `Σ y²` (a
/// pentadiagonal Hessian).
pub(crate) fn tridiagonal(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", [n], DType::F64);
    let z = g.full([1], 0.0, DType::F64);
    let xp = g.concat(&[z, x, z], 0).unwrap();
    let l = g.slice_range(xp, 0..n, 0).unwrap();
    let r = g.slice_range(xp, 2..2 + n, 0).unwrap();
    let two = g.scalar(2.0, DType::F64);
    let x2 = g.mul(x, two).unwrap();
    let lap = g.sub(l, x2).unwrap();
    let lap = g.add(lap, r).unwrap();
    let e = g.exp(x).unwrap();
    let y = g.sub(lap, e).unwrap();
    let sq = g.square(y).unwrap();
    let s = g.sum_all(sq).unwrap();
    g.set_outputs(vec![y, s]);
    g
}
