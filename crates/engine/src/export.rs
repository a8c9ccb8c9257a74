//! Writing a loaded (possibly pruned or converted) model back out as files other tools and the
//! engine itself read.
//!
//! [`hf_files`] returns the HF layout in memory, so the page can offer the files for download
//! and the CLI can write them ([`save_hf`]):
//!
//! | file | what |
//! |---|---|
//! | `config.json` | the architecture's `*ForCausalLM` keys (`hidden_size`, `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`, `head_dim`, `intermediate_size`, `vocab_size`, `max_position_embeddings`, `rope_theta`, `rms_norm_eps`, `tie_word_embeddings`, `hidden_act`, `torch_dtype`, `bos_token_id`/`eos_token_id` when known (every stop token, a list when several), `rope_scaling` (`linear`, `llama3`, `yarn`, `longrope`) when scaled; per-pair divisors from a GGUF `rope_freqs.weight` are refused), plus `edgefit_layers` for a pruned model |
//! | `tokenizer.json` | the tokenizer ([`TextTokenizer::to_json`]) |
//! | `tokenizer_config.json` | `bos_token`, `eos_token`, `add_bos_token`, `chat_template` when the tokenizer knows them |
//! | `model.safetensors` | every tensor under its HF name, in the chosen [`ExportDType`] (norms too), with q/k rows in HF's rotate-half order |
//!
//! ## `edgefit_layers`
//!
//! A structurally pruned model ([`LlamaConfig::layers`]) keeps the unpruned model's global
//! fields (`num_attention_heads`, `head_dim`, `intermediate_size`, ... still set the RoPE
//! frequencies and the attention scale) and adds `edgefit_layers`: one object per layer,
//! `{"n_heads", "n_kv_heads", "qk_dim", "v_dim", "ffn", "rope_pairs"}` (the fields of
//! [`LayerShape`]). Tensors have the pruned shapes: `q_proj` is `n_heads·qk_dim × hidden`,
//! `k_proj` `n_kv_heads·qk_dim × hidden`, `v_proj` `n_kv_heads·v_dim × hidden`, `o_proj`
//! `hidden × n_heads·v_dim`, gate/up `ffn × hidden`, down `hidden × ffn`. Within each q/k head
//! the rows are in rotate-half order over the kept pairs: rows `i` and `i + qk_dim/2` form kept
//! pair `i`, which rotates with the unpruned head's frequency of pair `rope_pairs[i]`
//! (`θ = rope_theta^(−2·rope_pairs[i]/head_dim)`). The engine's HF loader reads it back
//! ([`crate::hf::load_hf`]); `transformers` cannot load such a model (its layers differ in
//! shape), while an unpruned export is an ordinary `LlamaForCausalLM` checkpoint.
//!
//! Matrices are written from whatever format they are held in through [`Matrix::to_f32`], so a
//! quantized model exports its dequantized values.
//!
//! [`gguf_bytes`] writes one GGUF file (candle-core's writer, GGUF v2) that the engine's GGUF
//! loader reads: `{arch}.*` metadata with the unpruned shape, the tokenizer as `tokenizer.ggml.*`
//! fields (byte-level BPE with a pre-tokenizer edgefit names: `gpt2`, `smollm`, `llama3`,
//! `qwen2`), the chat template, RoPE scaling (`rope.scaling.type = linear` with its factor, or
//! Llama 3.x as the per-pair divisors tensor `rope_freqs.weight`, as llama.cpp writes it; YaRN
//! as `rope.scaling.type = yarn` with its factor, original context and betas when its attention
//! factor is llama.cpp's; LongRoPE as the `rope_factors_short/long.weight` tensors with
//! `rope.scaling.attn_factor` and `.original_context_length`), and for a pruned model the `edgefit.layers.*` arrays described
//! in [`crate::gguf`]. Tensors are F32, F16 or Q8_0 ([`GgufDType`]; norms always F32; a
//! matrix whose width is not a multiple of 32 falls back from Q8_0 to F16). Q8_0 goes through
//! ggml's quantizer (candle-core's), which reproduces Q8_0 blocks read from a GGUF exactly.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use candle_core::quantized::gguf_file::{self, Value as GValue};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use edgefit_estimate::RopeScaling;
use edgefit_kernels::Matrix;
use serde_json::{json, Map, Value};

use crate::config::{LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::hf::pairs_to_rotate_half;
use crate::model::Model;
use crate::tensors::LayerPart;
use crate::tokenizer::{GgufTokenizerFields, TextTokenizer};

/// The number format tensors are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExportDType {
    F32,
    F16,
    BF16,
}

impl ExportDType {
    /// Every format, in the order the page lists them.
    pub const ALL: [ExportDType; 3] = [ExportDType::F32, ExportDType::F16, ExportDType::BF16];

    /// `f32`, `f16` or `bf16`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportDType::F32 => "f32",
            ExportDType::F16 => "f16",
            ExportDType::BF16 => "bf16",
        }
    }

    /// The `torch_dtype` of `config.json`.
    pub fn torch_name(self) -> &'static str {
        match self {
            ExportDType::F32 => "float32",
            ExportDType::F16 => "float16",
            ExportDType::BF16 => "bfloat16",
        }
    }

    fn safetensors_name(self) -> &'static str {
        match self {
            ExportDType::F32 => "F32",
            ExportDType::F16 => "F16",
            ExportDType::BF16 => "BF16",
        }
    }

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            ExportDType::F32 => 4,
            ExportDType::F16 | ExportDType::BF16 => 2,
        }
    }
}

impl std::fmt::Display for ExportDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExportDType {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        ExportDType::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| EngineError::Setting {
                name: "dtype",
                value: s.to_string(),
                expected: "one of f32, f16, bf16".to_string(),
            })
    }
}

/// The model as HF files, `(file name, bytes)`: `config.json`, `tokenizer.json`,
/// `tokenizer_config.json`, `model.safetensors` (see the module docs). Peak memory is the
/// safetensors file plus one tensor in f32.
pub fn hf_files(
    model: &Model,
    tokenizer: &TextTokenizer,
    dtype: ExportDType,
) -> Result<Vec<(String, Vec<u8>)>> {
    let config = config_json(&model.config, tokenizer, dtype)?;
    let tokenizer_config = tokenizer_config_json(tokenizer)?;
    let tokenizer_json = tokenizer.to_json()?;
    let safetensors = safetensors_bytes(model, dtype)?;
    Ok(vec![
        ("config.json".to_string(), config.into_bytes()),
        ("tokenizer.json".to_string(), tokenizer_json.into_bytes()),
        (
            "tokenizer_config.json".to_string(),
            tokenizer_config.into_bytes(),
        ),
        ("model.safetensors".to_string(), safetensors),
    ])
}

/// Writes [`hf_files`] into `dir` (created if missing) and returns the paths written.
pub fn save_hf(
    model: &Model,
    tokenizer: &TextTokenizer,
    dir: &Path,
    dtype: ExportDType,
) -> Result<Vec<PathBuf>> {
    write_files(dir, &hf_files(model, tokenizer, dtype)?)
}

/// Writes `(name, bytes)` files into `dir` (created if missing); returns the paths written.
pub fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<Vec<PathBuf>> {
    let io = |path: &Path, source| EngineError::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut written = Vec::with_capacity(files.len());
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}

/// An f32 as the JSON number with its shortest decimal (`1e-5`, not `9.99999974e-6`), which
/// reads back as the same f32.
fn short_f32(v: f32) -> Value {
    v.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

/// `config.json` for `config` (see the module docs).
pub fn config_json(
    config: &LlamaConfig,
    tokenizer: &TextTokenizer,
    dtype: ExportDType,
) -> Result<String> {
    config.validate()?;
    let c = config;
    let arch = exportable(c)?;
    let mut v = json!({
        "architectures": [arch.hf_class],
        "model_type": arch.name,
        "_name_or_path": c.name,
        "hidden_size": c.hidden,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_kv_heads,
        "head_dim": c.head_dim,
        "intermediate_size": c.ffn,
        "vocab_size": c.vocab,
        "max_position_embeddings": c.context_length,
        "rope_theta": short_f32(c.rope_base),
        "rms_norm_eps": short_f32(c.rms_eps),
        "tie_word_embeddings": c.tied_embeddings,
        "hidden_act": "silu",
        "mlp_bias": c.mlp_bias,
        "torch_dtype": dtype.torch_name(),
    });
    let obj = v
        .as_object_mut()
        .ok_or_else(|| EngineError::Config("config.json is not an object".to_string()))?;
    let id = |text: &str| {
        (!text.is_empty())
            .then(|| tokenizer.token_id(text))
            .flatten()
    };
    if let Some(bos) = tokenizer.bos_id() {
        obj.insert("bos_token_id".to_string(), bos.into());
    }
    // Every stop token, the end-of-sequence one first (a list when there are several, as Llama
    // 3.x Instruct's config.json has), so the files stop generation where this model does.
    if let Some(eos) = id(tokenizer.eos_text()).or(tokenizer.stop_ids().first().copied()) {
        let mut ids = vec![eos];
        ids.extend(tokenizer.stop_ids().iter().filter(|&&i| i != eos));
        let value = match ids[..] {
            [one] => one.into(),
            _ => ids.into(),
        };
        obj.insert("eos_token_id".to_string(), value);
    }
    if arch.config_biases {
        // Llama's one `attention_bias` key covers q, k, v and o together.
        if c.qkv_bias != c.o_bias {
            return Err(EngineError::Unsupported(format!(
                "exporting `{}` with q/k/v biases {} but an output-projection bias {}: config.json's `attention_bias` sets all four together",
                arch.name,
                if c.qkv_bias { "present" } else { "absent" },
                if c.o_bias { "present" } else { "absent" },
            )));
        }
        obj.insert("attention_bias".to_string(), c.o_bias.into());
    } else if !c.qkv_bias {
        obj.insert("attention_bias".to_string(), false.into());
    }
    if let Some(layers) = &c.layers {
        obj.insert("edgefit_layers".to_string(), layers_json(layers)?);
    }
    match &c.rope_scaling {
        RopeScaling::None => {}
        RopeScaling::Linear { factor } => {
            obj.insert(
                "rope_scaling".to_string(),
                json!({"rope_type": "linear", "factor": short_f32(*factor)}),
            );
        }
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_context,
        } => {
            obj.insert(
                "rope_scaling".to_string(),
                json!({
                    "rope_type": "llama3",
                    "factor": short_f32(*factor),
                    "low_freq_factor": short_f32(*low_freq_factor),
                    "high_freq_factor": short_f32(*high_freq_factor),
                    "original_max_position_embeddings": original_context,
                }),
            );
        }
        RopeScaling::Divisors { .. } => {
            return Err(EngineError::Unsupported(
                "HF export of per-pair RoPE divisors (a GGUF `rope_freqs.weight`): config.json has no form for them; export GGUF instead".to_string(),
            ))
        }
        RopeScaling::Yarn {
            factor,
            original_context,
            beta_fast,
            beta_slow,
            truncate,
            attention_factor,
        } => {
            obj.insert(
                "rope_scaling".to_string(),
                json!({
                    "rope_type": "yarn",
                    "factor": short_f32(*factor),
                    "original_max_position_embeddings": original_context,
                    "beta_fast": short_f32(*beta_fast),
                    "beta_slow": short_f32(*beta_slow),
                    "truncate": truncate,
                    "attention_factor": *attention_factor as f64,
                }),
            );
        }
        RopeScaling::LongRope {
            short_factor,
            long_factor,
            original_context,
            attention_factor,
        } => {
            let list = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
            obj.insert(
                "rope_scaling".to_string(),
                json!({
                    "rope_type": "longrope",
                    "short_factor": list(short_factor),
                    "long_factor": list(long_factor),
                    "original_max_position_embeddings": original_context,
                    "attention_factor": *attention_factor as f64,
                }),
            );
        }
    }
    serde_json::to_string_pretty(&v).map_err(|e| EngineError::Config(format!("config.json: {e}")))
}

fn layers_json(layers: &[LayerShape]) -> Result<Value> {
    serde_json::to_value(layers)
        .map_err(|e| EngineError::Config(format!("config.json `edgefit_layers`: {e}")))
}

/// `tokenizer_config.json`: BOS/EOS texts, whether BOS is prepended, the chat template.
pub fn tokenizer_config_json(tokenizer: &TextTokenizer) -> Result<String> {
    let mut m = Map::new();
    m.insert(
        "tokenizer_class".to_string(),
        "PreTrainedTokenizerFast".into(),
    );
    if !tokenizer.bos_text().is_empty() {
        m.insert("bos_token".to_string(), tokenizer.bos_text().into());
    }
    if !tokenizer.eos_text().is_empty() {
        m.insert("eos_token".to_string(), tokenizer.eos_text().into());
    }
    m.insert("add_bos_token".to_string(), tokenizer.add_bos().into());
    if let Some(t) = tokenizer.chat_template() {
        m.insert("chat_template".to_string(), t.into());
    }
    serde_json::to_string_pretty(&Value::Object(m))
        .map_err(|e| EngineError::Tokenizer(format!("tokenizer_config.json: {e}")))
}

/// Where a tensor's values come from.
enum Source<'a> {
    Vector(&'a [f32]),
    Matrix(&'a Matrix),
    /// A q/k projection: rows go back from pair order to rotate-half over heads of `qk_dim`.
    QkMatrix(&'a Matrix, usize),
    /// A q/k bias or norm weight: entries go back to rotate-half order the same way.
    QkVector(&'a [f32], usize),
}

impl Source<'_> {
    fn shape(&self) -> Vec<usize> {
        match self {
            Source::Vector(v) | Source::QkVector(v, _) => vec![v.len()],
            Source::Matrix(m) | Source::QkMatrix(m, _) => vec![m.rows(), m.cols()],
        }
    }

    fn values(&self) -> Vec<f32> {
        match self {
            Source::Vector(v) => v.to_vec(),
            Source::Matrix(m) => m.to_f32(),
            Source::QkMatrix(m, qk_dim) => pairs_to_rotate_half(&m.to_f32(), *qk_dim, m.cols()),
            Source::QkVector(v, qk_dim) => pairs_to_rotate_half(v, *qk_dim, 1),
        }
    }
}

/// Block `layer`'s tensors (`l`, shape `shape`) from the one table of parts, each with the name
/// `name(part, layer)` gives; q/k parts in rotate-half order when `rotate_half`.
fn layer_sources<'a>(
    l: &'a crate::weights::LayerWeights,
    shape: &LayerShape,
    layer: usize,
    rotate_half: bool,
    name: impl Fn(LayerPart, usize) -> String,
) -> Vec<(String, Source<'a>)> {
    LayerPart::ALL
        .iter()
        .filter_map(|&p| {
            let qk = rotate_half && p.along_qk();
            let src = match (l.vector(p), l.matrix(p)) {
                (Some(v), _) if qk => Source::QkVector(v, shape.qk_dim),
                (Some(v), _) => Source::Vector(v),
                (_, Some(m)) if qk => Source::QkMatrix(m, shape.qk_dim),
                (_, Some(m)) => Source::Matrix(m),
                _ => return None,
            };
            Some((name(p, layer), src))
        })
        .collect()
}

/// Every tensor of `model` under its HF name, in file order.
fn hf_tensors(model: &Model) -> Result<Vec<(String, Source<'_>)>> {
    let arch = exportable(&model.config)?;
    let w = &model.weights;
    let mut out = vec![(
        "model.embed_tokens.weight".to_string(),
        Source::Matrix(&w.embed),
    )];
    for (i, (l, shape)) in w.layers.iter().zip(model.config.layer_shapes()).enumerate() {
        out.extend(layer_sources(l, &shape, i, true, |p, i| {
            p.hf_name(&arch, i)
        }));
    }
    out.push((
        "model.norm.weight".to_string(),
        Source::Vector(&w.final_norm),
    ));
    if let Some(head) = &w.output {
        out.push(("lm_head.weight".to_string(), Source::Matrix(head)));
    }
    Ok(out)
}

/// The architecture of `c` if the exporters can write it: not one whose extra structure
/// (Gemma's `1 + w` norms, sandwich norms, sliding layers; Phi-3's fused tensors and partial
/// RoPE) has no writer yet ([`crate::config::Arch::exportable`]).
pub(crate) fn exportable(c: &LlamaConfig) -> Result<crate::config::Arch> {
    let arch = c.arch()?;
    if let (true, Some(w)) = (arch.exportable, c.sliding_window) {
        return Err(EngineError::Unsupported(format!(
            "exporting `{}` with a sliding window ({w} tokens): the writers do not write one, and without it the file would attend to every token",
            arch.name
        )));
    }
    if !arch.exportable {
        return Err(EngineError::Unsupported(format!(
            "exporting `{}` (its writer for Gemma-style norms, sliding layers and fused or partially rotated tensors is not implemented; only llama, mistral, qwen2 and qwen3 are written)",
            arch.name
        )));
    }
    Ok(arch)
}

/// Appends `values` in `dtype`, refusing values the format cannot hold (f16 overflow).
fn encode(name: &str, values: &[f32], dtype: ExportDType, out: &mut Vec<u8>) -> Result<()> {
    for (i, &x) in values.iter().enumerate() {
        let ok = match dtype {
            ExportDType::F32 => {
                out.extend_from_slice(&x.to_le_bytes());
                x.is_finite()
            }
            ExportDType::F16 => {
                let h = half::f16::from_f32(x);
                out.extend_from_slice(&h.to_le_bytes());
                h.is_finite()
            }
            ExportDType::BF16 => {
                let h = half::bf16::from_f32(x);
                out.extend_from_slice(&h.to_le_bytes());
                h.is_finite()
            }
        };
        if !ok {
            return Err(EngineError::tensor(
                name,
                format!("value {x} at index {i} does not fit {dtype}"),
            ));
        }
    }
    Ok(())
}

/// The model's tensors as one safetensors file: an 8-byte header length, the JSON header
/// (`__metadata__: {"format": "pt"}`, then per tensor its dtype, shape and byte range), padded
/// with spaces to 8 bytes, then the data in file order. Written directly (not through
/// `safetensors::serialize`, which wants every tensor's bytes at once) so the file is the only
/// whole copy.
pub fn safetensors_bytes(model: &Model, dtype: ExportDType) -> Result<Vec<u8>> {
    let tensors = hf_tensors(model)?;
    let mut header = Map::new();
    header.insert("__metadata__".to_string(), json!({ "format": "pt" }));
    let mut offset = 0usize;
    for (name, src) in &tensors {
        let shape = src.shape();
        let len = shape.iter().product::<usize>() * dtype.size();
        header.insert(
            name.clone(),
            json!({
                "dtype": dtype.safetensors_name(),
                "shape": shape,
                "data_offsets": [offset, offset + len],
            }),
        );
        offset += len;
    }
    let mut head = serde_json::to_vec(&Value::Object(header))
        .map_err(|e| EngineError::Format(format!("safetensors header: {e}")))?;
    head.resize(head.len().next_multiple_of(8), b' ');
    let mut out = Vec::with_capacity(8 + head.len() + offset);
    out.extend_from_slice(&(head.len() as u64).to_le_bytes());
    out.extend_from_slice(&head);
    for (name, src) in &tensors {
        encode(name, &src.values(), dtype, &mut out)?;
    }
    Ok(out)
}

/// Tensor types of a GGUF export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgufDType {
    F32,
    F16,
    /// ggml Q8_0 (int8, one f16 scale per 32 values).
    Q8_0,
}

impl GgufDType {
    /// Every type, in the order the page lists them.
    pub const ALL: [GgufDType; 3] = [GgufDType::F32, GgufDType::F16, GgufDType::Q8_0];

    /// `f32`, `f16` or `q8_0`.
    pub fn as_str(self) -> &'static str {
        match self {
            GgufDType::F32 => "f32",
            GgufDType::F16 => "f16",
            GgufDType::Q8_0 => "q8_0",
        }
    }

    fn ggml(self) -> GgmlDType {
        match self {
            GgufDType::F32 => GgmlDType::F32,
            GgufDType::F16 => GgmlDType::F16,
            GgufDType::Q8_0 => GgmlDType::Q8_0,
        }
    }
}

impl std::fmt::Display for GgufDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for GgufDType {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        GgufDType::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| EngineError::Setting {
                name: "dtype",
                value: s.to_string(),
                expected: "one of f32, f16, q8_0".to_string(),
            })
    }
}

fn gguf_err(e: candle_core::Error) -> EngineError {
    let msg = e.to_string();
    EngineError::Format(format!(
        "writing GGUF: {}",
        msg.lines().next().unwrap_or_default()
    ))
}

/// The model as one GGUF file (see the module docs). Holds the converted tensors and the file
/// at once (candle's writer takes every tensor together).
pub fn gguf_bytes(model: &Model, tokenizer: &TextTokenizer, dtype: GgufDType) -> Result<Vec<u8>> {
    let c = &model.config;
    c.validate()?;
    let arch = exportable(c)?;
    let k = |key: &str| format!("{}.{key}", arch.name);
    let tf = gguf_tokenizer_fields(tokenizer)?;
    let u32v = |v: usize| -> Result<GValue> {
        u32::try_from(v)
            .map(GValue::U32)
            .map_err(|_| EngineError::Config(format!("{v} does not fit a GGUF u32")))
    };
    let strings = |v: &[String]| GValue::Array(v.iter().cloned().map(GValue::String).collect());
    let mut md: Vec<(String, GValue)> = vec![
        (
            "general.architecture".into(),
            GValue::String(arch.name.into()),
        ),
        ("general.name".into(), GValue::String(c.name.clone())),
        ("general.file_type".into(), u32v(gguf_file_type(dtype))?),
        (k("block_count"), u32v(c.n_layers)?),
        (k("context_length"), u32v(c.context_length)?),
        (k("embedding_length"), u32v(c.hidden)?),
        (k("feed_forward_length"), u32v(c.ffn)?),
        (k("attention.head_count"), u32v(c.n_heads)?),
        (k("attention.head_count_kv"), u32v(c.n_kv_heads)?),
        (k("attention.key_length"), u32v(c.head_dim)?),
        (k("attention.value_length"), u32v(c.head_dim)?),
        (k("rope.dimension_count"), u32v(c.head_dim)?),
        (k("rope.freq_base"), GValue::F32(c.rope_base)),
        (
            k("attention.layer_norm_rms_epsilon"),
            GValue::F32(c.rms_eps),
        ),
        (k("vocab_size"), u32v(c.vocab)?),
        ("tokenizer.ggml.model".into(), GValue::String(tf.model)),
        ("tokenizer.ggml.pre".into(), GValue::String(tf.pre)),
        ("tokenizer.ggml.tokens".into(), strings(&tf.tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            GValue::Array(tf.token_types.into_iter().map(GValue::I32).collect()),
        ),
        ("tokenizer.ggml.merges".into(), strings(&tf.merges)),
        (
            "tokenizer.ggml.add_bos_token".into(),
            GValue::Bool(tf.add_bos),
        ),
    ];
    if let Some(bos) = tf.bos {
        md.push(("tokenizer.ggml.bos_token_id".into(), GValue::U32(bos)));
    }
    if let Some(eos) = tf.eos {
        md.push(("tokenizer.ggml.eos_token_id".into(), GValue::U32(eos)));
    }
    if let Some(t) = tf.chat_template {
        md.push(("tokenizer.chat_template".into(), GValue::String(t)));
    }
    if let Some(layers) = &c.layers {
        let array = |f: &dyn Fn(&LayerShape) -> usize| -> Result<GValue> {
            Ok(GValue::Array(
                layers.iter().map(|l| u32v(f(l))).collect::<Result<_>>()?,
            ))
        };
        md.push(("edgefit.layers.head_count".into(), array(&|l| l.n_heads)?));
        md.push((
            "edgefit.layers.head_count_kv".into(),
            array(&|l| l.n_kv_heads)?,
        ));
        md.push(("edgefit.layers.key_length".into(), array(&|l| l.qk_dim)?));
        md.push(("edgefit.layers.value_length".into(), array(&|l| l.v_dim)?));
        md.push((
            "edgefit.layers.feed_forward_length".into(),
            array(&|l| l.ffn)?,
        ));
        let pairs = layers
            .iter()
            .flat_map(|l| l.rope_pairs.iter().map(|&p| GValue::U32(p.into())))
            .collect();
        md.push(("edgefit.layers.rope_pairs".into(), GValue::Array(pairs)));
    }

    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    match &c.rope_scaling {
        RopeScaling::None => {}
        RopeScaling::Linear { factor } => {
            md.push((k("rope.scaling.type"), GValue::String("linear".into())));
            md.push((k("rope.scaling.factor"), GValue::F32(*factor)));
        }
        // YaRN as llama.cpp reads it (its attention factor is always 0.1 · ln(factor) + 1 and
        // its ramp ends rounded: another one has no GGUF form).
        RopeScaling::Yarn {
            factor,
            original_context,
            beta_fast,
            beta_slow,
            truncate,
            attention_factor,
        } => {
            if !*truncate || *attention_factor != edgefit_estimate::yarn_mscale(*factor, 1.0) {
                return Err(EngineError::Unsupported(format!(
                    "GGUF export of YaRN RoPE scaling with attention factor {attention_factor} and truncate = {truncate} (llama.cpp computes 0.1 · ln(factor) + 1 and rounds the ramp)"
                )));
            }
            md.push((k("rope.scaling.type"), GValue::String("yarn".into())));
            md.push((k("rope.scaling.factor"), GValue::F32(*factor)));
            md.push((
                k("rope.scaling.original_context_length"),
                GValue::U32(*original_context),
            ));
            md.push((k("rope.scaling.yarn_beta_fast"), GValue::F32(*beta_fast)));
            md.push((k("rope.scaling.yarn_beta_slow"), GValue::F32(*beta_slow)));
        }
        // LongRoPE as llama.cpp's converter writes it: both factor sets as tensors.
        RopeScaling::LongRope {
            short_factor,
            long_factor,
            original_context,
            attention_factor,
        } => {
            md.push((
                k("rope.scaling.attn_factor"),
                GValue::F32(*attention_factor),
            ));
            md.push((
                k("rope.scaling.original_context_length"),
                GValue::U32(*original_context),
            ));
            for (name, v) in [
                (crate::gguf::ROPE_FACTORS_SHORT, short_factor),
                (crate::gguf::ROPE_FACTORS_LONG, long_factor),
            ] {
                let t =
                    Tensor::from_vec(v.clone(), vec![v.len()], &Device::Cpu).map_err(gguf_err)?;
                tensors.push((
                    name.to_string(),
                    QTensor::quantize(&t, GgmlDType::F32).map_err(gguf_err)?,
                ));
            }
        }
        // Llama 3.x as llama.cpp's converter writes it: the per-pair divisors as a tensor.
        RopeScaling::Llama3 { .. } | RopeScaling::Divisors { .. } => {
            let divisors = c
                .rope_scaling
                .divisors(c.rope_base, c.head_dim)
                .map_err(EngineError::Config)?;
            let n = divisors.len();
            let t = Tensor::from_vec(divisors, vec![n], &Device::Cpu).map_err(gguf_err)?;
            tensors.push((
                crate::gguf::ROPE_FREQS.to_string(),
                QTensor::quantize(&t, GgmlDType::F32).map_err(gguf_err)?,
            ));
        }
    }
    for (name, src) in gguf_tensors(model) {
        let (shape, ggml) = match &src {
            Source::Vector(v) | Source::QkVector(v, _) => (vec![v.len()], GgmlDType::F32),
            Source::Matrix(m) | Source::QkMatrix(m, _) => {
                let dt = if dtype == GgufDType::Q8_0 && !m.cols().is_multiple_of(32) {
                    GgmlDType::F16
                } else {
                    dtype.ggml()
                };
                (vec![m.rows(), m.cols()], dt)
            }
        };
        // GGUF keeps q/k in the engine's own pair layout for `llama`, in rotate-half order
        // for the NEOX-RoPE architectures ([`crate::config::Arch::gguf_rotate_half`]).
        let values = src.values();
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(EngineError::tensor(
                &name,
                format!("value {} at index {bad} is not finite", values[bad]),
            ));
        }
        if ggml == GgmlDType::F16 && values.iter().any(|v| v.abs() > f32::from(half::f16::MAX)) {
            return Err(EngineError::tensor(&name, "values beyond the f16 range"));
        }
        let t = Tensor::from_vec(values, shape, &Device::Cpu).map_err(gguf_err)?;
        tensors.push((name, QTensor::quantize(&t, ggml).map_err(gguf_err)?));
    }
    let md_refs: Vec<(&str, &GValue)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md_refs, &t_refs).map_err(gguf_err)?;
    Ok(out.into_inner())
}

/// `general.file_type` (llama.cpp's `LLAMA_FTYPE_*`): the type most tensors have.
fn gguf_file_type(dtype: GgufDType) -> usize {
    match dtype {
        GgufDType::F32 => 0,
        GgufDType::F16 => 1,
        GgufDType::Q8_0 => 7,
    }
}

/// Every tensor of `model` under its GGUF name, in file order.
fn gguf_tensors(model: &Model) -> Vec<(String, Source<'_>)> {
    let w = &model.weights;
    let mut out = vec![("token_embd.weight".to_string(), Source::Matrix(&w.embed))];
    let rotate_half = model.config.arch().is_ok_and(|a| a.gguf_rotate_half);
    for (i, (l, shape)) in w.layers.iter().zip(model.config.layer_shapes()).enumerate() {
        out.extend(layer_sources(
            l,
            &shape,
            i,
            rotate_half,
            LayerPart::gguf_name,
        ));
    }
    out.push((
        "output_norm.weight".to_string(),
        Source::Vector(&w.final_norm),
    ));
    if let Some(head) = &w.output {
        out.push(("output.weight".to_string(), Source::Matrix(head)));
    }
    out
}

/// The pre-tokenizer names [`TextTokenizer::from_gguf`] knows, one per distinct behaviour.
const GGUF_PRE_NAMES: [&str; 4] = ["gpt2", "smollm", "llama3", "qwen2"];

/// The tokenizer as GGUF `tokenizer.ggml.*` fields: vocabulary (added tokens included, special
/// ones typed control, others user-defined), merges, BOS/EOS, chat template, and the
/// pre-tokenizer's name, found by building each known one and comparing it with this
/// tokenizer's. A tokenizer that is not byte-level BPE with one of those pre-tokenizers is
/// [`EngineError::Unsupported`] (export HF files instead).
pub fn gguf_tokenizer_fields(tokenizer: &TextTokenizer) -> Result<GgufTokenizerFields> {
    let unsupported = |what: String| {
        EngineError::Unsupported(format!(
            "GGUF export of this tokenizer: {what} (HF export keeps it as it is)"
        ))
    };
    let j: Value = serde_json::from_str(&tokenizer.to_json()?)
        .map_err(|e| EngineError::Tokenizer(format!("tokenizer.json: {e}")))?;
    let model = &j["model"];
    if model["type"] != "BPE" {
        return Err(unsupported(format!("model type {}", model["type"])));
    }
    let mut tokens: Vec<Option<(String, i32)>> = Vec::new();
    let mut put = |id: Option<u64>, text: &str, kind: i32| -> Result<()> {
        let id = id
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < (1 << 22))
            .ok_or_else(|| unsupported(format!("token `{text}` has no valid id")))?;
        if tokens.len() <= id {
            tokens.resize(id + 1, None);
        }
        tokens[id] = Some((text.to_string(), kind));
        Ok(())
    };
    let vocab = model["vocab"]
        .as_object()
        .ok_or_else(|| unsupported("no BPE vocabulary".to_string()))?;
    for (text, id) in vocab {
        put(id.as_u64(), text, 1)?;
    }
    for t in j["added_tokens"].as_array().into_iter().flatten() {
        let text = t["content"].as_str().unwrap_or_default();
        let kind = if t["special"].as_bool().unwrap_or(false) {
            3
        } else {
            4
        };
        put(t["id"].as_u64(), text, kind)?;
    }
    let mut texts = Vec::with_capacity(tokens.len());
    let mut token_types = Vec::with_capacity(tokens.len());
    for (i, t) in tokens.into_iter().enumerate() {
        let (text, kind) = t.ok_or_else(|| unsupported(format!("token id {i} has no text")))?;
        texts.push(text);
        token_types.push(kind);
    }
    let merges = model["merges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) => match (pair.first(), pair.get(1), pair.len()) {
                (Some(Value::String(a)), Some(Value::String(b)), 2) => Ok(format!("{a} {b}")),
                _ => Err(unsupported(format!("merge {m}"))),
            },
            other => Err(unsupported(format!("merge {other}"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut pre = None;
    for name in GGUF_PRE_NAMES {
        let probe = TextTokenizer::from_gguf(GgufTokenizerFields {
            model: "gpt2".to_string(),
            pre: name.to_string(),
            tokens: vec!["a".to_string()],
            ..GgufTokenizerFields::default()
        })?;
        let probe: Value = serde_json::from_str(&probe.to_json()?)
            .map_err(|e| EngineError::Tokenizer(format!("tokenizer.json: {e}")))?;
        if probe["pre_tokenizer"] == j["pre_tokenizer"] {
            pre = Some(name);
            break;
        }
    }
    let pre = pre.ok_or_else(|| {
        unsupported(format!(
            "pre-tokenizer {} (known: {})",
            j["pre_tokenizer"],
            GGUF_PRE_NAMES.join(", ")
        ))
    })?;
    let eos_text = tokenizer.eos_text();
    let eos = (!eos_text.is_empty())
        .then(|| tokenizer.token_id(eos_text))
        .flatten()
        .or(tokenizer.stop_ids().first().copied());
    Ok(GgufTokenizerFields {
        model: "gpt2".to_string(),
        pre: pre.to_string(),
        tokens: texts,
        token_types,
        merges,
        bos: tokenizer.bos_id(),
        eos,
        add_bos: tokenizer.add_bos(),
        chat_template: tokenizer.chat_template().map(str::to_string),
        ..GgufTokenizerFields::default()
    })
}
