//! The thread-local trace context.
//!
//! Generated code enters a [`Trace`], declares the function's parameters as
//! traced inputs, runs the user's body (every tensor op on a traced operand
//! appends a node to the trace's [`Graph`]) and finishes the trace to get the
//! graph. Traces nest: a companion called on traced tensors inlines its
//! graph into the innermost trace with [`inline`].
//!
//! Errors inside traced code do not unwind: the first one is stored, with
//! the user's source location, and [`Trace::finish`] returns it.
//!
//! Captured tensors: a concrete tensor may enter a trace only if it was
//! created while that trace was the innermost one (a literal written in the
//! body, such as `Tensor::from_slice(&[1.0, 2.0], [2])`, becomes a
//! constant). A concrete tensor created before the trace began (read from a
//! `static`, a thread-local or any global) is refused with an error, because
//! the compiled plan is cached and would keep the stale value; pass it as a
//! parameter instead.

use std::panic::Location;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rlx_core::{DType, Error, Graph, Literal, NodeId, Op, Result, Shape};

use crate::context::{sync_current, with_current, Capture, Frame, NEXT_ID, STACK};
use crate::storage::Storage;
use crate::tensor::{Repr, Tensor, Traced};

pub use crate::context::{current_id, is_tracing};

/// An active trace. Dropping it without [`Trace::finish`] discards it.
///
/// ```
/// use rlx::{trace::Trace, DType, Op, Tensor, UnaryOp};
/// let t = Trace::enter();
/// let x = t.input("x", [3], DType::F64);
/// let y = Tensor::apply(Op::Unary(UnaryOp::Sin), &[&x]).unwrap();
/// let g = t.finish(&[&y]).unwrap();
/// assert_eq!(g.inputs().len(), 1);
/// assert_eq!(g.outputs().len(), 1);
/// ```
pub struct Trace {
    id: u64,
    // Traces are tied to their thread's stack.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Trace {
    /// Starts a new innermost trace on this thread.
    pub fn enter() -> Trace {
        Trace::push(None, false)
    }

    /// Starts the trace of a loop body: unlike [`Trace::enter`], traced
    /// tensors of enclosing traces may be used in it; each becomes an input
    /// of the body (declared after the others), and
    /// [`Trace::finish_body`] lists them.
    pub fn enter_body() -> Trace {
        Trace::push(Some(Vec::new()), false)
    }

    /// Starts the trace of a graph that runs once, at once, on concrete
    /// tensors (a solver called outside any trace): concrete tensors made
    /// anywhere become constants of it (nothing caches its plan, so none
    /// can go stale). Finish it with [`Trace::finish_body`].
    pub(crate) fn enter_eager() -> Trace {
        Trace::push(Some(Vec::new()), true)
    }

    fn push(captures: Option<Vec<Capture>>, eager: bool) -> Trace {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            s.push(Frame {
                id,
                graph: Graph::new(),
                error: None,
                captures,
                eager,
            });
            sync_current(&s);
        });
        Trace {
            id,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Declares a graph input and returns it as a traced tensor.
    pub fn input(&self, name: &str, shape: impl Into<Shape>, dtype: DType) -> Tensor {
        let shape = shape.into();
        let node = self.with_graph(|g| g.input(name, shape.clone(), dtype));
        traced(self.id, node, shape, dtype)
    }

    /// Runs `f` on this trace's graph (for generated code that adds nodes directly).
    pub fn with_graph<R>(&self, f: impl FnOnce(&mut Graph) -> R) -> R {
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            let frame = s
                .iter_mut()
                .rev()
                .find(|fr| fr.id == self.id)
                .expect("a Trace's frame lives until the Trace is dropped");
            f(&mut frame.graph)
        })
    }

    /// The first error recorded so far, if any.
    pub fn error(&self) -> Option<Error> {
        STACK.with(|s| {
            s.borrow()
                .iter()
                .find(|fr| fr.id == self.id)
                .and_then(|fr| fr.error.clone())
        })
    }

    /// Ends the trace with `outputs` and returns its graph, or the first
    /// error recorded while tracing.
    pub fn finish(self, outputs: &[&Tensor]) -> Result<Graph> {
        let frame = self.pop();
        if let Some(e) = frame.error {
            return Err(e);
        }
        let mut graph = frame.graph;
        let mut outs = Vec::with_capacity(outputs.len());
        for t in outputs {
            let id = match &t.repr {
                Repr::Traced(tr) if tr.trace == frame.id => tr.node,
                Repr::Traced(_) => return Err(foreign_trace()),
                Repr::Concrete(c) => constant(&mut graph, &c.storage, &c.shape)?,
            };
            outs.push(id);
        }
        graph.set_outputs(outs);
        Ok(graph)
    }

    /// Ends a body trace (see [`Trace::enter_body`]) with `outputs`:
    /// returns its graph and the tensors of enclosing traces it captured,
    /// in the order of the inputs they became.
    pub fn finish_body(self, outputs: &[&Tensor]) -> Result<(Graph, Vec<Tensor>)> {
        let outer = enclosing_ids(self.id);
        let mut frame = self.pop();
        if let Some(e) = frame.error.take() {
            return Err(e);
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for t in outputs {
            outs.push(node_of(&mut frame, &outer, t)?);
        }
        frame.graph.set_outputs(outs);
        let captured = frame
            .captures
            .unwrap_or_default()
            .into_iter()
            .map(|c| traced(c.trace, c.node, c.shape, c.dtype))
            .collect();
        Ok((frame.graph, captured))
    }

    fn pop(&self) -> Frame {
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            let pos = s
                .iter()
                .rposition(|fr| fr.id == self.id)
                .expect("a Trace's frame lives until the Trace is dropped");
            // Inner traces left open by a panic are discarded with this one.
            s.truncate(pos + 1);
            let frame = s.pop().expect("frame found above");
            sync_current(&s);
            frame
        })
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let id = self.id;
        let _ = STACK.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if let Some(pos) = s.iter().rposition(|fr| fr.id == id) {
                    s.truncate(pos);
                    sync_current(&s);
                }
            }
        });
    }
}

/// Inlines `graph` into the innermost trace with `args` as its inputs and
/// returns its outputs as traced tensors. This is how a compiled function
/// called on traced tensors composes with the caller's trace.
#[track_caller]
pub fn inline(graph: &Graph, args: &[&Tensor]) -> Result<Vec<Tensor>> {
    let loc = Location::caller();
    let id = current_id();
    if id == 0 {
        return Err(Error::Unsupported(
            "`trace::inline` called outside a trace".into(),
        ));
    }
    let result = with_frame(|fr, outer| {
        let mut ids = Vec::with_capacity(args.len());
        for a in args {
            ids.push(node_of(fr, outer, a)?);
        }
        // The inlined nodes keep their lines (those of the called
        // function's body); `loc` is rarely the user's line.
        let g = &mut fr.graph;
        let outs = g.inline(graph, &ids)?;
        Ok(outs
            .into_iter()
            .map(|o| {
                let n = g.node(o);
                traced(id, o, n.shape.clone(), n.dtype)
            })
            .collect())
    });
    result.map_err(|e: Error| e.at(loc.file(), loc.line(), loc.column()))
}

/// Records `op` on `inputs` in the innermost trace.
pub(crate) fn record(
    op: Op,
    inputs: &[&Tensor],
    loc: &'static Location<'static>,
) -> Result<Tensor> {
    let id = current_id();
    if id == 0 {
        return Err(foreign_trace());
    }
    let result = with_frame(|fr, outer| {
        let mut ids = Vec::with_capacity(inputs.len());
        for a in inputs {
            ids.push(node_of(fr, outer, a)?);
        }
        let before = fr.graph.len();
        let node = fr.graph.push(op, &ids)?;
        fr.graph.mark_lines(before, loc);
        let n = fr.graph.node(node);
        Ok(traced(id, node, n.shape.clone(), n.dtype))
    });
    result.map_err(|e: Error| e.at(loc.file(), loc.line(), loc.column()))
}

/// After a failed op in traced code: stores `error` as the trace's first
/// error and returns a placeholder so that tracing can go on. Returns
/// `None` outside a trace (the caller then panics, as eager code does).
pub(crate) fn poison(inputs: &[&Tensor], error: Error) -> Option<Tensor> {
    if !inputs.iter().any(|t| t.is_traced()) {
        return None;
    }
    let id = current_id();
    if id == 0 {
        return None;
    }
    let dtype = inputs.first().map_or(DType::F64, |t| t.dtype());
    Some(with_current(|g| {
        let node = g.scalar(0.0, dtype);
        traced(id, node, Shape::scalar(), dtype)
    }))
    .inspect(|_| {
        STACK.with(|s| {
            if let Some(fr) = s.borrow_mut().last_mut() {
                fr.error.get_or_insert(error);
            }
        })
    })
}

/// Stores `error` as the innermost trace's first error (a no-op outside a
/// trace), for code that goes on tracing with placeholders after an error.
pub(crate) fn record_error(error: Error) {
    STACK.with(|s| {
        if let Some(fr) = s.borrow_mut().last_mut() {
            fr.error.get_or_insert(error);
        }
    })
}

/// Runs `f` on the innermost frame and the ids of the frames enclosing it.
fn with_frame<R>(f: impl FnOnce(&mut Frame, &[u64]) -> R) -> R {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        let (last, rest) = s
            .split_last_mut()
            .expect("caller checked that a trace is active");
        let outer: Vec<u64> = rest.iter().map(|f| f.id).collect();
        f(last, &outer)
    })
}

/// The ids of the frames below trace `id` on this thread's stack.
fn enclosing_ids(id: u64) -> Vec<u64> {
    STACK.with(|s| {
        let s = s.borrow();
        let pos = s.iter().rposition(|f| f.id == id).unwrap_or(0);
        s[..pos].iter().map(|f| f.id).collect()
    })
}

/// The node for `t` in the graph of frame `fr` (enclosed by the traces
/// `outer`): its own node if traced there, a new constant if it is a
/// concrete tensor created in this trace, and in a loop body, an input
/// standing for a tensor of an enclosing trace.
fn node_of(fr: &mut Frame, outer: &[u64], t: &Tensor) -> Result<NodeId> {
    let (id, body, eager) = (fr.id, fr.captures.is_some(), fr.eager);
    let g = &mut fr.graph;
    match &t.repr {
        Repr::Traced(tr) if tr.trace == id => Ok(tr.node),
        Repr::Traced(tr) if body && outer.contains(&tr.trace) => {
            let caps = fr.captures.get_or_insert_with(Vec::new);
            if let Some(c) = caps.iter().find(|c| c.trace == tr.trace && c.node == tr.node) {
                return Ok(c.input);
            }
            let input = g.input(format!("captured{}", caps.len()), tr.shape.clone(), tr.dtype);
            caps.push(Capture {
                trace: tr.trace,
                node: tr.node,
                shape: tr.shape.clone(),
                dtype: tr.dtype,
                input,
            });
            Ok(input)
        }
        Repr::Traced(_) => Err(foreign_trace()),
        Repr::Concrete(c) if c.origin == id || eager || (body && outer.contains(&c.origin)) => {
            constant(g, &c.storage, &c.shape)
        }
        Repr::Concrete(c) => Err(Error::Unsupported(format!(
            "traced code used a concrete {}{} tensor that was created outside the traced function (a captured value, e.g. read from a `static`)\n  = note: compiled plans are cached, so the captured value would silently go stale\n  = help: pass the tensor as a parameter of the `#[differentiable]` function",
            c.storage.dtype(),
            c.shape
        ))),
    }
}

fn constant(g: &mut Graph, s: &Storage, shape: &Shape) -> Result<NodeId> {
    let lit = match s {
        Storage::I64(v) => Literal::I64(Arc::from(v.as_slice())),
        other => Literal::F64(Arc::from(other.to_f64_vec())),
    };
    let lit = match &lit {
        Literal::F64(v) if v.len() == 1 => Literal::Splat(v[0]),
        Literal::I64(v) if v.len() == 1 => Literal::SplatI64(v[0]),
        _ => lit,
    };
    g.constant(lit, shape.clone(), s.dtype())
}

fn traced(trace: u64, node: NodeId, shape: Shape, dtype: DType) -> Tensor {
    Tensor {
        repr: Repr::Traced(Traced {
            trace,
            node,
            shape,
            dtype,
        }),
    }
}

fn foreign_trace() -> Error {
    Error::Unsupported(
        "a traced tensor was used outside the trace that created it\n  = help: traced tensors live only while their `#[differentiable]` function is being traced; do not store them in statics or return them through side channels".into(),
    )
}
