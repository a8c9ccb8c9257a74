//! Memory accounting by component.
//!
//! Formulas (bytes; `b` = batch, `a` = activation bytes of the compute dtype):
//! - weights = Σ over matrices of [`WeightFormat::matrix_bytes`] (rows = out, cols = in) in the
//!   format the runtime's file holds each in ([`LayerMix`]: llama.cpp's Q4_K_M keeps `attn_v` and
//!   `ffn_down` of about half the layers in Q6_K), norms (q/k norms too) and biases in f32 (`4·n`); embedding
//!   and output head in the embedding format (an untied token embedding in the mix's
//!   `token_embd` format where it has one: llama.cpp keeps it in the layers' format);
//! - KV = [`crate::kv_bytes`]`(context)` × b (the cache is sized for the full context; for every
//!   format but `kivi4` that is `kv_bytes_per_token × context`);
//! - activations (peak, during the last prefill chunk of `n` tokens after `p` cached ones) =
//!   `b · max over layers of max(attention, MLP)` + logits, with
//!   attention = `a·n·(2d + H·dk + Hkv·dk + Hkv·dv + H·dv) + 4·H·n·(p + n)` (f32 scores of the
//!   chunk, materialised), MLP = `a·n·(2d + 2I)` (residual, normed input, gate and up outputs),
//!   logits = `4·b·V` (last position only);
//! - runtime overhead: the device profile's figure;
//! - loader duplication: the whole file for [`Loader::Copy`], one chunk for
//!   [`Loader::Chunked`], 0 for [`Loader::Mmap`];
//! - fragmentation = profile fraction × (weights + KV);
//! - total = the sum; it must fit the device's usable memory (and the wasm limit for what lives
//!   in wasm: weights + KV + activations + fragmentation).

use serde::{Deserialize, Serialize};

use crate::deploy::Loader;
use crate::format::{
    kv_bytes, kv_bytes_per_token, BlockMatrix, ComputeDtype, KvFormat, LayerMix, WeightFormat,
};
use crate::spec::ModelSpec;

/// Weight bytes by component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentBytes {
    /// Token embedding.
    pub embedding: u64,
    /// q, k, v, o (and biases) over all layers.
    pub attention: u64,
    /// gate, up, down (and biases) over all layers.
    pub mlp: u64,
    /// All norm weights.
    pub norms: u64,
    /// Output head (0 when tied).
    pub lm_head: u64,
}

impl ComponentBytes {
    /// The sum.
    pub fn total(&self) -> u64 {
        self.embedding + self.attention + self.mlp + self.norms + self.lm_head
    }
}

/// Weight bytes of `spec` with linear layers in `linear` and embedding/head in `embedding`.
pub fn weight_bytes(
    spec: &ModelSpec,
    linear: WeightFormat,
    embedding: WeightFormat,
) -> ComponentBytes {
    weight_bytes_mixed(spec, linear, LayerMix::default(), embedding)
}

/// [`weight_bytes`] of a file whose quantizer stores some matrices of its `linear` layers in
/// other formats ([`LayerMix`]: llama.cpp's Q4_K_M `attn_v` / `ffn_down` in Q6_K, K-quant
/// rows that do not fill a 256-wide block in their fallback).
pub fn weight_bytes_mixed(
    spec: &ModelSpec,
    linear: WeightFormat,
    mix: LayerMix,
    embedding: WeightFormat,
) -> ComponentBytes {
    let d = u64::from(spec.hidden_size);
    let v = u64::from(spec.vocab_size);
    let n = spec.layers.len();
    let mut attention = 0;
    let mut mlp = 0;
    for (li, l) in spec.layers.iter().enumerate() {
        let i = u64::from(l.intermediate_size);
        let fmt = |m, cols| mix.format(linear, m, li, n, cols);
        attention += fmt(BlockMatrix::Plain, d).matrix_bytes(l.q_dim(), d)
            + fmt(BlockMatrix::Plain, d).matrix_bytes(l.k_dim(), d)
            + fmt(BlockMatrix::V, d).matrix_bytes(l.v_dim(), d)
            + fmt(BlockMatrix::O, l.o_in_dim()).matrix_bytes(d, l.o_in_dim());
        if spec.qkv_bias {
            attention += 4 * (l.q_dim() + l.k_dim() + l.v_dim());
        }
        if spec.o_bias {
            attention += 4 * d;
        }
        mlp += 2 * fmt(BlockMatrix::Plain, d).matrix_bytes(i, d)
            + fmt(BlockMatrix::Down, i).matrix_bytes(d, i);
        if spec.mlp_bias {
            mlp += 4 * (2 * i + d);
        }
    }
    // f32 norm weights (q/k norms included).
    let norms = 4 * spec.norm_params();
    let emb = embedding.matrix_bytes(v, d);
    let (token_embd, lm_head) = match (spec.tie_word_embeddings, mix.token_embd) {
        (true, _) => (emb, 0),
        (false, Some(f)) => (f.matrix_bytes(v, d), emb),
        (false, None) => (emb, emb),
    };
    ComponentBytes {
        embedding: token_embd,
        attention,
        mlp,
        norms,
        lm_head,
    }
}

/// Bytes of one activation value held in `dtype` (int8 compute keeps a 16-bit residual).
pub fn activation_bytes_per_value(dtype: ComputeDtype) -> u64 {
    dtype.bytes().max(2)
}

/// Peak transient activation bytes (see the module docs) for a prefill in chunks of `chunk`
/// tokens over a prompt of `prompt` tokens, `batch` sequences.
pub fn peak_activation_bytes(
    spec: &ModelSpec,
    dtype: ComputeDtype,
    prompt: u64,
    chunk: u64,
    batch: u64,
) -> u64 {
    let a = activation_bytes_per_value(dtype);
    let d = u64::from(spec.hidden_size);
    let n = chunk.min(prompt).max(1);
    // The last chunk sees the most cached tokens.
    let last_n = match prompt % n {
        0 => n,
        r => r,
    };
    let past = prompt - last_n;
    let mut peak = 0;
    for l in &spec.layers {
        let h = u64::from(l.num_heads);
        // The largest chunk (n) and the latest one (past + last_n) bound the scores together.
        let scores = 4 * h * n * (past + last_n);
        let attn = a * n * (2 * d + l.q_dim() + l.k_dim() + l.v_dim() + l.o_in_dim()) + scores;
        let mlp = a * n * (2 * d + 2 * u64::from(l.intermediate_size));
        peak = peak.max(attn).max(mlp);
    }
    batch * peak + 4 * batch * u64::from(spec.vocab_size)
}

/// Memory side of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// All weights, scales included.
    pub weights_bytes: u64,
    /// By component.
    pub weights_by_component: ComponentBytes,
    /// Average bits per parameter actually stored (weights_bytes·8 / params).
    pub weights_bits_per_param: f64,
    /// KV-cache bytes per token (all layers, one sequence).
    pub kv_bytes_per_token: u64,
    /// KV-cache bytes at full context for the whole batch.
    pub kv_bytes: u64,
    /// Tokens the KV cache is sized for (the context).
    pub kv_tokens: u64,
    /// Peak transient activations.
    pub activations_bytes: u64,
    /// Runtime, libraries and app besides the model.
    pub runtime_overhead_bytes: u64,
    /// Second copy held while loading.
    pub loader_duplication_bytes: u64,
    /// Fragmentation allowance.
    pub fragmentation_bytes: u64,
    /// The sum of the above.
    pub total_bytes: u64,
    /// What the device gives one app.
    pub usable_bytes: u64,
    /// What must live inside wasm linear memory, when the device is a browser.
    pub wasm_bytes: Option<u64>,
    /// The wasm limit, when the device is a browser.
    pub wasm_limit_bytes: Option<u64>,
    /// total ≤ usable (and wasm ≤ limit).
    pub fits: bool,
}

/// Inputs to [`memory_report`], resolved from the deployment and the device.
#[derive(Clone, Copy, Debug)]
pub struct MemoryInputs {
    /// Linear-layer format.
    pub weights: WeightFormat,
    /// Embedding / head format.
    pub embedding: WeightFormat,
    /// How the runtime's files store some layer matrices in other formats.
    pub mix: LayerMix,
    /// KV format.
    pub kv: KvFormat,
    /// Compute dtype.
    pub compute: ComputeDtype,
    /// Context the cache is sized for.
    pub context: u64,
    /// Prompt tokens.
    pub prompt: u64,
    /// Prefill chunk.
    pub chunk: u64,
    /// Batch.
    pub batch: u64,
    /// Loader.
    pub loader: Loader,
    /// Loader chunk bytes.
    pub loader_chunk_bytes: u64,
    /// Runtime overhead bytes.
    pub runtime_overhead_bytes: u64,
    /// Fragmentation fraction.
    pub fragmentation: f64,
    /// Usable bytes.
    pub usable_bytes: u64,
    /// wasm limit.
    pub wasm_limit_bytes: Option<u64>,
}

/// Computes the memory report (formulas in the module docs).
pub fn memory_report(spec: &ModelSpec, m: &MemoryInputs) -> MemoryReport {
    let by = weight_bytes_mixed(spec, m.weights, m.mix, m.embedding);
    let weights = by.total();
    let per_tok = kv_bytes_per_token(spec, m.kv);
    let kv = kv_bytes(spec, m.kv, m.context).saturating_mul(m.batch);
    let act = peak_activation_bytes(spec, m.compute, m.prompt, m.chunk, m.batch);
    let loader = match m.loader {
        Loader::Mmap => 0,
        Loader::Chunked => m.loader_chunk_bytes.min(weights),
        Loader::Copy => weights,
    };
    let frag = (m.fragmentation * weights.saturating_add(kv) as f64).round() as u64;
    let in_model = weights
        .saturating_add(kv)
        .saturating_add(act)
        .saturating_add(frag);
    let total = in_model
        .saturating_add(m.runtime_overhead_bytes)
        .saturating_add(loader);
    let wasm_bytes = m.wasm_limit_bytes.map(|_| in_model);
    let fits = total <= m.usable_bytes
        && match (wasm_bytes, m.wasm_limit_bytes) {
            (Some(w), Some(l)) => w <= l,
            _ => true,
        };
    let params = spec.params().total;
    MemoryReport {
        weights_bytes: weights,
        weights_by_component: by,
        weights_bits_per_param: weights as f64 * 8.0 / params as f64,
        kv_bytes_per_token: per_tok,
        kv_bytes: kv,
        kv_tokens: m.context,
        activations_bytes: act,
        runtime_overhead_bytes: m.runtime_overhead_bytes,
        loader_duplication_bytes: loader,
        fragmentation_bytes: frag,
        total_bytes: total,
        usable_bytes: m.usable_bytes,
        wasm_bytes,
        wasm_limit_bytes: m.wasm_limit_bytes,
        fits,
    }
}
