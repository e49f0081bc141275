//! Lowers each `#[scan]` loop of a (rewritten) body into one call of
//! `::rlx::__private::scan_for`; the facade's `marked_loop.rs` shows the
//! shape of the code. Runs after `rewrite.rs`, so the body is rewritten as
//! the unrolled loop's would be, and after `check.rs` has reported the
//! loop's errors (any found here again are emitted in its place).
//!
//! ```text
//! #[scan] for t in a..b { BODY }
//!   →
//! {
//!     let __rlx_range = scan_range(a, b, false);
//!     let __rlx_xs = (steps_of(&(xs), __rlx_range), ..);
//!     let (__rlx_carries, __rlx_ys) = scan_for(Scan::new(), __rlx_range,
//!         (carry(c0), ..), __rlx_xs,
//!         |(mut c0, ..), (__rlx_x0, ..)| { let mut ys = Vec::new(); BODY'; ((c0, ..), (step_outputs(ys), ..)) });
//!     (c0, ..) = __rlx_carries;
//!     if let Some((__rlx_y0, ..)) = __rlx_ys { extend_steps(&mut ys, __rlx_y0, __rlx_range, false); .. }
//! }
//! ```
//! A body that uses `?` calls `try_scan_for(..)?` instead, with a closure
//! returning `rlx::Result` (`Ok(((c0, ..), (..)))` at its end).
//! Tuples nest (at most four elements each) to any number of carries,
//! inputs and outputs. Nested marked loops are lowered outside in.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, ExprForLoop, Ident};

use super::{loop_var, marker, range, Body, Marker};

/// Lowers every marked loop in `block`.
pub fn lower(block: &mut Block) {
    Lower.visit_block_mut(block);
}

struct Lower;

impl VisitMut for Lower {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::ForLoop(f) = e {
            if let Some(m) = marker(&f.attrs) {
                let tokens = lowered(f, m).unwrap_or_else(|e| {
                    let e = e.into_compile_error();
                    quote!({ #e })
                });
                *e = syn::parse2(tokens).unwrap_or_else(|err| {
                    let msg = err.to_string();
                    syn::parse_quote!(::core::compile_error!(#msg))
                });
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// A tuple of `items`, nested so that no tuple has more than four
/// elements (the arity `rlx::scan`'s traits go to).
fn tuple(items: Vec<TokenStream>) -> TokenStream {
    if items.len() <= 4 {
        return quote!((#(#items,)*));
    }
    let chunk = items.len().div_ceil(4);
    tuple(items.chunks(chunk).map(|c| tuple(c.to_vec())).collect())
}

fn lowered(f: &ExprForLoop, m: syn::Result<Marker>) -> syn::Result<TokenStream> {
    let m = m?;
    let r = range(&f.expr)?;
    let var = loop_var(f)?;
    let mut body = f.body.clone();
    let b = Body::walk(&mut body, var.as_ref(), true);
    if let Some(e) = b.errors.into_iter().reduce(|mut a, e| {
        a.combine(e);
        a
    }) {
        return Err(e);
    }
    let span = f.for_token.span;
    let ident = |(name, span): &(String, Span)| Ident::new(name, *span);
    let carries: Vec<Ident> = b.carries.iter().map(ident).collect();
    let outputs: Vec<Ident> = b.outputs.iter().map(ident).collect();
    let init = tuple(
        carries
            .iter()
            .map(|c| quote_spanned!(c.span()=> ::rlx::__private::carry(#c)))
            .collect(),
    );
    let carry_pat = tuple(carries.iter().map(|c| quote!(mut #c)).collect());
    let carry_ret = tuple(carries.iter().map(|c| quote!(#c)).collect());
    let xs = tuple(
        b.inputs
            .iter()
            .map(|i| {
                let x = &i.expr;
                quote_spanned!(i.span=> ::rlx::__private::steps_of(&(#x), __rlx_range))
            })
            .collect(),
    );
    let x_pat = tuple(
        (0..b.inputs.len())
            .map(|k| format_ident!("__rlx_x{}", k).into_token_stream())
            .collect(),
    );
    let declare = outputs
        .iter()
        .map(|o| quote_spanned!(o.span()=> let mut #o = ::std::vec::Vec::new();));
    let outs_ret = tuple(
        outputs
            .iter()
            .map(|o| quote_spanned!(o.span()=> ::rlx::__private::step_outputs(#o)))
            .collect(),
    );
    let y_ids: Vec<Ident> = (0..outputs.len())
        .map(|j| format_ident!("__rlx_y{}", j))
        .collect();
    let y_pat = tuple(y_ids.iter().map(|y| quote!(#y)).collect());
    let reverse = r.reverse;
    let mut settings = quote_spanned!(m.span=> ::rlx::Scan::new());
    if reverse {
        settings.extend(quote!(.reverse(true)));
    }
    if let Some(c) = &m.checkpoints {
        settings = quote_spanned!(c.span()=> #settings.checkpoints(#c));
    }
    let (start, end, inclusive) = (&r.start, &r.end, r.inclusive);
    // A carry the code after the loop does not read would warn here (it is
    // read by the next step of the unrolled loop, which does not warn).
    let assign_back = (!carries.is_empty())
        .then(|| quote!(#[allow(unused_assignments)] let () = { #carry_ret = __rlx_carries; };));
    let extend = (!outputs.is_empty()).then(|| {
        let calls = outputs.iter().zip(&y_ids).map(|(o, y)| {
            quote_spanned!(o.span()=> ::rlx::__private::extend_steps(&mut #o, #y, __rlx_range, #reverse);)
        });
        quote!(if let ::core::option::Option::Some(#y_pat) = __rlx_ys { #(#calls)* })
    });
    // A body with `?` returns a `Result`; the loop's `?` then leaves the
    // function (or the enclosing loop's body) as the unrolled loop's would.
    let call = if b.fallible {
        quote_spanned! {span=>
            ::rlx::__private::try_scan_for(
                #settings,
                __rlx_range,
                #init,
                __rlx_xs,
                |#carry_pat, #x_pat| -> ::rlx::Result<_> {
                    #(#declare)*
                    #body;
                    ::core::result::Result::Ok((#carry_ret, #outs_ret))
                },
            )?
        }
    } else {
        quote_spanned! {span=>
            ::rlx::__private::scan_for(
                #settings,
                __rlx_range,
                #init,
                __rlx_xs,
                |#carry_pat, #x_pat| {
                    #(#declare)*
                    #body;
                    (#carry_ret, #outs_ret)
                },
            )
        }
    };
    Ok(quote_spanned! {span=>
        {
            let __rlx_range = ::rlx::__private::scan_range(#start, #end, #inclusive);
            let __rlx_xs = #xs;
            let (__rlx_carries, __rlx_ys) = #call;
            #assign_back
            #extend
        }
    })
}
