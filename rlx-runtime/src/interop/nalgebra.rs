//! `nalgebra::DVector` ↔ `[n]` and `nalgebra::DMatrix` ↔ `[rows, cols]`
//! (feature `nalgebra`). A `DVector` moves its buffer in and out; a
//! `DMatrix` is column-major, so its elements are copied in row-major order.
//!
//! ```
//! use nalgebra::{DMatrix, DVector};
//! use rlx::Tensor;
//! let v = DVector::from_vec(vec![1.0f64, 2.0]);
//! let t = Tensor::from(v);
//! assert_eq!(t.shape().dims(), &[2]);
//! let m = DMatrix::from_row_slice(2, 2, &[1.0f64, 2.0, 3.0, 4.0]);
//! let a = Tensor::from(&m);
//! assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
//! let back = DMatrix::<f64>::try_from(&a).unwrap();
//! assert_eq!(back, m);
//! assert!(DVector::<f32>::try_from(&t).is_err()); // f64 is not f32
//! ```

use nalgebra::{DMatrix, DVector, Scalar};
use rlx_core::{Error, Result};

use super::check;
use crate::storage::Element;
use crate::tensor::Tensor;

impl<T: Element + Scalar> From<DVector<T>> for Tensor {
    fn from(v: DVector<T>) -> Tensor {
        let n = v.len();
        let data: Vec<T> = v.data.into();
        Tensor::from_vec(data, [n])
    }
}

impl<T: Element + Scalar> From<&DVector<T>> for Tensor {
    fn from(v: &DVector<T>) -> Tensor {
        Tensor::from_slice(v.as_slice(), [v.len()])
    }
}

impl<T: Element + Scalar> From<&DMatrix<T>> for Tensor {
    fn from(m: &DMatrix<T>) -> Tensor {
        let (r, c) = m.shape();
        // The transpose's column-major buffer is `m` in row-major order.
        Tensor::from_slice(m.transpose().as_slice(), [r, c])
    }
}

impl<T: Element + Scalar> From<DMatrix<T>> for Tensor {
    fn from(m: DMatrix<T>) -> Tensor {
        Tensor::from(&m)
    }
}

impl<T: Element + Scalar> TryFrom<&Tensor> for DVector<T> {
    type Error = Error;
    fn try_from(t: &Tensor) -> Result<Self> {
        check::<T>(t, Some(1), "an nalgebra `DVector`")?;
        Ok(DVector::from_column_slice(t.as_slice::<T>()?))
    }
}

impl<T: Element + Scalar> TryFrom<Tensor> for DVector<T> {
    type Error = Error;
    fn try_from(t: Tensor) -> Result<Self> {
        check::<T>(&t, Some(1), "an nalgebra `DVector`")?;
        Ok(DVector::from_vec(t.into_vec::<T>()?))
    }
}

impl<T: Element + Scalar> TryFrom<&Tensor> for DMatrix<T> {
    type Error = Error;
    fn try_from(t: &Tensor) -> Result<Self> {
        check::<T>(t, Some(2), "an nalgebra `DMatrix`")?;
        let d = t.shape().dims();
        Ok(DMatrix::from_row_slice(d[0], d[1], t.as_slice::<T>()?))
    }
}

impl<T: Element + Scalar> TryFrom<Tensor> for DMatrix<T> {
    type Error = Error;
    fn try_from(t: Tensor) -> Result<Self> {
        DMatrix::try_from(&t)
    }
}
