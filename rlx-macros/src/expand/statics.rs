//! The static parameters' path to the plan cache.
//!
//! For `fn f(x: &Tensor, n: usize, mode: Mode)` the expansion holds
//! `fn __rlx_statics_f(n: &usize, mode: &Mode) -> Statics<(usize, Mode)>`,
//! which every companion calls to build its cache key, and the tracer takes
//! `&Statics<(usize, Mode)>`. That function holds one `const` of type
//! `StaticOps<T>` per parameter, spanned on the parameter's type: the only
//! place where `T: StaticParam` (`Clone + Eq + Hash + ...`) is required,
//! so a type that is not one gets one error there, and the rest of the
//! expansion (which clones, compares and hashes through those `const`s)
//! none. See the facade's `static_params` module.
//!
//! A function without static parameters keys its plans with `()`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Ident;

use crate::parse::{Func, Param};

/// `__rlx_statics_f`.
fn fn_ident(f: &Func) -> Ident {
    format_ident!("__rlx_statics_{}", f.item.sig.ident)
}

fn ops_ident(i: usize) -> Ident {
    format_ident!("__RLX_STATIC_{}", i)
}

/// The type of the tracer's static argument.
pub(super) fn key_ty(f: &Func) -> TokenStream {
    let tys: Vec<&syn::Type> = f.statics().map(|p| &p.ty).collect();
    if tys.is_empty() {
        quote!(())
    } else {
        quote!(::rlx::__private::Statics<(#(#tys,)*)>)
    }
}

/// The expression of a call's static argument, in a generated function
/// whose parameters have the user's names.
pub(super) fn key_val(f: &Func) -> TokenStream {
    let ids: Vec<&Ident> = f.statics().map(|p| &p.ident).collect();
    if ids.is_empty() {
        return quote!(());
    }
    let name = fn_ident(f);
    quote!(#name(#(&#ids),*))
}

/// `__rlx_statics_f`, or nothing without static parameters.
pub(super) fn key_fn(f: &Func) -> TokenStream {
    let statics: Vec<&Param> = f.statics().collect();
    if statics.is_empty() {
        return TokenStream::new();
    }
    let name = fn_ident(f);
    let ids: Vec<&Ident> = statics.iter().map(|p| &p.ident).collect();
    let tys: Vec<&syn::Type> = statics.iter().map(|p| &p.ty).collect();
    let ops: Vec<Ident> = (0..statics.len()).map(ops_ident).collect();
    let idx: Vec<syn::Index> = (0..statics.len()).map(syn::Index::from).collect();
    // The check, on the parameter's type: rustc reports a failed bound at
    // the span of the expression that requires it.
    let checks = statics.iter().zip(&ops).map(|(p, op)| {
        let ty = &p.ty;
        quote_spanned! {ty.span()=>
            const #op: ::rlx::__private::StaticOps<#ty> = ::rlx::__private::StaticOps::new();
        }
    });
    quote! {
        #[doc(hidden)]
        #[allow(clippy::all)]
        #[inline]
        fn #name(#(#ids: &#tys),*) -> ::rlx::__private::Statics<(#(#tys,)*)> {
            #(#checks)*
            const __RLX_STATICS: ::rlx::__private::StaticOps<(#(#tys,)*)> =
                ::rlx::__private::StaticOps::tuple(
                    |__rlx_v| (#(#ops.clone_of(&__rlx_v.#idx),)*),
                    |__rlx_a, __rlx_b| true #(&& #ops.eq(&__rlx_a.#idx, &__rlx_b.#idx))*,
                    |__rlx_v, __rlx_h| { #(#ops.hash(&__rlx_v.#idx, __rlx_h);)* },
                );
            ::rlx::__private::Statics::new((#(#ops.clone_of(#ids),)*), __RLX_STATICS)
        }
    }
}

/// The tracer's bindings of the static parameters, from its
/// `__rlx_statics: &Statics<..>`.
pub(super) fn bindings(f: &Func) -> TokenStream {
    let statics: Vec<&Param> = f.statics().collect();
    if statics.is_empty() {
        return TokenStream::new();
    }
    let pats = statics.iter().map(|p| {
        let id = &p.ident;
        let m = p.mutable.then(|| quote!(mut));
        quote!(#m #id)
    });
    let tys = statics.iter().map(|p| &p.ty);
    quote!(let (#(#pats,)*): (#(#tys,)*) = __rlx_statics.values();)
}
