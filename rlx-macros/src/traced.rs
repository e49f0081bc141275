//! Which bindings hold traced values, decided at macro time.
//!
//! A binding is *traced* if it is a `Tensor`/`&Tensor`/`f32`/`f64`
//! parameter, or a local whose initialiser mentions a traced binding. Shape
//! queries (`x.shape()`, `x.rank()`, ...) are static, so they do not
//! propagate. Shadowing a name with a static value makes it static again.
//! Scopes are not tracked: once traced in a block, a name stays traced to the
//! end of the function unless shadowed. The analysis may call a static value
//! traced; the rewrites it drives stay correct for static values (see
//! `rewrite.rs`), they only evaluate both branches of such an `if`.

use std::collections::HashSet;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Expr, ExprMethodCall, ExprPath, Local, Pat};

/// Methods whose result is static even on a traced receiver.
const STATIC_METHODS: &[&str] = &[
    "shape",
    "dims",
    "rank",
    "numel",
    "dtype",
    "ty",
    "dim",
    "is_traced",
    "len",
];

/// The current set of traced binding names.
#[derive(Clone, Default)]
pub struct Taint {
    names: HashSet<String>,
}

impl Taint {
    /// Starts with the given traced parameter names.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a syn::Ident>) -> Taint {
        Taint {
            names: names.into_iter().map(|i| i.to_string()).collect(),
        }
    }

    /// Whether `e` mentions a traced binding.
    pub fn expr(&self, e: &Expr) -> bool {
        let mut v = Mentions {
            taint: self,
            found: false,
        };
        v.visit_expr(e);
        v.found
    }

    /// Updates the set after `let pat = init;`.
    pub fn bind_local(&mut self, local: &Local) {
        let traced = local.init.as_ref().is_some_and(|i| {
            self.expr(&i.expr) || i.diverge.as_ref().is_some_and(|d| self.expr(&d.1))
        });
        self.bind_pat(&local.pat, traced);
    }

    /// Marks every name bound by `pat` as traced or static.
    pub fn bind_pat(&mut self, pat: &Pat, traced: bool) {
        let mut names = Vec::new();
        collect_pat(pat, &mut names);
        for n in names {
            if traced {
                self.names.insert(n);
            } else {
                self.names.remove(&n);
            }
        }
    }

    /// Marks a name as traced (after `name = traced_expr`).
    pub fn add(&mut self, name: String) {
        self.names.insert(name);
    }

    fn tokens(&self, ts: &TokenStream) -> bool {
        ts.clone().into_iter().any(|t| match t {
            TokenTree::Ident(i) => self.names.contains(&i.to_string()),
            TokenTree::Group(g) => self.tokens(&g.stream()),
            _ => false,
        })
    }
}

struct Mentions<'a> {
    taint: &'a Taint,
    found: bool,
}

impl<'ast> Visit<'ast> for Mentions<'_> {
    fn visit_expr_path(&mut self, p: &'ast ExprPath) {
        if p.qself.is_none() {
            if let Some(id) = p.path.get_ident() {
                if self.taint.names.contains(&id.to_string()) {
                    self.found = true;
                }
            }
        }
    }

    fn visit_expr_method_call(&mut self, m: &'ast ExprMethodCall) {
        if STATIC_METHODS.contains(&m.method.to_string().as_str()) {
            return;
        }
        syn::visit::visit_expr_method_call(self, m);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if self.taint.tokens(&m.tokens) {
            self.found = true;
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The names bound by `pat`.
pub fn pat_names(pat: &Pat) -> Vec<String> {
    let mut names = Vec::new();
    collect_pat(pat, &mut names);
    names
}

fn collect_pat(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(p) => {
            out.push(p.ident.to_string());
            if let Some((_, sub)) = &p.subpat {
                collect_pat(sub, out);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| collect_pat(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| collect_pat(p, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| collect_pat(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| collect_pat(p, out)),
        Pat::Reference(r) => collect_pat(&r.pat, out),
        Pat::Type(t) => collect_pat(&t.pat, out),
        Pat::Paren(p) => collect_pat(&p.pat, out),
        Pat::Or(o) => o.cases.iter().for_each(|p| collect_pat(p, out)),
        _ => {}
    }
}

/// If `e` is `name` or `name.field...`, the root name (for assignments).
pub fn assigned_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        Expr::Field(f) => assigned_name(&f.base),
        Expr::Index(i) => assigned_name(&i.expr),
        Expr::Paren(p) => assigned_name(&p.expr),
        _ => None,
    }
}
