//! # edgefit-engine
//!
//! Owns running a real decoder-only model (the LLaMA family and the other architectures of
//! [`config::ARCHS`]): loading it (GGUF through candle-core's reader, or the HF layout of
//! `config.json` + `tokenizer.json` + safetensors), its tokenizer (built with the `tokenizers`
//! crate from the file's own fields) and chat template, the forward pass (RMSNorm, RoPE,
//! grouped-query attention, gated MLP, tied embeddings), the KV cache, sampling, and generation
//! one token at a time with measurements (load time, TTFT, prefill and decode tokens/s,
//! weight, KV and peak bytes); and what is built on those: perplexity, the KV formats'
//! accuracy, structured pruning, export to GGUF and HF files, and the micro-benchmarks of the
//! `this-browser` device profile.
//!
//! It exists so the page and the CLI show what a model *really* does next to what the estimator
//! predicts: the same engine runs natively and in the browser (wasm32). Linear algebra goes
//! through `edgefit-kernels`; time and memory readings come from an injected [`Platform`], so
//! nothing here reads a clock on its own.
//!
//! Weights load into the w4a16 format by default (4-bit weights with fp16 group scales, 16-bit
//! activations; GGUF Q4_0/Q4_1 tensors are kept without re-rounding), or f32/f16/int8 on request
//! ([`LoadOptions`]); the KV cache holds any of the estimator's KV formats (f32, f16, k8v16,
//! int8, int4g32, kivi4; [`KvCache`]), [`edgefit_estimate::DEFAULT_KV_FORMAT`] for generation
//! unless [`Engine::set_kv_format`] says otherwise.
//!
//! # Modules
//! | module | what |
//! |---|---|
//! | `engine/` | [`Engine`]: the lifecycle (load, settings, calibration, prune and restore) in `mod.rs`; one generation in `session.rs`, kept turns in `conversation.rs`, [`Metrics`] in `metrics.rs` |
//! | [`config`] | a model's shape, validated before any tensor is read, and the architecture table |
//! | `gguf/`, [`hf`] | the two loaders ([`gguf`]: loading in `mod.rs`; header fields in `metadata.rs`, one tensor in `tensor.rs`, header-only reads in `header.rs`, the untrusted-input prescan and caps in `prescan.rs`) |
//! | `weights/` | [`weights`]: the held model and one weight-assembly routine in `mod.rs`; formats and the keep-or-convert rule in `format.rs`, a tensor as read in `raw.rs`, conversions in `convert.rs`, the memory preflight in `memory.rs` |
//! | [`tensors`] | a leaf: the tensor table ([`tensors::LayerPart`], [`tensors::TensorRole`]) and their GGUF / HF names, read by `config` and `weights` alike |
//! | [`tokenizer`] | text ↔ token ids and the chat template |
//! | [`model`] | the forward pass |
//! | [`kv_cache`] | the KV cache in every KV format, with the attention products that read them |
//! | [`sampler`] | greedy, temperature, top-p |
//! | [`perplexity`](mod@perplexity), [`kv_eval`](mod@kv_eval) | quality measurements: perplexity, the KV formats against f32 |
//! | `prune/` | structured pruning ([`prune()`]): plan checks, calibration statistics and the stepper the page runs, scores, allocation, layer surgery |
//! | [`export`] | writing a (pruned) model as GGUF or HF files |
//! | [`microbench`] | the probes of the `this-browser` device profile |
//! | [`synthetic`] | a tiny random model, as GGUF and HF files, for tests |
//! | [`platform`], `ops`, [`error`] | leaves: the clock and memory readings, the numeric helpers, the error type |
//!
//! No module imports itself through a cycle (`tests/it/layering.rs` reads the `crate::` paths;
//! the leaves `error`, `ops`, `platform` and `tensors` import no other module).

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
pub mod tensors;
pub mod tokenizer;
pub mod weights;

pub use config::LlamaConfig;
pub use engine::{
    Engine, FinishReason, GenerateOptions, Metrics, ModelInfo, PrefillProgress, WarmUp,
    PREFILL_CHUNK,
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
