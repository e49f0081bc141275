//! Sparse Jacobians and Hessians as graphs: the compressed program.
//!
//! From the graph's [`Pattern`] and a colouring
//! (see [`colouring`]), the derivative is computed as a
//! few products with a seed matrix, all batched in one execution with
//! `vmap` (as [`jacobian`](super::jacobian) batches basis vectors; a
//! bicolouring's forward and reverse products are two batches of one
//! program), then decompressed by a `gather` with constant indices into the
//! pattern's value array (which the compiler fuses into the loop that
//! computes the values). The result graph's outputs are the original outputs, then
//! one `[nnz]` vector of values in the pattern's storage order (compressed
//! sparse column). Everything symbolic (pattern, colouring, the graph) is
//! built once here; running the graph only fills values.

use super::{
    batched_jvp, batched_vjp, finish, float_wrt, grad_graph, out0, set_outputs, wrt_nodes,
};
use crate::colouring::{self, Bicolouring, Colouring};
use crate::sparsity::sets::broadcast_map;
use crate::sparsity::{hessian_pattern, jacobian_pattern, Pattern};
use crate::{DType, Error, Graph, Literal, NodeId, Op, Result};

mod constant_entries;
mod elements;

/// How a sparse derivative is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SparseMode {
    /// Column colouring, one forward-mode product per colour.
    Forward,
    /// Row colouring, one reverse-mode product per colour.
    Reverse,
    /// Star colouring of a symmetric Hessian, forward over reverse.
    Star,
    /// A bicolouring: forward products over some columns' colours and
    /// reverse products over some rows' colours, in one execution (see
    /// [`colouring::bicolouring`]).
    Bidirectional,
    /// Element assembly of a sum of element terms: forward over reverse
    /// products of each element's function, one per unknown it reads,
    /// scattered into the pattern (see the `elements` module); whatever
    /// else the objective adds, by a star colouring.
    Elements,
}

/// A sparse derivative's compiled form: the graph that computes its values
/// and the symbolic facts that go with them.
#[derive(Clone, Debug)]
pub struct SparseProgram {
    /// Outputs: the original outputs, then the `[nnz]` values in the
    /// pattern's storage order.
    pub graph: Graph,
    /// Where the values go: rows are the elements of output 0 (for a
    /// Hessian: of the inputs), columns the elements of the differentiated
    /// inputs, flattened row-major and concatenated.
    pub pattern: Pattern,
    /// The compression used.
    pub mode: SparseMode,
    /// Number of colours: products computed (batched in one execution).
    pub colours: usize,
}

/// The sparse Jacobian of output 0 with respect to the inputs at `wrt`,
/// by forward mode over column colours, reverse mode over row colours, or
/// both together over a bicolouring, whichever needs fewest products
/// (forward on a tie, bidirectional only when strictly fewer); `mode`
/// forces one.
///
/// ```
/// use rlx::autodiff::transforms::sparse::{sparse_jacobian, SparseMode};
/// use rlx::{DType, Graph};
/// // y = exp(x) · 2: a diagonal Jacobian, one colour.
/// let mut g = Graph::new();
/// let x = g.input("x", [100], DType::F64);
/// let e = g.exp(x).unwrap();
/// let two = g.scalar(2.0, DType::F64);
/// let y = g.mul(e, two).unwrap();
/// g.set_outputs(vec![y]);
/// let s = sparse_jacobian(&g, &[0], None).unwrap();
/// assert_eq!((s.colours, s.mode, s.pattern.nnz()), (1, SparseMode::Forward, 100));
/// assert_eq!(s.graph.shape(s.graph.outputs()[1]).dims(), &[100]);
/// ```
pub fn sparse_jacobian(
    g: &Graph,
    wrt: &[usize],
    mode: Option<SparseMode>,
) -> Result<SparseProgram> {
    const OP: &str = "sparse_jacobian";
    let nodes = wrt_nodes(g, wrt, OP)?;
    for &w in &nodes {
        float_wrt(g, w, OP)?;
    }
    let o = out0(g, OP)?;
    let dt = g.dtype(o);
    if !dt.is_float() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: dt,
            expected: "a float output to differentiate",
        });
    }
    let pattern = jacobian_pattern(g, wrt)?;
    let (mode, b) = choose(&pattern, mode)?;
    compressed_jacobian(g, wrt, pattern, mode, &b)
}

/// The program of [`sparse_jacobian`] for a pattern and compression
/// already found (the checks of `sparse_jacobian` done).
pub(crate) fn compressed_jacobian(
    g: &Graph,
    wrt: &[usize],
    pattern: Pattern,
    mode: SparseMode,
    b: &Bicolouring,
) -> Result<SparseProgram> {
    let nodes = wrt_nodes(g, wrt, "sparse_jacobian")?;
    let o = out0(g, "sparse_jacobian")?;
    let dt = g.dtype(o);
    let mut r = g.clone();
    let (m, n) = (pattern.nrows(), pattern.ncols());
    let mut parts = Vec::with_capacity(2);
    if b.forward() > 0 || b.reverse() == 0 {
        let p = b.forward().max(1);
        let seeds = seed_nodes(&mut r, g, &nodes, &padded(b.forward_seeds(), n), p)?;
        let y = batched_jvp(&mut r, g, &nodes, &[o], &seeds, p)?[0];
        parts.push(r.reshape(y, [p * m])?);
    }
    if b.reverse() > 0 {
        let p = b.reverse();
        let mut dims = vec![p];
        dims.extend_from_slice(g.shape(o).dims());
        let seed = constant(&mut r, b.reverse_seeds(), dims, dt)?;
        let ys = batched_vjp(&mut r, g, &nodes, o, seed, p)?;
        parts.push(flatten_blocks(&mut r, g, &nodes, &ys, p)?);
    }
    let flat = match parts.as_slice() {
        [one] => *one,
        _ => r.concat(&parts, 0)?,
    };
    let values = decompress(&mut r, flat, b.sources(), dt)?;
    set_outputs(&mut r, g, vec![values]);
    let size = b.count().max(1) * m.max(n);
    Ok(SparseProgram {
        graph: finish(fold_seeds(r, size)?)?,
        pattern,
        mode,
        colours: b.count(),
    })
}

/// The compression of a Jacobian with `pattern`: the side (or sides) asked
/// for, or the one needing fewest products, as a bicolouring (one-sided
/// colourings are those with no reverse, or no forward, products).
pub(crate) fn choose(
    pattern: &Pattern,
    mode: Option<SparseMode>,
) -> Result<(SparseMode, Bicolouring)> {
    let forward = |c: Colouring| (SparseMode::Forward, Bicolouring::from_columns(pattern, &c));
    let reverse = |c: Colouring| (SparseMode::Reverse, Bicolouring::from_rows(pattern, &c));
    Ok(match mode {
        Some(SparseMode::Star | SparseMode::Elements) => return Err(Error::InvalidArgument {
            op: "sparse_jacobian",
            message:
                "star colouring and element assembly are for symmetric Hessians; a Jacobian takes `Forward`, `Reverse` or `Bidirectional`"
                    .into(),
        }),
        Some(SparseMode::Forward) => forward(colouring::columns(pattern)),
        Some(SparseMode::Reverse) => reverse(colouring::rows(pattern)),
        Some(SparseMode::Bidirectional) => {
            (SparseMode::Bidirectional, colouring::bicolouring(pattern))
        }
        // Rows twice as long as any column: forward mode wins clearly.
        None if pattern.max_row_nnz() * 2 <= pattern.max_col_nnz() => {
            forward(colouring::columns(pattern))
        }
        None => {
            let (cols, rows) = (colouring::columns(pattern), colouring::rows(pattern));
            let best = cols.count().min(rows.count());
            match colouring::split(pattern, best) {
                Some(b) => (SparseMode::Bidirectional, b),
                None if cols.count() <= rows.count() => forward(cols),
                None => reverse(rows),
            }
        }
    })
}

/// The sparse Hessian of the scalar output 0 with respect to the inputs at
/// `wrt` (one symmetric `[n, n]` matrix over their concatenated elements),
/// by a star colouring and forward over reverse mode with compressed seeds.
///
/// ```
/// use rlx::autodiff::transforms::sparse::{sparse_hessian, SparseMode};
/// use rlx::{DType, Graph};
/// // f = Σ x_i³: a sum of element terms of one unknown each, one product.
/// let mut g = Graph::new();
/// let x = g.input("x", [50], DType::F64);
/// let c = g.powi(x, 3).unwrap();
/// let f = g.sum_all(c).unwrap();
/// g.set_outputs(vec![f]);
/// let s = sparse_hessian(&g, &[0]).unwrap();
/// assert_eq!((s.colours, s.mode, s.pattern.nnz()), (1, SparseMode::Elements, 50));
/// ```
///
/// When the output adds sums over elements of a function of a few
/// selected unknowns (triangles, bonds, the terms of an extended
/// Rosenbrock function), their Hessian is assembled element by element
/// instead ([`SparseMode::Elements`]; see [`sparse_hessian_by`]).
pub fn sparse_hessian(g: &Graph, wrt: &[usize]) -> Result<SparseProgram> {
    let pattern = hessian_pattern(g, wrt)?;
    if let Some(program) = elements::assembled(g, wrt, &pattern)? {
        return Ok(program);
    }
    star_hessian(g, wrt, pattern)
}

/// [`sparse_hessian`] by the compression `mode`: [`SparseMode::Star`]
/// colours the whole graph; [`SparseMode::Elements`] assembles the sums of
/// element terms the output adds (and colours the rest), and is an error
/// when it adds none. Both give the same values up to the order of sums.
///
/// ```
/// use rlx::autodiff::transforms::sparse::{sparse_hessian_by, SparseMode};
/// use rlx::{DType, Graph};
/// // f = Σ (x_{i+1} − x_i)⁴: each term reads two unknowns.
/// let mut g = Graph::new();
/// let x = g.input("x", [40], DType::F64);
/// let a = g.slice_range(x, 1..40, 0).unwrap();
/// let b = g.slice_range(x, 0..39, 0).unwrap();
/// let d = g.sub(a, b).unwrap();
/// let q = g.powi(d, 4).unwrap();
/// let f = g.sum_all(q).unwrap();
/// g.set_outputs(vec![f]);
/// let e = sparse_hessian_by(&g, &[0], SparseMode::Elements).unwrap();
/// let s = sparse_hessian_by(&g, &[0], SparseMode::Star).unwrap();
/// assert_eq!((e.colours, s.colours, e.pattern.nnz()), (2, 3, 40 + 2 * 39));
/// ```
pub fn sparse_hessian_by(g: &Graph, wrt: &[usize], mode: SparseMode) -> Result<SparseProgram> {
    let pattern = hessian_pattern(g, wrt)?;
    match mode {
        SparseMode::Star => star_hessian(g, wrt, pattern),
        SparseMode::Elements => elements::assembled(g, wrt, &pattern)?.ok_or_else(|| {
            Error::InvalidArgument {
                op: "sparse_hessian",
                message: "element assembly needs an output that adds sums over elements of a function of selected unknowns (gathers by constant indices, slices, reshapes); this one adds none: use `SparseMode::Star`".into(),
            }
        }),
        SparseMode::Forward | SparseMode::Reverse | SparseMode::Bidirectional => {
            Err(Error::InvalidArgument {
                op: "sparse_hessian",
                message: format!("a Hessian is compressed by `Star` or `Elements`, not `{mode:?}`"),
            })
        }
    }
}

fn star_hessian(g: &Graph, wrt: &[usize], pattern: Pattern) -> Result<SparseProgram> {
    let gg = grad_graph(g, wrt, "sparse_hessian")?;
    let c = colouring::star(&pattern);
    compressed_hessian(g, &gg, wrt, pattern, &c)
}

/// The program of [`sparse_hessian`] for a pattern and star colouring
/// already found.
pub(crate) fn compressed_hessian(
    g: &Graph,
    gg: &Graph,
    wrt: &[usize],
    pattern: Pattern,
    c: &Colouring,
) -> Result<SparseProgram> {
    let nodes = wrt_nodes(g, wrt, "sparse_hessian")?;
    for &w in &nodes {
        float_wrt(g, w, "sparse_hessian")?;
    }
    let m = g.outputs().len();
    let grads = gg.outputs()[m..].to_vec();
    let p = c.count().max(1);
    let mut r = gg.clone();
    let seeds = seed_nodes(&mut r, g, &nodes, &padded(c.seeds(), pattern.ncols()), p)?;
    let ys = batched_jvp(&mut r, gg, &nodes, &grads, &seeds, p)?;
    let flat = flatten_blocks(&mut r, g, &nodes, &ys, p)?;
    let values = decompress(&mut r, flat, c.sources(), g.dtype(g.outputs()[0]))?;
    set_outputs(&mut r, g, vec![values]);
    let size = p * pattern.ncols();
    Ok(SparseProgram {
        graph: finish(fold_seeds(r, size)?)?,
        pattern,
        mode: SparseMode::Star,
        colours: c.count(),
    })
}

/// Folds what depends on the seed matrix alone (the tangents of linear
/// parts: a stencil's Laplacian, constant couplings), up to tensors of the
/// seed products' size (twice, for padded intermediates), so that a call
/// only computes what depends on the inputs; then computes only the
/// entries read, and those of them that depend on the inputs (see
/// [`constant_entries`]). The usual cleanup limits folding to small
/// tensors.
fn fold_seeds(r: Graph, size: usize) -> Result<Graph> {
    // Padding (concat) makes intermediates a little larger than the products.
    let folded =
        crate::passes::fold::fold_constants_up_to(&crate::passes::optimize(&r)?, 2 * size)?;
    constant_entries::split(gather_early(folded)?)
}

/// Moves the decompressing `gather` (the last output) up through
/// element-wise ops, reshapes and broadcasts, so that only the entries read
/// are computed: `gather(a ⊙ b, idx) = gather(a, idx) ⊙ gather(b, idx)`.
/// Constants are gathered now; an operand smaller than the index list (a
/// broadcast one) or made by another op is gathered where it stands.
fn gather_early(mut g: Graph) -> Result<Graph> {
    let Some(&out) = g.outputs().last() else {
        return Ok(g);
    };
    let node = g.node(out).clone();
    let (Op::Gather { axis: 0 }, [flat, idx]) = (&node.op, node.inputs.as_slice()) else {
        return Ok(g);
    };
    let Op::Constant(lit) = &g.node(*idx).op else {
        return Ok(g);
    };
    let idx: Vec<usize> = (0..g.shape(*idx).numel())
        .map(|i| lit.get_i64(i) as usize)
        .collect();
    let mut memo = Memo::new();
    let values = push_gather(&mut g, *flat, &idx, &mut memo)?;
    let mut outs = g.outputs().to_vec();
    *outs.last_mut().expect("an output") = values;
    g.set_outputs(outs);
    crate::passes::optimize(&g)
}

/// Gathers already built, per node: (index list, result). A node is
/// reached with few distinct lists, so they are compared, not hashed.
type Memo = std::collections::HashMap<NodeId, Vec<(Vec<usize>, NodeId)>>;

/// The elements `idx` of `x` (flattened), as a `[idx.len()]` node.
fn push_gather(g: &mut Graph, x: NodeId, idx: &[usize], memo: &mut Memo) -> Result<NodeId> {
    if let Some((_, y)) = memo.get(&x).and_then(|v| v.iter().find(|(i, _)| i == idx)) {
        return Ok(*y);
    }
    let node = g.node(x).clone();
    let dims = node.shape.dims().to_vec();
    let k = idx.len();
    // An operand of `x`, read at the elements its output elements `idx` read.
    let mut operand = |g: &mut Graph, a: NodeId, bcast: bool| -> Result<NodeId> {
        let map: Vec<usize> = if bcast {
            let m = broadcast_map(g.shape(a).dims(), &dims);
            idx.iter().map(|&i| m[i]).collect()
        } else {
            idx.to_vec()
        };
        let small = g.shape(a).numel() < k && !matches!(g.node(a).op, Op::Constant(_));
        if small {
            leaf(g, a, &map)
        } else {
            push_gather(g, a, &map, memo)
        }
    };
    let y = match &node.op {
        Op::Constant(lit) => {
            let v: Vec<f64> = idx.iter().map(|&i| lit.get_f64(i)).collect();
            match lit {
                Literal::Splat(_) | Literal::SplatI64(_) => g.full([k], lit.get_f64(0), node.dtype),
                Literal::F64(_) | Literal::I64(_) if node.dtype.is_float() => {
                    g.constant(Literal::F64(v.into()), [k], node.dtype)?
                }
                Literal::F64(_) | Literal::I64(_) => return leaf(g, x, idx),
            }
        }
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast(_) => {
            let mut args = Vec::with_capacity(node.inputs.len());
            for &a in &node.inputs {
                args.push(operand(g, a, true)?);
            }
            let y = g.push(node.op.clone(), &args)?;
            // The gathered op keeps the source line of the one it replaces.
            if let Some(s) = g.source(x) {
                g.mark_source(y.index(), s);
            }
            y
        }
        Op::Reshape { .. } => operand(g, node.inputs[0], false)?,
        Op::Broadcast { .. } => operand(g, node.inputs[0], true)?,
        // A gather placed by an earlier push: one gather of its source.
        Op::Gather { axis: 0 } if g.shape(node.inputs[0]).rank() == 1 => {
            match &g.node(node.inputs[1]).op {
                Op::Constant(lit) => {
                    let inner: Vec<usize> = idx.iter().map(|&i| lit.get_i64(i) as usize).collect();
                    leaf(g, node.inputs[0], &inner)?
                }
                _ => leaf(g, x, idx)?,
            }
        }
        _ => leaf(g, x, idx)?,
    };
    memo.entry(x).or_default().push((idx.to_vec(), y));
    Ok(y)
}

/// `gather(reshape(x, [numel]), idx)`, or the reshape alone when `idx`
/// reads every element in order.
fn leaf(g: &mut Graph, x: NodeId, idx: &[usize]) -> Result<NodeId> {
    let n = g.shape(x).numel();
    let flat = g.reshape(x, [n])?;
    if idx.len() == n && idx.iter().enumerate().all(|(k, &i)| k == i) {
        return Ok(flat);
    }
    let v: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
    let c = g.constant(Literal::I64(v.into()), [idx.len()], DType::I64)?;
    g.gather(flat, c, 0)
}

/// A seed matrix `[count, n]`, or one zero row when there are no colours,
/// so that the batched program keeps a non-empty batch axis.
fn padded(seeds: Vec<f64>, n: usize) -> Vec<f64> {
    if seeds.is_empty() {
        vec![0.0; n]
    } else {
        seeds
    }
}

fn constant(r: &mut Graph, v: Vec<f64>, dims: Vec<usize>, dt: DType) -> Result<NodeId> {
    r.constant(Literal::F64(v.into()), dims, dt)
}

/// The seed matrix `all` (`[p, n]`) split into one `[p, in...]` constant
/// per `wrt` node.
fn seed_nodes(
    r: &mut Graph,
    g: &Graph,
    nodes: &[NodeId],
    all: &[f64],
    p: usize,
) -> Result<Vec<NodeId>> {
    let n: usize = nodes.iter().map(|&w| g.shape(w).numel()).sum();
    let mut out = Vec::with_capacity(nodes.len());
    let mut off = 0;
    for &w in nodes {
        let k = g.shape(w).numel();
        let mut v = Vec::with_capacity(p * k);
        for row in 0..p {
            v.extend_from_slice(&all[row * n + off..row * n + off + k]);
        }
        let mut dims = vec![p];
        dims.extend_from_slice(g.shape(w).dims());
        out.push(constant(r, v, dims, g.dtype(w))?);
        off += k;
    }
    Ok(out)
}

/// One `[p, in...]` block per `wrt` node joined into a flat `[p · n]`
/// vector laid out `[p, n]`.
fn flatten_blocks(
    r: &mut Graph,
    g: &Graph,
    nodes: &[NodeId],
    ys: &[NodeId],
    p: usize,
) -> Result<NodeId> {
    let mut parts = Vec::with_capacity(ys.len());
    let mut n = 0;
    for (&w, &y) in nodes.iter().zip(ys) {
        let k = g.shape(w).numel();
        parts.push(r.reshape(y, [p, k])?);
        n += k;
    }
    let joined = match parts.as_slice() {
        [one] => *one,
        _ => r.concat(&parts, 1)?,
    };
    r.reshape(joined, [p * n])
}

/// The `[nnz]` values: the compressed products `flat` read at `sources`.
fn decompress(r: &mut Graph, flat: NodeId, sources: &[usize], dt: DType) -> Result<NodeId> {
    let nnz = sources.len();
    if nnz == 0 {
        return Ok(r.full([0], 0.0, dt));
    }
    let idx: Vec<i64> = sources.iter().map(|&s| s as i64).collect();
    let idx = r.constant(Literal::I64(idx.into()), [nnz], DType::I64)?;
    r.gather(flat, idx, 0)
}
