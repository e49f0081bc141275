//! The reverse sweep of a loop under a memory budget: binomial
//! checkpointing (Griewank and Walther's *revolve*).
//!
//! Reverse mode visits the steps of a loop backwards, and step `t` needs the
//! carry `c(t)`. Storing all `T` carries costs `T` carries of memory; storing
//! none costs `T²/2` recomputed steps. With `s` slots, [`revolve`] keeps the
//! cost to `r` forward evaluations of each step at most, for the smallest
//! `r` with `C(s + r, s) >= T`: with the default `s = ⌈√T⌉` that is `r <= 3`
//! for every `T` (and `r = 2` up to `T ≈ s²/2`).
//!
//! The schedule is symbolic: it drives a [`Sweep`] (which owns the numbers)
//! through `store`, `restore`, `advance` and `reverse_step` calls, so the
//! runtime only fills values (STYLE 22).
//!
//! Invariants: at most `checkpoints` slots hold a carry at any time (slot
//! indices are `< checkpoints`); `reverse_step` is called exactly once per
//! step, in the order `T-1, .., 0`, each time with the working carry equal
//! to `c(t)`.

use crate::{Error, Result};

/// The numeric side of a reverse sweep: a working carry and numbered slots.
pub trait Sweep {
    /// Copies slot `slot` into the working carry.
    fn restore(&mut self, slot: usize) -> Result<()>;
    /// Copies the working carry into slot `slot`.
    fn store(&mut self, slot: usize) -> Result<()>;
    /// Runs step `t` on the working carry (`c(t)` becomes `c(t + 1)`).
    fn advance(&mut self, t: usize) -> Result<()>;
    /// The reverse step `t`; the working carry is `c(t)` and must be left unchanged.
    fn reverse_step(&mut self, t: usize) -> Result<()>;
}

/// `C(s + r, s)`, saturating: the most steps that `s` slots reverse with
/// each step advanced at most `r` times.
fn beta(s: usize, r: usize) -> u128 {
    let mut b: u128 = 1;
    for i in 1..=s.min(r) as u128 {
        // C(n, i) = C(n, i - 1) * (n - i + 1) / i, exact at every step.
        let n = (s + r) as u128;
        b = b.saturating_mul(n - i + 1) / i;
        if b > u64::MAX as u128 {
            return b;
        }
    }
    b
}

/// Runs the reverse sweep of a loop of `length` steps, storing at most
/// `checkpoints` carries. On entry the working carry is `c(0)`.
///
/// ```
/// use rlx::core::loops::schedule::{revolve, Sweep};
/// use rlx::Result;
/// // carries are the step numbers themselves
/// struct Count { work: usize, slots: Vec<usize>, order: Vec<usize>, steps: usize }
/// impl Sweep for Count {
///     fn restore(&mut self, s: usize) -> Result<()> { self.work = self.slots[s]; Ok(()) }
///     fn store(&mut self, s: usize) -> Result<()> { self.slots[s] = self.work; Ok(()) }
///     fn advance(&mut self, t: usize) -> Result<()> { assert_eq!(self.work, t); self.work += 1; self.steps += 1; Ok(()) }
///     fn reverse_step(&mut self, t: usize) -> Result<()> { assert_eq!(self.work, t); self.order.push(t); Ok(()) }
/// }
/// let mut c = Count { work: 0, slots: vec![0; 4], order: vec![], steps: 0 };
/// revolve(20, 4, &mut c).unwrap();
/// assert_eq!(c.order, (0..20).rev().collect::<Vec<_>>());
/// assert!(c.steps <= 3 * 20);
/// ```
pub fn revolve(length: usize, checkpoints: usize, sweep: &mut impl Sweep) -> Result<()> {
    if checkpoints == 0 || length == 0 {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!(
                "a reverse sweep of {length} steps with {checkpoints} checkpoints (both must be at least 1)"
            ),
        });
    }
    let mut st = State {
        sweep,
        at: Some((0, 0)),
    };
    st.sweep.store(0)?;
    // Pending ranges, innermost last: an explicit stack, so that budgets
    // close to `T` (a recursion as deep as `T`) cannot overflow the stack.
    // Each split uses one more slot and leaves one more range pending, so
    // the stack holds at most `checkpoints + 1` ranges: one allocation
    // whatever the budget.
    let mut todo = Vec::with_capacity(checkpoints.min(length) + 1);
    todo.push(Range {
        a: 0,
        b: length,
        slot: 0,
        next: 1,
        snaps: checkpoints.min(length),
    });
    while let Some(r) = todo.pop() {
        if let Some((right, left)) = st.split(r)? {
            todo.push(left);
            todo.push(right);
        }
    }
    Ok(())
}

/// Steps `a..b` to reverse: `c(a)` is in `slot`, slots `next..` are free,
/// and `snaps` slots (counting `slot`) may be used.
#[derive(Clone, Copy)]
struct Range {
    a: usize,
    b: usize,
    slot: usize,
    next: usize,
    snaps: usize,
}

struct State<'a, S: Sweep> {
    sweep: &'a mut S,
    /// `(t, slot)`: the working carry is `c(t)`, a copy of that slot's
    /// (`usize::MAX` when it is in no slot).
    at: Option<(usize, usize)>,
}

impl<S: Sweep> State<'_, S> {
    /// The working carry becomes `c(a)`, read from `slot`.
    fn to(&mut self, a: usize, slot: usize) -> Result<()> {
        if self.at.map(|p| p.0) != Some(a) {
            self.sweep.restore(slot)?;
            self.at = Some((a, slot));
        }
        Ok(())
    }

    fn advance(&mut self, from: usize, to: usize) -> Result<()> {
        for t in from..to {
            self.sweep.advance(t)?;
        }
        self.at = Some((to, usize::MAX));
        Ok(())
    }

    /// Reverses the steps of `r` that need no further checkpoint, or
    /// places one and returns the two ranges left, the right one first to
    /// be reversed.
    fn split(&mut self, r: Range) -> Result<Option<(Range, Range)>> {
        let Range {
            a,
            b,
            slot,
            next,
            snaps,
        } = r;
        let n = b - a;
        if n == 1 {
            self.to(a, slot)?;
            self.sweep.reverse_step(a)?;
            return Ok(None);
        }
        if snaps <= 1 {
            for t in (a..b).rev() {
                self.to(a, slot)?;
                self.advance(a, t)?;
                self.sweep.reverse_step(t)?;
            }
            return Ok(None);
        }
        if snaps >= n {
            // Every carry fits: store each once, then reverse.
            self.to(a, slot)?;
            for t in a + 1..b {
                self.advance(t - 1, t)?;
                self.sweep.store(next + t - a - 1)?;
            }
            for t in (a..b).rev() {
                let s = if t == a { slot } else { next + t - a - 1 };
                self.to(t, s)?;
                self.sweep.reverse_step(t)?;
            }
            return Ok(None);
        }
        let mut reps = 1;
        while beta(snaps, reps) < n as u128 {
            reps += 1;
        }
        let right = beta(snaps - 1, reps);
        let d = (n as u128).saturating_sub(right).clamp(1, n as u128 - 1) as usize;
        self.to(a, slot)?;
        self.advance(a, a + d)?;
        self.sweep.store(next)?;
        self.at = Some((a + d, next));
        let right = Range {
            a: a + d,
            b,
            slot: next,
            next: next + 1,
            snaps: snaps - 1,
        };
        let left = Range {
            a,
            b: a + d,
            slot,
            next,
            snaps,
        };
        Ok(Some((right, left)))
    }
}

/// The carries the reverse sweep of [`revolve`] stores before its first
/// reverse step, in the order it stores them (`c(0)` first), followed by
/// `T - 1`, the working carry at that first reverse step: what a forward
/// loop can record for its adjoint so that the adjoint skips its first
/// descent (the compiler's spine fusion, see `LoopOp::spine`).
///
/// ```
/// use rlx::core::loops::schedule::spine;
/// // every carry fits: all are stored, then the sweep starts at T - 1
/// assert_eq!(spine(4, 4), vec![0, 1, 2, 3, 3]);
/// assert_eq!(spine(5, 1), vec![0, 4]);
/// ```
pub fn spine(length: usize, checkpoints: usize) -> Vec<usize> {
    struct Record {
        work: usize,
        slots: Vec<usize>,
        stored: Vec<usize>,
    }
    impl Sweep for Record {
        fn restore(&mut self, slot: usize) -> Result<()> {
            self.work = self.slots[slot];
            Ok(())
        }
        fn store(&mut self, slot: usize) -> Result<()> {
            if self.slots.len() <= slot {
                self.slots.resize(slot + 1, 0);
            }
            self.slots[slot] = self.work;
            self.stored.push(self.work);
            Ok(())
        }
        fn advance(&mut self, _: usize) -> Result<()> {
            self.work += 1;
            Ok(())
        }
        fn reverse_step(&mut self, t: usize) -> Result<()> {
            self.stored.push(t);
            // Stop the sweep here: the rest is not recorded.
            Err(Error::Unsupported(String::new()))
        }
    }
    let mut r = Record {
        work: 0,
        slots: Vec::new(),
        stored: Vec::new(),
    };
    let _ = revolve(length, checkpoints, &mut r);
    r.stored
}

/// Forward steps `revolve(length, checkpoints)` runs (for documentation and tests).
pub fn advances(length: usize, checkpoints: usize) -> usize {
    struct Count(usize);
    impl Sweep for Count {
        fn restore(&mut self, _: usize) -> Result<()> {
            Ok(())
        }
        fn store(&mut self, _: usize) -> Result<()> {
            Ok(())
        }
        fn advance(&mut self, _: usize) -> Result<()> {
            self.0 += 1;
            Ok(())
        }
        fn reverse_step(&mut self, _: usize) -> Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    revolve(length, checkpoints, &mut c).map_or(0, |()| c.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carries are step numbers; checks every invariant of the module docs.
    struct Check {
        work: Option<usize>,
        slots: Vec<Option<usize>>,
        order: Vec<usize>,
        advances: usize,
    }

    impl Sweep for Check {
        fn restore(&mut self, s: usize) -> Result<()> {
            self.work = Some(self.slots[s].expect("restore of an empty slot"));
            Ok(())
        }
        fn store(&mut self, s: usize) -> Result<()> {
            self.slots[s] = self.work;
            Ok(())
        }
        fn advance(&mut self, t: usize) -> Result<()> {
            assert_eq!(self.work, Some(t));
            self.work = Some(t + 1);
            self.advances += 1;
            Ok(())
        }
        fn reverse_step(&mut self, t: usize) -> Result<()> {
            assert_eq!(self.work, Some(t));
            self.order.push(t);
            Ok(())
        }
    }

    #[test]
    fn every_budget_reverses_every_step_once_in_order_within_its_slots() {
        for t in 1..=40 {
            for s in 1..=t {
                // `slots` has `s` entries: a slot index past the budget panics
                let mut c = Check {
                    work: Some(0),
                    slots: vec![None; s],
                    order: vec![],
                    advances: 0,
                };
                revolve(t, s, &mut c).unwrap();
                assert_eq!(c.order, (0..t).rev().collect::<Vec<_>>(), "T={t} s={s}");
                // with every carry stored, each step runs once
                if s == t {
                    assert_eq!(c.advances, t - 1, "T={t}");
                }
                // one slot: the quadratic schedule
                if s == 1 {
                    assert_eq!(c.advances, t * (t - 1) / 2, "T={t}");
                }
            }
        }
    }

    #[test]
    fn the_default_budget_evaluates_each_step_at_most_three_times() {
        for t in [10, 100, 1000, 10_000, 100_000] {
            let s = crate::loops::default_checkpoints(t);
            let a = advances(t, s);
            assert!(a <= 3 * t, "T={t}: {a} advances with {s} slots");
        }
    }

    #[test]
    fn budgets_near_the_length_do_not_recurse_deeply() {
        for s in [100_000, 99_999, 50_000] {
            assert!(advances(100_000, s) <= 2 * 100_000, "budget {s}");
        }
    }

    #[test]
    fn binomial_counts() {
        assert_eq!(beta(3, 2), 10);
        assert_eq!(beta(1, 5), 6);
        assert_eq!(beta(0, 9), 1);
        assert!(beta(300, 300) > u64::MAX as u128);
    }

    #[test]
    fn a_zero_budget_is_an_error() {
        let mut c = Check {
            work: Some(0),
            slots: vec![],
            order: vec![],
            advances: 0,
        };
        assert!(revolve(5, 0, &mut c).is_err());
    }
}
