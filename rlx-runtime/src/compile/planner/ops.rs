//! The step of each op that is not element-wise: copies for movement ops,
//! reductions, matrix products (reading virtual transposes in place),
//! solves, scatter-adds with constant indices (checked here), and
//! reference kernels for the rest.

use rlx_core::{DType, Error, Op, Result, Shape};

use crate::compile::base::env::Val;
use crate::compile::fusion::io::Access;
use crate::compile::plan::{KernelStep, StepKind};
use crate::compile::planner::builder::Builder;
use crate::compile::planner::facts::contiguous;
use crate::compile::products::matmul::{MatMulStep, MatView};
use crate::compile::steps::movement::{merge_axes, CopyStep, Strided};
use crate::compile::steps::reduce::ReduceStep;
use crate::compile::steps::scatter::ScatterStep;
use crate::compile::steps::solve::SolveStep;
use crate::kernels::iter::split_at_axis;

/// The output stride of each axis of a reduction's operand `xs` (0 on
/// the reduced `axes`; `out` is the result's shape), and the number of
/// operand elements per result element.
pub(super) fn reduce_strides(xs: &Shape, axes: &[usize], out: &Shape) -> (Vec<usize>, usize) {
    let os = contiguous(out);
    let mut out_strides = Vec::with_capacity(xs.rank());
    let mut kept = 0;
    let mut count = 1;
    for d in 0..xs.rank() {
        if axes.contains(&d) {
            out_strides.push(0);
            count *= xs.dim(d);
        } else {
            out_strides.push(os[kept]);
            kept += 1;
        }
    }
    (out_strides, count)
}

impl Builder<'_> {
    /// The step of a non-element-wise node (one exhaustive table).
    pub(super) fn op_step(&mut self, i: usize, n: &rlx_core::Node) -> Result<()> {
        let arg = |k: usize| n.inputs[k].index();
        match &n.op {
            Op::Input { .. } | Op::Constant(_) | Op::Reshape { .. } | Op::StopGradient => {}
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Cast(_)
            | Op::Broadcast { .. } => {
                unreachable!("element-wise nodes are grouped")
            }
            Op::Slice { .. } | Op::Transpose { .. } if self.views[i].is_some() => {}
            Op::Transpose { perm } => {
                // Nothing to copy when the operand was written in place.
                let x = arg(0);
                if !self.virt[i] && self.places[x].is_none() {
                    let xs = contiguous(self.shape(x));
                    self.rank(perm.len());
                    let to = self.dest(i);
                    let part = Strided {
                        src: self.root[x],
                        src_off: 0,
                        src_strides: perm.iter().map(|&p| xs[p]).collect(),
                        dims: n.shape.dims().to_vec(),
                        dst_off: to.off,
                        dst_strides: to.strides,
                    };
                    let kind = StepKind::Copy(CopyStep::new(vec![part]));
                    self.push_to(i, to.node as usize, kind, vec![self.root[x]]);
                }
            }
            Op::Slice { .. } if self.windows[i].is_some() => {}
            Op::Slice { axis, start, .. } => {
                let x = arg(0);
                let xs = contiguous(self.shape(x));
                self.rank(xs.len());
                let part = Strided {
                    src: self.root[x],
                    src_off: start * xs[*axis],
                    src_strides: xs,
                    dims: n.shape.dims().to_vec(),
                    dst_off: 0,
                    dst_strides: contiguous(&n.shape),
                };
                self.push(i, StepKind::Copy(CopyStep::new(vec![part])), vec![self.root[x]]);
            }
            Op::Concat { axis } => {
                // Operands written in place need no copy.
                let to = self.dest(i);
                self.rank(n.shape.rank());
                let mut at = 0;
                let mut parts = Vec::new();
                let mut reads = Vec::new();
                for p in &n.inputs {
                    let s = self.shape(p.index());
                    if self.places[p.index()].is_none() {
                        // A view is read in place, through its strides.
                        let (src, src_off, src_strides) = match &self.views[p.index()] {
                            Some(v) => (v.base, v.off, v.strides.clone()),
                            None => (self.root[p.index()], 0, contiguous(s)),
                        };
                        parts.push(Strided {
                            src,
                            src_off,
                            src_strides,
                            dims: s.dims().to_vec(),
                            dst_off: to.off + at * to.strides[*axis],
                            dst_strides: to.strides.clone(),
                        });
                        reads.push(src);
                    }
                    at += s.dim(*axis);
                }
                if !parts.is_empty() {
                    let kind = StepKind::Copy(CopyStep::new(parts));
                    self.push_to(i, to.node as usize, kind, reads);
                }
            }
            Op::Reduce { op, axes } => {
                let x = arg(0);
                let xs = self.shape(x).clone();
                let (out_strides, count) = reduce_strides(&xs, axes, &n.shape);
                self.rank(xs.rank());
                let step = ReduceStep {
                    x: self.root[x],
                    op: *op,
                    dims: xs.dims().to_vec(),
                    out_strides,
                    out_numel: n.shape.numel(),
                    count,
                };
                if n.dtype != DType::I64 {
                    self.acc_len = self.acc_len.max(step.scratch_len());
                }
                self.push(i, StepKind::Reduce(step), vec![self.root[x]]);
            }
            // Computed by the epilogue step of the loop reading it.
            Op::MatMul if self.epilogues.product[i] => {}
            Op::MatMul => {
                let (step, reads) = self.matmul_step(n);
                self.push(i, StepKind::MatMul(step), reads);
            }
            Op::Solve => {
                let (a, bb) = (arg(0), arg(1));
                let s = self.shape(a).clone();
                let r = s.rank();
                let nn = s.dim(r - 1);
                let k = n.shape.dim(r - 1);
                self.solve = (self.solve.0.max(nn * nn), self.solve.1.max(nn * k));
                let step = SolveStep {
                    a: self.root[a],
                    b: self.root[bb],
                    batches: s.dims()[..r - 2].iter().product(),
                    a_shape: s,
                    n: nn,
                    k,
                    dtype: n.dtype,
                };
                self.push(i, StepKind::Solve(step), vec![self.root[a], self.root[bb]]);
            }
            // Read by its users' fused loops through the indices.
            Op::Gather { .. } if self.indexed[i].is_some() => {}
            Op::Gather { .. } | Op::ScatterAdd { .. } | Op::Softmax { .. } | Op::LogSoftmax { .. } => {
                if let Op::ScatterAdd { axis } = n.op {
                    if let Some(step) = self.scatter_step(n, axis) {
                        let reads = vec![step.operand, step.updates];
                        self.stats.checked_scatters += 1;
                        self.push(i, StepKind::Scatter(step), reads);
                        return Ok(());
                    }
                }
                self.kernel_step(i, n);
            }
            Op::Loop(l) => {
                let args: Vec<Val> = n.inputs.iter().map(|p| self.root[p.index()]).collect();
                let compiled = self
                    .loops
                    .remove(&i)
                    .expect("`build_verified` compiles every live loop node's graphs")?;
                let step = crate::compile::steps::looping::LoopStep::new(l.clone(), args.clone(), compiled);
                self.push(i, StepKind::Loop(step), args);
            }
            Op::SparseSolve(s) => {
                let (v, bb) = (arg(0), arg(1));
                let values = (self.root[v], self.shape(v).clone());
                let b = (self.root[bb], self.shape(bb).clone());
                let reads = vec![values.0, b.0];
                let step = crate::compile::steps::sparse_solve::SparseSolveStep::new(s.clone(), values, b);
                self.push(i, StepKind::SparseSolve(step), reads);
            }
            Op::Root(r) => {
                let args: Vec<Val> = n.inputs.iter().map(|p| self.root[p.index()]).collect();
                let compiled = self
                    .roots
                    .remove(&i)
                    .expect("`build_verified` compiles every live root node's graphs")?;
                let step = crate::compile::steps::root::RootStep::new(r.clone(), args.clone(), compiled);
                self.push(i, StepKind::Root(step), args);
            }
            Op::Custom(c) => {
                return Err(Error::Unsupported(format!(
                    "custom op `{}` reached the compiler un-inlined (compile runs `inline_custom` first)",
                    c.name
                )))
            }
        }
        Ok(())
    }

    /// A step running node `i`'s reference kernel ([`crate::kernels::eval_into`]).
    pub(super) fn kernel_step(&mut self, i: usize, n: &rlx_core::Node) {
        let args: Vec<(Val, Shape)> = n
            .inputs
            .iter()
            .map(|p| (self.root[p.index()], self.shape(p.index()).clone()))
            .collect();
        let reads = args.iter().map(|a| a.0).collect();
        let step = KernelStep {
            op: n.op.clone(),
            args,
            out_shape: n.shape.clone(),
        };
        self.push(i, StepKind::Kernel(step), reads);
    }

    /// The step of scatter-add `n` along `axis` when its indices are a
    /// constant and every one is in range (checked here, once); `None`
    /// leaves it to the kernel step, which checks them on every call.
    fn scatter_step(&self, n: &rlx_core::Node, axis: usize) -> Option<ScatterStep> {
        let nodes = self.g.nodes();
        let [x, idx, upd] = [0, 1, 2].map(|k| n.inputs[k].index());
        let Op::Constant(lit) = &nodes[idx].op else {
            return None;
        };
        if nodes[idx].dtype != DType::I64 || axis >= nodes[x].shape.rank() {
            return None;
        }
        let split = split_at_axis(nodes[x].shape.dims(), axis);
        let (count, parts) = (nodes[idx].shape.numel(), nodes[idx].shape.dims().first());
        let vals = (self.root[x], self.root[upd]);
        let step = ScatterStep::checked(vals, split, count, parts.copied().unwrap_or(1), |k| {
            lit.get_i64(k)
        })?;
        Some(match &nodes[x].op {
            Op::Constant(base) if matches!(nodes[x].dtype, DType::F64 | DType::F32) => {
                step.onto_zeros_if(nodes[x].shape.numel(), |k| base.get_f64(k))
            }
            _ => step,
        })
    }

    /// The step of matrix product `n` and the values it reads.
    pub(super) fn matmul_step(&mut self, n: &rlx_core::Node) -> (MatMulStep, Vec<Val>) {
        let arg = |k: usize| n.inputs[k].index();
        let (a, ar) = self.mat_view(arg(0), &n.shape);
        let (b, br) = self.mat_view(arg(1), &n.shape);
        let r = n.shape.rank();
        let step = MatMulStep {
            a,
            b,
            batch_dims: n.shape.dims()[..r - 2].to_vec(),
            m: n.shape.dim(r - 2),
            k: self.shape(arg(0)).dim(self.shape(arg(0)).rank() - 1),
            n: n.shape.dim(r - 1),
            dtype: n.dtype,
        };
        let h = step.half_scratch();
        self.half = (
            self.half.0.max(h.0),
            self.half.1.max(h.1),
            self.half.2.max(h.2),
        );
        (step, vec![ar, br])
    }

    /// A matmul operand as a strided view (a virtual transpose reads its
    /// operand with permuted strides), aligned to the output batch dims.
    pub(super) fn mat_view(&mut self, x: usize, out: &Shape) -> (MatView, Val) {
        let nodes = self.g.nodes();
        let (at, dims, strides) = if self.virt[x] {
            let Op::Transpose { perm } = &nodes[x].op else {
                unreachable!("virtual nodes are transposes")
            };
            let inner = nodes[x].inputs[0].index();
            let base = contiguous(self.shape(inner));
            (
                inner,
                nodes[x].shape.dims().to_vec(),
                perm.iter().map(|&p| base[p]).collect::<Vec<_>>(),
            )
        } else {
            let s = self.shape(x);
            (x, s.dims().to_vec(), contiguous(s))
        };
        // A window is contiguous, so any reshape of it keeps contiguous
        // strides: only the storage and the offset change.
        let (src, off) = match self.windows[self.root[at] as usize] {
            Some((operand, off)) => (self.root[operand], off),
            None => (self.root[at], 0),
        };
        let r = dims.len();
        let nb = out.rank() - 2;
        let batch_strides = (0..nb)
            .map(|d| {
                let lead = nb - (r - 2);
                if d < lead || dims[d - lead] == 1 {
                    0
                } else {
                    strides[d - lead]
                }
            })
            .collect();
        (
            MatView {
                val: src,
                off,
                batch_strides,
                rs: strides[r - 2],
                cs: strides[r - 1],
            },
            src,
        )
    }

    /// Where a loop over `shape` reads operand `p`: the value owning its
    /// storage, the element it starts at, and the access pattern (a view
    /// is read in place through its strides).
    pub(super) fn leaf_of(&mut self, p: usize, shape: &Shape) -> (Val, usize, Access) {
        if let Some(ix) = &self.indexed[p] {
            // Read through its indices: the gather's operand is never a
            // view (a view's users are all loop members).
            return (
                self.leaf_val(p),
                0,
                crate::compile::planner::indexed::access(ix),
            );
        }
        let ps = self.shape(p).clone();
        let (val, off, pst) = match &self.views[p] {
            Some(v) => (v.base, v.off, v.strides.clone()),
            None => (self.root[p], 0, contiguous(&ps)),
        };
        if ps.numel() == 1 {
            return (val, off, Access::Splat { whole: true });
        }
        if ps.numel() == shape.numel() && self.views[p].is_none() {
            return (val, off, Access::Contig);
        }
        let r = shape.rank();
        let pr = ps.rank();
        let strides: Vec<usize> = (0..r)
            .map(|d| {
                let lead = r - pr;
                if d < lead || ps.dim(d - lead) == 1 {
                    0
                } else {
                    pst[d - lead]
                }
            })
            .collect();
        self.rank(r);
        // Output axes of length 1 dropped, runs of axes merged: a
        // `[N, 1]` operand of a `[3, N, 1]` loop is read in runs of `N`.
        let (dims, mut st) = merge_axes(shape.dims(), &[&strides]);
        let strides = st.pop().expect("one stride list");
        if strides == [1] {
            // A contiguous run of the storage (a slice of leading rows).
            return (val, off, Access::Contig);
        }
        (val, off, Access::Broadcast { dims, strides })
    }
}
