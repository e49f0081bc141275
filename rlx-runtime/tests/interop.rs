//! Conversions to and from nalgebra, ndarray and faer (one module per
//! feature): values and layouts, zero-copy moves where the layouts agree,
//! and the errors for a wrong dtype, rank or a traced tensor. Built with
//! any of the features (`cargo test --all-features`).
#![cfg(any(feature = "nalgebra", feature = "ndarray", feature = "faer"))]

use rlx_runtime::{Error, Tensor};

/// The message of a conversion error, checked to be a `ReadMismatch`.
fn mismatch(e: Error) -> String {
    assert!(matches!(e, Error::ReadMismatch { .. }), "{e:?}");
    e.to_string()
}

#[cfg(feature = "nalgebra")]
mod nalgebra_conversions {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    #[test]
    fn vectors_move_and_matrices_become_row_major() {
        let v = DVector::from_vec(vec![1.0f64, -2.0, 3.5]);
        let ptr = v.as_slice().as_ptr();
        let t = Tensor::from(v);
        assert_eq!(
            t.as_slice::<f64>().unwrap().as_ptr(),
            ptr,
            "moved, not copied"
        );
        let back = DVector::<f64>::try_from(t).unwrap();
        assert_eq!(back.as_slice().as_ptr(), ptr, "moved back");
        // column-major in, row-major tensor
        let m = DMatrix::from_column_slice(2, 3, &[1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let t = Tensor::from(&m);
        assert_eq!(t.shape().dims(), &[2, 3]);
        assert_eq!(
            t.to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(DMatrix::<f32>::try_from(&t).unwrap(), m);
        assert_eq!(DMatrix::<f32>::try_from(t).unwrap(), m);
    }

    #[test]
    fn a_wrong_dtype_or_rank_is_an_error_naming_the_type() {
        let t = Tensor::from_slice(&[1.0f64, 2.0, 3.0, 4.0], [2, 2]);
        let e = mismatch(DVector::<f64>::try_from(&t).unwrap_err());
        assert!(
            e.contains("DVector") && e.contains("rank 1") && e.contains("[2, 2]"),
            "{e}"
        );
        let e = mismatch(DMatrix::<f32>::try_from(&t).unwrap_err());
        assert!(e.contains("DMatrix") && e.contains("f32"), "{e}");
    }
}

#[cfg(feature = "ndarray")]
mod ndarray_conversions {
    use super::*;
    use ndarray::{array, s, Array1, Array2, Array3, ArrayD, IxDyn};

    #[test]
    fn standard_layout_arrays_move_other_layouts_copy() {
        let a = Array2::from_shape_fn((2, 3), |(i, j)| (10 * i + j) as f64);
        let ptr = a.as_ptr();
        let t = Tensor::from(a.clone());
        assert_eq!(t.shape().dims(), &[2, 3]);
        assert_eq!(
            t.to_vec::<f64>().unwrap(),
            vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
        );
        let moved = Tensor::from(a);
        assert_eq!(moved.as_slice::<f64>().unwrap().as_ptr(), ptr);
        // a transposed (column-major) array is copied in logical order
        let tr = array![[1.0f64, 2.0], [3.0, 4.0]].reversed_axes();
        assert_eq!(
            Tensor::from(tr).to_vec::<f64>().unwrap(),
            vec![1.0, 3.0, 2.0, 4.0]
        );
        // an owned array sliced in place keeps a buffer larger than itself
        let mut big = Array1::from_vec((0..6).map(f64::from).collect());
        big.slice_collapse(s![2..5]);
        assert_eq!(
            Tensor::from(big).to_vec::<f64>().unwrap(),
            vec![2.0, 3.0, 4.0]
        );
        // views and stepped views
        let base = Array1::from_vec((0..6).map(f64::from).collect());
        let stepped = base.slice(s![..;2]);
        assert_eq!(
            Tensor::from(stepped).to_vec::<f64>().unwrap(),
            vec![0.0, 2.0, 4.0]
        );
        // any rank, and back to fixed and dynamic rank
        let d = ArrayD::<i64>::zeros(IxDyn(&[2, 1, 2]));
        let t = Tensor::from(&d);
        assert_eq!(t.shape().dims(), &[2, 1, 2]);
        assert_eq!(Array3::<i64>::try_from(&t).unwrap().shape(), &[2, 1, 2]);
        let back = ArrayD::<i64>::try_from(t).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn a_wrong_rank_or_dtype_is_an_error() {
        let t = Tensor::from_slice(&[1.0f64, 2.0], [2]);
        let e = mismatch(Array2::<f64>::try_from(&t).unwrap_err());
        assert!(e.contains("rank 2") && e.contains("[2]"), "{e}");
        let e = mismatch(ArrayD::<f32>::try_from(&t).unwrap_err());
        assert!(e.contains("ArrayD") && e.contains("f32"), "{e}");
    }
}

#[cfg(feature = "faer")]
mod faer_conversions {
    use super::*;
    use faer::{Col, Mat};

    #[test]
    fn matrices_and_columns_round_trip() {
        let m = Mat::from_fn(3, 2, |i, j| i as f64 - 2.0 * j as f64);
        let t = Tensor::from(m.as_ref());
        assert_eq!(t.shape().dims(), &[3, 2]);
        assert_eq!(
            t.to_vec::<f64>().unwrap(),
            vec![0.0, -2.0, 1.0, -1.0, 2.0, 0.0]
        );
        assert_eq!(Mat::<f64>::try_from(&t).unwrap(), m);
        // a transposed view
        let tt = Tensor::from(m.as_ref().transpose());
        assert_eq!(tt.shape().dims(), &[2, 3]);
        assert_eq!(
            tt.to_vec::<f64>().unwrap(),
            vec![0.0, 1.0, 2.0, -2.0, -1.0, 0.0]
        );
        let c = Col::from_fn(4, |i| i as f32);
        let t = Tensor::from(c.clone());
        assert_eq!(Col::<f32>::try_from(&t).unwrap(), c);
    }

    #[test]
    fn a_wrong_rank_or_dtype_is_an_error() {
        let t = Tensor::from_slice(&[1.0f32, 2.0], [2]);
        let e = mismatch(Mat::<f32>::try_from(&t).unwrap_err());
        assert!(e.contains("Mat") && e.contains("rank 2"), "{e}");
        let e = mismatch(Col::<f64>::try_from(&t).unwrap_err());
        assert!(e.contains("Col") && e.contains("f64"), "{e}");
    }
}

#[test]
fn a_traced_tensor_cannot_be_converted() {
    let trace = rlx_runtime::trace::Trace::enter();
    let x = trace.input("x", [2], rlx_runtime::DType::F64);
    let e = x.clone().into_vec::<f64>().unwrap_err();
    assert!(e.to_string().contains("traced"), "{e}");
    #[cfg(feature = "nalgebra")]
    {
        let e = mismatch(nalgebra::DVector::<f64>::try_from(&x).unwrap_err());
        assert!(e.contains("traced tensor has no values"), "{e}");
    }
    drop(trace);
}
