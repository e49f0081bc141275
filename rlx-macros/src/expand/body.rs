//! The bodies of the generated functions: the plain call and each
//! companion ([`Bodies::companion`]: the number path first when it can
//! serve, then the small-tensor path of a function without static
//! arguments, then `Function::run` or the sparse runs), and the `graph_f` and
//! `nth_derivative_f` functions ([`Bodies::graph_and_nth`]).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Ident, Visibility};

use super::companions::{Ctx, Runs};
use super::tokens::{float_ty, mirror_out, numbers, tuple_or_single, Read, Taker};
use crate::parse::{Func, Kind, Out, Param};

/// What every body of one function refers to: its plan cache, its tracer,
/// its static and runtime arguments.
pub(super) struct Bodies {
    /// `__rlx_function_f`, which returns the plan cache.
    pub(super) fn_ident: Ident,
    /// `__rlx_trace_f`, the tracer.
    pub(super) trace_ident: Ident,
    /// The tuple of the static arguments' clones.
    statics_val: TokenStream,
    /// The runtime arguments as `Arg`s.
    args: Vec<TokenStream>,
    /// As `args`, but float parameters through `number_arg` (for the
    /// generic plain call; the same as `args` without float parameters).
    pub(super) generic_args: Vec<TokenStream>,
    /// The `Kind` of the float arguments, when they are generic.
    kind: Option<TokenStream>,
    /// The arguments as `Function::run_numbers` takes them, if all are numbers.
    number_args: Option<TokenStream>,
    /// The same for the generic plain call, from the locals bound by `number_guard`.
    generic_number_args: Option<TokenStream>,
    /// `let (Some(__rlx_n0), ..) = (number_of(&a), ..)`.
    number_guard: TokenStream,
    /// Whether the function has static parameters (then no entry is
    /// pinned, and companions go straight to the plan cache).
    statics: bool,
    /// The number of the function's own outputs.
    n_out: usize,
}

impl Bodies {
    pub(super) fn new(f: &Func, ctx: &Ctx<'_>) -> Bodies {
        let name = &f.item.sig.ident;
        let runtime: Vec<&Param> = f.runtime().collect();
        let has_statics = f.statics().next().is_some();
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
        // A function of numbers only: companions whose results are all numbers
        // first try `run_numbers` (no allocation; see `Function::run_numbers`),
        // outside the closure that builds the general result, so that the
        // numbers go straight into the return value.
        let number_args = numbers(f.runtime().map(|p| (&p.ident, mirror_out(p))));
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
        Bodies {
            fn_ident: format_ident!("__rlx_function_{}", name),
            trace_ident: format_ident!("__rlx_trace_{}", name),
            statics_val: super::statics::key_val(f),
            args,
            generic_args,
            kind: ctx.kind.clone(),
            number_args,
            generic_number_args,
            number_guard,
            statics: has_statics,
            n_out: ctx.n_out,
        }
    }

    /// Runs transform `transform` on `args` and `extras` into `__rlx_it`,
    /// leaving out the function's own outputs when `skip`.
    fn run(
        &self,
        transform: &str,
        args: &[TokenStream],
        extras: &[TokenStream],
        skip: bool,
    ) -> TokenStream {
        let (fn_ident, trace_ident, statics_val) =
            (&self.fn_ident, &self.trace_ident, &self.statics_val);
        let t = Ident::new(transform, Span::call_site());
        let skip = if skip { self.n_out } else { 0 };
        quote! {
            let mut __rlx_outs = ::rlx::__private::Values::new();
            #fn_ident().run_to(
                ::rlx::__private::Transform::#t,
                &[#(#args),*],
                &[#(#extras),*],
                &#statics_val,
                #trace_ident,
                #skip,
                &mut __rlx_outs,
            )?;
            #[allow(unused_mut)]
            let mut __rlx_it = __rlx_outs.drain(..);
        }
    }

    /// The body of a companion running transform `transform` (or, with
    /// `plain`, of the plain call). A companion's body returns an
    /// `rlx::Result` through `companion`; the plain call's returns the
    /// value through `plain`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn companion(
        &self,
        transform: &str,
        extras: &[(Ident, Out)],
        skip: bool,
        build: &dyn Fn(&Taker) -> TokenStream,
        plain: bool,
        ret: TokenStream,
        runs: Runs,
    ) -> TokenStream {
        let (fn_ident, trace_ident, statics_val) =
            (&self.fn_ident, &self.trace_ident, &self.statics_val);
        let n_out = self.n_out;
        let kind = &self.kind;
        let args_list = if kind.is_some() {
            let generic_args = &self.generic_args;
            quote!(&[#(#generic_args),*])
        } else {
            let args = &self.args;
            quote!(&[#(#args),*])
        };
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
            Runs::SparseInto { value, into } => {
                let into = Ident::new(into, Span::call_site());
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
                        #into,
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
        let run = if generic {
            self.run(transform, &self.generic_args, &extra_args, skip)
        } else {
            self.run(transform, &self.args, &extra_args, skip)
        };
        let general = build(&Taker::new(Read::Values, kind.clone()));
        let tk = Taker::new(Read::Numbers, kind.clone());
        let numeric = build(&tk);
        let (wrap, wrap_at, ok) = if plain {
            (quote!(plain), quote!(plain_at), TokenStream::new())
        } else {
            (
                quote!(companion),
                quote!(companion_at),
                quote!(::core::result::Result::Ok),
            )
        };
        let number_extras = numbers(extras.iter().map(|(id, o)| (id, *o)));
        let number_args = if generic {
            &self.generic_number_args
        } else {
            &self.number_args
        };
        let fast = match (number_args, number_extras) {
            (Some(a), Some(e)) if tk.numeric.get() => Some((a, e)),
            _ => None,
        };
        let k = tk.taken.get() + if skip { n_out } else { 0 };
        let number_guard = &self.number_guard;
        let guard = generic.then(|| quote!(if #number_guard));
        // Returns the results the number path wrote into `__rlx_numbers`.
        let returned = quote! {
            #[allow(unused_mut)]
            let mut __rlx_it = __rlx_numbers.iter();
            #skip_it
            return #ok(#numeric);
        };
        // The number path; `err` returns its error `e` (naming the
        // caller's line).
        let number_path =
            |number_args: &TokenStream, number_extras: &TokenStream, err: TokenStream| {
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
                            #returned
                        }
                        ::core::result::Result::Ok(false) => {}
                        ::core::result::Result::Err(e) => {
                            return #err;
                        }
                    }
                    }
                }
            };
        // Only the pinned native call (`Function::run_pinned_numbers`), for
        // a companion that runs the rest out of line.
        let pinned = |number_args: &TokenStream| {
            quote! {
                #guard {
                let mut __rlx_numbers = [0.0f64; #k];
                if #fn_ident().run_pinned_numbers(
                    ::rlx::__private::Transform::#t,
                    #number_args,
                    &#statics_val,
                    &mut __rlx_numbers,
                ) {
                    #returned
                }
                }
            }
        };
        // The warm call over small tensors (`Function::run_small`), for a
        // function without static arguments: results built straight from
        // the run, declined (`None`) for everything else.
        let small = (!self.statics).then(|| {
            let direct_taker = Taker::new(Read::Direct, kind.clone());
            let direct = build(&direct_taker);
            let located = direct_taker.located();
            let build = build(&Taker::new(Read::Flat, kind.clone()));
            let skip = if skip { n_out } else { 0 };
            let full_ret = if plain {
                ret.clone()
            } else {
                quote!(::rlx::Result<#ret>)
            };
            // The common call (one `f64` tensor) first: its closure returns
            // the companion's own result, built where the companion returns
            // it (`SmallRun::run`). A take that declines returns the general
            // path from the closure.
            quote! {
                if let ::core::option::Option::Some(__rlx_h) = #fn_ident().small_direct(
                    ::rlx::__private::Transform::#t,
                    #args_list,
                    &[#(#extra_args),*],
                    &#statics_val,
                    #skip,
                ) {
                    return __rlx_h.run(
                        |__rlx_it: &mut ::rlx::__private::Flat<'_>| -> #full_ret {
                            #[allow(unused_variables, clippy::redundant_closure_call)]
                            let __rlx_general = || ::rlx::__private::#wrap_at(__rlx_at, || -> ::rlx::Result<#ret> {
                                #run
                                ::core::result::Result::Ok(#general)
                            });
                            #(#located)*
                            #ok(#direct)
                        },
                    );
                }
                if let ::core::option::Option::Some(__rlx_r) = #fn_ident().run_small(
                    ::rlx::__private::Transform::#t,
                    #args_list,
                    &[#(#extra_args),*],
                    &#statics_val,
                    #skip,
                    |__rlx_it: &mut ::rlx::__private::Flat<'_>| -> ::core::option::Option<#ret> {
                        ::core::option::Option::Some(#build)
                    },
                ) {
                    return #ok(__rlx_r);
                }
            }
        });
        // The caller's line, for the general paths inside closures
        // (`#[track_caller]` does not reach into them).
        let at = quote!(let __rlx_at = ::core::panic::Location::caller(););
        match fast {
            // A companion with a number path and no extras: its pinned
            // native call first, everything else out of line, so that the
            // warm path neither saves the arguments for the later paths nor
            // sets up their frame.
            Some((number_args, number_extras)) if !plain && extras.is_empty() => {
                let pinned = pinned(number_args);
                let at_err = quote!(::rlx::__private::companion_at(__rlx_at, || {
                    ::core::result::Result::Err(e)
                }));
                let numbers = number_path(number_args, &number_extras, at_err);
                quote! {
                    #pinned
                    #at
                    ::rlx::__private::out_of_line(move || -> ::rlx::Result<#ret> {
                        #numbers
                        #small
                        ::rlx::__private::companion_at(__rlx_at, || -> ::rlx::Result<#ret> {
                            #run
                            ::core::result::Result::Ok(#general)
                        })
                    })
                }
            }
            fast => {
                let err = quote!(::rlx::__private::#wrap(|| ::core::result::Result::Err(e)));
                let fast = fast.map(|(a, e)| number_path(a, &e, err));
                let at = small.is_some().then_some(at);
                quote! {
                    #fast
                    #at
                    #small
                    ::rlx::__private::#wrap(|| -> ::rlx::Result<#ret> {
                        #run
                        ::core::result::Result::Ok(#general)
                    })
                }
            }
        }
    }

    /// The `graph_f` and `nth_derivative_f` functions, with the plain
    /// call's visibility, generics and parameters.
    pub(super) fn graph_and_nth(
        &self,
        ctx: &Ctx<'_>,
        vis: &Visibility,
        generics: &TokenStream,
        params: &[TokenStream],
        uses_plain: &TokenStream,
    ) -> TokenStream {
        let (fn_ident, trace_ident, statics_val) =
            (&self.fn_ident, &self.trace_ident, &self.statics_val);
        let (generic_args, n_out) = (&self.generic_args, self.n_out);
        let extra = ctx.graph_and_nth();
        let graph_doc = extra.graph_doc;
        let nth_doc = extra.nth_doc;
        let (graph_name, nth_name, nth_ty, order) =
            (extra.graph_name, extra.nth_name, extra.nth_ty, extra.order);
        let nth_grads = {
            let tk = Taker::new(Read::Values, ctx.kind.clone());
            tuple_or_single(ctx.f.wrt_params().map(|p| tk.take(mirror_out(p))).collect())
        };
        quote! {
            #[doc = #graph_doc]
            #[allow(clippy::too_many_arguments)]
            #vis fn #graph_name #generics (#(#params),*) -> ::rlx::Result<::rlx::Graph> {
                #uses_plain
                #fn_ident().graph(&[#(#generic_args),*], &#statics_val, #trace_ident)
            }

            #[doc = #nth_doc]
            #[allow(clippy::too_many_arguments, clippy::type_complexity, clippy::needless_question_mark)]
            #[track_caller]
            #vis fn #nth_name #generics (#(#params,)* #order: usize) -> ::rlx::Result<#nth_ty> {
                #uses_plain
                ::rlx::__private::companion(|| -> ::rlx::Result<#nth_ty> {
                    let __rlx_outs = #fn_ident().run_nth(&[#(#generic_args),*], #order, &#statics_val, #trace_ident)?;
                    #[allow(unused_mut)]
                    let mut __rlx_it = __rlx_outs.into_iter();
                    ::rlx::__private::skip(&mut __rlx_it, #n_out);
                    ::core::result::Result::Ok(#nth_grads)
                })
            }
        }
    }
}
