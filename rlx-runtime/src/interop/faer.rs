//! `faer::Mat` ↔ `[rows, cols]` and `faer::Col` ↔ `[n]` (feature `faer`).
//! faer stores columns with a stride of its own, so the elements are copied
//! both ways.
//!
//! ```
//! use faer::{Col, Mat};
//! use rlx::Tensor;
//! let m = Mat::from_fn(2, 3, |i, j| (10 * i + j) as f64);
//! let t = Tensor::from(&m);
//! assert_eq!(t.to_vec::<f64>().unwrap(), vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
//! assert_eq!(Mat::<f64>::try_from(&t).unwrap(), m);
//! let c = Col::from_fn(3, |i| i as f64);
//! assert_eq!(Col::<f64>::try_from(&Tensor::from(&c)).unwrap(), c);
//! ```

use faer::{Col, ColRef, Mat, MatRef};
use rlx_core::{Error, Result};

use super::check;
use crate::storage::Element;
use crate::tensor::Tensor;

impl<T: Element> From<MatRef<'_, T>> for Tensor {
    fn from(m: MatRef<'_, T>) -> Tensor {
        let (r, c) = (m.nrows(), m.ncols());
        let mut v = Vec::with_capacity(r * c);
        for i in 0..r {
            v.extend((0..c).map(|j| m[(i, j)]));
        }
        Tensor::from_vec(v, [r, c])
    }
}

impl<T: Element> From<&Mat<T>> for Tensor {
    fn from(m: &Mat<T>) -> Tensor {
        Tensor::from(m.as_ref())
    }
}

impl<T: Element> From<Mat<T>> for Tensor {
    fn from(m: Mat<T>) -> Tensor {
        Tensor::from(m.as_ref())
    }
}

impl<T: Element> From<ColRef<'_, T>> for Tensor {
    fn from(c: ColRef<'_, T>) -> Tensor {
        let v: Vec<T> = (0..c.nrows()).map(|i| c[i]).collect();
        Tensor::from_vec(v, [c.nrows()])
    }
}

impl<T: Element> From<&Col<T>> for Tensor {
    fn from(c: &Col<T>) -> Tensor {
        Tensor::from(c.as_ref())
    }
}

impl<T: Element> From<Col<T>> for Tensor {
    fn from(c: Col<T>) -> Tensor {
        Tensor::from(c.as_ref())
    }
}

impl<T: Element> TryFrom<&Tensor> for Mat<T> {
    type Error = Error;
    fn try_from(t: &Tensor) -> Result<Self> {
        check::<T>(t, Some(2), "a faer `Mat`")?;
        let (d, s) = (t.shape().dims(), t.as_slice::<T>()?);
        let c = d[1];
        Ok(Mat::from_fn(d[0], c, |i, j| s[i * c + j]))
    }
}

impl<T: Element> TryFrom<&Tensor> for Col<T> {
    type Error = Error;
    fn try_from(t: &Tensor) -> Result<Self> {
        check::<T>(t, Some(1), "a faer `Col`")?;
        let s = t.as_slice::<T>()?;
        Ok(Col::from_fn(s.len(), |i| s[i]))
    }
}
