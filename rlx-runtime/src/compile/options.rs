//! What a caller may choose about compilation ([`Options`]), read by the
//! planner.

/// Compilation settings for [`compile_with`](crate::compile::driver::compile_with).
///
/// ```
/// use rlx::compile::{compile_with, Options};
/// use rlx::{DType, Graph};
/// let mut g = Graph::new();
/// let x = g.input("x", [], DType::F64);
/// let y = g.sin(x).unwrap();
/// g.set_outputs(vec![y]);
/// // A graph run once: skip generating native code.
/// let exe = compile_with(&g, &Options { jit: false, ..Options::default() }).unwrap();
/// assert_eq!(exe.stats().native_regions, 0);
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// Compile scalar (0-d) regions of eight or more instructions to native
    /// code with Cranelift (only with the `jit` feature, on by default):
    /// bit-identical results, several times faster than interpreting them,
    /// at a compile cost of about 0.7 ms for a region of a hundred instructions.
    pub jit: bool,
    /// Run graphs whose values are all small (at most 256 elements each,
    /// inputs up to 1024 elements in all, `f32`/`f64` inputs and outputs)
    /// as one scalar program over their elements: movement ops route
    /// elements, every other op becomes element-wise arithmetic in the
    /// reference kernels' order (bit-identical results), common
    /// subexpressions and constants are folded per element. See
    /// [`PlanStats::scalarized_nodes`](crate::compile::PlanStats::scalarized_nodes).
    ///
    /// In a graph that also has larger values, runs of small values (each
    /// value and operand at most 256 elements, at least two computing ops,
    /// not only 0-d element-wise ones) become *scalar regions* the same
    /// way, each one step of the general plan reading its inputs from the
    /// plan's buffers and writing its outputs into them; large values keep
    /// their kernels and fused loops. See
    /// [`PlanStats::small_regions`](crate::compile::PlanStats::small_regions).
    /// Off, every value goes through the general planner.
    pub scalarize: bool,
    /// Fuse movement ops and reductions into the element-wise loops next
    /// to them: slices and transposes read by fused loops are read in
    /// place, values used only by a concat or a transpose are written
    /// straight into it, and reductions of a loop's values are folded
    /// into that loop (same combine order, so the same bits). Off, each of
    /// these ops is a step of its own with its own buffer (see
    /// [`PlanStats::views`](crate::compile::PlanStats::views),
    /// [`placed`](crate::compile::PlanStats::placed) and
    /// [`fused_reductions`](crate::compile::PlanStats::fused_reductions)).
    pub fuse_movement: bool,
    /// Run the element-wise loop reading a matrix product (a bias add and
    /// an activation; in a backward pass, the activation's derivative
    /// times the cotangent and the bias gradient's column sum) in the
    /// product's step: the product is written straight into the buffer of
    /// the loop's result, which the loop then overwrites block by block.
    /// The same operations in the same order, so the same bits. Off, the
    /// product is a step of its own with its own buffer. See
    /// [`PlanStats::epilogues`](crate::compile::PlanStats::epilogues).
    pub epilogues: bool,
}

impl Options {
    /// The general planner only: kernels and fused loops, no scalar
    /// programs or scalar regions (the defaults with `scalarize` off).
    /// Scalarised plans are tested against it, bit for bit.
    ///
    /// ```
    /// use rlx::compile::{compile, compile_with, Options};
    /// use rlx::{DType, Graph, Tensor};
    /// let mut g = Graph::new();
    /// let x = g.input("x", [3], DType::F64);
    /// let y = g.sin(x).unwrap();
    /// g.set_outputs(vec![y]);
    /// let general = compile_with(&g, &Options::general()).unwrap();
    /// assert_eq!(general.stats().scalarized_nodes, 0);
    /// let x = Tensor::from_slice(&[0.5, 1.0, 2.0], [3]);
    /// let a = compile(&g).unwrap().run(&[&x]).unwrap();
    /// let b = general.run(&[&x]).unwrap();
    /// assert_eq!(a[0].to_vec::<f64>(), b[0].to_vec::<f64>());
    /// ```
    pub fn general() -> Options {
        Options {
            scalarize: false,
            ..Options::default()
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            jit: true,
            scalarize: true,
            fuse_movement: true,
            epilogues: true,
        }
    }
}
