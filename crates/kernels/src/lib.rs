//! # edgefit-kernels
//!
//! Owns the number formats and compute kernels the engine runs on: today the f32 dot product and
//! the `y = x · Wᵀ` matrix product every linear layer uses; issue 4 adds the int4 (w4a16) block
//! formats with scalar, simd128 and native SIMD paths, and issue 5 the attention kernels over
//! quantized KV formats.
//!
//! Every fast kernel has a scalar twin ([`Kernel::Scalar`]) and both are listed at run time
//! ([`Kernel::ALL`]) so tests and benchmarks can run each one in any build. The scalar kernel is
//! the reference: one accumulator, in index order. The `Unrolled` kernel keeps eight independent
//! accumulators, which lets the compiler keep them in vector registers (SSE2 natively, simd128 in
//! wasm builds); it sums in a different order, so it agrees with the scalar twin to rounding
//! error, not bit for bit.
//!
//! Weights are stored row-major as `n` rows of `k` values (the output-feature-major layout GGUF
//! and safetensors use), so each output is one contiguous dot product.

pub mod f32_ops;

pub use f32_ops::{dot, matmul_t};

/// Deterministic pseudo-random values in [-1, 1) (splitmix64): the same numbers on every
/// platform, for tests that must reproduce and for the engine's synthetic test model.
pub fn pseudo_random(seed: u64, len: usize) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A kernel implementation that can be selected at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// The reference: straightforward loops, one accumulator.
    Scalar,
    /// Eight independent accumulators; vectorised by the compiler.
    Unrolled,
}

impl Kernel {
    /// Every kernel, reference first.
    pub const ALL: [Kernel; 2] = [Kernel::Scalar, Kernel::Unrolled];

    /// The kernel the engine uses unless told otherwise.
    pub const DEFAULT: Kernel = Kernel::Unrolled;

    /// A short stable name, for benchmarks and the page.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Unrolled => "unrolled",
        }
    }
}
