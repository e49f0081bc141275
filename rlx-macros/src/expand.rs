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
}

impl Taker {
    fn new(read: Read) -> Taker {
        Taker {
            read,
            taken: Cell::new(0),
            numeric: Cell::new(true),
        }
    }

    /// The expression taking the next result, as a value of type `o`.
    fn take(&self, o: Out) -> TokenStream {
        self.taken.set(self.taken.get() + 1);
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
}

struct Ctx<'a> {
    f: &'a Func,
    name: &'a Ident,
    ret_ty: TokenStream,
    out0_ty: TokenStream,
    n_out: usize,
}

impl<'a> Ctx<'a> {
    fn new(f: &'a Func) -> Ctx<'a> {
        Ctx {
            f,
            name: &f.item.sig.ident,
            ret_ty: f.ret.ty.to_token_stream(),
            out0_ty: out_ty(f.ret.outs[0]),
            n_out: f.ret.outs.len(),
        }
    }

    fn wrt_names(&self) -> String {
        self.f
            .wrt_params()
            .map(|p| format!("`{}`", p.ident))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn companions(&self) -> Vec<Companion<'a>> {
        let f = self.f;
        let name = self.name;
        let wrt: Vec<&'a Param> = f.wrt_params().collect();
        let d = wrt.len();
        let wrt_names = self.wrt_names();
        let (ret_ty, out0_ty) = (&self.ret_ty, &self.out0_ty);
        let grads_ty = tuple_or_single(wrt.iter().map(|p| out_ty(mirror_out(p))).collect());
        let jac_ty = tuple_or_single(vec![quote!(::rlx::Tensor); d]);
        let hess_ty = tuple_or_single(vec![jac_ty.clone(); d]);
        let mirrored = |prefix: &str| -> Vec<(Ident, Out)> {
            wrt.iter()
                .map(|p| (format_ident!("{}{}", prefix, p.ident), mirror_out(p)))
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
            }
        };
        vec![
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
    // A function of numbers only: companions whose results are all numbers
    // first try `run_numbers` (no allocation; see `Function::run_numbers`),
    // outside the closure that builds the general result, so that the
    // numbers go straight into the return value.
    let number_args = numbers(f.runtime().map(|p| (&p.ident, mirror_out(p))));
    let n_out = ctx.n_out;
    // A companion's body returns an `rlx::Result` through `companion`; the
    // plain call's (`plain: true`) returns the value through `plain`.
    let companion_body = |transform: &str,
                          extras: &[(Ident, Out)],
                          skip: bool,
                          build: &dyn Fn(&Taker) -> TokenStream,
                          plain: bool,
                          ret: TokenStream| {
        let t = Ident::new(transform, Span::call_site());
        let skip_it = skip.then(|| quote!(::rlx::__private::skip(&mut __rlx_it, #n_out);));
        let extra_args: Vec<TokenStream> = extras
            .iter()
            .map(|(id, _)| quote!(::rlx::__private::Arg::from(#id)))
            .collect();
        let run = run(transform, &extra_args);
        let general = build(&Taker::new(Read::Values));
        let tk = Taker::new(Read::Numbers);
        let numeric = build(&tk);
        let (wrap, ok) = if plain {
            (quote!(plain), TokenStream::new())
        } else {
            (quote!(companion), quote!(::core::result::Result::Ok))
        };
        let number_extras = numbers(extras.iter().map(|(id, o)| (id, *o)));
        let fast = match (&number_args, number_extras) {
            (Some(a), Some(e)) if tk.numeric.get() => Some((a, e)),
            _ => None,
        };
        let fast = fast.map(|(number_args, number_extras)| {
            let k = tk.taken.get() + if skip { n_out } else { 0 };
            quote! {
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
    let call_body = companion_body(
        "Call",
        &[],
        false,
        &|tk: &Taker| tk.ret(&f.ret),
        true,
        ret_ty.clone(),
    );
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
        let extra_params = extras.iter().map(|(id, o)| {
            let ty = extra_param_ty(*o);
            quote!(#id: #ty)
        });
        let body = companion_body(
            transform,
            &extras,
            skip,
            &*build,
            false,
            ret.clone(),
        );
        quote! {
            #[doc = #doc]
            #[allow(clippy::too_many_arguments, clippy::type_complexity, clippy::needless_question_mark)]
            #vis fn #cname(#(#params,)* #(#extra_params),*) -> ::rlx::Result<#ret> {
                #body
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
        // A plain call that fails panics at the caller's line.
        #[track_caller]
        #[allow(clippy::too_many_arguments, clippy::needless_question_mark)]
        #vis fn #name(#(#params),*) -> #ret_ty {
            #call_body
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
        let extra_params = extras.iter().map(|(id, o)| {
            let ty = extra_param_ty(*o);
            quote!(#id: #ty)
        });
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
