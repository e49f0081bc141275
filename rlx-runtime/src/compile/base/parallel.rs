//! Threads for kernels over large tensors: the thread-count setting
//! ([`set_num_threads`], `RLX_NUM_THREADS`), a small persistent worker pool
//! that runs one borrowed closure over a handful of parts, and the
//! per-call scratch each part of a fused loop writes into (imports nothing
//! of `compile` but the register banks).
//!
//! A run hands the pool `&dyn Fn(usize)`: no job is boxed and no thread is
//! spawned per call, so a warm `run_into` still allocates nothing (the
//! workers are spawned once, the first time a large step runs). Work is
//! split only where each element's result does not depend on the split
//! (the fused loops, in ranges aligned to [`BLOCK`]), so every thread
//! count gives the same bits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, TryLockError};

use half::{bf16, f16};

use crate::compile::base::regs::{Registers, BLOCK};
use crate::storage::Storage;

/// Elements a part gets at least: below this a thread's wake-up costs
/// more than the work it takes over (a 16-block `f32` range is 64 KiB).
pub(crate) const MIN_PER_PART: usize = 16 * BLOCK;

/// The thread count set by [`set_num_threads`] or read from the
/// environment on first use; 0 until then.
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets how many threads (the caller included) kernels over large tensors
/// use; `0` restores the default: the `RLX_NUM_THREADS` environment
/// variable if it holds a positive number, else every core
/// ([`std::thread::available_parallelism`]). Results are bit-identical
/// for every count; only the speed changes.
///
/// ```
/// rlx::set_num_threads(1); // single-threaded
/// assert_eq!(rlx::num_threads(), 1);
/// rlx::set_num_threads(0); // back to the default
/// assert!(rlx::num_threads() >= 1);
/// ```
pub fn set_num_threads(n: usize) {
    THREADS.store(
        if n == 0 { default_threads() } else { n },
        Ordering::Relaxed,
    );
}

/// The number of threads kernels over large tensors use (see
/// [`set_num_threads`]).
///
/// ```
/// assert!(rlx::num_threads() >= 1);
/// ```
pub fn num_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => {
            let n = default_threads();
            // A concurrent `set_num_threads` wins over the default.
            let _ = THREADS.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed);
            THREADS.load(Ordering::Relaxed)
        }
        n => n,
    }
}

/// `RLX_NUM_THREADS` if it is a positive number, else the core count.
fn default_threads() -> usize {
    std::env::var("RLX_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How many parts to cut `numel` elements into: 1 below the threshold.
pub(crate) fn parts_for(numel: usize) -> usize {
    if numel < 2 * MIN_PER_PART {
        return 1;
    }
    num_threads().min(numel / MIN_PER_PART).max(1)
}

/// Elements `lo..hi` of part `p` of `parts`: whole blocks of [`BLOCK`]
/// elements dealt out evenly (the last part takes the ragged end).
pub(crate) fn part_range(numel: usize, parts: usize, p: usize) -> (usize, usize) {
    let blocks = numel.div_ceil(BLOCK);
    let b0 = blocks * p / parts;
    let b1 = blocks * (p + 1) / parts;
    ((b0 * BLOCK).min(numel), (b1 * BLOCK).min(numel))
}

/// A borrowed job with its lifetime erased; valid while the caller of
/// [`Pool::run`] waits for the job's parts to finish.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`, and the pointer is dereferenced only while
// the caller that owns the closure blocks in `Pool::run`.
unsafe impl Send for Job {}

/// The pool's shared state, all behind one lock (a job has a few parts,
/// so the lock is taken a few times per job).
struct Control {
    /// Bumped for each job, so sleeping workers know to look.
    generation: u64,
    job: Option<Job>,
    parts: usize,
    /// The next part nobody has claimed.
    next: usize,
    /// Parts claimed or not that have not finished.
    remaining: usize,
    panicked: bool,
    workers: usize,
}

struct Pool {
    /// Held by the one caller whose job the pool runs; a second caller
    /// (another thread, or a job started from inside a part) runs its
    /// parts itself instead of waiting.
    busy: Mutex<()>,
    control: Mutex<Control>,
    wake: Condvar,
    done: Condvar,
}

static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| Pool {
        busy: Mutex::new(()),
        control: Mutex::new(Control {
            generation: 0,
            job: None,
            parts: 0,
            next: 0,
            remaining: 0,
            panicked: false,
            workers: 0,
        }),
        wake: Condvar::new(),
        done: Condvar::new(),
    })
}

impl Pool {
    /// Claims and runs parts of the current job until none is left.
    /// Called with the control lock held; returns with it held.
    fn work<'a>(
        &'a self,
        mut c: std::sync::MutexGuard<'a, Control>,
    ) -> std::sync::MutexGuard<'a, Control> {
        while let (Some(job), true) = (c.job, c.next < c.parts) {
            let p = c.next;
            c.next += 1;
            drop(c);
            // SAFETY: the job's owner waits in `run` until `remaining`
            // reaches 0, which happens only after this part finishes.
            let f = unsafe { &*job.0 };
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(p))).is_ok();
            c = lock(&self.control);
            c.panicked |= !ok;
            c.remaining -= 1;
            if c.remaining == 0 {
                self.done.notify_all();
            }
        }
        c
    }

    fn worker(&'static self) {
        let mut seen = 0;
        let mut c = lock(&self.control);
        loop {
            while c.generation == seen {
                c = self.wake.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            seen = c.generation;
            c = self.work(c);
        }
    }

    /// Spawns workers until there are `n` (fewer if the system refuses).
    fn ensure_workers(&'static self, n: usize) {
        let mut c = lock(&self.control);
        while c.workers < n {
            let spawned = std::thread::Builder::new()
                .name("rlx-worker".into())
                .spawn(move || self.worker());
            if spawned.is_err() {
                break;
            }
            c.workers += 1;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f(0)`, …, `f(parts - 1)`, each exactly once, on the pool's
/// workers and the calling thread, and returns when all have finished. The
/// parts run on the caller alone when `parts` is 1 or the pool is busy
/// with another caller's job. A panic in a part is raised again here.
pub(crate) fn run(parts: usize, f: &(dyn Fn(usize) + Sync)) {
    let serial = || (0..parts).for_each(f);
    if parts <= 1 {
        return serial();
    }
    let pool = pool();
    // A poisoned lock only means an earlier job's part panicked (raised
    // to its caller); the pool itself is consistent.
    let _busy = match pool.busy.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return serial(),
    };
    pool.ensure_workers(parts - 1);
    // SAFETY: only the lifetime is erased; the pointer is cleared below
    // before `f`'s borrow ends, and no part runs after `remaining` is 0.
    let job = Job(unsafe {
        std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(f)
    });
    let mut c = lock(&pool.control);
    c.job = Some(job);
    c.parts = parts;
    c.next = 0;
    c.remaining = parts;
    c.panicked = false;
    c.generation += 1;
    pool.wake.notify_all();
    c = pool.work(c);
    while c.remaining > 0 {
        c = pool.done.wait(c).unwrap_or_else(|e| e.into_inner());
    }
    c.job = None;
    let panicked = c.panicked;
    drop(c);
    if panicked {
        panic!("a worker thread panicked running a kernel part");
    }
}

/// Runs `f(p, &mut items[p])` for every `p`, in parallel (see [`run`]).
pub(crate) fn for_each_mut<T: Send>(items: &mut [T], f: &(dyn Fn(usize, &mut T) + Sync)) {
    struct Base<T>(*mut T);
    // SAFETY: each index is handed to exactly one part (below).
    unsafe impl<T: Send> Sync for Base<T> {}
    let base = Base(items.as_mut_ptr());
    let n = items.len();
    let base = &base;
    run(n, &move |p| {
        assert!(p < n);
        // SAFETY: `run` calls each `p < n` exactly once, so the `&mut`s
        // are disjoint, and `items` stays borrowed until `run` returns.
        let item = unsafe { &mut *base.0.add(p) };
        f(p, item)
    });
}

/// Runs `f(p, chunk)` for each of `parts` consecutive chunks of `data`,
/// in parallel (see [`run`]): chunk `p` is `data[bounds(p)..bounds(p + 1)]`,
/// where `bounds` is non-decreasing with `bounds(0) = 0` and
/// `bounds(parts) ≤ data.len()`. The chunks are disjoint `&mut`s, so no
/// part can touch another's elements.
pub(crate) fn for_each_chunk_mut<T: Send>(
    data: &mut [T],
    parts: usize,
    bounds: &(dyn Fn(usize) -> usize + Sync),
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    struct Base<T>(*mut T, usize);
    // SAFETY: each part gets its own disjoint range (below).
    unsafe impl<T: Send> Sync for Base<T> {}
    let base = Base(data.as_mut_ptr(), data.len());
    let base = &base;
    run(parts, &move |p| {
        let (lo, hi) = (bounds(p), bounds(p + 1));
        assert!(lo <= hi && hi <= base.1, "chunk bounds out of order");
        // SAFETY: in bounds (checked); `run` calls each `p` once and the
        // ranges of distinct `p` are disjoint (non-decreasing bounds), and
        // `data` stays borrowed until `run` returns.
        let chunk = unsafe { window(base.0, base.1, lo, hi - lo) };
        f(p, chunk)
    });
}

/// A target storage's elements as a raw pointer and length, so that parts
/// running on several threads can each write their own disjoint range.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RawTarget {
    F32(*mut f32, usize),
    F64(*mut f64, usize),
    F16(*mut f16, usize),
    BF16(*mut bf16, usize),
    I64(*mut i64, usize),
    Bool(*mut bool, usize),
}

// SAFETY: a `RawTarget` is only turned into `&mut` slices of ranges that
// one part owns (see `window`), while its storage is borrowed mutably by
// the step that made it.
unsafe impl Send for RawTarget {}
unsafe impl Sync for RawTarget {}

impl RawTarget {
    pub(crate) fn of(s: &mut Storage) -> RawTarget {
        match s {
            Storage::F32(v) => RawTarget::F32(v.as_mut_ptr(), v.len()),
            Storage::F64(v) => RawTarget::F64(v.as_mut_ptr(), v.len()),
            Storage::F16(v) => RawTarget::F16(v.as_mut_ptr(), v.len()),
            Storage::BF16(v) => RawTarget::BF16(v.as_mut_ptr(), v.len()),
            Storage::I64(v) => RawTarget::I64(v.as_mut_ptr(), v.len()),
            Storage::Bool(v) => RawTarget::Bool(v.as_mut_ptr(), v.len()),
            Storage::C32(_) | Storage::C64(_) => {
                unreachable!("complex values run through kernel steps")
            }
        }
    }

    /// The first `n` elements of the spare room of `s`, which must hold
    /// no elements and have room for `n` (else a panic): memory that is
    /// not yet initialised, for a step that only writes it, through raw
    /// pointer writes, never through references or reads (a fresh
    /// output that a fused loop writes whole; see `fills`).
    pub(crate) fn spare(s: &mut Storage, n: usize) -> RawTarget {
        fn room<T>(v: &mut Vec<T>, n: usize) -> (*mut T, usize) {
            assert!(v.is_empty() && v.capacity() >= n, "a fresh target has room");
            // `MaybeUninit<T>` has the layout of `T`; the pointer is only
            // written through.
            (v.spare_capacity_mut().as_mut_ptr().cast::<T>(), n)
        }
        match s {
            Storage::F32(v) => {
                let (p, n) = room(v, n);
                RawTarget::F32(p, n)
            }
            Storage::F64(v) => {
                let (p, n) = room(v, n);
                RawTarget::F64(p, n)
            }
            Storage::F16(v) => {
                let (p, n) = room(v, n);
                RawTarget::F16(p, n)
            }
            Storage::BF16(v) => {
                let (p, n) = room(v, n);
                RawTarget::BF16(p, n)
            }
            Storage::I64(v) => {
                let (p, n) = room(v, n);
                RawTarget::I64(p, n)
            }
            Storage::Bool(v) => {
                let (p, n) = room(v, n);
                RawTarget::Bool(p, n)
            }
            Storage::C32(_) | Storage::C64(_) => {
                unreachable!("complex values run through kernel steps")
            }
        }
    }
}

/// Elements `start..start + n` of a target of `len` elements at `ptr`.
///
/// # Safety
/// `ptr` points to `len` live elements borrowed mutably by the caller's
/// step, and no other live reference covers `start..start + n`.
pub(crate) unsafe fn window<'a, T>(ptr: *mut T, len: usize, start: usize, n: usize) -> &'a mut [T] {
    assert!(
        start <= len && n <= len - start,
        "target window out of range"
    );
    // SAFETY: in bounds (checked) and unaliased (the caller's contract).
    unsafe { std::slice::from_raw_parts_mut(ptr.add(start), n) }
}

/// One part's fused-loop scratch: its registers and broadcast index.
#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) regs: Registers,
    pub(crate) idx: Vec<usize>,
}

/// Per-call scratch for threaded steps: one [`Lane`] per part (made the
/// first time a step is split that many ways, then reused) and the raw
/// views of the current step's targets.
#[derive(Debug)]
pub(crate) struct Scratch {
    counts: [usize; 4],
    rank: usize,
    pub(crate) lanes: Vec<Lane>,
    pub(crate) targets: Vec<RawTarget>,
}

impl Scratch {
    /// Scratch for lanes of `counts` registers per bank and broadcast
    /// rank up to `rank`, for steps of up to `max_targets` targets.
    pub(crate) fn new(counts: [usize; 4], rank: usize, max_targets: usize) -> Scratch {
        Scratch {
            counts,
            rank,
            lanes: Vec::new(),
            targets: Vec::with_capacity(max_targets),
        }
    }

    /// Makes sure there are at least `n` lanes.
    pub(crate) fn lanes(&mut self, n: usize) {
        while self.lanes.len() < n {
            self.lanes.push(Lane {
                regs: Registers::new(self.counts),
                idx: vec![0; self.rank],
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// The pool runs one caller's job at a time (others run serially):
    /// these tests take turns so that each gets the workers.
    static TURN: Mutex<()> = Mutex::new(());

    #[test]
    fn parts_cover_the_range_in_aligned_disjoint_pieces() {
        for numel in [1, BLOCK, 2 * MIN_PER_PART, 300 * 997, 10 * MIN_PER_PART + 5] {
            for parts in 1..=7 {
                let mut end = 0;
                for p in 0..parts {
                    let (lo, hi) = part_range(numel, parts, p);
                    assert_eq!(lo, end, "part {p} of {parts} over {numel}");
                    assert_eq!(lo % BLOCK, 0);
                    assert!(hi >= lo);
                    end = hi;
                }
                assert_eq!(end, numel);
            }
        }
    }

    #[test]
    fn every_part_runs_once_on_several_threads() {
        let _t = lock(&TURN);
        let hits: Vec<AtomicUsize> = (0..6).map(|_| AtomicUsize::new(0)).collect();
        let ids = Mutex::new(Vec::new());
        run(6, &|p| {
            hits[p].fetch_add(1, Ordering::Relaxed);
            // Long enough for the workers to wake and take parts.
            std::thread::sleep(std::time::Duration::from_millis(20));
            lock(&ids).push(std::thread::current().id());
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        let mut ids = ids.into_inner().unwrap();
        ids.sort_by_key(|id| format!("{id:?}"));
        ids.dedup();
        assert!(ids.len() > 1, "all parts ran on one thread");
        // Disjoint `&mut`s: every item is written by its own part.
        let mut items = vec![0usize; 5];
        for_each_mut(&mut items, &|p, x| *x = p * 10);
        assert_eq!(items, [0, 10, 20, 30, 40]);
    }

    #[test]
    fn a_panicking_part_is_raised_and_the_pool_survives() {
        let _t = lock(&TURN);
        let r = std::panic::catch_unwind(|| {
            run(3, &|p| {
                if p == 1 {
                    panic!("part 1 fails");
                }
            })
        });
        assert!(r.is_err());
        let hits = AtomicUsize::new(0);
        run(3, &|_| {
            hits.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 3);
    }
}
