//! The circuits shared by `examples/circuit.rs` and `benches/sparse.rs`
//! (included by `#[path]`): the element values, the diode-ladder residual
//! and the resistor–diode grid residual.

use rlx::prelude::*;

pub const R: f64 = 50.0; // resistors between nodes, ohms
pub const R_SOURCE: f64 = 10.0; // source resistance, ohms
pub const R_LEAK: f64 = 1.0e5; // leakage from every grid node to ground, ohms
pub const R_LOAD: f64 = 1_000.0; // load at the last ladder node, ohms
pub const I_SAT: f64 = 1e-14; // diode saturation current, amperes
pub const V_T: f64 = 0.025_85; // thermal voltage at 300 K, volts

/// Sum of the currents leaving each node of the ladder (amperes): a voltage
/// source `VS` feeds node 0 through `R_SOURCE`, consecutive nodes are joined
/// by `R`, every node has a diode and a current source, the last a load.
#[differentiable(wrt(v))]
pub fn ladder(v: &Tensor, vs: f64, i_src: &Tensor, n: usize) -> Tensor {
    let left = Tensor::concat(&[&vs.reshape([1]), &v.slice(0, 0, n - 1)], 0);
    let g_left = Tensor::concat(
        &[
            &Tensor::full(1.0 / R_SOURCE, [1], DType::F64),
            &Tensor::full(1.0 / R, [n - 1], DType::F64),
        ],
        0,
    );
    let to_left = (v - &left) * &g_left;
    let to_right = Tensor::concat(
        &[
            &((v.slice(0, 0, n - 1) - v.slice(0, 1, n - 1)) / R),
            &(v.slice(0, n - 1, 1) / R_LOAD),
        ],
        0,
    );
    let diode = ((v / V_T).exp() - 1.0) * I_SAT;
    to_left + to_right + diode - i_src
}

/// Currents leaving each node of the `k × k` grid (amperes); zero at the
/// operating point, for the source voltage `vs` (a 0-d tensor). A plain
/// tensor function: each user wraps it in its own `#[differentiable]`
/// function (traced through the call, where `vs` is a traced tensor).
pub fn grid_residual(v: &Tensor, vs: &Tensor, i_src: &Tensor, k: usize) -> Tensor {
    // Current through each horizontal and vertical resistor, then the net
    // current out of each node (an edge's current leaves one end and enters
    // the other; grid borders have no edge beyond them).
    let ih = (v.slice(1, 0, k - 1) - v.slice(1, 1, k - 1)) / R;
    let iv = (v.slice(0, 0, k - 1) - v.slice(0, 1, k - 1)) / R;
    let zc = Tensor::zeros([k, 1], DType::F64);
    let zr = Tensor::zeros([1, k], DType::F64);
    let out_h = Tensor::concat(&[&ih, &zc], 1) - Tensor::concat(&[&zc, &ih], 1);
    let out_v = Tensor::concat(&[&iv, &zr], 0) - Tensor::concat(&[&zr, &iv], 0);
    // The first row is fed from the source.
    let fed = Tensor::concat(
        &[
            &((v.slice(0, 0, 1) - vs) / R_SOURCE),
            &Tensor::zeros([k - 1, k], DType::F64),
        ],
        0,
    );
    let diode = ((v / V_T).exp() - 1.0) * I_SAT;
    out_h + out_v + fed + diode + v / R_LEAK - i_src
}
