//! The analytic Lennard-Jones pair gradient shared by the benchmarks that
//! use it as their hand-written baseline.

/// ∂/∂a of the LJ pair energy (ε = σ = 1) for `(dx, dy) = a − b`, as
/// (gx, gy) for particle a (b gets the negation):
/// dE/dr² = 4 (−6 s⁷ + 3 s⁴) with s = 1 / r², ∂r²/∂xa = 2 dx.
pub fn lj_grad(dx: f64, dy: f64) -> (f64, f64) {
    let s = 1.0 / (dx * dx + dy * dy);
    let s2 = s * s;
    let s4 = s2 * s2;
    let de = 4.0 * (-6.0 * s4 * s2 * s + 3.0 * s4);
    (2.0 * dx * de, 2.0 * dy * de)
}
