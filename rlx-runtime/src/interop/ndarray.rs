//! ndarray arrays of any rank (`ArrayD`, `Array1`, `Array2`, ...) ↔ tensors
//! of the same shape (feature `ndarray`). An owned array in standard
//! (row-major, contiguous) layout moves its buffer in; other layouts and
//! views are copied in logical (row-major) order.
//!
//! ```
//! use ndarray::{array, Array2, ArrayD};
//! use rlx::Tensor;
//! let a = array![[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let t = Tensor::from(a.t()); // a transposed view: copied
//! assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
//! let t = Tensor::from(a.clone()); // moved
//! assert_eq!(Array2::<f64>::try_from(&t).unwrap(), a);
//! let d = ArrayD::<f64>::try_from(t).unwrap();
//! assert_eq!(d.shape(), &[2, 3]);
//! ```

use ndarray::{Array, ArrayBase, ArrayView, Data, Dimension, IxDyn};
use rlx_core::{Error, Result};

use super::check;
use crate::storage::Element;
use crate::tensor::Tensor;

impl<T: Element, D: Dimension> From<Array<T, D>> for Tensor {
    fn from(a: Array<T, D>) -> Tensor {
        let dims = a.shape().to_vec();
        let n = a.len();
        if !a.is_standard_layout() {
            return Tensor::from_vec(a.iter().copied().collect(), dims);
        }
        let (mut v, offset) = a.into_raw_vec_and_offset();
        let start = offset.unwrap_or(0);
        if start != 0 || v.len() != n {
            // A contiguous run inside a larger buffer.
            v = v[start..start + n].to_vec();
        }
        Tensor::from_vec(v, dims)
    }
}

impl<S: Data<Elem = T>, T: Element, D: Dimension> From<&ArrayBase<S, D>> for Tensor {
    fn from(a: &ArrayBase<S, D>) -> Tensor {
        let dims = a.shape().to_vec();
        match a.as_slice() {
            Some(s) => Tensor::from_slice(s, dims),
            None => Tensor::from_vec(a.iter().copied().collect(), dims),
        }
    }
}

impl<T: Element, D: Dimension> From<ArrayView<'_, T, D>> for Tensor {
    fn from(a: ArrayView<'_, T, D>) -> Tensor {
        Tensor::from(&a)
    }
}

/// `wanted` for an array of `D`: its rank if fixed.
fn wanted<D: Dimension>() -> (Option<usize>, String) {
    match D::NDIM {
        Some(r) => (Some(r), format!("an ndarray `Array` of rank {r}")),
        None => (None, "an ndarray `ArrayD`".to_string()),
    }
}

fn from_vec<T: Element, D: Dimension>(t: &Tensor, v: Vec<T>) -> Result<Array<T, D>> {
    let (_, what) = wanted::<D>();
    let a = Array::from_shape_vec(IxDyn(t.shape().dims()), v)
        .and_then(|a| a.into_dimensionality::<D>())
        .map_err(|e| Error::ReadMismatch {
            wanted: format!("{what} ({e})"),
            got: t.dtype(),
            shape: t.shape().clone(),
        })?;
    Ok(a)
}

impl<T: Element, D: Dimension> TryFrom<&Tensor> for Array<T, D> {
    type Error = Error;
    fn try_from(t: &Tensor) -> Result<Self> {
        let (rank, what) = wanted::<D>();
        check::<T>(t, rank, &what)?;
        from_vec(t, t.to_vec::<T>()?)
    }
}

impl<T: Element, D: Dimension> TryFrom<Tensor> for Array<T, D> {
    type Error = Error;
    fn try_from(t: Tensor) -> Result<Self> {
        let (rank, what) = wanted::<D>();
        check::<T>(&t, rank, &what)?;
        let shape = t.clone();
        from_vec(&shape, t.into_vec::<T>()?)
    }
}
