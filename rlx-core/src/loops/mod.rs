//! Loops: one node with a body graph traced once (JAX's `scan`).
//!
//! A [`LoopOp`] owns a `body` graph with inputs `[c_1..c_n, x_1..x_k,
//! k_1..k_m]` (carries, per-step inputs, loop-invariant values) and outputs
//! `[c'_1..c'_n, y_1..y_p]` (next carries, per-step outputs). Each `c'_i` has
//! exactly the type of `c_i`. The loop runs the body `length` times:
//!
//! ```text
//! c(0) = init;  c(t+1), y(t) = body(c(t), xs[s(t)], k)   for t = 0..T
//! ```
//!
//! where `s(t) = t`, or `T - 1 - t` for a `reverse` loop, and `ys[s(t)] = y(t)`.
//!
//! Operands of an [`Op::Loop`](crate::Op::Loop) node of kind
//! [`LoopKind::Scan`]: `[c(0).., xs.., k..]`, where `xs_j` has shape `[T, ..x_j]`.
//! A node has one value, so the loop's results are *packed* into one 1-D
//! tensor of the loop's dtype (see [`LoopOp::segments`]):
//! `[c(T)_1.., ys_1.., ys_p]` flattened and concatenated, `ys_j: [T, ..y_j]`.
//! Builders and rules read them back with `slice` + `reshape`
//! ([`unpack`]). All carries, per-step outputs and floating-point operands
//! share the loop's dtype; integer and bool per-step inputs and invariants
//! are allowed (they carry no derivative).
//!
//! [`LoopKind::Adjoint`] is the reverse mode of a scan: operands
//! `[c(0).., xs.., k.., c̄(T).., ȳs..]`, packed result `[c̄(0).., x̄s (float
//! xs).., k̄ (float invariants)..]`. Its `vjp` graph is the body's
//! reverse-mode step `[c, x, k, c̄', ȳ] → [c̄, x̄, k̄]`; the runtime runs it
//! backwards over carries it recomputes from at most `checkpoints` stored
//! ones ([`schedule`], binomial checkpointing). Its own derivatives are
//! adjoints of the scan's JVP, checkpointed too; its [`lower`]ing into two
//! scans that store every carry says what it computes.
//!
//! Invariants (checked by [`LoopOp::scan`] and [`LoopOp::adjoint`], re-checked
//! by `Graph::verify` through [`infer`](crate::infer())): the body verifies;
//! carry types match; `length >= 1`; `1 <= checkpoints <= length`.

pub mod hoist;
pub mod lower;
pub mod residuals;
pub mod schedule;
pub mod spine;
mod validated;

use std::fmt;
use std::sync::Arc;

use crate::{DType, Error, Graph, NodeId, Result, Shape, TensorType};

/// A loop; see the module docs for the body's conventions.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopOp {
    /// Shown in IR dumps and errors: where the loop was written, e.g.
    /// ``scan at src/main.rs:12:5``.
    pub name: String,
    /// The step: inputs `[c.., x.., k..]`, outputs `[c'.., y..]`.
    pub body: Graph,
    /// Number of carries `n`.
    pub carries: usize,
    /// Number of per-step inputs `k`.
    pub xs: usize,
    /// Number of steps `T >= 1`.
    pub length: usize,
    /// Whether the steps visit `xs` (and fill `ys`) from the end.
    pub reverse: bool,
    /// How many carries a reverse sweep may store at once (`1..=length`):
    /// the budget of this loop's adjoint, or of this adjoint.
    pub checkpoints: usize,
    /// `0`, or (set by the compiler's [`spine`](mod@spine) fusion, after
    /// differentiation) `K = schedule::spine(T, checkpoints).len()`: a scan
    /// also records, per carry, the `K` carries its adjoint's first descent
    /// would store (a `[K, ..c]` piece appended to its result); an adjoint
    /// takes that whole packed result as one more operand, reads them
    /// there in place and skips that descent. Loops with a spine have no
    /// derivative rules.
    pub spine: usize,
    /// `None`, or (set by the compiler's [`spine`](mod@spine) fusion, after
    /// differentiation, instead of a spine) the reverse step split in two
    /// ([`residuals`](mod@residuals)): a scan runs `forward` and appends
    /// every step's residuals to its result (the size of their `[T, ..r]`
    /// pieces, laid out step by step: a step's residuals side by side, so
    /// that a step writes and reads one contiguous run); an adjoint
    /// takes that whole packed result as one more operand and runs
    /// `backward` once per step, storing no carry and recomputing nothing.
    /// Such loops have no derivative rules.
    pub residuals: Option<Arc<residuals::Residuals>>,
    /// A forward loop or the reverse mode of one.
    pub kind: LoopKind,
}

/// What a loop node computes.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopKind {
    /// Runs the body `length` times.
    Scan,
    /// The reverse mode of the scan described by the other fields.
    Adjoint {
        /// `[c, x, k, c̄', ȳ] → [c̄, x̄ (float x), k̄ (float k)]`.
        vjp: Graph,
        /// The forward loop this is the reverse mode of.
        primal: LoopRef,
    },
}

/// A shared [`LoopOp`], compared and hashed by identity (as
/// [`CustomRef`](crate::CustomRef)), so that `Op` stays `Eq + Hash`.
#[derive(Clone, Debug)]
pub struct LoopRef(pub Arc<LoopOp>);

impl PartialEq for LoopRef {
    fn eq(&self, other: &LoopRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LoopRef {}

impl std::hash::Hash for LoopRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as usize).hash(state);
    }
}

impl std::ops::Deref for LoopRef {
    type Target = LoopOp;
    fn deref(&self) -> &LoopOp {
        &self.0
    }
}

impl fmt::Display for LoopRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = if self.reverse { " reverse" } else { "" };
        let kind = match self.kind {
            LoopKind::Scan => "loop",
            LoopKind::Adjoint { .. } => "loop_adjoint",
        };
        let spine = match (self.spine, &self.residuals) {
            (_, Some(_)) => " residuals",
            (0, None) => "",
            _ => " spine",
        };
        write!(
            f,
            "{kind} {} T={}{dir} checkpoints={}{spine}",
            self.name, self.length, self.checkpoints
        )
    }
}

/// The bytes of carries the default budget stores all of (16 MiB): a loop
/// whose `T` carries fit stores every one of them, as JAX's `scan` does.
pub const STORE_ALL_BYTES: usize = 16 << 20;

/// The default checkpoint budget of a loop of `length` steps whose carries
/// take `carry_bytes` bytes: every carry (`length`) when the `length`
/// carries take at most [`STORE_ALL_BYTES`], else
/// [`default_checkpoints`]`(length)` = `⌈√T⌉`. Storing every carry runs
/// the body once forward and once in the reverse sweep; `⌈√T⌉` bounds memory
/// for long or large loops at the price of recomputing each step up to
/// three more times.
///
/// ```
/// use rlx::core::loops::default_budget;
/// // an LSTM's state: 1025 f64, 1024 steps: 8.4 MB, stored
/// assert_eq!(default_budget(1024, 1025 * 8), 1024);
/// // 64 f64 over 10⁵ steps: 51 MB, checkpointed
/// assert_eq!(default_budget(100_000, 64 * 8), 317);
/// ```
pub fn default_budget(length: usize, carry_bytes: usize) -> usize {
    if length.saturating_mul(carry_bytes) <= STORE_ALL_BYTES {
        length.max(1)
    } else {
        default_checkpoints(length)
    }
}

/// The bytes of values of `types` together (saturating: a sum too large
/// for `usize` is `usize::MAX`, which no budget admits).
pub(crate) fn bytes(types: impl IntoIterator<Item = TensorType>) -> usize {
    types
        .into_iter()
        .map(|t| t.shape.numel().saturating_mul(t.dtype.size_in_bytes()))
        .fold(0, usize::saturating_add)
}

/// `⌈√T⌉` stored carries for `length` steps: the budget of a loop too long
/// or too large to store every carry (see [`default_budget`]).
///
/// ```
/// assert_eq!(rlx::core::loops::default_checkpoints(100_000), 317);
/// assert_eq!(rlx::core::loops::default_checkpoints(1), 1);
/// ```
pub fn default_checkpoints(length: usize) -> usize {
    let mut s = (length as f64).sqrt().ceil() as usize;
    while s * s < length {
        s += 1;
    }
    s.clamp(1, length.max(1))
}

impl LoopOp {
    /// A forward loop, validated against the conventions of the module docs.
    /// `checkpoints` is the budget of its reverse mode (default
    /// [`default_budget`]).
    ///
    /// ```
    /// use rlx::{DType, Graph, core::LoopOp};
    /// // c' = c * x_t, y_t = c: a running product of the rows of xs
    /// let mut b = Graph::new();
    /// let c = b.input("c", [2], DType::F64);
    /// let x = b.input("x", [2], DType::F64);
    /// let n = b.mul(c, x).unwrap();
    /// b.set_outputs(vec![n, c]);
    /// let l = LoopOp::scan("product", b, 1, 1, 5, false, None).unwrap();
    /// assert_eq!(l.out_type().shape.dims(), &[2 + 5 * 2]);
    /// ```
    pub fn scan(
        name: impl Into<String>,
        body: Graph,
        carries: usize,
        xs: usize,
        length: usize,
        reverse: bool,
        checkpoints: Option<usize>,
    ) -> Result<LoopRef> {
        let mut l = LoopOp {
            name: name.into(),
            body,
            carries,
            xs,
            length,
            reverse,
            checkpoints: checkpoints.unwrap_or(1),
            spine: 0,
            residuals: None,
            kind: LoopKind::Scan,
        };
        if checkpoints.is_none() && length > 0 && l.body.inputs().len() >= carries {
            l.checkpoints = default_budget(length, bytes(l.carry_types()));
        }
        let l = LoopRef(Arc::new(l));
        l.validate_once()?;
        Ok(l)
    }

    /// The reverse mode of the forward loop `primal`, whose body's
    /// reverse-mode step is `vjp` (see [`LoopKind::Adjoint`]), storing at
    /// most `primal.checkpoints` carries at once.
    pub fn adjoint(primal: &LoopRef, vjp: Graph) -> Result<LoopRef> {
        let l = LoopOp {
            kind: LoopKind::Adjoint {
                vjp,
                primal: primal.clone(),
            },
            ..(**primal).clone()
        };
        let l = LoopRef(Arc::new(l));
        l.validate_once()?;
        Ok(l)
    }

    fn err(&self, message: String) -> Error {
        Error::InvalidArgument {
            op: "loop",
            message: format!("{}: {message}", self.name),
        }
    }

    /// Checks the invariants of the module docs.
    pub fn validate(&self) -> Result<()> {
        let b = &self.body;
        b.verify()?;
        let (n_in, n_out) = (b.inputs().len(), b.outputs().len());
        if self.carries + self.xs > n_in {
            return Err(self.err(format!(
                "the body has {n_in} inputs, fewer than {} carries and {} per-step inputs",
                self.carries, self.xs
            )));
        }
        if self.carries > n_out {
            return Err(self.err(format!(
                "the body returns {n_out} values, fewer than its {} carries",
                self.carries
            )));
        }
        if n_out == 0 {
            return Err(self.err(
                "the body returns nothing: a loop needs a carry or a per-step output".into(),
            ));
        }
        if self.length == 0 {
            return Err(
                self.err("a loop of 0 steps: give at least one step (or skip the loop)".into())
            );
        }
        for (i, (want, got)) in self
            .carry_types()
            .iter()
            .zip(self.carry_out_types())
            .enumerate()
        {
            if *want != got {
                return Err(self.err(format!(
                    "carry {i} comes into the body as {}{} but the body returns it as {}{}\n  = help: a carry must keep its shape and dtype from step to step; reshape or cast it in the body",
                    want.dtype, want.shape, got.dtype, got.shape
                )));
            }
        }
        let d = self.dtype();
        if !d.is_inexact() {
            return Err(self.err(format!(
                "carries and per-step outputs must be floating-point, got {d}"
            )));
        }
        for (what, t) in self
            .carry_out_types()
            .into_iter()
            .chain(self.y_types())
            .map(|t| ("a carry or per-step output", t))
            .chain(self.input_types().into_iter().map(|t| ("an input", t)))
        {
            if t.dtype != d && (what != "an input" || t.dtype.is_inexact()) {
                return Err(self.err(format!(
                    "{what} has dtype {} but the loop's values are {d}\n  = help: cast every floating-point carry, per-step input and output of the loop to one dtype",
                    t.dtype
                )));
            }
        }
        check_checkpoints(&self.name, self.checkpoints, self.length)?;
        if let Some(r) = &self.residuals {
            self.validate_residuals(r)?;
        }
        if let LoopKind::Adjoint { vjp, .. } = &self.kind {
            vjp.verify()?;
            let mut ins = self.input_types();
            ins.extend(self.carry_types());
            ins.extend(self.y_types());
            let mut outs = self.carry_types();
            outs.extend(
                self.float_xs()
                    .into_iter()
                    .map(|j| self.x_types()[j].clone()),
            );
            outs.extend(
                self.float_consts()
                    .into_iter()
                    .map(|j| self.const_types()[j].clone()),
            );
            let got_in: Vec<TensorType> = vjp.input_ids().iter().map(|&i| vjp.ty(i)).collect();
            let got_out: Vec<TensorType> = vjp.outputs().iter().map(|&o| vjp.ty(o)).collect();
            if got_in != ins || got_out != outs {
                return Err(self.err("the reverse-mode step graph does not match the body".into()));
            }
        }
        Ok(())
    }

    /// Checks the split step `r` against the body (and the reverse step).
    fn validate_residuals(&self, r: &residuals::Residuals) -> Result<()> {
        let types = |g: &Graph, ids: &[NodeId]| -> Vec<TensorType> {
            ids.iter().map(|&i| g.ty(i)).collect()
        };
        let (f, b) = (&r.forward, &r.backward);
        f.verify()?;
        b.verify()?;
        let n_out = self.body.outputs().len();
        let body_out = types(&self.body, self.body.outputs());
        let f_out = types(f, f.outputs());
        let mut b_in = self.x_types();
        b_in.extend(self.const_types());
        b_in.extend(self.carry_types());
        b_in.extend(self.y_types());
        b_in.extend(r.types(n_out));
        let mut b_out = self.carry_types();
        let xt = self.x_types();
        b_out.extend(self.float_xs().into_iter().map(|j| xt[j].clone()));
        let kt = self.const_types();
        let fk = self.float_consts();
        let kept = |q: usize| r.hoisted.as_ref().is_none_or(|h| h.per_step[q]);
        if let Some(h) = &r.hoisted {
            hoist::check(self, b, h)?;
        }
        b_out.extend(
            fk.iter()
                .enumerate()
                .filter(|&(q, _)| kept(q))
                .map(|(_, &j)| kt[j].clone()),
        );
        let b_got = types(b, b.outputs());
        if self.spine > 0
            || types(f, &f.input_ids()) != self.input_types()
            || f_out.len() < n_out
            || f_out[..n_out] != body_out[..]
            || types(b, &b.input_ids()) != b_in
            || b_got.len() < b_out.len()
            || b_got[..b_out.len()] != b_out[..]
            || (r.hoisted.is_none() && b_got.len() != b_out.len())
        {
            return Err(self.err("the split reverse step does not match the body".into()));
        }
        Ok(())
    }

    /// The graphs the runtime runs once per step: a scan's body (its
    /// `forward` half with residuals); an adjoint's body and reverse step,
    /// or with residuals only the `backward` half.
    pub fn step_graphs(&self) -> (&Graph, Option<&Graph>) {
        match (&self.kind, &self.residuals) {
            (LoopKind::Scan, Some(r)) => (&r.forward, None),
            (LoopKind::Scan, None) => (&self.body, None),
            (LoopKind::Adjoint { .. }, Some(r)) => (&r.backward, None),
            (LoopKind::Adjoint { vjp, .. }, None) => (&self.body, Some(vjp)),
        }
    }

    /// Whether the compiler fused this loop with its scan or adjoint (a
    /// spine or residuals): such a loop has no derivative rules.
    pub fn fused(&self) -> bool {
        self.spine > 0 || self.residuals.is_some()
    }

    /// The residuals' types (one step's values; empty without residuals).
    pub fn residual_types(&self) -> Vec<TensorType> {
        self.residuals
            .as_ref()
            .map_or_else(Vec::new, |r| r.types(self.body.outputs().len()))
    }

    /// Number of loop-invariant body inputs.
    pub fn consts(&self) -> usize {
        self.body.inputs().len() - self.carries - self.xs
    }

    /// Number of per-step outputs.
    pub fn ys(&self) -> usize {
        self.body.outputs().len() - self.carries
    }

    /// The types of the body's inputs `[c.., x.., k..]`.
    pub fn input_types(&self) -> Vec<TensorType> {
        self.body
            .input_ids()
            .iter()
            .map(|&i| self.body.ty(i))
            .collect()
    }

    /// Carry types.
    pub fn carry_types(&self) -> Vec<TensorType> {
        self.input_types()[..self.carries].to_vec()
    }

    /// Per-step input types (one step's slice).
    pub fn x_types(&self) -> Vec<TensorType> {
        self.input_types()[self.carries..self.carries + self.xs].to_vec()
    }

    /// Loop-invariant input types.
    pub fn const_types(&self) -> Vec<TensorType> {
        self.input_types()[self.carries + self.xs..].to_vec()
    }

    fn carry_out_types(&self) -> Vec<TensorType> {
        let o = self.body.outputs();
        o[..self.carries.min(o.len())]
            .iter()
            .map(|&i| self.body.ty(i))
            .collect()
    }

    /// Per-step output types (one step's value).
    pub fn y_types(&self) -> Vec<TensorType> {
        let o = self.body.outputs();
        o[self.carries..].iter().map(|&i| self.body.ty(i)).collect()
    }

    /// The loop's dtype: that of its first carry, or first per-step output.
    pub fn dtype(&self) -> DType {
        let o = self.body.outputs();
        o.first().map_or(DType::F64, |&i| self.body.dtype(i))
    }

    /// Indices (among the per-step inputs) of the floating-point ones.
    pub fn float_xs(&self) -> Vec<usize> {
        let t = self.x_types();
        (0..t.len()).filter(|&j| t[j].dtype.is_inexact()).collect()
    }

    /// Indices (among the invariants) of the floating-point ones.
    pub fn float_consts(&self) -> Vec<usize> {
        let t = self.const_types();
        (0..t.len()).filter(|&j| t[j].dtype.is_inexact()).collect()
    }

    /// The number of operands of the loop node.
    pub fn operand_count(&self) -> usize {
        let n = self.body.inputs().len();
        match self.kind {
            LoopKind::Scan => n,
            LoopKind::Adjoint { .. } => n + self.carries + self.ys() + usize::from(self.fused()),
        }
    }

    /// The spine pieces (one per carry, `[K, ..c]`): appended to a scan's
    /// result when [`LoopOp::spine`] is set; its adjoint reads them there.
    pub fn spine_types(&self) -> Vec<TensorType> {
        let k = self.spine;
        self.carry_types()
            .into_iter()
            .map(|t| TensorType::new(stacked(k, &t.shape), t.dtype))
            .collect()
    }

    /// The operand types the node must have, in order.
    pub fn operand_types(&self) -> Vec<TensorType> {
        let mut v = self.input_types();
        for t in &mut v[self.carries..self.carries + self.xs] {
            t.shape = stacked(self.length, &t.shape);
        }
        if let LoopKind::Adjoint { .. } = self.kind {
            v.extend(self.carry_types());
            v.extend(self.y_types().into_iter().map(|t| self.stacked_type(t)));
            if self.fused() {
                v.push(self.scan_type());
            }
        }
        v
    }

    fn stacked_type(&self, t: TensorType) -> TensorType {
        TensorType::new(stacked(self.length, &t.shape), t.dtype)
    }

    /// The packed result's pieces, in order (each stacked per step where
    /// it is per-step): for a scan `[c(T).., ys..]` (then a spine's or
    /// residuals' pieces; the residuals' region is laid out step by step,
    /// see [`LoopOp::residuals`]), for an adjoint
    /// `[c̄(0).., x̄s (float xs).., k̄ (float invariants)..]`.
    pub fn segments(&self) -> Vec<TensorType> {
        match self.kind {
            LoopKind::Scan => {
                let mut v = self.carry_types();
                v.extend(self.y_types().into_iter().map(|t| self.stacked_type(t)));
                if self.spine > 0 {
                    v.extend(self.spine_types());
                }
                let r = self.residual_types();
                v.extend(r.into_iter().map(|t| self.stacked_type(t)));
                v
            }
            LoopKind::Adjoint { .. } => {
                let mut v = self.carry_types();
                let xt = self.x_types();
                v.extend(
                    self.float_xs()
                        .into_iter()
                        .map(|j| self.stacked_type(xt[j].clone())),
                );
                let kt = self.const_types();
                v.extend(self.float_consts().into_iter().map(|j| kt[j].clone()));
                v
            }
        }
    }

    /// The packed type of the scan with this loop's body, length, spine and
    /// residuals: what a fused adjoint reads its spine or residuals from.
    fn scan_type(&self) -> TensorType {
        LoopOp {
            kind: LoopKind::Scan,
            ..self.clone()
        }
        .out_type()
    }

    /// The node's (packed, 1-D) type.
    pub fn out_type(&self) -> TensorType {
        // Saturating: a length × per-step size past every limit gives a
        // count that `infer`'s size check refuses (`Error::TooLarge`).
        let n = self
            .segments()
            .iter()
            .fold(0usize, |n, t| n.saturating_add(t.shape.numel()));
        TensorType::new([n], self.dtype())
    }

    /// Checks operand types against [`LoopOp::operand_types`] and gives the
    /// node's type (the `infer` arm of `Op::Loop`).
    pub fn infer(&self, operands: &[&TensorType]) -> Result<TensorType> {
        let want = self.operand_types();
        if want.len() != operands.len() {
            return Err(Error::Arity {
                op: "loop",
                expected: want.len(),
                got: operands.len(),
            });
        }
        let names = [
            "carry",
            "per-step input",
            "invariant",
            "carry cotangent",
            "output cotangent, spine or residual",
        ];
        for (i, (w, g)) in want.iter().zip(operands).enumerate() {
            if w != *g {
                let n = self.body.inputs().len();
                let (kind, j) = if i < self.carries {
                    (names[0], i)
                } else if i < self.carries + self.xs {
                    (names[1], i - self.carries)
                } else if i < n {
                    (names[2], i - self.carries - self.xs)
                } else if i < n + self.carries {
                    (names[3], i - n)
                } else {
                    (names[4], i - n - self.carries)
                };
                let hint = if kind == names[1] {
                    format!(
                        "\n  = help: a per-step input is sliced along its first axis, which must have the loop's length {}",
                        self.length
                    )
                } else {
                    String::new()
                };
                return Err(self.err(format!(
                    "{kind} {j} has type {}{}, expected {}{}{hint}",
                    g.dtype, g.shape, w.dtype, w.shape
                )));
            }
        }
        Ok(self.out_type())
    }
}

/// Checks a checkpoint budget for a loop of `length` steps.
pub fn check_checkpoints(name: &str, checkpoints: usize, length: usize) -> Result<()> {
    if checkpoints == 0 || checkpoints > length {
        return Err(Error::InvalidArgument {
            op: "loop",
            message: format!(
                "{name}: a checkpoint budget of {checkpoints} for a loop of {length} steps\n  = note: the reverse sweep stores between 1 (recompute everything) and {length} (store every carry) carries\n  = help: give a budget in 1..={length}, or leave it to the default (every carry when they fit in 16 MiB, else ⌈√T⌉ = {})",
                default_checkpoints(length)
            ),
        });
    }
    Ok(())
}

/// `[t, ..s]`.
pub fn stacked(t: usize, s: &Shape) -> Shape {
    let mut d = vec![t];
    d.extend_from_slice(s.dims());
    Shape::new(d)
}

/// Reads the pieces of a packed loop result `packed` (laid out as `segments`)
/// back as nodes of those types, with `slice` + `reshape`.
pub fn unpack(g: &mut Graph, packed: NodeId, segments: &[TensorType]) -> Result<Vec<NodeId>> {
    let mut out = Vec::with_capacity(segments.len());
    let mut off = 0;
    for s in segments {
        let n = s.shape.numel();
        let piece = g.slice_range(packed, off..off + n, 0)?;
        out.push(g.reshape(piece, s.shape.clone())?);
        off += n;
    }
    Ok(out)
}

/// Packs `pieces` into one 1-D value (the inverse of [`unpack`]).
pub fn pack(g: &mut Graph, pieces: &[NodeId]) -> Result<NodeId> {
    let mut flat = Vec::with_capacity(pieces.len());
    for &p in pieces {
        let n = g.try_node(p)?.shape.numel();
        flat.push(g.reshape(p, [n])?);
    }
    if flat.len() == 1 {
        return Ok(flat[0]);
    }
    g.concat(&flat, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DType, Op};

    /// c' = c * x_t, y_t = sin(c), over `[2]` values.
    fn body() -> Graph {
        let mut b = Graph::new();
        let c = b.input("c", [2], DType::F64);
        let x = b.input("x", [2], DType::F64);
        let n = b.mul(c, x).unwrap();
        let y = b.sin(c).unwrap();
        b.set_outputs(vec![n, y]);
        b
    }

    #[test]
    fn the_packed_result_holds_the_last_carry_and_the_stacked_outputs() {
        let l = LoopOp::scan("l", body(), 1, 1, 5, false, None).unwrap();
        assert_eq!(
            l.segments(),
            vec![
                TensorType::new([2], DType::F64),
                TensorType::new([5, 2], DType::F64)
            ]
        );
        // 5 carries of 2 f64 fit: all stored
        assert_eq!(l.checkpoints, 5);
        let mut g = Graph::new();
        let c0 = g.input("c0", [2], DType::F64);
        let xs = g.input("xs", [5, 2], DType::F64);
        let p = g.looped(l.clone(), &[c0, xs]).unwrap();
        let parts = unpack(&mut g, p, &l.segments()).unwrap();
        assert_eq!(g.shape(parts[1]).dims(), &[5, 2]);
        g.verify().unwrap();
        assert!(g.to_string().contains("loop l T=5"));
    }

    #[test]
    fn a_carry_that_changes_type_is_an_error_naming_the_loop_and_both_types() {
        let mut b = Graph::new();
        let c = b.input("c", [2], DType::F64);
        let d = b.concat(&[c, c], 0).unwrap();
        b.set_outputs(vec![d]);
        let e = LoopOp::scan("`scan` at x.rs:3:1", b, 1, 0, 4, false, None).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("x.rs:3:1") && m.contains("f64[2]") && m.contains("f64[4]"),
            "{m}"
        );
    }

    #[test]
    fn bad_lengths_budgets_and_operands_are_errors() {
        assert!(LoopOp::scan("l", body(), 1, 1, 0, false, None).is_err());
        for bad in [0, 6] {
            let m = LoopOp::scan("l", body(), 1, 1, 5, false, Some(bad))
                .unwrap_err()
                .to_string();
            assert!(
                m.contains(&format!("budget of {bad}")) && m.contains("1..=5"),
                "{m}"
            );
        }
        let l = LoopOp::scan("l", body(), 1, 1, 5, false, None).unwrap();
        let mut g = Graph::new();
        let c0 = g.input("c0", [2], DType::F64);
        let xs = g.input("xs", [4, 2], DType::F64);
        let m = g.push(Op::Loop(l), &[c0, xs]).unwrap_err().to_string();
        assert!(
            m.contains("per-step input 0") && m.contains("[4, 2]") && m.contains("[5, 2]"),
            "{m}"
        );
    }

    #[test]
    fn mixed_float_dtypes_are_refused() {
        let mut b = Graph::new();
        let c = b.input("c", [2], DType::F64);
        let x = b.input("x", [2], DType::F32);
        let xc = b.cast(x, DType::F64).unwrap();
        let n = b.mul(c, xc).unwrap();
        b.set_outputs(vec![n]);
        let m = LoopOp::scan("l", b, 1, 1, 3, false, None)
            .unwrap_err()
            .to_string();
        assert!(m.contains("f32"), "{m}");
    }

    #[test]
    fn a_length_whose_stacked_outputs_overflow_is_too_large_not_a_wrap() {
        // c' = 2c, y_t = sin(c) over `[2]`: the stacked `ys` of 2^62 steps
        // hold 2^63 elements, more than any tensor may have.
        let mut b = Graph::new();
        let c = b.input("c", [2], DType::F64);
        let n = b.add(c, c).unwrap();
        let y = b.sin(c).unwrap();
        b.set_outputs(vec![n, y]);
        let l = LoopOp::scan("l", b, 1, 0, 1 << 62, false, None).unwrap();
        let mut g = Graph::new();
        let c0 = g.input("c0", [2], DType::F64);
        let e = g.looped(l, &[c0]).unwrap_err();
        assert!(matches!(e.root(), crate::Error::TooLarge { .. }), "{e}");
    }
}
