//! [`LoopRef::validate_once`]: a loop's invariants checked once per
//! thread, however many times a graph holding it is copied or verified.

use std::sync::Arc;

use super::{LoopOp, LoopRef};
use crate::Result;

impl LoopRef {
    /// [`LoopOp::validate`], done once per shared loop on each thread:
    /// a graph holding a loop node re-checks it whenever a pass copies or
    /// verifies the graph, and a check verifies every body, split step
    /// and reverse step (a fifth of an LSTM gradient's compile time).
    ///
    /// Remembering which loops passed is sound because a `LoopOp` behind
    /// its `Arc` never changes (it has no interior mutability, and the
    /// remembered [`Weak`](std::sync::Weak) makes `Arc::get_mut` refuse
    /// and `Arc::make_mut` move the value elsewhere), and because the
    /// `Weak` keeps the allocation, so no other loop can take its address.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rlx::{DType, Graph, core::{LoopOp, LoopRef}};
    /// let mut b = Graph::new();
    /// let c = b.input("c", [2], DType::F64);
    /// let s = b.sin(c).unwrap();
    /// b.set_outputs(vec![s]);
    /// let l: LoopRef = LoopOp::scan("l", b, 1, 0, 3, false, None).unwrap();
    /// l.validate_once().unwrap();
    /// // A changed copy is a new loop, checked again.
    /// let bad = LoopRef(Arc::new(LoopOp { length: 0, ..(*l).clone() }));
    /// assert!(bad.validate_once().is_err());
    /// ```
    pub fn validate_once(&self) -> Result<()> {
        use std::cell::RefCell;
        use std::sync::Weak;
        /// Loops seen valid on this thread, the newest last.
        const REMEMBERED: usize = 32;
        thread_local! {
            static VALID: RefCell<Vec<Weak<LoopOp>>> = const { RefCell::new(Vec::new()) };
        }
        let at = Arc::as_ptr(&self.0);
        let known = |v: &Vec<Weak<LoopOp>>| v.iter().any(|w| std::ptr::eq(w.as_ptr(), at));
        if VALID.try_with(|v| known(&v.borrow())).unwrap_or(false) {
            return Ok(());
        }
        self.validate()?;
        let _ = VALID.try_with(|v| {
            let mut v = v.borrow_mut();
            if v.len() == REMEMBERED {
                v.remove(0);
            }
            v.push(Arc::downgrade(&self.0));
        });
        Ok(())
    }
}
