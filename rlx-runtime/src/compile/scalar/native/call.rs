//! The calling side of the generated code: [`Native`] (a region's code
//! and what keeps it valid), how its functions are entered (leaves read
//! from memory, or passed in registers: [`REG_LEAVES`]) and [`Whole`], the
//! checked handle of a small program's one function.

use std::fmt;

use cranelift_jit::JITModule;

/// One generated function: `ins` holds the leaves, `outs` receives the
/// stores, `spill` carries values between the functions of a split region.
pub(super) type RegionFn = extern "C" fn(*const f64, *mut f64, *mut f64);

/// A region in one function with at most this many leaves takes them as
/// `f64` arguments, in registers (the C calling convention passes eight
/// in `xmm0`–`xmm7` on x86-64 and `v0`–`v7` on AArch64), and `outs` after
/// them: the warm call of a function of a few numbers then hands its
/// arguments to the native code without a trip through memory (a store,
/// then a load that waits for it, on the path of every result).
pub(super) const REG_LEAVES: usize = 8;

/// How a region's code is entered.
pub(super) enum Entry {
    /// Functions reading their leaves from `ins`, run in order.
    Memory(Vec<RegionFn>),
    /// One function taking its leaves (at most [`REG_LEAVES`]) as `f64`
    /// arguments, then `outs` ([`call_with_leaves`]).
    Registers(LeafFn),
}

/// The address of a function taking its leaves in registers
/// ([`Entry::Registers`]).
#[derive(Clone, Copy)]
pub(super) struct LeafFn(pub(super) *const u8);

// SAFETY: the address of immutable, reentrant generated code (see
// `Native`'s `Send`/`Sync`); whoever holds one keeps its `Native` alive.
unsafe impl Send for LeafFn {}
// SAFETY: as above.
unsafe impl Sync for LeafFn {}

/// Calls `code`, a function taking `ins.len()` leaves as `f64` arguments
/// then `outs` (see [`Entry::Registers`]).
///
/// # Safety
/// `code` must be a finalised function of that signature, alive for the
/// call, writing at most as many targets as `outs` has room for.
#[inline(always)]
unsafe fn call_with_leaves(code: *const u8, ins: &[f64], outs: *mut f64) {
    type O = *mut f64;
    macro_rules! arity {
        ($($n:literal => ($($i:literal),*)),*) => {
            match ins.len() {
                $($n => {
                    // SAFETY: `code` has this signature (the caller's
                    // contract): `$n` leaves, then `outs`.
                    let f = unsafe {
                        std::mem::transmute::<*const u8, extern "C" fn($(arity!(@f64 $i),)* O)>(code)
                    };
                    f($(ins[$i],)* outs)
                })*
                _ => unreachable!("a region with leaves in registers has at most {REG_LEAVES}"),
            }
        };
        (@f64 $i:literal) => { f64 };
    }
    arity!(
        0 => (),
        1 => (0),
        2 => (0, 1),
        3 => (0, 1, 2),
        4 => (0, 1, 2, 3),
        5 => (0, 1, 2, 3, 4),
        6 => (0, 1, 2, 3, 4, 5),
        7 => (0, 1, 2, 3, 4, 5, 6),
        8 => (0, 1, 2, 3, 4, 5, 6, 7)
    )
}

thread_local! {
    /// The spill buffer of split regions, kept per thread so that a warm
    /// call allocates nothing (generated code never re-enters rlx).
    static SPILL: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A unary op of the interpreter, called from native code.
pub(super) type UnaryFn = fn(f64) -> f64;
/// A binary op of the interpreter, called from native code.
pub(super) type BinaryFn = fn(f64, f64) -> f64;

/// Native code for one region, with what it needs to stay valid.
pub(crate) struct Native {
    /// The region's code.
    pub(super) entry: Entry,
    /// For a region whose `entry` is a fast function (see `guard`): its
    /// exact code, which the fast function runs where its results could
    /// differ (boxed: the fast function holds its address).
    pub(super) exact: Option<Box<crate::compile::scalar::native::guard::Exact>>,
    /// Slots of the spill buffer (0 for a region in one function).
    pub(super) spill: usize,
    pub(super) loads: usize,
    pub(super) stores: usize,
    /// The module owning the code; freed on drop.
    pub(super) module: Option<JITModule>,
    /// Interpreter functions the code calls through the trampolines; boxed
    /// so their addresses, baked into the code, never move.
    #[allow(dead_code)]
    pub(super) unary: Box<[UnaryFn]>,
    #[allow(dead_code)]
    pub(super) binary: Box<[BinaryFn]>,
}

// SAFETY: after `finalize_definitions` the module is never touched again
// except to free it in `drop` (which has `&mut self`); the generated code is
// reentrant (it reads `ins` and writes `outs` and the calling thread's spill
// buffer), and the boxed function pointers are plain `fn`s.
unsafe impl Send for Native {}
// SAFETY: as above: shared access only ever calls the immutable code.
unsafe impl Sync for Native {}

impl fmt::Debug for Native {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let functions = match &self.entry {
            Entry::Memory(funcs) => funcs.len(),
            Entry::Registers(_) => 1,
        };
        let fast = if self.exact.is_some() { ", fast" } else { "" };
        write!(
            f,
            "Native({} loads, {} stores, {} functions{fast})",
            self.loads, self.stores, functions
        )
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the `Native` is being dropped, so nobody holds `func`
            // or can call it any more.
            unsafe { m.free_memory() };
        }
    }
}

impl Native {
    /// Number of leaves the code reads.
    pub(crate) fn loads(&self) -> usize {
        self.loads
    }

    /// Number of values the code stores.
    pub(crate) fn stores(&self) -> usize {
        self.stores
    }

    /// Runs the code on exactly its leaves `ins` and its targets `outs`
    /// when it is one function with no spill buffer (the code of a small
    /// program); `false`, running nothing, otherwise. The warm call of a
    /// function of a few numbers is this call and little else.
    #[inline]
    pub(crate) fn call_whole(&self, ins: &[f64], outs: &mut [f64]) -> bool {
        match self.whole_fn() {
            Some(f) if ins.len() == self.loads && outs.len() == self.stores => {
                // SAFETY: a function of the module this `Native` owns,
                // called with exactly its leaves and targets.
                unsafe { f.call(ins, outs) };
                true
            }
            _ => false,
        }
    }

    /// Whether [`Native::call_whole`] runs on `ins` leaves and `outs`
    /// targets.
    pub(crate) fn is_whole(&self, ins: usize, outs: usize) -> bool {
        self.whole_fn().is_some() && ins == self.loads && outs == self.stores
    }

    /// The region's one function, if it has one and no spill buffer.
    #[inline]
    fn whole_fn(&self) -> Option<WholeFn> {
        match &self.entry {
            Entry::Memory(funcs) if funcs.len() == 1 && self.spill == 0 => {
                Some(WholeFn::Memory(funcs[0]))
            }
            Entry::Registers(f) => Some(WholeFn::Registers(*f)),
            Entry::Memory(_) => None,
        }
    }

    /// Runs the code on `ins` (the leaves) and `outs` (one slot per target).
    #[inline]
    pub(crate) fn call(&self, ins: &[f64], outs: &mut [f64]) {
        assert!(
            ins.len() >= self.loads && outs.len() >= self.stores,
            "native region called with {} inputs and {} outputs, needs {} and {}",
            ins.len(),
            outs.len(),
            self.loads,
            self.stores
        );
        let funcs = match &self.entry {
            // SAFETY: as in `call_whole`: exactly its leaves, and `outs`
            // has room for its targets (checked above).
            Entry::Registers(f) => {
                return unsafe { call_with_leaves(f.0, &ins[..self.loads], outs.as_mut_ptr()) }
            }
            Entry::Memory(funcs) => funcs,
        };
        if self.spill == 0 {
            for f in funcs {
                f(ins.as_ptr(), outs.as_mut_ptr(), std::ptr::null_mut());
            }
            return;
        }
        let mut run = |spill: &mut Vec<f64>| {
            if spill.len() < self.spill {
                spill.resize(self.spill, 0.0);
            }
            for f in funcs {
                f(ins.as_ptr(), outs.as_mut_ptr(), spill.as_mut_ptr());
            }
        };
        SPILL.with(|s| match s.try_borrow_mut() {
            Ok(mut spill) => run(&mut spill),
            // Not reached (the code never re-enters); a fresh buffer is correct.
            Err(_) => run(&mut Vec::new()),
        })
    }
}

/// Native code that is one function with no spill buffer, called on
/// exactly its leaves and targets ([`Native::call_whole`]) with the
/// checks of that call made once, when it is built: the warm call of a
/// function of a few numbers holds one.
#[derive(Clone)]
pub(crate) struct Whole {
    f: WholeFn,
    loads: usize,
    stores: usize,
    /// Keeps the code `f` points into alive.
    _code: std::sync::Arc<Native>,
}

/// How the one function of a region without a spill buffer is entered.
#[derive(Clone, Copy)]
enum WholeFn {
    Memory(RegionFn),
    Registers(LeafFn),
}

impl WholeFn {
    /// Runs the function on `ins` (its leaves) and `outs`.
    ///
    /// # Safety
    /// The function's code must be alive, `ins` must hold exactly its
    /// leaves and `outs` have room for its targets.
    #[inline]
    unsafe fn call(self, ins: &[f64], outs: &mut [f64]) {
        match self {
            WholeFn::Memory(f) => f(ins.as_ptr(), outs.as_mut_ptr(), std::ptr::null_mut()),
            // SAFETY: the caller's contract is `call_with_leaves`'s.
            WholeFn::Registers(f) => unsafe { call_with_leaves(f.0, ins, outs.as_mut_ptr()) },
        }
    }
}

impl Whole {
    /// `native` as one function, if it is one with no spill buffer.
    pub(crate) fn of(native: &std::sync::Arc<Native>) -> Option<Whole> {
        Some(Whole {
            f: native.whole_fn()?,
            loads: native.loads,
            stores: native.stores,
            _code: native.clone(),
        })
    }

    /// Whether [`Whole::call`] runs on `ins` leaves and `outs` targets.
    pub(crate) fn takes(&self, ins: usize, outs: usize) -> bool {
        ins == self.loads && outs == self.stores
    }

    /// [`Native::call_whole`]: runs on `ins` and `outs` of exactly the
    /// code's lengths and returns `true`; `false`, running nothing, for
    /// other lengths.
    #[inline]
    pub(crate) fn call(&self, ins: &[f64], outs: &mut [f64]) -> bool {
        if ins.len() != self.loads || outs.len() != self.stores {
            return false;
        }
        // SAFETY: `f` is a function of the module `_code` owns, taking
        // `loads` leaves and writing `stores` targets, here exactly the
        // buffers' lengths.
        unsafe { self.f.call(ins, outs) };
        true
    }

    /// [`Whole::call`] on leaves the caller holds in a local array (the
    /// number path's arguments): the function that reads them from memory
    /// gets a copy ([`crate::compile::base::stack::on_copy`]), so that the one taking
    /// them in registers can be passed the array's elements without a
    /// store.
    #[inline]
    pub(crate) fn call_local(&self, ins: &[f64], outs: &mut [f64]) -> bool {
        match self.f {
            WholeFn::Memory(_) => {
                crate::compile::base::stack::on_copy(ins, |ins| self.call(ins, outs))
            }
            WholeFn::Registers(_) => self.call(ins, outs),
        }
    }
}
