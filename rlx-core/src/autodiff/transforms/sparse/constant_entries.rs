//! Entries of a sparse derivative that are the same at every input.
//!
//! The derivative of a residual's linear part (a stencil's Laplacian, the
//! conductances between circuit nodes) does not depend on the inputs. Once
//! the seed products are folded and the decompression is pushed up to the
//! leaves ([`super::gather_early`]), such an entry is a constant whose
//! input-dependent terms are all multiplied by a constant that is zero at
//! that entry. [`split`] finds those entries, computes them once and keeps
//! them in a constant array; a call computes the other entries only and
//! adds them into a copy of that array at their positions (one
//! `scatter_add`). The array holds `-0.0` there, the identity of IEEE
//! addition, so every value keeps its bits.
//!
//! Finding them is abstract interpretation per entry (zero, constant or
//! input-dependent); computing them is the graph's own constant folding
//! on the decompression restricted to them, so only what folding proves
//! constant becomes a constant (anything else stays computed).

use std::collections::HashMap;
use std::rc::Rc;

use super::{push_gather, Memo};
use crate::passes::{fold::fold_constants_up_to, optimize};
use crate::{BinaryOp, DType, Graph, Literal, NodeId, Op, Result, UnaryOp};

/// What an entry of a node is at every input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Zero.
    Zero,
    /// The same value (maybe zero).
    Const,
    /// Depends on the inputs.
    Dyn,
}

/// The kinds of a node's entries: one for all (a splat or a scalar), or
/// one per entry.
#[derive(Clone, Debug)]
enum Kinds {
    All(Kind),
    Each(Rc<[Kind]>),
}

impl Kinds {
    fn at(&self, i: usize) -> Kind {
        match self {
            Kinds::All(k) => *k,
            Kinds::Each(v) => v[i],
        }
    }
}

/// Groups of constant entries folded separately (the largest first);
/// entries beyond stay computed. A group is a set of entries whose zero
/// factors are the same (see [`Classifier::sites`]).
const MAX_GROUPS: usize = 8;

/// Factors of products checked for zeros; a decompression with more is
/// left as it is.
const MAX_SITES: usize = 256;

/// Rewrites the last output of `g` (the `[nnz]` values of a sparse
/// derivative, element-wise over leaves after [`super::gather_early`]) so
/// that entries equal at every input are constants and the others are
/// computed alone and scattered into them. Returns `g` unchanged when no
/// entry is constant.
pub(super) fn split(g: Graph) -> Result<Graph> {
    let Some(&out) = g.outputs().last() else {
        return Ok(g);
    };
    let nnz = g.shape(out).numel();
    if nnz == 0 || g.shape(out).rank() != 1 || !g.dtype(out).is_float() {
        return Ok(g);
    }
    if matches!(g.node(out).op, Op::Constant(_)) {
        return Ok(g);
    }
    let mut c = Classifier {
        g: &g,
        nnz,
        memo: HashMap::new(),
        sites: Vec::new(),
    };
    let root = c.kinds(out);
    if c.sites.len() > MAX_SITES {
        return Ok(g);
    }
    // Constant entries grouped by which factors are zero at them.
    let mut groups: HashMap<Vec<bool>, Vec<usize>> = HashMap::new();
    let mut dynamic = Vec::new();
    for i in 0..nnz {
        if root.at(i) == Kind::Dyn {
            dynamic.push(i);
        } else {
            let key = c.sites.iter().map(|s| s.at(i) == Kind::Zero).collect();
            groups.entry(key).or_default().push(i);
        }
    }
    if groups.is_empty() {
        return Ok(g);
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    groups.sort_by_key(|v| std::cmp::Reverse((v.len(), v[0])));
    // -0.0 where a computed entry is added.
    let mut base = vec![-0.0; nnz];
    let mut folded = 0;
    for (k, idx) in groups.into_iter().enumerate() {
        match (k < MAX_GROUPS)
            .then(|| constants(&g, out, &idx))
            .transpose()?
        {
            Some(Some(vals)) => {
                folded += idx.len();
                for (&i, v) in idx.iter().zip(vals) {
                    base[i] = v;
                }
            }
            _ => dynamic.extend(idx),
        }
    }
    if folded == 0 {
        return Ok(g);
    }
    dynamic.sort_unstable();
    let mut g = g;
    let dt = g.dtype(out);
    let base = g.constant(Literal::F64(base.into()), [nnz], dt)?;
    let values = if dynamic.is_empty() {
        base
    } else {
        let computed = push_gather(&mut g, out, &dynamic, &mut Memo::new())?;
        let at: Vec<i64> = dynamic.iter().map(|&i| i as i64).collect();
        let at = g.constant(Literal::I64(at.into()), [dynamic.len()], DType::I64)?;
        g.scatter_add(base, at, computed, 0)?
    };
    let mut outs = g.outputs().to_vec();
    *outs.last_mut().expect("an output") = values;
    g.set_outputs(outs);
    optimize(&g)
}

/// The entries `idx` of `out` if constant folding proves them constant.
fn constants(g: &Graph, out: NodeId, idx: &[usize]) -> Result<Option<Vec<f64>>> {
    let mut h = g.clone();
    let sub = push_gather(&mut h, out, idx, &mut Memo::new())?;
    h.set_outputs(vec![sub]);
    let h = fold_constants_up_to(&optimize(&h)?, idx.len())?;
    Ok(match &h.node(h.outputs()[0]).op {
        Op::Constant(lit) => Some((0..idx.len()).map(|i| lit.get_f64(i)).collect()),
        _ => None,
    })
}

/// The per-entry abstract interpretation of the values' element-wise tree.
struct Classifier<'g> {
    g: &'g Graph,
    nnz: usize,
    memo: HashMap<NodeId, Kinds>,
    /// The per-entry kinds of every factor of a product that is zero
    /// somewhere (not everywhere): constant entries with the same zero
    /// factors fold alike, since restricted to them each such factor is
    /// all zeros, which simplification removes.
    sites: Vec<Kinds>,
}

impl Classifier<'_> {
    fn kinds(&mut self, x: NodeId) -> Kinds {
        if let Some(k) = self.memo.get(&x) {
            return k.clone();
        }
        let k = self.compute(x);
        self.memo.insert(x, k.clone());
        k
    }

    fn compute(&mut self, x: NodeId) -> Kinds {
        let node = self.g.node(x);
        let numel = node.shape.numel();
        let constant = matches!(node.op, Op::Constant(_));
        // Operands broadcast from other shapes: only constants are known.
        if numel != self.nnz && numel != 1 {
            return Kinds::All(if constant { Kind::Const } else { Kind::Dyn });
        }
        let zero_or_const = |v: f64| if v == 0.0 { Kind::Zero } else { Kind::Const };
        match &node.op {
            Op::Constant(lit) if numel == 1 => Kinds::All(zero_or_const(lit.get_f64(0))),
            Op::Constant(lit) => {
                Kinds::Each((0..numel).map(|i| zero_or_const(lit.get_f64(i))).collect())
            }
            Op::Reshape { .. } | Op::Broadcast { .. }
                if self.g.shape(node.inputs[0]).numel() == numel =>
            {
                self.kinds(node.inputs[0])
            }
            Op::Broadcast { .. } if self.g.shape(node.inputs[0]).numel() == 1 => {
                self.kinds(node.inputs[0])
            }
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast(_) => {
                let op = node.op.clone();
                let args: Vec<Kinds> = node.inputs.iter().map(|&a| self.kinds(a)).collect();
                if matches!(op, Op::Binary(BinaryOp::Mul | BinaryOp::MulZero)) {
                    for a in &args {
                        if let Kinds::Each(v) = a {
                            if v.contains(&Kind::Zero) {
                                self.sites.push(a.clone());
                            }
                        }
                    }
                }
                self.combine(&op, &args)
            }
            _ => Kinds::All(Kind::Dyn),
        }
    }

    /// The kinds of an element-wise op's result from its operands' (at
    /// most three: `select`).
    fn combine(&self, op: &Op, args: &[Kinds]) -> Kinds {
        let at = |i: usize| {
            let mut ks = [Kind::Const; 3];
            for (k, a) in ks.iter_mut().zip(args) {
                *k = a.at(i);
            }
            result(op, &ks[..args.len()])
        };
        if args.iter().all(|a| matches!(a, Kinds::All(_))) {
            return Kinds::All(at(0));
        }
        Kinds::Each((0..self.nnz).map(at).collect())
    }
}

/// The kind of an element-wise op's result entry from its operands'
/// entries. A product with a zero factor is zero, as simplification
/// makes it (`x * 0`, `mul_zero(0, x)`, `mul_zero(x, 0)`).
fn result(op: &Op, ks: &[Kind]) -> Kind {
    let any = |k: Kind| ks.contains(&k);
    match op {
        Op::Binary(BinaryOp::Mul | BinaryOp::MulZero) if any(Kind::Zero) => Kind::Zero,
        Op::Binary(BinaryOp::Add | BinaryOp::Sub) if ks.iter().all(|&k| k == Kind::Zero) => {
            Kind::Zero
        }
        Op::Unary(UnaryOp::Neg) => ks[0],
        _ if any(Kind::Dyn) => Kind::Dyn,
        _ => Kind::Const,
    }
}
