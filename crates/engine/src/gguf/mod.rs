//! Loading LLaMA-family GGUF files with candle-core's GGUF reader.
//!
//! Tensors are read one at a time and converted to the requested format before the next
//! ([`crate::weights`]): Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K tensors are read as
//! raw blocks (kept exactly by the default `auto` format, and Q4_0/Q4_1 by `w4g32`, Q8_0 by
//! `q8_0`), F32 directly, F16, BF16 and the other ggml types (Q2_K, Q3_K, Q8_1, Q8_K) through
//! candle's dequantization, which the model info then names as a conversion. IQ4_NL and
//! IQ4_XS, which candle does not parse, are read by the loader itself (`prescan::OwnType`):
//! IQ4_NL blocks become the Q8_0 blocks of the same values, IQ4_XS is converted. Peak memory while
//! loading is the converted model plus one tensor (plus, for a fused tensor, the part cut from
//! it).
//!
//! Phi-3 (llama.cpp's `LLM_ARCH_PHI3`): `blk.N.attn_qkv.weight` holds the q, k, v rows and
//! `blk.N.ffn_up.weight` the gate then up rows ([`crate::config::Arch::gguf_names`]); each
//! part is cut from the fused tensor by rows ([`RawTensor::row_range`]: bytes of whole block
//! rows, never re-rounded). `phi3.rope.dimension_count` below the head size is partial RoPE
//! (NEOX order: the first dims of each head rotate), `phi3.attention.sliding_window` is read as
//! full attention whatever its value, as llama.cpp (which disables Phi-3's window) and
//! transformers' GGUF loader (which does not read the key) both run such a file, and LongRoPE
//! is read from `rope_factors_long/short.weight` and `phi3.rope.scaling.*`.
//! Shapes are checked against the metadata, and byte counts against the file's length, before a
//! tensor's bytes are read, so a hostile header cannot make the loader allocate more than the
//! model it claims to be.
//!
//! A GGUF file is untrusted input. Before candle parses the header, [`prescan`] walks it once
//! without keeping anything: magic, version (2 or 3), counts and array lengths under the caps
//! below, every length inside the file, and `general.alignment` a power of two (candle divides
//! by it). After candle's parse, every tensor's byte range is computed with checked arithmetic
//! and must lie inside the file without overlapping another (`check_layout`), all before any
//! tensor is read. With a memory budget ([`load_gguf_within`]) the model's whole need is
//! compared with it ([`crate::weights::MemoryNeed`]) before the first tensor is allocated.
//!
//! A structurally pruned model (written by [`crate::export::gguf_bytes`]) keeps the unpruned
//! shape in the usual `{arch}.*` keys and adds one u32 array per layer field, each with one
//! entry per layer: `edgefit.layers.head_count`, `edgefit.layers.head_count_kv`,
//! `edgefit.layers.key_length` (qk_dim), `edgefit.layers.value_length` (v_dim),
//! `edgefit.layers.feed_forward_length`, and `edgefit.layers.rope_pairs`: every layer's kept
//! RoPE pairs (`key_length / 2` of them, see [`crate::config::LayerShape`]) one layer after
//! the other. Q/K tensors are in the usual GGUF (adjacent-pair) layout over the kept pairs.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | loading: [`load_gguf`] and its variants, the memory preflight, [`read_matrices`], [`read_tokenizer`] |
//! | `metadata.rs` | typed reads of header fields (tokenizer, shapes, per-layer shapes) |
//! | `tensor.rs` | reading one tensor, checked, as raw blocks or dequantized |
//! | `header.rs` | [`check_header`], [`read_estimate_metadata`] |
//! | `prescan.rs` | the header's caps ([`MAX_TENSORS`], ...), [`prescan`], the tensor layout check |

mod header;
mod metadata;
mod prescan;
mod tensor;

use std::io::{Read, Seek};

use edgefit_estimate::{GgufMetadata, RopeScaling};

use crate::config::{Arch, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::hf::rotate_half_source_rows;
use crate::model::Model;
use crate::tensors::{LayerPart, TensorRole};
use crate::tokenizer::TextTokenizer;
use crate::weights::{fused_rows, LoadOptions, MemoryNeed, RawTensor, Source, Weights};

pub use self::header::{check_header, read_estimate_metadata, HeaderCheck};
pub use self::prescan::{
    prescan, MAX_ALIGNMENT, MAX_ARRAY_LEN, MAX_KEY_LEN, MAX_METADATA, MAX_TENSORS,
};

use self::header::estimate_value;
use self::metadata::{
    get_str, get_usize, layer_shapes, opt_f32, opt_str, opt_usize, tokenizer_fields,
};
use self::prescan::{read_content, Header};
use self::tensor::{read_tensor, source_in};

/// The optional per-pair RoPE divisors ([`RopeScaling::Divisors`]), `head_dim / 2` f32s.
pub(crate) const ROPE_FREQS: &str = "rope_freqs.weight";
/// LongRoPE's per-pair divisors ([`RopeScaling::LongRope`]), `rotary dims / 2` f32s each.
pub(crate) const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";
pub(crate) const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";

/// Reads a GGUF model and its tokenizer. `progress(done, total)` is called after each tensor
/// with the number of tensors read. No memory budget: see [`load_gguf_within`].
pub fn load_gguf<R: Read + Seek>(
    reader: &mut R,
    options: LoadOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Model, TextTokenizer)> {
    load_gguf_within(reader, options, None, progress)
}

/// [`load_gguf`], refusing with [`EngineError::OverBudget`] (before reading any tensor) a model
/// whose weights, KV cache at its full context and scratch need more than
/// `memory_budget` bytes ([`crate::weights::MemoryNeed`]).
pub fn load_gguf_within<R: Read + Seek>(
    reader: &mut R,
    options: LoadOptions,
    memory_budget: Option<u64>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Model, TextTokenizer)> {
    let (model, tokenizer) = load_parts(reader, options, memory_budget, progress, true)?;
    let tokenizer = tokenizer.ok_or_else(|| EngineError::Format("no tokenizer".to_string()))?;
    Ok((model, tokenizer))
}

/// The model of a GGUF file without its tokenizer (driven by token ids: tests, and files whose
/// vocabulary kind the tokenizer does not read yet).
pub fn load_gguf_model<R: Read + Seek>(
    reader: &mut R,
    options: LoadOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Model> {
    Ok(load_parts(reader, options, None, progress, false)?.0)
}

fn load_parts<R: Read + Seek>(
    reader: &mut R,
    options: LoadOptions,
    memory_budget: Option<u64>,
    progress: &mut dyn FnMut(usize, usize),
    with_tokenizer: bool,
) -> Result<(Model, Option<TextTokenizer>)> {
    let header = read_content(reader)?;
    let content = &header.content;
    let md = &content.metadata;
    let arch = get_str(md, "general.architecture")?;
    let desc = Arch::named(&arch, "architecture")?;
    let key = |k: &str| format!("{arch}.{k}");
    // LongRoPE (Phi-3 128k, Phi-3.5) as llama.cpp's converter writes it: the per-pair factors
    // as the tensors `rope_factors_long.weight` and `rope_factors_short.weight`, the attention
    // factor `{arch}.rope.scaling.attn_factor` (else computed from the contexts) and
    // `{arch}.rope.scaling.original_context_length`. Both tensors or neither.
    let longrope_tensors =
        [ROPE_FACTORS_SHORT, ROPE_FACTORS_LONG].map(|n| content.tensor_infos.contains_key(n));
    let longrope = match longrope_tensors {
        [true, true] => true,
        [false, false] => false,
        _ => {
            return Err(EngineError::Format(format!(
                "GGUF LongRoPE needs both `{ROPE_FACTORS_SHORT}` and `{ROPE_FACTORS_LONG}`; the file has only one"
            )))
        }
    };
    if !longrope {
        if let Some(v) = opt_f32(md, &key("rope.scaling.attn_factor"))? {
            if opt_str(md, &key("rope.scaling.type")).as_deref() != Some("yarn") {
                return Err(EngineError::Unsupported(format!(
                    "GGUF `{}` = {v} without LongRoPE factors or YaRN (an attention factor of another RoPE scaling)",
                    key("rope.scaling.attn_factor")
                )));
            }
        }
    }
    // Soft-capping: Gemma 2 as llama.cpp reads it (the keys, else 50 and 30); another
    // architecture whose file sets them is refused (llama.cpp's Gemma 3 graph does not cap).
    let (attn_softcap, final_softcap) = if desc.softcapping && desc.hf_defaults.softcaps.0.is_some()
    {
        (
            opt_f32(md, &key("attn_logit_softcapping"))?.or(desc.hf_defaults.softcaps.0),
            opt_f32(md, &key("final_logit_softcapping"))?.or(desc.hf_defaults.softcaps.1),
        )
    } else {
        for k in ["attn_logit_softcapping", "final_logit_softcapping"] {
            if let Some(v) = opt_f32(md, &key(k))? {
                return Err(EngineError::Unsupported(format!(
                    "GGUF `{}` = {v} for `{arch}` (logit soft-capping)",
                    key(k)
                )));
            }
        }
        (None, None)
    };
    let tokenizer = if with_tokenizer {
        Some(TextTokenizer::from_gguf(tokenizer_fields(md)?)?)
    } else {
        None
    };
    let hidden = get_usize(md, &key("embedding_length"))?;
    let n_heads = get_usize(md, &key("attention.head_count"))?;
    let n_kv_heads = opt_usize(md, &key("attention.head_count_kv"))?.unwrap_or(n_heads);
    let head_dim = match opt_usize(md, &key("attention.key_length"))? {
        Some(d) => d,
        None if n_heads > 0 && !hidden.is_multiple_of(n_heads) => {
            return Err(EngineError::Config(format!(
                "`{}` = {hidden} is not a multiple of `{}` = {n_heads} (and no `{}` gives the head size)",
                key("embedding_length"),
                key("attention.head_count"),
                key("attention.key_length")
            )));
        }
        None => hidden.checked_div(n_heads).unwrap_or(0),
    };
    let rope_meta = GgufMetadata {
        kv: md
            .iter()
            .filter(|(k, _)| {
                k.starts_with(&format!("{arch}.rope.")) || *k == &key("context_length")
            })
            .map(|(k, v)| (k.clone(), estimate_value(k, v)))
            .collect(),
        tensors: Vec::new(),
    };
    let mut rope_scaling = rope_meta
        .rope_scaling(&arch)
        .map_err(crate::hf::from_estimate)?;
    if content.tensor_infos.contains_key(ROPE_FREQS) && head_dim >= 2 {
        // Per-pair divisors (Llama 3.1+ as llama.cpp converts it); a linear factor on top
        // multiplies them, as llama.cpp applies both.
        let RawTensor::F32(mut divisors) =
            read_tensor(&header, reader, ROPE_FREQS, 1, head_dim / 2)?
        else {
            return Err(EngineError::tensor(ROPE_FREQS, "is not stored as F32"));
        };
        if let RopeScaling::Linear { factor } = rope_scaling {
            divisors.iter_mut().for_each(|d| *d *= factor);
        }
        rope_scaling = RopeScaling::Divisors { divisors };
    }
    if longrope {
        if rope_scaling != RopeScaling::None {
            return Err(EngineError::Unsupported(format!(
                "GGUF LongRoPE factors with another RoPE scaling ({})",
                rope_scaling.kind()
            )));
        }
        let rot = opt_usize(md, &key("rope.dimension_count"))?.unwrap_or(head_dim);
        let mut factors = |name: &str| -> Result<Vec<f32>> {
            match read_tensor(&header, reader, name, 1, rot / 2)? {
                RawTensor::F32(v) => Ok(v),
                _ => Err(EngineError::tensor(name, "is not stored as F32")),
            }
        };
        let context = get_usize(md, &key("context_length"))?;
        let original_context = match opt_usize(md, &key("rope.scaling.original_context_length"))? {
            Some(n) => n,
            None => {
                return Err(EngineError::Config(format!(
                    "GGUF LongRoPE without `{}` (the context the short factors serve)",
                    key("rope.scaling.original_context_length")
                )))
            }
        };
        let original_context = u32::try_from(original_context).map_err(|_| {
            EngineError::Config(format!(
                "`{}` = {original_context} is too large",
                key("rope.scaling.original_context_length")
            ))
        })?;
        let attention_factor = match opt_f32(md, &key("rope.scaling.attn_factor"))? {
            Some(a) => a,
            None => edgefit_estimate::longrope_attention_factor(
                context as f32 / original_context as f32,
                original_context,
            ),
        };
        rope_scaling = RopeScaling::LongRope {
            short_factor: factors(ROPE_FACTORS_SHORT)?,
            long_factor: factors(ROPE_FACTORS_LONG)?,
            original_context,
            attention_factor,
        };
    }
    let embed_rows = content
        .tensor_infos
        .get("token_embd.weight")
        .map(|t| t.shape.dims().first().copied().unwrap_or(0))
        .ok_or_else(|| EngineError::tensor("token_embd.weight", "missing"))?;
    let n_layers = get_usize(md, &key("block_count"))?;
    // Before anything is sized per layer (the sliding layout below); the config's own check
    // would say the same later.
    if n_layers == 0 || n_layers > crate::config::MAX_LAYERS {
        return Err(EngineError::Config(format!(
            "n_layers = {n_layers} is outside 1..={}",
            crate::config::MAX_LAYERS
        )));
    }
    let context_length = get_usize(md, &key("context_length"))?;
    // Sliding layers as llama.cpp lays them out for this architecture ([`Arch::gguf_swa`]).
    let window = opt_usize(md, &key("attention.sliding_window"))?;
    let (sliding_window, sliding_layers, rope_local_base) = match (window, desc.gguf_swa) {
        (Some(_), None) if desc.gguf_window_ignored => (None, Vec::new(), None),
        // 0 is "none" (Phi-3's converter writes it), and a window as wide as the context
        // never leaves a key out (the KV cache holds at most the context): full attention
        // exactly.
        (None, None) => (None, Vec::new(), None),
        (Some(w), None) if w == 0 || w >= context_length => (None, Vec::new(), None),
        (Some(w), None) => {
            return Err(EngineError::Unsupported(format!(
                "GGUF `{}` = {w} for `{arch}` (sliding-window attention)",
                key("attention.sliding_window")
            )))
        }
        (w, Some(swa)) => match w.or(swa.default_window) {
            None | Some(0) => (None, Vec::new(), None),
            Some(w) => (
                Some(w),
                {
                    let pkey = key("attention.sliding_window_pattern");
                    let meta = GgufMetadata {
                        kv: md
                            .get(&pkey)
                            .map(|v| (pkey.clone(), estimate_value(&pkey, v)))
                            .into_iter()
                            .collect(),
                        tensors: Vec::new(),
                    };
                    meta.sliding_pattern(&pkey, n_layers as u32, swa.pattern as u32)
                        .map_err(crate::hf::from_estimate)?
                },
                match opt_f32(md, &key("rope.freq_base_swa"))? {
                    Some(b) => Some(b),
                    None => swa.local_base.map(|b| b as f32),
                },
            ),
        },
    };
    // Partial RoPE: the first `r` dims of each head rotate (NEOX order, as HF's partial
    // rotary), where the architecture has it ([`Arch::gguf_partial_rope`], Phi-3; refused
    // elsewhere once the shape is known valid).
    let rope_dims = opt_usize(md, &key("rope.dimension_count"))?;
    let rope_dim = rope_dims.filter(|&r| desc.gguf_partial_rope && r != head_dim);
    // Optional biases of a `llama` file ([`Arch::config_biases`]), as llama.cpp's graph reads
    // them: present in block 0, then required in every block.
    let has = |name: &str| content.tensor_infos.contains_key(name);
    let mut config = LlamaConfig {
        name: opt_str(md, "general.name").unwrap_or_default(),
        arch: arch.clone(),
        n_layers,
        hidden,
        n_heads,
        n_kv_heads,
        head_dim,
        ffn: get_usize(md, &key("feed_forward_length"))?,
        vocab: opt_usize(md, &key("vocab_size"))?.unwrap_or(embed_rows),
        context_length,
        rope_base: opt_f32(md, &key("rope.freq_base"))?.unwrap_or(10_000.0),
        rope_scaling,
        rms_eps: opt_f32(md, &key("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5),
        tied_embeddings: !content.tensor_infos.contains_key("output.weight"),
        qkv_bias: desc.qkv_bias || (desc.config_biases && has("blk.0.attn_q.bias")),
        o_bias: desc.config_biases && has("blk.0.attn_output.bias"),
        mlp_bias: desc.config_biases && has("blk.0.ffn_up.bias"),
        qk_norm: desc.qk_norm,
        embed_scale: desc.embed_scale,
        post_norms: desc.post_norms,
        activation: desc.activation,
        // llama.cpp scales queries by 1/√head_dim, but 1/√(hidden / heads) for the Gemma 2 /
        // Gemma 3 27B, told apart by its layer count ([`Arch::gguf_wide_query_scale_layers`]).
        query_pre_attn_scalar: desc
            .gguf_wide_query_scale_layers
            .filter(|&l| l == n_layers && n_heads > 0)
            .map(|_| (hidden / n_heads) as f32),
        sliding_window,
        sliding_layers,
        rope_local_base,
        rope_dim,
        attn_softcap,
        final_softcap,
        layers: None,
    };
    config.validate()?;
    if let Some(r) = rope_dims.filter(|&r| r != head_dim && !desc.gguf_partial_rope) {
        return Err(EngineError::Unsupported(format!(
            "partial RoPE ({r} of {head_dim} dimensions per head) for `{arch}`"
        )));
    }
    if let Some(v) = opt_usize(md, &key("attention.value_length"))? {
        if v != head_dim {
            return Err(EngineError::Unsupported(format!(
                "value head size {v} differs from key head size {head_dim}"
            )));
        }
    }
    if let Some(layers) = layer_shapes(md, config.n_layers)? {
        config.layers = Some(layers);
        config.validate().map_err(|e| match e {
            EngineError::Config(m) => EngineError::Config(format!("GGUF `edgefit.layers.*`: {m}")),
            other => other,
        })?;
    }
    if let Some(t) = &tokenizer {
        t.check_fits(config.vocab)?;
    }

    memory_need(&header, &config, &options).check(memory_budget)?;

    // Tensors per layer in the file: fused parts share one ([`Arch::gguf_names`]).
    let mut per_layer: Vec<String> = LayerPart::ALL
        .iter()
        .filter(|p| p.present(&config))
        .map(|p| p.gguf_name_in(&desc, 0))
        .collect();
    per_layer.sort_unstable();
    per_layer.dedup();
    let total = 2 + usize::from(!config.tied_embeddings) + per_layer.len() * config.n_layers;
    let mut done = 0usize;
    let mut read = |name: String, rows: usize, cols: usize| -> Result<(String, RawTensor)> {
        let v = read_tensor(&header, reader, &name, rows, cols)?;
        done += 1;
        progress(done, total);
        Ok((name, v))
    };
    let shapes = config.layer_shapes();
    let rope_dim = config.rope_dim;
    // The fused tensor last read ([`Arch::fused`]), which the next parts slice again.
    let mut fused: Option<(String, RawTensor)> = None;
    let weights = Weights::read_all(&config, options, |role, rows, cols| {
        let name = tensor_name(&desc, role);
        let fused_part = match role {
            TensorRole::Layer(i, part) if desc.fused => {
                shapes.get(i).and_then(|s| fused_rows(part, s))
            }
            _ => None,
        };
        let raw = match fused_part {
            Some((range, all_rows)) => {
                if fused.as_ref().is_none_or(|(n, _)| *n != name) {
                    fused = Some(read(name.clone(), all_rows, cols)?);
                }
                match &fused {
                    Some((_, t)) => t.row_range(&name, all_rows, cols, range)?,
                    None => return Err(EngineError::tensor(&name, "missing")),
                }
            }
            None => read(name.clone(), rows, cols)?.1,
        };
        match role {
            // NEOX-RoPE architectures keep HF's rotate-half order: into pairs, as the HF loader
            // (over the first `rope_dim` dims of each head when only those rotate).
            TensorRole::Layer(i, part) if desc.gguf_rotate_half && part.along_qk() => {
                let qk_dim = shapes.get(i).map_or(config.head_dim, |s| s.qk_dim);
                let n_rows = if part.is_vector() { cols } else { rows };
                let rot = rope_dim.unwrap_or(qk_dim);
                let raw = raw.rows_permuted(&rotate_half_source_rows(n_rows, qk_dim, rot));
                Ok((name, raw))
            }
            _ => Ok((name, raw)),
        }
    })?;
    Ok((Model::new(config, weights), tokenizer))
}

/// The memory `config` needs loaded with `options` from this file: every matrix counted in the
/// format its GGUF type is held in ([`MemoryNeed::of_sources`]).
fn memory_need(header: &Header, config: &LlamaConfig, options: &LoadOptions) -> MemoryNeed {
    let desc = config.arch().ok();
    MemoryNeed::of_sources(config, options, |role| {
        let name = match &desc {
            Some(d) => tensor_name(d, role),
            None => role.gguf_name(),
        };
        source_in(header, &name).unwrap_or(Source::Float("f32"))
    })
}

/// The GGUF name of `role` in architecture `desc` (fused parts name their common tensor).
fn tensor_name(desc: &Arch, role: TensorRole) -> String {
    match role {
        TensorRole::Layer(i, part) => part.gguf_name_in(desc, i),
        other => other.gguf_name(),
    }
}

/// The memory preflight of a GGUF file's model loaded with `options`, from its header alone:
/// what [`load_gguf_within`] compares with its budget.
pub fn gguf_memory_need<R: Read + Seek>(
    reader: &mut R,
    config: &LlamaConfig,
    options: &LoadOptions,
) -> Result<MemoryNeed> {
    Ok(memory_need(&read_content(reader)?, config, options))
}

/// Reads every 2-D tensor of a GGUF file, in name order, into the matrix loading it under
/// `options` gives (kept blocks, or the conversion [`crate::weights::held_format`] names;
/// `token_embd.weight` and `output.weight` in the embedding format), with every check the
/// loader makes, handing each to `each(name, matrix)` before reading the next. For
/// tensor-level checks of files whose architecture the engine does not run.
pub fn read_matrices<R: Read + Seek>(
    reader: &mut R,
    options: &LoadOptions,
    mut each: impl FnMut(&str, edgefit_kernels::Matrix) -> Result<()>,
) -> Result<()> {
    use crate::weights::MatrixUse;
    let header = read_content(reader)?;
    let mut names: Vec<(&String, usize, usize)> = header
        .content
        .tensor_infos
        .iter()
        .filter_map(|(name, info)| match info.shape.dims() {
            [rows, cols] => Some((name, *rows, *cols)),
            _ => None,
        })
        .collect();
    names.sort();
    for (name, rows, cols) in names {
        let (format, use_) = match name.as_str() {
            "token_embd.weight" | "output.weight" => {
                (options.embedding_format(), MatrixUse::Embedding)
            }
            _ => (options.weights, MatrixUse::Linear),
        };
        let raw = read_tensor(&header, reader, name, rows, cols)?;
        each(
            name,
            raw.into_matrix(name, rows, cols, format, use_, options.requantize)?,
        )?;
    }
    Ok(())
}

/// Reads only a GGUF file's tokenizer (header fields, no tensor), whatever its architecture.
pub fn read_tokenizer<R: Read + Seek>(reader: &mut R) -> Result<TextTokenizer> {
    let header = read_content(reader)?;
    TextTokenizer::from_gguf(tokenizer_fields(&header.content.metadata)?)
}

/// candle appends a backtrace to its message when `RUST_BACKTRACE` is set; users get the first
/// line, which names the problem.
fn candle_msg(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}
