//! Comparisons shared by the properties: closeness with a mixed tolerance,
//! inner products (the tests' common `dot`), and a Jacobian (or Hessian) row of blocks times vectors.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// What a property returns.
pub type Res = Result<(), TestCaseError>;

/// `|got - want| <= rtol (1 + |want|)`, NaN equal to NaN, inf to itself.
pub fn close(got: f64, want: f64, rtol: f64) -> bool {
    (got.is_nan() && want.is_nan())
        || got == want
        || (got - want).abs() <= rtol * (1.0 + want.abs())
}

/// [`close`] element by element; `what` names the comparison in a failure.
pub fn all_close(got: &[f64], want: &[f64], rtol: f64, what: &dyn std::fmt::Display) -> Res {
    prop_assert_eq!(got.len(), want.len(), "{}: lengths", what);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        prop_assert!(
            close(g, w, rtol),
            "{}: element {}: got {}, want {}",
            what,
            i,
            g,
            w
        );
    }
    Ok(())
}

pub use crate::common::dot;

/// `Σ_i B_i v_i` for row-major blocks `B_i` of shape `[rows, len(v_i)]`
/// (the blocks of a Jacobian `[out..., in_i...]`, flattened).
pub fn blocks_times(
    blocks: &[Vec<f64>],
    vs: &[Vec<f64>],
    rows: usize,
) -> Result<Vec<f64>, TestCaseError> {
    let mut out = vec![0.0; rows];
    for (b, v) in blocks.iter().zip(vs) {
        prop_assert_eq!(b.len(), rows * v.len(), "block size");
        for (r, o) in out.iter_mut().enumerate() {
            *o += dot(&b[r * v.len()..(r + 1) * v.len()], v);
        }
    }
    Ok(out)
}
