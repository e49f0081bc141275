//! Typed, contiguous, row-major element storage: one `Vec` per dtype.
//!
//! [`Element`] ties a Rust type to its [`DType`] and to the `Storage` variant
//! that holds it; generic code (`Tensor::from_slice::<T>`, `to_vec::<T>`)
//! dispatches through it.

use half::{bf16, f16};
use num_complex::Complex;
use rlx_core::{DType, Error, Shape};

/// The element type of [`DType::C32`] tensors: faer's `c32`.
pub type C32 = Complex<f32>;
/// The element type of [`DType::C64`] tensors: faer's `c64`.
pub type C64 = Complex<f64>;

/// Values of one dtype, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    /// `f32` values.
    F32(Vec<f32>),
    /// `f64` values.
    F64(Vec<f64>),
    /// `f16` values (computed in `f32`).
    F16(Vec<f16>),
    /// `bf16` values (computed in `f32`).
    BF16(Vec<bf16>),
    /// `i64` values.
    I64(Vec<i64>),
    /// `bool` values.
    Bool(Vec<bool>),
    /// Complex `f32` values (faer's `c32`).
    C32(Vec<Complex<f32>>),
    /// Complex `f64` values (faer's `c64`).
    C64(Vec<Complex<f64>>),
}

/// Which cache [`Storage::prefetch`] asks to hold elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cache {
    /// The first-level cache: for data read in the next few hundred cycles.
    L1,
    /// The second-level cache: for data read after a longer computation.
    L2,
}

impl Storage {
    /// Asks `cache` to fetch elements `from..from + n` (a hint: nothing is
    /// read or written, and the part of the range past the end is cut), so
    /// that reading them later does not wait for memory.
    #[inline]
    pub(crate) fn prefetch(&self, from: usize, n: usize, cache: Cache) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
            let (ptr, len, size) = match self {
                Storage::F32(v) => (v.as_ptr().cast::<i8>(), v.len(), 4),
                Storage::F64(v) => (v.as_ptr().cast::<i8>(), v.len(), 8),
                Storage::I64(v) => (v.as_ptr().cast::<i8>(), v.len(), 8),
                Storage::F16(v) => (v.as_ptr().cast::<i8>(), v.len(), 2),
                Storage::BF16(v) => (v.as_ptr().cast::<i8>(), v.len(), 2),
                Storage::Bool(v) => (v.as_ptr().cast::<i8>(), v.len(), 1),
                Storage::C32(v) => (v.as_ptr().cast::<i8>(), v.len(), 8),
                Storage::C64(v) => (v.as_ptr().cast::<i8>(), v.len(), 16),
            };
            let end = from.saturating_add(n).min(len) * size;
            let mut at = from.min(len) * size;
            while at < end {
                let p = ptr.wrapping_add(at);
                // SAFETY: SSE is part of the x86_64 baseline; a prefetch is
                // a hint that never faults and never changes a value, and
                // the address is inside the storage (`at < end ≤ len·size`).
                unsafe {
                    match cache {
                        Cache::L1 => _mm_prefetch::<_MM_HINT_T0>(p),
                        Cache::L2 => _mm_prefetch::<_MM_HINT_T1>(p),
                    }
                }
                at += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (from, n, cache);
    }

    /// The dtype held.
    #[inline]
    pub fn dtype(&self) -> DType {
        match self {
            Storage::F32(_) => DType::F32,
            Storage::F64(_) => DType::F64,
            Storage::F16(_) => DType::F16,
            Storage::BF16(_) => DType::BF16,
            Storage::I64(_) => DType::I64,
            Storage::Bool(_) => DType::Bool,
            Storage::C32(_) => DType::C32,
            Storage::C64(_) => DType::C64,
        }
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Storage::F32(v) => v.len(),
            Storage::F64(v) => v.len(),
            Storage::F16(v) => v.len(),
            Storage::BF16(v) => v.len(),
            Storage::I64(v) => v.len(),
            Storage::Bool(v) => v.len(),
            Storage::C32(v) => v.len(),
            Storage::C64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `len` zeros (false for `Bool`) of `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> Storage {
        let s = Storage::full(dtype, len, 0.0);
        s.advise_huge();
        s
    }

    /// Advises huge pages for a large fresh buffer (see `pages`).
    fn advise_huge(&self) {
        use crate::pages::advise_huge as a;
        match self {
            Storage::F32(v) => a(v),
            Storage::F64(v) => a(v),
            Storage::F16(v) => a(v),
            Storage::BF16(v) => a(v),
            Storage::I64(v) => a(v),
            Storage::Bool(v) => a(v),
            Storage::C32(v) => a(v),
            Storage::C64(v) => a(v),
        }
    }

    /// `len` copies of `value` converted to `dtype` (non-zero is `true` for `Bool`).
    pub fn full(dtype: DType, len: usize, value: f64) -> Storage {
        match dtype {
            DType::F32 => Storage::F32(vec![value as f32; len]),
            DType::F64 => Storage::F64(vec![value; len]),
            DType::F16 => Storage::F16(vec![f16::from_f64(value); len]),
            DType::BF16 => Storage::BF16(vec![bf16::from_f64(value); len]),
            DType::I64 => Storage::I64(vec![value as i64; len]),
            DType::Bool => Storage::Bool(vec![value != 0.0; len]),
            DType::C32 => Storage::C32(vec![Complex::new(value as f32, 0.0); len]),
            DType::C64 => Storage::C64(vec![Complex::new(value, 0.0); len]),
        }
    }

    /// [`Storage::full`] that returns an error instead of aborting when the
    /// allocator refuses the memory.
    ///
    /// ```
    /// use rlx::{DType, runtime::Storage};
    /// assert_eq!(Storage::try_full(DType::F32, 2, 1.5).unwrap(), Storage::F32(vec![1.5, 1.5]));
    /// assert!(Storage::try_full(DType::F64, usize::MAX / 8, 0.0).is_err());
    /// ```
    pub fn try_full(
        dtype: DType,
        len: usize,
        value: f64,
    ) -> Result<Storage, std::collections::TryReserveError> {
        Ok(match dtype {
            DType::F32 => Storage::F32(try_filled(len, value as f32)?),
            DType::F64 => Storage::F64(try_filled(len, value)?),
            DType::F16 => Storage::F16(try_filled(len, f16::from_f64(value))?),
            DType::BF16 => Storage::BF16(try_filled(len, bf16::from_f64(value))?),
            DType::I64 => Storage::I64(try_filled(len, value as i64)?),
            DType::Bool => Storage::Bool(try_filled(len, value != 0.0)?),
            DType::C32 => Storage::C32(try_filled(len, Complex::new(value as f32, 0.0))?),
            DType::C64 => Storage::C64(try_filled(len, Complex::new(value, 0.0))?),
        })
    }

    /// `len` zeros of `dtype` from the allocator's zeroed memory, or `None`
    /// when the allocator refuses it. Unlike [`Storage::try_full`], which
    /// writes every element, a large buffer comes from pages the system
    /// zeroes on first touch: nothing is written before a step writes it
    /// (a loop's packed residuals, tens of megabytes, cost nothing until
    /// the loop fills them). A buffer of at least 4 MiB is advised to take
    /// huge pages where the system offers them (Linux), so that filling it
    /// faults once per 2 MiB instead of once per 4 KiB.
    ///
    /// ```
    /// use rlx::{DType, runtime::Storage};
    /// assert_eq!(Storage::try_zeroed(DType::F64, 2), Some(Storage::F64(vec![0.0, 0.0])));
    /// assert!(Storage::try_zeroed(DType::F32, usize::MAX / 2).is_none());
    /// ```
    pub fn try_zeroed(dtype: DType, len: usize) -> Option<Storage> {
        use bytemuck::allocation::try_zeroed_vec as z;
        let s = match dtype {
            DType::F32 => Storage::F32(z(len).ok()?),
            DType::F64 => Storage::F64(z(len).ok()?),
            DType::F16 => Storage::F16(z(len).ok()?),
            DType::BF16 => Storage::BF16(z(len).ok()?),
            DType::I64 => Storage::I64(z(len).ok()?),
            DType::Bool => Storage::Bool(z(len).ok()?),
            DType::C32 => Storage::C32(z(len).ok()?),
            DType::C64 => Storage::C64(z(len).ok()?),
        };
        s.advise_huge();
        Some(s)
    }

    /// Elements the storage holds without reallocating.
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Storage::F32(v) => v.capacity(),
            Storage::F64(v) => v.capacity(),
            Storage::F16(v) => v.capacity(),
            Storage::BF16(v) => v.capacity(),
            Storage::I64(v) => v.capacity(),
            Storage::Bool(v) => v.capacity(),
            Storage::C32(v) => v.capacity(),
            Storage::C64(v) => v.capacity(),
        }
    }

    /// Empties the storage and makes room for `n` elements without
    /// writing any (the allocator's refusal is an error): a fresh output
    /// that a step then writes whole into its spare room, followed by
    /// [`Storage::set_written`].
    pub(crate) fn try_room(&mut self, n: usize) -> Result<(), std::collections::TryReserveError> {
        fn go<T>(v: &mut Vec<T>, n: usize) -> Result<(), std::collections::TryReserveError> {
            v.clear();
            v.try_reserve_exact(n)
        }
        match self {
            Storage::F32(v) => go(v, n),
            Storage::F64(v) => go(v, n),
            Storage::F16(v) => go(v, n),
            Storage::BF16(v) => go(v, n),
            Storage::I64(v) => go(v, n),
            Storage::Bool(v) => go(v, n),
            Storage::C32(v) => go(v, n),
            Storage::C64(v) => go(v, n),
        }
    }

    /// Takes the first `n` elements of the spare room of an empty storage
    /// as its elements.
    ///
    /// # Safety
    /// The storage holds no elements, has room for `n`, and all `n` have
    /// been written (with valid values of the type: `bool`s are 0 or 1).
    pub(crate) unsafe fn set_written(&mut self, n: usize) {
        /// # Safety
        /// As for `set_written`.
        unsafe fn go<T>(v: &mut Vec<T>, n: usize) {
            debug_assert!(v.is_empty() && v.capacity() >= n);
            // SAFETY: the caller's promise.
            unsafe { v.set_len(n) }
        }
        // SAFETY: the caller's promise.
        unsafe {
            match self {
                Storage::F32(v) => go(v, n),
                Storage::F64(v) => go(v, n),
                Storage::F16(v) => go(v, n),
                Storage::BF16(v) => go(v, n),
                Storage::I64(v) => go(v, n),
                Storage::Bool(v) => go(v, n),
                Storage::C32(v) => go(v, n),
                Storage::C64(v) => go(v, n),
            }
        }
    }

    /// A copy, or an error instead of an abort when the allocator refuses
    /// the memory.
    ///
    /// ```
    /// use rlx::runtime::Storage;
    /// let s = Storage::F64(vec![1.0, 2.0]);
    /// assert_eq!(s.try_clone().unwrap(), s);
    /// ```
    pub fn try_clone(&self) -> Result<Storage, std::collections::TryReserveError> {
        Ok(match self {
            Storage::F32(v) => Storage::F32(try_copy(v)?),
            Storage::F64(v) => Storage::F64(try_copy(v)?),
            Storage::F16(v) => Storage::F16(try_copy(v)?),
            Storage::BF16(v) => Storage::BF16(try_copy(v)?),
            Storage::I64(v) => Storage::I64(try_copy(v)?),
            Storage::Bool(v) => Storage::Bool(try_copy(v)?),
            Storage::C32(v) => Storage::C32(try_copy(v)?),
            Storage::C64(v) => Storage::C64(try_copy(v)?),
        })
    }

    /// Grows or shrinks to `n` elements (new ones zero), returning an error
    /// instead of aborting when the allocator refuses the memory. Within the
    /// capacity it never allocates.
    pub fn try_resize(&mut self, n: usize) -> Result<(), std::collections::TryReserveError> {
        fn go<T: Copy>(
            v: &mut Vec<T>,
            n: usize,
            zero: T,
        ) -> Result<(), std::collections::TryReserveError> {
            v.try_reserve_exact(n.saturating_sub(v.len()))?;
            v.resize(n, zero);
            Ok(())
        }
        match self {
            Storage::F32(v) => go(v, n, 0.0),
            Storage::F64(v) => go(v, n, 0.0),
            Storage::F16(v) => go(v, n, f16::ZERO),
            Storage::BF16(v) => go(v, n, bf16::ZERO),
            Storage::I64(v) => go(v, n, 0),
            Storage::Bool(v) => go(v, n, false),
            Storage::C32(v) => go(v, n, Complex::new(0.0, 0.0)),
            Storage::C64(v) => go(v, n, Complex::new(0.0, 0.0)),
        }
    }

    /// Element `i` converted to `f64` (`true` is 1; a complex element
    /// gives its real part, as an explicit cast does).
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Storage::F32(v) => v[i] as f64,
            Storage::F64(v) => v[i],
            Storage::F16(v) => v[i].to_f64(),
            Storage::BF16(v) => v[i].to_f64(),
            Storage::I64(v) => v[i] as f64,
            Storage::Bool(v) => v[i] as u8 as f64,
            Storage::C32(v) => v[i].re as f64,
            Storage::C64(v) => v[i].re,
        }
    }

    /// All elements converted to `f64`.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get_f64(i)).collect()
    }

    /// Values from `f64`s converted to `dtype`.
    pub fn from_f64(dtype: DType, values: impl IntoIterator<Item = f64>) -> Storage {
        let it = values.into_iter();
        match dtype {
            DType::F32 => Storage::F32(it.map(|v| v as f32).collect()),
            DType::F64 => Storage::F64(it.collect()),
            DType::F16 => Storage::F16(it.map(f16::from_f64).collect()),
            DType::BF16 => Storage::BF16(it.map(bf16::from_f64).collect()),
            DType::I64 => Storage::I64(it.map(|v| v as i64).collect()),
            DType::Bool => Storage::Bool(it.map(|v| v != 0.0).collect()),
            DType::C32 => Storage::C32(it.map(|v| Complex::new(v as f32, 0.0)).collect()),
            DType::C64 => Storage::C64(it.map(|v| Complex::new(v, 0.0)).collect()),
        }
    }
}

/// Element counts up to this are allocated infallibly by [`allocate`].
const SMALL_ALLOCATION: usize = 64;

/// The values of a new tensor of `shape` and `dtype`, every element
/// `value`: the size is checked ([`Shape::check_size`]) and the allocation
/// fallible, so neither an overflowing shape nor one too large for memory
/// panics or aborts. Every allocation sized by a user's shape goes here.
pub(crate) fn allocate(
    op: &'static str,
    shape: &Shape,
    dtype: DType,
    value: f64,
) -> rlx_core::Result<Storage> {
    shape.check_size(dtype, op, &[])?;
    let n = shape.numel();
    // A few elements: the plain allocation (a refusal of a few bytes
    // aborts, as any small allocation does); `try_reserve` takes a slower
    // path that an eager op on a 2-element tensor would notice.
    if n <= SMALL_ALLOCATION {
        return Ok(Storage::full(dtype, n, value));
    }
    // Zeros (of every dtype, all bits zero) from the allocator's zeroed
    // memory: a large result is not written twice (zeros, then the run's
    // values), and its pages are mapped as the run writes them, huge
    // where the system offers it (see `Storage::try_zeroed`).
    if value.to_bits() == 0 {
        return Storage::try_zeroed(dtype, n).ok_or_else(|| out_of_memory(op, shape, dtype));
    }
    Storage::try_full(dtype, n, value).map_err(|_| out_of_memory(op, shape, dtype))
}

/// A copy of `v`, or the allocator's refusal. Up to [`SMALL_ALLOCATION`]
/// elements the plain allocation, as in [`allocate`] (`try_reserve` takes
/// a slower path that `to_vec` or `from_slice` of 2 elements would notice).
pub(crate) fn try_copy<T: Copy>(v: &[T]) -> Result<Vec<T>, std::collections::TryReserveError> {
    if v.len() <= SMALL_ALLOCATION {
        return Ok(v.to_vec());
    }
    let mut out = Vec::new();
    out.try_reserve_exact(v.len())?;
    out.extend_from_slice(v);
    Ok(out)
}

/// The error for an allocation of a tensor of `shape` and `dtype` that the
/// allocator refused (the shape passed [`Shape::check_size`]).
#[cold]
pub(crate) fn out_of_memory(op: &'static str, shape: &Shape, dtype: DType) -> Error {
    Error::OutOfMemory {
        op,
        shape: shape.clone(),
        dtype,
        bytes: shape.numel().saturating_mul(dtype.size_in_bytes()),
    }
}

/// `len` copies of `value`, or the allocator's refusal.
fn try_filled<T: Clone>(len: usize, value: T) -> Result<Vec<T>, std::collections::TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)?;
    v.resize(len, value);
    Ok(v)
}

/// A Rust element type that a [`Storage`] can hold.
pub trait Element: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The matching dtype.
    const DTYPE: DType;
    /// Wraps a vector in its storage variant.
    fn into_storage(v: Vec<Self>) -> Storage;
    /// The slice, if `s` holds this type.
    fn slice(s: &Storage) -> Option<&[Self]>;
    /// The mutable vector, if `s` holds this type.
    fn vec_mut(s: &mut Storage) -> Option<&mut Vec<Self>>;
    /// Conversion from `f64` (used by constructors such as `full`; a
    /// complex element gets a zero imaginary part).
    fn from_f64(v: f64) -> Self;
    /// Conversion to `f64` (a complex element gives its real part, as an
    /// explicit cast does).
    fn to_f64(self) -> f64;
    /// Conversion to a `Complex<f64>` (a real element gets a zero
    /// imaginary part).
    fn to_c64(self) -> Complex<f64> {
        Complex::new(self.to_f64(), 0.0)
    }
    /// Conversion from a `Complex<f64>`: a complex element rounds each
    /// part, a real one takes the real part (an explicit cast).
    fn from_c64(v: Complex<f64>) -> Self {
        Self::from_f64(v.re)
    }
}

macro_rules! element {
    ($t:ty, $variant:ident, $from:expr, $to:expr $(, { $($extra:tt)* })?) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_storage(v: Vec<Self>) -> Storage {
                Storage::$variant(v)
            }
            fn slice(s: &Storage) -> Option<&[Self]> {
                match s {
                    Storage::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn vec_mut(s: &mut Storage) -> Option<&mut Vec<Self>> {
                match s {
                    Storage::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn from_f64(v: f64) -> Self {
                let f: fn(f64) -> $t = $from;
                f(v)
            }
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
            $($($extra)*)?
        }
    };
}

element!(f32, F32, |v| v as f32, |v| v as f64);
element!(f64, F64, |v| v, |v| v);
element!(f16, F16, f16::from_f64, f16::to_f64);
element!(bf16, BF16, bf16::from_f64, bf16::to_f64);
element!(i64, I64, |v| v as i64, |v| v as f64);
element!(bool, Bool, |v| v != 0.0, |v| v as u8 as f64);

element!(
    Complex<f32>,
    C32,
    |v| Complex::new(v as f32, 0.0),
    |v| v.re as f64,
    {
        fn to_c64(self) -> Complex<f64> {
            Complex::new(self.re as f64, self.im as f64)
        }
        fn from_c64(v: Complex<f64>) -> Self {
            Complex::new(v.re as f32, v.im as f32)
        }
    }
);
element!(Complex<f64>, C64, |v| Complex::new(v, 0.0), |v| v.re, {
    fn to_c64(self) -> Complex<f64> {
        self
    }
    fn from_c64(v: Complex<f64>) -> Self {
        v
    }
});
