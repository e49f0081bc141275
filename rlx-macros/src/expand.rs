//! Generates the code: the plain function, its companions, the tracer and
//! the plan cache. Only generates; `check.rs` has rejected what it must.
//!
//! For `fn f(q: &Tensor, k: f64, n: usize) -> f64` it emits:
//! - `fn __rlx_function_f() -> &'static Function`: the plan cache;
//! - `fn __rlx_statics_f(&usize) -> Statics<(usize,)>`: the plan-cache key
//!   of the static arguments, and the one check of their types (`statics`);
//! - `fn __rlx_trace_f(types, &Statics<(usize,)>) -> Result<Graph>`: enters
//!   a trace, declares `q` and `k` as inputs, binds `k` as a 0-d `Tensor`
//!   and `n` from the static key, runs the rewritten body in a closure and
//!   ends the trace with its outputs;
//! - `fn f(..) -> f64`: the plain call, running the cached plan;
//! - `grad_f`, `value_and_grad_f`, `jvp_f`, `vjp_f`, `jacobian_f`,
//!   `value_and_jacobian_f`, `hessian_f`, `hvp_f`, `batch_jacobian_f`, each
//!   a few lines over `Function::run`;
//! - `sparse_jacobian_f`, `value_and_sparse_jacobian_f`, `sparse_hessian_f`
//!   over `Function::run_sparse`, and `sparse_jacobian_into_f`,
//!   `value_and_sparse_jacobian_into_f`, `sparse_hessian_into_f` over
//!   `Function::run_sparse_into`.
//!
//! `dead_code`: the companions name `f` (a zero-sized function item), so
//! `f` is live when a companion is, and they do not allow `dead_code`:
//! rustc takes every item that allows it for a root of liveness, so `f`
//! would never be reported. An unused companion is not reported either:
//! rustc drops lints whose span comes from an attribute macro, and a
//! companion's `fn ... { }` is generated code, while the plain `f` keeps
//! the user's `fn` token and braces. So an unused private `f` is reported
//! by its own name and nothing else is.
//!
//! Submodules: `companions` (which companions exist, their names and
//! results), `docs` (their doc comments), `statics` (the static
//! parameters' key and check), `body` (the bodies of the plain call, the companions, `graph_f`
//! and `nth_derivative_f`), `tokens` (shared token helpers).

mod body;
mod companions;
mod docs;
mod statics;
mod tokens;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::Ident;

use crate::parse::{Func, Kind, Param};
use body::Bodies;
use companions::{Companion, Ctx, GraphAndNth, Runs};
use tokens::{params_tokens, GenericFloats, Taker};

/// The full expansion of a function that passed every check.
pub fn expand(f: &Func, body: &syn::Block) -> TokenStream {
    let floats = GenericFloats::new(f);
    let ctx = Ctx::new(f, floats.kind.clone());
    let bodies = Bodies::new(f, &ctx);
    let (fn_ident, trace_ident) = (&bodies.fn_ident, &bodies.trace_ident);
    let item = &f.item;
    let vis = &item.vis;
    let name = &item.sig.ident;
    let attrs = &item.attrs;
    let runtime: Vec<&Param> = f.runtime().collect();
    let names: Vec<String> = runtime.iter().map(|p| p.ident.to_string()).collect();
    let wrt_pos: Vec<usize> = f
        .wrt
        .iter()
        .map(|&i| f.params[..i].iter().filter(|p| p.is_runtime()).count())
        .collect();
    let name_str = name.to_string();
    let statics_ty = statics::key_ty(f);
    // Tracer: inputs, parameter bindings, the body in a closure.
    let in_idents: Vec<Ident> = runtime
        .iter()
        .map(|p| format_ident!("__rlx_in_{}", p.ident))
        .collect();
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
                Kind::Static => TokenStream::new(),
            }
        })
        .collect();
    let static_bindings = statics::bindings(f);
    let statics_fn = statics::key_fn(f);
    let ret_ty = &ctx.ret_ty;
    let declared_ty = f.ret.ty.to_token_stream();
    let (plain_generics, plain_params) = floats.signature(f);
    let plain_ret = ret_ty.clone();
    let plain_ret_val = plain_ret.clone();
    let call_body = bodies.companion(
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
    let uses_plain = floats.uses_plain(name);
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
            ..
        } = c;
        let body = bodies.companion(
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
                #uses_plain
                #body
            }
        }
    });
    let new_function = match f.cache {
        cache if f.holomorphic => {
            let n = cache.unwrap_or(0);
            quote!(::rlx::__private::Function::holomorphic(#name_str, &[#(#names),*], &[#(#wrt_pos),*], #n))
        }
        None => {
            quote!(::rlx::__private::Function::new(#name_str, &[#(#names),*], &[#(#wrt_pos),*]))
        }
        Some(n) => {
            quote!(::rlx::__private::Function::with_capacity(#name_str, &[#(#names),*], &[#(#wrt_pos),*], #n))
        }
    };
    let graph_and_nth =
        bodies.graph_and_nth(&ctx, vis, &plain_generics, &plain_params, &uses_plain);
    // The plain function's `fn` and braces are the user's: rustc lints an
    // item at a span from its first token to its last, dropped when that
    // span is the macro's, so `dead_code` reports an unused `f` only if
    // both ends are the user's tokens (see the module docs).
    let fn_token = &item.sig.fn_token;
    let mut plain_body = TokenStream::new();
    body.brace_token
        .surround(&mut plain_body, |t| t.extend(call_body));
    quote! {
        #graph_and_nth

        #statics_fn

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
            let __rlx_trace = ::rlx::__private::Trace::enter();
            let [#(#in_idents),*] = ::rlx::__private::inputs(&__rlx_trace, [#(#names),*], __rlx_types)?;
            #(#bindings)*
            #static_bindings
            let mut __rlx_body = move || -> ::rlx::Result<_> { ::core::result::Result::Ok(#body) };
            #outputs
            ::rlx::__private::finish(__rlx_trace, __rlx_outs)
        }

        #(#attrs)*
        // A plain call that fails panics at the caller's line.
        #[allow(clippy::too_many_arguments, clippy::needless_question_mark)]
        #[track_caller]
        #vis #fn_token #name #plain_generics (#(#plain_params),*) -> #plain_ret #plain_body

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
    for arg in sig.inputs.iter_mut() {
        if let syn::FnArg::Typed(pt) = arg {
            if let syn::Pat::Ident(pi) = &mut *pt.pat {
                pi.mutability = None;
            }
        }
    }
    // A `self` receiver (reported) stays on every item: in an `impl` a
    // caller's `value.f(..)` or `value.grad_f(..)` then resolves, and the
    // one error is the macro's.
    let params: Vec<TokenStream> = item
        .sig
        .receiver()
        .map(|r| {
            let mut r = r.clone();
            r.attrs.clear();
            if r.reference.is_none() {
                r.mutability = None; // `mut self`, not `&mut self`
            }
            r.into_token_stream()
        })
        .into_iter()
        .chain(params_tokens(f))
        .collect();
    let generics = &item.sig.generics;
    let where_clause = &generics.where_clause;
    let companions = ctx.companions().into_iter().map(|c| {
        let extra_params = c.extra_params();
        let Companion { name, ret, .. } = c;
        quote! {
            #[allow(dead_code, unused_variables, clippy::all)]
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
        #[allow(dead_code, unused_variables, clippy::all)]
        #vis fn #graph_name #generics (#(#params),*) -> ::rlx::Result<::rlx::Graph> #where_clause {
            ::core::unreachable!("`#[differentiable]` reported a compile error")
        }
        #[allow(dead_code, unused_variables, clippy::all)]
        #vis fn #nth_name #generics (#(#params,)* #order: usize) -> ::rlx::Result<#nth_ty> #where_clause {
            ::core::unreachable!("`#[differentiable]` reported a compile error")
        }
    }
}
