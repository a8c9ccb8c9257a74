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
//! Today weights are dequantized to f32 at load time and the KV cache is f32; issues 4 and 5
//! replace both with the w4a16 format and quantized KV caches.

pub mod config;
pub mod engine;
pub mod error;
pub mod gguf;
pub mod hf;
pub mod kv_cache;
pub mod microbench;
pub mod model;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
pub mod sampler;
pub mod synthetic;
pub mod tokenizer;

pub use config::LlamaConfig;
pub use engine::{Engine, FinishReason, GenerateOptions, Metrics, ModelInfo, Platform};
pub use error::{EngineError, Result};
pub use kv_cache::KvCache;
pub use model::{Logits, Model};
pub use sampler::{Sampler, SamplerConfig};
pub use tokenizer::TextTokenizer;
