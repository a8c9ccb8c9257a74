//! # edgefit-kernels
//!
//! Owns the number formats and compute kernels the engine runs on: the f32 dot product and
//! `y = x · Wᵀ`, the 4-bit weight format with fp16 group scales ([`W4Matrix`], w4a16), the int8
//! format with fp16 block scales ([`Q8Matrix`], for the embedding/output matrix), f16 weights
//! ([`F16Matrix`]), ggml's Q5_0, Q5_1, Q4_K, Q5_K and Q6_K blocks kept as their GGUF bytes
//! ([`GgmlMatrix`], [`ggml`]), the 16-bit activation format those integer kernels read
//! ([`ActQ16`]), and one matrix type over all of them ([`Matrix`]) so the engine's linear layers do not care which
//! format they hold. [`attn`] has the attention products over the KV-cache formats (f32, f16,
//! int8, int4 in groups of 32): `q · k` and `out += p · v` for one stored head vector, read from
//! the stored form.
//!
//! Matrix products run on an input prepared once ([`Prepared`]) over any range of output rows
//! ([`Matrix::matmul_rows`]); [`pool`] splits them (and any per-item work, such as attention
//! heads) across a persistent thread pool ([`Pool`]) so results are the same bits for any
//! thread count.
//!
//! Every fast kernel has a scalar twin ([`Kernel::Scalar`]) and every kernel this build can run
//! is listed at run time ([`Kernel::available`]) so tests and benchmarks can run each one in any
//! build. The scalar kernel is the reference: plain loops in index order.
//!
//! Weights are stored row-major as `n` rows of `k` values (the output-feature-major layout GGUF
//! and safetensors use), so each output is one dot product along `k`, and quantization groups
//! run along `k` too.
//!
//! Where things live: the block, group and tile sizes and the tile index helpers every format
//! and ISA reads are one leaf module (`layout.rs`); the ISA kernels are `arch/` (one file per
//! ISA, dispatched from `arch/mod.rs`), their tests beside them, one file per family of formats.

pub mod act;
mod arch;
pub mod attn;
pub mod error;
pub mod f32_ops;
pub mod ggml;
mod layout;
pub mod matrix;
pub mod pool;
pub mod quant;

pub use act::{round_ties_even_small, ActQ16};
pub use error::KernelError;
pub use f32_ops::{dot, matmul_t};
pub use ggml::{GgmlFormat, GgmlMatrix};
pub use matrix::{Matrix, Prepared, ROW_SPLIT};
pub use pool::Pool;
pub use quant::{F16Matrix, Q8Matrix, W4Kind, W4Matrix};

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

/// Wrapping sum of `words` with 16 independent lanes, which the compiler turns into vector adds
/// (four i32x4 on simd128), so the loop waits on memory rather than on an add chain: the
/// streaming-read probe of the engine's micro-benchmarks and of `cargo xtask bench`.
pub fn wrapping_sum(words: &[u32]) -> u32 {
    const LANES: usize = 16;
    let mut acc = [0u32; LANES];
    let chunks = words.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    let mut sum = tail.iter().fold(0u32, |a, &x| a.wrapping_add(x));
    for a in acc {
        sum = sum.wrapping_add(a);
    }
    sum
}

/// A kernel implementation that can be selected at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// The reference: straightforward loops, one accumulator, index order.
    Scalar,
    /// Portable Rust with independent accumulators, vectorised by the compiler (SSE2 natively,
    /// simd128 in wasm builds). Runs everywhere.
    Portable,
    /// Hand-written `core::arch::wasm32` SIMD128 (wasm builds with `+simd128` only).
    Simd128,
    /// Hand-written x86_64 AVX2 + FMA + F16C (native builds on CPUs that have them, detected at
    /// run time).
    Avx2,
}

impl Kernel {
    /// Every kernel that exists in some build, reference first.
    pub const ALL: [Kernel; 4] = [
        Kernel::Scalar,
        Kernel::Portable,
        Kernel::Simd128,
        Kernel::Avx2,
    ];

    /// A short stable name, for benchmarks, JSON and the page.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Portable => "portable",
            Kernel::Simd128 => "simd128",
            Kernel::Avx2 => "avx2",
        }
    }

    /// The kernel named `name` (see [`Kernel::name`]), if it exists at all.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this build, on this CPU, can run the kernel.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Scalar | Kernel::Portable => true,
            Kernel::Simd128 => cfg!(all(target_arch = "wasm32", target_feature = "simd128")),
            Kernel::Avx2 => avx2_detected(),
        }
    }

    /// Every kernel this build can run here, reference first.
    pub fn available() -> Vec<Kernel> {
        Kernel::ALL
            .into_iter()
            .filter(|k| k.is_available())
            .collect()
    }

    /// The fastest kernel available here: hand-written SIMD when present, else portable.
    pub fn best() -> Kernel {
        if Kernel::Avx2.is_available() {
            Kernel::Avx2
        } else if Kernel::Simd128.is_available() {
            Kernel::Simd128
        } else {
            Kernel::Portable
        }
    }

    /// `self` if available here, else [`Kernel::best`]: callers that ask for a kernel this build
    /// lacks still run correctly (tests check availability before they compare).
    pub(crate) fn resolve(self) -> Kernel {
        if self.is_available() {
            self
        } else {
            Kernel::best()
        }
    }
}

/// Detected once per process (memchr's `unsafe_ifunc!` idea: one atomic load per call after
/// the first), since the attention kernels ask per head vector.
#[cfg(target_arch = "x86_64")]
fn avx2_detected() -> bool {
    static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // F16C (fp16 scale conversion) ships on every AVX2 CPU but is a separate flag.
    *DETECTED.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_detected() -> bool {
    false
}
