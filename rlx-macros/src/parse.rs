//! Maps the attributed `fn` to our model of the supported subset.
//!
//! Parsing is lenient: every parameter and the return type get a kind even
//! when they are unsupported (`Kind::Static` / `Out::Tensor` by default), and
//! each problem is pushed to the error list. The model is then good enough to
//! emit stub companions with the right signatures next to the errors.

use proc_macro2::TokenStream;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Token, Type};

/// The parsed attributed function.
pub struct Func {
    /// The user's item, unchanged.
    pub item: ItemFn,
    /// Typed parameters (a `self` receiver is left out and reported).
    pub params: Vec<Param>,
    /// What the function returns.
    pub ret: Ret,
    /// Positions in `params` of the differentiated parameters, in order.
    pub wrt: Vec<usize>,
    /// `cache = N`: the bound on this function's cached signatures.
    pub cache: Option<usize>,
    /// `holomorphic`: `grad_`/`jacobian_` of a complex-valued output give `f′(z)`.
    pub holomorphic: bool,
}

/// One parameter.
pub struct Param {
    pub ident: Ident,
    pub mutable: bool,
    pub ty: Type,
    pub kind: Kind,
}

/// How a parameter enters the trace.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `Tensor` (`by_ref = false`) or `&Tensor` (`by_ref = true`).
    Tensor { by_ref: bool },
    /// `f32` or `f64`: a 0-d input.
    Float(Float),
    /// Anything else: static configuration, part of the plan-cache key.
    Static,
}

/// A float scalar type.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Float {
    F32,
    F64,
}

/// One output of the function.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Out {
    Tensor,
    Float(Float),
}

/// The return type: one output, or a tuple whose first element is the one
/// differentiated.
pub struct Ret {
    pub ty: Type,
    pub outs: Vec<Out>,
    pub tuple: bool,
}

impl Param {
    /// Whether the parameter is a runtime (traced) input.
    pub fn is_runtime(&self) -> bool {
        !matches!(self.kind, Kind::Static)
    }
}

impl Func {
    /// The runtime (traced) parameters, in order.
    pub fn runtime(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| p.is_runtime())
    }

    /// The static parameters, in order.
    pub fn statics(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| !p.is_runtime())
    }

    /// The differentiated parameters, in order.
    pub fn wrt_params(&self) -> impl Iterator<Item = &Param> {
        self.wrt.iter().map(|&i| &self.params[i])
    }
}

/// `#[differentiable]`, `#[differentiable(wrt(a, b))]`,
/// `#[differentiable(cache = 8)]`, `#[differentiable(holomorphic)]`, or
/// several, comma-separated.
#[derive(Default)]
pub struct Args {
    pub wrt: Option<Vec<Ident>>,
    /// The bound on cached signatures of this function.
    pub cache: Option<usize>,
    /// The function is holomorphic in its complex parameters.
    pub holomorphic: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "wrt" {
                let content;
                syn::parenthesized!(content in input);
                let names = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
                if names.is_empty() {
                    return Err(syn::Error::new(
                        key.span(),
                        "`wrt()` names no parameter\n  = help: name at least one `Tensor` or float parameter, or drop `wrt` to differentiate all of them",
                    ));
                }
                args.wrt = Some(names.into_iter().collect());
            } else if key == "cache" {
                let _: Token![=] = input.parse()?;
                let n: syn::LitInt = input.parse()?;
                let v: usize = n.base10_parse()?;
                if v == 0 {
                    return Err(syn::Error::new(
                        n.span(),
                        "`cache = 0` would keep no compiled plan\n  = help: give the number of signatures (shapes, dtypes, static arguments) to keep, at least 1",
                    ));
                }
                args.cache = Some(v);
            } else if key == "holomorphic" {
                args.holomorphic = true;
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}` of `#[differentiable]`\n  = help: the arguments are `wrt(a, b, ...)`, naming the parameters to differentiate, `cache = N`, the number of signatures whose plans are kept, and `holomorphic`, for the complex derivative of a complex-valued function"),
                ));
            }
            if input.is_empty() {
                break;
            }
            let _: Token![,] = input.parse()?;
        }
        Ok(args)
    }
}

/// Parses the attribute arguments and the item; errors go to `errors`.
pub fn parse(
    args: TokenStream,
    item: TokenStream,
    errors: &mut Vec<syn::Error>,
) -> syn::Result<Func> {
    let item: ItemFn = syn::parse2(item)?;
    let args = match syn::parse2::<Args>(args) {
        Ok(a) => a,
        Err(e) => {
            errors.push(e);
            Args::default()
        }
    };
    let mut params = Vec::new();
    for arg in &item.sig.inputs {
        match arg {
            FnArg::Receiver(r) => errors.push(syn::Error::new(
                r.span(),
                "`#[differentiable]` does not support a `self` receiver\n  = help: write a free function and pass the tensors it needs as parameters",
            )),
            FnArg::Typed(pt) => {
                let (ident, mutable) = match &*pt.pat {
                    Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                        (pi.ident.clone(), pi.mutability.is_some())
                    }
                    other => {
                        errors.push(syn::Error::new(
                            other.span(),
                            "`#[differentiable]` parameters must be plain names\n  = help: write `name: Type` and destructure inside the body",
                        ));
                        (Ident::new(&format!("__rlx_arg{}", params.len()), other.span()), false)
                    }
                };
                let kind = classify(&pt.ty, errors);
                params.push(Param {
                    ident,
                    mutable,
                    ty: (*pt.ty).clone(),
                    kind,
                });
            }
        }
    }
    let ret = parse_ret(&item.sig.output, &item.sig.ident, errors);
    let cache = args.cache;
    let wrt = match args.wrt {
        None => (0..params.len())
            .filter(|&i| params[i].is_runtime())
            .collect(),
        Some(names) => {
            let mut wrt = Vec::new();
            for n in names {
                match params.iter().position(|p| p.ident == n) {
                    Some(i) if params[i].is_runtime() => {
                        if wrt.contains(&i) {
                            errors.push(syn::Error::new(n.span(), format!("`{n}` is named twice in `wrt`")));
                        } else {
                            wrt.push(i);
                        }
                    }
                    Some(_) => errors.push(syn::Error::new(
                        n.span(),
                        format!("`{n}` is a static parameter and cannot be differentiated\n  = help: only `Tensor`, `&Tensor`, `f32` and `f64` parameters can be named in `wrt`"),
                    )),
                    None => errors.push(syn::Error::new(
                        n.span(),
                        format!("`wrt` names `{n}`, which is not a parameter of this function"),
                    )),
                }
            }
            wrt.sort_unstable();
            wrt
        }
    };
    if wrt.is_empty() && errors.is_empty() {
        errors.push(syn::Error::new(
            item.sig.ident.span(),
            "this function has no differentiable parameter\n  = help: take at least one `Tensor`, `&Tensor`, `f32` or `f64` parameter",
        ));
    }
    Ok(Func {
        item,
        params,
        ret,
        wrt,
        cache,
        holomorphic: args.holomorphic,
    })
}

fn is_tensor_path(ty: &Type) -> bool {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => tp
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Tensor" && s.arguments.is_none()),
        Type::Paren(p) => is_tensor_path(&p.elem),
        Type::Group(g) => is_tensor_path(&g.elem),
        _ => false,
    }
}

fn float_of(ty: &Type) -> Option<Float> {
    match ty {
        Type::Path(tp) if tp.qself.is_none() => {
            let id = tp.path.get_ident()?;
            if id == "f64" {
                Some(Float::F64)
            } else if id == "f32" {
                Some(Float::F32)
            } else {
                None
            }
        }
        Type::Paren(p) => float_of(&p.elem),
        Type::Group(g) => float_of(&g.elem),
        _ => None,
    }
}

fn classify(ty: &Type, errors: &mut Vec<syn::Error>) -> Kind {
    if is_tensor_path(ty) {
        return Kind::Tensor { by_ref: false };
    }
    if let Some(f) = float_of(ty) {
        return Kind::Float(f);
    }
    match ty {
        Type::Reference(r) if is_tensor_path(&r.elem) => {
            if let Some(m) = r.mutability {
                errors.push(syn::Error::new(
                    m.span(),
                    "a `#[differentiable]` function cannot take `&mut Tensor`: traced code cannot write into its inputs\n  = help: take `&Tensor` and return the new tensor",
                ));
            }
            Kind::Tensor { by_ref: true }
        }
        Type::Reference(r) if float_of(&r.elem).is_some() => {
            errors.push(syn::Error::new(
                r.span(),
                "a float parameter of a `#[differentiable]` function is taken by value\n  = help: write `f64` (or `f32`) instead of a reference",
            ));
            Kind::Float(float_of(&r.elem).unwrap_or(Float::F64))
        }
        Type::ImplTrait(t) => {
            errors.push(syn::Error::new(
                t.span(),
                "`impl Trait` parameters are generic, and `#[differentiable]` functions cannot be generic\n  = help: use a concrete type",
            ));
            Kind::Static
        }
        _ => Kind::Static,
    }
}

fn out_of(ty: &Type) -> Option<Out> {
    if is_tensor_path(ty) {
        Some(Out::Tensor)
    } else {
        float_of(ty).map(Out::Float)
    }
}

const RET_HELP: &str = "  = help: return `Tensor`, `f32`, `f64`, or a tuple of these whose first element is the one differentiated";

fn parse_ret(ret: &ReturnType, name: &Ident, errors: &mut Vec<syn::Error>) -> Ret {
    let fallback = |ty: Type| Ret {
        ty,
        outs: vec![Out::Tensor],
        tuple: false,
    };
    match ret {
        ReturnType::Default => {
            errors.push(syn::Error::new(
                name.span(),
                format!("a `#[differentiable]` function must return a value\n{RET_HELP}"),
            ));
            fallback(syn::parse_quote!(()))
        }
        ReturnType::Type(_, ty) => {
            if let Some(o) = out_of(ty) {
                return Ret {
                    ty: (**ty).clone(),
                    outs: vec![o],
                    tuple: false,
                };
            }
            if let Type::Tuple(t) = &**ty {
                if !t.elems.is_empty() {
                    let mut outs = Vec::new();
                    for e in &t.elems {
                        match out_of(e) {
                            Some(o) => outs.push(o),
                            None => {
                                errors.push(syn::Error::new(
                                    e.span(),
                                    format!("unsupported output type in a `#[differentiable]` function\n{RET_HELP}"),
                                ));
                                outs.push(Out::Tensor);
                            }
                        }
                    }
                    return Ret {
                        ty: (**ty).clone(),
                        outs,
                        tuple: true,
                    };
                }
            }
            errors.push(syn::Error::new(
                ty.span(),
                format!("unsupported return type of a `#[differentiable]` function\n{RET_HELP}"),
            ));
            fallback((**ty).clone())
        }
    }
}
