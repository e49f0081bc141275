//! Rejects what cannot be traced soundly. Only rejects; never rewrites.
//!
//! Signature: `async`, `unsafe`, `const`, `extern`, variadics and generic
//! parameters (parameter kinds and the return type are checked in
//! `parse.rs`). Body: `unsafe` blocks, `async`/`.await`, `loop`,
//! `match`/`while`/`if let` on a traced value, and an `if` on a traced
//! condition that has no `else` or that leaves the function or a loop from
//! a branch (both branches of such an `if` run while tracing).

use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Block, Expr, ExprIf, Stmt};

use crate::marked;
use crate::parse::Func;
use crate::traced::{assigned_name, Taint};

/// Pushes one error per rejected construct.
pub fn check(f: &Func, errors: &mut Vec<syn::Error>) {
    let sig = &f.item.sig;
    let mut reject = |span: proc_macro2::Span, what: &str| {
        errors.push(syn::Error::new(span, what));
    };
    if let Some(t) = &sig.constness {
        reject(t.span, "a `#[differentiable]` function cannot be `const`\n  = help: remove `const`; the function is traced and compiled at run time");
    }
    if let Some(t) = &sig.asyncness {
        reject(t.span, "a `#[differentiable]` function cannot be `async`: it is traced into a graph by running it once\n  = help: write a synchronous function and call its companions from async code");
    }
    if let Some(t) = &sig.unsafety {
        reject(t.span, "a `#[differentiable]` function cannot be `unsafe`: only safe tensor code can be traced\n  = help: remove `unsafe`; move unsafe code out of the differentiated function");
    }
    if let Some(abi) = &sig.abi {
        reject(abi.span(), "a `#[differentiable]` function cannot have an `extern` ABI\n  = help: remove the ABI; wrap the function in an `extern` one if needed");
    }
    if let Some(v) = &sig.variadic {
        reject(
            v.span(),
            "a `#[differentiable]` function cannot be variadic",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        reject(sig.generics.span(), "a `#[differentiable]` function cannot have generic parameters: each companion caches compiled plans for one concrete signature\n  = help: use concrete types (`Tensor`, `f64`, ...); shapes and dtypes may still vary from call to call");
    }
    for p in f.statics() {
        if let Some(span) = borrowed(&p.ty) {
            reject(span, "a static parameter cannot borrow: static parameters are stored with the compiled plans they select (they are part of the plan-cache key), so they must be `'static`\n  = help: take an owned value (`String` for `&str`, `Vec<T>` for `&[T]`) or a `&'static` reference");
        }
    }
    let mut v = Checker {
        taint: Taint::new(f.runtime().map(|p| &p.ident)),
        errors,
    };
    v.visit_block(&f.item.block);
}

struct Checker<'a> {
    taint: Taint,
    errors: &'a mut Vec<syn::Error>,
}

impl Checker<'_> {
    fn err(&mut self, span: proc_macro2::Span, msg: &str) {
        self.errors.push(syn::Error::new(span, msg));
    }

    fn check_if(&mut self, i: &ExprIf) {
        if let Expr::Let(l) = &*i.cond {
            if self.taint.expr(&l.expr) {
                self.err(
                    i.if_token.span,
                    "`if let` on a traced value: tensor values are not known while tracing\n  = help: compare tensors (`if x > 0.0 { .. } else { .. }` becomes an element-wise select) or use `Tensor::select`",
                );
            }
            return;
        }
        if !self.taint.expr(&i.cond) {
            return;
        }
        let Some((_, else_branch)) = &i.else_branch else {
            self.err(
                i.if_token.span,
                "an `if` on a traced condition needs an `else`: it becomes an element-wise select between the two branch values\n  = help: add `else { .. }` giving the value where the condition is false",
            );
            return;
        };
        let mut esc = Escapes::default();
        esc.visit_block(&i.then_branch);
        esc.visit_expr(else_branch);
        if let Some(span) = esc.found {
            self.err(
                span,
                "`return`, `break` or `continue` inside an `if` on a traced condition: both branches are evaluated while tracing, and the result is an element-wise select\n  = help: make each branch produce a value, e.g. `let y = if x > 0.0 { a } else { b };`",
            );
        }
    }
}

impl Checker<'_> {
    fn misplaced_marker(&mut self, attrs: &[syn::Attribute]) {
        if let Some(a) = attrs.iter().find(|a| marked::is_marker(a)) {
            self.errors.push(marked::misplaced(a));
        }
    }

    /// A `#[scan]` loop: what its syntax shows (`marked::errors`), and that
    /// its range and budget are static.
    fn check_marked(&mut self, f: &syn::ExprForLoop, m: syn::Result<marked::Marker>) {
        self.errors.extend(marked::errors(f, &m));
        let mut statics: Vec<(&str, Expr)> = Vec::new();
        if let Ok(r) = marked::range(&f.expr) {
            statics.push(("the range", r.start));
            statics.push(("the range", r.end));
        }
        if let Ok(marked::Marker {
            checkpoints: Some(c),
            ..
        }) = m
        {
            statics.push(("the checkpoint budget", c));
        }
        for (what, e) in statics {
            if self.taint.expr(&e) {
                self.err(
                    e.span(),
                    &format!("{what} of a `#[scan]` loop must be static, but this is a traced value: tensor values are not known while tracing\n  = help: pass the number as a `usize` parameter (static: part of the plan-cache key)"),
                );
            }
        }
    }
}

impl<'ast> Visit<'ast> for Checker<'_> {
    fn visit_block(&mut self, b: &'ast Block) {
        for s in &b.stmts {
            match s {
                Stmt::Local(l) => {
                    self.misplaced_marker(&l.attrs);
                    if let Some(init) = &l.init {
                        self.visit_expr(&init.expr);
                        if let Some((_, d)) = &init.diverge {
                            self.visit_expr(d);
                        }
                    }
                    self.taint.bind_local(l);
                }
                Stmt::Item(_) => {}
                Stmt::Expr(e, _) => {
                    self.misplaced_marker(marked::expr_attrs(e));
                    self.visit_expr(e)
                }
                Stmt::Macro(m) => {
                    self.misplaced_marker(&m.attrs);
                    self.visit_stmt_macro(m)
                }
            }
        }
    }

    fn visit_expr(&mut self, e: &'ast Expr) {
        match e {
            Expr::Unsafe(u) => self.err(
                u.unsafe_token.span,
                "`unsafe` blocks are not allowed in a `#[differentiable]` function: only safe tensor code can be traced\n  = help: move the unsafe code into a function outside the differentiated code",
            ),
            Expr::Async(a) => self.err(
                a.async_token.span,
                "`async` blocks are not allowed in a `#[differentiable]` function\n  = help: trace synchronous tensor code only",
            ),
            Expr::Await(a) => self.err(
                a.await_token.span,
                "`.await` is not allowed in a `#[differentiable]` function\n  = help: trace synchronous tensor code only",
            ),
            Expr::Loop(l) => self.err(
                l.loop_token.span,
                "`loop` is not allowed in a `#[differentiable]` function: its exit could depend on tensor values, which are not known while tracing\n  = help: use `for` over a static range (it unrolls at trace time)",
            ),
            Expr::While(w) => {
                if self.taint.expr(&w.cond) {
                    self.err(
                        w.while_token.span,
                        "`while` on a traced value: tensor values are not known while tracing\n  = help: use `for` over a static range (it unrolls at trace time) and `if`/`else` on comparisons for element-wise selects",
                    );
                }
                syn::visit::visit_expr_while(self, w);
            }
            Expr::Match(m) => {
                if self.taint.expr(&m.expr) {
                    self.err(
                        m.match_token.span,
                        "`match` on a traced value: tensor values are not known while tracing\n  = help: compare tensors with `if x > 0.0 { .. } else { .. }` (an element-wise select) or use `Tensor::select`",
                    );
                }
                syn::visit::visit_expr_match(self, m);
            }
            Expr::If(i) => {
                self.check_if(i);
                syn::visit::visit_expr_if(self, i);
            }
            Expr::ForLoop(f) => {
                if let Some(m) = marked::marker(&f.attrs) {
                    self.check_marked(f, m);
                }
                self.visit_expr(&f.expr);
                let traced = self.taint.expr(&f.expr);
                self.taint.bind_pat(&f.pat, traced);
                self.visit_block(&f.body);
            }
            Expr::Assign(a) => {
                syn::visit::visit_expr_assign(self, a);
                if self.taint.expr(&a.right) {
                    if let Some(n) = assigned_name(&a.left) {
                        self.taint.add(n);
                    }
                }
            }
            _ => syn::visit::visit_expr(self, e),
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// The span of a borrow in a static parameter's type that is not
/// `'static` (a reference without a lifetime, or a lifetime other than
/// `'static`), if any.
fn borrowed(ty: &syn::Type) -> Option<proc_macro2::Span> {
    #[derive(Default)]
    struct Borrows(Option<proc_macro2::Span>);
    impl<'ast> Visit<'ast> for Borrows {
        fn visit_type_reference(&mut self, r: &'ast syn::TypeReference) {
            if r.lifetime.is_none() && self.0.is_none() {
                self.0 = Some(r.and_token.span);
            }
            syn::visit::visit_type_reference(self, r);
        }
        fn visit_lifetime(&mut self, l: &'ast syn::Lifetime) {
            if l.ident != "static" && self.0.is_none() {
                self.0 = Some(l.span());
            }
        }
    }
    let mut b = Borrows::default();
    b.visit_type(ty);
    b.0
}

/// Finds `return`, and `break`/`continue` that leave the branch.
#[derive(Default)]
struct Escapes {
    found: Option<proc_macro2::Span>,
    loops: usize,
}

impl<'ast> Visit<'ast> for Escapes {
    fn visit_expr(&mut self, e: &'ast Expr) {
        if self.found.is_some() {
            return;
        }
        match e {
            Expr::Return(r) => self.found = Some(r.return_token.span),
            Expr::Break(b) if self.loops == 0 || b.label.is_some() => {
                self.found = Some(b.break_token.span)
            }
            Expr::Continue(c) if self.loops == 0 || c.label.is_some() => {
                self.found = Some(c.continue_token.span)
            }
            Expr::Closure(_) => {}
            Expr::ForLoop(_) | Expr::While(_) | Expr::Loop(_) => {
                self.loops += 1;
                syn::visit::visit_expr(self, e);
                self.loops -= 1;
            }
            _ => syn::visit::visit_expr(self, e),
        }
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}
}
