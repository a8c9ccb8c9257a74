//! The shape of a decoder-only model, validated before any tensor is read, and the table of
//! the architectures the engine runs ([`ARCHS`]).
//!
//! Adding an architecture: one [`Arch`] entry (what its blocks have beyond the LLaMA block),
//! the tensors it adds in [`crate::tensors::LayerPart`]'s table, and, for a new kind of
//! computation, a block helper in [`crate::model`] keyed by the feature (never by the name).

use serde::{Deserialize, Serialize};

use edgefit_estimate::{Family, RopeScaling};

use crate::error::{EngineError, Result};
use crate::tensors::LayerPart;

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_unscaled(s: &RopeScaling) -> bool {
    *s == RopeScaling::None
}

/// The MLP's gate activation: `down(act(gate(x)) · up(x))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// SwiGLU: `silu(x) = x / (1 + e^−x)`.
    #[default]
    Silu,
    /// GeGLU with the tanh approximation (HF `gelu_pytorch_tanh`):
    /// `gelu(x) = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
    GeluTanh,
}

impl Activation {
    /// The name HF configs give it (`hidden_act` / `hidden_activation`).
    pub fn hf_name(self) -> &'static str {
        match self {
            Activation::Silu => "silu",
            Activation::GeluTanh => "gelu_pytorch_tanh",
        }
    }
}

/// What llama.cpp assumes for an architecture's sliding-window layers where the GGUF does not
/// say (`src/models/<arch>.cpp`, `load_swa_pattern`): layer `i` slides when
/// `i % pattern < pattern − 1`, unless the file's `{arch}.attention.sliding_window_pattern`
/// gives another period or one flag per layer; the sliding layers' RoPE base is
/// `{arch}.rope.freq_base_swa`, else `local_base` (`None`: the file's own base, as Gemma 2's);
/// the window is `{arch}.attention.sliding_window`, else `default_window` (Gemma 2: 4096;
/// `None`: no sliding layers, as llama.cpp's Gemma 3 without the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GgufSwa {
    pub pattern: usize,
    pub local_base: Option<u32>,
    pub default_window: Option<usize>,
}

/// What transformers' config class of an architecture assumes for a key its `config.json`
/// leaves out (transformers 5.24 `*Config` defaults, printed by `AutoConfig.for_model`): the HF
/// loader uses these, so a published file that relies on them (Gemma 3 4B's `text_config`
/// names six keys) runs as transformers runs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HfDefaults {
    /// `rope_theta` (global layers).
    pub rope_theta: f32,
    /// `rope_local_base_freq` (the sliding layers' base); `None`: they use the global RoPE.
    pub rope_local_base: Option<f32>,
    pub rms_norm_eps: f32,
    /// `max_position_embeddings`.
    pub context: usize,
    /// `head_dim`; `None`: `hidden_size / num_attention_heads`.
    pub head_dim: Option<usize>,
    /// `num_key_value_heads`; `None`: `num_attention_heads`.
    pub kv_heads: Option<usize>,
    /// `query_pre_attn_scalar`; `None`: the head size.
    pub query_pre_attn_scalar: Option<f32>,
    /// `sliding_window` where the class has one by default (Mistral, Gemma 3: 4096).
    pub sliding_window: Option<usize>,
    /// `attn_logit_softcapping` and `final_logit_softcapping` (Gemma 2: 50 and 30).
    pub softcaps: (Option<f32>, Option<f32>),
}

/// LlamaConfig's defaults.
const LLAMA_DEFAULTS: HfDefaults = HfDefaults {
    rope_theta: 10_000.0,
    rope_local_base: None,
    rms_norm_eps: 1e-6,
    context: 2048,
    head_dim: None,
    kv_heads: None,
    query_pre_attn_scalar: None,
    sliding_window: None,
    softcaps: (None, None),
};

/// What an architecture's blocks have beyond the LLaMA block (RMSNorm, q/k/v/o without bias,
/// RoPE, SwiGLU), as the loaders set them in [`LlamaConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arch {
    /// GGUF `general.architecture` and HF `model_type`.
    pub name: &'static str,
    /// Other HF `model_type`s of the same architecture (`gemma3_text`).
    pub hf_aliases: &'static [&'static str],
    /// The estimator's family (its parameter and byte arithmetic).
    pub family: Family,
    /// The HF `architectures` class an export names.
    pub hf_class: &'static str,
    /// Biases on q, k and v.
    pub qkv_bias: bool,
    /// The config says which projections have biases (Llama: HF `attention_bias` for q, k, v
    /// and o, `mlp_bias` for gate, up and down, as transformers' `LlamaAttention` / `LlamaMLP`
    /// build them; GGUF: the `blk.0.attn_q.bias`, `attn_output.bias`, `ffn_up.bias` tensors
    /// llama.cpp's `llama` graph adds when present). Elsewhere the biases are
    /// [`qkv_bias`](Self::qkv_bias)'s, fixed.
    pub config_biases: bool,
    /// RMSNorm over each head's q and k before RoPE (one `qk_dim` weight for q, one for k).
    pub qk_norm: bool,
    /// GGUF files keep q/k rows in HF's rotate-half order (llama.cpp's NEOX RoPE: its
    /// converter permutes q/k only for `llama`), so the GGUF loader permutes them too.
    pub gguf_rotate_half: bool,
    /// HF norm weights hold `w` of `x · (1 + w)` (Gemma): the HF loader adds 1, so every norm
    /// is used as stored, as llama.cpp's converter bakes the +1 into GGUF files.
    pub hf_norm_plus_one: bool,
    /// Embeddings multiplied by `√hidden` (Gemma).
    pub embed_scale: bool,
    /// RMSNorm on the attention output and on the MLP output before each residual add
    /// (Gemma 2/3's sandwich: [`crate::tensors::LayerPart::PostAttnNorm`], `PostFfnNorm`).
    pub post_norms: bool,
    /// The MLP activation.
    pub activation: Activation,
    /// The config may soft-cap the attention scores and the final logits, `c · tanh(x / c)`
    /// (Gemma 2 and 3: HF `attn_logit_softcapping` / `final_logit_softcapping`, GGUF
    /// `{arch}.attn_logit_softcapping` / `.final_logit_softcapping`); elsewhere refused.
    pub softcapping: bool,
    /// q, k, v are one tensor and gate, up another (Phi-3: HF `qkv_proj` / `gate_up_proj`,
    /// GGUF `attn_qkv` / `ffn_up`, rows in that order): both loaders split them by rows
    /// (`weights::fused_rows`), block formats at row boundaries without re-rounding.
    pub fused: bool,
    /// Sliding-window layout of GGUF files ([`GgufSwa`]); `None`: no sliding layers in GGUF.
    pub gguf_swa: Option<GgufSwa>,
    /// A GGUF `{arch}.attention.sliding_window` is read as full attention, as both readers of
    /// the format do (Phi-3: llama.cpp disables its window, `src/models/phi3.cpp` "Phi SWA is
    /// currently disabled", pull 13676; transformers' GGUF loader does not map the key), so
    /// Phi-3-mini-4k's files (window 2047) load; `false`: a window narrower than the context
    /// without a [`GgufSwa`] is refused.
    pub gguf_window_ignored: bool,
    /// GGUF files do not store the query scale; llama.cpp scales queries by `1/√head_dim`
    /// except for the model with this many layers, scaled by `1/√(hidden / heads)` (Gemma 2 27B:
    /// 46 layers; Gemma 3 27B: 62, whose HF `query_pre_attn_scalar` 168 is that value).
    pub gguf_wide_query_scale_layers: Option<usize>,
    /// An HF `sliding_window` narrower than the context makes every layer slide, with the
    /// global RoPE: transformers' Mistral and Phi-3 mask with it whenever it is set
    /// (`create_sliding_window_causal_mask`). Elsewhere, without a [`GgufSwa`], a window is
    /// refused, or ignored where transformers ignores it too (Qwen2 without
    /// `use_sliding_window`). GGUF files do not use this ([`Arch::gguf_window_ignored`]).
    pub every_layer_slides: bool,
    /// HF `use_sliding_window: true` slides the layers from `max_window_layers` on (or those
    /// `layer_types` marks), with the global RoPE (transformers' Qwen2 and Qwen3 configs).
    pub max_window_layers: bool,
    /// HF tensor names that differ from the LLaMA ones ([`crate::tensors::LayerPart::hf_name`]).
    pub hf_names: &'static [(LayerPart, &'static str)],
    /// GGUF tensor names that differ from the LLaMA ones
    /// ([`crate::tensors::LayerPart::gguf_name_in`]; fused parts name their common tensor).
    pub gguf_names: &'static [(LayerPart, &'static str)],
    /// GGUF `{arch}.rope.dimension_count` below the head size rotates only the first dims of
    /// each head ([`LlamaConfig::rope_dim`]); elsewhere such a file is refused.
    pub gguf_partial_rope: bool,
    /// HF `tie_word_embeddings` when the config does not say (transformers' default).
    pub tied_by_default: bool,
    /// What transformers assumes for keys a `config.json` leaves out ([`HfDefaults`]).
    pub hf_defaults: HfDefaults,
    /// The exporters write it (HF and GGUF). Architectures whose extra structure has no writer
    /// yet are refused by [`crate::export`], naming them.
    pub exportable: bool,
}

/// The LLaMA block: what every [`ARCHS`] entry starts from.
const LLAMA: Arch = Arch {
    name: "llama",
    hf_aliases: &[],
    hf_class: "LlamaForCausalLM",
    family: Family::Llama,
    qkv_bias: false,
    config_biases: false,
    qk_norm: false,
    gguf_rotate_half: false,
    hf_norm_plus_one: false,
    embed_scale: false,
    post_norms: false,
    activation: Activation::Silu,
    softcapping: false,
    fused: false,
    gguf_swa: None,
    gguf_window_ignored: false,
    gguf_wide_query_scale_layers: None,
    every_layer_slides: false,
    max_window_layers: false,
    hf_names: &[],
    gguf_names: &[],
    gguf_partial_rope: false,
    tied_by_default: false,
    hf_defaults: LLAMA_DEFAULTS,
    exportable: true,
};

/// Gemma 2 and 3's block: (1 + w) norms, sandwich norms, GeGLU, embeddings × √hidden, the
/// norms' HF names.
const GEMMA: Arch = Arch {
    gguf_rotate_half: true,
    hf_norm_plus_one: true,
    embed_scale: true,
    post_norms: true,
    activation: Activation::GeluTanh,
    softcapping: true,
    hf_names: &[
        (LayerPart::PostAttnNorm, "post_attention_layernorm.weight"),
        (LayerPart::FfnNorm, "pre_feedforward_layernorm.weight"),
        (LayerPart::PostFfnNorm, "post_feedforward_layernorm.weight"),
    ],
    tied_by_default: true,
    exportable: false,
    ..LLAMA
};

/// Every architecture the engine runs.
pub const ARCHS: [Arch; 7] = [
    Arch {
        config_biases: true,
        ..LLAMA
    },
    Arch {
        name: "mistral",
        hf_class: "MistralForCausalLM",
        family: Family::Mistral,
        every_layer_slides: true,
        hf_defaults: HfDefaults {
            context: 131_072,
            kv_heads: Some(8),
            sliding_window: Some(4096),
            ..LLAMA_DEFAULTS
        },
        ..LLAMA
    },
    Arch {
        name: "qwen2",
        hf_class: "Qwen2ForCausalLM",
        family: Family::Qwen2,
        max_window_layers: true,
        qkv_bias: true,
        gguf_rotate_half: true,
        hf_defaults: HfDefaults {
            context: 32_768,
            kv_heads: Some(32),
            sliding_window: Some(4096),
            ..LLAMA_DEFAULTS
        },
        ..LLAMA
    },
    Arch {
        name: "qwen3",
        hf_class: "Qwen3ForCausalLM",
        family: Family::Qwen3,
        max_window_layers: true,
        qk_norm: true,
        gguf_rotate_half: true,
        hf_defaults: HfDefaults {
            context: 32_768,
            head_dim: Some(128),
            kv_heads: Some(32),
            sliding_window: Some(4096),
            ..LLAMA_DEFAULTS
        },
        ..LLAMA
    },
    // Gemma 2: Gemma's block without QK-norm; the even layers slide with the global RoPE;
    // attention scores and logits soft-capped (transformers' Gemma2Config: 50 and 30).
    Arch {
        name: "gemma2",
        hf_class: "Gemma2ForCausalLM",
        family: Family::Gemma2,
        gguf_swa: Some(GgufSwa {
            pattern: 2,
            local_base: None,
            default_window: Some(4096),
        }),
        gguf_wide_query_scale_layers: Some(46),
        hf_defaults: HfDefaults {
            rope_theta: 10_000.0,
            rope_local_base: None,
            rms_norm_eps: 1e-6,
            context: 8192,
            head_dim: Some(256),
            kv_heads: Some(4),
            query_pre_attn_scalar: Some(256.0),
            sliding_window: Some(4096),
            softcaps: (Some(50.0), Some(30.0)),
        },
        ..GEMMA
    },
    Arch {
        name: "gemma3",
        hf_aliases: &["gemma3_text"],
        hf_class: "Gemma3ForCausalLM",
        family: Family::Gemma3,
        qk_norm: true,
        gguf_swa: Some(GgufSwa {
            pattern: 6,
            local_base: Some(10_000),
            default_window: None,
        }),
        gguf_wide_query_scale_layers: Some(62),
        hf_defaults: HfDefaults {
            rope_theta: 1_000_000.0,
            rope_local_base: Some(10_000.0),
            rms_norm_eps: 1e-6,
            context: 131_072,
            head_dim: Some(256),
            kv_heads: Some(4),
            query_pre_attn_scalar: Some(256.0),
            sliding_window: Some(4096),
            softcaps: (None, None),
        },
        ..GEMMA
    },
    Arch {
        name: "phi3",
        hf_class: "Phi3ForCausalLM",
        family: Family::Phi3,
        gguf_rotate_half: true,
        fused: true,
        hf_names: &[
            (LayerPart::Q, "self_attn.qkv_proj.weight"),
            (LayerPart::K, "self_attn.qkv_proj.weight"),
            (LayerPart::V, "self_attn.qkv_proj.weight"),
            (LayerPart::Gate, "mlp.gate_up_proj.weight"),
            (LayerPart::Up, "mlp.gate_up_proj.weight"),
        ],
        // llama.cpp's `LLM_ARCH_PHI3` tensors: `attn_qkv` {hidden, q + k + v} and `ffn_up`
        // {hidden, 2·ffn} (its SWIGLU takes the first half as the gate).
        gguf_names: &[
            (LayerPart::Q, "attn_qkv.weight"),
            (LayerPart::K, "attn_qkv.weight"),
            (LayerPart::V, "attn_qkv.weight"),
            (LayerPart::Gate, "ffn_up.weight"),
            (LayerPart::Up, "ffn_up.weight"),
        ],
        gguf_partial_rope: true,
        gguf_window_ignored: true,
        every_layer_slides: true,
        hf_defaults: HfDefaults {
            rms_norm_eps: 1e-5,
            context: 4096,
            ..LLAMA_DEFAULTS
        },
        exportable: false,
        ..LLAMA
    },
];

impl Arch {
    /// The entry named `name`, or [`EngineError::Unsupported`] listing the supported ones
    /// (`source` says where the name came from: "GGUF architecture", "config.json model_type").
    pub fn named(name: &str, source: &str) -> Result<Arch> {
        ARCHS
            .iter()
            .find(|a| a.name == name || a.hf_aliases.contains(&name))
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
    /// Biases on q, k, v ([`Arch::qkv_bias`], or the config's: [`Arch::config_biases`]).
    pub qkv_bias: bool,
    /// A bias on the output projection ([`Arch::config_biases`]).
    #[serde(skip_serializing_if = "is_false")]
    pub o_bias: bool,
    /// Biases on gate, up and down ([`Arch::config_biases`]).
    #[serde(skip_serializing_if = "is_false")]
    pub mlp_bias: bool,
    /// Per-head RMSNorm of q and k before RoPE ([`Arch::qk_norm`]).
    pub qk_norm: bool,
    /// Embeddings multiplied by `√hidden` ([`Arch::embed_scale`]).
    #[serde(skip_serializing_if = "is_false")]
    pub embed_scale: bool,
    /// RMSNorm of the attention and MLP outputs before the residual adds ([`Arch::post_norms`]).
    #[serde(skip_serializing_if = "is_false")]
    pub post_norms: bool,
    /// The MLP activation ([`Arch::activation`]).
    pub activation: Activation,
    /// The attention scale is `1/√s` with `s` this value (Gemma's `query_pre_attn_scalar`);
    /// `None`: `s = head_dim`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_pre_attn_scalar: Option<f32>,
    /// Tokens a query of a sliding layer sees, itself included: query `i` attends to keys `j`
    /// with `i − window < j ≤ i` (transformers' and llama.cpp's rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<usize>,
    /// Per layer, whether it slides (`n_layers` entries, or empty when none does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sliding_layers: Vec<bool>,
    /// RoPE base of the sliding layers, unscaled (Gemma 3's local base); `None`: they use
    /// the global base and scaling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rope_local_base: Option<f32>,
    /// Dimensions of each q/k head RoPE rotates, the first ones (Phi-3's
    /// `partial_rotary_factor · head_dim`); the rest pass through. `None`: all `head_dim`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rope_dim: Option<usize>,
    /// Soft-capping of the attention scores, `c · tanh(s / c)` after the scale and before the
    /// mask ([`Arch::softcapping`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attn_softcap: Option<f32>,
    /// Soft-capping of the output logits, `c · tanh(l / c)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_softcap: Option<f32>,
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
pub(crate) const MAX_LAYERS: usize = 512;
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

    /// Dimensions RoPE rotates per unpruned head ([`rope_dim`](Self::rope_dim), or all).
    pub fn rotary_dim(&self) -> usize {
        self.rope_dim.unwrap_or(self.head_dim)
    }

    /// RoPE frequency of every rotated pair of an unpruned head: `θ^(−2i/r) / s_i` with `r`
    /// the rotated dims ([`rotary_dim`](Self::rotary_dim)) and the scaling's divisors `s_i`
    /// ([`RopeScaling::divisors`]).
    pub fn rope_inv_freq(&self) -> Result<Vec<f32>> {
        let d = self.rotary_dim();
        Ok(self
            .rope_divisors()?
            .iter()
            .enumerate()
            .map(|(i, s)| self.rope_base.powf(-(2.0 * i as f32) / d as f32) / s)
            .collect())
    }

    /// The sliding layers' frequencies `θ_local^(−2i/r)` (unscaled), when they have their
    /// own base ([`rope_local_base`](Self::rope_local_base)).
    pub fn rope_local_inv_freq(&self) -> Option<Vec<f32>> {
        let d = self.rotary_dim();
        self.rope_local_base.map(|base| {
            (0..d / 2)
                .map(|i| base.powf(-(2.0 * i as f32) / d as f32))
                .collect()
        })
    }

    fn rope_divisors(&self) -> Result<Vec<f32>> {
        self.rope_scaling
            .divisors(self.rope_base, self.rotary_dim())
            .map_err(EngineError::Config)
    }

    /// LongRoPE's long set: `(original_context, frequencies)`, the frequencies a forward pass
    /// reaching past `original_context` uses ([`RopeScaling::long_divisors`]); `None` for the
    /// other kinds.
    pub fn rope_long_inv_freq(&self) -> Option<Result<(usize, Vec<f32>)>> {
        let d = self.rotary_dim();
        self.rope_scaling.long_divisors(d).map(|r| {
            r.map(|(after, divisors)| {
                let f = divisors
                    .iter()
                    .enumerate()
                    .map(|(i, s)| self.rope_base.powf(-(2.0 * i as f32) / d as f32) / s)
                    .collect();
                (after, f)
            })
            .map_err(EngineError::Config)
        })
    }

    /// The window of layer `i` when it slides ([`sliding_window`](Self::sliding_window)).
    pub fn layer_window(&self, i: usize) -> Option<usize> {
        self.sliding_window
            .filter(|_| self.sliding_layers.get(i).copied().unwrap_or(false))
    }

    /// The attention scale `1/√s` ([`query_pre_attn_scalar`](Self::query_pre_attn_scalar)).
    pub fn attn_scale(&self) -> f32 {
        1.0 / self
            .query_pre_attn_scalar
            .unwrap_or(self.head_dim as f32)
            .sqrt()
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
            .enumerate()
            .map(|(i, l)| edgefit_estimate::LayerSpec {
                num_heads: l.n_heads as u32,
                num_kv_heads: l.n_kv_heads as u32,
                qk_head_dim: l.qk_dim as u32,
                v_head_dim: l.v_dim as u32,
                intermediate_size: l.ffn as u32,
                sliding_window: self.layer_window(i).map(|w| w as u32),
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
            o_bias: self.o_bias,
            mlp_bias: self.mlp_bias,
            norms_per_layer: if self.post_norms { 4 } else { 2 },
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
        if !arch.config_biases && (self.o_bias || self.mlp_bias) {
            return Err(EngineError::Config(format!(
                "architecture `{}` has no output-projection or MLP biases; the config says o_bias = {}, mlp_bias = {}",
                arch.name, self.o_bias, self.mlp_bias
            )));
        }
        let wants = (
            arch.qkv_bias || (arch.config_biases && self.qkv_bias),
            arch.qk_norm,
            arch.embed_scale,
            arch.post_norms,
            arch.activation,
        );
        let has = (
            self.qkv_bias,
            self.qk_norm,
            self.embed_scale,
            self.post_norms,
            self.activation,
        );
        if wants != has {
            return Err(EngineError::Config(format!(
                "architecture `{}` has (qkv_bias, qk_norm, embed_scale, post_norms, activation) = {wants:?}; the config says {has:?}",
                arch.name
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
        if let Some(long) = self.rope_long_inv_freq() {
            long?;
        }
        self.validate_extras()?;
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

    /// The sliding window, the local RoPE base, the query scale and partial rotary.
    fn validate_extras(&self) -> Result<()> {
        let bad = |m: String| Err(EngineError::Config(m));
        match self.sliding_window {
            Some(w) if w == 0 || w > MAX_CONTEXT => {
                return bad(format!("sliding window = {w} is outside 1..={MAX_CONTEXT}"))
            }
            Some(_) if self.sliding_layers.len() != self.n_layers => {
                return bad(format!(
                    "{} sliding-layer flags for n_layers = {}",
                    self.sliding_layers.len(),
                    self.n_layers
                ))
            }
            None if self.sliding_layers.iter().any(|&s| s) => {
                return bad("sliding layers without a sliding window".to_string())
            }
            _ => {}
        }
        if let Some(b) = self.rope_local_base {
            if !(b.is_finite() && b > 1.0) {
                return bad(format!(
                    "local RoPE base = {b} must be a finite number above 1"
                ));
            }
        }
        if let Some(s) = self.query_pre_attn_scalar {
            if !(s.is_finite() && s > 0.0) {
                return bad(format!(
                    "query_pre_attn_scalar = {s} must be a finite number above 0"
                ));
            }
        }
        for (what, cap) in [
            ("attn_logit_softcapping", self.attn_softcap),
            ("final_logit_softcapping", self.final_softcap),
        ] {
            if let Some(c) = cap {
                if !(c.is_finite() && c > 0.0) {
                    return bad(format!("{what} = {c} must be a finite number above 0"));
                }
                if !self.arch().is_ok_and(|a| a.softcapping) {
                    return Err(EngineError::Unsupported(format!(
                        "{what} = {c} for `{}` (logit soft-capping)",
                        self.arch
                    )));
                }
            }
        }
        if let Some(r) = self.rope_dim {
            if r == 0 || r > self.head_dim || !r.is_multiple_of(2) {
                return bad(format!(
                    "rotary dims = {r} must be even and in 2..={}",
                    self.head_dim
                ));
            }
            if r < self.head_dim && self.layers.is_some() {
                return Err(EngineError::Unsupported(format!(
                    "pruned layer shapes with partial RoPE ({r} of {} dims rotated)",
                    self.head_dim
                )));
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

/// [`LayerPart`]'s methods that read a model's description: the architecture's renamed
/// tensors, which optional parts a model has, and each part's shape. They live here, beside
/// [`Arch`], [`LlamaConfig`] and [`LayerShape`], so that [`crate::tensors`] stays a leaf.
impl LayerPart {
    /// The GGUF tensor name in block `layer` of architecture `arch`: [`gguf_name`](Self::gguf_name)
    /// unless [`Arch::gguf_names`] renames it (Phi-3's fused
    /// `attn_qkv` for q, k and v).
    pub fn gguf_name_in(self, arch: &Arch, layer: usize) -> String {
        match arch.gguf_names.iter().find(|(p, _)| *p == self) {
            Some((_, n)) => format!("blk.{layer}.{n}"),
            None => self.gguf_name(layer),
        }
    }

    /// The HF safetensors name in block `layer` of architecture `arch`
    /// (`model.layers.3.self_attn.q_proj.bias`): the LLaMA name unless
    /// [`Arch::hf_names`] renames it. Fused tensors (Phi-3's
    /// `qkv_proj`) are named for each part they hold.
    pub fn hf_name(self, arch: &Arch, layer: usize) -> String {
        let name = arch
            .hf_names
            .iter()
            .find(|(p, _)| *p == self)
            .map_or(self.names().1, |(_, n)| n);
        format!("model.layers.{layer}.{name}")
    }

    /// Whether the model `config` describes has this tensor.
    pub fn present(self, config: &LlamaConfig) -> bool {
        match self {
            LayerPart::QBias | LayerPart::KBias | LayerPart::VBias => config.qkv_bias,
            LayerPart::OBias => config.o_bias,
            LayerPart::GateBias | LayerPart::UpBias | LayerPart::DownBias => config.mlp_bias,
            LayerPart::QNorm | LayerPart::KNorm => config.qk_norm,
            LayerPart::PostAttnNorm | LayerPart::PostFfnNorm => config.post_norms,
            _ => true,
        }
    }

    /// `(rows, cols)` in a block of shape `s` with hidden size `h`; vectors are `(1, len)`.
    pub fn shape(self, s: &LayerShape, h: usize) -> (usize, usize) {
        match self {
            LayerPart::AttnNorm
            | LayerPart::FfnNorm
            | LayerPart::PostAttnNorm
            | LayerPart::PostFfnNorm => (1, h),
            LayerPart::Q => (s.q_width(), h),
            LayerPart::K => (s.k_width(), h),
            LayerPart::V => (s.v_width(), h),
            LayerPart::QBias => (1, s.q_width()),
            LayerPart::KBias => (1, s.k_width()),
            LayerPart::VBias => (1, s.v_width()),
            LayerPart::OBias | LayerPart::DownBias => (1, h),
            LayerPart::GateBias | LayerPart::UpBias => (1, s.ffn),
            LayerPart::QNorm | LayerPart::KNorm => (1, s.qk_dim),
            LayerPart::O => (h, s.o_width()),
            LayerPart::Gate | LayerPart::Up => (s.ffn, h),
            LayerPart::Down => (h, s.ffn),
        }
    }
}
