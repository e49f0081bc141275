//! Hostile input: sizes that overflow, allocations that cannot succeed,
//! `try_` methods that must return `Err`, and panicking conveniences that
//! must panic with rlx's message at the caller's line. One test per finding
//! of issue #20 (each failed before the fix), plus the Jacobian and `vmap`
//! sizes. The random search for more lives in `tests/fuzz.rs`.

#[allow(dead_code)]
#[path = "fuzz/panics.rs"]
mod panics;

use panics::{panic_of, Caught};
use rlx::prelude::*;
use rlx::{autodiff, Graph};

/// Asserts that a panic is rlx's own (`want` in the message) and names
/// this file at `line`.
fn assert_ours(c: &Caught, want: &str, line: u32) {
    assert!(c.message.contains(want), "message: {}", c.message);
    assert!(
        c.file.ends_with("hostile_input.rs") && c.line == line,
        "the panic names {}:{}, not the caller's line {line}: {}",
        c.file,
        c.line,
        c.message
    );
}

fn too_large(e: &Error, op: &str) -> bool {
    matches!(e.root(), Error::TooLarge { op: o, .. } if *o == op)
}

// ---- finding 1: element counts wrapped silently ----

#[test]
fn zeros_of_an_overflowing_shape_is_an_error() {
    for dt in DType::ALL {
        let e = Tensor::try_zeros([1usize << 32, 1 << 32], dt).unwrap_err();
        assert!(too_large(&e, "Tensor::zeros"), "{e}");
        assert!(
            e.to_string().contains("18446744073709551616 elements"),
            "{e}"
        );
    }
    let line = line!() + 1;
    let c = panic_of(|| Tensor::zeros([1usize << 32, 1 << 32], DType::F64));
    assert_ours(&c, "is too large", line);
}

#[test]
fn reshape_of_an_empty_tensor_to_an_overflowing_shape_is_an_error() {
    let x = Tensor::zeros([0], DType::F64);
    let e = x.try_reshape([1usize << 32, 1 << 32]).unwrap_err();
    assert!(too_large(&e, "reshape"), "{e}");
    assert!(e.to_string().contains("[0]"), "names the operand: {e}");
    // A shape with a zero dimension whose strides would overflow.
    let e = x.try_reshape([0, usize::MAX, 2]).unwrap_err();
    assert!(too_large(&e, "reshape"), "{e}");
    assert!(e.to_string().contains("strides overflow"), "{e}");
    // Still fine: empty shapes whose other dimensions fit.
    assert_eq!(x.try_reshape([0, 1 << 40]).unwrap().numel(), 0);
}

#[test]
fn from_vec_reports_the_true_element_count() {
    let e = Tensor::try_from_vec(vec![1.0f64, 2.0], [usize::MAX, 2]).unwrap_err();
    assert!(too_large(&e, "Tensor::from_vec"), "{e}");
    assert!(
        e.to_string().contains("36893488147419103230 elements"),
        "{e}"
    );
    assert!(!e.to_string().contains("18446744073709551614"), "{e}");
}

/// The line of the reshape in `blow_up`.
const BLOW_UP_LINE: u32 = line!() + 6;

/// Reshapes an empty slice to a shape with 2^64 elements.
#[differentiable]
fn blow_up(x: &Tensor) -> Tensor {
    let empty = x.slice_range(0..0, 0);
    let huge = empty.reshape([1usize << 32, 1 << 32]);
    x.square().sum_all() + huge.sum_all()
}

#[test]
fn traced_overflow_is_an_error_with_the_users_line() {
    let x = Tensor::from_slice(&[1.0f64, 2.0], [2]);
    let v = Tensor::from_slice(&[1.0f64, 0.0], [2]);
    let errors = [
        grad_blow_up(&x).map(drop).unwrap_err(),
        hvp_blow_up(&x, &v).map(drop).unwrap_err(),
        value_and_grad_blow_up(&x).map(drop).unwrap_err(),
        jacobian_blow_up(&x).map(drop).unwrap_err(),
    ];
    for e in errors {
        assert!(too_large(&e, "reshape"), "{e}");
        let at = format!("hostile_input.rs:{BLOW_UP_LINE}:");
        assert!(
            e.to_string().contains(&at),
            "names the line of the reshape: {e}"
        );
    }
    let line = line!() + 1;
    let c = panic_of(|| blow_up(&x));
    assert_ours(&c, "is too large", line);
}

// ---- finding 2: try_broadcast_to panicked ----

#[test]
fn try_broadcast_to_an_overflowing_shape_is_an_error() {
    let one = Tensor::scalar(1.0f64);
    for shape in [vec![usize::MAX, 2], vec![1 << 32, 1 << 32], vec![1 << 62]] {
        let e = one.try_broadcast_to(shape.clone()).unwrap_err();
        assert!(too_large(&e, "broadcast"), "{shape:?}: {e}");
    }
    let line = line!() + 1;
    let c = panic_of(|| one.broadcast_to([1usize << 32, 1 << 32]));
    assert_ours(
        &c,
        "`broadcast`: a f64 tensor of shape [4294967296, 4294967296] is too large",
        line,
    );
}

#[test]
fn ops_whose_result_overflows_are_errors() {
    // Empty operands that are fine, whose broadcast result is not: its
    // non-zero dimensions multiply to 2^80.
    let a = Tensor::zeros([1 << 40, 1, 0], DType::F32);
    let b = Tensor::zeros([1, 1 << 40, 0], DType::F32);
    let e = a.try_add(&b).unwrap_err();
    assert!(too_large(&e, "add"), "{e}");
    assert!(
        e.to_string().contains("[1099511627776, 1, 0]"),
        "names the operands: {e}"
    );
    let e = a.try_lt(&b).unwrap_err();
    assert!(too_large(&e, "lt"), "{e}");
    // Matmul batch dimensions that multiply past the limit.
    let a = Tensor::zeros([1 << 32, 1, 0, 2], DType::F64);
    let b = Tensor::zeros([1, 1 << 32, 2, 0], DType::F64);
    let e = a.try_matmul(&b).unwrap_err();
    assert!(too_large(&e, "matmul"), "{e}");
    // Concat: a result past isize::MAX, and sizes past usize::MAX.
    let q = Tensor::zeros([0, 1 << 62], DType::Bool);
    let e = Tensor::try_concat(&[&q, &q], 1).unwrap_err();
    assert!(too_large(&e, "concat"), "{e}");
    let e = Tensor::try_concat(&[&q, &q, &q, &q], 1).unwrap_err();
    assert!(e.to_string().contains("usize::MAX"), "{e}");
    // Gather: indices whose shape makes the result too large.
    let x = Tensor::zeros([0, 1 << 40], DType::F64);
    let idx = Tensor::zeros([1 << 30, 0], DType::I64);
    let e = x.try_gather(&idx, 0).unwrap_err();
    assert!(too_large(&e, "gather"), "{e}");
}

// ---- finding 3: allocations sized by user input aborted ----

#[test]
fn zeros_of_a_shape_too_large_for_usize_panics_with_our_message() {
    for dt in DType::ALL {
        let e = Tensor::try_zeros([usize::MAX, 2], dt).unwrap_err();
        assert!(too_large(&e, "Tensor::zeros"), "{e}");
        let e = Tensor::try_full([usize::MAX, 2], 1.0, dt).unwrap_err();
        assert!(too_large(&e, "Tensor::full"), "{e}");
        let e = Tensor::try_ones([usize::MAX], dt).unwrap_err();
        assert!(too_large(&e, "Tensor::ones"), "{e}");
    }
    let line = line!() + 1;
    let c = panic_of(|| Tensor::zeros([usize::MAX, 2], DType::F32));
    assert_ours(&c, "is too large", line);
    assert!(!c.message.contains("capacity overflow"), "{}", c.message);
}

#[test]
fn an_allocation_the_allocator_refuses_is_an_error() {
    // 2^61 bytes: beyond any machine's address space, so refused whatever
    // the overcommit policy.
    let e = Tensor::try_zeros([1usize << 58], DType::F64).unwrap_err();
    assert!(
        matches!(e, Error::OutOfMemory { op: "Tensor::zeros", bytes, .. } if bytes == 1 << 61),
        "{e}"
    );
    for dt in DType::ALL {
        let n = 1usize << 61 >> dt.size_in_bytes().trailing_zeros();
        assert!(matches!(
            Tensor::try_full([n], 2.0, dt),
            Err(Error::OutOfMemory { .. })
        ));
    }
    assert!(matches!(
        Tensor::try_eye(1 << 29, DType::F64),
        Err(Error::OutOfMemory { .. })
    ));
    assert!(matches!(
        Tensor::try_eye(1 << 32, DType::F64),
        Err(Error::TooLarge { .. })
    ));
    assert!(matches!(
        Tensor::try_arange(1 << 61, DType::Bool),
        Err(Error::OutOfMemory { .. })
    ));
    // The case, 8 TiB: refused under Linux's default heuristic
    // overcommit (more than RAM + swap). Skipped where any request is granted.
    let policy = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if matches!(policy.trim(), "0" | "2") {
        let e = Tensor::try_zeros([1usize << 40], DType::F64).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
    }
    // An eager op whose output cannot be allocated.
    let x = Tensor::zeros([1, 1], DType::Bool);
    let e = x.try_broadcast_to([1 << 31, 1 << 30]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OutOfMemory {
                op: "broadcast",
                ..
            }
        ),
        "{e}"
    );
}

// ---- finding 4: from_vec/from_slice panics named rlx's own line ----

#[test]
fn from_vec_and_from_slice_panic_at_the_callers_line() {
    let line = line!() + 1;
    let c = panic_of(|| Tensor::from_vec(vec![1.0f64, 2.0, 3.0], [2, 2]));
    assert_ours(&c, "3 values given for shape [2, 2]", line);
    let line = line!() + 1;
    let c = panic_of(|| Tensor::from_slice(&[1.0f32], [3]));
    assert_ours(&c, "1 values given for shape [3]", line);
    let line = line!() + 1;
    let c = panic_of(|| Tensor::from_slice(&[1.0f32], [usize::MAX, 3]));
    assert_ours(&c, "is too large", line);
    let line = line!() + 1;
    let c = panic_of(|| Tensor::eye(1 << 32, DType::F64));
    assert_ours(&c, "`Tensor::eye`", line);
}

#[test]
fn panicking_methods_name_the_callers_line() {
    let x = Tensor::from_slice(&[1.0f64, 2.0], [2]);
    let line = line!() + 1;
    let c = panic_of(|| x.reshape([3]));
    assert_ours(&c, "`reshape`", line);
    let line = line!() + 1;
    let c = panic_of(|| x.slice_range(usize::MAX..=usize::MAX, 0));
    assert_ours(&c, "`slice`", line);
    let line = line!() + 1;
    let c = panic_of(|| &x + &Tensor::zeros([3], DType::F64));
    assert_ours(&c, "`add`", line);
}

// ---- graph-level sizes: Jacobians (out × in), vmap batches ----

#[test]
fn a_jacobian_too_large_for_memory_is_an_error() {
    // f(x) = sin(x) on 2^31 elements: the Jacobian has 2^62 entries.
    let mut g = Graph::new();
    let x = g.input("x", [1 << 31], DType::F64);
    let y = g.sin(x).unwrap();
    g.set_outputs(vec![y]);
    for e in [
        autodiff::jacobian(&g, &[0]).unwrap_err(),
        autodiff::jacfwd(&g, &[0]).unwrap_err(),
        autodiff::jacrev(&g, &[0]).unwrap_err(),
    ] {
        assert!(matches!(e.root(), Error::TooLarge { .. }), "{e}");
    }
    // Hessian of a scalar function of 2^32 inputs: 2^64 entries.
    let mut g = Graph::new();
    let x = g.input("x", [1 << 32], DType::F32);
    let s = g.sum_all(x).unwrap();
    g.set_outputs(vec![s]);
    let e = autodiff::hessian(&g, &[0]).unwrap_err();
    assert!(matches!(e.root(), Error::TooLarge { .. }), "{e}");
}

#[test]
fn vmap_over_a_batch_too_large_is_an_error() {
    let mut g = Graph::new();
    let x = g.input("x", [1 << 20], DType::F64);
    let y = g.exp(x).unwrap();
    g.set_outputs(vec![y]);
    let e = rlx::core::vmap(&g, &[true], 1 << 50).unwrap_err();
    assert!(too_large(&e, "vmap"), "{e}");
    assert!(rlx::core::vmap(&g, &[true], 4).is_ok());
}

#[test]
fn a_graph_input_too_large_is_an_error_when_compiled() {
    let mut g = Graph::new();
    let x = g.input("x", [usize::MAX, 2], DType::F64);
    let y = g.exp(x);
    assert!(y.is_err(), "the op's result is checked");
    g.set_outputs(vec![x]);
    let e = rlx::compile(&g).map(drop).unwrap_err();
    assert!(too_large(&e, "input"), "{e}");
    assert!(rlx::runtime::interpret(&g, &[]).is_err());
}

/// `storage_mut` on a shared tensor copies fallibly (copy on write through
/// `Storage::try_clone`): the copy is written, the original is unchanged.
#[test]
fn storage_mut_copies_a_shared_buffer_without_touching_the_original() {
    let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0], [3]);
    let mut b = a.clone();
    if let rlx::runtime::Storage::F64(v) = b.storage_mut().unwrap() {
        v[0] = 10.0;
    } else {
        panic!("expected f64 storage");
    }
    assert_eq!(a.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(b.to_vec::<f64>().unwrap(), vec![10.0, 2.0, 3.0]);
}
