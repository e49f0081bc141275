//! Composite functions built from primitives (they need no derivative rules).

use rlx_core::Shape;

use crate::tensor::Tensor;

/// `dims` with every axis in `axes` set to 1 (NumPy's `keepdims`).
fn keep_dims(shape: &Shape, axes: &[usize]) -> Shape {
    Shape::new(
        shape
            .dims()
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
            .collect::<Vec<_>>(),
    )
}

impl Tensor {
    /// Inner product `Σ aᵢ bᵢ` over all elements (after broadcasting), a 0-d
    /// tensor. Use [`Tensor::matmul`] for matrix products.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    /// assert_eq!(a.dot(&a).item::<f64>().unwrap(), 14.0);
    /// ```
    #[track_caller]
    pub fn dot(&self, other: &Tensor) -> Tensor {
        self.mul(other).sum_all()
    }

    /// Euclidean (Frobenius) norm `sqrt(Σ xᵢ²)` over all elements, a 0-d
    /// tensor, computed as `m sqrt(Σ (xᵢ/m)²)` with `m = max |xᵢ|` (as
    /// LAPACK's `dnrm2`), so that the squares neither overflow nor
    /// underflow: the norm of `[1e200, 1e200]` is `1.41e200`, not `∞`.
    /// Relative error at most about `(n/2 + 2) u` for `n` elements (`u`
    /// the unit roundoff); `∞` if an element is infinite and none is NaN,
    /// NaN if one is NaN; 0 for an empty tensor.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let v = Tensor::from_slice(&[3.0f64, 4.0], [2]);
    /// assert_eq!(v.norm().item::<f64>().unwrap(), 5.0);
    /// let big = Tensor::from_slice(&[3e300f64, 4e300], [2]).norm();
    /// assert!((big.item::<f64>().unwrap() - 5e300).abs() <= 2e285);
    /// ```
    #[track_caller]
    pub fn norm(&self) -> Tensor {
        let m = self.abs().max_all();
        let scaled = self.div(&m).square().sum_all().sqrt() * &m;
        // m = 0 (all zeros) and m = ∞ make 0/0 and ∞/∞ above; the norm is
        // m. An empty tensor's maximum is -∞, its norm 0.
        let exact = m.eq_scalar(0.0).or(&m.eq_scalar(f64::INFINITY));
        let empty = m.eq_scalar(f64::NEG_INFINITY);
        let norm = exact.select(&m, &scaled);
        empty.select(&m.scalar_like(0.0), &norm)
    }

    /// Population variance (`ddof = 0`, as NumPy and JAX default) over
    /// `axes`: `mean((x - mean(x))²)`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let x = Tensor::from_slice(&[1.0f64, 3.0, 2.0, 2.0], [2, 2]);
    /// assert_eq!(x.var(&[1]).to_vec::<f64>().unwrap(), vec![1.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn var(&self, axes: &[usize]) -> Tensor {
        let keep = keep_dims(self.shape(), axes);
        let centred = self.sub(&self.mean(axes).reshape(keep));
        centred.square().mean(axes)
    }

    /// Normalises along `axis` to zero mean and unit variance:
    /// `(x - mean) / sqrt(var + eps)` (no learned scale or shift; multiply
    /// and add those yourself). The axis comes last, as in every method
    /// that takes one.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[1.0f64, 3.0], [1, 2]).layer_norm(0.0, 1);
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![-1.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn layer_norm(&self, eps: f64, axis: usize) -> Tensor {
        let keep = keep_dims(self.shape(), &[axis]);
        let centred = self.sub(&self.mean(&[axis]).reshape(keep.clone()));
        let var = centred.square().mean(&[axis]).reshape(keep);
        centred.mul(&var.add_scalar(eps).rsqrt())
    }

    /// Mean cross-entropy of `labels` (one-hot or any probabilities) under
    /// the softmax of `logits`, classes along the last axis:
    /// `-mean_batch Σ_c labels[.., c] · log_softmax(logits)[.., c]`. A 0-d
    /// tensor. Callable as `Tensor::cross_entropy_with_logits(&logits, &labels)`
    /// or `logits.cross_entropy_with_logits(&labels)`.
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let logits = Tensor::from_slice(&[0.0f64, 0.0], [1, 2]);
    /// let labels = Tensor::from_slice(&[1.0f64, 0.0], [1, 2]);
    /// let l = Tensor::cross_entropy_with_logits(&logits, &labels);
    /// assert!((l.item::<f64>().unwrap() - std::f64::consts::LN_2).abs() < 1e-15);
    /// ```
    #[track_caller]
    pub fn cross_entropy_with_logits(&self, labels: &Tensor) -> Tensor {
        let classes = self.rank().saturating_sub(1);
        let per_item = labels.mul(&self.log_softmax(classes)).sum(&[classes]);
        per_item.mean_all().neg()
    }

    /// Limits every element to `[lo, hi]` (`max(lo, min(x, hi))`).
    ///
    /// ```
    /// # use rlx::Tensor;
    /// let y = Tensor::from_slice(&[-2.0f64, 0.5, 2.0], [3]).clamp(-1.0, 1.0);
    /// assert_eq!(y.to_vec::<f64>().unwrap(), vec![-1.0, 0.5, 1.0]);
    /// ```
    #[track_caller]
    pub fn clamp(&self, lo: f64, hi: f64) -> Tensor {
        self.minimum_scalar(hi).maximum_scalar(lo)
    }
}
