//! Conversions between [`Tensor`] and the array types of other crates,
//! each behind a cargo feature named after the crate: `nalgebra`
//! (`DVector`, `DMatrix`), `ndarray` (`ArrayD` and the fixed-rank arrays)
//! and `faer` (`Mat`, `Col`).
//!
//! Into a tensor, `From`: by value it moves the buffer when the layout is
//! already row-major and contiguous (a `DVector`, a standard-layout
//! ndarray array), and copies otherwise (column-major matrices); by
//! reference it copies. Back, `TryFrom<&Tensor>` copies, and
//! `TryFrom<Tensor>` moves the buffer when the layouts agree and the tensor
//! is its only owner. A dtype, rank or traced tensor that does not fit is an
//! [`Error::ReadMismatch`] naming the wanted type.
//!
//! The companions of `#[differentiable]` functions keep taking `&Tensor`:
//! convert at the call (`Tensor::from(&v)`), which keeps their signatures
//! free of generics and type inference unchanged.

#[cfg(feature = "faer")]
mod faer;
#[cfg(feature = "nalgebra")]
mod nalgebra;
#[cfg(feature = "ndarray")]
mod ndarray;

use rlx_core::{Error, Result};

use crate::storage::Element;
use crate::tensor::{Repr, Tensor};

impl Tensor {
    /// The values as a `Vec<T>`, moved out without a copy when this tensor
    /// is the only owner of its buffer (copied otherwise). Errors if the
    /// dtype is not `T`'s or the tensor is traced.
    ///
    /// ```
    /// use rlx::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f64, 2.0], [2]);
    /// assert_eq!(t.into_vec::<f64>().unwrap(), vec![1.0, 2.0]);
    /// ```
    pub fn into_vec<T: Element>(self) -> Result<Vec<T>> {
        self.as_slice::<T>()?;
        match self.repr {
            Repr::Concrete(c) => {
                let mut s = c.storage.into_storage();
                Ok(T::vec_mut(&mut s).map(std::mem::take).unwrap_or_default())
            }
            Repr::Traced(_) => unreachable!("as_slice refused a traced tensor"),
        }
    }
}

/// Checks that `t` holds concrete `T`s of rank `rank` (any rank if `None`)
/// for a conversion to `wanted`.
#[cfg_attr(
    not(any(feature = "nalgebra", feature = "ndarray", feature = "faer")),
    allow(dead_code)
)]
pub(crate) fn check<T: Element>(t: &Tensor, rank: Option<usize>, wanted: &str) -> Result<()> {
    let fits = !t.is_traced() && t.dtype() == T::DTYPE && rank.is_none_or(|r| t.rank() == r);
    if fits {
        return Ok(());
    }
    let rank = rank.map_or(String::new(), |r| format!("rank {r}, "));
    Err(Error::ReadMismatch {
        wanted: format!(
            "{wanted} ({rank}{}){}",
            T::DTYPE,
            if t.is_traced() {
                ": a traced tensor has no values; convert the companion's result instead"
            } else {
                ""
            }
        ),
        got: t.dtype(),
        shape: t.shape().clone(),
    })
}
