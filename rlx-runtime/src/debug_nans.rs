//! The opt-in check of non-finite values (JAX's `debug_nans`).
//!
//! Off by default. [`set_debug_nans`] turns it on or off for the whole
//! process; without a call, the environment variable `RLX_DEBUG_NANS`
//! (`1`, `true`, `yes` or `on`) turns it on. When it is off, a run pays one
//! relaxed atomic load.
//!
//! When it is on, every run of a `#[differentiable]` function or companion
//! checks its results. If one holds a NaN or an infinity, the plan's graph
//! (for a companion, the transformed graph, before optimisation) is run
//! again node by node in the reference interpreter, as JAX re-runs a
//! de-optimised function, and the call returns [`Error::NonFinite`] naming
//! the first node that produced a non-finite value from finite operands:
//! its op, operand and result shapes, the IR lines around it and the
//! caller's source line; or the input that held one. Whatever path the
//! plan took (fused loops, scalar programs, native code, the number path),
//! the localisation is the same.
//!
//! Only results are checked: an intermediate NaN that a `select` drops
//! does not make the call fail.

use std::sync::atomic::{AtomicU8, Ordering};

use rlx_core::{Error, Graph, NodeId, NonFinite, Op, Result};

use crate::kernels::run_inspecting;
use crate::storage::Storage;
use crate::value::Value;

/// The check's state: not yet read from the environment, off, on.
static STATE: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Turns the check of non-finite values on or off for every
/// `#[differentiable]` function and companion (see [`debug_nans`]); this
/// overrides the environment variable `RLX_DEBUG_NANS`.
///
/// ```
/// use rlx::{debug_nans, set_debug_nans};
/// set_debug_nans(true);
/// assert!(debug_nans());
/// set_debug_nans(false);
/// assert!(!debug_nans());
/// ```
pub fn set_debug_nans(on: bool) {
    STATE.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

/// Whether runs check their results for NaN and infinities, and name the
/// node that produced one ([`Error::NonFinite`]). Off unless
/// [`set_debug_nans`] turned it on or, without such a call, the
/// environment variable `RLX_DEBUG_NANS` is `1`, `true`, `yes` or `on`.
///
/// ```
/// use rlx::TensorType;
/// use rlx::runtime::function::{Arg, Function, Transform};
/// use rlx::{set_debug_nans, Error, Graph, Result, UnaryOp};
///
/// // `ln(x)`, as `#[differentiable]` would trace it.
/// fn trace(types: &[TensorType], _: &()) -> Result<Graph> {
///     let mut g = Graph::new();
///     let x = g.input("x", types[0].shape.clone(), types[0].dtype);
///     let y = g.unary(UnaryOp::Ln, x)?;
///     g.set_outputs(vec![y]);
///     Ok(g)
/// }
/// static LOG: Function = Function::new("log", &["x"], &[0]);
/// let ln_of = |x: f64| LOG.run(Transform::Call, &[Arg::F64(x)], &[], &(), trace);
///
/// // Off (the default): ln(0) = -inf comes back as computed.
/// set_debug_nans(false);
/// assert_eq!(ln_of(0.0).unwrap()[0].clone().into_f64().unwrap(), f64::NEG_INFINITY);
///
/// // On: the run fails, naming the node that produced it.
/// set_debug_nans(true);
/// let e = ln_of(0.0).unwrap_err();
/// assert!(matches!(&e, Error::NonFinite(n) if n.value == f64::NEG_INFINITY));
/// assert!(e.to_string().starts_with("`log`: node %1 (`ln`) produced -inf from finite operands"), "{e}");
/// # set_debug_nans(false);
/// ```
#[inline]
pub fn debug_nans() -> bool {
    match STATE.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => from_env(),
    }
}

/// Whether the check is known to be off: [`debug_nans`] without the first
/// read of `RLX_DEBUG_NANS` (`false` until something has read it). For the
/// warm paths that give way to the general path when this is `false`: the
/// general path reads the variable, and no call is made on the warm path
/// (a call there keeps a function's arguments out of registers).
#[inline]
pub(crate) fn known_off() -> bool {
    STATE.load(Ordering::Relaxed) == OFF
}

/// Reads `RLX_DEBUG_NANS` once (unless [`set_debug_nans`] came first).
#[cold]
fn from_env() -> bool {
    let on = std::env::var("RLX_DEBUG_NANS").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    });
    let state = if on { ON } else { OFF };
    let _ = STATE.compare_exchange(UNSET, state, Ordering::Relaxed, Ordering::Relaxed);
    STATE.load(Ordering::Relaxed) == ON
}

/// The first non-finite value of `s`, if it holds one.
pub(crate) fn first_non_finite(s: &Storage) -> Option<f64> {
    match s {
        Storage::F32(v) => v.iter().find(|x| !x.is_finite()).map(|&x| f64::from(x)),
        Storage::F64(v) => v.iter().find(|x| !x.is_finite()).copied(),
        Storage::F16(v) => v.iter().find(|x| !x.is_finite()).map(|x| x.to_f64()),
        Storage::BF16(v) => v.iter().find(|x| !x.is_finite()).map(|x| x.to_f64()),
        Storage::C32(v) => v.iter().find(|x| !x.is_finite()).map(|x| f64::from(x.re)),
        Storage::C64(v) => v.iter().find(|x| !x.is_finite()).map(|x| x.re),
        Storage::I64(_) | Storage::Bool(_) => None,
    }
}

/// Whether every result is finite (integer and mask results are).
pub(crate) fn all_finite(values: &[Value]) -> bool {
    values.iter().all(|v| match v {
        Value::F32(x) => x.is_finite(),
        Value::F64(x) => x.is_finite(),
        Value::Tensor(t) => t.storage().map_or(true, |s| first_non_finite(s).is_none()),
    })
}

/// After a run of `g` on `inputs` whose results were not all finite: runs
/// `g` again in the reference interpreter, node by node, and returns the
/// error naming the first node that produced a non-finite value from
/// finite operands (or the input that held one). `what` names what ran
/// (`` the gradient of `f` ``). If the interpreter's results are all
/// finite (the compiled code alone produced the value), the error names
/// the first output. The node's source line comes from `g` (see
/// [`origin`]).
#[cold]
pub(crate) fn localise(g: &Graph, inputs: &[&Storage], what: &str) -> Error {
    let mut finite = vec![true; g.len()];
    let mut inspect = |i: usize, value: &Storage| -> Result<()> {
        let Some(bad) = first_non_finite(value) else {
            return Ok(());
        };
        finite[i] = false;
        let node = &g.nodes()[i];
        let op = match &node.op {
            Op::Input { index } => {
                let name = g.inputs().get(*index).map_or("?", |x| x.name.as_str());
                format!("input `{name}`")
            }
            // A non-finite operand carries on: only the first node counts.
            _ if node.inputs.iter().any(|j| !finite[j.index()]) => return Ok(()),
            op => op.name().to_string(),
        };
        Err(non_finite(g, i, op, bad, what))
    };
    match run_inspecting(g, inputs, &mut inspect) {
        // The node found, or another failure of the interpreter, as it is.
        Err(e) => e,
        // Every non-finite result comes from a node the interpreter ran,
        // so this is reached only when the compiled code alone produced one.
        Ok(_) => {
            let i = g.outputs().first().map_or(0, |o| o.index());
            let op = "output of the compiled code (the interpreter computes finite values)";
            non_finite(g, i, op.into(), f64::NAN, what)
        }
    }
}

/// [`Error::NonFinite`] for node `i` of `g`.
fn non_finite(g: &Graph, i: usize, op: String, value: f64, what: &str) -> Error {
    let node = &g.nodes()[i];
    Error::NonFinite(Box::new(NonFinite {
        function: what.to_string(),
        node: i as u32,
        op,
        operands: node.inputs.iter().map(|&j| g.shape(j).clone()).collect(),
        shape: node.shape.clone(),
        value,
        origin: origin(g, i),
        context: g.context(i),
    }))
}

/// Where node `i` of `g` comes from, for [`Error::NonFinite`]: its
/// source (the line of the user's code that recorded it, or of the node
/// it is a derivative of), or, for a node without one (a transform's
/// glue: sums of cotangents, seeds), the source of the latest node with
/// one that it reads, directly or through other nodes without one.
/// Empty when unknown.
fn origin(g: &Graph, i: usize) -> String {
    let source = |k: usize| g.source(NodeId(k as u32));
    if let Some(s) = source(i) {
        return s.to_string();
    }
    // Breadth first over the nodes without a source that `i` reads, one
    // level at a time.
    let mut level = vec![i];
    let mut seen = vec![false; g.len()];
    while !level.is_empty() {
        let mut next = Vec::new();
        let mut best: Option<usize> = None;
        for &k in &level {
            for j in &g.nodes()[k].inputs {
                let j = j.index();
                if source(j).is_some() {
                    best = best.max(Some(j));
                } else if !std::mem::replace(&mut seen[j], true) {
                    next.push(j);
                }
            }
        }
        if let Some((k, s)) = best.and_then(|k| Some((k, source(k)?))) {
            return format!("computed from %{k} ({s})");
        }
        level = next;
    }
    String::new()
}
