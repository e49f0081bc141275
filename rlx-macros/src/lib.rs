//! The `#[differentiable]` attribute of rlx.
//!
//! Pipeline, one module per step:
//! - `parse`: the `fn` and the attribute arguments to our model
//!   (parameter kinds, outputs, `wrt`);
//! - `check`: rejects what cannot be traced soundly
//!   (`async`, `unsafe`, `self`, generics, `loop`, `match`/`while` on
//!   traced values, ...), using `traced` to tell traced bindings from
//!   static ones;
//! - `rewrite`: comparisons and `if`/`else` on traced
//!   values to mask ops and selects;
//! - `marked`: `#[scan]` loops (checked with `check`, lowered to
//!   `rlx::scan` after `rewrite`);
//! - `expand`: the plain function, its companions, the tracer.
//!
//! Imports point down the pipeline: `check` uses `parse`, `traced` and `marked`,
//! `rewrite` uses `traced`, `expand` uses `parse`; only this file calls
//! the steps, in order. The generated code names only paths of the `rlx`
//! facade (`::rlx::Tensor`, `::rlx::__private::...`).
//!
//! On errors the output still holds the user's function and every companion
//! with the right signatures, next to the `compile_error!`s.
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod check;
mod expand;
mod marked;
mod parse;
mod rewrite;
mod traced;

/// Makes a tensor function differentiable and generates its companions
/// (`grad_f`, `value_and_grad_f`, `jvp_f`, `vjp_f`, `jacobian_f`,
/// `hessian_f`, `hvp_f`, `batch_jacobian_f`). See the `rlx` crate docs.
///
/// `#[differentiable(wrt(a, b))]` differentiates with respect to the named
/// parameters only; `#[differentiable(cache = N)]` keeps compiled plans for
/// at most `N` signatures of this function (least recently used evicted).
#[proc_macro_attribute]
pub fn differentiable(args: TokenStream, item: TokenStream) -> TokenStream {
    differentiable_impl(args.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

fn differentiable_impl(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let mut errors = Vec::new();
    let func = parse::parse(args, item, &mut errors)?;
    check::check(&func, &mut errors);
    if let Some(combined) = errors.into_iter().reduce(|mut a, b| {
        a.combine(b);
        a
    }) {
        let mut out = expand::fallback(&func);
        out.extend(combined.into_compile_error());
        return Ok(out);
    }
    let mut body = (*func.item.block).clone();
    let numbers: Vec<&syn::Ident> = func
        .params
        .iter()
        .filter(|p| matches!(p.kind, parse::Kind::Float(_)))
        .map(|p| &p.ident)
        .collect();
    rewrite::rewrite(
        &mut body,
        traced::Taint::new(func.runtime().map(|p| &p.ident)),
        &numbers,
    );
    marked::lower(&mut body);
    Ok(expand::expand(&func, &body))
}
