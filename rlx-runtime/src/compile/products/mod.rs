//! Matrix products: `view` (the types the kernels share), `matmul` (batched, broadcasting, strided products
//! through one GEMM wrapper), `panel` with its AVX2 and AVX-512 kernels
//! (small products in registers), `epilogue` (element-wise work run on a
//! product's output while it is hot).

pub(crate) mod epilogue;
pub(crate) mod matmul;
pub(crate) mod panel;
pub(crate) mod panel_avx2;
#[cfg(feature = "avx512")]
pub(crate) mod panel_avx512;
pub(crate) mod view;
