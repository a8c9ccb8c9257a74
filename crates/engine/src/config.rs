//! The shape of a LLaMA-family model, validated before any tensor is read.

use serde::{Deserialize, Serialize};

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
    /// Per-layer shapes of a structurally pruned model; `None` = every layer has the shape the
    /// fields above give. With it, `n_layers == layers.len()`, and `n_heads`, `n_kv_heads`,
    /// `head_dim`, `ffn` keep the unpruned model's values: `head_dim` still sets the RoPE
    /// frequencies and the attention scale `1/√head_dim`, so a pruned head scores exactly as
    /// the sum of its kept dimensions did before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<Vec<LayerShape>>,
}

/// The shape of one transformer block. Q and K heads have `qk_dim = 2 · rope_pairs.len()`
/// dimensions: pair `j` is the element pair `(2j, 2j+1)` and rotates with the frequency of the
/// unpruned head's pair `rope_pairs[j]`. V heads (and the output projection's input per head)
/// have `v_dim` dimensions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub qk_dim: usize,
    pub v_dim: usize,
    pub ffn: usize,
    pub rope_pairs: Vec<u16>,
}

impl LayerShape {
    /// Query width `n_heads × qk_dim`.
    pub fn q_width(&self) -> usize {
        self.n_heads * self.qk_dim
    }
    /// Key width `n_kv_heads × qk_dim`.
    pub fn k_width(&self) -> usize {
        self.n_kv_heads * self.qk_dim
    }
    /// Value width `n_kv_heads × v_dim`.
    pub fn v_width(&self) -> usize {
        self.n_kv_heads * self.v_dim
    }
    /// Attention output width (the output projection's input) `n_heads × v_dim`.
    pub fn o_width(&self) -> usize {
        self.n_heads * self.v_dim
    }
    /// Parameters of this block with hidden size `h` (two norms, q/k/v/o, gate/up/down).
    pub fn params(&self, h: usize) -> u64 {
        let h = h as u64;
        2 * h
            + h * (self.q_width() + self.k_width() + self.v_width() + self.o_width()) as u64
            + 3 * h * self.ffn as u64
    }
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

    /// The unpruned block shape the global fields describe.
    pub fn uniform_layer(&self) -> LayerShape {
        LayerShape {
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            qk_dim: self.head_dim,
            v_dim: self.head_dim,
            ffn: self.ffn,
            rope_pairs: (0..(self.head_dim / 2) as u16).collect(),
        }
    }

    /// Every block's shape, in order.
    pub fn layer_shapes(&self) -> Vec<LayerShape> {
        match &self.layers {
            Some(l) => l.clone(),
            None => vec![self.uniform_layer(); self.n_layers],
        }
    }

    /// Number of parameters, counting a tied output head once.
    pub fn params(&self) -> u64 {
        let h = self.hidden as u64;
        let embed = self.vocab as u64 * h;
        let head = if self.tied_embeddings { 0 } else { embed };
        let blocks: u64 = self
            .layer_shapes()
            .iter()
            .map(|l| l.params(self.hidden))
            .sum();
        embed + head + h + blocks
    }

    /// The estimator's description of this shape, so a loaded model can be estimated exactly.
    pub fn to_spec(&self) -> edgefit_estimate::ModelSpec {
        let layers = self
            .layer_shapes()
            .iter()
            .map(|l| edgefit_estimate::LayerSpec {
                num_heads: l.n_heads as u32,
                num_kv_heads: l.n_kv_heads as u32,
                qk_head_dim: l.qk_dim as u32,
                v_head_dim: l.v_dim as u32,
                intermediate_size: l.ffn as u32,
            })
            .collect();
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
            layers,
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
        if let Some(layers) = &self.layers {
            if layers.len() != self.n_layers {
                return Err(EngineError::Config(format!(
                    "{} layer shapes for n_layers = {}",
                    layers.len(),
                    self.n_layers
                )));
            }
            for (i, l) in layers.iter().enumerate() {
                self.validate_layer(i, l)?;
            }
        }
        Ok(())
    }

    /// Checks one block's shape against the unpruned one: no dimension grows, GQA groups stay
    /// whole, RoPE pairs are distinct original pairs in increasing order.
    fn validate_layer(&self, i: usize, l: &LayerShape) -> Result<()> {
        let bad = |what: String| Err(EngineError::Config(format!("layer {i}: {what}")));
        for (what, v, max) in [
            ("n_heads", l.n_heads, self.n_heads),
            ("n_kv_heads", l.n_kv_heads, self.n_kv_heads),
            ("qk_dim", l.qk_dim, self.head_dim),
            ("v_dim", l.v_dim, self.head_dim),
            ("ffn", l.ffn, self.ffn),
        ] {
            if v == 0 || v > max {
                return bad(format!("{what} = {v} is outside 1..={max}"));
            }
        }
        if !l.n_heads.is_multiple_of(l.n_kv_heads) {
            return bad(format!(
                "n_heads = {} is not a multiple of n_kv_heads = {}",
                l.n_heads, l.n_kv_heads
            ));
        }
        if l.qk_dim != 2 * l.rope_pairs.len() {
            return bad(format!(
                "qk_dim = {} but {} RoPE pairs",
                l.qk_dim,
                l.rope_pairs.len()
            ));
        }
        let half = self.head_dim / 2;
        if l.rope_pairs.windows(2).any(|w| w[0] >= w[1])
            || l.rope_pairs.iter().any(|&p| p as usize >= half)
        {
            return bad(format!(
                "RoPE pairs must be increasing and below {half}: {:?}",
                l.rope_pairs
            ));
        }
        Ok(())
    }
}
