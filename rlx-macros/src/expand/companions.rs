//! The companions a `#[differentiable]` function gets: their names, docs,
//! extra parameters, return types and how each reads its plan's outputs
//! ([`Ctx::companions`], [`Ctx::graph_and_nth`]).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};
use syn::Ident;

use super::docs::{Docs, Which};
use super::tokens::{extra_param_ty, mirror_out, out_ty, tuple_or_single, Taker};
use crate::parse::{Float, Func, Out, Param};

/// Builds a companion's result expression with a [`Taker`].
pub(super) type Build<'a> = Box<dyn Fn(&Taker) -> TokenStream + 'a>;

/// How a companion runs its plan.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Runs {
    /// `Function::run` (or `run_numbers`): every result from the outputs.
    Dense,
    /// `Function::run_sparse`: the function's outputs from `__rlx_it`, the
    /// sparse matrix as `__rlx_sparse`.
    Sparse,
    /// `Function::run_sparse_into`: writes into an `into: &mut
    /// SparseMatrix` parameter (`jacobian` or `hessian`; and `value: &mut
    /// [f64]` when `value`), returns `()`.
    SparseInto { value: bool, into: &'static str },
}

/// One companion: its name, doc, extra parameters, return type and how the
/// value is built from the iterator `__rlx_it` over the plan's outputs.
pub(super) struct Companion<'a> {
    pub(super) name: Ident,
    /// Which companion this is (for its doc).
    which: Which,
    pub(super) doc: String,
    pub(super) transform: &'static str,
    pub(super) extras: Vec<(Ident, Out)>,
    pub(super) ret: TokenStream,
    /// Whether the function's own outputs are skipped first.
    pub(super) skip: bool,
    pub(super) build: Build<'a>,
    pub(super) runs: Runs,
}

impl Companion<'_> {
    /// The names of the companion's parameters after the function's own.
    fn extra_names(&self) -> Vec<String> {
        let mut out: Vec<String> = self.extras.iter().map(|(id, _)| id.to_string()).collect();
        if let Runs::SparseInto { value, into } = self.runs {
            if value {
                out.push("value".into());
            }
            out.push(into.into());
        }
        out
    }

    /// The companion's parameters after the function's own.
    pub(super) fn extra_params(&self) -> Vec<TokenStream> {
        let mut out: Vec<TokenStream> = self
            .extras
            .iter()
            .map(|(id, o)| {
                let ty = extra_param_ty(*o);
                quote!(#id: #ty)
            })
            .collect();
        if let Runs::SparseInto { value, into } = self.runs {
            if value {
                out.push(quote!(value: &mut [f64]));
            }
            let into = format_ident!("{into}");
            out.push(quote!(#into: &mut ::rlx::SparseMatrix));
        }
        out
    }
}

pub(super) struct GraphAndNth {
    pub(super) graph_name: Ident,
    pub(super) graph_doc: String,
    pub(super) nth_name: Ident,
    pub(super) nth_doc: String,
    pub(super) nth_ty: TokenStream,
    /// The name of the order parameter (`order`, unless a parameter has
    /// that name).
    pub(super) order: Ident,
}

pub(super) struct Ctx<'a> {
    pub(super) f: &'a Func,
    name: &'a Ident,
    /// The value's type as the plain call and companions return it.
    pub(super) ret_ty: TokenStream,
    out0_ty: TokenStream,
    pub(super) n_out: usize,
    /// The `Kind` of the float arguments, when they are generic (see
    /// [`GenericFloats`]).
    pub(super) kind: Option<TokenStream>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(f: &'a Func, kind: Option<TokenStream>) -> Ctx<'a> {
        let mut ctx = Ctx {
            f,
            name: &f.item.sig.ident,
            ret_ty: TokenStream::new(),
            out0_ty: TokenStream::new(),
            n_out: f.ret.outs.len(),
            kind,
        };
        let outs: Vec<TokenStream> = f.ret.outs.iter().map(|&o| ctx.ty(o)).collect();
        ctx.out0_ty = outs[0].clone();
        ctx.ret_ty = if ctx.kind.is_none() {
            f.ret.ty.to_token_stream()
        } else if f.ret.tuple {
            quote!((#(#outs,)*))
        } else {
            outs[0].clone()
        };
        ctx
    }

    /// The type of a result of kind `o`: a float result follows the kind
    /// of the float arguments when they are generic.
    fn ty(&self, o: Out) -> TokenStream {
        match (&self.kind, o) {
            (Some(k), Out::Float(Float::F64)) => quote!(<#k as ::rlx::__private::Kind>::F64),
            (Some(k), Out::Float(Float::F32)) => quote!(<#k as ::rlx::__private::Kind>::F32),
            _ => out_ty(o),
        }
    }

    fn docs(&self) -> Docs<'a> {
        Docs::new(self.f, self.kind.is_some())
    }

    /// Names, docs and the result type of the `graph_f` and
    /// `nth_derivative_f` companions (they take no tangent-like extras, so
    /// they are generated apart from [`Ctx::companions`]).
    pub(super) fn graph_and_nth(&self) -> GraphAndNth {
        let name = self.name;
        let docs = self.docs();
        let (graph_name, nth_name) = (
            format_ident!("graph_{}", name),
            format_ident!("nth_derivative_{}", name),
        );
        let order = if self.f.params.iter().any(|p| p.ident == "order") {
            format_ident!("__rlx_order")
        } else {
            format_ident!("order")
        };
        GraphAndNth {
            graph_doc: docs.companion(Which::Graph, &graph_name.to_string(), &[]),
            nth_doc: docs.companion(
                Which::NthDerivative,
                &nth_name.to_string(),
                &[order.to_string()],
            ),
            graph_name,
            nth_name,
            order,
            nth_ty: tuple_or_single(
                self.f
                    .wrt_params()
                    .map(|p| self.ty(mirror_out(p)))
                    .collect(),
            ),
        }
    }

    pub(super) fn companions(&self) -> Vec<Companion<'a>> {
        let f = self.f;
        let name = self.name;
        let wrt: Vec<&'a Param> = f.wrt_params().collect();
        let d = wrt.len();
        let (ret_ty, out0_ty) = (&self.ret_ty, &self.out0_ty);
        let grads_ty = tuple_or_single(wrt.iter().map(|p| self.ty(mirror_out(p))).collect());
        let jac_ty = tuple_or_single(vec![quote!(::rlx::Tensor); d]);
        let hess_ty = tuple_or_single(vec![jac_ty.clone(); d]);
        let mirrored = |prefix: &str| -> Vec<(Ident, Out)> {
            wrt.iter()
                .map(|p| (extra_name(prefix, &p.ident, &f.params), mirror_out(p)))
                .collect()
        };
        let grads = {
            let wrt = wrt.clone();
            move |tk: &Taker| tuple_or_single(wrt.iter().map(|p| tk.take(mirror_out(p))).collect())
        };
        let jac = move |tk: &Taker| tuple_or_single((0..d).map(|_| tk.take(Out::Tensor)).collect());
        let hess = move |tk: &Taker| tuple_or_single((0..d).map(|_| jac(tk)).collect());
        let ret = &f.ret;
        let out0 = ret.outs[0];
        // `(value, grads)`: the function's outputs, then one per parameter.
        let value_and_grads = {
            let grads = grads.clone();
            move |tk: &Taker| {
                let (r, g) = (tk.ret(ret), grads(tk));
                quote!((#r, #g))
            }
        };
        let mk =
            |prefix: &str, which, transform, extras, ret_ty, skip, build: Build<'a>| Companion {
                name: format_ident!("{}_{}", prefix, name),
                which,
                doc: String::new(),
                transform,
                extras,
                ret: ret_ty,
                skip,
                build,
                runs: Runs::Dense,
            };
        let sparse = |c: Companion<'a>, runs| Companion { runs, ..c };
        let sparse_ty = quote!(::rlx::SparseMatrix);
        let value_and_jac = move |tk: &Taker| {
            let (r, j) = (tk.ret(ret), jac(tk));
            quote!((#r, #j))
        };
        let mut all = vec![
            mk(
                "value_and_jacobian",
                Which::ValueAndJacobian,
                "Jacobian",
                vec![],
                quote!((#ret_ty, #jac_ty)),
                false,
                Box::new(value_and_jac),
            ),
            sparse(
                mk(
                    "sparse_jacobian",
                    Which::SparseJacobian,
                    "SparseJacobian",
                    vec![],
                    sparse_ty.clone(),
                    true,
                    Box::new(|_: &Taker| quote!(__rlx_sparse)),
                ),
                Runs::Sparse,
            ),
            sparse(
                mk(
                    "value_and_sparse_jacobian",
                    Which::ValueAndSparseJacobian,
                    "ValueAndSparseJacobian",
                    vec![],
                    quote!((#ret_ty, #sparse_ty)),
                    false,
                    Box::new(move |tk: &Taker| {
                        let r = tk.ret(ret);
                        quote!((#r, __rlx_sparse))
                    }),
                ),
                Runs::Sparse,
            ),
            sparse(
                mk(
                    "sparse_jacobian_into",
                    Which::SparseJacobianInto,
                    "SparseJacobian",
                    vec![],
                    quote!(()),
                    false,
                    Box::new(|_: &Taker| quote!(())),
                ),
                Runs::SparseInto {
                    value: false,
                    into: "jacobian",
                },
            ),
            sparse(
                mk(
                    "value_and_sparse_jacobian_into",
                    Which::ValueAndSparseJacobianInto,
                    "ValueAndSparseJacobian",
                    vec![],
                    quote!(()),
                    false,
                    Box::new(|_: &Taker| quote!(())),
                ),
                Runs::SparseInto {
                    value: true,
                    into: "jacobian",
                },
            ),
            sparse(
                mk(
                    "sparse_hessian",
                    Which::SparseHessian,
                    "SparseHessian",
                    vec![],
                    sparse_ty.clone(),
                    true,
                    Box::new(|_: &Taker| quote!(__rlx_sparse)),
                ),
                Runs::Sparse,
            ),
            sparse(
                mk(
                    "sparse_hessian_into",
                    Which::SparseHessianInto,
                    "SparseHessian",
                    vec![],
                    quote!(()),
                    false,
                    Box::new(|_: &Taker| quote!(())),
                ),
                Runs::SparseInto {
                    value: false,
                    into: "hessian",
                },
            ),
            mk(
                "grad",
                Which::Grad,
                "GradOnly",
                vec![],
                grads_ty.clone(),
                false,
                Box::new(grads.clone()),
            ),
            mk(
                "value_and_grad",
                Which::ValueAndGrad,
                "Grad",
                vec![],
                quote!((#ret_ty, #grads_ty)),
                false,
                Box::new(value_and_grads.clone()),
            ),
            mk(
                "jvp",
                Which::Jvp,
                "Jvp",
                mirrored("tangent_"),
                quote!((#ret_ty, #out0_ty)),
                false,
                Box::new(move |tk: &Taker| {
                    let (r, t) = (tk.ret(ret), tk.take(out0));
                    quote!((#r, #t))
                }),
            ),
            mk(
                "vjp",
                Which::Vjp,
                "Vjp",
                vec![(format_ident!("cotangent"), out0)],
                quote!((#ret_ty, #grads_ty)),
                false,
                Box::new(value_and_grads.clone()),
            ),
            mk(
                "jacobian",
                Which::Jacobian,
                "Jacobian",
                vec![],
                jac_ty.clone(),
                true,
                Box::new(jac),
            ),
            mk(
                "hessian",
                Which::Hessian,
                "Hessian",
                vec![],
                hess_ty,
                true,
                Box::new(hess),
            ),
            mk(
                "hvp",
                Which::Hvp,
                "Hvp",
                mirrored("v_"),
                grads_ty,
                true,
                Box::new(grads),
            ),
            mk(
                "batch_jacobian",
                Which::BatchJacobian,
                "BatchJacobian",
                vec![],
                jac_ty,
                false, // the plan returns the blocks alone
                Box::new(jac),
            ),
        ];
        let docs = self.docs();
        for c in &mut all {
            c.doc = docs.companion(c.which, &c.name.to_string(), &c.extra_names());
        }
        all
    }
}

/// The name of the tangent (`prefix = "tangent_"`) or Hessian vector
/// (`"v_"`) of parameter `id`: `tangent_y` for `y` and for `_y` (a name
/// unused on purpose; `tangent__y` would warn), unless another parameter's
/// name leads to the same one (then `tangent__y`, and the companion allows
/// the lint). `Function::plan` names them the same way in its errors.
fn extra_name(prefix: &str, id: &Ident, params: &[Param]) -> Ident {
    let trimmed = |i: &Ident| i.to_string().trim_start_matches('_').to_string();
    let t = trimmed(id);
    let clash = params
        .iter()
        .any(|p| p.ident != *id && trimmed(&p.ident) == t);
    if t.is_empty() || clash {
        format_ident!("{}{}", prefix, id)
    } else {
        format_ident!("{}{}", prefix, t)
    }
}
