//! Scatter-adds whose indices are constants (a gradient through the
//! constant-index gathers of a rerolled loop, or of a sparse derivative):
//! the indices are checked against the axis once, when the plan is built,
//! and held as `u32`, so a call only copies the operand and adds the
//! updates. The additions are the reference kernel's, in its order
//! ([`crate::kernels::scatter_add_checked`]), so the bits are too. Indices
//! out of range never make such a step: that scatter-add stays a kernel
//! step, which reports the index on every call.

use std::sync::Arc;

use rlx_core::Result;

use crate::compile::base::env::{Env, Val};
use crate::kernels::{self, Order};
use crate::storage::Storage;

/// `out = operand`, then `updates` added in at the checked indices `idx`.
#[derive(Clone, Debug)]
pub(crate) struct ScatterStep {
    pub(crate) operand: Val,
    pub(crate) updates: Val,
    /// The indices, each in `0..split.1`.
    pub(crate) idx: Arc<[u32]>,
    /// What is known of the order of `idx` (sorted, or in parts touching
    /// disjoint elements), found here once.
    pub(crate) order: Order,
    /// The operand as `[outer, size, inner]` around the scattered axis.
    pub(crate) split: (usize, usize, usize),
    /// The operand is a float constant holding `+0.0` everywhere but `-0.0`
    /// exactly at the indices, which are distinct (a dense derivative
    /// block, see `rlx::core::autodiff::transforms::coloured`): the result
    /// is zeros with each update stored at its index, since `-0.0 + u` is
    /// `u` in IEEE arithmetic (NaN payloads aside). A fill and the stores,
    /// not a copy of the operand and the additions.
    pub(crate) onto_zeros: bool,
}

impl ScatterStep {
    /// The step of a scatter-add along the axis `split` is taken around,
    /// when every index (element `k` is `index(k)`, `count` of them) lies
    /// in `0..split.1`; `None` otherwise (the kernel step then reports it).
    /// `parts`: the leading dim of the indices' shape, the parts they may
    /// split into (see [`Order::Disjoint`] and [`Order::Apart`]).
    pub(crate) fn checked(
        (operand, updates): (Val, Val),
        split: (usize, usize, usize),
        count: usize,
        parts: usize,
        index: impl Fn(usize) -> i64,
    ) -> Option<ScatterStep> {
        let idx = checked_indices(count, split.1, index)?;
        Some(ScatterStep {
            operand,
            updates,
            order: Order::of(&idx, split.1, parts),
            idx,
            split,
            onto_zeros: false,
        })
    }

    /// Marks the step [`onto_zeros`](Self::onto_zeros) when the operand's
    /// elements (`value(k)`, `numel` of them, a float constant) are `-0.0`
    /// exactly at the indices, which are distinct, and `+0.0` elsewhere,
    /// along a vector (`outer = inner = 1`).
    pub(crate) fn onto_zeros_if(mut self, numel: usize, value: impl Fn(usize) -> f64) -> Self {
        if self.split.0 != 1 || self.split.2 != 1 || numel != self.split.1 {
            return self;
        }
        let mut negative = vec![false; numel];
        for &i in self.idx.iter() {
            if std::mem::replace(&mut negative[i as usize], true) {
                return self; // an index twice: the updates add up
            }
        }
        let zero = |k: usize, neg: bool| {
            let v = value(k);
            v == 0.0 && v.is_sign_negative() == neg
        };
        self.onto_zeros = negative.iter().enumerate().all(|(k, &neg)| zero(k, neg));
        self
    }

    pub(crate) fn run(&self, env: &Env<'_>, out: &mut Storage) -> Result<()> {
        let (x, u) = (env.get(self.operand), env.get(self.updates));
        if self.onto_zeros {
            match (u, &mut *out) {
                (Storage::F64(u), Storage::F64(o)) => {
                    store(&self.idx, u, o, 0.0);
                    return Ok(());
                }
                (Storage::F32(u), Storage::F32(o)) => {
                    store(&self.idx, u, o, 0.0);
                    return Ok(());
                }
                // Other dtypes are never marked; the general kernel reports them.
                _ => {}
            }
        }
        kernels::scatter_add_checked(self.split, self.order, &self.idx, x, u, out)
    }
}

/// `o` filled with `zero`, then `u[k]` stored at `idx[k]`.
fn store<T: Copy>(idx: &[u32], u: &[T], o: &mut [T], zero: T) {
    o.fill(zero);
    for (&i, &v) in idx.iter().zip(u) {
        o[i as usize] = v;
    }
}

/// The indices as `u32` when every one (element `k` is `index(k)`) lies in
/// `0..size` and `size` fits in `u32`; `None` otherwise.
pub(crate) fn checked_indices(
    count: usize,
    size: usize,
    index: impl Fn(usize) -> i64,
) -> Option<Arc<[u32]>> {
    if size > u32::MAX as usize {
        return None;
    }
    (0..count)
        .map(|k| {
            let j = index(k);
            (j >= 0 && (j as u64) < size as u64).then_some(j as u32)
        })
        .collect::<Option<Vec<u32>>>()
        .map(Arc::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_of_checked_indices_is_found_once() {
        let step = |idx: &[i64], size: usize, parts: usize| {
            ScatterStep::checked((0, 1), (1, size, 1), idx.len(), parts, |k| idx[k])
                .map(|s| s.order)
        };
        assert_eq!(step(&[0, 0, 2, 3], 4, 2), Some(Order::Sorted));
        // Three coordinates of particles 0, 0, 1 and 2, 1, 0.
        let xyz: Vec<i64> = (0..3)
            .flat_map(|k| [0, 0, 3, 6, 3, 0].map(|i| i + k))
            .collect();
        assert_eq!(step(&xyz, 9, 3), Some(Order::Apart(3)));
        // The same particles in runs: 0, 0, 0, 1, 1, 2.
        let runs: Vec<i64> = (0..3)
            .flat_map(|k| [0, 0, 0, 3, 3, 6].map(|i| i + k))
            .collect();
        assert_eq!(step(&runs, 9, 3), Some(Order::Disjoint(3)));
        // Element 1 in both halves; parts not dividing the count; one part.
        assert_eq!(step(&[1, 0, 2, 1], 3, 2), Some(Order::Any));
        assert_eq!(step(&[1, 0, 2, 1, 0], 3, 2), Some(Order::Any));
        assert_eq!(step(&[1, 0], 3, 1), Some(Order::Any));
        // An index out of range makes no step.
        assert_eq!(step(&[1, 3], 3, 1), None);
        assert_eq!(step(&[-1, 0], 3, 1), None);
    }
}
