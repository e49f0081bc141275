//! Scalarised plans: a graph of small tensors run as one straight-line
//! scalar program over its elements (see `planner::scalarize` for the
//! lowering and its limits).
//!
//! A [`Small`] holds the executable of the element graph (whose plan is a
//! scalar program: one scalar region, compiled to native code with the
//! `jit` feature) and the map from its results to the elements of the
//! caller's outputs. A call reads the input tensors' storage (or the
//! numbers) into a flat list of `f64` on the stack, runs the program, and
//! writes the results into the output tensors: no per-call state, no
//! `Env`, no allocation but the returned tensors.

use rlx_core::{DType, Graph, NodeId, Op, Result, TensorType};

use crate::buffer::Buffer;
use crate::compile::base::env::concrete;
use crate::compile::base::stats::PlanStats;
use crate::compile::driver::optimize;
#[cfg(feature = "jit")]
use crate::compile::executable::DirectCall;
use crate::compile::executable::Executable;
use crate::compile::options::Options;
#[cfg(feature = "jit")]
use crate::compile::plan::{Plan, StepKind};
use crate::compile::planner;
use crate::compile::scalar::step;
use crate::compile::small::call::SmallCall;
use crate::compile::small::flat::Flat;
use crate::compile::small::io::{program, read, read_args, with_inputs, with_stack, write};
use crate::context::current_id;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::{is_number, Arg, Values};

/// Where an element of an output comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Result `k` of the element program.
    Computed(u32),
    /// Input element `k` (flat over all inputs).
    Input(u32),
    /// A constant (after element-level folding), held as its dtype holds it.
    Const(f64),
}

/// The outputs of a scalarised plan from the element program's results:
/// the constants are copied in one block from `template`, then each
/// computed or input element is put at its place. (A symmetric Hessian
/// has many constant and repeated entries: one `match` per output element
/// was most of a warm `hessian_` call at n = 10.)
#[derive(Debug)]
struct Fill {
    /// Every output element: its constant, or 0 where it is computed or an input.
    template: Box<[f64]>,
    /// `(output element, program result)` pairs.
    computed: Box<[(u32, u32)]>,
    /// `(output element, input element)` pairs.
    inputs: Box<[(u32, u32)]>,
}

impl Fill {
    fn new(sources: &[Source]) -> Fill {
        let mut template = vec![0.0; sources.len()];
        let (mut computed, mut inputs) = (Vec::new(), Vec::new());
        for (o, s) in sources.iter().enumerate() {
            match *s {
                Source::Computed(k) => computed.push((o as u32, k)),
                Source::Input(k) => inputs.push((o as u32, k)),
                Source::Const(v) => template[o] = v,
            }
        }
        Fill {
            template: template.into(),
            computed: computed.into(),
            inputs: inputs.into(),
        }
    }

    /// Writes the output elements `start..start + out.len()` (flat over
    /// all outputs) into `out` from the program's `computed` results and
    /// the flat inputs `ins`.
    #[inline]
    fn run(&self, start: usize, ins: &[f64], computed: &[f64], out: &mut [f64]) {
        out.copy_from_slice(&self.template[start..start + out.len()]);
        self.put(start, ins, computed, out);
    }

    /// [`Fill::run`] into an `out` already holding the template's elements.
    #[inline]
    fn put(&self, start: usize, ins: &[f64], computed: &[f64], out: &mut [f64]) {
        for &(o, k) in &*self.computed {
            if let Some(slot) = out.get_mut((o as usize).wrapping_sub(start)) {
                *slot = computed[k as usize];
            }
        }
        for &(o, k) in &*self.inputs {
            if let Some(slot) = out.get_mut((o as usize).wrapping_sub(start)) {
                *slot = ins[k as usize];
            }
        }
    }
}

/// A scalarised plan (see the module docs).
#[derive(Debug)]
pub(crate) struct Small {
    /// The element graph's executable; `None` when no output element is
    /// computed (all are inputs or constants).
    exe: Option<Executable>,
    /// How the outputs are filled when they are not the program's results
    /// in order (see [`Fill`]).
    fill: Fill,
    /// Whether output element `k` is result `k` of the element program for
    /// every `k`: the program then writes the outputs in place.
    direct: bool,
    /// Elements of each output of the caller's graph.
    out_lens: Box<[usize]>,
    /// Input elements, over all inputs.
    n_in: usize,
    /// Results of the element program.
    n_computed: usize,
    /// Nodes of the caller's (optimised) graph lowered to elements.
    pub(crate) lowered_nodes: usize,
    /// For a plan that is not `direct`: native code writing the computed
    /// and input elements of the last output straight to their places
    /// (see [`Placed`]).
    #[cfg(feature = "jit")]
    placed: Option<Placed>,
}

/// Native code of a scalarised plan's element program whose stores write
/// each result straight to its places in a window of the flat outputs
/// (`start..start + len`): a result repeated in the outputs (a symmetric
/// Hessian's entries) is stored at each of its places, an input element
/// right after the loads. The window's constants come from
/// [`Fill::template`], copied first. The same instructions as the
/// program's own native code, only with more stores and other targets, so
/// the same bits; it replaces [`Fill::put`]'s loop over index pairs (one
/// bounds-checked copy per computed element, most of a warm `hessian_`).
#[cfg(feature = "jit")]
#[derive(Debug)]
struct Placed {
    native: std::sync::Arc<crate::compile::scalar::native::call::Native>,
    start: usize,
    len: usize,
    /// Whether every output element outside the window is a constant
    /// (the template's): then the window's code alone, after a copy of
    /// the template, writes every output (a `hessian_`, whose skipped
    /// value is a zero).
    covers: bool,
}

#[cfg(feature = "jit")]
impl Placed {
    /// The placed code of `plan` (the element program, one scalar region
    /// over its inputs and outputs in order, long enough to be worth
    /// compiling) for the window `start..start + len` of `sources`; `None`
    /// if the program is not such a region, an input element of the window
    /// is not loaded, or the code does not compile to one function. The
    /// region itself need not have native code. `covers`: whether every
    /// source outside the window is a constant (see [`Placed::covers`]).
    fn new(
        plan: &Plan,
        sources: &[Source],
        start: usize,
        len: usize,
        covers: bool,
    ) -> Option<Placed> {
        use crate::compile::scalar::code::SInstr;
        let prog = plan.scalar_program.as_ref()?;
        let StepKind::Scalar(region) = &plan.steps.first()?.kind else {
            return None;
        };
        let compiles = planner::worth_compiling(&region.code);
        if !compiles || !prog.loads_are_inputs || !prog.stores_are_outputs {
            return None;
        }
        let window = sources.get(start..start + len)?;
        // The places of each program result, and the (input, place) pairs.
        let mut places: Vec<Vec<u32>> = vec![Vec::new(); plan.output_types.len()];
        let mut inputs = Vec::new();
        for (o, s) in window.iter().enumerate() {
            match *s {
                Source::Computed(k) => places.get_mut(k as usize)?.push(o as u32),
                Source::Input(i) => inputs.push((i, o as u32)),
                Source::Const(_) => {}
            }
        }
        let load_dsts: Vec<u32> = (region.code.iter())
            .filter_map(|i| match i {
                SInstr::Load { dst, .. } => Some(*dst),
                _ => None,
            })
            .collect();
        let mut input_stores = Vec::with_capacity(inputs.len());
        for &(i, o) in &inputs {
            let j = prog.input_of_load.iter().position(|&l| l == i)?;
            input_stores.push(SInstr::Store {
                src: *load_dsts.get(j)?,
                target: o,
            });
        }
        let mut code = Vec::with_capacity(region.code.len() + len);
        let mut loading = true;
        for ins in &region.code {
            if loading && !matches!(ins, SInstr::Load { .. }) {
                // Stores have no result: a following read of the
                // accumulator still reads the last load.
                code.append(&mut input_stores);
                loading = false;
            }
            match *ins {
                SInstr::Store { src, target } => {
                    for &o in places.get(target as usize)? {
                        code.push(SInstr::Store { src, target: o });
                    }
                }
                _ => code.push(ins.clone()),
            }
        }
        code.append(&mut input_stores);
        let native =
            crate::compile::scalar::native::compile(&code, region.len, &region.consts, len)?;
        // One function with no spill buffer, or the caller could not call
        // it whole: not worth keeping.
        (native.is_whole(native.loads(), len)).then(|| Placed {
            native: std::sync::Arc::new(native),
            start,
            len,
            covers,
        })
    }
}

impl Small {
    /// The scalarised plan of `g` (prepared: inlined and optimised), or
    /// `None` if `g` is not small or its element graph does not plan to a
    /// single scalar program.
    pub(crate) fn build(g: &Graph, options: &Options) -> Option<Small> {
        Small::build_from(g, options, 0)
    }

    /// [`Small::build`], or `None` as soon as the lowered element graph
    /// has fewer than `min_nodes` nodes (before it is optimised and
    /// compiled: a caller that only wants long programs pays little for
    /// short ones).
    pub(crate) fn build_from(g: &Graph, options: &Options, min_nodes: usize) -> Option<Small> {
        let eg = planner::scalarize::lower(g)?;
        if eg.len() < min_nodes {
            return None;
        }
        let n_in = eg.inputs().len();
        let (mut eg, _) = optimize(eg).ok()?;
        if eg.inputs().len() != n_in {
            return None;
        }
        let mut sources = Vec::with_capacity(eg.outputs().len());
        let mut computed: Vec<NodeId> = Vec::new();
        for &o in eg.outputs() {
            let n = eg.node(o);
            sources.push(match &n.op {
                Op::Input { index } => Source::Input(*index as u32),
                Op::Constant(lit) => Source::Const(step::round_to(n.dtype, lit.get_f64(0))),
                // Each computed element once (outputs repeat after CSE):
                // a plan with repeated outputs would copy them.
                _ => match computed.iter().position(|&c| c == o) {
                    Some(k) => Source::Computed(k as u32),
                    None => {
                        computed.push(o);
                        Source::Computed((computed.len() - 1) as u32)
                    }
                },
            });
        }
        let n_computed = computed.len();
        let direct = n_computed == sources.len()
            && (sources.iter().enumerate())
                .all(|(k, s)| matches!(*s, Source::Computed(c) if c as usize == k));
        let fill = Fill::new(&sources);
        let out_lens: Box<[usize]> = g
            .outputs()
            .iter()
            .map(|&o| g.node(o).shape.numel())
            .collect();
        let live = g.live_nodes().iter().filter(|&&l| l).count();
        eg.set_outputs(computed);
        let (total, last) = (sources.len(), out_lens.last().copied().unwrap_or(0));
        // The placed code of the last output alone (a warm `hessian_`'s one
        // result; all the outputs when there is one): each window is one
        // more compilation on the first call. When every output element
        // outside it is a constant, it is all that ever runs, and the
        // program's own native code is compiled only if the placed code
        // is not built.
        let place = cfg!(feature = "jit") && options.jit && !direct;
        let covers = (sources[..total - last].iter()).all(|s| matches!(s, Source::Const(_)));
        let placed_only = place && covers;
        #[cfg(feature = "jit")]
        let mut placed = None;
        let exe = if n_computed == 0 {
            None
        } else {
            let origins: Vec<NodeId> = (0..eg.len() as u32).map(NodeId).collect();
            // All 0-d: no scalar region of small tensors to look for.
            let options = Options {
                scalarize: false,
                jit: options.jit && !placed_only,
                ..options.clone()
            };
            #[cfg_attr(not(feature = "jit"), allow(unused_mut))]
            let mut plan = planner::build(&eg, &origins, &options).ok()?;
            plan.scalar_program.as_ref()?;
            #[cfg(feature = "jit")]
            if place {
                placed = Placed::new(&plan, &sources, total - last, last, covers);
                if placed_only {
                    match placed {
                        // The program runs as native code, placed.
                        Some(_) => plan.stats.native_regions += 1,
                        None => planner::compile_native(&mut plan),
                    }
                }
            }
            Some(Executable::from_plan(plan).ok()?)
        };
        Some(Small {
            exe,
            fill,
            direct,
            out_lens,
            n_in,
            n_computed,
            lowered_nodes: live,
            #[cfg(feature = "jit")]
            placed,
        })
    }

    /// The element program's counts, with the lowered nodes.
    pub(crate) fn stats(&self) -> PlanStats {
        let mut stats = self.exe.as_ref().map(|e| e.plan.stats).unwrap_or_default();
        stats.scalarized_nodes = self.lowered_nodes;
        stats
    }

    /// Runs the element program on the flat inputs `ins`, writing every
    /// output element (flat over all outputs) into `out`.
    pub(crate) fn run_flat(&self, ins: &[f64], out: &mut [f64]) {
        if let (true, Some(exe)) = (self.direct, &self.exe) {
            return program(exe, ins, out);
        }
        #[cfg(feature = "jit")]
        if let Some(p) = self.placed.as_ref().filter(|p| p.covers) {
            out.copy_from_slice(&self.fill.template);
            if let Some(window) = out.get_mut(p.start..p.start + p.len) {
                if self.run_placed(ins, p.start, window) {
                    return;
                }
            }
        }
        self.with_computed(ins, |computed| self.fill.run(0, ins, computed, out));
    }

    /// Writes the computed and input elements of the outputs' window
    /// `start..start + out.len()` into `out`, which holds the template's
    /// elements of that window, with [`Placed`] code for the window if
    /// there is one. `false`, writing nothing, otherwise.
    #[inline]
    fn run_placed(&self, ins: &[f64], start: usize, out: &mut [f64]) -> bool {
        #[cfg(feature = "jit")]
        if let Some(p) = &self.placed {
            if p.start == start && p.len == out.len() {
                return p.native.call_whole(ins, out);
            }
        }
        let _ = (ins, start, out);
        false
    }

    /// Runs the element program on `ins` into a buffer of its results on
    /// the stack, and calls `f` with them (for a plan that is not
    /// `direct`: its outputs are then filled by [`Fill`]).
    #[inline]
    fn with_computed<R>(&self, ins: &[f64], f: impl FnOnce(&[f64]) -> R) -> R {
        with_stack(self.n_computed, |computed| {
            if let Some(exe) = &self.exe {
                program(exe, ins, computed);
            }
            f(computed)
        })
    }

    /// The values of the last output, `n` elements from element `start`
    /// (flat over all outputs), written straight into a new vector: the
    /// one result of a `grad_`, `jacobian_` or `hessian_` of one tensor,
    /// or of a plain call. `None` for a `direct` plan with outputs before
    /// it (the program writes all of them in one block).
    #[inline]
    fn one_tensor(&self, ins: &[f64], start: usize, n: usize) -> Option<Buffer> {
        match (self.direct, &self.exe) {
            (true, Some(exe)) if start == 0 => {
                let mut b = crate::buffer::buffer_zeroed(n);
                program(exe, ins, b.unique_f64_mut()?);
                Some(b)
            }
            (true, Some(_)) => None,
            _ => {
                // The template's elements in one copy, then the others.
                let template = self.fill.template.get(start..start + n)?;
                let mut b = crate::buffer::buffer_from_slice(template);
                let v = b.unique_f64_mut()?;
                if !self.run_placed(ins, start, v) {
                    self.with_computed(ins, |computed| self.fill.put(start, ins, computed, v));
                }
                Some(b)
            }
        }
    }

    /// Runs on inputs already flat (`head` then `tail`, numbers only):
    /// the number path. `false` if the inputs or outputs are not numbers
    /// (one element each).
    pub(crate) fn run_numbers(&self, head: &[f64], tail: &[f64], out: &mut [f64]) -> bool {
        if head.len() + tail.len() != self.n_in || out.len() != self.fill.template.len() {
            return false;
        }
        if tail.is_empty() {
            self.run_flat(head, out);
            return true;
        }
        with_stack(self.n_in, |ins| {
            ins[..head.len()].copy_from_slice(head);
            ins[head.len()..].copy_from_slice(tail);
            self.run_flat(ins, out);
        });
        true
    }

    /// Runs on checked arguments (`head` then `tail`), pushing onto
    /// `values` numbers for 0-d outputs and new tensors for the others,
    /// except the first `skip` outputs, which are computed but not built
    /// (a `grad_` or `jacobian_` does not return the function's own
    /// value).
    pub(crate) fn run_args(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        types: &[TensorType],
        skip: usize,
        values: &mut Values,
    ) {
        // The trace id every result is created in, read once.
        let origin = current_id();
        self.run_built(head, tail, types, skip, origin, |flat| {
            flat.push_values(values)
        })
    }

    /// Runs on checked arguments (`head` then `tail`) and hands `build`
    /// the outputs after the first `skip`, which are computed but not
    /// built, to take each as a number or a tensor created in the trace
    /// `origin` (the caller read it from [`current_id`]). A single `f64`
    /// tensor argument is read in place, the others are copied to the
    /// stack; a single `f64` tensor result is written straight into its
    /// own values, the others are built from a buffer on the stack.
    #[inline]
    pub(crate) fn run_built<R>(
        &self,
        head: &[Arg<'_>],
        tail: &[Arg<'_>],
        types: &[TensorType],
        skip: usize,
        origin: u64,
        build: impl FnOnce(&mut Flat<'_>) -> R,
    ) -> R {
        let skip = skip.min(types.len());
        let start: usize = self.out_lens[..skip].iter().sum();
        let (types, lens) = (&types[skip..], &self.out_lens[skip..]);
        self.with_inputs(head, tail, |ins| {
            if let ([t], [n]) = (types, lens) {
                if t.dtype == DType::F64 && !is_number(t) {
                    if let Some(v) = self.one_tensor(ins, start, *n) {
                        return build(&mut Flat::new(&[], types, lens, Some(v), origin));
                    }
                }
            }
            with_stack(self.fill.template.len(), |out| {
                self.run_flat(ins, out);
                build(&mut Flat::new(&out[start..], types, lens, None, origin))
            })
        })
    }

    /// Calls `f` with the checked arguments (`head` then `tail`) as flat
    /// `f64` elements: a single `f64` tensor's own storage, or a copy on
    /// the stack.
    #[inline]
    fn with_inputs<R>(&self, head: &[Arg<'_>], tail: &[Arg<'_>], f: impl FnOnce(&[f64]) -> R) -> R {
        with_inputs(self.n_in, head, tail, f)
    }

    /// This plan's native code as a [`SmallCall`] for the warm calls of a
    /// pinned signature (outputs of `types`): the code writing every
    /// output (a `direct` plan), or the placed code of the last output.
    /// `None` without native code of either kind.
    pub(crate) fn call_handle(&self, types: &[TensorType]) -> Option<SmallCall> {
        let total = self.fill.template.len();
        if types.len() != self.out_lens.len() {
            return None;
        }
        #[cfg(feature = "jit")]
        {
            if let (true, Some(exe)) = (self.direct, &self.exe) {
                let call = exe.direct_call()?;
                return SmallCall::new(
                    call,
                    self.n_in,
                    0,
                    &self.fill.template,
                    false,
                    types,
                    &self.out_lens,
                );
            }
            if let Some(p) = &self.placed {
                let call = DirectCall::whole_of(&p.native)?;
                let window = self.fill.template.get(p.start..p.start + p.len)?;
                return SmallCall::new(
                    call,
                    self.n_in,
                    p.start,
                    window,
                    true,
                    types,
                    &self.out_lens,
                )
                .filter(|_| p.start + p.len == total);
            }
        }
        let _ = total;
        None
    }

    /// Runs on checked input tensors, writing into checked output tensors.
    /// Allocates nothing (unless an output's storage is shared, or the
    /// inputs, outputs or scratch exceed the stack buffers).
    pub(crate) fn run_tensors(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<()> {
        with_stack(self.n_in, |ins| {
            let mut at = 0;
            for t in inputs {
                at += read(concrete(t), &mut ins[at..]);
            }
            with_stack(self.fill.template.len(), |out| {
                self.run_flat(ins, out);
                let mut at = 0;
                for t in outputs.iter_mut() {
                    at += write(&out[at..], t.storage_mut()?);
                }
                Ok(())
            })
        })
    }

    /// Runs on checked arguments, writing into `outputs` (one storage of
    /// each output's dtype and size): the sparse companions' `*_into`
    /// forms. Allocates nothing (within the stack buffers' limits).
    pub(crate) fn run_storages<'a>(
        &self,
        args: impl Iterator<Item = Arg<'a>>,
        outputs: &mut [Storage],
    ) {
        self.run_filled(|ins| read_args(args, ins), outputs)
    }

    /// Runs on the flat inputs `fill` writes (widened to `f64`, into the
    /// zeroed slice it is given, one element per input element), writing
    /// into `outputs` (one storage of each output's dtype and size): the
    /// step of a scalar region inside a general plan. Allocates nothing
    /// (within the stack buffers' limits).
    pub(crate) fn run_filled(&self, fill: impl FnOnce(&mut [f64]), outputs: &mut [Storage]) {
        with_stack(self.n_in, |ins| {
            fill(ins);
            with_stack(self.fill.template.len(), |out| {
                self.run_flat(ins, out);
                let mut at = 0;
                for s in outputs.iter_mut() {
                    at += write(&out[at..], s);
                }
            })
        })
    }
}

#[cfg(all(test, feature = "jit"))]
mod tests {
    use super::*;
    use rlx_core::autodiff;

    /// `Σ 100 (x_{i+1} − x_i²)² + (1 − x_i)²` over `x: [n]`.
    fn rosenbrock(n: usize) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", [n], DType::F64);
        let head = g.slice_range(x, 0..n - 1, 0).unwrap();
        let tail = g.slice_range(x, 1..n, 0).unwrap();
        let h2 = g.square(head).unwrap();
        let d = g.sub(tail, h2).unwrap();
        let d2 = g.square(d).unwrap();
        let hundred = g.scalar(100.0, DType::F64);
        let a = g.mul(d2, hundred).unwrap();
        let one = g.scalar(1.0, DType::F64);
        let e = g.sub(one, head).unwrap();
        let e2 = g.square(e).unwrap();
        let s = g.add(a, e2).unwrap();
        let y = g.sum_all(s).unwrap();
        g.set_outputs(vec![y]);
        g
    }

    /// `[x, x² + sin x, 0, 2.5]` after `x`'s sum (outputs: a number, then
    /// a window holding input, computed and constant elements).
    fn mixed() -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", [3], DType::F64);
        let s = g.sum_all(x).unwrap();
        let x2 = g.square(x).unwrap();
        let sx = g.sin(x).unwrap();
        let c = g.add(x2, sx).unwrap();
        let z = g.zeros_like(x);
        let k = g.scalar(2.5, DType::F64);
        let k = g.reshape(k, [1]).unwrap();
        let y = g.concat(&[x, c, z, k], 0).unwrap();
        g.set_outputs(vec![s, y]);
        g
    }

    /// The last output's bits through [`Placed`] and through
    /// [`Fill::put`]'s index pairs, which it replaces.
    fn both_ways(small: &Small, ins: &[f64]) -> (Vec<u64>, Vec<u64>) {
        let n = *small.out_lens.last().unwrap();
        let start = small.fill.template.len() - n;
        let Storage::F64(placed) = small.one_tensor(ins, start, n).unwrap().into_storage() else {
            panic!("an f64 output");
        };
        let mut filled = small.fill.template[start..].to_vec();
        small.with_computed(ins, |c| small.fill.put(start, ins, c, &mut filled));
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect();
        (bits(placed), bits(filled))
    }

    #[test]
    fn placed_stores_give_the_bits_of_the_index_pairs() {
        let hess = autodiff::hessian(&rosenbrock(6), &[0]).unwrap();
        for (name, g) in [("hessian", hess), ("mixed", mixed())] {
            let (g, _) = crate::compile::driver::prepare(&g).unwrap();
            let small = Small::build(&g, &Options::default()).expect("small");
            assert!(!small.direct, "{name}");
            let p = small
                .placed
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: placed"));
            assert_eq!(p.len, *small.out_lens.last().unwrap());
            for seed in 0..20u32 {
                let ins: Vec<f64> = (0..small.n_in)
                    .map(|i| ((seed * 31 + i as u32 * 17) % 23) as f64 * 0.37 - 4.0)
                    .collect();
                let (placed, filled) = both_ways(&small, &ins);
                assert_eq!(placed, filled, "{name}, seed {seed}");
                // The whole outputs of a one-output plan (or the Fill path
                // of the others) agree too.
                let mut all = vec![0.0; small.fill.template.len()];
                small.run_flat(&ins, &mut all);
                let tail: Vec<u64> = all[all.len() - p.len..]
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert_eq!(tail, filled, "{name}, seed {seed}: run_flat");
            }
        }
    }

    /// A `hessian_` plan (its value output replaced by a zero, as
    /// `Transform::Hessian` makes it): the placed code covers every
    /// computed element, so it is the plan's only native code, and
    /// `run_flat` through it gives the bits of the interpreted program
    /// and [`Fill::run`].
    #[test]
    fn placed_code_alone_serves_a_hessian_plan() {
        let mut h = autodiff::hessian(&rosenbrock(7), &[0]).unwrap();
        let mut outputs = h.outputs().to_vec();
        outputs[0] = h.zeros_like(outputs[0]);
        h.set_outputs(outputs);
        let (g, _) = crate::compile::driver::prepare(&h).unwrap();
        let small = Small::build(&g, &Options::default()).expect("small");
        let p = small.placed.as_ref().expect("placed");
        assert!(p.covers && p.start == 1);
        let exe = small.exe.as_ref().unwrap();
        let StepKind::Scalar(region) = &exe.plan.steps[0].kind else {
            panic!("a scalar program");
        };
        assert!(region.native.is_none(), "compiled once, placed");
        assert_eq!(small.stats().native_regions, 1);
        for seed in 0..20u32 {
            let ins: Vec<f64> = (0..small.n_in)
                .map(|i| ((seed * 13 + i as u32 * 29) % 31) as f64 * 0.21 - 3.0)
                .collect();
            let mut placed = vec![f64::NAN; small.fill.template.len()];
            small.run_flat(&ins, &mut placed);
            let mut filled = vec![f64::NAN; placed.len()];
            small.with_computed(&ins, |c| small.fill.run(0, &ins, c, &mut filled));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&placed), bits(&filled), "seed {seed}");
            assert_eq!(placed[0], 0.0);
        }
        // With `jit` off, nothing is compiled.
        let off = Options {
            jit: false,
            ..Options::default()
        };
        let small = Small::build(&g, &off).expect("small");
        assert!(small.placed.is_none());
        assert_eq!(small.stats().native_regions, 0);
    }
}
