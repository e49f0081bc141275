//! `#[scan]` loops: a `for` loop over a static range, marked to be traced
//! once into one loop node (`rlx::scan`) instead of unrolled.
//!
//! What the syntax decides (the body is traced once, so each name must
//! mean the same at every step):
//! - **carries**: names declared before the loop and assigned in it
//!   (`x = ..`, `x += ..`, `x.f = ..`, `(a, b) = ..`); passed from step to
//!   step, assigned back after the loop;
//! - **per-step inputs**: `xs[t]` with `t` the loop variable, `xs` declared
//!   before the loop and not a carry: `scan` slices `xs` along its first
//!   axis (the rows of the range);
//! - **per-step outputs**: `ys.push(e)` with `ys` declared before the loop:
//!   each step's pushes are stacked by `scan`, and after the loop `ys` gets
//!   one value per step and push, in the order the unrolled loop pushes;
//! - anything else read from outside is a loop invariant;
//! - `?` in the body (outside closures) makes it fallible: the error of a
//!   step leaves the enclosing function, as in the unrolled loop.
//!
//! Refused, each with an error at the user's token: a range that is not
//! `a..b`, `a..=b` or `(a..b).rev()`; the loop variable used other than as
//! `xs[t]`; `break`/`continue` leaving the loop, `return`; reading a
//! per-step output in the body; a per-step input that depends on the body.
//! A range over traced values and a traced budget are refused in
//! `check.rs` (which knows the taint). Types are checked by the generated
//! code (`rlx::__private::{carry, step_outputs, extend_steps}`), whose trait
//! errors name the carry or the output.
//!
//! `walk.rs` classifies the names of a body (and replaces the per-step
//! reads when lowering); `lower.rs` writes the `scan` call.

mod lower;
mod walk;

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprForLoop, Pat};

pub use lower::lower;
pub use walk::Body;

/// The marker's arguments.
pub struct Marker {
    /// The attribute's span.
    pub span: Span,
    /// `checkpoints = n`: the reverse mode's budget.
    pub checkpoints: Option<Expr>,
}

/// Whether `attr` is the marker: `#[scan]`, `#[scan(..)]` or `#[rlx::scan(..)]`.
pub fn is_marker(attr: &Attribute) -> bool {
    let segs: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    segs == ["scan"] || segs == ["rlx", "scan"]
}

/// The marker among `attrs`, if any, with its arguments.
pub fn marker(attrs: &[Attribute]) -> Option<syn::Result<Marker>> {
    let mut found = attrs.iter().filter(|a| is_marker(a));
    let attr = found.next()?;
    if let Some(again) = found.next() {
        return Some(Err(syn::Error::new(
            again.path().span(),
            "a loop is marked `#[scan]` twice\n  = help: give all its arguments in one `#[scan(..)]`",
        )));
    }
    Some(parse_marker(attr))
}

fn parse_marker(attr: &Attribute) -> syn::Result<Marker> {
    let mut m = Marker {
        span: attr.path().span(),
        checkpoints: None,
    };
    if let syn::Meta::Path(_) = attr.meta {
        return Ok(m);
    }
    if let syn::Meta::NameValue(nv) = &attr.meta {
        return Err(syn::Error::new(
            nv.eq_token.span,
            "`#[scan = ..]` is not an argument list\n  = help: write `#[scan]` or `#[scan(checkpoints = n)]`",
        ));
    }
    attr.parse_nested_meta(|meta| {
        if meta.path.is_ident("checkpoints") {
            if m.checkpoints.is_some() {
                return Err(meta.error("`checkpoints` is given twice"));
            }
            m.checkpoints = Some(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error(
                "unknown argument of `#[scan]`\n  = help: the only argument is `checkpoints = n`, the number of carries the reverse mode may store at once",
            ))
        }
    })?;
    Ok(m)
}

/// A marked loop's range: steps `start..end` (or `..=end`), maybe reversed.
pub struct Range {
    pub start: Expr,
    pub end: Expr,
    pub inclusive: bool,
    pub reverse: bool,
}

/// The range a marked loop runs over.
pub fn range(e: &Expr) -> syn::Result<Range> {
    let bad = |span: Span| {
        syn::Error::new(
            span,
            "a `#[scan]` loop runs over a static range: `a..b`, `a..=b` or `(a..b).rev()`\n  = help: the range gives the number of steps when tracing; read per-step values from a tensor indexed by the loop variable, `xs[t]`",
        )
    };
    let (inner, reverse) = match e {
        Expr::MethodCall(m) if m.method == "rev" && m.args.is_empty() => (&*m.receiver, true),
        other => (other, false),
    };
    let mut inner = inner;
    while let Expr::Paren(p) = inner {
        inner = &p.expr;
    }
    let Expr::Range(r) = inner else {
        return Err(bad(e.span()));
    };
    let (Some(start), Some(end)) = (&r.start, &r.end) else {
        return Err(syn::Error::new(
            r.span(),
            "a `#[scan]` loop needs a range with both ends: its number of steps is fixed when tracing\n  = help: write `for t in 0..steps`",
        ));
    };
    Ok(Range {
        start: (**start).clone(),
        end: (**end).clone(),
        inclusive: matches!(r.limits, syn::RangeLimits::Closed(_)),
        reverse,
    })
}

/// The loop variable: a name, or `None` for `_`.
pub fn loop_var(f: &ExprForLoop) -> syn::Result<Option<syn::Ident>> {
    match &*f.pat {
        Pat::Ident(p) if p.subpat.is_none() => Ok(Some(p.ident.clone())),
        Pat::Wild(_) => Ok(None),
        other => Err(syn::Error::new(
            other.span(),
            "the loop variable of a `#[scan]` loop is a name or `_`\n  = help: write `for t in 0..steps` and read per-step values as `xs[t]`",
        )),
    }
}

/// Every error of a marked loop that the syntax shows (not the taint).
pub fn errors(f: &ExprForLoop, m: &syn::Result<Marker>) -> Vec<syn::Error> {
    let mut errors = Vec::new();
    if let Err(e) = m {
        errors.push(e.clone());
    }
    if let Err(e) = range(&f.expr) {
        errors.push(e);
    }
    match loop_var(f) {
        Ok(var) => {
            let mut body = f.body.clone();
            errors.extend(Body::walk(&mut body, var.as_ref(), false).errors);
        }
        Err(e) => errors.push(e),
    }
    errors
}

/// The attributes of an expression statement that could hold a misplaced marker.
pub fn expr_attrs(e: &Expr) -> &[Attribute] {
    match e {
        Expr::While(x) => &x.attrs,
        Expr::Loop(x) => &x.attrs,
        Expr::If(x) => &x.attrs,
        Expr::Match(x) => &x.attrs,
        Expr::Block(x) => &x.attrs,
        Expr::Assign(x) => &x.attrs,
        Expr::Binary(x) => &x.attrs,
        Expr::Call(x) => &x.attrs,
        Expr::MethodCall(x) => &x.attrs,
        Expr::Closure(x) => &x.attrs,
        Expr::Unsafe(x) => &x.attrs,
        _ => &[],
    }
}

/// The error for a marker on anything but a `for` loop.
pub fn misplaced(attr: &Attribute) -> syn::Error {
    syn::Error::new(
        attr.path().span(),
        "`#[scan]` marks a `for` loop over a static range\n  = help: put it on `for t in 0..steps { .. }`, or call `rlx::scan` with a closure",
    )
}
