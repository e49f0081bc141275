// `Tensor::full` takes the shape first (`zeros(shape, dtype)`, NumPy's
// `full(shape, fill_value, dtype)`); the value first is a compile error
// that says so.
use rlx::prelude::*;

fn main() {
    let _ = Tensor::full(1.5, [2], DType::F64);
}
