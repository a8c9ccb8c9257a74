//! # edgefit-engine
//!
//! Owns running a real LLaMA-family model: loading it (GGUF through candle-core's reader, or the
//! HF layout of `config.json` + `tokenizer.json` + safetensors), its tokenizer (built with the
//! `tokenizers` crate from the file's own fields) and chat template, the forward pass (RMSNorm,
//! RoPE, grouped-query attention, SwiGLU, tied embeddings), the KV cache, sampling, and
//! generation one token at a time with measurements (load time, TTFT, prefill and decode
//! tokens/s, weight, KV and peak bytes).
//!
//! It exists so the page and the CLI show what a model *really* does next to what the estimator
//! predicts: the same engine runs natively and in the browser (wasm32, one thread). Linear
//! algebra goes through `edgefit-kernels`; time and memory readings come from an injected
//! [`Platform`], so nothing here reads a clock on its own.
//!
//! Weights load into the w4a16 format by default (4-bit weights with fp16 group scales, 16-bit
//! activations; GGUF Q4_0/Q4_1 tensors are kept without re-rounding), or f32/f16/int8 on request
//! ([`LoadOptions`]); the KV cache is f32 until issue 5 adds quantized formats.

pub mod config;
pub mod engine;
pub mod error;
pub mod export;
pub mod gguf;
pub mod hf;
pub mod kv_cache;
pub mod kv_eval;
pub mod microbench;
pub mod model;
/// The native [`Platform`] at its earlier path ([`platform::NativePlatform`]).
#[cfg(not(target_arch = "wasm32"))]
pub mod native {
    pub use crate::platform::{peak_rss_bytes, NativePlatform};
}
pub(crate) mod ops;
pub mod perplexity;
pub mod platform;
pub mod prune;
pub mod sampler;
pub mod synthetic;
pub mod tokenizer;
pub mod weights;

pub use config::LlamaConfig;
pub use engine::{
    Engine, FinishReason, GenerateOptions, Metrics, ModelInfo, PrefillProgress, PREFILL_CHUNK,
};
pub use error::{EngineError, Result};
pub use kv_cache::KvCache;
pub use kv_eval::{kv_eval, KvEvalOptions, KvEvalReport, KvFormatEval};
pub use model::{Logits, Model, ProbePoint};
pub use perplexity::{perplexity, perplexity_of_text, PerplexityOptions, PerplexityReport};
pub use platform::Platform;
pub use prune::{
    collect_stats, limits, prune, ActivationStats, Allocation, Calibration, Importance,
    LayerRatios, PruneLimits, PrunePlan, PruneReport,
};
pub use sampler::{Sampler, SamplerConfig};
pub use tokenizer::TextTokenizer;
pub use weights::{Conversion, LoadOptions, WeightsFormat, WeightsSummary};
