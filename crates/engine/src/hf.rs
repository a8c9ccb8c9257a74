//! Loading the HF layout: `config.json` + `tokenizer.json` (+ `tokenizer_config.json`) +
//! `*.safetensors` (F32, F16 or BF16 tensors).
//!
//! HF checkpoints store q/k projections for the "rotate half" RoPE layout (pairs `i` and
//! `i + d/2`); this loader permutes their rows into the GGUF layout (pairs `2i`, `2i+1`), the
//! same permutation llama.cpp's converter applies, so the forward pass has one RoPE.
//!
//! A structurally pruned model (written by [`crate::export`]) adds the key `edgefit_layers` to
//! `config.json`: one object per layer, `{n_heads, n_kv_heads, qk_dim, v_dim, ffn,
//! rope_pairs}` ([`crate::config::LayerShape`]), checked by [`LlamaConfig::validate`]. Its q/k
//! heads have `qk_dim` rows, in rotate-half order over the kept pairs (rows `i` and
//! `i + qk_dim/2` form kept pair `i`), and are permuted per layer with that `qk_dim`.

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors};

use crate::config::{Arch, LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::model::Model;
use crate::tensors::TensorRole;
use crate::tokenizer::TextTokenizer;
use crate::weights::Weights;
use crate::weights::{fused_rows, LoadOptions, MemoryNeed, RawTensor};

struct HfConfig {
    model_type: Option<String>,
    name: Option<String>,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    intermediate_size: usize,
    vocab_size: usize,
    rms_norm_eps: Option<f32>,
    max_position_embeddings: Option<usize>,
    tie_word_embeddings: Option<bool>,
    hidden_act: Option<String>,
    /// Gemma's name for the activation.
    hidden_activation: Option<String>,
    query_pre_attn_scalar: Option<f32>,
    sliding_window: Option<usize>,
    /// The file has a `sliding_window` key (null included: transformers then has no window,
    /// while an absent key takes the class default, [`crate::config::HfDefaults`]).
    has_sliding_window_key: bool,
    /// Per layer `sliding_attention` / `full_attention` (transformers 5).
    layer_types: Option<Vec<String>>,
    /// Every `n`-th layer is full, the others slide (transformers 4 Gemma 3).
    sliding_window_pattern: Option<usize>,
    attn_logit_softcapping: Option<f32>,
    final_logit_softcapping: Option<f32>,
    /// The file has the soft-capping keys (null included: no capping; an absent key takes the
    /// class default, Gemma 2's 50 and 30).
    has_softcap_keys: (bool, bool),
    partial_rotary_factor: Option<f32>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    use_sliding_window: Option<bool>,
    /// Qwen2/Qwen3: with `use_sliding_window`, layers from this index on slide.
    max_window_layers: Option<usize>,
    /// Gemma 3's `use_bidirectional_attention` (EmbeddingGemma: no causal mask).
    use_bidirectional_attention: Option<bool>,
    /// RoPE base and scaling, read by the estimator's one parser (both transformers layouts).
    rope: edgefit_estimate::HfRope,
    eos_token_id: Option<serde_json::Value>,
    /// Per-layer shapes of a pruned model (see the module docs).
    edgefit_layers: Option<serde_json::Value>,
}

impl HfConfig {
    /// Reads the fields one by one so an error names the field and the value it has.
    fn parse(text: &str) -> Result<HfConfig> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| EngineError::Config(format!("config.json is not JSON: {e}")))?;
        let serde_json::Value::Object(obj) = &v else {
            return Err(EngineError::Config(format!(
                "config.json is {}, not a JSON object",
                json_kind(&v)
            )));
        };
        // A multimodal checkpoint (Gemma 3 4B and up: `Gemma3ForConditionalGeneration`) keeps
        // its decoder's shape under `text_config` and its weights beside a vision tower, under
        // other names: refused by name rather than as a config without `hidden_size`.
        if obj.contains_key("text_config") && !obj.contains_key("hidden_size") {
            let class = obj
                .get("architectures")
                .and_then(|a| a.get(0))
                .and_then(|c| c.as_str())
                .unwrap_or("a multimodal model");
            return Err(EngineError::Unsupported(format!(
                "config.json of `{class}`: a multimodal checkpoint (its decoder under `text_config`, its weights beside a vision tower) is not loaded; use the text model alone (a GGUF of it, or an export as the text-only `*ForCausalLM` class)"
            )));
        }
        let rope = edgefit_estimate::rope_from_hf_config(&v).map_err(from_estimate)?;
        let bad = |key: &str, v: &serde_json::Value, expected: &str| {
            let mut shown = v.to_string();
            if shown.len() > 60 {
                shown = format!("{}...", shown.chars().take(60).collect::<String>());
            }
            EngineError::Config(format!("config.json `{key}` = {shown} is not {expected}"))
        };
        let present = |key: &str| obj.get(key).filter(|v| !v.is_null());
        let opt_usize = |key: &str| -> Result<Option<usize>> {
            present(key)
                .map(|v| {
                    v.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| bad(key, v, "a non-negative integer"))
                })
                .transpose()
        };
        let req_usize = |key: &str| -> Result<usize> {
            opt_usize(key)?
                .ok_or_else(|| EngineError::Config(format!("config.json has no `{key}`")))
        };
        let opt_f32 = |key: &str| -> Result<Option<f32>> {
            present(key)
                .map(|v| {
                    v.as_f64()
                        .map(|f| f as f32)
                        .filter(|f| f.is_finite())
                        .ok_or_else(|| bad(key, v, "a finite number"))
                })
                .transpose()
        };
        let opt_str = |key: &str| -> Result<Option<String>> {
            present(key)
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(key, v, "a string"))
                })
                .transpose()
        };
        let opt_bool = |key: &str| -> Result<Option<bool>> {
            present(key)
                .map(|v| v.as_bool().ok_or_else(|| bad(key, v, "a bool")))
                .transpose()
        };
        Ok(HfConfig {
            model_type: opt_str("model_type")?,
            name: opt_str("_name_or_path")?,
            hidden_size: req_usize("hidden_size")?,
            num_hidden_layers: req_usize("num_hidden_layers")?,
            num_attention_heads: req_usize("num_attention_heads")?,
            num_key_value_heads: opt_usize("num_key_value_heads")?,
            head_dim: opt_usize("head_dim")?,
            intermediate_size: req_usize("intermediate_size")?,
            vocab_size: req_usize("vocab_size")?,
            rms_norm_eps: opt_f32("rms_norm_eps")?,
            max_position_embeddings: opt_usize("max_position_embeddings")?,
            tie_word_embeddings: present("tie_word_embeddings")
                .map(|v| {
                    v.as_bool()
                        .ok_or_else(|| bad("tie_word_embeddings", v, "a bool"))
                })
                .transpose()?,
            hidden_act: opt_str("hidden_act")?,
            hidden_activation: opt_str("hidden_activation")?,
            query_pre_attn_scalar: opt_f32("query_pre_attn_scalar")?,
            sliding_window: opt_usize("sliding_window")?,
            has_sliding_window_key: obj.contains_key("sliding_window"),
            layer_types: present("layer_types")
                .map(|v| {
                    v.as_array()
                        .and_then(|a| {
                            a.iter()
                                .map(|t| t.as_str().map(str::to_string))
                                .collect::<Option<Vec<_>>>()
                        })
                        .ok_or_else(|| bad("layer_types", v, "an array of strings"))
                })
                .transpose()?,
            sliding_window_pattern: match opt_usize("sliding_window_pattern")? {
                Some(p) => Some(p),
                None => opt_usize("_sliding_window_pattern")?,
            },
            attn_logit_softcapping: opt_f32("attn_logit_softcapping")?,
            final_logit_softcapping: opt_f32("final_logit_softcapping")?,
            has_softcap_keys: (
                obj.contains_key("attn_logit_softcapping"),
                obj.contains_key("final_logit_softcapping"),
            ),
            partial_rotary_factor: opt_f32("partial_rotary_factor")?,
            attention_bias: opt_bool("attention_bias")?,
            mlp_bias: opt_bool("mlp_bias")?,
            use_sliding_window: opt_bool("use_sliding_window")?,
            max_window_layers: opt_usize("max_window_layers")?,
            use_bidirectional_attention: opt_bool("use_bidirectional_attention")?,
            rope,
            eos_token_id: present("eos_token_id").cloned(),
            edgefit_layers: present("edgefit_layers").cloned(),
        })
    }
}

/// The estimator's parse errors in the engine's terms: what it does not implement stays
/// [`EngineError::Unsupported`], the rest is a bad config.
pub(crate) fn from_estimate(e: edgefit_estimate::EstimateError) -> EngineError {
    match e {
        edgefit_estimate::EstimateError::UnsupportedFeature { .. } => {
            EngineError::Unsupported(e.to_string())
        }
        other => EngineError::Config(other.to_string()),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a bool",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Builds a model from HF files already in memory. `shards` are the bytes of each
/// `.safetensors` file. No memory budget: see [`load_hf_within`].
pub fn load_hf(
    config_json: &str,
    tokenizer_json: &[u8],
    tokenizer_config_json: Option<&str>,
    shards: &[&[u8]],
    options: LoadOptions,
) -> Result<(Model, TextTokenizer)> {
    load_hf_within(
        config_json,
        tokenizer_json,
        tokenizer_config_json,
        shards,
        options,
        None,
    )
}

/// [`load_hf`], refusing with [`EngineError::OverBudget`] (before converting any tensor) a
/// model that needs more than `memory_budget` bytes ([`crate::weights::MemoryNeed`]; the
/// shards' own bytes are the caller's).
pub fn load_hf_within(
    config_json: &str,
    tokenizer_json: &[u8],
    tokenizer_config_json: Option<&str>,
    shards: &[&[u8]],
    options: LoadOptions,
    memory_budget: Option<u64>,
) -> Result<(Model, TextTokenizer)> {
    let hf = HfConfig::parse(config_json)?;
    let arch = hf.model_type.clone().unwrap_or_default();
    let desc = Arch::named(&arch, "config.json model_type")?;
    if hf.attention_bias == Some(true) && !desc.qkv_bias && !desc.config_biases {
        return Err(EngineError::Unsupported(format!(
            "config.json `attention_bias` = true for `{arch}` (biases on q/k/v/o are not implemented for it)"
        )));
    }
    if hf.mlp_bias == Some(true) && !desc.config_biases {
        return Err(EngineError::Unsupported(format!(
            "config.json `mlp_bias` = true for `{arch}` (MLP biases are implemented for llama only)"
        )));
    }
    // Llama: `attention_bias` puts biases on q, k, v and o, `mlp_bias` on gate, up and down
    // (transformers' `LlamaAttention` / `LlamaMLP`).
    let attention_bias = desc.config_biases && hf.attention_bias == Some(true);
    let mlp_bias = desc.config_biases && hf.mlp_bias == Some(true);
    if hf.use_sliding_window == Some(true) && !desc.max_window_layers {
        return Err(EngineError::Unsupported(format!(
            "config.json `use_sliding_window` = true for `{arch}` (sliding-window attention)"
        )));
    }
    if hf.use_bidirectional_attention == Some(true) {
        return Err(EngineError::Unsupported(format!(
            "config.json `use_bidirectional_attention` = true for `{arch}` (attention without the causal mask)"
        )));
    }
    let act = hf.hidden_activation.as_ref().or(hf.hidden_act.as_ref());
    if let Some(act) = act {
        if act != desc.activation.hf_name() {
            return Err(EngineError::Unsupported(format!(
                "hidden_act `{act}` for `{arch}` (only {})",
                desc.activation.hf_name()
            )));
        }
    }
    if !desc.softcapping {
        for (key, v) in [
            ("attn_logit_softcapping", hf.attn_logit_softcapping),
            ("final_logit_softcapping", hf.final_logit_softcapping),
        ] {
            if let Some(v) = v {
                return Err(EngineError::Unsupported(format!(
                    "config.json `{key}` = {v} for `{arch}` (logit soft-capping)"
                )));
            }
        }
    }
    let defaults = desc.hf_defaults;
    let mut hf = hf;
    if !hf.has_sliding_window_key {
        hf.sliding_window = defaults.sliding_window;
    }
    if !hf.has_softcap_keys.0 {
        hf.attn_logit_softcapping = defaults.softcaps.0;
    }
    if !hf.has_softcap_keys.1 {
        hf.final_logit_softcapping = defaults.softcaps.1;
    }
    let hf = hf;
    if hf.head_dim.or(defaults.head_dim).is_none()
        && hf.num_attention_heads > 0
        && !hf.hidden_size.is_multiple_of(hf.num_attention_heads)
    {
        return Err(EngineError::Config(format!(
            "config.json `hidden_size` = {} is not a multiple of `num_attention_heads` = {} (and no `head_dim` gives the head size)",
            hf.hidden_size, hf.num_attention_heads
        )));
    }
    let head_dim = hf.head_dim.or(defaults.head_dim).unwrap_or(
        hf.hidden_size
            .checked_div(hf.num_attention_heads)
            .unwrap_or(0),
    );
    let context_length = hf.max_position_embeddings.unwrap_or(defaults.context);
    let (sliding_window, sliding_layers) = sliding_layout(&hf, desc, context_length)?;
    let rope_dim = match hf.partial_rotary_factor {
        None => None,
        Some(1.0) => None,
        Some(f) => {
            let r = (head_dim as f32 * f) as usize;
            if !(f > 0.0 && f < 1.0) || r == 0 || !r.is_multiple_of(2) {
                return Err(EngineError::Config(format!(
                    "config.json `partial_rotary_factor` = {f} gives {r} rotated dims of {head_dim} (must be even and above 0)"
                )));
            }
            Some(r)
        }
    };
    let mut config = LlamaConfig {
        name: hf.name.clone().unwrap_or_default(),
        arch: desc.name.to_string(),
        n_layers: hf.num_hidden_layers,
        hidden: hf.hidden_size,
        n_heads: hf.num_attention_heads,
        n_kv_heads: hf
            .num_key_value_heads
            .or(defaults.kv_heads)
            .unwrap_or(hf.num_attention_heads),
        head_dim,
        ffn: hf.intermediate_size,
        vocab: hf.vocab_size,
        context_length,
        rope_base: hf.rope.theta.unwrap_or(defaults.rope_theta),
        rope_scaling: hf.rope.scaling.clone(),
        rms_eps: hf.rms_norm_eps.unwrap_or(defaults.rms_norm_eps),
        tied_embeddings: hf.tie_word_embeddings.unwrap_or(desc.tied_by_default),
        qkv_bias: desc.qkv_bias || attention_bias,
        o_bias: attention_bias,
        mlp_bias,
        qk_norm: desc.qk_norm,
        embed_scale: desc.embed_scale,
        post_norms: desc.post_norms,
        activation: desc.activation,
        query_pre_attn_scalar: hf.query_pre_attn_scalar.or(defaults.query_pre_attn_scalar),
        sliding_window,
        sliding_layers,
        rope_local_base: hf
            .rope
            .local_theta
            .or(defaults.rope_local_base)
            .filter(|_| sliding_window.is_some()),
        rope_dim,
        attn_softcap: hf.attn_logit_softcapping,
        final_softcap: hf.final_logit_softcapping,
        layers: None,
    };
    config.validate()?;
    if let Some(layers) = hf.edgefit_layers.filter(|v| !v.is_null()) {
        let named = |m: String| EngineError::Config(format!("config.json `edgefit_layers`: {m}"));
        let layers: Vec<LayerShape> =
            serde_json::from_value(layers).map_err(|e| named(e.to_string()))?;
        config.layers = Some(layers);
        config.validate().map_err(|e| match e {
            EngineError::Config(m) => named(m),
            other => other,
        })?;
    }
    let eos = eos_ids(hf.eos_token_id.as_ref(), config.vocab)?;
    let tokenizer = TextTokenizer::from_hf(tokenizer_json, tokenizer_config_json, &eos)?;
    tokenizer.check_fits(config.vocab)?;
    MemoryNeed::of(&config, &options).check(memory_budget)?;

    let mut files = Vec::with_capacity(shards.len());
    for (i, s) in shards.iter().enumerate() {
        files.push(
            SafeTensors::deserialize(s)
                .map_err(|e| EngineError::Format(format!("safetensors shard {i}: {e}")))?,
        );
    }
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, f) in files.iter().enumerate() {
        for name in f.names() {
            index.insert(name.to_string(), i);
        }
    }
    let read = |name: &str, rows: usize, cols: usize| -> Result<Vec<f32>> {
        let file = index
            .get(name)
            .ok_or_else(|| EngineError::tensor(name, "missing"))?;
        let view = files[*file]
            .tensor(name)
            .map_err(|e| EngineError::tensor(name, e.to_string()))?;
        let shape = view.shape();
        let ok = if rows == 1 {
            shape == [cols]
        } else {
            shape == [rows, cols]
        };
        if !ok {
            return Err(EngineError::tensor(
                name,
                format!("shape {shape:?}, expected [{rows}, {cols}]"),
            ));
        }
        to_f32(name, view.dtype(), view.data())
    };
    let (shapes, hidden) = (config.layer_shapes(), config.hidden);
    // Phi-3's fused tensors: the last one read, which the next part slices again.
    let mut fused: Option<(String, Vec<f32>)> = None;
    let weights = Weights::read_all(&config, options, |role, rows, cols| {
        let name = match role {
            TensorRole::Embed => "model.embed_tokens.weight".to_string(),
            TensorRole::FinalNorm => "model.norm.weight".to_string(),
            TensorRole::Output => "lm_head.weight".to_string(),
            TensorRole::Layer(i, part) => part.hf_name(&desc, i),
        };
        let w = match role {
            TensorRole::Layer(i, part) if desc.fused && fused_rows(part, &shapes[i]).is_some() => {
                let (range, total) = fused_rows(part, &shapes[i]).unwrap_or_default();
                if fused.as_ref().is_none_or(|(n, _)| *n != name) {
                    fused = Some((name.clone(), read(&name, total, cols)?));
                }
                let all = fused.as_ref().map_or(&[][..], |(_, w)| &w[..]);
                all[range.start * cols..range.end * cols].to_vec()
            }
            _ => read(&name, rows, cols)?,
        };
        let mut w = match role {
            TensorRole::Layer(i, part) if part.along_qk() => {
                let qk_dim = shapes.get(i).map_or(config.head_dim, |s| s.qk_dim);
                let rot = config.rope_dim.unwrap_or(qk_dim);
                let cols = if part.is_vector() { 1 } else { hidden };
                rotate_half_to_pairs_partial(&w, qk_dim, rot, cols)
            }
            _ => w,
        };
        let is_norm = match role {
            TensorRole::FinalNorm => true,
            TensorRole::Layer(_, part) => part.is_norm(),
            _ => false,
        };
        if desc.hf_norm_plus_one && is_norm {
            // Gemma: x · (1 + w), used as stored from here on (GGUF files bake this in).
            w.iter_mut().for_each(|v| *v += 1.0);
        }
        Ok((name, RawTensor::F32(w)))
    })?;
    Ok((Model::new(config, weights), tokenizer))
}

/// The sliding window and which layers use it, from `sliding_window` with `layer_types`
/// (transformers 5) or `sliding_window_pattern` (transformers 4 Gemma 3: layer `i` slides unless
/// `(i + 1) % pattern == 0`). Only architectures with a GGUF sliding layout
/// ([`Arch::gguf_swa`], Gemma 3) or whose every layer slides with a window
/// ([`Arch::every_layer_slides`], Mistral, Phi-3) slide; a sliding window elsewhere is refused by
/// the `use_sliding_window` check or ignored when that flag is absent, as transformers does for
/// Qwen2.
fn sliding_layout(hf: &HfConfig, desc: Arch, context: usize) -> Result<(Option<usize>, Vec<bool>)> {
    let n = hf.num_hidden_layers;
    if desc.max_window_layers && hf.use_sliding_window == Some(true) {
        // transformers' Qwen2/Qwen3 configs: the window (class default 4096, none when the
        // file says null) on the layers `layer_types` marks, or else on every layer from
        // `max_window_layers` (default 28) on; the sliding layers keep the global RoPE.
        let Some(window) = hf.sliding_window else {
            return Ok((None, Vec::new()));
        };
        let layers = match &hf.layer_types {
            Some(types) => layer_kinds(types, n)?,
            None => {
                let from = hf.max_window_layers.unwrap_or(QWEN_MAX_WINDOW_LAYERS);
                (0..n).map(|i| i >= from).collect()
            }
        };
        return Ok(if layers.iter().any(|&s| s) {
            (Some(window), layers)
        } else {
            (None, Vec::new())
        });
    }
    let Some(swa) = desc.gguf_swa else {
        if desc.every_layer_slides {
            // Every layer slides when the window is narrower than the context (a window as
            // wide as the context never leaves a key out: full attention exactly).
            return Ok(match hf.sliding_window {
                Some(w) if w < context => (Some(w), vec![true; n]),
                _ => (None, Vec::new()),
            });
        }
        if let Some(types) = &hf.layer_types {
            if types.iter().any(|t| t != "full_attention") {
                return Err(EngineError::Unsupported(format!(
                    "config.json `layer_types` with sliding layers for `{}` (sliding-window attention)",
                    desc.name
                )));
            }
        }
        return Ok((None, Vec::new()));
    };
    let Some(window) = hf.sliding_window else {
        return Ok((None, Vec::new()));
    };
    let layers = match &hf.layer_types {
        Some(types) => layer_kinds(types, n)?,
        None => {
            let p = hf.sliding_window_pattern.unwrap_or(swa.pattern);
            if p == 0 {
                return Err(EngineError::Config(
                    "config.json `sliding_window_pattern` = 0".to_string(),
                ));
            }
            (0..n).map(|i| (i + 1) % p != 0).collect()
        }
    };
    Ok((Some(window), layers))
}

/// transformers' `max_window_layers` default (Qwen2Config, Qwen3Config).
const QWEN_MAX_WINDOW_LAYERS: usize = 28;

/// `layer_types` as sliding (true) or full (false), one entry per layer.
fn layer_kinds(types: &[String], n: usize) -> Result<Vec<bool>> {
    if types.len() != n {
        return Err(EngineError::Config(format!(
            "config.json `layer_types` has {} entries for {n} layers",
            types.len()
        )));
    }
    types
        .iter()
        .map(|t| match t.as_str() {
            "sliding_attention" => Ok(true),
            "full_attention" => Ok(false),
            other => Err(EngineError::Unsupported(format!(
                "config.json `layer_types` entry `{other}` (supported: sliding_attention, full_attention)"
            ))),
        })
        .collect()
}

/// Reorders the rows of a q/k projection (`heads × head_dim` rows of `cols`) from HF's
/// rotate-half layout to adjacent pairs: new row `2i + j` of a head is old row `j·d/2 + i`.
pub(crate) fn rotate_half_to_pairs(w: &[f32], head_dim: usize, cols: usize) -> Vec<f32> {
    permute_heads(
        w,
        head_dim,
        cols,
        |i, j, half| j * half + i,
        |i, j| 2 * i + j,
    )
}

/// [`rotate_half_to_pairs`] over the first `rot` rows of each head only (partial RoPE, Phi-3:
/// HF rotates halves of the first `rot` dims); the other rows of each head stay in place.
pub(crate) fn rotate_half_to_pairs_partial(
    w: &[f32],
    head_dim: usize,
    rot: usize,
    cols: usize,
) -> Vec<f32> {
    if rot >= head_dim {
        return rotate_half_to_pairs(w, head_dim, cols);
    }
    let mut out = w.to_vec();
    for (head_in, head_out) in w
        .chunks_exact(head_dim * cols)
        .zip(out.chunks_exact_mut(head_dim * cols))
    {
        let rotated = rotate_half_to_pairs(&head_in[..rot * cols], rot, cols);
        head_out[..rot * cols].copy_from_slice(&rotated);
    }
    out
}

/// The inverse of [`rotate_half_to_pairs`] (used to write HF files from GGUF-layout weights).
pub(crate) fn pairs_to_rotate_half(w: &[f32], head_dim: usize, cols: usize) -> Vec<f32> {
    permute_heads(
        w,
        head_dim,
        cols,
        |i, j, _| 2 * i + j,
        |i, j| j * (head_dim / 2) + i,
    )
}

/// For the rows of a q/k tensor of `n_rows` rows (heads of `head_dim` rows; a bias or norm
/// vector counts its entries as rows): the source row, in HF's rotate-half layout, of every
/// row in the pair layout ([`rotate_half_to_pairs_partial`]'s permutation over the first `rot`
/// rows of each head).
pub(crate) fn rotate_half_source_rows(n_rows: usize, head_dim: usize, rot: usize) -> Vec<usize> {
    // Only the first `rot` rows of each head rotate (partial RoPE); the rest stay in place.
    let half = rot.min(head_dim) / 2;
    let mut src: Vec<usize> = (0..n_rows).collect();
    for head in 0..n_rows / head_dim.max(1) {
        let base = head * head_dim;
        for i in 0..half {
            for j in 0..2 {
                src[base + 2 * i + j] = base + j * half + i;
            }
        }
    }
    src
}

fn permute_heads(
    w: &[f32],
    head_dim: usize,
    cols: usize,
    src: impl Fn(usize, usize, usize) -> usize,
    dst: impl Fn(usize, usize) -> usize,
) -> Vec<f32> {
    let half = head_dim / 2;
    let mut out = vec![0.0f32; w.len()];
    for (head_in, head_out) in w
        .chunks_exact(head_dim * cols)
        .zip(out.chunks_exact_mut(head_dim * cols))
    {
        for i in 0..half {
            for j in 0..2 {
                let (s, d) = (src(i, j, half), dst(i, j));
                head_out[d * cols..(d + 1) * cols]
                    .copy_from_slice(&head_in[s * cols..(s + 1) * cols]);
            }
        }
    }
    out
}

fn to_f32(name: &str, dtype: Dtype, data: &[u8]) -> Result<Vec<f32>> {
    let v: Vec<f32> = match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => {
            return Err(EngineError::tensor(
                name,
                format!("dtype {other:?} (supported: F32, F16, BF16)"),
            ))
        }
    };
    if let Some(bad) = v.iter().position(|x| !x.is_finite()) {
        return Err(EngineError::tensor(
            name,
            format!("value {} at index {bad} is not finite", v[bad]),
        ));
    }
    Ok(v)
}

/// Every id of config.json's `eos_token_id`, a number or a list (Llama 3.x Instruct:
/// `[128001, 128008, 128009]`, the chat turn ending with the last): each one stops generation.
/// An id at or above `vocab_size`, or an entry that is not a token id, is refused by name.
fn eos_ids(v: Option<&serde_json::Value>, vocab: usize) -> Result<Vec<u32>> {
    let items: Vec<&serde_json::Value> = match v {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(a)) => a.iter().collect(),
        Some(one) => vec![one],
    };
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id = item.as_u64().ok_or_else(|| {
            EngineError::Config(format!(
                "config.json `eos_token_id` entry {item} is not a token id"
            ))
        })?;
        if id >= vocab as u64 {
            return Err(EngineError::Config(format!(
                "config.json `eos_token_id` = {id} is not below `vocab_size` = {vocab}"
            )));
        }
        if !ids.contains(&(id as u32)) {
            ids.push(id as u32);
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_inverse_and_move_rows_as_documented() {
        let (hd, cols, heads) = (8, 3, 2);
        let w: Vec<f32> = (0..heads * hd * cols).map(|v| v as f32).collect();
        let p = rotate_half_to_pairs(&w, hd, cols);
        assert_eq!(pairs_to_rotate_half(&p, hd, cols), w);
        // Head 0: new row 1 (pair 0, second element) is old row 4 (= d/2 + 0).
        assert_eq!(&p[cols..2 * cols], &w[4 * cols..5 * cols]);
        // Head 1: new row 2 is old row 1.
        let base = hd * cols;
        assert_eq!(
            &p[base + 2 * cols..base + 3 * cols],
            &w[base + cols..base + 2 * cols]
        );
    }
}
