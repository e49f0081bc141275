//! Rewrites the body so that control flow on traced values becomes tensor
//! ops. Runs after `check.rs`, so it may assume the rejected forms are gone.
//!
//! Decision rule: an expression is traced when it mentions a traced binding
//! (see `traced.rs`). Each rewrite calls a trait-dispatched helper in
//! `::rlx::__private`, whose impls for `bool` and plain values behave like
//! the original syntax, so a static value wrongly judged traced still gets
//! the right result.

use proc_macro2::Span;
use quote::quote_spanned;
use syn::visit_mut::VisitMut;
use syn::{BinOp, Block, Expr, Stmt};

use crate::traced::{assigned_name, Taint};

/// Rewrites `block` in place; `taint` holds the traced parameter names.
pub fn rewrite(block: &mut Block, taint: Taint) {
    Rewriter { taint }.visit_block_mut(block);
}

struct Rewriter {
    taint: Taint,
}

fn cmp_helper(op: &BinOp) -> Option<(&'static str, Span)> {
    Some(match op {
        BinOp::Lt(t) => ("lt", t.span),
        BinOp::Le(t) => ("le", t.spans[0]),
        BinOp::Gt(t) => ("gt", t.span),
        BinOp::Ge(t) => ("ge", t.spans[0]),
        BinOp::Eq(t) => ("eq", t.spans[0]),
        BinOp::Ne(t) => ("ne", t.spans[0]),
        BinOp::And(t) => ("and", t.spans[0]),
        BinOp::Or(t) => ("or", t.spans[0]),
        _ => return None,
    })
}

impl VisitMut for Rewriter {
    fn visit_block_mut(&mut self, b: &mut Block) {
        for s in &mut b.stmts {
            match s {
                Stmt::Local(l) => {
                    if let Some(init) = &mut l.init {
                        self.visit_expr_mut(&mut init.expr);
                        if let Some((_, d)) = &mut init.diverge {
                            self.visit_expr_mut(d);
                        }
                    }
                    self.taint.bind_local(l);
                }
                Stmt::Item(_) => {}
                Stmt::Expr(e, _) => self.visit_expr_mut(e),
                Stmt::Macro(_) => {}
            }
        }
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            // `a > b`  →  `::rlx::__private::gt(&(a), &(b))` (a mask for
            // tensors, a `bool` for plain values); `a && b` →
            // `::rlx::__private::and(a, b)` (element-wise for masks; both
            // sides are evaluated).
            Expr::Binary(bin) => {
                let traced = self.taint.expr(&bin.left) || self.taint.expr(&bin.right);
                syn::visit_mut::visit_expr_binary_mut(self, bin);
                let Some((name, span)) = cmp_helper(&bin.op) else {
                    return;
                };
                if !traced {
                    return;
                }
                let f = syn::Ident::new(name, span);
                let (l, r) = (&bin.left, &bin.right);
                *e = if matches!(bin.op, BinOp::And(_) | BinOp::Or(_)) {
                    syn::parse_quote_spanned!(span=> ::rlx::__private::#f(#l, #r))
                } else {
                    syn::parse_quote_spanned!(span=> ::rlx::__private::#f(&(#l), &(#r)))
                };
            }
            // `if c { A } else { B }` with a traced `c`  →
            // `{ let c = c; let a = { A }; let b = B; ::rlx::__private::select(c, a, b) }`:
            // both branches are traced, and the mask picks per element
            // (a `bool` picks one of the two values).
            Expr::If(i) => {
                let traced = !matches!(&*i.cond, Expr::Let(_)) && self.taint.expr(&i.cond);
                syn::visit_mut::visit_expr_if_mut(self, i);
                if !traced {
                    return;
                }
                let Some((_, else_branch)) = &i.else_branch else {
                    return;
                };
                let span = i.if_token.span;
                let (cond, then) = (&i.cond, &i.then_branch);
                let tokens = quote_spanned! {span=>
                    {
                        let __rlx_cond = #cond;
                        let __rlx_then = #then;
                        let __rlx_else = #else_branch;
                        ::rlx::__private::select(__rlx_cond, __rlx_then, __rlx_else)
                    }
                };
                *e = syn::parse2(tokens).unwrap_or_else(|err| {
                    let msg = err.to_string();
                    syn::parse_quote_spanned!(span=> ::core::compile_error!(#msg))
                });
            }
            Expr::ForLoop(f) => {
                self.visit_expr_mut(&mut f.expr);
                let traced = self.taint.expr(&f.expr);
                self.taint.bind_pat(&f.pat, traced);
                self.visit_block_mut(&mut f.body);
            }
            Expr::Assign(a) => {
                syn::visit_mut::visit_expr_assign_mut(self, a);
                if self.taint.expr(&a.right) {
                    if let Some(n) = assigned_name(&a.left) {
                        self.taint.add(n);
                    }
                }
            }
            // Every other expression kind keeps its syntax; its children
            // are visited in source order. Rejected kinds (`loop`, `?`,
            // `unsafe`, ...) never reach here: `check.rs` stopped them.
            _ => syn::visit_mut::visit_expr_mut(self, e),
        }
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::ToTokens;

    fn run(src: &str, traced: &[&str]) -> String {
        let mut b: Block = syn::parse_str(src).unwrap();
        let ids: Vec<syn::Ident> = traced
            .iter()
            .map(|n| syn::Ident::new(n, Span::call_site()))
            .collect();
        rewrite(&mut b, Taint::new(&ids));
        b.to_token_stream().to_string()
    }

    #[test]
    fn traced_comparison_becomes_helper_call() {
        let out = run("{ let m = x > 0.0; m }", &["x"]);
        assert!(
            out.contains(":: rlx :: __private :: gt (& (x) , & (0.0))"),
            "{out}"
        );
    }

    #[test]
    fn static_comparison_is_unchanged() {
        let out = run("{ let b = n > 2; b }", &["x"]);
        assert!(out.contains("n > 2"), "{out}");
        assert!(!out.contains("__private"), "{out}");
    }

    #[test]
    fn traced_if_becomes_select_and_taint_flows_through_locals() {
        let out = run(
            "{ let y = x * 2.0; if y < 1.0 { y } else { 0.0 * y } }",
            &["x"],
        );
        assert!(
            out.contains(":: rlx :: __private :: lt (& (y) , & (1.0))"),
            "{out}"
        );
        assert!(
            out.contains(":: rlx :: __private :: select (__rlx_cond , __rlx_then , __rlx_else)"),
            "{out}"
        );
    }

    #[test]
    fn shadowing_with_a_static_value_makes_the_name_static() {
        let out = run("{ let x = 3usize; if x > 2 { 1.0 } else { 2.0 } }", &["x"]);
        assert!(!out.contains("__private"), "{out}");
    }

    #[test]
    fn shape_queries_are_static() {
        let out = run(
            "{ let n = x.shape().dims()[0]; if n > 2 { 1 } else { 2 } }",
            &["x"],
        );
        assert!(!out.contains("__private"), "{out}");
    }
}
