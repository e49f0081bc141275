//! Building [`CustomOp`]s (JAX's `custom_vjp` / `custom_jvp`) with rule
//! graphs whose signatures are checked once, up front.

use std::sync::Arc;

use crate::{CustomOp, Error, Graph, Result, TensorType};

/// A sub-function with user-supplied derivative rules, checked against the
/// conventions documented on [`CustomOp`]: `forward` has inputs `x_1..x_n`
/// and exactly one output `y`; `vjp` takes `[x_1.., y, ȳ]` and returns
/// `[x̄_1..]` shaped like the inputs; `jvp` takes `[x_1.., ẋ_1..]` and returns
/// `ẏ` shaped like `y`. Use it with [`Graph::custom`].
///
/// ```
/// use rlx::{autodiff::custom_op, DType, Graph};
/// // softplus(x) = ln(1 + e^x) with the stable derivative sigmoid(x)
/// let mut f = Graph::new();
/// let x = f.input("x", [3], DType::F64);
/// let e = f.exp(x).unwrap();
/// let y = f.unary(rlx::UnaryOp::Log1p, e).unwrap();
/// f.set_outputs(vec![y]);
/// let mut r = Graph::new();
/// let x = r.input("x", [3], DType::F64);
/// let _y = r.input("y", [3], DType::F64);
/// let ct = r.input("ct", [3], DType::F64);
/// let s = r.sigmoid(x).unwrap();
/// let d = r.mul(ct, s).unwrap();
/// r.set_outputs(vec![d]);
/// let op = custom_op("softplus", f, Some(r), None).unwrap();
/// assert_eq!(op.name, "softplus");
/// ```
pub fn custom_op(
    name: impl Into<String>,
    forward: Graph,
    vjp: Option<Graph>,
    jvp: Option<Graph>,
) -> Result<Arc<CustomOp>> {
    let name = name.into();
    let bad = |message: String| Error::InvalidArgument {
        op: "custom",
        message: format!("custom op `{name}`: {message}"),
    };
    forward.verify()?;
    if forward.outputs().len() != 1 {
        return Err(bad(format!(
            "the forward graph must have exactly one output, it has {}",
            forward.outputs().len()
        )));
    }
    let xs: Vec<TensorType> = forward.input_ids().iter().map(|&i| forward.ty(i)).collect();
    let y = forward.ty(forward.outputs()[0]);
    let check = |rule: &Graph, kind: &str, ins: &[TensorType], outs: &[TensorType]| {
        rule.verify()?;
        let got_in: Vec<TensorType> = rule.input_ids().iter().map(|&i| rule.ty(i)).collect();
        let got_out: Vec<TensorType> = rule.outputs().iter().map(|&o| rule.ty(o)).collect();
        if got_in != ins || got_out != outs {
            return Err(bad(format!(
                "the {kind} graph must have inputs {} and outputs {}, but has inputs {} and outputs {}",
                list(ins),
                list(outs),
                list(&got_in),
                list(&got_out)
            )));
        }
        Ok(())
    };
    if let Some(r) = &vjp {
        let mut ins = xs.clone();
        ins.push(y.clone());
        ins.push(y.clone());
        check(r, "vjp", &ins, &xs)?;
    }
    if let Some(r) = &jvp {
        let mut ins = xs.clone();
        ins.extend(xs.iter().cloned());
        check(r, "jvp", &ins, std::slice::from_ref(&y))?;
    }
    Ok(Arc::new(CustomOp {
        name,
        forward,
        vjp,
        jvp,
    }))
}

fn list(ts: &[TensorType]) -> String {
    let v: Vec<String> = ts
        .iter()
        .map(|t| format!("{}{}", t.dtype, t.shape))
        .collect();
    format!("[{}]", v.join(", "))
}
