//! Copies of a caller's numbers to the stack, for the paths that hand
//! them to code the compiler cannot see.

/// How many numbers [`on_copy`] copies to the stack.
pub(crate) const STACK_NUMBERS: usize = 64;

/// `f` run on a copy of `values`, on the stack when they are at most
/// [`STACK_NUMBERS`] (as many as the number path takes).
///
/// For numbers a caller holds in a local array, such as a companion's
/// arguments: once a reference to that array reaches code the compiler
/// cannot see (native code, a function not inlined) on any path, it keeps
/// the array in memory on every path, and reads it back after each atomic
/// load, even where only its elements are used (the direct call that takes
/// them in registers). Those paths go through a copy instead.
#[inline(always)]
pub(crate) fn on_copy<R>(values: &[f64], f: impl FnOnce(&[f64]) -> R) -> R {
    let n = values.len();
    if n > STACK_NUMBERS {
        // A heap copy, for the same reason (not `values` itself).
        let copy: Vec<f64> = values.to_vec();
        return f(&copy);
    }
    let mut stack = [std::mem::MaybeUninit::<f64>::uninit(); STACK_NUMBERS];
    // SAFETY: `n <= STACK_NUMBERS`: the first `n` slots of `stack` are
    // written from `values` (which cannot overlap a new local), then read
    // as `n` initialised `f64`s.
    let copy = unsafe {
        std::ptr::copy_nonoverlapping(values.as_ptr(), stack.as_mut_ptr().cast::<f64>(), n);
        std::slice::from_raw_parts(stack.as_ptr().cast::<f64>(), n)
    };
    f(copy)
}

#[cfg(test)]
mod tests {
    use super::{on_copy, STACK_NUMBERS};

    #[test]
    fn on_copy_passes_the_same_values_at_every_length() {
        for n in [0, 1, 6, STACK_NUMBERS, STACK_NUMBERS + 1, 3 * STACK_NUMBERS] {
            let values: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 3.0).collect();
            let seen = on_copy(&values, |copy| {
                assert_ne!(
                    copy.as_ptr(),
                    values.as_ptr(),
                    "a copy, not the caller's values"
                );
                copy.to_vec()
            });
            assert_eq!(seen, values, "{n} values");
        }
    }
}
