//! Large zeroed buffers backed by huge pages where the system offers them.
//!
//! A buffer of tens of megabytes (a loop's stored residuals) comes from the
//! allocator as untouched pages, which the system zeroes and maps one at a
//! time on first touch: one page fault per 4 KiB. On Linux with
//! transparent huge pages in `madvise` mode (a common default), asking for
//! huge pages on such a buffer before it is touched makes that one fault
//! per 2 MiB. The zeroing is the same; the faults were most of the cost
//! (64 MiB touched page by page took 300 ms on a loaded 2-core machine, 50
//! to 80 ms with the advice). Nothing changes for the values.
//!
//! Only buffers of at least [`HUGE_FROM`] bytes are advised, and only the
//! part of them that covers whole 2 MiB pages; elsewhere, and on other
//! systems, [`advise_huge`] does nothing.

/// Bytes from which a fresh zeroed buffer is advised to take huge pages
/// (a few huge pages at least, so that rounding to them wastes little).
pub(crate) const HUGE_FROM: usize = 4 << 20;

/// Advises the system to back the whole 2 MiB pages inside `buf` with huge
/// pages (see the module docs). Call it before the buffer is first
/// written: pages already touched keep their size. A hint only: the
/// contents never change, and a refusal is ignored.
pub(crate) fn advise_huge<T>(buf: &[T]) {
    let bytes = std::mem::size_of_val(buf);
    if bytes < HUGE_FROM {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = buf.as_ptr() as usize;
        let from = start.next_multiple_of(HUGE);
        let to = (start + bytes) / HUGE * HUGE;
        if to > from {
            // SAFETY: `[from, to)` lies inside `buf`, memory this process
            // owns; MADV_HUGEPAGE changes how its pages are backed, never
            // their contents, and reports errors (ignored: a hint) instead
            // of faulting.
            unsafe {
                libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advised_buffers_keep_their_values() {
        let mut v = vec![0.0f64; (HUGE_FROM / 8) * 3 + 5];
        advise_huge(&v);
        assert!(v.iter().all(|&x| x == 0.0));
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as f64;
        }
        advise_huge(&v);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as f64));
        // Small buffers and empty ones are left alone.
        advise_huge(&[1.0f32; 16]);
        advise_huge::<f64>(&[]);
    }
}
