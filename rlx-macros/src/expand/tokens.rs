//! Token helpers shared by the expansion: Rust types of results, number
//! argument lists, [`Taker`] (which reads a companion's results) and
//! [`GenericFloats`] (the generic float parameters of the plain call).

use std::cell::{Cell, RefCell};

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::Ident;

use crate::parse::{Float, Func, Kind, Out, Param};

pub(super) fn float_ty(f: Float) -> TokenStream {
    match f {
        Float::F32 => quote!(f32),
        Float::F64 => quote!(f64),
    }
}

pub(super) fn out_ty(o: Out) -> TokenStream {
    match o {
        Out::Tensor => quote!(::rlx::Tensor),
        Out::Float(f) => float_ty(f),
    }
}

/// The type of a derivative mirroring a parameter (grads, tangents, `v`).
pub(super) fn mirror_out(p: &Param) -> Out {
    match p.kind {
        Kind::Float(f) => Out::Float(f),
        Kind::Tensor { .. } | Kind::Static => Out::Tensor,
    }
}

/// The parameter type of an extra input (tangent, cotangent, `v`) of
/// type `o`.
pub(super) fn extra_param_ty(o: Out) -> TokenStream {
    match o {
        Out::Float(f) => float_ty(f),
        Out::Tensor => quote!(&::rlx::Tensor),
    }
}

/// `&[..], mask` over number arguments, as `Function::run_numbers` takes
/// them (`None` if one is not a number or there are more than 64).
pub(super) fn numbers<'a>(items: impl Iterator<Item = (&'a Ident, Out)>) -> Option<TokenStream> {
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

/// For the closure passed to `SmallRun::run` ([`Read::Direct`]): the
/// statement locating result `i` as a `ty` (or returning the general path
/// from the closure), pushed to `located`, and the expression building
/// it. Every result is located before any is built (`rlx_runtime`'s
/// `Take`), so no tensor is dropped when a later result declines.
fn direct_take(located: &RefCell<Vec<TokenStream>>, ty: TokenStream) -> TokenStream {
    let at = format_ident!("__rlx_at{}", located.borrow().len());
    located.borrow_mut().push(quote! {
        let #at = match ::rlx::__private::flat_locate::<#ty>(__rlx_it) {
            ::core::option::Option::Some(__rlx_v) => __rlx_v,
            ::core::option::Option::None => return __rlx_general(),
        };
    });
    quote!(::rlx::__private::flat_build::<#ty>(#at, __rlx_it))
}

pub(super) fn tuple_or_single(items: Vec<TokenStream>) -> TokenStream {
    if items.len() == 1 {
        items.into_iter().next().expect("one item")
    } else {
        quote!((#(#items,)*))
    }
}

/// How a companion's body reads the plan's outputs from `__rlx_it`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    /// An iterator of `Value`s, from `Function::run`.
    Values,
    /// An iterator of `f64`s, from `Function::run_numbers`.
    Numbers,
    /// A `&mut Flat`, in the closure passed to `Function::run_small`
    /// (each take returns an `Option`).
    Flat,
    /// A `&mut Flat`, in the closure passed to `SmallRun::run`, which
    /// returns the companion's own result: a take that declines returns
    /// `__rlx_general()` (the general path) from the closure.
    Direct,
}

/// Builds the expressions that take a companion's results from `__rlx_it`
/// and counts them.
pub(super) struct Taker {
    read: Read,
    pub(super) taken: Cell<usize>,
    /// Whether every result taken so far is a number.
    pub(super) numeric: Cell<bool>,
    /// For the generic plain call of a function with float parameters: the
    /// [`Kind`] of its arguments, which picks the type of float results.
    ///
    /// [`Kind`]: ../../rlx_runtime/rewritten/trait.Kind.html
    kind: Option<TokenStream>,
    /// With [`Read::Direct`]: the statements locating each result taken so
    /// far (see [`Taker::located`]).
    located: RefCell<Vec<TokenStream>>,
}

impl Taker {
    pub(super) fn new(read: Read, kind: Option<TokenStream>) -> Taker {
        Taker {
            read,
            taken: Cell::new(0),
            numeric: Cell::new(true),
            kind,
            located: RefCell::new(Vec::new()),
        }
    }

    /// With [`Read::Direct`]: the statements that locate every result
    /// taken so far, to come before the expression of the results (which
    /// builds them).
    pub(super) fn located(&self) -> Vec<TokenStream> {
        self.located.take()
    }

    /// The expression taking the next result, as a value of type `o`.
    pub(super) fn take(&self, o: Out) -> TokenStream {
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
                Read::Flat => {
                    quote!(::rlx::__private::flat::<<#k as ::rlx::__private::Kind>::#ty>(__rlx_it)?)
                }
                Read::Direct => {
                    direct_take(&self.located, quote!(<#k as ::rlx::__private::Kind>::#ty))
                }
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
            (Read::Flat, o) => {
                let t = out_ty(o);
                quote!(::rlx::__private::flat::<#t>(__rlx_it)?)
            }
            (Read::Direct, o) => direct_take(&self.located, out_ty(o)),
        }
    }

    /// The function's own outputs (a tuple if it returns one).
    pub(super) fn ret(&self, ret: &crate::parse::Ret) -> TokenStream {
        let takes: Vec<TokenStream> = ret.outs.iter().map(|&o| self.take(o)).collect();
        if ret.tuple {
            quote!((#(#takes,)*))
        } else {
            takes.into_iter().next().expect("one output")
        }
    }
}

/// The plain call of a function with `f32`/`f64` parameters is generic
/// over them: each takes a number or a tensor
/// (`rlx_runtime::rewritten::NumberArg`), and float results are numbers
/// when every such argument is a number, tensors otherwise
/// (`rlx_runtime::rewritten::Kind`). So a scalar helper written once for
/// numbers can be called inside another traced body.
pub(super) struct GenericFloats {
    /// The `Kind` of the arguments (`None` without float parameters).
    pub(super) kind: Option<TokenStream>,
    /// Per float parameter: its name, its type parameter, its type.
    params: Vec<(Ident, Ident, Float)>,
}

impl GenericFloats {
    pub(super) fn new(f: &Func) -> GenericFloats {
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

    /// The statement a companion starts with so that using it uses the
    /// plain function `name` (for `dead_code`, see `expand`): a private
    /// function used only through a companion is not reported, an unused
    /// one is, by its own name. A function item is zero-sized: this emits
    /// no code.
    pub(super) fn uses_plain(&self, name: &Ident) -> TokenStream {
        let tys = self.params.iter().map(|(_, t, _)| t);
        if self.kind.is_none() {
            quote!(let _ = #name;)
        } else {
            quote!(let _ = #name::<#(#tys),*>;)
        }
    }

    /// Generics and parameters of the plain call and the companions.
    pub(super) fn signature(&self, f: &Func) -> (TokenStream, Vec<TokenStream>) {
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
pub(super) fn params_tokens(f: &Func) -> Vec<TokenStream> {
    f.params
        .iter()
        .map(|p| {
            let (id, ty) = (&p.ident, &p.ty);
            quote!(#id: #ty)
        })
        .collect()
}
