//! Classifies the names of a `#[scan]` loop's body (see `mod.rs`): carries,
//! per-step inputs, per-step outputs, and what is refused. Scopes are
//! tracked, so a name bound in the body (`let`, a pattern, a closure
//! parameter) is the body's own, also when it shadows an outer one.
//!
//! When lowering it also replaces each per-step read `xs[t]` by
//! `::core::clone::Clone::clone(&__rlx_xK)`, the `K`-th per-step input of
//! the `scan` closure.

use std::collections::HashSet;

use proc_macro2::{Span, TokenTree};
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, Ident, Stmt, Token};

use crate::traced::pat_names;

/// A per-step input: the tensor read as `xs[t]`.
pub struct Input {
    /// `xs`, as written.
    pub expr: Expr,
    /// Where it is first read.
    pub span: Span,
}

/// What a body does with the names around it.
#[derive(Default)]
pub struct Body {
    /// Names declared before the loop and assigned in it, with the first
    /// assignment's span, in order.
    pub carries: Vec<(String, Span)>,
    /// Names declared before the loop that the body pushes to, with the
    /// first push's span, in order.
    pub outputs: Vec<(String, Span)>,
    /// Distinct per-step inputs, in order of first read.
    pub inputs: Vec<Input>,
    /// Whether the body uses `?` outside closures: its closure then
    /// returns a `Result`, and the loop's call is followed by `?`.
    pub fallible: bool,
    /// What is refused.
    pub errors: Vec<syn::Error>,
}

/// An outer name read in the body (not as a `push` receiver), or a name a
/// per-step input depends on.
struct Use {
    name: String,
    span: Span,
    /// `Some(index)` if read in the `index`-th per-step input's expression.
    input: Option<usize>,
}

struct Walker<'a> {
    var: Option<&'a Ident>,
    replace: bool,
    scopes: Vec<HashSet<String>>,
    closures: usize,
    loops: usize,
    labels: Vec<String>,
    /// Inside the expression of a per-step input (its names are recorded).
    input: Option<usize>,
    keys: Vec<String>,
    uses: Vec<Use>,
    body: Body,
}

impl Body {
    /// Walks `block`, the body of a loop whose variable is `var`; with
    /// `replace`, rewrites its per-step reads.
    pub fn walk(block: &mut Block, var: Option<&Ident>, replace: bool) -> Body {
        let mut w = Walker {
            var,
            replace,
            scopes: Vec::new(),
            closures: 0,
            loops: 0,
            labels: Vec::new(),
            input: None,
            keys: Vec::new(),
            uses: Vec::new(),
            body: Body::default(),
        };
        w.visit_block_mut(block);
        w.finish()
    }
}

impl Walker<'_> {
    fn local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains(name))
    }

    fn is_var(&self, id: &Ident) -> bool {
        self.var.is_some_and(|v| v == id) && !self.local(&id.to_string())
    }

    fn bind(&mut self, names: Vec<String>) {
        if let Some(top) = self.scopes.last_mut() {
            top.extend(names);
        }
    }

    fn scoped(&mut self, names: Vec<String>, f: impl FnOnce(&mut Self)) {
        self.scopes.push(names.into_iter().collect());
        f(self);
        self.scopes.pop();
    }

    fn err(&mut self, span: Span, msg: &str) {
        self.body.errors.push(syn::Error::new(span, msg));
    }

    fn assign(&mut self, name: String, span: Span) {
        if !self.local(&name) && !self.body.carries.iter().any(|(n, _)| *n == name) {
            self.body.carries.push((name, span));
        }
    }

    /// The left side of an assignment: its root names are assigned; index
    /// expressions in it are read.
    fn place(&mut self, e: &mut Expr) {
        match e {
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident() {
                    if self.is_var(id) {
                        self.var_use(id.span());
                    } else {
                        self.assign(id.to_string(), id.span());
                    }
                }
            }
            Expr::Field(f) => self.place(&mut f.base),
            Expr::Index(i) => {
                self.place(&mut i.expr);
                self.visit_expr_mut(&mut i.index);
            }
            Expr::Paren(p) => self.place(&mut p.expr),
            Expr::Tuple(t) => t.elems.iter_mut().for_each(|e| self.place(e)),
            Expr::Infer(_) => {}
            other => self.visit_expr_mut(other),
        }
    }

    fn var_use(&mut self, span: Span) {
        let v = self.var.map(|v| v.to_string()).unwrap_or_default();
        self.err(
            span,
            &format!(
                "the loop variable `{v}` of a `#[scan]` loop can only index per-step inputs, as `xs[{v}]`: the body is traced once for every step, so `{v}` has no value while tracing\n  = help: read step-dependent values from a tensor indexed by `{v}` (e.g. `times[{v}]`), or leave the loop unmarked to unroll it"
            ),
        );
    }

    /// `xs[t]`: records the per-step input (and replaces the read).
    fn step_read(&mut self, e: &mut Expr) {
        let Expr::Index(i) = e else { return };
        let key = {
            let x = &i.expr;
            quote!(#x).to_string()
        };
        let k = match self.keys.iter().position(|k| *k == key) {
            Some(k) => k,
            None => {
                self.keys.push(key);
                self.body.inputs.push(Input {
                    expr: (*i.expr).clone(),
                    span: i.span(),
                });
                self.keys.len() - 1
            }
        };
        let saved = self.input.replace(k);
        self.visit_expr_mut(&mut i.expr);
        self.input = saved;
        if self.replace {
            let x = format_ident!("__rlx_x{}", k);
            let span = i.span();
            *e = syn::parse_quote_spanned!(span=> ::core::clone::Clone::clone(&#x));
        }
    }

    /// A macro's tokens: visited as expressions when they parse as a
    /// comma-separated list, else searched for the loop variable.
    fn macro_tokens(&mut self, m: &mut syn::Macro) {
        let parser = Punctuated::<Expr, Token![,]>::parse_terminated;
        if let Ok(mut exprs) = syn::parse::Parser::parse2(parser, m.tokens.clone()) {
            for e in exprs.iter_mut() {
                self.visit_expr_mut(e);
            }
            if self.replace {
                m.tokens = quote!(#exprs);
            }
            return;
        }
        let mut found = None;
        find_ident(m.tokens.clone(), self.var, &mut found);
        if let Some(span) = found {
            if !self.var.is_some_and(|v| self.local(&v.to_string())) {
                self.var_use(span);
            }
        }
    }

    fn finish(mut self) -> Body {
        let carries: HashSet<String> = self.body.carries.iter().map(|c| c.0.clone()).collect();
        let mut outputs = std::mem::take(&mut self.body.outputs);
        outputs.retain(|(name, span)| {
            if carries.contains(name) {
                self.body.errors.push(syn::Error::new(
                    *span,
                    format!("`{name}` is assigned in this `#[scan]` loop (a carry) and pushed to: a carry keeps its shape from step to step\n  = help: push to a `Vec` that the loop does not assign; it gets one value per step"),
                ));
                false
            } else {
                true
            }
        });
        let outs: HashSet<String> = outputs.iter().map(|o| o.0.clone()).collect();
        for u in &self.uses {
            let msg = match u.input {
                Some(_) if carries.contains(&u.name) => format!("a per-step input of a `#[scan]` loop is read before the loop, but `{}` is assigned in it\n  = help: index a tensor that the loop does not assign, or carry the value", u.name),
                Some(_) if outs.contains(&u.name) => format!("a per-step input of a `#[scan]` loop is read before the loop, but `{}` is pushed to in it", u.name),
                None if outs.contains(&u.name) => format!("`{0}` collects the per-step outputs of this `#[scan]` loop (`{0}.push(..)`), so the body cannot read it: the outputs are stacked after the loop\n  = help: carry the value the body needs (assign it to a variable declared before the loop)", u.name),
                _ => continue,
            };
            self.body.errors.push(syn::Error::new(u.span, msg));
        }
        self.body.outputs = outputs;
        self.body
    }
}

fn find_ident(ts: proc_macro2::TokenStream, var: Option<&Ident>, found: &mut Option<Span>) {
    let Some(var) = var else { return };
    for t in ts {
        match t {
            TokenTree::Ident(i) if i == *var && found.is_none() => *found = Some(i.span()),
            TokenTree::Group(g) => find_ident(g.stream(), Some(var), found),
            _ => {}
        }
    }
}

impl VisitMut for Walker<'_> {
    fn visit_block_mut(&mut self, b: &mut Block) {
        self.scopes.push(HashSet::new());
        for s in &mut b.stmts {
            match s {
                Stmt::Local(l) => {
                    if let Some(init) = &mut l.init {
                        self.visit_expr_mut(&mut init.expr);
                        if let Some((_, d)) = &mut init.diverge {
                            self.visit_expr_mut(d);
                        }
                    }
                    self.bind(pat_names(&l.pat));
                }
                Stmt::Item(_) => {}
                Stmt::Expr(e, _) => self.visit_expr_mut(e),
                Stmt::Macro(m) => self.macro_tokens(&mut m.mac),
            }
        }
        self.scopes.pop();
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            Expr::Path(p) => {
                let Some(id) = p.path.get_ident() else { return };
                if self.is_var(id) {
                    self.var_use(id.span());
                } else if self.input.is_some() && self.local(&id.to_string()) {
                    self.err(id.span(), &format!("a per-step input of a `#[scan]` loop is read before the loop, but `{id}` is declared in its body\n  = help: index a tensor declared before the loop"));
                } else if !self.local(&id.to_string()) {
                    self.uses.push(Use {
                        name: id.to_string(),
                        span: id.span(),
                        input: self.input,
                    });
                }
            }
            Expr::Index(i)
                if self.input.is_none()
                    && matches!(&*i.index, Expr::Path(p) if p.path.get_ident().is_some_and(|id| self.is_var(id))) =>
            {
                self.step_read(e)
            }
            Expr::Assign(a) => {
                self.place(&mut a.left);
                self.visit_expr_mut(&mut a.right);
            }
            Expr::Binary(b) if is_compound(&b.op) => {
                self.place(&mut b.left);
                self.visit_expr_mut(&mut b.right);
            }
            Expr::MethodCall(m) if m.method == "push" => {
                let target = match &*m.receiver {
                    Expr::Path(p) => p.path.get_ident().cloned(),
                    _ => None,
                };
                match target {
                    Some(id) if !self.local(&id.to_string()) && !self.is_var(&id) => {
                        let name = id.to_string();
                        if !self.body.outputs.iter().any(|(n, _)| *n == name) {
                            self.body.outputs.push((name, id.span()));
                        }
                    }
                    _ => self.visit_expr_mut(&mut m.receiver),
                }
                m.args.iter_mut().for_each(|a| self.visit_expr_mut(a));
            }
            Expr::Closure(c) => {
                let names = c.inputs.iter().flat_map(pat_names).collect();
                self.closures += 1;
                self.scoped(names, |w| w.visit_expr_mut(&mut c.body));
                self.closures -= 1;
            }
            Expr::ForLoop(f) => {
                self.visit_expr_mut(&mut f.expr);
                self.inner_loop(f.label.as_ref(), pat_names(&f.pat), &mut f.body);
            }
            Expr::While(wl) => {
                let names = self.condition(&mut wl.cond);
                self.inner_loop(wl.label.as_ref(), names, &mut wl.body);
            }
            Expr::If(i) => {
                let names = self.condition(&mut i.cond);
                self.scoped(names, |w| w.visit_block_mut(&mut i.then_branch));
                if let Some((_, e)) = &mut i.else_branch {
                    self.visit_expr_mut(e);
                }
            }
            Expr::Match(m) => {
                self.visit_expr_mut(&mut m.expr);
                for arm in &mut m.arms {
                    self.scoped(pat_names(&arm.pat), |w| {
                        if let Some((_, g)) = &mut arm.guard {
                            w.visit_expr_mut(g);
                        }
                        w.visit_expr_mut(&mut arm.body);
                    });
                }
            }
            Expr::Return(r) if self.closures == 0 => {
                self.err(r.return_token.span, "`return` inside a `#[scan]` loop: the body becomes the closure of `rlx::scan`, traced once, so it cannot leave the function\n  = help: compute the value after the loop, or leave the loop unmarked to unroll it");
            }
            Expr::Try(t) => {
                if self.closures == 0 {
                    self.body.fallible = true;
                }
                syn::visit_mut::visit_expr_try_mut(self, t);
            }
            Expr::Break(b) if self.closures == 0 && self.leaves(b.label.as_ref()) => {
                self.err(b.break_token.span, "`break` leaving a `#[scan]` loop: its number of steps is fixed by its range, and the body is traced once for all of them\n  = help: keep the state unchanged with a select (`if done { x } else { step(x) }`), or leave the loop unmarked");
            }
            Expr::Continue(c) if self.closures == 0 && self.leaves(c.label.as_ref()) => {
                self.err(c.continue_token.span, "`continue` in a `#[scan]` loop: the body is traced once for every step, so it cannot skip the rest of a step\n  = help: select the values the step keeps (`if skip { x } else { step(x) }`)");
            }
            Expr::Macro(m) => self.macro_tokens(&mut m.mac),
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

impl Walker<'_> {
    /// The condition of an `if` or `while`: the names a `let` in it binds.
    fn condition(&mut self, cond: &mut Expr) -> Vec<String> {
        match cond {
            Expr::Let(l) => {
                self.visit_expr_mut(&mut l.expr);
                pat_names(&l.pat)
            }
            cond => {
                self.visit_expr_mut(cond);
                Vec::new()
            }
        }
    }

    /// The body of a loop inside the marked one (`break` may leave it).
    fn inner_loop(&mut self, label: Option<&syn::Label>, names: Vec<String>, body: &mut Block) {
        let label = label.map(|l| l.name.ident.to_string());
        let labelled = label.is_some();
        self.labels.extend(label);
        self.loops += 1;
        self.scoped(names, |w| w.visit_block_mut(body));
        self.loops -= 1;
        if labelled {
            self.labels.pop();
        }
    }

    /// Whether a `break`/`continue` with this label leaves the marked loop.
    fn leaves(&self, label: Option<&syn::Lifetime>) -> bool {
        match label {
            Some(l) => !self.labels.contains(&l.ident.to_string()),
            None => self.loops == 0,
        }
    }
}

fn is_compound(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_)
            | SubAssign(_)
            | MulAssign(_)
            | DivAssign(_)
            | RemAssign(_)
            | BitXorAssign(_)
            | BitAndAssign(_)
            | BitOrAssign(_)
            | ShlAssign(_)
            | ShrAssign(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(body: &str, replace: bool) -> (Body, String) {
        let mut b: Block = syn::parse_str(body).unwrap();
        let t = Ident::new("t", Span::call_site());
        let r = Body::walk(&mut b, Some(&t), replace);
        (r, quote!(#b).to_string())
    }

    fn names(v: &[(String, Span)]) -> Vec<&str> {
        v.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn carries_are_outer_names_assigned_in_the_body_in_order() {
        let (b, _) = walk(
            "{ let y = x * 2.0; p = &p + y; q += 1.0; v[0] = q.clone(); (a, _) = (q.clone(), 1); let z = 0; z = 1; }",
            false,
        );
        assert!(b.errors.is_empty());
        assert_eq!(names(&b.carries), ["p", "q", "v", "a"]);
    }

    #[test]
    fn a_name_shadowed_in_the_body_is_the_bodys_own() {
        let (b, _) = walk(
            "{ let q = q.sin(); q = q * 2.0; for j in 0..2 { let p = 1; p = 2; } }",
            false,
        );
        assert!(b.carries.is_empty(), "{:?}", names(&b.carries));
    }

    #[test]
    fn per_step_reads_and_outputs() {
        let (b, out) = walk(
            "{ x = &x + &xs[t] * &xs[t] + &f.a[t]; ys.push(x.clone()); zs.push(xs[t].sin()); }",
            true,
        );
        assert!(b.errors.is_empty());
        assert_eq!(b.inputs.len(), 2);
        assert_eq!(names(&b.outputs), ["ys", "zs"]);
        assert!(
            out.contains(":: core :: clone :: Clone :: clone (& __rlx_x0)")
                && out.contains(":: core :: clone :: Clone :: clone (& __rlx_x1)")
                && !out.contains("[t]"),
            "{out}"
        );
    }

    #[test]
    fn a_shadowed_loop_variable_is_an_ordinary_name() {
        let (b, _) = walk("{ let t = 3; x = x * t; ys.push(v[t].clone()); }", false);
        assert!(b.errors.is_empty() && b.inputs.is_empty());
    }

    #[test]
    fn refused_forms_are_errors() {
        for body in [
            "{ x = x * t; }",
            "{ println!(\"{}\", t); }",
            "{ break; }",
            "{ if c { continue; } }",
            "{ return x; }",
            "{ ys.push(x.clone()); x = x + ys.len(); }",
            "{ ys.push(x.clone()); ys = vec![]; }",
            "{ x = x + &xs[t]; xs = xs * 2.0; }",
            "{ let l = x.clone(); x = x + &l[t]; }",
        ] {
            let (b, _) = walk(body, false);
            assert_eq!(b.errors.len(), 1, "{body}");
        }
    }

    #[test]
    fn a_question_mark_makes_the_body_fallible() {
        let (b, _) = walk("{ x = f(x)?; }", false);
        assert!(b.errors.is_empty() && b.fallible);
        let (b, _) = walk("{ x = f(x); }", false);
        assert!(!b.fallible);
    }

    #[test]
    fn what_leaves_only_an_inner_loop_or_closure_is_allowed() {
        let (b, _) = walk(
            "{ 'inner: for j in 0..3 { if j > 1 { break 'inner; } continue; } let f = |a: f64| { return a; }; x = x * 2.0; }",
            false,
        );
        assert!(b.errors.is_empty());
    }
}
