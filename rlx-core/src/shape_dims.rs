//! [`Dims`]: how a [`Shape`](crate::Shape) holds its dimensions, in 24
//! bytes.
//!
//! Every concrete tensor carries a shape, and the warm call of a function
//! of small tensors returns its results by value: a `Tensor` of at most
//! 64 bytes is moved with a few 16-byte copies, and a pair of them (a
//! value and a gradient, 128 bytes) without a call to `memcpy`. With the
//! shape a 40-byte `SmallVec<[usize; 4]>` a tensor took 80 bytes and every
//! such pair was copied by `memcpy` (its 32- and 64-byte loads of the
//! narrow stores that had just built the result each waited for those
//! stores to reach the cache).
//!
//! So dimensions up to rank 2 are stored inline (every small tensor of
//! the warm paths: numbers, vectors, matrices), and longer lists are
//! shared behind an `Arc`: made once (one allocation), then cloned by
//! counting a reference, so that a shape of any rank is cloned without a
//! heap allocation (the warm call of a function of small tensors clones
//! each result's shape from its plan).

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The largest rank stored inline.
const INLINE: usize = 2;

/// The rank of an inline list. A word-sized enum of three values, so that
/// `Dims` keeps its variant in the word's other values: a list is three
/// words (the rank and two dimensions), cloned, compared and dropped by
/// word moves and compares, instead of a tag byte and a rank byte whose
/// padding the clone of a result's shape copied in odd-sized pieces.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Rank {
    R0 = 0,
    R1 = 1,
    R2 = 2,
}

/// The dimensions of a shape (see the module docs).
#[derive(Clone)]
pub(crate) enum Dims {
    /// The first `rank` of `dims`; the others are 0.
    Inline { rank: Rank, dims: [usize; INLINE] },
    /// More than [`INLINE`] dimensions.
    Shared(Arc<[usize]>),
}

impl Dims {
    /// The dimensions `dims`.
    #[inline]
    pub(crate) fn from_slice(dims: &[usize]) -> Dims {
        match *dims {
            [] => Dims::Inline {
                rank: Rank::R0,
                dims: [0; INLINE],
            },
            [a] => Dims::Inline {
                rank: Rank::R1,
                dims: [a, 0],
            },
            [a, b] => Dims::Inline {
                rank: Rank::R2,
                dims: [a, b],
            },
            _ => Dims::Shared(Arc::from(dims)),
        }
    }

    /// The dimensions, as a slice.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[usize] {
        match self {
            // `rank` is at most `INLINE`.
            Dims::Inline { rank, dims } => dims.get(..*rank as usize).unwrap_or_default(),
            Dims::Shared(dims) => dims,
        }
    }
}

impl Default for Dims {
    /// No dimensions (a 0-d shape).
    fn default() -> Dims {
        Dims::from_slice(&[])
    }
}

impl PartialEq for Dims {
    /// Equal dimensions. Two inline lists compare as their fields (every
    /// constructor sets the unused dimensions to 0): the check of a warm
    /// call's argument shape against its pinned one, with no slice made
    /// of either.
    #[inline(always)]
    fn eq(&self, other: &Dims) -> bool {
        match (self, other) {
            (Dims::Inline { rank: a, dims: x }, Dims::Inline { rank: b, dims: y }) => {
                a == b && x == y
            }
            _ => same_slices(self, other),
        }
    }
}

/// Whether `a` and `b` hold the same dimensions (one of them shared), out
/// of line: the inline comparison stays a few word compares.
#[inline(never)]
fn same_slices(a: &Dims, b: &Dims) -> bool {
    a.as_slice() == b.as_slice()
}

impl Eq for Dims {}

impl Hash for Dims {
    /// The hash of the dimensions as a slice (whichever way they are held).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialOrd for Dims {
    fn partial_cmp(&self, other: &Dims) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Dims {
    /// The order of the dimensions as slices.
    fn cmp(&self, other: &Dims) -> Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_round_trips_and_compares_as_its_slice() {
        let lists: Vec<Vec<usize>> = vec![
            vec![],
            vec![0],
            vec![7],
            vec![2, 3],
            vec![2, 3, 4],
            vec![1, 2, 3, 4],
            vec![5, 1, 1, 1, 6],
        ];
        for a in &lists {
            let d = Dims::from_slice(a);
            assert_eq!(d.as_slice(), &a[..]);
            assert_eq!(d.clone().as_slice(), &a[..]);
            assert_eq!(matches!(d, Dims::Inline { .. }), a.len() <= INLINE);
            for b in &lists {
                let e = Dims::from_slice(b);
                assert_eq!(d == e, a == b, "{a:?} {b:?}");
                assert_eq!(d.cmp(&e), a.cmp(b), "{a:?} {b:?}");
            }
        }
        assert_eq!(Dims::default().as_slice(), &[] as &[usize]);
    }

    #[test]
    fn a_shared_list_is_cloned_by_reference() {
        let d = Dims::from_slice(&[2, 3, 4]);
        let (Dims::Shared(a), Dims::Shared(b)) = (&d, &d.clone()) else {
            panic!("a rank-3 list is shared");
        };
        assert!(Arc::ptr_eq(a, b));
    }

    #[test]
    fn a_shape_takes_24_bytes() {
        assert_eq!(std::mem::size_of::<Dims>(), 24);
        assert_eq!(std::mem::size_of::<crate::Shape>(), 24);
    }
}
