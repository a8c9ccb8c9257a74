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
use crate::model::{Model, TensorRole, Weights};
use crate::tokenizer::TextTokenizer;
use crate::weights::{LoadOptions, MemoryNeed, RawTensor};

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
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    use_sliding_window: Option<bool>,
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
            attention_bias: opt_bool("attention_bias")?,
            mlp_bias: opt_bool("mlp_bias")?,
            use_sliding_window: opt_bool("use_sliding_window")?,
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
    if hf.attention_bias == Some(true) && !desc.qkv_bias {
        return Err(EngineError::Unsupported(format!(
            "config.json `attention_bias` = true for `{arch}` (biases on q/k/v/o are not implemented for it)"
        )));
    }
    if hf.mlp_bias == Some(true) {
        return Err(EngineError::Unsupported(
            "config.json `mlp_bias` = true (MLP biases)".to_string(),
        ));
    }
    if hf.use_sliding_window == Some(true) {
        return Err(EngineError::Unsupported(format!(
            "config.json `use_sliding_window` = true for `{arch}` (sliding-window attention)"
        )));
    }
    if let Some(act) = &hf.hidden_act {
        if act != "silu" {
            return Err(EngineError::Unsupported(format!(
                "hidden_act `{act}` (only silu)"
            )));
        }
    }
    if hf.head_dim.is_none()
        && hf.num_attention_heads > 0
        && !hf.hidden_size.is_multiple_of(hf.num_attention_heads)
    {
        return Err(EngineError::Config(format!(
            "config.json `hidden_size` = {} is not a multiple of `num_attention_heads` = {} (and no `head_dim` gives the head size)",
            hf.hidden_size, hf.num_attention_heads
        )));
    }
    let mut config = LlamaConfig {
        name: hf.name.clone().unwrap_or_default(),
        arch,
        n_layers: hf.num_hidden_layers,
        hidden: hf.hidden_size,
        n_heads: hf.num_attention_heads,
        n_kv_heads: hf.num_key_value_heads.unwrap_or(hf.num_attention_heads),
        head_dim: hf.head_dim.unwrap_or(
            hf.hidden_size
                .checked_div(hf.num_attention_heads)
                .unwrap_or(0),
        ),
        ffn: hf.intermediate_size,
        vocab: hf.vocab_size,
        context_length: hf.max_position_embeddings.unwrap_or(2048),
        rope_base: hf.rope.theta.unwrap_or(10_000.0),
        rope_scaling: hf.rope.scaling.clone(),
        rms_eps: hf.rms_norm_eps.unwrap_or(1e-5),
        tied_embeddings: hf.tie_word_embeddings.unwrap_or(false),
        qkv_bias: desc.qkv_bias,
        qk_norm: desc.qk_norm,
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
    let eos = match &hf.eos_token_id {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::Array(a)) => a.first().and_then(|v| v.as_u64()),
        _ => None,
    };
    let eos = match eos {
        Some(id) if id < config.vocab as u64 => Some(id as u32),
        Some(id) => {
            return Err(EngineError::Config(format!(
                "config.json `eos_token_id` = {id} is not below `vocab_size` = {}",
                config.vocab
            )))
        }
        None => None,
    };
    let tokenizer = TextTokenizer::from_hf(tokenizer_json, tokenizer_config_json, eos)?;
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
    let weights = Weights::read_all(&config, options, |role, rows, cols| {
        let name = match role {
            TensorRole::Embed => "model.embed_tokens.weight".to_string(),
            TensorRole::FinalNorm => "model.norm.weight".to_string(),
            TensorRole::Output => "lm_head.weight".to_string(),
            TensorRole::Layer(i, part) => part.hf_name(i),
        };
        let w = read(&name, rows, cols)?;
        let w = match role {
            TensorRole::Layer(i, part) if part.along_qk() => {
                let qk_dim = shapes.get(i).map_or(config.head_dim, |s| s.qk_dim);
                let cols = if part.is_vector() { 1 } else { hidden };
                rotate_half_to_pairs(&w, qk_dim, cols)
            }
            _ => w,
        };
        Ok((name, RawTensor::F32(w)))
    })?;
    Ok((Model::new(config, weights), tokenizer))
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
/// row in the pair layout ([`rotate_half_to_pairs`]'s permutation).
pub(crate) fn rotate_half_source_rows(n_rows: usize, head_dim: usize) -> Vec<usize> {
    let half = head_dim / 2;
    let mut src = vec![0; n_rows];
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
