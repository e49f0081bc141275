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

/// Makes a function over tensors differentiable and generates its
/// companions.
///
/// The function stays callable as written (the call runs its compiled
/// plan). Each companion has the function's visibility, takes the
/// function's parameters (then the extra ones listed below), returns an
/// `rlx::Result` and carries a doc comment stating its signature and
/// result shapes for this function, so a crate's `cargo doc` lists them
/// next to it. Plans are traced and compiled once per signature (shapes,
/// dtypes and static arguments) and cached.
///
/// # Parameters
///
/// - `Tensor` or `&Tensor`: a runtime input, differentiated.
/// - `f32` or `f64`: a runtime 0-d input, differentiated. The plain call
///   and the companions also take a 0-d `Tensor` there (then their float
///   results are `Tensor`s), so the function can be called inside another
///   traced body.
/// - anything else: static configuration (sizes, flags, enums, `String`s),
///   part of the plan-cache key, so `Clone + Eq + Hash + Send + Sync +
///   'static`; loops over it unroll at trace time. Floats are not `Eq` or
///   `Hash`: pass them as `f64`/`f32` (or `Tensor`) parameters, leaving
///   them out of `wrt(..)` if they need no gradient.
///
/// `#[differentiable(wrt(a, b))]` differentiates with respect to the named
/// runtime parameters only (the others stay runtime inputs without
/// gradients); `#[differentiable(cache = N)]` keeps compiled plans for at
/// most `N` signatures of this function (least recently used evicted);
/// `#[differentiable(holomorphic)]` declares a complex-valued function
/// holomorphic in its complex parameters, so that `grad_f`, `jacobian_f`
/// and their `value_and_` forms return the complex derivative `f′(z)`
/// (`z²` at `1 + i` gives `2 + 2i`; JAX's `holomorphic=True`). Without it
/// they are an error for a complex-valued output (`vjp_f`/`jvp_f` are
/// always defined).
///
/// The return type is `Tensor`, `f32`, `f64` or a tuple of these: the first
/// element is the one differentiated, the others are auxiliary outputs,
/// returned with the value.
///
/// # Companions
///
/// For `fn f(..) -> V` differentiated with respect to `w1, .., wd`, with
/// `y` its (first) output of shape `out`:
///
/// - `G` is the gradient: for one parameter a bare value (not a 1-tuple)
///   shaped like it (a `Tensor` for a tensor parameter, an `f64` for an
///   `f64` one); for several, the tuple `(G1, .., Gd)`.
/// - `J` is the Jacobian of `y`: for one parameter a bare `Tensor` shaped
///   `[out..., w1...]`; for several, a tuple of such blocks `(J1, .., Jd)`.
/// - `H` is the Hessian of a scalar `y`: for one parameter a bare `Tensor`
///   shaped `[w1..., w1...]`; for several, a tuple of rows of blocks
///   `((H11, .., H1d), .., (Hd1, .., Hdd))`, `Hij = ∂²y/∂wi∂wj` shaped
///   `[wi..., wj...]` (so `hessian_f(..)?.0.1` is `∂²y/∂w1∂w2`).
/// - Extra parameters are named after the differentiated ones:
///   `tangent_w` and `v_w` (leading underscores dropped), each shaped like
///   `w`, an `f64` for an `f64` parameter.
///
/// | companion | returns | computes |
/// |---|---|---|
/// | `grad_f(..)` | `G` | the gradient of a scalar `y` |
/// | `value_and_grad_f(..)` | `(V, G)` | the value and the gradient, in one execution |
/// | `jvp_f(.., tangent_w1, ..)` | `(V, Y)` | the value and the derivative of `y` (shaped like it) along the tangents |
/// | `vjp_f(.., cotangent)` | `(V, G)` | the value and `cotangentᵀ · ∂y/∂w` per parameter (`cotangent` shaped like `y`) |
/// | `jacobian_f(..)` | `J` | the Jacobian, forward or reverse mode, whichever is cheaper |
/// | `value_and_jacobian_f(..)` | `(V, J)` | the value and the Jacobian, in one execution |
/// | `hessian_f(..)` | `H` | the Hessian, forward over reverse |
/// | `hvp_f(.., v_w1, ..)` | `G` | `Σ_j ∂²y/∂wi∂wj · v_j` per parameter, without the Hessian |
/// | `batch_jacobian_f(..)` | `J` | per-row Jacobians of a function over a batch of `N` rows: blocks `[N, out..., wi...]` (`out` and `wi` without the leading `N`) |
/// | `sparse_jacobian_f(..)` | `SparseMatrix` | the Jacobian in compressed sparse columns: rows the elements of `y`, columns those of `w1, .., wd` concatenated, from a colouring of its traced pattern |
/// | `value_and_sparse_jacobian_f(..)` | `(V, SparseMatrix)` | the value and the sparse Jacobian (a Newton step's residual and Jacobian) |
/// | `sparse_jacobian_into_f(.., jacobian: &mut SparseMatrix)` | `()` | the sparse Jacobian into a matrix of this signature's pattern, allocating nothing |
/// | `value_and_sparse_jacobian_into_f(.., value: &mut [f64], jacobian: &mut SparseMatrix)` | `()` | `y` flattened into `value` and the sparse Jacobian into `jacobian`, allocating nothing |
/// | `sparse_hessian_f(..)` | `SparseMatrix` | the Hessian of a scalar `y`, symmetric, both triangles stored, from a star colouring |
/// | `sparse_hessian_into_f(.., hessian: &mut SparseMatrix)` | `()` | the sparse Hessian into a matrix of this signature's pattern, allocating nothing |
/// | `nth_derivative_f(.., order: usize)` | like `G` | `∂ⁿy/∂wiⁿ` of a scalar `y` for each parameter on its own, shaped like it repeated `n` times |
/// | `graph_f(..)` | `Graph` | the traced graph, for the transforms of `rlx::autodiff` |
///
/// Companions that need a scalar `y` (`grad_`, `hessian_`, `hvp_`,
/// `sparse_hessian_`, `nth_derivative_`) return an error for a non-scalar
/// one; every companion returns an error, and never panics, on arguments
/// of the wrong shape or dtype.
///
/// # Rejected
///
/// What cannot be traced soundly is a compile error saying what to write
/// instead: `async`, `unsafe`, `const` or generic functions, a `self`
/// receiver, `loop`, `match`/`while`/`if let` on a traced value, an `if` on
/// a traced value without `else`, and static parameters that are not
/// `Clone + Eq + Hash`. See the `rlx` crate's documentation for examples.
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
