//! Generates the code: the plain function, its companions, the tracer and
//! the plan cache. Only generates; `check.rs` has rejected what it must.
//!
//! For `fn f(q: &Tensor, k: f64, n: usize) -> f64` it emits:
//! - `fn __rlx_function_f() -> &'static Function`: the plan cache;
//! - `fn __rlx_trace_f(types, &(usize,)) -> Result<Graph>`: enters a trace,
//!   declares `q` and `k` as inputs, binds `k` as a 0-d `Tensor` and `n`
//!   from the static tuple, runs the rewritten body in a closure and ends
//!   the trace with its outputs;
//! - `fn f(..) -> f64`: the plain call, running the cached plan;
//! - `grad_f`, `value_and_grad_f`, `jvp_f`, `vjp_f`, `jacobian_f`,
//!   `value_and_jacobian_f`, `hessian_f`, `hvp_f`, `batch_jacobian_f`, each
//!   a few lines over `Function::run`;
//! - `sparse_jacobian_f`, `value_and_sparse_jacobian_f`, `sparse_hessian_f`
//!   over `Function::run_sparse`, and `sparse_jacobian_into_f`,
//!   `value_and_sparse_jacobian_into_f` over `Function::run_sparse_into`.

use std::cell::Cell;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Ident, Type};

use crate::parse::{Float, Func, Kind, Out, Param};

fn float_ty(f: Float) -> TokenStream {
    match f {
        Float::F32 => quote!(f32),
        Float::F64 => quote!(f64),
    }
}

fn out_ty(o: Out) -> TokenStream {
    match o {
        Out::Tensor => quote!(::rlx::Tensor),
        Out::Float(f) => float_ty(f),
    }
}

/// The type of a derivative mirroring a parameter (grads, tangents, `v`).
fn mirror_out(p: &Param) -> Out {
    match p.kind {
        Kind::Float(f) => Out::Float(f),
        Kind::Tensor { .. } | Kind::Static => Out::Tensor,
    }
}

/// The parameter type of an extra input (tangent, cotangent, `v`) of
/// type `o`.
fn extra_param_ty(o: Out) -> TokenStream {
    match o {
        Out::Float(f) => float_ty(f),
        Out::Tensor => quote!(&::rlx::Tensor),
    }
}

/// `&[..], mask` over number arguments, as `Function::run_numbers` takes
/// them (`None` if one is not a number or there are more than 64).
fn numbers<'a>(items: impl Iterator<Item = (&'a Ident, Out)>) -> Option<TokenStream> {
    let mut values = Vec::new();
    let mut mask = 0u64;
    for (i, (id, o)) in items.enumerate() {
        match o {
            Out::Float(Float::F64) if i < 64 => values.push(quote!(#id)),
            Out::Float(Float::F32) if i < 64 => {
                mask |= 1 << i;
                values.push(quote!(::core::primitive::f64::from(#id)));
            }
            _ => return None,
        }
    }
    Some(quote!(&[#(#values),*], #mask))
}

fn tuple_or_single(items: Vec<TokenStream>) -> TokenStream {
    if items.len() == 1 {
        items.into_iter().next().expect("one item")
    } else {
        quote!((#(#items,)*))
    }
}

/// How a companion's body reads the plan's outputs from `__rlx_it`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// An iterator of `Value`s, from `Function::run`.
    Values,
    /// An iterator of `f64`s, from `Function::run_numbers`.
    Numbers,
}

/// Builds the expressions that take a companion's results from `__rlx_it`
/// and counts them.
struct Taker {
    read: Read,
    taken: Cell<usize>,
    /// Whether every result taken so far is a number.
    numeric: Cell<bool>,
    /// For the generic plain call of a function with float parameters: the
    /// [`Kind`] of its arguments, which picks the type of float results.
    ///
    /// [`Kind`]: ../../rlx_runtime/rewritten/trait.Kind.html
    kind: Option<TokenStream>,
}

impl Taker {
    fn new(read: Read, kind: Option<TokenStream>) -> Taker {
        Taker {
            read,
            taken: Cell::new(0),
            numeric: Cell::new(true),
            kind,
        }
    }

    /// The expression taking the next result, as a value of type `o`.
    fn take(&self, o: Out) -> TokenStream {
        self.taken.set(self.taken.get() + 1);
        if let (Some(k), Out::Float(f)) = (&self.kind, o) {
            let (ty, conv) = match f {
                Float::F64 => (quote!(F64), quote!(f64_out)),
                Float::F32 => (quote!(F32), quote!(f32_out)),
            };
            return match self.read {
                Read::Values => {
                    quote!(::rlx::__private::take::<<#k as ::rlx::__private::Kind>::#ty>(&mut __rlx_it)?)
                }
                Read::Numbers => quote!(<#k as ::rlx::__private::Kind>::#conv(
                    ::rlx::__private::number::<f64>(&mut __rlx_it)
                )),
            };
        }
        match (self.read, o) {
            (Read::Values, o) => {
                let t = out_ty(o);
                quote!(::rlx::__private::take::<#t>(&mut __rlx_it)?)
            }
            (Read::Numbers, Out::Float(f)) => {
                let t = float_ty(f);
                quote!(::rlx::__private::number::<#t>(&mut __rlx_it))
            }
            (Read::Numbers, Out::Tensor) => {
                self.numeric.set(false);
                TokenStream::new()
            }
        }
    }

    /// The function's own outputs (a tuple if it returns one).
    fn ret(&self, ret: &crate::parse::Ret) -> TokenStream {
        let takes: Vec<TokenStream> = ret.outs.iter().map(|&o| self.take(o)).collect();
        if ret.tuple {
            quote!((#(#takes,)*))
        } else {
            takes.into_iter().next().expect("one output")
        }
    }
}

/// Builds a companion's result expression with a [`Taker`].
type Build<'a> = Box<dyn Fn(&Taker) -> TokenStream + 'a>;

/// How a companion runs its plan.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Runs {
    /// `Function::run` (or `run_numbers`): every result from the outputs.
    Dense,
    /// `Function::run_sparse`: the function's outputs from `__rlx_it`, the
    /// sparse matrix as `__rlx_sparse`.
    Sparse,
    /// `Function::run_sparse_into`: writes into a `jacobian: &mut
    /// SparseMatrix` parameter (and `value: &mut [f64]` when `true`),
    /// returns `()`.
    SparseInto { value: bool },
}

/// One companion: its name, doc, extra parameters, return type and how the
/// value is built from the iterator `__rlx_it` over the plan's outputs.
struct Companion<'a> {
    name: Ident,
    doc: String,
    transform: &'static str,
    extras: Vec<(Ident, Out)>,
    ret: TokenStream,
    /// Whether the function's own outputs are skipped first.
    skip: bool,
    build: Build<'a>,
    runs: Runs,
}

impl Companion<'_> {
    /// The companion's parameters after the function's own.
    fn extra_params(&self) -> Vec<TokenStream> {
        let mut out: Vec<TokenStream> = self
            .extras
            .iter()
            .map(|(id, o)| {
                let ty = extra_param_ty(*o);
                quote!(#id: #ty)
            })
            .collect();
        if let Runs::SparseInto { value } = self.runs {
            if value {
                out.push(quote!(value: &mut [f64]));
            }
            out.push(quote!(jacobian: &mut ::rlx::SparseMatrix));
        }
        out
    }
}

struct GraphAndNth {
    graph_name: Ident,
    graph_doc: String,
    nth_name: Ident,
    nth_doc: String,
    nth_ty: TokenStream,
    /// The name of the order parameter (`order`, unless a parameter has
    /// that name).
    order: Ident,
}

struct Ctx<'a> {
    f: &'a Func,
    name: &'a Ident,
    /// The value's type as the plain call and companions return it.
    ret_ty: TokenStream,
    out0_ty: TokenStream,
    n_out: usize,
    /// The `Kind` of the float arguments, when they are generic (see
    /// [`GenericFloats`]).
    kind: Option<TokenStream>,
}

impl<'a> Ctx<'a> {
    fn new(f: &'a Func, kind: Option<TokenStream>) -> Ctx<'a> {
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

    fn wrt_names(&self) -> String {
        self.f
            .wrt_params()
            .map(|p| format!("`{}`", p.ident))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Names, docs and the result type of the `graph_f` and
    /// `nth_derivative_f` companions (they take no tangent-like extras, so
    /// they are generated apart from [`Ctx::companions`]).
    fn graph_and_nth(&self) -> GraphAndNth {
        let name = self.name;
        let wrt_names = self.wrt_names();
        GraphAndNth {
            graph_name: format_ident!("graph_{}", name),
            graph_doc: format!("The graph traced from [`{name}`] for the shapes and dtypes of these arguments (and the values of its static ones): print it, or pass it to the transforms of `rlx::autodiff` (`nth_order_grad`, `jacfwd`, ...). Its inputs are the runtime parameters in order. Generated by `#[differentiable]`."),
            nth_name: format_ident!("nth_derivative_{}", name),
            nth_doc: format!("The derivative of order `order` (`n`) of the scalar (first) output of [`{name}`] with respect to each of {wrt_names} on its own (`∂ⁿf/∂xⁿ`, shaped like the parameter repeated `n` times; a number for a float parameter): `n = 1` is the gradient, `n = 2` the Hessian block, `n = 0` the value. Built by one reverse pass and `n - 1` forward passes, compiled once per signature and order. Generated by `#[differentiable]`."),
            order: if self.f.params.iter().any(|p| p.ident == "order") {
                format_ident!("__rlx_order")
            } else {
                format_ident!("order")
            },
            nth_ty: tuple_or_single(self.f.wrt_params().map(|p| self.ty(mirror_out(p))).collect()),
        }
    }

    fn companions(&self) -> Vec<Companion<'a>> {
        let f = self.f;
        let name = self.name;
        let wrt: Vec<&'a Param> = f.wrt_params().collect();
        let d = wrt.len();
        let wrt_names = self.wrt_names();
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
        let mk = |prefix: &str, doc: String, transform, extras, ret_ty, skip, build: Build<'a>| {
            Companion {
                name: format_ident!("{}_{}", prefix, name),
                doc,
                transform,
                extras,
                ret: ret_ty,
                skip,
                build,
                runs: Runs::Dense,
            }
        };
        let sparse = |c: Companion<'a>, runs| Companion { runs, ..c };
        let sparse_ty = quote!(::rlx::SparseMatrix);
        let orientation = "rows are the elements of the (first) output, columns the elements of the differentiated parameters, each flattened row-major and concatenated in parameter order";
        let value_and_jac = move |tk: &Taker| {
            let (r, j) = (tk.ret(ret), jac(tk));
            quote!((#r, #j))
        };
        vec![
            mk(
                "value_and_jacobian",
                format!("Value of [`{name}`] and the Jacobian of its (first) output with respect to {wrt_names} (as `jacobian_{name}`), from one execution. Generated by `#[differentiable]`."),
                "Jacobian",
                vec![],
                quote!((#ret_ty, #jac_ty)),
                false,
                Box::new(value_and_jac),
            ),
            sparse(mk(
                "sparse_jacobian",
                format!("Sparse Jacobian of the (first) output of [`{name}`] with respect to {wrt_names}, as a compressed-sparse-column [`rlx::SparseMatrix`]: {orientation}. The pattern comes from the traced graph, its colouring compresses the columns (forward mode) or rows (reverse mode, when fewer), and every colour runs in one execution; all of that is built once per signature. Generated by `#[differentiable]`."),
                "SparseJacobian",
                vec![],
                sparse_ty.clone(),
                true,
                Box::new(|_: &Taker| quote!(__rlx_sparse)),
            ), Runs::Sparse),
            sparse(mk(
                "value_and_sparse_jacobian",
                format!("Value of [`{name}`] and its sparse Jacobian (as `sparse_jacobian_{name}`), from one execution: the residual and Jacobian of a Newton step. Generated by `#[differentiable]`."),
                "ValueAndSparseJacobian",
                vec![],
                quote!((#ret_ty, #sparse_ty)),
                false,
                Box::new(move |tk: &Taker| {
                    let r = tk.ret(ret);
                    quote!((#r, __rlx_sparse))
                }),
            ), Runs::Sparse),
            sparse(mk(
                "sparse_jacobian_into",
                format!("Writes the sparse Jacobian of [`{name}`] (as `sparse_jacobian_{name}`) into `jacobian`, which must have this signature's pattern (get it from a first `sparse_jacobian_{name}` call). A warm call allocates nothing. Generated by `#[differentiable]`."),
                "SparseJacobian",
                vec![],
                quote!(()),
                false,
                Box::new(|_: &Taker| quote!(())),
            ), Runs::SparseInto { value: false }),
            sparse(mk(
                "value_and_sparse_jacobian_into",
                format!("Writes the (first) output of [`{name}`], flattened, into `value` and its sparse Jacobian into `jacobian` (pattern as from `sparse_jacobian_{name}`), from one execution. A warm call allocates nothing. Generated by `#[differentiable]`."),
                "ValueAndSparseJacobian",
                vec![],
                quote!(()),
                false,
                Box::new(|_: &Taker| quote!(())),
            ), Runs::SparseInto { value: true }),
            sparse(mk(
                "sparse_hessian",
                format!("Sparse Hessian of the scalar (first) output of [`{name}`] with respect to {wrt_names}: a symmetric compressed-sparse-column [`rlx::SparseMatrix`] over the parameters' elements (flattened row-major, concatenated), both triangles stored, from a star colouring and forward over reverse mode in one execution. Generated by `#[differentiable]`."),
                "SparseHessian",
                vec![],
                sparse_ty.clone(),
                true,
                Box::new(|_: &Taker| quote!(__rlx_sparse)),
            ), Runs::Sparse),
            mk(
                "grad",
                format!("Gradient of [`{name}`] with respect to {wrt_names} (one value per parameter, shaped like it).\n\nThe (first) output must be a scalar; otherwise this returns an error pointing to `vjp_{name}` and `jacobian_{name}`. Generated by `#[differentiable]`."),
                "Grad",
                vec![],
                grads_ty.clone(),
                true,
                Box::new(grads.clone()),
            ),
            mk(
                "value_and_grad",
                format!("Value of [`{name}`] and its gradient with respect to {wrt_names}, from one execution. Generated by `#[differentiable]`."),
                "Grad",
                vec![],
                quote!((#ret_ty, #grads_ty)),
                false,
                Box::new(value_and_grads.clone()),
            ),
            mk(
                "jvp",
                format!("Jacobian-vector product of [`{name}`]: its value and the directional derivative of the (first) output along the tangents (one per parameter {wrt_names}, shaped like it). Generated by `#[differentiable]`."),
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
                format!("Vector-Jacobian product of [`{name}`]: its value and `cotangentᵀ · J` for each parameter {wrt_names} (`cotangent` is shaped like the first output). Generated by `#[differentiable]`."),
                "Vjp",
                vec![(format_ident!("cotangent"), out0)],
                quote!((#ret_ty, #grads_ty)),
                false,
                Box::new(value_and_grads.clone()),
            ),
            mk(
                "jacobian",
                format!("Jacobian of the (first) output of [`{name}`] with respect to {wrt_names}, one block shaped `[out..., in...]` per parameter, all columns in one execution (forward or reverse mode, whichever is cheaper). Generated by `#[differentiable]`."),
                "Jacobian",
                vec![],
                jac_ty.clone(),
                true,
                Box::new(jac),
            ),
            mk(
                "hessian",
                format!("Hessian of the scalar (first) output of [`{name}`] with respect to {wrt_names} (forward over reverse): with several parameters, row `i` holds the blocks `∂²f/∂x_i∂x_j` shaped `[in_i..., in_j...]`. Generated by `#[differentiable]`."),
                "Hessian",
                vec![],
                hess_ty,
                true,
                Box::new(hess),
            ),
            mk(
                "hvp",
                format!("Hessian-vector product of the scalar (first) output of [`{name}`]: `Σ_j ∂²f/∂x_i∂x_j · v_j` for each parameter `x_i` of {wrt_names} (one `v_*` per parameter, shaped like it). Generated by `#[differentiable]`."),
                "Hvp",
                mirrored("v_"),
                grads_ty,
                true,
                Box::new(grads),
            ),
            mk(
                "batch_jacobian",
                format!("Per-item Jacobians of [`{name}`] written over a batch: blocks `[N, out..., in...]` per parameter {wrt_names}, in one execution. Row `i` of the output must depend only on row `i` of each input; a function that mixes rows is an error. Generated by `#[differentiable]`."),
                "BatchJacobian",
                vec![],
                jac_ty,
                true,
                Box::new(jac),
            ),
        ]
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

/// The plain call of a function with `f32`/`f64` parameters is generic
/// over them: each takes a number or a tensor
/// (`rlx_runtime::rewritten::NumberArg`), and float results are numbers
/// when every such argument is a number, tensors otherwise
/// (`rlx_runtime::rewritten::Kind`). So a scalar helper written once for
/// numbers can be called inside another traced body.
struct GenericFloats {
    /// The `Kind` of the arguments (`None` without float parameters).
    kind: Option<TokenStream>,
    /// Per float parameter: its name, its type parameter, its type.
    params: Vec<(Ident, Ident, Float)>,
}

impl GenericFloats {
    fn new(f: &Func) -> GenericFloats {
        let params: Vec<(Ident, Ident, Float)> = f
            .params
            .iter()
            .filter_map(|p| match p.kind {
                Kind::Float(fl) => Some(p.ident.clone()).map(|id| {
                    let t = format_ident!("__RlxNumber_{}", id.to_string().trim_start_matches('_'));
                    (id, t, fl)
                }),
                _ => None,
            })
            .collect();
        let kind = params
            .iter()
            .fold(None, |acc: Option<TokenStream>, (_, t, fl)| {
                let fl = float_ty(*fl);
                let k = quote!(<#t as ::rlx::__private::NumberArg<#fl>>::Kind);
                Some(match acc {
                    None => k,
                    Some(acc) => quote!(<#acc as ::rlx::__private::Kind>::Or<#k>),
                })
            });
        GenericFloats { kind, params }
    }

    /// Generics and parameters of the plain call and the companions.
    fn signature(&self, f: &Func) -> (TokenStream, Vec<TokenStream>) {
        if self.kind.is_none() {
            return (TokenStream::new(), params_tokens(f));
        }
        let bounds = self.params.iter().map(|(_, t, fl)| {
            let fl = float_ty(*fl);
            quote!(#t: ::rlx::__private::NumberArg<#fl>)
        });
        let generics = quote!(<#(#bounds),*>);
        let params = f
            .params
            .iter()
            .map(|p| {
                let id = &p.ident;
                match self.params.iter().find(|(n, _, _)| n == id) {
                    Some((_, t, _)) => quote!(#id: #t),
                    None => {
                        let ty = &p.ty;
                        quote!(#id: #ty)
                    }
                }
            })
            .collect();
        (generics, params)
    }
}

/// `name: Type` for each parameter, without `mut`.
fn params_tokens(f: &Func) -> Vec<TokenStream> {
    f.params
        .iter()
        .map(|p| {
            let (id, ty) = (&p.ident, &p.ty);
            quote!(#id: #ty)
        })
        .collect()
}

/// The full expansion of a function that passed every check.
pub fn expand(f: &Func, body: &syn::Block) -> TokenStream {
    let floats = GenericFloats::new(f);
    let ctx = Ctx::new(f, floats.kind.clone());
    let item = &f.item;
    let vis = &item.vis;
    let name = &item.sig.ident;
    let attrs = &item.attrs;
    let fn_ident = format_ident!("__rlx_function_{}", name);
    let trace_ident = format_ident!("__rlx_trace_{}", name);
    let runtime: Vec<&Param> = f.runtime().collect();
    let statics: Vec<&Param> = f.statics().collect();
    let names: Vec<String> = runtime.iter().map(|p| p.ident.to_string()).collect();
    let wrt_pos: Vec<usize> = f
        .wrt
        .iter()
        .map(|&i| f.params[..i].iter().filter(|p| p.is_runtime()).count())
        .collect();
    let name_str = name.to_string();
    let static_tys: Vec<&Type> = statics.iter().map(|p| &p.ty).collect();
    let statics_ty = quote!((#(#static_tys,)*));
    let static_ids: Vec<&Ident> = statics.iter().map(|p| &p.ident).collect();
    let statics_val = quote!((#(::core::clone::Clone::clone(&#static_ids),)*));
    let args: Vec<TokenStream> = runtime
        .iter()
        .map(|p| {
            let id = &p.ident;
            match p.kind {
                Kind::Tensor { by_ref: true } | Kind::Float(_) => {
                    quote!(::rlx::__private::Arg::from(#id))
                }
                Kind::Tensor { by_ref: false } | Kind::Static => {
                    quote!(::rlx::__private::Arg::from(&#id))
                }
            }
        })
        .collect();
    let run = |transform: &str, args: &[TokenStream], extras: &[TokenStream]| {
        let t = Ident::new(transform, Span::call_site());
        quote! {
            let mut __rlx_outs = ::rlx::__private::Values::new();
            #fn_ident().run_to(
                ::rlx::__private::Transform::#t,
                &[#(#args),*],
                &[#(#extras),*],
                &#statics_val,
                #trace_ident,
                &mut __rlx_outs,
            )?;
            #[allow(unused_mut)]
            let mut __rlx_it = __rlx_outs.drain(..);
        }
    };
    // A function of numbers only: companions whose results are all numbers
    // first try `run_numbers` (no allocation; see `Function::run_numbers`),
    // outside the closure that builds the general result, so that the
    // numbers go straight into the return value.
    let number_args = numbers(f.runtime().map(|p| (&p.ident, mirror_out(p))));
    let kind = floats.kind.clone();
    let generic_args: Vec<TokenStream> = runtime
        .iter()
        .zip(&args)
        .map(|(p, a)| match p.kind {
            Kind::Float(fl) => {
                let (id, t) = (&p.ident, float_ty(fl));
                quote!(::rlx::__private::number_arg::<#t, _>(&#id))
            }
            _ => a.clone(),
        })
        .collect();
    let number_locals: Vec<Ident> = (0..runtime.len())
        .map(|i| format_ident!("__rlx_n{}", i))
        .collect();
    let generic_number_args = numbers(
        number_locals
            .iter()
            .zip(&runtime)
            .map(|(id, p)| (id, mirror_out(p))),
    );
    // `(Some(__rlx_n0), ..) = (number_of(&a), ..)`: the generic plain call
    // takes the number path when every argument is a number.
    let number_guard = {
        let tys = runtime.iter().map(|p| match p.kind {
            Kind::Float(fl) => float_ty(fl),
            _ => quote!(f64),
        });
        let ids = runtime.iter().map(|p| &p.ident);
        quote!(let (#(::core::option::Option::Some(#number_locals),)*) = (#(::rlx::__private::number_of::<#tys, _>(&#ids),)*))
    };
    let n_out = ctx.n_out;
    // A companion's body returns an `rlx::Result` through `companion`; the
    // plain call's (`plain: true`) returns the value through `plain`.
    let args_list = if kind.is_some() {
        quote!(&[#(#generic_args),*])
    } else {
        quote!(&[#(#args),*])
    };
    let companion_body = |transform: &str,
                          extras: &[(Ident, Out)],
                          skip: bool,
                          build: &dyn Fn(&Taker) -> TokenStream,
                          plain: bool,
                          ret: TokenStream,
                          runs: Runs| {
        let t = Ident::new(transform, Span::call_site());
        match runs {
            Runs::Dense => {}
            Runs::Sparse => {
                let general = build(&Taker::new(Read::Values, kind.clone()));
                return quote! {
                    ::rlx::__private::companion(|| -> ::rlx::Result<#ret> {
                        let (__rlx_outs, __rlx_sparse) = #fn_ident().run_sparse(
                            ::rlx::__private::Transform::#t,
                            #args_list,
                            &#statics_val,
                            #trace_ident,
                        )?;
                        #[allow(unused_mut, unused_variables)]
                        let mut __rlx_it = __rlx_outs.into_iter();
                        ::core::result::Result::Ok(#general)
                    })
                };
            }
            Runs::SparseInto { value } => {
                let value = if value {
                    quote!(::core::option::Option::Some(value))
                } else {
                    quote!(::core::option::Option::None)
                };
                return quote! {
                    ::rlx::__private::companion(|| #fn_ident().run_sparse_into(
                        ::rlx::__private::Transform::#t,
                        #args_list,
                        &#statics_val,
                        #trace_ident,
                        #value,
                        jacobian,
                    ))
                };
            }
        }
        let skip_it = skip.then(|| quote!(::rlx::__private::skip(&mut __rlx_it, #n_out);));
        let extra_args: Vec<TokenStream> = extras
            .iter()
            .map(|(id, _)| quote!(::rlx::__private::Arg::from(#id)))
            .collect();
        // The generic plain call of a function with float parameters.
        let generic = kind.is_some();
        let kind = kind.clone();
        let run = if generic {
            run(transform, &generic_args, &extra_args)
        } else {
            run(transform, &args, &extra_args)
        };
        let general = build(&Taker::new(Read::Values, kind.clone()));
        let tk = Taker::new(Read::Numbers, kind);
        let numeric = build(&tk);
        let (wrap, ok) = if plain {
            (quote!(plain), TokenStream::new())
        } else {
            (quote!(companion), quote!(::core::result::Result::Ok))
        };
        let number_extras = numbers(extras.iter().map(|(id, o)| (id, *o)));
        let number_args = if generic {
            &generic_number_args
        } else {
            &number_args
        };
        let fast = match (number_args, number_extras) {
            (Some(a), Some(e)) if tk.numeric.get() => Some((a, e)),
            _ => None,
        };
        let fast = fast.map(|(number_args, number_extras)| {
            let k = tk.taken.get() + if skip { n_out } else { 0 };
            let guard = generic.then(|| quote!(if #number_guard));
            quote! {
                #guard {
                let mut __rlx_numbers = [0.0f64; #k];
                match #fn_ident().run_numbers(
                    ::rlx::__private::Transform::#t,
                    #number_args,
                    #number_extras,
                    &#statics_val,
                    #trace_ident,
                    &mut __rlx_numbers,
                ) {
                    ::core::result::Result::Ok(true) => {
                        #[allow(unused_mut)]
                        let mut __rlx_it = __rlx_numbers.iter();
                        #skip_it
                        return #ok(#numeric);
                    }
                    ::core::result::Result::Ok(false) => {}
                    ::core::result::Result::Err(e) => {
                        return ::rlx::__private::#wrap(|| ::core::result::Result::Err(e));
                    }
                }
                }
            }
        });
        quote! {
            #fast
            ::rlx::__private::#wrap(|| -> ::rlx::Result<#ret> {
                #run
                #skip_it
                ::core::result::Result::Ok(#general)
            })
        }
    };

    // Tracer: inputs, parameter bindings, the body in a closure.
    let in_idents: Vec<Ident> = runtime
        .iter()
        .map(|p| format_ident!("__rlx_in_{}", p.ident))
        .collect();
    let mut static_index = 0usize;
    let bindings: Vec<TokenStream> = f
        .params
        .iter()
        .map(|p| {
            let id = &p.ident;
            let ty = &p.ty;
            let m = p.mutable.then(|| quote!(mut));
            match p.kind {
                Kind::Tensor { by_ref } => {
                    let src = format_ident!("__rlx_in_{}", id);
                    let amp = by_ref.then(|| quote!(&));
                    quote_spanned!(ty.span()=> let #m #id: #ty = #amp #src;)
                }
                Kind::Float(_) => {
                    let src = format_ident!("__rlx_in_{}", id);
                    quote_spanned!(id.span()=> let #m #id: ::rlx::Tensor = #src;)
                }
                Kind::Static => {
                    let j = syn::Index::from(static_index);
                    static_index += 1;
                    quote!(let #m #id: #ty = ::core::clone::Clone::clone(&__rlx_statics.#j);)
                }
            }
        })
        .collect();
    let asserts = static_tys
        .iter()
        .map(|ty| quote_spanned!(ty.span()=> ::rlx::__private::assert_static::<#ty>();));
    let ret_ty = &ctx.ret_ty;
    let declared_ty = f.ret.ty.to_token_stream();
    let (plain_generics, plain_params) = floats.signature(f);
    let plain_ret = ret_ty.clone();
    let plain_ret_val = plain_ret.clone();
    let call_body = companion_body(
        "Call",
        &[],
        false,
        &|tk: &Taker| tk.ret(&f.ret),
        true,
        plain_ret_val,
        Runs::Dense,
    );
    let outputs = quote_spanned! {f.ret.ty.span()=>
        let __rlx_outs = ::rlx::__private::outputs::<#declared_ty, _>(__rlx_body()?);
    };
    let companions = ctx.companions().into_iter().map(|c| {
        let extra_params = c.extra_params();
        let Companion {
            name: cname,
            doc,
            transform,
            extras,
            ret,
            skip,
            build,
            runs,
        } = c;
        let body = companion_body(
            transform,
            &extras,
            skip,
            &*build,
            false,
            ret.clone(),
            runs,
        );
        quote! {
            #[doc = #doc]
            #[allow(non_snake_case, clippy::too_many_arguments, clippy::type_complexity, clippy::needless_question_mark)]
            #[track_caller]
            #vis fn #cname #plain_generics (#(#plain_params,)* #(#extra_params),*) -> ::rlx::Result<#ret> {
                #body
            }
        }
    });
    let new_function = match f.cache {
        None => {
            quote!(::rlx::__private::Function::new(#name_str, &[#(#names),*], &[#(#wrt_pos),*]))
        }
        Some(n) => {
            quote!(::rlx::__private::Function::with_capacity(#name_str, &[#(#names),*], &[#(#wrt_pos),*], #n))
        }
    };
    let extra = ctx.graph_and_nth();
    let graph_doc = extra.graph_doc;
    let nth_doc = extra.nth_doc;
    let (graph_name, nth_name, nth_ty, order) =
        (extra.graph_name, extra.nth_name, extra.nth_ty, extra.order);
    let nth_grads = {
        let tk = Taker::new(Read::Values, ctx.kind.clone());
        let g = tuple_or_single(f.wrt_params().map(|p| tk.take(mirror_out(p))).collect());
        g
    };
    let graph_and_nth = quote! {
        #[doc = #graph_doc]
        #[allow(clippy::too_many_arguments)]
        #vis fn #graph_name #plain_generics (#(#plain_params),*) -> ::rlx::Result<::rlx::Graph> {
            #fn_ident().graph(&[#(#generic_args),*], &#statics_val, #trace_ident)
        }

        #[doc = #nth_doc]
        #[allow(clippy::too_many_arguments, clippy::type_complexity, clippy::needless_question_mark)]
        #[track_caller]
        #vis fn #nth_name #plain_generics (#(#plain_params,)* #order: usize) -> ::rlx::Result<#nth_ty> {
            ::rlx::__private::companion(|| -> ::rlx::Result<#nth_ty> {
                let __rlx_outs = #fn_ident().run_nth(&[#(#generic_args),*], #order, &#statics_val, #trace_ident)?;
                #[allow(unused_mut)]
                let mut __rlx_it = __rlx_outs.into_iter();
                ::rlx::__private::skip(&mut __rlx_it, #n_out);
                ::core::result::Result::Ok(#nth_grads)
            })
        }
    };
    quote! {
        #graph_and_nth

        #[doc(hidden)]
        fn #fn_ident() -> &'static ::rlx::__private::Function {
            static FUNCTION: ::rlx::__private::Function = #new_function;
            &FUNCTION
        }

        #[doc(hidden)]
        #[allow(non_snake_case, unused_mut, clippy::all)]
        fn #trace_ident(
            __rlx_types: &[::rlx::__private::TensorType],
            __rlx_statics: &#statics_ty,
        ) -> ::rlx::Result<::rlx::__private::Graph> {
            #(#asserts)*
            let __rlx_trace = ::rlx::__private::Trace::enter();
            let [#(#in_idents),*] = ::rlx::__private::inputs(&__rlx_trace, [#(#names),*], __rlx_types)?;
            #(#bindings)*
            let mut __rlx_body = move || -> ::rlx::Result<_> { ::core::result::Result::Ok(#body) };
            #outputs
            ::rlx::__private::finish(__rlx_trace, __rlx_outs)
        }

        #(#attrs)*
        // A plain call that fails panics at the caller's line.
        #[allow(clippy::too_many_arguments, clippy::needless_question_mark)]
        #[track_caller]
        #vis fn #name #plain_generics (#(#plain_params),*) -> #plain_ret {
            #call_body
        }

        #(#companions)*
    }
}

/// After errors: the user's signature and every companion's, with bodies
/// that never run, next to the errors, so that callers get no follow-on
/// "cannot find function" errors.
pub fn fallback(f: &Func) -> TokenStream {
    let ctx = Ctx::new(f, None);
    let item = &f.item;
    let vis = &item.vis;
    let attrs = &item.attrs;
    let mut sig = item.sig.clone();
    sig.constness = None;
    sig.inputs = sig
        .inputs
        .into_iter()
        .filter(|a| matches!(a, syn::FnArg::Typed(_)))
        .collect();
    for arg in sig.inputs.iter_mut() {
        if let syn::FnArg::Typed(pt) = arg {
            if let syn::Pat::Ident(pi) = &mut *pt.pat {
                pi.mutability = None;
            }
        }
    }
    let params = params_tokens(f);
    let generics = &item.sig.generics;
    let where_clause = &generics.where_clause;
    let companions = ctx.companions().into_iter().map(|c| {
        let extra_params = c.extra_params();
        let Companion { name, ret, .. } = c;
        quote! {
            #[allow(unused_variables, clippy::all)]
            #vis fn #name #generics (#(#params,)* #(#extra_params),*) -> ::rlx::Result<#ret> #where_clause {
                ::core::unreachable!("`#[differentiable]` reported a compile error")
            }
        }
    });
    let GraphAndNth {
        graph_name,
        nth_name,
        nth_ty,
        order,
        ..
    } = ctx.graph_and_nth();
    quote! {
        #(#attrs)*
        #[allow(unused_variables, clippy::all)]
        #vis #sig {
            ::core::unreachable!("`#[differentiable]` reported a compile error")
        }
        #(#companions)*
        #[allow(unused_variables, clippy::all)]
        #vis fn #graph_name #generics (#(#params),*) -> ::rlx::Result<::rlx::Graph> #where_clause {
            ::core::unreachable!("`#[differentiable]` reported a compile error")
        }
        #[allow(unused_variables, clippy::all)]
        #vis fn #nth_name #generics (#(#params,)* #order: usize) -> ::rlx::Result<#nth_ty> #where_clause {
            ::core::unreachable!("`#[differentiable]` reported a compile error")
        }
    }
}
