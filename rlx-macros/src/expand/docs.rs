//! The doc comments of the generated companions, which appear in the user's
//! `cargo doc` next to the function.
//!
//! Each starts with the companion's call and return type for *this*
//! function's parameters (`grad_energy(q, k) -> rlx::Result<(Tensor, f64)>`),
//! says what it computes and the shape of each result, and links to the
//! transform's documentation and to `rlx::differentiable`. Links are
//! intra-doc links through the `rlx` facade, the one path the generated code
//! names.

use crate::parse::{Float, Func, Kind, Out, Param};

/// Which companion a doc is for, with its extra parameters' names.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    Grad,
    ValueAndGrad,
    Jvp,
    Vjp,
    Jacobian,
    ValueAndJacobian,
    Hessian,
    Hvp,
    BatchJacobian,
    SparseJacobian,
    ValueAndSparseJacobian,
    SparseJacobianInto,
    ValueAndSparseJacobianInto,
    SparseHessian,
    SparseHessianInto,
    Graph,
    NthDerivative,
}

/// Builds the docs of one function's companions.
pub(super) struct Docs<'a> {
    f: &'a Func,
    name: String,
    /// Whether the float parameters are generic (number or tensor).
    generic: bool,
}

fn float_name(f: Float) -> &'static str {
    match f {
        Float::F32 => "f32",
        Float::F64 => "f64",
    }
}

fn out_name(o: Out) -> &'static str {
    match o {
        Out::Tensor => "Tensor",
        Out::Float(f) => float_name(f),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: Vec<String>) -> String {
    match items.len() {
        0 => String::new(),
        1 => items.into_iter().next().unwrap_or_default(),
        n => format!("{} and {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

/// `T` for one item, `(T, U)` for several.
fn tuple_of(items: Vec<String>) -> String {
    if items.len() == 1 {
        items.into_iter().next().unwrap_or_default()
    } else {
        format!("({})", items.join(", "))
    }
}

impl<'a> Docs<'a> {
    pub(super) fn new(f: &'a Func, generic: bool) -> Docs<'a> {
        Docs {
            f,
            name: f.item.sig.ident.to_string(),
            generic,
        }
    }

    fn wrt(&self) -> Vec<&'a Param> {
        self.f.wrt_params().collect()
    }

    /// The type a derivative mirroring `p` has (`Tensor` or the float).
    fn mirror(p: &Param) -> &'static str {
        match p.kind {
            Kind::Float(f) => float_name(f),
            Kind::Tensor { .. } | Kind::Static => "Tensor",
        }
    }

    /// `` `q` (shaped like `q`) `` or `` `k` (an `f64`) ``.
    fn like(p: &Param) -> String {
        match p.kind {
            Kind::Float(f) => format!("`{}` (an `{}`)", p.ident, float_name(f)),
            _ => format!("`{0}` (shaped like `{0}`)", p.ident),
        }
    }

    /// The function's value as the companions return it.
    fn value_ty(&self) -> String {
        let outs: Vec<String> = self
            .f
            .ret
            .outs
            .iter()
            .map(|&o| out_name(o).into())
            .collect();
        if self.f.ret.tuple {
            format!("({})", outs.join(", "))
        } else {
            outs.join("")
        }
    }

    fn grads_ty(&self) -> String {
        tuple_of(self.wrt().iter().map(|p| Self::mirror(p).into()).collect())
    }

    fn blocks_ty(&self) -> String {
        tuple_of(vec!["Tensor".into(); self.wrt().len()])
    }

    fn hessian_ty(&self) -> String {
        tuple_of(vec![self.blocks_ty(); self.wrt().len()])
    }

    /// "a bare `T`" for one parameter, "a tuple, one entry per parameter
    /// in this order" for several.
    fn arity(&self, one: &str) -> String {
        if self.wrt().len() == 1 {
            format!("a bare `{one}`, not a 1-tuple")
        } else {
            "a tuple with one entry per parameter, in this order".into()
        }
    }

    /// The shape of a Jacobian block of parameter `p` (`lead` before the
    /// output's dims: `N, ` for a batch).
    fn block(lead: &str, p: &Param) -> String {
        match p.kind {
            Kind::Float(_) => format!("`[{lead}out...]`"),
            _ => format!("`[{lead}out..., {}...]`", p.ident),
        }
    }

    /// What is not differentiated, if anything.
    fn others(&self) -> String {
        let wrt = &self.f.wrt;
        let not_wrt: Vec<String> = (0..self.f.params.len())
            .filter(|i| !wrt.contains(i) && self.f.params[*i].is_runtime())
            .map(|i| format!("`{}`", self.f.params[i].ident))
            .collect();
        let statics: Vec<String> = self.f.statics().map(|p| format!("`{}`", p.ident)).collect();
        let mut s = String::new();
        if !not_wrt.is_empty() {
            s += &format!(
                " {} {} not differentiated (not named in `wrt`).",
                and_list(not_wrt.clone()),
                if not_wrt.len() == 1 { "is" } else { "are" }
            );
        }
        if !statics.is_empty() {
            s += &format!(
                " {} {} static configuration, part of the plan-cache key, not differentiated.",
                and_list(statics.clone()),
                if statics.len() == 1 { "is" } else { "are" }
            );
        }
        s
    }

    /// The note on generic float parameters, if any.
    fn generic_note(&self) -> &'static str {
        if self.generic {
            "\n\nThe float parameters also take a 0-d `Tensor` (as inside another traced body); then the float results are `Tensor`s too. The types above are those of a call with numbers."
        } else {
            ""
        }
    }

    /// The doc of companion `which` named `cname`, whose parameters after
    /// the function's own are `extras`.
    pub(super) fn companion(&self, which: Which, cname: &str, extras: &[String]) -> String {
        let name = &self.name;
        let wrt = self.wrt();
        let wrt_list = and_list(wrt.iter().map(|p| Self::like(p)).collect());
        let args: Vec<String> = self
            .f
            .params
            .iter()
            .map(|p| p.ident.to_string())
            .chain(extras.iter().cloned())
            .collect();
        let (value, grads, blocks, hess) = (
            self.value_ty(),
            self.grads_ty(),
            self.blocks_ty(),
            self.hessian_ty(),
        );
        let out0 = self.f.ret.outs.first().map_or("Tensor", |&o| out_name(o));
        let (ret, what, link) = match which {
            Which::Grad => (
                grads.clone(),
                format!("The gradient of [`{name}`] with respect to {wrt_list}: {}.\n\nThe (first) output must be a scalar; otherwise this returns an error pointing to `vjp_{name}` and `jacobian_{name}`. Only the gradient is computed (`value_and_grad_{name}` returns the value too).", self.arity(&grads)),
                "[`rlx::autodiff::grad`]",
            ),
            Which::ValueAndGrad => (
                format!("({value}, {grads})"),
                format!("The value of [`{name}`] and its gradient with respect to {wrt_list} ({} for the gradient, as `grad_{name}`), from one execution.", self.arity(&grads)),
                "[`rlx::autodiff::value_and_grad`]",
            ),
            Which::Jvp => (
                format!("({value}, {out0})"),
                format!("Jacobian-vector product: the value of [`{name}`] and the directional derivative of its (first) output (shaped like it) along the tangents {}, one per parameter {wrt_list}, from one forward-mode execution.", and_list(extras.iter().map(|e| format!("`{e}`")).collect())),
                "[`rlx::autodiff::jvp`]",
            ),
            Which::Vjp => (
                format!("({value}, {grads})"),
                format!("Vector-Jacobian product: the value of [`{name}`] and `cotangentᵀ · ∂y/∂x` for each parameter `x` of {wrt_list} ({} for the products), where `y` is the (first) output and `cotangent` is shaped like it, from one reverse-mode execution.", self.arity(&grads)),
                "[`rlx::autodiff::vjp`]",
            ),
            Which::Jacobian => (
                blocks.clone(),
                format!("The Jacobian of the (first) output of [`{name}`] with respect to {wrt_list}: {}, `out` being the output's shape. All columns come from one execution, in forward or reverse mode, whichever is cheaper.", self.blocks_desc("")),
                "[`rlx::autodiff::jacobian`]",
            ),
            Which::ValueAndJacobian => (
                format!("({value}, {blocks})"),
                format!("The value of [`{name}`] and the Jacobian of its (first) output with respect to {wrt_list} ({}, `out` being the output's shape, as `jacobian_{name}`), from one execution.", self.blocks_desc("")),
                "[`rlx::autodiff::jacobian`]",
            ),
            Which::Hessian => (
                hess,
                format!("The Hessian of the scalar (first) output of [`{name}`] with respect to {wrt_list}, forward over reverse mode: {}", self.hessian_desc()),
                "[`rlx::autodiff::hessian`]",
            ),
            Which::Hvp => (
                grads.clone(),
                format!("Hessian-vector product of the scalar (first) output `f` of [`{name}`]: `Σ_j ∂²f/∂x_i∂x_j · v_j` for each parameter `x_i` of {wrt_list}, with the vectors {} shaped like their parameters ({} for the result), without forming the Hessian.", and_list(extras.iter().map(|e| format!("`{e}`")).collect()), self.arity(&grads)),
                "[`rlx::autodiff::hvp`]",
            ),
            Which::BatchJacobian => (
                blocks.clone(),
                format!("Per-item Jacobians of [`{name}`] written over a batch of `N` rows: {}, `out` being the shape of one row of the (first) output and each parameter's shape taken without its leading `N`, in one execution. Row `i` of the output must depend only on row `i` of each input; a function that mixes rows is an error. The function's value is not returned.", self.blocks_desc("N, ")),
                "[`rlx::autodiff::batch_jacobian`]",
            ),
            Which::SparseJacobian => (
                "SparseMatrix".into(),
                format!("The sparse Jacobian of the (first) output of [`{name}`] with respect to {wrt_list}, as a compressed-sparse-column [`rlx::SparseMatrix`]: {ORIENTATION}. The pattern comes from the traced graph, and a colouring compresses the columns (forward mode), the rows (reverse mode) or both, whichever needs fewest passes; all passes run in one execution, and all of that is built once per signature."),
                "[`rlx::sparse`]",
            ),
            Which::ValueAndSparseJacobian => (
                format!("({value}, SparseMatrix)"),
                format!("The value of [`{name}`] and the sparse Jacobian of its (first) output with respect to {wrt_list} (as `sparse_jacobian_{name}`: {ORIENTATION}), from one execution: the residual and Jacobian of a Newton step."),
                "[`rlx::sparse`]",
            ),
            Which::SparseJacobianInto => (
                "()".into(),
                format!("Writes the sparse Jacobian of [`{name}`] with respect to {wrt_list} (as `sparse_jacobian_{name}` computes it) into `jacobian`, which must have this signature's pattern (take it from a first `sparse_jacobian_{name}` call). A warm call allocates nothing."),
                "[`rlx::sparse`]",
            ),
            Which::ValueAndSparseJacobianInto => (
                "()".into(),
                format!("Writes the (first) output of [`{name}`], flattened row-major, into `value` and its sparse Jacobian with respect to {wrt_list} into `jacobian` (whose pattern must be the one `sparse_jacobian_{name}` returns for this signature), from one execution. A warm call allocates nothing."),
                "[`rlx::sparse`]",
            ),
            Which::SparseHessian => (
                "SparseMatrix".into(),
                format!("The sparse Hessian of the scalar (first) output of [`{name}`] with respect to {wrt_list}: a symmetric compressed-sparse-column [`rlx::SparseMatrix`] over the parameters' elements (each flattened row-major, concatenated in parameter order), both triangles stored, from a star colouring and forward over reverse mode in one execution."),
                "[`rlx::sparse`]",
            ),
            Which::SparseHessianInto => (
                "()".into(),
                format!("Writes the sparse Hessian of [`{name}`] with respect to {wrt_list} (as `sparse_hessian_{name}` computes it) into `hessian`, which must have this signature's pattern (take it from a first `sparse_hessian_{name}` call). A warm call allocates nothing."),
                "[`rlx::sparse`]",
            ),
            Which::Graph => (
                "rlx::Graph".into(),
                format!("The graph traced from [`{name}`] for the shapes and dtypes of these arguments (and the values of its static ones): print it, or pass it to the transforms of [`rlx::autodiff`] (`nth_order_grad`, `jacfwd`, ...). Its inputs are the runtime parameters, in order."),
                "[`rlx::Graph`]",
            ),
            Which::NthDerivative => (
                tuple_of(wrt.iter().map(|p| Self::mirror(p).into()).collect()),
                format!("The derivative of order `{}` (`n`) of the scalar (first) output `f` of [`{name}`] with respect to each of {wrt_list} on its own: `∂ⁿf/∂xⁿ`, shaped like the parameter repeated `n` times (a number for a float parameter); {}. `n = 1` is the gradient, `n = 2` the Hessian's diagonal block, `n = 0` the value. Built by one reverse pass and `n - 1` forward passes, compiled once per signature and order.", extras.last().map(String::as_str).unwrap_or("order"), self.arity(&grads)),
                "[`rlx::autodiff::nth_order_grad`]",
            ),
        };
        format!(
            "`{cname}({}) -> rlx::Result<{ret}>`\n\n{what}{}{}\n\nGenerated by [`rlx::differentiable`] on [`{name}`]; the transform: {link}.",
            args.join(", "),
            self.others(),
            self.generic_note(),
        )
    }

    /// Jacobian blocks: "one `Tensor` shaped `[out..., q...]`" or a tuple
    /// of them.
    fn blocks_desc(&self, lead: &str) -> String {
        let wrt = self.wrt();
        if wrt.is_empty() {
            // Only in the fallback expansion after an error.
            return "nothing: the function has no differentiable parameter".to_string();
        }
        if wrt.len() == 1 {
            return format!(
                "a bare `Tensor` shaped {}, not a 1-tuple",
                Self::block(lead, wrt[0])
            );
        }
        let each: Vec<String> = wrt
            .iter()
            .map(|p| format!("`{}`'s shaped {}", p.ident, Self::block(lead, p)))
            .collect();
        format!(
            "a tuple of one `Tensor` block per parameter, in this order: {}",
            and_list(each)
        )
    }

    /// Hessian blocks: one `Tensor`, or rows of blocks.
    fn hessian_desc(&self) -> String {
        let wrt = self.wrt();
        let dims = |p: &Param| match p.kind {
            Kind::Float(_) => String::new(),
            _ => format!("{}...", p.ident),
        };
        if wrt.is_empty() {
            // Only in the fallback expansion after an error.
            return "nothing: the function has no differentiable parameter.".to_string();
        }
        if wrt.len() == 1 {
            let d = dims(wrt[0]);
            let shape = if d.is_empty() {
                "0-d".to_string()
            } else {
                format!("shaped `[{d}, {d}]`")
            };
            return format!("a bare `Tensor` {shape}, not a 1-tuple.");
        }
        let (a, b) = (&wrt[0].ident, &wrt[1].ident);
        format!(
            "a tuple of rows, one per parameter, each a tuple of blocks: row `i`, block `j` is `∂²f/∂x_i∂x_j` for `x` = ({}), a `Tensor` shaped `[x_i..., x_j...]` (float parameters contribute no dims). So `.0.1` is `∂²f/∂{a}∂{b}`, and `.1.0` its transpose `∂²f/∂{b}∂{a}`.",
            wrt.iter()
                .map(|p| format!("`{}`", p.ident))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

const ORIENTATION: &str = "rows are the elements of the (first) output, columns the elements of the differentiated parameters, each flattened row-major and concatenated in parameter order";
