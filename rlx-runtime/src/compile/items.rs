//! Item plans: a graph batched over axis 0 whose items are independent
//! (see [`rlx::core::vmap::unbatch`](rlx_core::vmap::unbatch)) runs the scalarised program of one
//! item (`small`) once per item, reading each item's rows in place and
//! writing its results straight into each output's rows.
//!
//! Against the batched plan this trades vectorised whole-tensor loops for
//! a straight-line program that keeps every intermediate value of an item
//! in registers: no buffer per intermediate, no pass over memory per
//! operation. It pays where an item has many intermediates (a Jacobian of
//! a long residual: the batched plan streams dozens of `[N, ..]` buffers),
//! and compiling one item instead of `N` keeps the first call independent
//! of the batch size.
//!
//! An item's program cannot fail while it runs: it is `F64` arithmetic
//! only (a graph with an index, a solve or an integer input declines the
//! item plan and runs batched, whose errors name the user's line). The
//! check of non-finite values runs on the batched graph, so its error
//! names the line too (`tests/debug_nans.rs`).
//!
//! Items are split over threads in contiguous ranges; each item's values
//! come from the same program on the same inputs, so every thread count
//! gives the same bits.

use rlx_core::vmap::Item;
use std::sync::Arc;

use rlx_core::{DType, Graph, Result, TensorType};

use crate::compile::base::env::concrete;
use crate::compile::base::parallel;
use crate::compile::base::parallel::window;
use crate::compile::base::stats::PlanStats;
use crate::compile::driver::prepare;
use crate::compile::executable::Executable;
use crate::compile::options::Options;
use crate::compile::small::io;
use crate::compile::small::program::Small;
use crate::storage::Storage;
use crate::tensor::Tensor;
use crate::value::Arg;

/// Inputs and outputs of an item plan, at most (their slices are held on
/// the stack).
const MAX_IO: usize = 8;

/// One item's program run over the items of a batch (see the module docs).
#[derive(Debug)]
pub(crate) struct Items {
    /// The scalarised program of one item.
    body: Small,
    /// The batch size.
    size: usize,
    /// Per input: its elements per item (batched) or in all (shared), and
    /// whether it is batched.
    inputs: Box<[(usize, bool)]>,
    /// Elements of each output per item.
    outputs: Box<[usize]>,
}

/// A batched output's elements, for the parts of a threaded run.
#[derive(Clone, Copy)]
struct Rows(*mut f64, usize);

// SAFETY: each part writes the rows of its own items only (see `run_items`).
unsafe impl Send for Rows {}
unsafe impl Sync for Rows {}

impl Items {
    /// The item plan of `item` (the item graph of a batched graph and its
    /// batch size), or `None` unless every input and output is `F64`,
    /// there are at most [`MAX_IO`] of each, and one item's graph
    /// scalarises to one program (of at least `min_ops` element
    /// operations before optimisation).
    pub(crate) fn build(item: &Item, options: &Options, min_ops: usize) -> Option<Items> {
        let g = &item.graph;
        if !options.scalarize
            || item.batched.len() != g.inputs().len()
            || g.inputs().len() > MAX_IO
            || g.outputs().len() > MAX_IO
            || !(g.inputs().iter().map(|i| &i.node))
                .chain(g.outputs())
                .all(|&id| g.dtype(id) == DType::F64)
        {
            return None;
        }
        let (prepared, _) = prepare(g).ok()?;
        let body = Small::build_from(&prepared, options, min_ops)?;
        let inputs = (g.inputs().iter().zip(&item.batched))
            .map(|(i, &b)| (g.shape(i.node).numel(), b))
            .collect();
        let outputs = g.outputs().iter().map(|&o| g.shape(o).numel()).collect();
        Some(Items {
            body,
            size: item.size,
            inputs,
            outputs,
        })
    }

    /// The declared types of the batched graph: those of the item graph
    /// `g` with the batch axis restored on batched inputs and on outputs.
    pub(crate) fn batched_types(item: &Item) -> (Vec<TensorType>, Vec<TensorType>) {
        let g = &item.graph;
        let batched = |id, b: bool| {
            let mut t = g.ty(id);
            if b {
                let mut d = t.shape.dims().to_vec();
                d[0] = item.size;
                t.shape = rlx_core::Shape::new(d);
            }
            t
        };
        let ins = (g.inputs().iter().zip(&item.batched))
            .map(|(i, &b)| batched(i.node, b))
            .collect();
        let outs = g.outputs().iter().map(|&o| batched(o, true)).collect();
        (ins, outs)
    }

    /// The item program's counts, with [`PlanStats::item_runs`] the batch size.
    pub(crate) fn stats(&self) -> PlanStats {
        PlanStats {
            item_runs: self.size,
            ..self.body.stats()
        }
    }

    /// Runs on checked arguments, writing into `outputs` (one `F64`
    /// storage of each output's size). Allocates nothing.
    pub(crate) fn run_storages<'a>(
        &self,
        args: impl Iterator<Item = Arg<'a>>,
        outputs: &mut [Storage],
    ) {
        self.run_on(args, outputs.iter_mut());
    }

    /// Runs on checked input tensors, writing into checked output tensors.
    /// Allocates nothing (unless an output's storage is shared: it is
    /// copied first).
    pub(crate) fn run_tensors(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<()> {
        let mut rows = [Rows(std::ptr::null_mut(), 0); MAX_IO];
        for (r, t) in rows.iter_mut().zip(outputs.iter_mut()) {
            *r = raw(t.storage_mut()?);
        }
        self.run_rows(
            inputs.iter().map(|&t| Arg::Tensor(t)),
            &rows[..outputs.len()],
        );
        Ok(())
    }

    /// [`Items::run_storages`] over any mutable storages.
    fn run_on<'a, 's>(
        &self,
        args: impl Iterator<Item = Arg<'a>>,
        outputs: impl Iterator<Item = &'s mut Storage>,
    ) {
        let mut rows = [Rows(std::ptr::null_mut(), 0); MAX_IO];
        let mut count = 0;
        for (r, s) in rows.iter_mut().zip(outputs) {
            *r = raw(s);
            count += 1;
        }
        self.run_rows(args, &rows[..count]);
    }

    /// Runs on checked arguments (`F64` tensors or numbers, at most
    /// [`MAX_IO`]), writing into the outputs `outs`.
    fn run_rows<'a>(&self, args: impl Iterator<Item = Arg<'a>>, outs: &[Rows]) {
        let mut numbers = [0.0f64; MAX_IO];
        let mut tensors: [Option<&'a Tensor>; MAX_IO] = [None; MAX_IO];
        let mut count = 0;
        for (k, a) in args.take(MAX_IO).enumerate() {
            match a {
                Arg::Tensor(t) => tensors[k] = Some(t),
                Arg::F64(v) => numbers[k] = v,
                Arg::F32(v) => numbers[k] = v as f64,
            }
            count = k + 1;
        }
        let mut ins: [&[f64]; MAX_IO] = [&[]; MAX_IO];
        for (k, slot) in ins[..count].iter_mut().enumerate() {
            *slot = match tensors[k].map(concrete) {
                Some(Storage::F64(v)) => v,
                // Inputs are F64 (checked against the declared types).
                Some(_) => &[],
                None => std::slice::from_ref(&numbers[k]),
            };
        }
        self.run_items(&ins[..count], outs);
    }

    /// Runs every item: item `i` reads row `i` of each batched input in
    /// `ins` (all of each shared one) and writes row `i` of each output.
    fn run_items(&self, ins: &[&[f64]], outs: &[Rows]) {
        let work = self.size * self.outputs.iter().sum::<usize>();
        let parts = parallel::parts_for(work).min(self.size).max(1);
        let range = |p: usize| (self.size * p / parts, self.size * (p + 1) / parts);
        let part = |p: usize| {
            let (lo, hi) = range(p);
            self.run_range(lo, hi, ins, outs);
        };
        parallel::run(parts, &part);
    }

    /// Items `lo..hi` (see [`Items::run_items`]).
    fn run_range(&self, lo: usize, hi: usize, ins: &[&[f64]], outs: &[Rows]) {
        // One batched input and one output: rows in place.
        if let ([(k, true)], [m], [x], [out]) = (&*self.inputs, &*self.outputs, ins, outs) {
            for i in lo..hi {
                // SAFETY: row `i` of the output belongs to this part alone,
                // and the storage is borrowed by the caller until the run ends.
                let row = unsafe { window(out.0, out.1, i * m, *m) };
                self.body.run_flat(&x[i * k..(i + 1) * k], row);
            }
            return;
        }
        let n_in: usize = self.inputs.iter().map(|p| p.0).sum();
        let n_out: usize = self.outputs.iter().sum();
        io::with_stack(n_in, |flat| {
            // Shared inputs once, batched rows per item.
            let mut at = 0;
            for (&(k, b), x) in self.inputs.iter().zip(ins) {
                if !b {
                    flat[at..at + k].copy_from_slice(x);
                }
                at += k;
            }
            io::with_stack(n_out, |res| {
                for i in lo..hi {
                    let mut at = 0;
                    for (&(k, b), x) in self.inputs.iter().zip(ins) {
                        if b {
                            flat[at..at + k].copy_from_slice(&x[i * k..(i + 1) * k]);
                        }
                        at += k;
                    }
                    self.body.run_flat(flat, res);
                    let mut at = 0;
                    for (&m, out) in self.outputs.iter().zip(outs) {
                        // SAFETY: as above.
                        let row = unsafe { window(out.0, out.1, i * m, m) };
                        row.copy_from_slice(&res[at..at + m]);
                        at += m;
                    }
                }
            })
        })
    }
}

/// Element operations of one item from which its item plan beats the
/// batched plan. The batched plan's fused loops are vectorised, the item
/// program is not, so short items go faster batched: 1 thread, the
/// device Jacobian of `benches/medium.rs` (32 operations an item) took
/// 391 µs for 10 000 devices as an item plan against 183 µs batched. A
/// long item's batched plan streams dozens of batch-sized intermediates
/// through memory: the reprojection Jacobian (305 operations an item)
/// took 4.5 ms for 30 000 observations as an item plan against 25 ms.
pub(crate) const PAYS_FROM: usize = 128;

impl Executable {
    /// Whether this is an item plan whose item is long enough to run
    /// faster than the batched plan of the same graph (see [`PAYS_FROM`]).
    pub(crate) fn item_plan_pays(&self) -> bool {
        self.items
            .as_ref()
            .is_some_and(|i| i.body.stats().scalar_nodes >= PAYS_FROM)
    }
}

/// An `F64` output storage as a raw pointer and length.
fn raw(s: &mut Storage) -> Rows {
    match s {
        Storage::F64(v) => Rows(v.as_mut_ptr(), v.len()),
        // Outputs are F64 (checked when the plan was built).
        _ => Rows(std::ptr::null_mut(), 0),
    }
}

/// Compiles `item` (the item graph of `batched`, see
/// [`rlx::core::vmap::unbatch`](rlx_core::vmap::unbatch)) into an executable of `batched` that runs
/// one item's scalarised program once per item: the results of
/// [`compile_with`](crate::compile::driver::compile_with) on `batched`, item by item.
/// `Ok(None)` when there is no such plan: an input or output is not `F64`,
/// there are more than 8 of either, one item's graph is not small enough
/// to scalarise (see [`Options::scalarize`]), or `item` does not have
/// `batched`'s types with the batch axis set to 1.
///
/// [`PlanStats::item_runs`] of the executable is the batch size; its other
/// counts describe one item's program.
///
/// ```
/// use rlx::compile::{compile_items, Options};
/// use rlx::{DType, Graph, Tensor};
/// let mut g = Graph::new();
/// let x = g.input("x", [1000, 2], DType::F64);
/// let s = g.sin(x).unwrap();
/// let y = g.mul(s, x).unwrap();
/// g.set_outputs(vec![y]);
/// let item = rlx::core::vmap::unbatch(&g, 1000).unwrap();
/// let exe = compile_items(&g, &item, &Options::default()).unwrap().unwrap();
/// assert_eq!(exe.stats().item_runs, 1000);
/// let xs: Vec<f64> = (0..2000).map(|i| i as f64 * 1e-3).collect();
/// let out = exe.run(&[&Tensor::from_slice(&xs, [1000, 2])]).unwrap();
/// assert_eq!(out[0].to_vec::<f64>().unwrap()[7], xs[7].sin() * xs[7]);
/// ```
pub fn compile_items(
    batched: &Graph,
    item: &Item,
    options: &Options,
) -> Result<Option<Executable>> {
    let exe = compile_items_owned(Batched::Graph(batched), item, options, 0)?;
    Ok(exe.map(|mut e| {
        e.source = Some(Arc::new(batched.clone()));
        e
    }))
}

/// What an item plan is checked against: the batched graph, or only the
/// types of its inputs when the graph itself is not made (a
/// `batch_jacobian_` companion: its item is the same transform of one
/// item of the function, whose outputs are the batched graph's with a
/// batch of 1 by construction).
pub(crate) enum Batched<'a> {
    /// The batched graph: the types of its inputs and outputs.
    Graph(&'a Graph),
    /// The types of the batched graph's inputs.
    Inputs(&'a [TensorType]),
}

/// [`compile_items`] keeping no copy of the batched graph (see
/// [`compile_owned`](crate::compile::driver::compile_owned)), declining items of fewer than
/// `min_ops` element operations before optimisation (cheaply: before the
/// program is optimised and compiled).
pub(crate) fn compile_items_owned(
    batched: Batched<'_>,
    item: &Item,
    options: &Options,
    min_ops: usize,
) -> Result<Option<Executable>> {
    let (ins, outs) = Items::batched_types(item);
    let same = match batched {
        Batched::Graph(g) => {
            let declared = |ids: &[rlx_core::NodeId], want: &[TensorType]| {
                ids.len() == want.len() && ids.iter().zip(want).all(|(&id, w)| g.ty(id) == *w)
            };
            declared(&g.input_ids(), &ins) && declared(g.outputs(), &outs)
        }
        Batched::Inputs(types) => types == &ins[..],
    };
    if !same {
        return Ok(None);
    }
    let Some(items) = Items::build(item, options, min_ops) else {
        return Ok(None);
    };
    let mut plan = crate::compile::plan::Plan::types_only(&item.graph);
    plan.input_types = ins;
    plan.output_types = outs;
    let mut exe = Executable::from_plan(plan)?;
    exe.items = Some(Box::new(items));
    Ok(Some(exe))
}
