//! Byte counts of weight and KV-cache formats: the ONE place this arithmetic lives.
//!
//! The engine allocates its weights and its `KvCache` with these functions, and the estimator
//! predicts memory with the same functions, so "estimated KV bytes" and "allocated KV bytes" are
//! equal by construction, not by agreement between two pieces of code.
//!
//! # Weight layouts (per matrix of `rows` output features × `cols` input features)
//! Groups and blocks run along `cols` (the input dimension, the dot-product direction). A row
//! whose `cols` is not a multiple of the group is padded to a whole group: the tail group costs
//! as much as a full one (this is what the packed kernels store).
//!
//! | format | bytes for `rows × cols` | bits/weight when `cols` is a multiple |
//! |---|---|---|
//! | `f32` | `4·r·c` | 32 |
//! | `f16`, `bf16` | `2·r·c` | 16 |
//! | `int8` | `r·(c + 2)`: int8 values plus one fp16 scale per row (per output channel) | 8 + 16/c |
//! | `w4g32` / `w4g64` / `w4g128` | `r·⌈c/G⌉·(G/2 + 2)`: packed nibbles plus one fp16 scale per group of G, symmetric, no zero-point | 4 + 16/G (4.5 / 4.25 / 4.125) |
//! | `q4_0` | `r·⌈c/32⌉·18` (fp16 d + 16 bytes of nibbles) | 4.5 |
//! | `q4_1` | `r·⌈c/32⌉·20` (fp16 d, fp16 m + 16 bytes) | 5.0 |
//! | `q5_0` | `r·⌈c/32⌉·22` (fp16 d, 4 bytes of high bits + 16 bytes of nibbles) | 5.5 |
//! | `q5_1` | `r·⌈c/32⌉·24` (fp16 d, fp16 m, 4 bytes of high bits + 16 bytes of nibbles) | 6.0 |
//! | `q8_0` | `r·⌈c/32⌉·34` (fp16 d + 32 int8) | 8.5 |
//! | `q2_k` | `r·⌈c/256⌉·84` (16 bytes of 4-bit scales/mins, 64 bytes of 2-bit values, fp16 d, fp16 dmin) | 2.625 |
//! | `q3_k` | `r·⌈c/256⌉·110` (32 bytes of high bits, 64 bytes of 2-bit values, 12 bytes of 6-bit scales, fp16 d) | 3.4375 |
//! | `q4_k` | `r·⌈c/256⌉·144` (super-block: fp16 d, fp16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles) | 4.5 |
//! | `q5_k` | `r·⌈c/256⌉·176` (q4_k plus 32 bytes of high bits) | 5.5 |
//! | `q6_k` | `r·⌈c/256⌉·210` (128 bytes low nibbles, 64 bytes high 2 bits, 16 int8 scales, fp16 d) | 6.5625 |
//!
//! The GGUF block sizes are ggml's (`block_q4_0` = 18 bytes, `block_q4_1` = 20, `block_q5_0` =
//! 22, `block_q5_1` = 24, `block_q8_0` = 34, `block_q2_K` = 84, `block_q3_K` = 110,
//! `block_q4_K` = 144, `block_q5_K` = 176, `block_q6_K` = 210), and the engine holds those
//! formats as these exact bytes (except Q2_K and Q3_K, which it converts at load: they are
//! sized here for estimates of the files llama.cpp runs).
//!
//! # KV-cache layouts (per layer, per token, per sequence)
//! With `h` KV heads, `dk` the per-head K dimension and `dv` the per-head V dimension:
//!
//! | format | bytes per token per layer |
//! |---|---|
//! | `f32` | `4·h·(dk + dv)` |
//! | `f16` | `2·h·(dk + dv)` |
//! | `k8v16` | `h·(dk + 2) + 2·h·dv`: K int8 with one fp16 scale per token per head, V fp16 |
//! | `int8` | `h·(dk + 2) + h·(dv + 2)`: K and V int8, one fp16 scale per token per head each |
//! | `int4g32` | `h·(⌈dk/32⌉ + ⌈dv/32⌉)·18`: 4-bit values in groups of 32 along the head dim, one fp16 scale per group |
//! | `kivi4` | per token, V as `int4g32`; K see below |
//!
//! Every format but `kivi4` stores whole tokens, so bytes for `n` tokens are exactly `n ×` the
//! per-token bytes: `kv_bytes(spec, f, n) == kv_bytes_per_token(spec, f) * n`, which the
//! engine's cache reports for the tokens it holds.
//!
//! `kivi4` (after KIVI, Liu et al. 2024) quantizes keys **per channel**: outlier channels of K
//! then get their own scale instead of inflating every token's. A channel's scale needs several
//! tokens, so K is held in blocks of [`KIVI_BLOCK`] = 32 tokens: per block and head,
//! `32·⌈dk/32⌉·16` bytes of nibbles (each token's dk values in the `int4g32` nibble order) plus
//! an fp16 scale and an fp16 minimum per channel (`4·dk`; `x ≈ n·s + m`, n ∈ 0..15). The newest
//! `n mod 32` tokens wait in f16 (`2·dk` each) until their block is full. So for `n` tokens one
//! head holds `⌊n/32⌋·(512·⌈dk/32⌉ + 4·dk) + (n mod 32)·2·dk` bytes of K, exactly, and
//! [`kv_bytes`] is the function to use; [`kv_bytes_per_token`] gives the cost per token of full
//! blocks, `⌈(512·⌈dk/32⌉ + 4·dk)/32⌉` per head for K (exact when 8 divides dk).

//!
//! # A quantizer's file: [`LayerMix`]
//! A runtime's quantizer may not store every matrix of a "q4_k" file in q4_k. llama.cpp's
//! `llama-quantize` (`src/llama-quant.cpp`, `llama_tensor_get_type_impl` and
//! `tensor_type_fallback`), which writes the published GGUF files, does two things the layer
//! format alone does not say:
//! - **more bits where it matters** (Q4_K_M, Q5_K_M: the files published as "q4_k" / "q5_k"):
//!   `attn_v` and `ffn_down` of the layers `use_more_bits(i, n)` picks — the first and last
//!   eighth of the `n` layers and every third in between,
//!   `i < n/8 || i >= 7n/8 || (i − n/8) % 3 == 2` (integer division), about half of them — in
//!   Q6_K;
//! - **a fallback for rows that do not fill a super-block**: a Q4_K / Q5_K / Q6_K matrix whose
//!   input width is not a multiple of 256 is stored as Q5_0 / Q5_1 / Q8_0 (32-wide blocks), a
//!   Q2_K / Q3_K one as Q4_0;
//! - **the low-bit recipes** ([`KQuantRecipe`]; files published as "Q3_K_M" and "Q2_K", which
//!   the estimator names by their layer format `q3_k` / `q2_k`): Q3_K_M keeps `attn_v` in Q5_K
//!   in the first two layers and Q4_K in the others, `ffn_down` in Q5_K in the first sixteenth
//!   of the layers and Q4_K in the others, and `attn_output` in Q4_K; Q2_K keeps `ffn_down` and
//!   `attn_output` in Q3_K and `attn_v` in Q4_K when a KV head serves at least 4 query heads,
//!   else Q3_K (`llama_tensor_get_type_impl` in `src/llama-quant.cpp`, its branches for models
//!   that are not Falcon, not mixtures of experts and quantized without an importance matrix).
//!   Phi-3's fused `attn_qkv` takes the `attn_v` rule whole in llama.cpp; the estimator sizes
//!   its q and k rows in the layer format.
//!
//! [`LayerMix`] carries both; the runtime profile says when they apply
//! ([`crate::runtime::RuntimeProfile::layer_mix`]), and weight bytes and the decode's bytes
//! follow it matrix by matrix ([`crate::memory::weight_bytes_mixed`], [`crate::latency`]).

use serde::{Deserialize, Serialize};

use crate::macros::named_enum;
use crate::spec::{LayerSpec, ModelSpec};

named_enum! {
    /// How weight matrices are stored. See the module docs for each layout.
    WeightFormat, "weight format" {
        /// 32-bit float.
        F32 = "f32",
        /// IEEE half.
        F16 = "f16",
        /// bfloat16.
        Bf16 = "bf16",
        /// int8 with one fp16 scale per output row.
        Int8 = "int8",
        /// 4-bit symmetric, fp16 scale per group of 32 inputs.
        W4g32 = "w4g32",
        /// 4-bit symmetric, fp16 scale per group of 64 inputs.
        W4g64 = "w4g64",
        /// 4-bit symmetric, fp16 scale per group of 128 inputs.
        W4g128 = "w4g128",
        /// ggml Q4_0.
        Q4_0 = "q4_0",
        /// ggml Q4_1.
        Q4_1 = "q4_1",
        /// ggml Q5_0.
        Q5_0 = "q5_0",
        /// ggml Q5_1.
        Q5_1 = "q5_1",
        /// ggml Q8_0.
        Q8_0 = "q8_0",
        /// ggml Q2_K (as llama.cpp's Q2_K recipe under its runtime).
        Q2K = "q2_k",
        /// ggml Q3_K (as llama.cpp's Q3_K_M recipe under its runtime).
        Q3K = "q3_k",
        /// ggml Q4_K.
        Q4K = "q4_k",
        /// ggml Q5_K.
        Q5K = "q5_k",
        /// ggml Q6_K.
        Q6K = "q6_k",
    }
}

impl WeightFormat {
    /// `(block_len, bytes_per_block)` along a row; a row of `c` values costs
    /// `⌈c / block_len⌉ · bytes_per_block`. Plain formats have block length 1, `int8` is
    /// handled separately (its scale is per row).
    const fn block(self) -> (u64, u64) {
        match self {
            WeightFormat::F32 => (1, 4),
            WeightFormat::F16 | WeightFormat::Bf16 => (1, 2),
            WeightFormat::Int8 => (1, 1),
            WeightFormat::W4g32 => (32, 16 + 2),
            WeightFormat::W4g64 => (64, 32 + 2),
            WeightFormat::W4g128 => (128, 64 + 2),
            WeightFormat::Q4_0 => (32, 18),
            WeightFormat::Q4_1 => (32, 20),
            WeightFormat::Q5_0 => (32, 22),
            WeightFormat::Q5_1 => (32, 24),
            WeightFormat::Q8_0 => (32, 34),
            WeightFormat::Q2K => (256, 84),
            WeightFormat::Q3K => (256, 110),
            WeightFormat::Q4K => (256, 144),
            WeightFormat::Q5K => (256, 176),
            WeightFormat::Q6K => (256, 210),
        }
    }

    /// Bytes of one row of `cols` weights: `⌈cols/B⌉·bytes_per_block`, plus 2 bytes (the fp16
    /// row scale) for `int8`. Saturates at `u64::MAX` instead of overflowing (no real shape
    /// comes near; [`ModelSpec::validate`] bounds every dimension).
    pub fn row_bytes(self, cols: u64) -> u64 {
        let (b, bytes) = self.block();
        let body = cols.div_ceil(b).saturating_mul(bytes);
        if self == WeightFormat::Int8 {
            body.saturating_add(2)
        } else {
            body
        }
    }

    /// Bytes of a `rows × cols` matrix (rows = output features, groups along cols), scales
    /// included: `rows · row_bytes(cols)`. This is the number the engine allocates.
    ///
    /// ```
    /// use edgefit_estimate::WeightFormat;
    /// // 576×1536 in w4g32: 576 rows × 48 groups × (16 + 2) bytes.
    /// assert_eq!(WeightFormat::W4g32.matrix_bytes(576, 1536), 576 * 48 * 18);
    /// ```
    pub fn matrix_bytes(self, rows: u64, cols: u64) -> u64 {
        rows.saturating_mul(self.row_bytes(cols))
    }

    /// Nominal bits per weight when `cols` is a multiple of the block and large (the per-row
    /// `int8` scale is ignored): 32, 16, 16, 8, 4.5, 4.25, 4.125, 4.5, 5, 5.5, 6, 8.5, 2.625,
    /// 3.4375, 4.5, 5.5, 6.5625.
    pub fn bits_per_weight(self) -> f64 {
        let (b, bytes) = self.block();
        bytes as f64 * 8.0 / b as f64
    }

    /// The group length along the input dimension (1 for unblocked formats).
    pub fn group_len(self) -> u64 {
        self.block().0
    }

    /// The 32-wide format a 256-wide K-quant falls back to for rows its block does not fill
    /// (Q2_K, Q3_K → Q4_0, Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0; see
    /// [`WeightFormat::ggml_fallback`]); none for every other format.
    pub fn ggml_block_fallback(self) -> Option<WeightFormat> {
        match self {
            WeightFormat::Q2K | WeightFormat::Q3K => Some(WeightFormat::Q4_0),
            WeightFormat::Q4K => Some(WeightFormat::Q5_0),
            WeightFormat::Q5K => Some(WeightFormat::Q5_1),
            WeightFormat::Q6K => Some(WeightFormat::Q8_0),
            _ => None,
        }
    }

    /// The format ggml's quantizer stores a row of `cols` weights in when this one cannot hold
    /// it (`tensor_type_fallback` in llama.cpp's `src/llama-quant.cpp`): a 256-wide K-quant
    /// block needs `cols` to be a multiple of 256, else Q2_K, Q3_K → Q4_0, Q4_K → Q5_0, Q5_K →
    /// Q5_1, Q6_K → Q8_0 (and f16 where even a 32-wide block does not fit). Every other format:
    /// itself.
    pub fn ggml_fallback(self, cols: u64) -> WeightFormat {
        let Some(fallback) = self.ggml_block_fallback() else {
            return self;
        };
        if cols.is_multiple_of(self.group_len()) {
            self
        } else if cols.is_multiple_of(fallback.group_len()) {
            fallback
        } else {
            WeightFormat::F16
        }
    }
}

/// How a quantizer stores the matrices of a file whose layers are in one format (see the
/// module docs): `more_bits` for `attn_v` and `ffn_down` of the layers
/// [`LayerMix::use_more_bits`] picks, and whether 256-wide K-quant rows that do not fill a
/// block fall back ([`WeightFormat::ggml_fallback`]). The default is a pure file: every
/// matrix in the layer format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerMix {
    /// Format of `attn_v` and `ffn_down` in the layers [`LayerMix::use_more_bits`] picks.
    pub more_bits: Option<WeightFormat>,
    /// K-quant rows whose width is not a multiple of 256 are stored in their fallback format.
    pub block_fallback: bool,
    /// An untied token embedding's format where the file keeps it apart from the output head
    /// (llama.cpp: `token_embd` in the layers' format, `output` in Q6_K); `None`: the head's.
    pub token_embd: Option<WeightFormat>,
    /// The low-bit recipe of the file's layer format, if it has one (llama.cpp's Q3_K_M, Q2_K).
    pub recipe: Option<KQuantRecipe>,
}

/// llama.cpp's `llama-quantize` recipes for the low-bit K-quant files (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KQuantRecipe {
    /// Q3_K_M: layers in Q3_K, `attn_v` Q5_K (first two layers) / Q4_K, `ffn_down` Q5_K (first
    /// sixteenth) / Q4_K, `attn_output` Q4_K.
    Q3KM,
    /// Q2_K: layers in Q2_K, `ffn_down` and `attn_output` Q3_K, `attn_v` Q4_K when `gqa4` else
    /// Q3_K.
    Q2K {
        /// A KV head of the first layer serves at least 4 query heads (llama.cpp's
        /// `n_gqa() >= 4`).
        gqa4: bool,
    },
}

impl KQuantRecipe {
    /// The recipe of the files published in layer format `weights` (`q3_k`: Q3_K_M, `q2_k`:
    /// Q2_K), for a model with `heads` query heads over `kv_heads` KV heads in its first layer.
    pub fn for_format(weights: WeightFormat, heads: u32, kv_heads: u32) -> Option<KQuantRecipe> {
        match weights {
            WeightFormat::Q3K => Some(KQuantRecipe::Q3KM),
            WeightFormat::Q2K => Some(KQuantRecipe::Q2K {
                gqa4: kv_heads > 0 && heads / kv_heads >= 4,
            }),
            _ => None,
        }
    }

    /// The format of `matrix` in layer `layer` of `n_layers`; `None`: the layer format.
    fn format(self, matrix: BlockMatrix, layer: usize, n_layers: usize) -> Option<WeightFormat> {
        use WeightFormat::{Q3K, Q4K, Q5K};
        match (self, matrix) {
            (KQuantRecipe::Q3KM, BlockMatrix::V) => Some(if layer < 2 { Q5K } else { Q4K }),
            (KQuantRecipe::Q3KM, BlockMatrix::Down) => {
                Some(if layer < n_layers / 16 { Q5K } else { Q4K })
            }
            (KQuantRecipe::Q3KM, BlockMatrix::O) => Some(Q4K),
            (KQuantRecipe::Q2K { gqa4 }, BlockMatrix::V) => Some(if gqa4 { Q4K } else { Q3K }),
            (KQuantRecipe::Q2K { .. }, BlockMatrix::Down | BlockMatrix::O) => Some(Q3K),
            (_, BlockMatrix::Plain) => None,
        }
    }
}

/// A matrix of a transformer block, as a quantizer's recipe tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockMatrix {
    /// `q_proj`, `k_proj`, `gate_proj`, `up_proj`: the layer format.
    Plain,
    /// `v_proj` (`attn_v`).
    V,
    /// `o_proj` (`attn_output`).
    O,
    /// `down_proj` (`ffn_down`).
    Down,
}

impl LayerMix {
    /// llama.cpp's choice of the layers that get more bits in Q4_K_M / Q5_K_M: the first and
    /// last eighth of `n` layers and every third in between (`use_more_bits` in
    /// `src/llama-quant.cpp`; integer division as there).
    pub fn use_more_bits(layer: usize, n_layers: usize) -> bool {
        let (i, n) = (layer as i64, n_layers as i64);
        i < n / 8 || i >= 7 * n / 8 || (i - n / 8).rem_euclid(3) == 2
    }

    /// Layers of the same shape and class hold every matrix in the same format: the
    /// `use_more_bits` choice, and under Q3_K_M whether the layer is one of the first two and
    /// one of the first sixteenth (Q2_K's choices do not depend on the layer).
    pub fn class(&self, layer: usize, n_layers: usize) -> u8 {
        let more = self.more_bits.is_some() && Self::use_more_bits(layer, n_layers);
        let q3km = self.recipe == Some(KQuantRecipe::Q3KM);
        let first = q3km && layer < 2;
        let sixteenth = q3km && layer < n_layers / 16;
        u8::from(more) | (u8::from(first) << 1) | (u8::from(sixteenth) << 2)
    }

    /// The format `matrix` of layer `layer` (of `n_layers`) with `cols` inputs is stored in,
    /// for layers in `base`.
    pub fn format(
        &self,
        base: WeightFormat,
        matrix: BlockMatrix,
        layer: usize,
        n_layers: usize,
        cols: u64,
    ) -> WeightFormat {
        let recipe = self.recipe.and_then(|r| r.format(matrix, layer, n_layers));
        let f = match (recipe, matrix, self.more_bits) {
            (Some(f), _, _) => f,
            (None, BlockMatrix::V | BlockMatrix::Down, Some(more))
                if Self::use_more_bits(layer, n_layers) =>
            {
                more
            }
            _ => base,
        };
        if self.block_fallback {
            f.ggml_fallback(cols)
        } else {
            f
        }
    }
}

named_enum! {
    /// How the KV cache stores K and V. See the module docs for each layout.
    KvFormat, "KV format" {
        /// f32 K and V.
        F32 = "f32",
        /// f16 K and V.
        F16 = "f16",
        /// K int8 (fp16 scale per token per head), V f16: the hybrid cache.
        K8v16 = "k8v16",
        /// K and V int8, fp16 scale per token per head each.
        Int8 = "int8",
        /// K and V 4-bit in groups of 32 along the head dim, fp16 scale per group.
        Int4g32 = "int4g32",
        /// K 4-bit per channel in blocks of 32 tokens (fp16 scale and minimum per channel, the
        /// newest tokens f16 until their block fills), V as `int4g32` (KIVI-style).
        Kivi4 = "kivi4",
    }
}

/// The KV format edgefit runs and estimates with unless told otherwise: `int8` (K and V int8,
/// one fp16 scale per token per head). Chosen by measurement (`cargo xtask bench kv` on the
/// default model, the whole evaluation text): perplexity 9.686 against f32's 9.655 (+0.3%,
/// the same as the hybrid `k8v16`), next-token KL 2.2e-4 nats and 99.7% top-1 agreement over
/// 1,024 generated tokens, with 11,880 bytes per token: 32% less than `k8v16`, 48% less than
/// `f16`, 74% less than `f32`. `kivi4` holds 42% less again for +6.3% perplexity, the choice
/// for long contexts on small memories; `int4g32` costs +32%.
pub const DEFAULT_KV_FORMAT: KvFormat = KvFormat::Int8;

/// Tokens per block of `kivi4` keys (one scale and minimum per channel per block).
pub const KIVI_BLOCK: u64 = 32;

/// Bytes of one full block of `kivi4` keys for one head of `dk` channels.
fn kivi_block_bytes(dk: u64) -> u64 {
    KIVI_BLOCK * dk.div_ceil(32) * 16 + 4 * dk
}

/// Bytes of one K (or V) vector of `dim` values for one head and one token.
fn kv_vector_bytes(kind: KvPart, format: KvFormat, dim: u64) -> u64 {
    match (format, kind) {
        (KvFormat::F32, _) => 4 * dim,
        (KvFormat::F16, _) | (KvFormat::K8v16, KvPart::V) => 2 * dim,
        (KvFormat::K8v16, KvPart::K) | (KvFormat::Int8, _) => dim + 2,
        (KvFormat::Int4g32, _) | (KvFormat::Kivi4, KvPart::V) => dim.div_ceil(32) * 18,
        (KvFormat::Kivi4, KvPart::K) => kivi_block_bytes(dim).div_ceil(KIVI_BLOCK),
    }
}

/// Bytes of the K (or V) vectors of `tokens` tokens for one head: `tokens ×` the per-token
/// bytes, except `kivi4` keys (full blocks plus the f16 tail).
fn kv_part_bytes(kind: KvPart, format: KvFormat, dim: u64, tokens: u64) -> u64 {
    match (format, kind) {
        (KvFormat::Kivi4, KvPart::K) => (tokens / KIVI_BLOCK)
            .saturating_mul(kivi_block_bytes(dim))
            .saturating_add((tokens % KIVI_BLOCK) * 2 * dim),
        _ => kv_vector_bytes(kind, format, dim).saturating_mul(tokens),
    }
}

#[derive(Clone, Copy)]
enum KvPart {
    K,
    V,
}

impl KvFormat {
    /// Bytes that one token occupies in one layer of this shape:
    /// `kv_heads · (bytes(K vector of dk) + bytes(V vector of dv))`.
    pub fn layer_bytes_per_token(self, layer: &LayerSpec) -> u64 {
        let h = u64::from(layer.num_kv_heads);
        h * (kv_vector_bytes(KvPart::K, self, u64::from(layer.qk_head_dim))
            + kv_vector_bytes(KvPart::V, self, u64::from(layer.v_head_dim)))
    }

    /// Bytes of K alone for one token in one layer (the page shows K and V separately).
    pub fn layer_k_bytes_per_token(self, layer: &LayerSpec) -> u64 {
        u64::from(layer.num_kv_heads)
            * kv_vector_bytes(KvPart::K, self, u64::from(layer.qk_head_dim))
    }

    /// Bytes that `tokens` tokens occupy in one layer of this shape, exactly (for every format
    /// but `kivi4` this is `tokens × layer_bytes_per_token`).
    pub fn layer_bytes(self, layer: &LayerSpec, tokens: u64) -> u64 {
        let h = u64::from(layer.num_kv_heads);
        h.saturating_mul(
            kv_part_bytes(KvPart::K, self, u64::from(layer.qk_head_dim), tokens).saturating_add(
                kv_part_bytes(KvPart::V, self, u64::from(layer.v_head_dim), tokens),
            ),
        )
    }

    /// True if bytes for `n` tokens are exactly `n ×` the bytes per token (all but `kivi4`).
    pub fn is_linear(self) -> bool {
        self != KvFormat::Kivi4
    }

    /// Bytes of V alone for one token in one layer.
    pub fn layer_v_bytes_per_token(self, layer: &LayerSpec) -> u64 {
        u64::from(layer.num_kv_heads)
            * kv_vector_bytes(KvPart::V, self, u64::from(layer.v_head_dim))
    }
}

// Beside the KV formats rather than in `spec.rs`, so the spec needs nothing from this module.
impl LayerSpec {
    /// Tokens this layer's KV cache holds after `tokens` tokens, as the engine keeps them:
    /// all of them without a window; with window `w`, `min(tokens, w)` (a ring of `w` slots),
    /// except `kivi4`, whose keys are quantized in blocks of [`KIVI_BLOCK`] = 32 tokens
    /// and which drops a block (keys and values) once all of it has left the window:
    /// `tokens − 32 · ⌊max(0, tokens − w) / 32⌋` (between `w` and `w + 31` once full).
    pub fn held_tokens(&self, format: KvFormat, tokens: u64) -> u64 {
        match self.sliding_window.map(u64::from) {
            None => tokens,
            Some(w) if format == KvFormat::Kivi4 => {
                let b = KIVI_BLOCK;
                tokens - tokens.saturating_sub(w) / b * b
            }
            Some(w) => tokens.min(w),
        }
    }
}

/// KV-cache bytes per token for a whole model (one sequence): the sum over layers of
/// [`KvFormat::layer_bytes_per_token`]. For a uniform model this is
/// `L · h · (bytes(dk) + bytes(dv))`, e.g. f16: `2 · L · h · (dk + dv)`, which for
/// `dk = dv = d` is the textbook `2 (K and V) × layers × kv_heads × head_dim × 2 bytes`.
///
/// The engine's `KvCache` allocates with this function; the estimate uses it too.
pub fn kv_bytes_per_token(spec: &ModelSpec, format: KvFormat) -> u64 {
    spec.layers
        .iter()
        .map(|l| format.layer_bytes_per_token(l))
        .sum()
}

/// KV-cache bytes holding `tokens` tokens of one sequence, exactly: the sum over layers of
/// [`KvFormat::layer_bytes`] of the tokens each layer holds ([`LayerSpec::held_tokens`]: all,
/// or a sliding layer's window), which is `kv_bytes_per_token(spec, format) · tokens` for every
/// format but `kivi4` (whole blocks plus an f16 tail; see the module docs) when no layer
/// slides. Saturates rather than overflowing. The engine's cache reports this for the tokens
/// it holds.
pub fn kv_bytes(spec: &ModelSpec, format: KvFormat, tokens: u64) -> u64 {
    spec.layers.iter().fold(0u64, |a, l| {
        a.saturating_add(format.layer_bytes(l, l.held_tokens(format, tokens)))
    })
}

named_enum! {
    /// The dtype activations are held and multiplied in ("a16" = `f16`/`bf16`).
    ComputeDtype, "compute dtype" {
        /// f32 activations and math.
        F32 = "f32",
        /// f16 activations.
        F16 = "f16",
        /// bf16 activations.
        Bf16 = "bf16",
        /// int8 activations (w8a8 / w4a8 integer paths, e.g. an NPU's int8 units).
        Int8 = "int8",
    }
}

impl ComputeDtype {
    /// Bytes of one activation value.
    pub const fn bytes(self) -> u64 {
        match self {
            ComputeDtype::F32 => 4,
            ComputeDtype::F16 | ComputeDtype::Bf16 => 2,
            ComputeDtype::Int8 => 1,
        }
    }
}

named_enum! {
    /// Which engine of the SoC runs the model.
    ComputeUnit, "compute unit" {
        /// CPU cores.
        Cpu = "cpu",
        /// GPU.
        Gpu = "gpu",
        /// NPU / DSP / neural engine.
        Npu = "npu",
    }
}

#[cfg(test)]
mod tests {
    use super::WeightFormat;

    /// ggml's `sizeof(block_*)` and values per block, from `ggml-common.h`: every GGUF block
    /// format costs exactly its blocks.
    #[test]
    fn ggml_formats_cost_their_block_bytes() {
        let ggml = [
            (WeightFormat::Q4_0, 32, 2 + 16),
            (WeightFormat::Q4_1, 32, 2 + 2 + 16),
            (WeightFormat::Q5_0, 32, 2 + 4 + 16),
            (WeightFormat::Q5_1, 32, 2 + 2 + 4 + 16),
            (WeightFormat::Q8_0, 32, 2 + 32),
            (WeightFormat::Q2K, 256, 16 + 64 + 2 + 2),
            (WeightFormat::Q3K, 256, 32 + 64 + 12 + 2),
            (WeightFormat::Q4K, 256, 2 + 2 + 12 + 128),
            (WeightFormat::Q5K, 256, 2 + 2 + 12 + 32 + 128),
            (WeightFormat::Q6K, 256, 128 + 64 + 16 + 2),
        ];
        for (f, values, bytes) in ggml {
            assert_eq!(f.group_len(), values, "{f}");
            assert_eq!(f.matrix_bytes(3, 2 * values), 3 * 2 * bytes, "{f}");
            assert_eq!(
                f.bits_per_weight(),
                bytes as f64 * 8.0 / values as f64,
                "{f}"
            );
            assert_eq!(f.as_str().parse::<WeightFormat>().unwrap(), f);
        }
        assert_eq!(WeightFormat::Q5_0.bits_per_weight(), 5.5);
        assert_eq!(WeightFormat::Q5_1.bits_per_weight(), 6.0);
        assert_eq!(WeightFormat::Q5K.bits_per_weight(), 5.5);
    }
}
