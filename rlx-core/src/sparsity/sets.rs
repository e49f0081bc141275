//! [`Sets`]: one sorted set of column indices per element of a node, stored
//! flat (compressed-row form), and the index maps that say which operand
//! elements each output element reads.
//!
//! Invariant: set `k` is `idx[ptr[k]..ptr[k + 1]]`, strictly increasing.

/// Per element of a node, the input columns it depends on.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sets {
    pub(crate) ptr: Vec<usize>,
    pub(crate) idx: Vec<u32>,
}

impl Sets {
    /// An empty list (no elements yet), with room for `n` elements.
    pub(crate) fn with_capacity(n: usize) -> Sets {
        let mut ptr = Vec::with_capacity(n + 1);
        ptr.push(0);
        Sets {
            ptr,
            idx: Vec::new(),
        }
    }

    /// `n` elements, element `k` depending on column `offset + k` alone.
    pub(crate) fn identity(n: usize, offset: u32) -> Sets {
        Sets {
            ptr: (0..=n).collect(),
            idx: (0..n as u32).map(|k| offset + k).collect(),
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Element `k`'s set.
    pub(crate) fn get(&self, k: usize) -> &[u32] {
        &self.idx[self.ptr[k]..self.ptr[k + 1]]
    }

    /// Appends one element whose set is the union of `parts`.
    pub(crate) fn push_union<'a>(&mut self, parts: impl IntoIterator<Item = &'a [u32]>) {
        let start = self.idx.len();
        let mut sorted = true;
        for p in parts {
            if sorted && self.idx.len() > start && !p.is_empty() {
                sorted = *self.idx.last().expect("non-empty") < p[0];
            }
            self.idx.extend_from_slice(p);
        }
        if !sorted {
            let tail = &mut self.idx[start..];
            tail.sort_unstable();
            let mut w = 0;
            for r in 0..tail.len() {
                if r == 0 || tail[r] != tail[w - 1] {
                    tail[w] = tail[r];
                    w += 1;
                }
            }
            self.idx.truncate(start + w);
        }
        self.ptr.push(self.idx.len());
    }

    /// Appends a copy of element `k` of `other`.
    pub(crate) fn push_from(&mut self, other: &Sets, k: usize) {
        self.idx.extend_from_slice(other.get(k));
        self.ptr.push(self.idx.len());
    }

    /// The elements `map[k]` of `self`, in order.
    pub(crate) fn gather(&self, map: &[usize]) -> Sets {
        let mut out = Sets::with_capacity(map.len());
        for &k in map {
            out.push_from(self, k);
        }
        out
    }

    /// Whether every set is empty.
    pub(crate) fn all_empty(&self) -> bool {
        self.idx.is_empty()
    }
}

/// For each element of a row-major array of shape `dims`, the offset
/// `base + Σ_i index_i · strides[i]` (a stride of 0 repeats along that axis).
pub(crate) fn strided(dims: &[usize], strides: &[usize], base: usize) -> Vec<usize> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut index = vec![0usize; dims.len()];
    let mut off = base;
    for _ in 0..n {
        out.push(off);
        for a in (0..dims.len()).rev() {
            index[a] += 1;
            off += strides[a];
            if index[a] < dims[a] {
                break;
            }
            off -= strides[a] * dims[a];
            index[a] = 0;
        }
    }
    out
}

/// The strides with which an operand of shape `from` is read when it is
/// broadcast (NumPy rules) to `to`: 0 along broadcast axes.
fn broadcast_strides(from: &[usize], to: &[usize]) -> Vec<usize> {
    let lead = to.len() - from.len();
    let own = crate::Shape::new(from).strides();
    (0..to.len())
        .map(|a| match a.checked_sub(lead) {
            Some(i) if from[i] == to[a] && from[i] != 1 => own[i],
            _ => 0,
        })
        .collect()
}

/// For each element of `to`, the element of `from` it reads under NumPy
/// broadcasting.
pub(crate) fn broadcast_map(from: &[usize], to: &[usize]) -> Vec<usize> {
    strided(to, &broadcast_strides(from, to), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_sorts_and_merges() {
        let mut s = Sets::with_capacity(2);
        s.push_union([&[1u32, 4][..], &[0, 4, 9][..]]);
        s.push_union([&[2u32][..], &[3][..]]);
        assert_eq!(s.get(0), &[0, 1, 4, 9]);
        assert_eq!(s.get(1), &[2, 3]);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn broadcasting_and_strides() {
        assert_eq!(broadcast_map(&[3], &[2, 3]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(broadcast_map(&[2, 1], &[2, 3]), vec![0, 0, 0, 1, 1, 1]);
        // Transposing a 2 × 3 array: out[i, j] = in[j, i].
        assert_eq!(strided(&[3, 2], &[1, 3], 0), vec![0, 3, 1, 4, 2, 5]);
        assert!(strided(&[0, 2], &[2, 1], 0).is_empty());
    }
}
