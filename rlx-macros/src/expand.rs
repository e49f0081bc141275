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
//!   `hessian_f`, `hvp_f`, `batch_jacobian_f`, each a few lines over
//!   `Function::run`.

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
fn mirror_ty(p: &Param) -> TokenStream {
    match p.kind {
        Kind::Float(f) => float_ty(f),
        Kind::Tensor { .. } | Kind::Static => quote!(::rlx::Tensor),
    }
}

/// The parameter type of an extra input mirroring a parameter.
fn extra_param_ty(p: &Param) -> TokenStream {
    match p.kind {
        Kind::Float(f) => float_ty(f),
        Kind::Tensor { .. } | Kind::Static => quote!(&::rlx::Tensor),
    }
}

fn tuple_or_single(items: Vec<TokenStream>) -> TokenStream {
    if items.len() == 1 {
        items.into_iter().next().expect("one item")
    } else {
        quote!((#(#items,)*))
    }
}

/// One companion: its name, doc, extra parameters, return type and how the
/// value is built from the iterator `__rlx_it` over the plan's outputs.
struct Companion {
    name: Ident,
    doc: String,
    transform: &'static str,
    extras: Vec<(Ident, TokenStream)>,
    ret: TokenStream,
    /// Whether the function's own outputs are skipped first.
    skip: bool,
    build: TokenStream,
}

struct Ctx<'a> {
    f: &'a Func,
    name: &'a Ident,
    /// Types of the outputs and how to take each from `__rlx_it`.
    ret_ty: TokenStream,
    take_ret: TokenStream,
    out0_ty: TokenStream,
    n_out: usize,
}

impl<'a> Ctx<'a> {
    fn new(f: &'a Func) -> Ctx<'a> {
        let ret = &f.ret;
        let ret_ty = ret.ty.to_token_stream();
        let takes: Vec<TokenStream> = ret
            .outs
            .iter()
            .map(|&o| {
                let t = out_ty(o);
                quote!(::rlx::__private::take::<#t>(&mut __rlx_it)?)
            })
            .collect();
        let take_ret = if ret.tuple {
            quote!((#(#takes,)*))
        } else {
            takes.into_iter().next().expect("one output")
        };
        Ctx {
            f,
            name: &f.item.sig.ident,
            ret_ty,
            take_ret,
            out0_ty: out_ty(ret.outs[0]),
            n_out: ret.outs.len(),
        }
    }

    fn wrt_names(&self) -> String {
        self.f
            .wrt_params()
            .map(|p| format!("`{}`", p.ident))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn companions(&self) -> Vec<Companion> {
        let name = self.name;
        let wrt: Vec<&Param> = self.f.wrt_params().collect();
        let d = wrt.len();
        let wrt_names = self.wrt_names();
        let (ret_ty, take_ret, out0_ty) = (&self.ret_ty, &self.take_ret, &self.out0_ty);
        let grads_ty = tuple_or_single(wrt.iter().map(|p| mirror_ty(p)).collect());
        let take_grads = tuple_or_single(
            wrt.iter()
                .map(|p| {
                    let t = mirror_ty(p);
                    quote!(::rlx::__private::take::<#t>(&mut __rlx_it)?)
                })
                .collect(),
        );
        let take_tensor = quote!(::rlx::__private::take::<::rlx::Tensor>(&mut __rlx_it)?);
        let jac_ty = tuple_or_single(vec![quote!(::rlx::Tensor); d]);
        let take_jac = tuple_or_single(vec![take_tensor.clone(); d]);
        let hess_ty = tuple_or_single(vec![jac_ty.clone(); d]);
        let take_hess = tuple_or_single(vec![take_jac.clone(); d]);
        let mirrored = |prefix: &str| -> Vec<(Ident, TokenStream)> {
            wrt.iter()
                .map(|p| (format_ident!("{}{}", prefix, p.ident), extra_param_ty(p)))
                .collect()
        };
        let out0_param_ty = match self.f.ret.outs[0] {
            Out::Tensor => quote!(&::rlx::Tensor),
            Out::Float(f) => float_ty(f),
        };
        let mk = |prefix: &str, doc: String, transform, extras, ret, build: TokenStream| {
            let skip = build.is_empty();
            let build = if skip {
                match transform {
                    "Jacobian" | "BatchJacobian" => take_jac.clone(),
                    "Hessian" => take_hess.clone(),
                    _ => take_grads.clone(),
                }
            } else {
                build
            };
            Companion {
                name: format_ident!("{}_{}", prefix, name),
                doc,
                transform,
                extras,
                ret,
                skip,
                build,
            }
        };
        vec![
            mk(
                "grad",
                format!("Gradient of [`{name}`] with respect to {wrt_names} (one value per parameter, shaped like it).\n\nThe (first) output must be a scalar; otherwise this returns an error pointing to `vjp_{name}` and `jacobian_{name}`. Generated by `#[differentiable]`."),
                "Grad",
                vec![],
                grads_ty.clone(),
                TokenStream::new(),
            ),
            mk(
                "value_and_grad",
                format!("Value of [`{name}`] and its gradient with respect to {wrt_names}, from one execution. Generated by `#[differentiable]`."),
                "Grad",
                vec![],
                quote!((#ret_ty, #grads_ty)),
                quote!((#take_ret, #take_grads)),
            ),
            mk(
                "jvp",
                format!("Jacobian-vector product of [`{name}`]: its value and the directional derivative of the (first) output along the tangents (one per parameter {wrt_names}, shaped like it). Generated by `#[differentiable]`."),
                "Jvp",
                mirrored("tangent_"),
                quote!((#ret_ty, #out0_ty)),
                quote!((#take_ret, ::rlx::__private::take::<#out0_ty>(&mut __rlx_it)?)),
            ),
            mk(
                "vjp",
                format!("Vector-Jacobian product of [`{name}`]: its value and `cotangentᵀ · J` for each parameter {wrt_names} (`cotangent` is shaped like the first output). Generated by `#[differentiable]`."),
                "Vjp",
                vec![(format_ident!("cotangent"), out0_param_ty)],
                quote!((#ret_ty, #grads_ty)),
                quote!((#take_ret, #take_grads)),
            ),
            mk(
                "jacobian",
                format!("Jacobian of the (first) output of [`{name}`] with respect to {wrt_names}, one block shaped `[out..., in...]` per parameter, all columns in one execution (forward or reverse mode, whichever is cheaper). Generated by `#[differentiable]`."),
                "Jacobian",
                vec![],
                jac_ty.clone(),
                TokenStream::new(),
            ),
            mk(
                "hessian",
                format!("Hessian of the scalar (first) output of [`{name}`] with respect to {wrt_names} (forward over reverse): with several parameters, row `i` holds the blocks `∂²f/∂x_i∂x_j` shaped `[in_i..., in_j...]`. Generated by `#[differentiable]`."),
                "Hessian",
                vec![],
                hess_ty,
                TokenStream::new(),
            ),
            mk(
                "hvp",
                format!("Hessian-vector product of the scalar (first) output of [`{name}`]: `Σ_j ∂²f/∂x_i∂x_j · v_j` for each parameter `x_i` of {wrt_names} (one `v_*` per parameter, shaped like it). Generated by `#[differentiable]`."),
                "Hvp",
                mirrored("v_"),
                grads_ty,
                TokenStream::new(),
            ),
            mk(
                "batch_jacobian",
                format!("Per-item Jacobians of [`{name}`] written over a batch: blocks `[N, out..., in...]` per parameter {wrt_names}, in one execution. Row `i` of the output must depend only on row `i` of each input; a function that mixes rows is an error. Generated by `#[differentiable]`."),
                "BatchJacobian",
                vec![],
                jac_ty,
                TokenStream::new(),
            ),
        ]
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
    let ctx = Ctx::new(f);
    let item = &f.item;
    let vis = &item.vis;
    let name = &item.sig.ident;
    let attrs = &item.attrs;
    let fn_ident = format_ident!("__rlx_function_{}", name);
    let trace_ident = format_ident!("__rlx_trace_{}", name);
    let params = params_tokens(f);
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
    let run = |transform: &str, extras: &[TokenStream]| {
        let t = Ident::new(transform, Span::call_site());
        quote! {
            let __rlx_outs = #fn_ident().run(
                ::rlx::__private::Transform::#t,
                &[#(#args),*],
                &[#(#extras),*],
                &#statics_val,
                #trace_ident,
            )?;
            #[allow(unused_mut)]
            let mut __rlx_it = __rlx_outs.into_iter();
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
    let take_ret = &ctx.take_ret;
    let call_run = run("Call", &[]);
    let outputs = quote_spanned! {f.ret.ty.span()=>
        let __rlx_outs = ::rlx::__private::outputs::<#ret_ty, _>(__rlx_body());
    };
    let companions = ctx.companions().into_iter().map(|c| {
        let Companion {
            name: cname,
            doc,
            transform,
            extras,
            ret,
            skip,
            build,
        } = c;
        let n_out = ctx.n_out;
        let skip = skip.then(|| quote!(::rlx::__private::skip(&mut __rlx_it, #n_out);));
        let extra_params = extras.iter().map(|(id, ty)| quote!(#id: #ty));
        let extra_args: Vec<TokenStream> = extras
            .iter()
            .map(|(id, _)| quote!(::rlx::__private::Arg::from(#id)))
            .collect();
        let run = run(transform, &extra_args);
        quote! {
            #[doc = #doc]
            #[allow(clippy::too_many_arguments, clippy::type_complexity, clippy::needless_question_mark)]
            #vis fn #cname(#(#params,)* #(#extra_params),*) -> ::rlx::Result<#ret> {
                ::rlx::__private::companion(|| -> ::rlx::Result<#ret> {
                    #run
                    #skip
                    ::core::result::Result::Ok(#build)
                })
            }
        }
    });
    quote! {
        #[doc(hidden)]
        fn #fn_ident() -> &'static ::rlx::__private::Function {
            static FUNCTION: ::rlx::__private::Function =
                ::rlx::__private::Function::new(#name_str, &[#(#names),*], &[#(#wrt_pos),*]);
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
            let mut __rlx_body = move || #body;
            #outputs
            ::rlx::__private::finish(__rlx_trace, __rlx_outs)
        }

        #(#attrs)*
        #[allow(clippy::too_many_arguments, clippy::needless_question_mark)]
        #vis fn #name(#(#params),*) -> #ret_ty {
            ::rlx::__private::plain(|| -> ::rlx::Result<#ret_ty> {
                #call_run
                ::core::result::Result::Ok(#take_ret)
            })
        }

        #(#companions)*
    }
}

/// After errors: the user's signature and every companion's, with bodies
/// that never run, next to the errors, so that callers get no follow-on
/// "cannot find function" errors.
pub fn fallback(f: &Func) -> TokenStream {
    let ctx = Ctx::new(f);
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
        let Companion {
            name, extras, ret, ..
        } = c;
        let extra_params = extras.iter().map(|(id, ty)| quote!(#id: #ty));
        quote! {
            #[allow(unused_variables, clippy::all)]
            #vis fn #name #generics (#(#params,)* #(#extra_params),*) -> ::rlx::Result<#ret> #where_clause {
                ::core::unreachable!("`#[differentiable]` reported a compile error")
            }
        }
    });
    quote! {
        #(#attrs)*
        #[allow(unused_variables, clippy::all)]
        #vis #sig {
            ::core::unreachable!("`#[differentiable]` reported a compile error")
        }
        #(#companions)*
    }
}
