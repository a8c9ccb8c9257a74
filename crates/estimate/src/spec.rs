//! `ModelSpec`: a decoder-only transformer's shape, and its parameter count by component.
//!
//! One spec describes one model, whatever it came from: a preset ([`crate::preset`]), an HF
//! `config.json` ([`ModelSpec::from_hf_config`]), GGUF metadata ([`crate::GgufMetadata`]) or a
//! pruned model ([`ModelSpec::pruned`]). Layers are listed one by one because structured pruning
//! makes them differ (heads, KV heads, per-head Q/K and V dims, MLP width, dropped layers).
//!
//! # Parameter count (the formulas, per layer `i`)
//! With `d` = hidden size, `H` query heads, `Hkv` KV heads, `dk` per-head Q/K dim, `dv` per-head
//! V dim and `I` MLP width:
//! - attention = `d·H·dk` (q) + `d·Hkv·dk` (k) + `d·Hkv·dv` (v) + `H·dv·d` (o)
//!   + biases `H·dk + Hkv·dk + Hkv·dv` if `qkv_bias` (Qwen2) + `d` if `o_bias`;
//! - MLP (gated: SwiGLU/GeGLU) = `3·d·I` (gate, up, down) + `2·I + d` if `mlp_bias`;
//! - norms = `norms_per_layer · d` (RMSNorm has a weight only; Gemma 2 has 4 norms a layer)
//!   + `2·dk` if `qk_norm` (Qwen3: one RMSNorm weight for every head's q, one for k);
//! - model = `V·d` (embedding) + Σ layers + `d` (final norm) + `V·d` (output head) unless
//!   `tie_word_embeddings`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{EstimateError, Result};
use crate::macros::named_enum;

named_enum! {
    /// The architecture family, as HF's `model_type` spells it.
    Family, "model family" {
        /// Llama 1/2/3, SmolLM, Sheared-LLaMA, TinyLlama, ...
        Llama = "llama",
        /// Mistral 7B and friends (Llama shape; may carry `head_dim`).
        Mistral = "mistral",
        /// Qwen2 / Qwen2.5 (bias on q, k, v).
        Qwen2 = "qwen2",
        /// Qwen3 (RMSNorm on each head's q and k, `head_dim` decoupled from hidden).
        Qwen3 = "qwen3",
        /// Gemma 1 (GeGLU, tied, `head_dim` decoupled from hidden).
        Gemma = "gemma",
        /// Gemma 2 (four norms per layer).
        Gemma2 = "gemma2",
        /// Gemma 3 text (four norms per layer, RMSNorm on each head's q and k, sliding-window
        /// layers; HF `model_type` `gemma3_text`).
        Gemma3 = "gemma3",
        /// Phi-3 (fused qkv and gate_up projections: same parameter count).
        Phi3 = "phi3",
    }
}

impl Family {
    /// RMSNorm weight vectors per layer: 4 for Gemma 2/3's sandwich norms, else 2.
    pub fn norms_per_layer(self) -> u32 {
        if matches!(self, Family::Gemma2 | Family::Gemma3) {
            4
        } else {
            2
        }
    }

    /// Per-head q/k RMSNorm (Qwen3, Gemma 3).
    pub fn qk_norm(self) -> bool {
        matches!(self, Family::Qwen3 | Family::Gemma3)
    }
}

/// The shape of one transformer block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerSpec {
    /// Query heads.
    pub num_heads: u32,
    /// Key/value heads (grouped-query attention when fewer than `num_heads`).
    pub num_kv_heads: u32,
    /// Per-head dimension of Q and K (they must match for q·k; even, for RoPE pairs).
    pub qk_head_dim: u32,
    /// Per-head dimension of V (the input width of o_proj is `num_heads · v_head_dim`).
    pub v_head_dim: u32,
    /// MLP intermediate width.
    pub intermediate_size: u32,
    /// Sliding-window attention: a query sees only the newest `w` tokens (itself included),
    /// and the KV cache keeps only those ([`LayerSpec::held_tokens`]). `None`: full attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
}

impl LayerSpec {
    /// `H · dk`: width of the q projection's output.
    pub fn q_dim(&self) -> u64 {
        u64::from(self.num_heads) * u64::from(self.qk_head_dim)
    }
    /// `Hkv · dk`.
    pub fn k_dim(&self) -> u64 {
        u64::from(self.num_kv_heads) * u64::from(self.qk_head_dim)
    }
    /// `Hkv · dv`.
    pub fn v_dim(&self) -> u64 {
        u64::from(self.num_kv_heads) * u64::from(self.v_head_dim)
    }
    /// `H · dv`: width of the attention output before o_proj.
    pub fn o_in_dim(&self) -> u64 {
        u64::from(self.num_heads) * u64::from(self.v_head_dim)
    }
}

/// A model's shape: everything the byte and FLOP arithmetic needs, nothing more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Display name ("SmolLM2-135M").
    pub name: String,
    /// Architecture family.
    pub family: Family,
    /// Hidden (residual stream) width `d`.
    pub hidden_size: u32,
    /// Vocabulary size `V`.
    pub vocab_size: u32,
    /// Whether the output head shares the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Bias on q, k and v projections (Qwen2, Llama with `attention_bias`).
    #[serde(default)]
    pub qkv_bias: bool,
    /// Bias on o_proj (Llama with `attention_bias`).
    #[serde(default)]
    pub o_bias: bool,
    /// Bias on the MLP projections (Llama with `mlp_bias`).
    #[serde(default)]
    pub mlp_bias: bool,
    /// RMSNorm weight vectors per layer (2; Gemma 2 has 4).
    pub norms_per_layer: u32,
    /// RMSNorm of each head's q and k before RoPE, one `dk`-vector each per layer (Qwen3,
    /// Gemma 3).
    #[serde(default)]
    pub qk_norm: bool,
    /// Context length the model was trained for, if known (only used for a warning).
    #[serde(default)]
    pub max_position_embeddings: Option<u32>,
    /// The blocks, in order.
    pub layers: Vec<LayerSpec>,
}

/// How a model's RoPE frequencies are stretched past its training context: part of the one
/// model description the engine runs and the estimator reads (parsed once per format:
/// [`crate::hf::rope_from_hf_config`], [`crate::GgufMetadata::rope_scaling`]).
///
/// With `θ` the RoPE base and `d` the rotated head size, pair `i` of a head rotates by
/// `pos · f_i / s_i` where `f_i = θ^(−2i/d)` is the base frequency and `s_i` the divisor
/// [`RopeScaling::divisors`] gives:
/// - `None`: `s_i = 1`;
/// - `Linear { factor }`: `s_i = factor` (positions divided by the factor);
/// - `Llama3 { factor, low_freq_factor, high_freq_factor, original_context }` (Llama 3.1+,
///   transformers `_compute_llama3_parameters`): with wavelength `λ_i = 2π / f_i`,
///   `λ_lo = original_context / low_freq_factor`, `λ_hi = original_context / high_freq_factor`:
///   `s_i = 1` if `λ_i < λ_hi`; `s_i = factor` if `λ_i > λ_lo`; otherwise, with
///   `a = (original_context / λ_i − low_freq_factor) / (high_freq_factor − low_freq_factor)`,
///   `1 / s_i = (1 − a) / factor + a`;
/// - `Divisors(s)`: the divisors themselves, one per pair (GGUF `rope_freqs.weight`, which
///   llama.cpp's converter writes for Llama 3.1+ from the formula above);
/// - `Yarn { factor, original_context, beta_fast, beta_slow, truncate, attention_factor }`
///   (YaRN, transformers `_compute_yarn_parameters`, llama.cpp `rope_yarn`): with
///   `c(r) = d · ln(original_context / (2π r)) / (2 ln θ)` the pair index where a wave turns
///   `r` times over the original context, `lo = max(⌊c(beta_fast)⌋, 0)` and
///   `hi = min(⌈c(beta_slow)⌉, d − 1)` (no rounding when `truncate` is false), the
///   extrapolation weight `e_i = 1 − clamp((i − lo) / (hi − lo), 0, 1)` (`hi` nudged by 0.001
///   when equal) blends the kept and the interpolated frequency:
///   `1 / s_i = (1 − e_i) / factor + e_i`;
/// - `LongRope { short_factor, long_factor, original_context, attention_factor }` (Phi-3
///   128k, Phi-3.5; transformers `_compute_longrope_parameters`): `s_i = short_factor[i]`,
///   or `long_factor[i]` for a forward pass whose last position reaches past
///   `original_context` (transformers decides per forward call on `max(position) + 1 >
///   original_context`; positions only grow, so once a pass used the long set every later
///   one does: [`RopeScaling::long_divisors`]; and its `generate` runs the whole sequence
///   again at the first pass that crosses, so no key keeps the short rotation: the engine
///   does the same).
///
/// YaRN and LongRoPE also scale the rotated q and k values by an attention factor `m`
/// ([`RopeScaling::attention_factor`]; the cos and sin tables multiplied by it, so the
/// attention logits of the rotated dims by `m²`), resolved when the file is read: the file's
/// `attention_factor`, else YaRN's `0.1 · ln(factor) + 1` (or the `mscale` / `mscale_all_dim`
/// ratio) and LongRoPE's `√(1 + ln(s) / ln(original_context))` with `s` the file's `factor`,
/// else `max_position_embeddings / original_context` (1 when `s ≤ 1`).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RopeScaling {
    /// No scaling.
    #[default]
    None,
    /// Every frequency divided by `factor`.
    Linear {
        /// The divisor (> 0).
        factor: f32,
    },
    /// Llama 3.x: low frequencies divided by `factor`, high ones kept, a smooth blend between.
    Llama3 {
        /// Divisor of the low frequencies.
        factor: f32,
        /// `original_context / low_freq_factor` is the longest wavelength kept blended.
        low_freq_factor: f32,
        /// `original_context / high_freq_factor` is the shortest wavelength scaled at all.
        high_freq_factor: f32,
        /// The context the model was pre-trained with before the extension.
        original_context: u32,
    },
    /// One divisor per rotated pair.
    Divisors {
        /// `s_i`, `d/2` of them.
        divisors: Vec<f32>,
    },
    /// YaRN: interpolated low frequencies, kept high ones, a linear ramp between by pair index.
    Yarn {
        /// Divisor of the interpolated frequencies.
        factor: f32,
        /// The context the model was pre-trained with.
        original_context: u32,
        /// Rotations over the original context above which a pair is kept (default 32).
        beta_fast: f32,
        /// Rotations below which a pair is interpolated (default 1).
        beta_slow: f32,
        /// Whether the ramp's ends are rounded to whole pairs (transformers' `truncate`,
        /// default true; llama.cpp always rounds).
        truncate: bool,
        /// The factor the rotated q and k are multiplied by.
        attention_factor: f32,
    },
    /// LongRoPE: one divisor per pair for short sequences and another for long ones.
    LongRope {
        /// `s_i` while every position is within the original context (`d/2` of them).
        short_factor: Vec<f32>,
        /// `s_i` for a pass reaching past it (`d/2` of them).
        long_factor: Vec<f32>,
        /// The context the short factors serve.
        original_context: u32,
        /// The factor the rotated q and k are multiplied by.
        attention_factor: f32,
    },
}

/// YaRN's default attention factor for a stretch `scale` and `mscale` (transformers
/// `yarn_get_mscale`): `0.1 · mscale · ln(scale) + 1`, 1 when `scale ≤ 1`.
pub fn yarn_mscale(scale: f32, mscale: f32) -> f32 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * mscale * scale.ln() + 1.0
    }
}

/// LongRoPE's default attention factor for a stretch `scale` over `original_context`
/// (transformers `_compute_longrope_parameters`): `√(1 + ln(scale) / ln(original_context))`,
/// 1 when `scale ≤ 1`.
pub fn longrope_attention_factor(scale: f32, original_context: u32) -> f32 {
    if scale <= 1.0 {
        1.0
    } else {
        (1.0 + (scale as f64).ln() / (original_context as f64).ln()).sqrt() as f32
    }
}

impl RopeScaling {
    /// The divisor `s_i` of every pair `i < head_dim/2` for base `theta` (see the type's docs),
    /// or a message naming what is wrong (a non-positive factor, a divisor count that is not
    /// `head_dim / 2`, non-finite values).
    pub fn divisors(&self, theta: f32, head_dim: usize) -> std::result::Result<Vec<f32>, String> {
        let half = head_dim / 2;
        let positive = |what: &str, v: f32| {
            if v.is_finite() && v > 0.0 {
                Ok(v)
            } else {
                Err(format!(
                    "RoPE scaling {what} = {v} must be a finite number above 0"
                ))
            }
        };
        match self {
            RopeScaling::None => Ok(vec![1.0; half]),
            RopeScaling::Linear { factor } => Ok(vec![positive("factor", *factor)?; half]),
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_context,
            } => {
                let factor = positive("factor", *factor)?;
                let lo = positive("low_freq_factor", *low_freq_factor)?;
                let hi = positive("high_freq_factor", *high_freq_factor)?;
                if hi <= lo {
                    return Err(format!(
                        "RoPE scaling high_freq_factor = {hi} must be above low_freq_factor = {lo}"
                    ));
                }
                let old = positive("original_max_position_embeddings", *original_context as f32)?;
                let (lambda_lo, lambda_hi) = (old / lo, old / hi);
                Ok((0..half)
                    .map(|i| {
                        let f = theta.powf(-(2.0 * i as f32) / head_dim as f32);
                        let lambda = 2.0 * std::f32::consts::PI / f;
                        if lambda < lambda_hi {
                            1.0
                        } else if lambda > lambda_lo {
                            factor
                        } else {
                            let a = (old / lambda - lo) / (hi - lo);
                            1.0 / ((1.0 - a) / factor + a)
                        }
                    })
                    .collect())
            }
            RopeScaling::Divisors { divisors } => per_pair("frequency divisors", divisors, half),
            RopeScaling::Yarn {
                factor,
                original_context,
                beta_fast,
                beta_slow,
                truncate,
                attention_factor,
            } => {
                let factor = positive("factor", *factor)?;
                let old = positive("original_max_position_embeddings", *original_context as f32)?;
                let fast = positive("beta_fast", *beta_fast)?;
                let slow = positive("beta_slow", *beta_slow)?;
                positive("attention_factor", *attention_factor)?;
                if !(theta.is_finite() && theta > 1.0) {
                    return Err(format!(
                        "RoPE base = {theta} must be a finite number above 1"
                    ));
                }
                // The pair index where a wave turns `rot` times over the original context
                // (f64, as transformers' `math.log`).
                let d = head_dim as f64;
                let at = |rot: f32| {
                    d * (old as f64 / (rot as f64 * 2.0 * std::f64::consts::PI)).ln()
                        / (2.0 * (theta as f64).ln())
                };
                let (mut lo, mut hi) = (at(fast), at(slow));
                if *truncate {
                    (lo, hi) = (lo.floor(), hi.ceil());
                }
                let (lo, mut hi) = (lo.max(0.0) as f32, hi.min(d - 1.0) as f32);
                if lo == hi {
                    hi += 0.001;
                }
                Ok((0..half)
                    .map(|i| {
                        let ramp = ((i as f32 - lo) / (hi - lo)).clamp(0.0, 1.0);
                        let keep = 1.0 - ramp;
                        1.0 / ((1.0 - keep) / factor + keep)
                    })
                    .collect())
            }
            RopeScaling::LongRope {
                short_factor,
                long_factor,
                original_context,
                attention_factor,
            } => {
                positive("original_max_position_embeddings", *original_context as f32)?;
                positive("attention_factor", *attention_factor)?;
                per_pair("long_factor", long_factor, half)?;
                per_pair("short_factor", short_factor, half)
            }
        }
    }

    /// LongRoPE's long set: `(original_context, divisors)`, used by a forward pass whose last
    /// position is at or past `original_context` (and every pass after it); `None` for the
    /// other kinds, whose frequencies do not depend on the sequence.
    pub fn long_divisors(
        &self,
        head_dim: usize,
    ) -> Option<std::result::Result<(usize, Vec<f32>), String>> {
        match self {
            RopeScaling::LongRope {
                long_factor,
                original_context,
                ..
            } => Some(
                per_pair("long_factor", long_factor, head_dim / 2)
                    .map(|d| (*original_context as usize, d)),
            ),
            _ => None,
        }
    }

    /// The factor the rotated dims of q and k are multiplied by (the cos/sin tables): YaRN's
    /// and LongRoPE's `attention_factor`, 1 for the other kinds.
    pub fn attention_factor(&self) -> f32 {
        match self {
            RopeScaling::Yarn {
                attention_factor, ..
            }
            | RopeScaling::LongRope {
                attention_factor, ..
            } => *attention_factor,
            _ => 1.0,
        }
    }

    /// The kind's name as transformers spells it (`default`, `linear`, `llama3`, `yarn`,
    /// `longrope`; per-pair divisors from a GGUF tensor: `rope_freqs`).
    pub fn kind(&self) -> &'static str {
        match self {
            RopeScaling::None => "default",
            RopeScaling::Linear { .. } => "linear",
            RopeScaling::Llama3 { .. } => "llama3",
            RopeScaling::Divisors { .. } => "rope_freqs",
            RopeScaling::Yarn { .. } => "yarn",
            RopeScaling::LongRope { .. } => "longrope",
        }
    }
}

/// `values` as one positive finite divisor per rotated pair (`half` of them), or a message
/// naming `what` and the problem.
fn per_pair(what: &str, values: &[f32], half: usize) -> std::result::Result<Vec<f32>, String> {
    if values.len() != half {
        return Err(format!(
            "{} RoPE {what} for {half} rotated pairs",
            values.len()
        ));
    }
    for (i, &d) in values.iter().enumerate() {
        if !(d.is_finite() && d > 0.0) {
            return Err(format!(
                "RoPE {what} {i} = {d} must be a finite number above 0"
            ));
        }
    }
    Ok(values.to_vec())
}

/// Parameter counts by component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamBreakdown {
    /// `V · d`.
    pub embedding: u64,
    /// q, k, v, o weights and biases over all layers.
    pub attention: u64,
    /// gate, up, down weights (and biases) over all layers.
    pub mlp: u64,
    /// Per-layer norms plus the final norm.
    pub norms: u64,
    /// `V · d` unless tied (then 0).
    pub lm_head: u64,
    /// The sum.
    pub total: u64,
}

// Bounds that keep every product in u64 and reject typos such as a context in the billions.
pub(crate) const MAX_HIDDEN: u32 = 1 << 17;
pub(crate) const MAX_VOCAB: u32 = 1 << 22;
pub(crate) const MAX_LAYERS: usize = 1024;
pub(crate) const MAX_HEADS: u32 = 1024;
pub(crate) const MAX_HEAD_DIM: u32 = 4096;
pub(crate) const MAX_INTERMEDIATE: u32 = 1 << 20;

impl ModelSpec {
    /// A model whose layers all have the same shape.
    #[allow(clippy::too_many_arguments)]
    pub fn uniform(
        name: impl Into<String>,
        family: Family,
        hidden_size: u32,
        num_layers: u32,
        num_heads: u32,
        num_kv_heads: u32,
        head_dim: u32,
        intermediate_size: u32,
        vocab_size: u32,
        tie_word_embeddings: bool,
    ) -> Result<Self> {
        if num_layers as usize > MAX_LAYERS {
            return Err(crate::error::out_of_range(
                "num_hidden_layers",
                num_layers,
                format!("must be at most {MAX_LAYERS}"),
            ));
        }
        let layer = LayerSpec {
            num_heads,
            num_kv_heads,
            qk_head_dim: head_dim,
            v_head_dim: head_dim,
            intermediate_size,
            sliding_window: None,
        };
        let spec = ModelSpec {
            name: name.into(),
            family,
            hidden_size,
            vocab_size,
            tie_word_embeddings,
            qkv_bias: family == Family::Qwen2,
            o_bias: false,
            mlp_bias: false,
            norms_per_layer: family.norms_per_layer(),
            qk_norm: family.qk_norm(),
            max_position_embeddings: None,
            layers: vec![layer; num_layers as usize],
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks that the shape can describe a real model: every dimension non-zero and below a
    /// generous bound (so no byte count can overflow), query heads a multiple of KV heads, Q/K
    /// head dims even (RoPE rotates pairs). Every constructor calls this; call it yourself after
    /// editing the fields.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: String, reason: String| EstimateError::InvalidShape {
            model: self.name.clone(),
            field,
            reason,
        };
        let check = |field: &str, v: u32, max: u32| -> Result<()> {
            if v == 0 || v > max {
                Err(bad(field.to_string(), format!("{v} is not in 1..={max}")))
            } else {
                Ok(())
            }
        };
        check("hidden_size", self.hidden_size, MAX_HIDDEN)?;
        check("vocab_size", self.vocab_size, MAX_VOCAB)?;
        if self.norms_per_layer > 8 {
            return Err(bad(
                "norms_per_layer".into(),
                format!("{} is not in 0..=8", self.norms_per_layer),
            ));
        }
        if self.layers.is_empty() || self.layers.len() > MAX_LAYERS {
            return Err(bad(
                "layers".into(),
                format!("{} layers is not in 1..={MAX_LAYERS}", self.layers.len()),
            ));
        }
        for (i, l) in self.layers.iter().enumerate() {
            check(&format!("layers[{i}].num_heads"), l.num_heads, MAX_HEADS)?;
            check(
                &format!("layers[{i}].num_kv_heads"),
                l.num_kv_heads,
                MAX_HEADS,
            )?;
            check(
                &format!("layers[{i}].qk_head_dim"),
                l.qk_head_dim,
                MAX_HEAD_DIM,
            )?;
            check(
                &format!("layers[{i}].v_head_dim"),
                l.v_head_dim,
                MAX_HEAD_DIM,
            )?;
            check(
                &format!("layers[{i}].intermediate_size"),
                l.intermediate_size,
                MAX_INTERMEDIATE,
            )?;
            if l.num_heads % l.num_kv_heads != 0 {
                return Err(bad(
                    format!("layers[{i}].num_kv_heads"),
                    format!(
                        "{} query heads are not a multiple of {} KV heads",
                        l.num_heads, l.num_kv_heads
                    ),
                ));
            }
            if l.qk_head_dim % 2 != 0 {
                return Err(bad(
                    format!("layers[{i}].qk_head_dim"),
                    format!("{} is odd; RoPE rotates dimensions in pairs", l.qk_head_dim),
                ));
            }
        }
        Ok(())
    }

    /// Number of blocks.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Parameters of one block's attention: `d·H·dk + d·Hkv·dk + d·Hkv·dv + H·dv·d` plus biases.
    pub fn attention_params(&self, l: &LayerSpec) -> u64 {
        let d = u64::from(self.hidden_size);
        let mut p = d * l.q_dim() + d * l.k_dim() + d * l.v_dim() + l.o_in_dim() * d;
        if self.qkv_bias {
            p += l.q_dim() + l.k_dim() + l.v_dim();
        }
        if self.o_bias {
            p += d;
        }
        p
    }

    /// Parameters of one block's gated MLP: `3·d·I` plus biases `2·I + d` if `mlp_bias`.
    pub fn mlp_params(&self, l: &LayerSpec) -> u64 {
        let d = u64::from(self.hidden_size);
        let i = u64::from(l.intermediate_size);
        let mut p = 3 * d * i;
        if self.mlp_bias {
            p += 2 * i + d;
        }
        p
    }

    /// Norm weights: `norms_per_layer` of width d a layer, the final norm, and with q/k norms
    /// one of the per-head q width and one of the k width a layer (shared by every head).
    pub fn norm_params(&self) -> u64 {
        let d = u64::from(self.hidden_size);
        let qk_norms: u64 = if self.qk_norm {
            self.layers
                .iter()
                .map(|l| 2 * u64::from(l.qk_head_dim))
                .sum()
        } else {
            0
        };
        self.layers.len() as u64 * u64::from(self.norms_per_layer) * d + d + qk_norms
    }

    /// Parameter counts by component (see the module docs for the formulas).
    pub fn params(&self) -> ParamBreakdown {
        let d = u64::from(self.hidden_size);
        let v = u64::from(self.vocab_size);
        let embedding = v * d;
        let attention = self.layers.iter().map(|l| self.attention_params(l)).sum();
        let mlp = self.layers.iter().map(|l| self.mlp_params(l)).sum();
        let norms = self.norm_params();
        let lm_head = if self.tie_word_embeddings { 0 } else { v * d };
        ParamBreakdown {
            embedding,
            attention,
            mlp,
            norms,
            lm_head,
            total: embedding + attention + mlp + norms + lm_head,
        }
    }

    /// The same model with some structure removed. See [`Pruning`] for what can be removed and
    /// the rules a valid result must follow; nothing may grow.
    pub fn pruned(&self, pruning: &Pruning) -> Result<ModelSpec> {
        let n = self.layers.len();
        let mut layers: Vec<Option<LayerSpec>> = self.layers.iter().copied().map(Some).collect();
        for &idx in pruning.per_layer.keys() {
            if idx as usize >= n {
                return Err(EstimateError::Prune {
                    what: format!("per_layer[{idx}]"),
                    reason: format!("the model has {n} layers (0..={})", n - 1),
                });
            }
        }
        for (i, slot) in layers.iter_mut().enumerate() {
            let orig = self.layers[i];
            let mut l = pruning.all_layers.apply(orig, i)?;
            if let Some(p) = pruning.per_layer.get(&(i as u32)) {
                l = p.apply(l, i)?;
            }
            *slot = Some(l);
        }
        for &idx in &pruning.drop_layers {
            let Some(slot) = layers.get_mut(idx as usize) else {
                return Err(EstimateError::Prune {
                    what: format!("drop_layers: {idx}"),
                    reason: format!("the model has {n} layers (0..={})", n - 1),
                });
            };
            if slot.take().is_none() {
                return Err(EstimateError::Prune {
                    what: format!("drop_layers: {idx}"),
                    reason: "layer listed twice".into(),
                });
            }
        }
        let layers: Vec<LayerSpec> = layers.into_iter().flatten().collect();
        if layers.is_empty() {
            return Err(EstimateError::Prune {
                what: "drop_layers".into(),
                reason: format!("dropping all {n} layers leaves no model"),
            });
        }
        let out = ModelSpec {
            name: format!("{} (pruned)", self.name),
            layers,
            ..self.clone()
        };
        out.validate()?;
        Ok(out)
    }
}

/// New sizes for one layer's structures; `None` keeps the current size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LayerPrune {
    /// Query heads to keep (must stay a multiple of the KV heads).
    pub num_heads: Option<u32>,
    /// KV heads to keep.
    pub num_kv_heads: Option<u32>,
    /// Per-head Q/K dim to keep (even: Q and K are pruned together, in RoPE pairs).
    pub qk_head_dim: Option<u32>,
    /// Per-head V dim to keep (with the matching o_proj inputs).
    pub v_head_dim: Option<u32>,
    /// MLP width to keep (gate/up rows with down columns).
    pub intermediate_size: Option<u32>,
}

impl LayerPrune {
    fn apply(&self, l: LayerSpec, i: usize) -> Result<LayerSpec> {
        let pick = |field: &str, new: Option<u32>, old: u32| -> Result<u32> {
            match new {
                None => Ok(old),
                Some(0) => Err(EstimateError::Prune {
                    what: format!("layers[{i}].{field}"),
                    reason: "0 would remove the structure; drop the layer instead".into(),
                }),
                Some(v) if v > old => Err(EstimateError::Prune {
                    what: format!("layers[{i}].{field}"),
                    reason: format!("{v} is larger than the current {old}; pruning never grows"),
                }),
                Some(v) => Ok(v),
            }
        };
        Ok(LayerSpec {
            sliding_window: l.sliding_window,
            num_heads: pick("num_heads", self.num_heads, l.num_heads)?,
            num_kv_heads: pick("num_kv_heads", self.num_kv_heads, l.num_kv_heads)?,
            qk_head_dim: pick("qk_head_dim", self.qk_head_dim, l.qk_head_dim)?,
            v_head_dim: pick("v_head_dim", self.v_head_dim, l.v_head_dim)?,
            intermediate_size: pick(
                "intermediate_size",
                self.intermediate_size,
                l.intermediate_size,
            )?,
        })
    }
}

/// A structured-pruning request: a shape to apply to every layer, per-layer overrides (indices
/// in the original numbering), and whole layers to drop. The result must be a valid
/// [`ModelSpec`]: query heads a multiple of KV heads, Q/K dims even.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pruning {
    /// Applied to every layer first.
    pub all_layers: LayerPrune,
    /// Then these, by original layer index.
    pub per_layer: BTreeMap<u32, LayerPrune>,
    /// Original indices of layers removed entirely.
    pub drop_layers: Vec<u32>,
}

/// Fractions of each structure to remove, uniformly (the page's sliders). Each in `[0, 1)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PruneRatios {
    /// Fraction of query heads removed (within each KV group; whole head pairs without GQA).
    pub heads: f64,
    /// Fraction of per-head Q/K dims removed (rounded to RoPE pairs).
    pub qk_dims: f64,
    /// Fraction of per-head V dims removed.
    pub v_dims: f64,
    /// Fraction of MLP width removed.
    pub mlp: f64,
    /// Number of whole layers removed.
    pub layers: u32,
}

impl Pruning {
    /// The uniform pruning that removes the given fractions, rounded as the engine rounds:
    /// - heads: with grouped-query attention each KV group of `g = H/Hkv` query heads keeps
    ///   `max(1, round((1-r)·g))` (KV heads stay); with plain multi-head attention (`g = 1`)
    ///   whole (query, KV) head pairs go: `max(1, round((1-r)·H))` of each;
    /// - Q/K dims: keep `2·max(1, round((1-r)·dk/2))` (whole RoPE pairs);
    /// - V dims, MLP width: keep `max(1, round((1-r)·n))`;
    /// - layers: drop `n` layers just before the last one (deep middle layers are the most
    ///   redundant by block-influence scores; the estimate only depends on how many).
    pub fn from_ratios(spec: &ModelSpec, r: &PruneRatios) -> Result<Pruning> {
        for (what, v) in [
            ("heads", r.heads),
            ("qk_dims", r.qk_dims),
            ("v_dims", r.v_dims),
            ("mlp", r.mlp),
        ] {
            if !(0.0..1.0).contains(&v) {
                return Err(crate::error::out_of_range(
                    format!("prune ratio {what}"),
                    v,
                    "must be in [0, 1)",
                ));
            }
        }
        let n = spec.layers.len();
        if r.layers as usize >= n {
            return Err(crate::error::out_of_range(
                "prune layers",
                r.layers,
                format!("the model has {n} layers; at least one must remain"),
            ));
        }
        let keep =
            |ratio: f64, v: u32| -> u32 { ((1.0 - ratio) * f64::from(v)).round().max(1.0) as u32 };
        let mut per_layer = BTreeMap::new();
        for (i, l) in spec.layers.iter().enumerate() {
            let g = l.num_heads / l.num_kv_heads;
            let (heads, kv_heads) = if g == 1 {
                let h = keep(r.heads, l.num_heads);
                (h, h)
            } else {
                (keep(r.heads, g) * l.num_kv_heads, l.num_kv_heads)
            };
            per_layer.insert(
                i as u32,
                LayerPrune {
                    num_heads: Some(heads),
                    num_kv_heads: Some(kv_heads),
                    qk_head_dim: Some(2 * keep(r.qk_dims, l.qk_head_dim / 2)),
                    v_head_dim: Some(keep(r.v_dims, l.v_head_dim)),
                    intermediate_size: Some(keep(r.mlp, l.intermediate_size)),
                },
            );
        }
        let drop_layers = if r.layers == 0 {
            Vec::new()
        } else {
            let last = n as u32 - 1;
            (last - r.layers..last).collect()
        };
        Ok(Pruning {
            all_layers: LayerPrune::default(),
            per_layer,
            drop_layers,
        })
    }
}
