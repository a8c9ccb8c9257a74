//! The shape of a LLaMA-family model, validated before any tensor is read.

use serde::Serialize;

use crate::error::{EngineError, Result};

/// Hyper-parameters of a LLaMA-family decoder (LLaMA, Mistral-style without sliding window,
/// SmolLM). Built by the loaders from GGUF metadata or an HF `config.json`, then
/// [`validate`](LlamaConfig::validate)d so later code can index without checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlamaConfig {
    /// Human-readable model name (from metadata; may be empty).
    pub name: String,
    /// Architecture tag from the file (`llama`, `mistral`).
    pub arch: String,
    pub n_layers: usize,
    pub hidden: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    /// Per-head dimension of queries, keys and values.
    pub head_dim: usize,
    /// MLP intermediate width.
    pub ffn: usize,
    pub vocab: usize,
    /// The longest sequence the model was trained for; the KV cache never exceeds it.
    pub context_length: usize,
    pub rope_base: f32,
    pub rms_eps: f32,
    /// Output head shares the token-embedding matrix.
    pub tied_embeddings: bool,
}

/// Upper bounds that keep a hostile header from asking for absurd allocations. They are far
/// above any model a phone or a browser tab can hold.
const MAX_LAYERS: usize = 512;
const MAX_HIDDEN: usize = 65_536;
const MAX_HEADS: usize = 1_024;
const MAX_HEAD_DIM: usize = 1_024;
const MAX_FFN: usize = 1 << 20;
const MAX_VOCAB: usize = 1 << 22;
const MAX_CONTEXT: usize = 1 << 24;

impl LlamaConfig {
    /// Query width: `n_heads × head_dim`.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Key/value width: `n_kv_heads × head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Number of parameters, counting a tied output head once.
    pub fn params(&self) -> u64 {
        let h = self.hidden as u64;
        let per_layer = 2 * h // two RMSNorm weights
            + h * self.q_dim() as u64 * 2 // q and o
            + h * self.kv_dim() as u64 * 2 // k and v
            + 3 * h * self.ffn as u64;
        let embed = self.vocab as u64 * h;
        let head = if self.tied_embeddings { 0 } else { embed };
        embed + head + h + self.n_layers as u64 * per_layer
    }

    /// The estimator's description of this shape, so a loaded model can be estimated exactly.
    pub fn to_spec(&self) -> edgefit_estimate::ModelSpec {
        let layer = edgefit_estimate::LayerSpec {
            num_heads: self.n_heads as u32,
            num_kv_heads: self.n_kv_heads as u32,
            qk_head_dim: self.head_dim as u32,
            v_head_dim: self.head_dim as u32,
            intermediate_size: self.ffn as u32,
        };
        edgefit_estimate::ModelSpec {
            name: if self.name.is_empty() {
                self.arch.clone()
            } else {
                self.name.clone()
            },
            family: if self.arch == "mistral" {
                edgefit_estimate::Family::Mistral
            } else {
                edgefit_estimate::Family::Llama
            },
            hidden_size: self.hidden as u32,
            vocab_size: self.vocab as u32,
            tie_word_embeddings: self.tied_embeddings,
            qkv_bias: false,
            o_bias: false,
            mlp_bias: false,
            norms_per_layer: 2,
            max_position_embeddings: Some(self.context_length as u32),
            layers: vec![layer; self.n_layers],
        }
    }

    /// Checks every dimension is positive, consistent and within sane bounds.
    pub fn validate(&self) -> Result<()> {
        let check = |what: &str, v: usize, max: usize| -> Result<()> {
            if v == 0 || v > max {
                return Err(EngineError::Config(format!(
                    "{what} = {v} is outside 1..={max}"
                )));
            }
            Ok(())
        };
        check("n_layers", self.n_layers, MAX_LAYERS)?;
        check("hidden", self.hidden, MAX_HIDDEN)?;
        check("n_heads", self.n_heads, MAX_HEADS)?;
        check("n_kv_heads", self.n_kv_heads, MAX_HEADS)?;
        check("head_dim", self.head_dim, MAX_HEAD_DIM)?;
        check("ffn", self.ffn, MAX_FFN)?;
        check("vocab", self.vocab, MAX_VOCAB)?;
        check("context_length", self.context_length, MAX_CONTEXT)?;
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(EngineError::Config(format!(
                "n_heads = {} is not a multiple of n_kv_heads = {} (grouped-query attention needs whole groups)",
                self.n_heads, self.n_kv_heads
            )));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(EngineError::Config(format!(
                "head_dim = {} is odd; RoPE rotates pairs",
                self.head_dim
            )));
        }
        if !(self.rope_base.is_finite() && self.rope_base > 1.0) {
            return Err(EngineError::Config(format!(
                "rope base = {} must be a finite number above 1",
                self.rope_base
            )));
        }
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0 && self.rms_eps < 1.0) {
            return Err(EngineError::Config(format!(
                "RMSNorm epsilon = {} must be in (0, 1)",
                self.rms_eps
            )));
        }
        Ok(())
    }
}
