//! The shape of a decoder-only model, validated before any tensor is read, and the table of
//! the architectures the engine runs ([`ARCHS`]).
//!
//! Adding an architecture: one [`Arch`] entry (what its blocks have beyond the LLaMA block),
//! the tensors it adds in [`crate::weights::LayerPart`]'s table, and, for a new kind of
//! computation, a block helper in [`crate::model`] keyed by the feature (never by the name).

use serde::{Deserialize, Serialize};

use edgefit_estimate::{Family, RopeScaling};

use crate::error::{EngineError, Result};

fn is_unscaled(s: &RopeScaling) -> bool {
    *s == RopeScaling::None
}

/// What an architecture's blocks have beyond the LLaMA block (RMSNorm, q/k/v/o without bias,
/// RoPE, SwiGLU), as the loaders set them in [`LlamaConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    /// GGUF `general.architecture` and HF `model_type`.
    pub name: &'static str,
    /// The estimator's family (its parameter and byte arithmetic).
    pub family: Family,
    /// The HF `architectures` class an export names.
    pub hf_class: &'static str,
    /// Biases on q, k and v.
    pub qkv_bias: bool,
    /// RMSNorm over each head's q and k before RoPE (one `qk_dim` weight for q, one for k).
    pub qk_norm: bool,
    /// GGUF files keep q/k rows in HF's rotate-half order (llama.cpp's NEOX RoPE: its
    /// converter permutes q/k only for `llama`), so the GGUF loader permutes them too.
    pub gguf_rotate_half: bool,
}

/// Every architecture the engine runs.
pub const ARCHS: [Arch; 4] = [
    Arch {
        name: "llama",
        hf_class: "LlamaForCausalLM",
        family: Family::Llama,
        qkv_bias: false,
        qk_norm: false,
        gguf_rotate_half: false,
    },
    Arch {
        name: "mistral",
        hf_class: "MistralForCausalLM",
        family: Family::Mistral,
        qkv_bias: false,
        qk_norm: false,
        gguf_rotate_half: false,
    },
    Arch {
        name: "qwen2",
        hf_class: "Qwen2ForCausalLM",
        family: Family::Qwen2,
        qkv_bias: true,
        qk_norm: false,
        gguf_rotate_half: true,
    },
    Arch {
        name: "qwen3",
        hf_class: "Qwen3ForCausalLM",
        family: Family::Qwen3,
        qkv_bias: false,
        qk_norm: true,
        gguf_rotate_half: true,
    },
];

impl Arch {
    /// The entry named `name`, or [`EngineError::Unsupported`] listing the supported ones
    /// (`source` says where the name came from: "GGUF architecture", "config.json model_type").
    pub fn named(name: &str, source: &str) -> Result<Arch> {
        ARCHS
            .iter()
            .find(|a| a.name == name)
            .copied()
            .ok_or_else(|| {
                EngineError::Unsupported(format!(
                    "{source} `{name}` (supported: {})",
                    ARCHS.map(|a| a.name).join(", ")
                ))
            })
    }
}

/// Hyper-parameters of a decoder (LLaMA, Mistral-style without sliding window,
/// SmolLM). Built by the loaders from GGUF metadata or an HF `config.json`, then
/// [`validate`](LlamaConfig::validate)d so later code can index without checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlamaConfig {
    /// Human-readable model name (from metadata; may be empty).
    pub name: String,
    /// Architecture tag from the file, one of [`ARCHS`].
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
    /// How the RoPE frequencies are stretched (Llama 3.x, linear; see
    /// [`edgefit_estimate::RopeScaling`] for the formulas).
    #[serde(skip_serializing_if = "is_unscaled")]
    pub rope_scaling: RopeScaling,
    pub rms_eps: f32,
    /// Output head shares the token-embedding matrix.
    pub tied_embeddings: bool,
    /// Biases on q, k, v ([`Arch::qkv_bias`]).
    pub qkv_bias: bool,
    /// Per-head RMSNorm of q and k before RoPE ([`Arch::qk_norm`]).
    pub qk_norm: bool,
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
    /// Parameters of this block with hidden size `h` as a LLaMA block (two norms, q/k/v/o,
    /// gate/up/down; no biases or q/k norms: [`LlamaConfig::params`] counts those).
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

    /// RoPE frequency of every pair of an unpruned head: `θ^(−2i/d) / s_i` with the scaling's
    /// divisors `s_i` ([`RopeScaling::divisors`]).
    pub fn rope_inv_freq(&self) -> Result<Vec<f32>> {
        let d = self.head_dim;
        Ok(self
            .rope_divisors()?
            .iter()
            .enumerate()
            .map(|(i, s)| self.rope_base.powf(-(2.0 * i as f32) / d as f32) / s)
            .collect())
    }

    fn rope_divisors(&self) -> Result<Vec<f32>> {
        self.rope_scaling
            .divisors(self.rope_base, self.head_dim)
            .map_err(EngineError::Config)
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

    /// Number of parameters, counting a tied output head once: the estimator's count of
    /// [`to_spec`](Self::to_spec) (one formula for both).
    pub fn params(&self) -> u64 {
        self.to_spec().params().total
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
            family: self.arch().map_or(Family::Llama, |a| a.family),
            hidden_size: self.hidden as u32,
            vocab_size: self.vocab as u32,
            tie_word_embeddings: self.tied_embeddings,
            qkv_bias: self.qkv_bias,
            o_bias: false,
            mlp_bias: false,
            norms_per_layer: 2,
            qk_norm: self.qk_norm,
            max_position_embeddings: Some(self.context_length as u32),
            layers,
        }
    }

    /// The [`ARCHS`] entry of [`arch`](Self::arch).
    pub fn arch(&self) -> Result<Arch> {
        Arch::named(&self.arch, "architecture")
    }

    /// Checks every dimension is positive, consistent and within sane bounds, and the
    /// architecture is one the engine runs with the features it has.
    pub fn validate(&self) -> Result<()> {
        let arch = self.arch()?;
        if (arch.qkv_bias, arch.qk_norm) != (self.qkv_bias, self.qk_norm) {
            return Err(EngineError::Config(format!(
                "architecture `{}` has qkv_bias = {}, qk_norm = {}; the config says {}, {}",
                arch.name, arch.qkv_bias, arch.qk_norm, self.qkv_bias, self.qk_norm
            )));
        }
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
        self.rope_divisors()?;
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
