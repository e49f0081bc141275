//! Rewrites the body so that control flow on traced values becomes tensor
//! ops. Runs after `check.rs`, so it may assume the rejected forms are gone.
//!
//! Decision rule: an expression is traced when it mentions a traced binding
//! (see `traced.rs`). Each rewrite calls a trait-dispatched helper in
//! `::rlx::__private`, whose impls for `bool` and plain values behave like
//! the original syntax, so a static value wrongly judged traced still gets
//! the right result.

use std::collections::HashSet;

use proc_macro2::Span;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{BinOp, Block, Expr, Stmt};

use crate::traced::{assigned_name, pat_names, Taint};

/// Rewrites `block` in place; `taint` holds the traced parameter names and
/// `numbers` the names of the `f32`/`f64` parameters.
pub fn rewrite(block: &mut Block, taint: Taint, numbers: &[&syn::Ident]) {
    Rewriter {
        taint,
        numbers: numbers.iter().map(|i| i.to_string()).collect(),
        closure_depth: 0,
    }
    .visit_block_mut(block);
}

struct Rewriter {
    taint: Taint,
    /// Names the user wrote as numbers: `f32`/`f64` parameters (of the
    /// function or of a closure) and locals computed from them by
    /// arithmetic. Inside the body they hold `Tensor`s, which are not
    /// `Copy`; as arguments of a call they are passed by value as a number
    /// would be (see [`Rewriter::pass_number`]).
    numbers: HashSet<String>,
    /// How many closures enclose the current expression (a `return` in
    /// one leaves the closure, not the body).
    closure_depth: usize,
}

/// Whether `op` is an arithmetic operator whose operands the rewrite
/// borrows (`+ - * /` and their compound assignments, whose right side only
/// is borrowed).
fn borrows_operands(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_)
    )
}

fn borrows_rhs(op: &BinOp) -> bool {
    borrows_operands(op)
        || matches!(
            op,
            BinOp::AddAssign(_) | BinOp::SubAssign(_) | BinOp::MulAssign(_) | BinOp::DivAssign(_)
        )
}

/// A float type named in a closure signature (`f64`, `f32`).
fn float_name(ty: &syn::Type) -> Option<&'static str> {
    let syn::Type::Path(tp) = ty else { return None };
    let id = tp.path.get_ident()?;
    if id == "f64" {
        Some("f64")
    } else if id == "f32" {
        Some("f32")
    } else {
        None
    }
}

/// Whether `f` is one of the macro's own helpers (`::rlx::__private::..`),
/// whose arguments are already what they should be.
fn is_private_call(f: &Expr) -> bool {
    let Expr::Path(p) = f else { return false };
    let mut segs = p.path.segments.iter();
    p.path.leading_colon.is_some()
        && segs.next().is_some_and(|s| s.ident == "rlx")
        && segs.next().is_some_and(|s| s.ident == "__private")
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
                    // judged before the initialiser is rewritten
                    let number = self.number_init(l);
                    if let Some(init) = &mut l.init {
                        self.visit_expr_mut(&mut init.expr);
                        if let Some((_, d)) = &mut init.diverge {
                            self.visit_expr_mut(d);
                        }
                    }
                    self.taint.bind_local(l);
                    self.bind_numbers(l, number);
                }
                Stmt::Item(_) => {}
                Stmt::Expr(e, _) => self.visit_expr_mut(e),
                Stmt::Macro(_) => {}
            }
        }
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        match e {
            // `x * y` with traced names `x`, `y`  →
            // `::rlx::__private::operand(&x) * ::rlx::__private::operand(&y)`:
            // a `Tensor` operand is borrowed (it is not `Copy`, so the body
            // reads as it would for numbers: `x * x - x`), anything `Copy`
            // is copied, as the plain operator would.
            Expr::Binary(bin) if borrows_rhs(&bin.op) => {
                syn::visit_mut::visit_expr_binary_mut(self, bin);
                if borrows_operands(&bin.op) {
                    self.borrow_operand(&mut bin.left);
                }
                self.borrow_operand(&mut bin.right);
            }
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
                syn::visit_mut::visit_expr_unary_mut(self, u);
                self.borrow_operand(&mut u.expr);
            }
            // `f(k)`, `x.powf(k)` with `k` written as a number  →
            // `f(::rlx::__private::pass_number(&k))`: the `Tensor` is cloned (a
            // handle, not the data), so `k` can be passed again, as an `f64`
            // can.
            Expr::Call(c) => {
                syn::visit_mut::visit_expr_call_mut(self, c);
                if !is_private_call(&c.func) {
                    c.args.iter_mut().for_each(|a| self.pass_number(a));
                }
            }
            Expr::MethodCall(m) => {
                syn::visit_mut::visit_expr_method_call_mut(self, m);
                m.args.iter_mut().for_each(|a| self.pass_number(a));
            }
            // `return e` in the body (not in a closure)  →
            // `return Ok(e)`: the body runs in a closure returning
            // `rlx::Result`, so that `?` works in it.
            Expr::Return(r) if self.closure_depth == 0 => {
                syn::visit_mut::visit_expr_return_mut(self, r);
                if let Some(v) = r.expr.take() {
                    let span = r.return_token.span;
                    r.expr = Some(Box::new(
                        syn::parse_quote_spanned!(span=> ::core::result::Result::Ok(#v)),
                    ));
                }
            }
            // `|r: f64| -> f64 { .. }`  →
            // `|r| -> ::rlx::Tensor { let r: ::rlx::Tensor = ::rlx::__private::scalar_param::<f64, _>(r); .. }`:
            // inside traced code a number is a 0-d `Tensor`, so a scalar
            // helper closure takes tensors (and still numbers).
            Expr::Closure(c) => {
                let saved = self.taint.clone();
                let saved_numbers = self.numbers.clone();
                let mut prelude: Vec<Stmt> = Vec::new();
                for input in c.inputs.iter_mut() {
                    // A parameter shadows a number of the same name; a float
                    // one is made a number again below.
                    for n in pat_names(input) {
                        self.numbers.remove(&n);
                    }
                    let syn::Pat::Type(pt) = input else { continue };
                    let (Some(f), syn::Pat::Ident(pi)) = (float_name(&pt.ty), &*pt.pat) else {
                        continue;
                    };
                    let (id, m) = (pi.ident.clone(), pi.mutability);
                    let f = syn::Ident::new(f, pt.ty.span());
                    prelude.push(syn::parse_quote_spanned!(id.span()=>
                        let #m #id: ::rlx::Tensor = ::rlx::__private::scalar_param::<#f, _>(#id);
                    ));
                    self.taint.add(id.to_string());
                    self.numbers.insert(id.to_string());
                    *input = syn::Pat::Ident(syn::PatIdent {
                        mutability: None,
                        ..pi.clone()
                    });
                }
                if !prelude.is_empty() {
                    if let syn::ReturnType::Type(_, ty) = &mut c.output {
                        if float_name(ty).is_some() {
                            let span = ty.span();
                            **ty = syn::parse_quote_spanned!(span=> ::rlx::Tensor);
                        }
                    }
                    let body = match &*c.body {
                        // Spliced, not nested: nested braces would warn.
                        Expr::Block(b) if b.label.is_none() && b.attrs.is_empty() => {
                            let stmts = &b.block.stmts;
                            quote::quote!(#(#stmts)*)
                        }
                        other => quote::quote!(#other),
                    };
                    *c.body = syn::parse_quote!({ #(#prelude)* #body });
                }
                self.closure_depth += 1;
                syn::visit_mut::visit_expr_closure_mut(self, c);
                self.closure_depth -= 1;
                self.taint = saved;
                self.numbers = saved_numbers;
            }
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
                for n in pat_names(&f.pat) {
                    self.numbers.remove(&n);
                }
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

impl Rewriter {
    /// `k` (a name written as a number) → `::rlx::__private::pass_number(&k)`.
    fn pass_number(&self, e: &mut Expr) {
        let Expr::Path(p) = e else { return };
        if p.qself.is_some() {
            return;
        }
        let Some(id) = p.path.get_ident() else { return };
        if !self.numbers.contains(&id.to_string()) {
            return;
        }
        let span = p.span();
        *e = syn::parse_quote_spanned!(span=> ::rlx::__private::pass_number(&#p));
    }

    /// Whether `let pat = init;` binds a single name to arithmetic on
    /// numbers (`let r2 = dx * dx + dy * dy;`), which is a number too.
    fn number_init(&self, l: &syn::Local) -> bool {
        pat_names(&l.pat).len() == 1
            && l.init
                .as_ref()
                .is_some_and(|i| i.diverge.is_none() && self.arithmetic(&i.expr))
    }

    /// After `let pat = init;`: records a number (see [`Self::number_init`]);
    /// any other binding shadows the names it binds.
    fn bind_numbers(&mut self, l: &syn::Local, number: bool) {
        for n in pat_names(&l.pat) {
            if number {
                self.numbers.insert(n);
            } else {
                self.numbers.remove(&n);
            }
        }
    }

    /// Whether `e` is arithmetic (`+ - * /`, negation, parentheses) whose
    /// leaves include a name written as a number: its value is a number for
    /// the user and a `Tensor` in the body.
    fn arithmetic(&self, e: &Expr) -> bool {
        match e {
            Expr::Binary(b) if borrows_operands(&b.op) => {
                self.arithmetic(&b.left) || self.arithmetic(&b.right)
            }
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => self.arithmetic(&u.expr),
            Expr::Paren(p) => self.arithmetic(&p.expr),
            Expr::Path(p) => p
                .path
                .get_ident()
                .is_some_and(|i| self.numbers.contains(&i.to_string())),
            _ => false,
        }
    }

    /// `x` (a traced name) → `::rlx::__private::operand(&x)`.
    fn borrow_operand(&self, e: &mut Expr) {
        if !self.taint.expr(e) {
            return;
        }
        let Expr::Path(p) = e else { return };
        if p.qself.is_some() || p.path.get_ident().is_none() {
            return;
        }
        let span = p.span();
        *e = syn::parse_quote_spanned!(span=> ::rlx::__private::operand(&#p));
    }
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
        rewrite(&mut b, Taint::new(&ids), &ids.iter().collect::<Vec<_>>());
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

    #[test]
    fn traced_operands_are_borrowed() {
        let out = run("{ let r = x.sum_all(); let e = r * r - x; -e }", &["x"]);
        assert!(
            out.contains(
                ":: rlx :: __private :: operand (& r) * :: rlx :: __private :: operand (& r)"
            ),
            "{out}"
        );
        assert!(
            out.contains("- :: rlx :: __private :: operand (& e)"),
            "{out}"
        );
    }

    #[test]
    fn a_return_in_the_body_returns_ok_but_not_in_a_closure() {
        let out = run(
            "{ if n == 0 { return x; } let f = |a| { return a; }; f(x) }",
            &["x"],
        );
        assert!(
            out.contains("return :: core :: result :: Result :: Ok (x)"),
            "{out}"
        );
        assert!(out.contains("return a ;"), "{out}");
    }

    #[test]
    fn float_closure_parameters_take_tensors() {
        let out = run("{ let h = |r: f64| -> f64 { r * r }; h(x) }", &["x"]);
        assert!(out.contains("| r | -> :: rlx :: Tensor"), "{out}");
        assert!(out.contains("scalar_param :: < f64 , _ > (r)"), "{out}");
    }

    #[test]
    fn numbers_passed_to_calls_are_not_moved() {
        let out = run(
            "{ let r2 = x * x; let v = vec![1.0]; let s = f(x, r2, v, &x); s + x.powf(x) + g(x.sin()) }",
            &["x"],
        );
        assert!(
            out.contains("f (:: rlx :: __private :: pass_number (& x) , :: rlx :: __private :: pass_number (& r2) , v , & x)"),
            "{out}"
        );
        assert!(
            out.contains("powf (:: rlx :: __private :: pass_number (& x))"),
            "{out}"
        );
        assert!(out.contains("g (x . sin ())"), "{out}");
    }

    #[test]
    fn a_closure_parameter_shadows_a_number() {
        let out = run(
            "{ let h = |x: Vec<f64>| f(x); h(vec![1.0]) + g(x) }",
            &["x"],
        );
        assert!(out.contains("f (x)"), "{out}");
        assert!(
            out.contains("g (:: rlx :: __private :: pass_number (& x))"),
            "{out}"
        );
    }

    #[test]
    fn a_shadowed_number_is_moved_as_written() {
        let out = run("{ let x = vec![2.0]; f(x) }", &["x"]);
        assert!(out.contains("f (x)"), "{out}");
    }
}
