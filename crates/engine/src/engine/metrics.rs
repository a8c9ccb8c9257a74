//! What the engine measures ([`Metrics`]): load time, TTFT, prefill and decode rates, weight,
//! KV and memory bytes, read from the injected [`Platform`].

use serde::Serialize;

use super::Engine;
use crate::model::Model;
use crate::platform::Platform;

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// The model produced a stop token.
    Stop,
    /// `max_tokens` were generated.
    Length,
}

/// Measurements of the model load and the latest generation.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Metrics {
    pub load_ms: f64,
    /// Tokens this turn fed through the model before the first generated one (the new part of
    /// the conversation when earlier turns are kept).
    pub prompt_tokens: usize,
    /// Tokens of earlier turns the KV cache already held and this turn did not recompute.
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    /// From `start` to the first generated token (tokenize + prefill + sample).
    pub ttft_ms: f64,
    /// Prompt tokens per second of the prefill forward pass.
    pub prefill_tok_s: f64,
    /// Generated tokens after the first, per second of decoding them.
    pub decode_tok_s: f64,
    pub weights_bytes: u64,
    /// The linear layers' weight format (`w4g32`, `f32`, ...).
    pub weights: String,
    /// The embedding / output head's format.
    pub embedding: String,
    /// The kernel the matrix products ran on (`simd128`, `avx2`, `portable`, `scalar`).
    pub kernel: String,
    /// Threads the matrix products and attention heads were split across.
    pub threads: usize,
    /// The KV cache's format (`f32`, `f16`, `k8v16`, `int8`, `int4g32`).
    pub kv_format: String,
    /// Tokens the KV cache holds.
    pub kv_tokens: usize,
    /// Bytes of KV cache holding the tokens held, scales included: exactly
    /// `kv_bytes_per_token(spec, kv_format) × kv_tokens` of the estimator.
    pub kv_bytes: u64,
    /// Bytes of KV cache allocated.
    pub kv_reserved_bytes: u64,
    /// The most tokens the KV cache may hold (the model's context): a turn that would need more
    /// fails with "context full" (see [`Engine::start`]).
    pub kv_limit: usize,
    pub peak_bytes: u64,
    /// Heap in use when the metrics were last read ([`Platform::heap_bytes`]); absent where the
    /// platform does not count it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heap_bytes: Option<u64>,
    pub finish_reason: Option<FinishReason>,
    /// Milliseconds of each decode step (forward + sample), in order.
    pub token_ms: Vec<f64>,
    /// The latest [`Engine::warm_up`] of this model (kept across generations); absent before
    /// the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_up: Option<super::WarmUp>,
}

impl Engine {
    /// Measurements so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub(super) fn refresh_kv(&mut self) {
        self.metrics.kv_limit = self.cache.max_tokens();
        self.metrics.kv_tokens = self.cache.len();
        self.metrics.kv_bytes = self.cache.bytes();
        self.metrics.kv_reserved_bytes = self.cache.reserved_bytes();
    }
}

impl Metrics {
    /// Empty measurements naming `model`'s weights and kernel.
    /// Reads the platform's memory figures: the peak, and the heap in use.
    pub(super) fn read_memory(&mut self, platform: &dyn Platform) {
        self.peak_bytes = platform.peak_bytes();
        self.heap_bytes = platform.heap_bytes();
    }

    pub(super) fn for_model(model: &Model) -> Metrics {
        Metrics {
            weights_bytes: model.weights.bytes(),
            weights: model.weights.linear_format_name(),
            embedding: model.weights.embedding_format_name(),
            kernel: model.kernel.name().to_string(),
            threads: model.pool.threads(),
            kv_format: model.kv_format.to_string(),
            ..Metrics::default()
        }
    }
}

pub(super) fn rate(tokens: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        tokens as f64 * 1000.0 / ms
    } else {
        0.0
    }
}
