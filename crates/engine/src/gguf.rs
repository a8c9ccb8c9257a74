//! Loading LLaMA-family GGUF files with candle-core's GGUF reader.
//!
//! Tensors are read one at a time and converted to the requested format before the next
//! ([`crate::weights`]): Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K tensors are read as
//! raw blocks (kept exactly by the default `auto` format, and Q4_0/Q4_1 by `w4g32`, Q8_0 by
//! `q8_0`), F32 directly, F16, BF16 and the other ggml types (Q2_K, Q3_K, Q8_1, Q8_K) through
//! candle's dequantization, which the model info then names as a conversion. Peak memory while
//! loading is the converted model plus one tensor (plus, for a fused tensor, the part cut from
//! it).
//!
//! Phi-3 (llama.cpp's `LLM_ARCH_PHI3`): `blk.N.attn_qkv.weight` holds the q, k, v rows and
//! `blk.N.ffn_up.weight` the gate then up rows ([`crate::config::Arch::gguf_names`]); each
//! part is cut from the fused tensor by rows ([`RawTensor::row_range`]: bytes of whole block
//! rows, never re-rounded). `phi3.rope.dimension_count` below the head size is partial RoPE
//! (NEOX order: the first dims of each head rotate), `phi3.attention.sliding_window` = 0 (or at
//! least the context) is full attention, anything narrower is refused (llama.cpp ignores it,
//! transformers applies it), and longrope (`rope_factors_long/short.weight`,
//! `phi3.rope.scaling.attn_factor`) is refused naming it.
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

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::GgmlDType;
use candle_core::Device;

use edgefit_estimate::{GgufMetadata, GgufTensorInfo, GgufValue, RopeScaling};

use crate::config::{Arch, LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::hf::rotate_half_source_rows;
use crate::model::{LayerPart, Model, TensorRole, Weights};
use crate::tokenizer::{GgufTokenizerFields, TextTokenizer};
use crate::weights::{fused_rows, LoadOptions, MemoryNeed, RawTensor, Source};

/// The optional per-pair RoPE divisors ([`RopeScaling::Divisors`]), `head_dim / 2` f32s.
pub(crate) const ROPE_FREQS: &str = "rope_freqs.weight";

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
    let (content, file_len) = read_content(reader)?;
    let md = &content.metadata;
    let arch = get_str(md, "general.architecture")?;
    let desc = Arch::named(&arch, "architecture")?;
    let key = |k: &str| format!("{arch}.{k}");
    // Longrope (Phi-3 128k, Phi-3.5): per-pair factors chosen by the sequence length and an
    // attention factor, as llama.cpp's converter writes them. Not implemented: refused.
    let mut longrope: Vec<&str> = content
        .tensor_infos
        .keys()
        .filter(|n| n.contains("rope_factors_"))
        .map(String::as_str)
        .collect();
    if !longrope.is_empty() {
        longrope.sort_unstable();
        return Err(EngineError::Unsupported(format!(
            "GGUF longrope RoPE scaling (tensors `{}`)",
            longrope.join("`, `")
        )));
    }
    if let Some(v) = opt_f32(md, &key("rope.scaling.attn_factor"))? {
        return Err(EngineError::Unsupported(format!(
            "GGUF `{}` = {v} (the attention factor of longrope / yarn RoPE scaling)",
            key("rope.scaling.attn_factor")
        )));
    }
    for k in ["attn_logit_softcapping", "final_logit_softcapping"] {
        if let Some(v) = opt_f32(md, &key(k))? {
            return Err(EngineError::Unsupported(format!(
                "GGUF `{}` = {v} (logit soft-capping)",
                key(k)
            )));
        }
    }
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
            .filter(|(k, _)| k.starts_with(&format!("{arch}.rope.")))
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
            read_tensor(&content, reader, file_len, ROPE_FREQS, 1, head_dim / 2)?
        else {
            return Err(EngineError::tensor(ROPE_FREQS, "is not stored as F32"));
        };
        if let RopeScaling::Linear { factor } = rope_scaling {
            divisors.iter_mut().for_each(|d| *d *= factor);
        }
        rope_scaling = RopeScaling::Divisors { divisors };
    }
    let embed_rows = content
        .tensor_infos
        .get("token_embd.weight")
        .map(|t| t.shape.dims().first().copied().unwrap_or(0))
        .ok_or_else(|| EngineError::tensor("token_embd.weight", "missing"))?;
    let n_layers = get_usize(md, &key("block_count"))?;
    let context_length = get_usize(md, &key("context_length"))?;
    // Sliding layers as llama.cpp lays them out for this architecture ([`Arch::gguf_swa`]).
    let window = opt_usize(md, &key("attention.sliding_window"))?;
    let (sliding_window, sliding_layers, rope_local_base) = match (window, desc.gguf_swa) {
        (None, _) => (None, Vec::new(), None),
        // 0 is "none" (Phi-3's converter writes it), and a window as wide as the context
        // never leaves a key out (the KV cache holds at most the context): full attention
        // exactly.
        (Some(w), None) if w == 0 || w >= context_length => (None, Vec::new(), None),
        (Some(w), Some(swa)) => (
            Some(w),
            (0..n_layers)
                .map(|i| i % swa.pattern < swa.pattern - 1)
                .collect(),
            Some(swa.local_base as f32),
        ),
        (Some(w), None) => {
            return Err(EngineError::Unsupported(format!(
                "GGUF `{}` = {w} for `{arch}` (sliding-window attention)",
                key("attention.sliding_window")
            )))
        }
    };
    // Partial RoPE: the first `r` dims of each head rotate (NEOX order, as HF's partial
    // rotary), where the architecture has it ([`Arch::gguf_partial_rope`], Phi-3; refused
    // elsewhere once the shape is known valid).
    let rope_dims = opt_usize(md, &key("rope.dimension_count"))?;
    let rope_dim = rope_dims.filter(|&r| desc.gguf_partial_rope && r != head_dim);
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
        qkv_bias: desc.qkv_bias,
        qk_norm: desc.qk_norm,
        embed_scale: desc.embed_scale,
        post_norms: desc.post_norms,
        activation: desc.activation,
        // llama.cpp scales queries by 1/√head_dim for Gemma 3 (all but the 27B, whose GGUF
        // cannot be told apart: see tests/golden/arch/README.md).
        query_pre_attn_scalar: None,
        sliding_window,
        sliding_layers,
        rope_local_base,
        rope_dim,
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

    memory_need(&content, &config, &options).check(memory_budget)?;

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
        let v = read_tensor(&content, reader, file_len, &name, rows, cols)?;
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
fn memory_need(content: &Content, config: &LlamaConfig, options: &LoadOptions) -> MemoryNeed {
    let desc = config.arch().ok();
    MemoryNeed::of_sources(config, options, |role| {
        let name = match &desc {
            Some(d) => tensor_name(d, role),
            None => role.gguf_name(),
        };
        content
            .tensor_infos
            .get(&name)
            .map_or(Source::Float("f32"), |t| source_of(t.ggml_dtype))
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
    let (content, _) = read_content(reader)?;
    Ok(memory_need(&content, config, options))
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
    let (content, file_len) = read_content(reader)?;
    let mut names: Vec<(&String, usize, usize)> = content
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
        let raw = read_tensor(&content, reader, file_len, name, rows, cols)?;
        each(
            name,
            raw.into_matrix(name, rows, cols, format, use_, options.requantize)?,
        )?;
    }
    Ok(())
}

/// Reads only a GGUF file's tokenizer (header fields, no tensor), whatever its architecture.
pub fn read_tokenizer<R: Read + Seek>(reader: &mut R) -> Result<TextTokenizer> {
    let (content, _) = read_content(reader)?;
    TextTokenizer::from_gguf(tokenizer_fields(&content.metadata)?)
}

/// What a ggml type is to the loader.
fn source_of(dtype: GgmlDType) -> Source {
    use edgefit_kernels::GgmlFormat as G;
    match dtype {
        GgmlDType::F32 => Source::Float("f32"),
        GgmlDType::F16 => Source::Float("f16"),
        GgmlDType::BF16 => Source::Float("bf16"),
        GgmlDType::Q4_0 => Source::Q4_0,
        GgmlDType::Q4_1 => Source::Q4_1,
        GgmlDType::Q8_0 => Source::Q8_0,
        GgmlDType::Q5_0 => Source::Ggml(G::Q5_0),
        GgmlDType::Q5_1 => Source::Ggml(G::Q5_1),
        GgmlDType::Q4K => Source::Ggml(G::Q4K),
        GgmlDType::Q5K => Source::Ggml(G::Q5K),
        GgmlDType::Q6K => Source::Ggml(G::Q6K),
        GgmlDType::Q8_1 => Source::Other("q8_1"),
        GgmlDType::Q2K => Source::Other("q2_k"),
        GgmlDType::Q3K => Source::Other("q3_k"),
        GgmlDType::Q8K => Source::Other("q8_k"),
    }
}

/// Reads one tensor, checking it is `rows × cols` (a vector when `rows == 1`) and that its
/// bytes lie inside the file before reading them.
fn read_tensor<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    file_len: u64,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<RawTensor> {
    let info = content
        .tensor_infos
        .get(name)
        .ok_or_else(|| EngineError::tensor(name, "missing"))?;
    let dims = info.shape.dims();
    let ok = if rows == 1 {
        dims == [cols] || dims == [1, cols]
    } else {
        dims == [rows, cols]
    };
    if !ok {
        return Err(EngineError::tensor(
            name,
            format!("shape {dims:?}, expected [{rows}, {cols}]"),
        ));
    }
    let dtype = info.ggml_dtype;
    let source = source_of(dtype);
    let raw = matches!(
        source,
        Source::Float("f32") | Source::Q4_0 | Source::Q4_1 | Source::Q8_0 | Source::Ggml(_)
    );
    if raw {
        let len = byte_len(name, dtype, rows as u64 * cols as u64)?;
        let start = content
            .tensor_data_offset
            .checked_add(info.offset)
            .ok_or_else(|| EngineError::tensor(name, "offset overflows"))?;
        if start.checked_add(len).is_none_or(|end| end > file_len) {
            let problem = format!(
                "{len} bytes at offset {start} run past the end of the file ({file_len} bytes)"
            );
            return Err(EngineError::tensor(name, problem));
        }
        let n = usize::try_from(len)
            .map_err(|_| EngineError::tensor(name, format!("{len} bytes do not fit in memory")))?;
        let mut bytes = vec![0u8; n];
        reader
            .seek(SeekFrom::Start(start))
            .and_then(|_| reader.read_exact(&mut bytes))
            .map_err(|e| EngineError::tensor(name, format!("reading {len} bytes: {e}")))?;
        return Ok(match source {
            Source::Float(_) | Source::Other(_) => {
                let v: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                check_finite(name, &v)?;
                RawTensor::F32(v)
            }
            Source::Q4_0 => {
                check_block_scales(name, &bytes, 18, 1)?;
                RawTensor::Q4_0(bytes)
            }
            Source::Q4_1 => {
                check_block_scales(name, &bytes, 20, 2)?;
                RawTensor::Q4_1(bytes)
            }
            // Scales are checked when the blocks become a matrix (`GgmlMatrix::from_ggml_vec`
            // names the field and the block).
            Source::Ggml(f) => RawTensor::Ggml(f, bytes),
            Source::Q8_0 => {
                check_block_scales(name, &bytes, 34, 1)?;
                RawTensor::Q8_0(bytes)
            }
        });
    }
    let q = info
        .read(reader, content.tensor_data_offset, &Device::Cpu)
        .map_err(|e| EngineError::tensor(name, candle_msg(&e)))?;
    let t = q
        .dequantize(&Device::Cpu)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| EngineError::tensor(name, format!("dequantizing {dtype:?}: {e}")))?;
    check_finite(name, &t)?;
    Ok(RawTensor::Dequantized(source, t))
}

/// The f16 scale (and, for Q4_1, minimum) at the start of each `block_bytes`-byte block of 32
/// values must be finite; the error names the first value index the bad block covers.
fn check_block_scales(name: &str, bytes: &[u8], block_bytes: usize, halves: usize) -> Result<()> {
    for (b, block) in bytes.chunks_exact(block_bytes).enumerate() {
        for h in block[..2 * halves].chunks_exact(2) {
            let v = half::f16::from_le_bytes([h[0], h[1]]);
            if !v.is_finite() {
                return Err(EngineError::tensor(
                    name,
                    format!(
                        "block scale {v} for values {}..{} is not finite",
                        b * 32,
                        b * 32 + 32
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_finite(name: &str, t: &[f32]) -> Result<()> {
    match t.iter().position(|v| !v.is_finite()) {
        Some(bad) => Err(EngineError::tensor(
            name,
            format!("value {} at index {bad} is not finite", t[bad]),
        )),
        None => Ok(()),
    }
}

/// candle appends a backtrace to its message when `RUST_BACKTRACE` is set; users get the first
/// line, which names the problem.
fn candle_msg(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

fn tokenizer_fields(md: &HashMap<String, Value>) -> Result<GgufTokenizerFields> {
    let strings = |key: &str| -> Result<Vec<String>> {
        match md.get(key) {
            None => Ok(Vec::new()),
            Some(v) => {
                let arr = v
                    .to_vec()
                    .map_err(|_| EngineError::metadata(key, "is not an array"))?;
                arr.iter()
                    .map(|x| {
                        x.to_string()
                            .cloned()
                            .map_err(|_| EngineError::metadata(key, "holds a non-string"))
                    })
                    .collect()
            }
        }
    };
    let token_types = match md.get("tokenizer.ggml.token_type") {
        None => Vec::new(),
        Some(v) => v
            .to_vec()
            .map_err(|_| EngineError::metadata("tokenizer.ggml.token_type", "is not an array"))?
            .iter()
            .map(|x| {
                x.to_i32().map_err(|_| {
                    EngineError::metadata("tokenizer.ggml.token_type", "holds a non-i32")
                })
            })
            .collect::<Result<_>>()?,
    };
    let id = |key: &str| -> Result<Option<u32>> {
        opt_usize(md, key)?
            .map(|v| {
                u32::try_from(v)
                    .map_err(|_| EngineError::metadata(key, format!("{v} is not a token id")))
            })
            .transpose()
    };
    Ok(GgufTokenizerFields {
        model: get_str(md, "tokenizer.ggml.model")?,
        pre: opt_str(md, "tokenizer.ggml.pre").unwrap_or_default(),
        tokens: strings("tokenizer.ggml.tokens")?,
        token_types,
        merges: strings("tokenizer.ggml.merges")?,
        scores: match md.get("tokenizer.ggml.scores") {
            None => Vec::new(),
            Some(v) => v
                .to_vec()
                .map_err(|_| EngineError::metadata("tokenizer.ggml.scores", "is not an array"))?
                .iter()
                .map(|x| {
                    x.to_f32().map_err(|_| {
                        EngineError::metadata("tokenizer.ggml.scores", "holds a non-f32")
                    })
                })
                .collect::<Result<_>>()?,
        },
        bos: id("tokenizer.ggml.bos_token_id")?,
        eos: id("tokenizer.ggml.eos_token_id")?,
        eot: id("tokenizer.ggml.eot_token_id")?,
        unk: id("tokenizer.ggml.unknown_token_id")?,
        add_space_prefix: match md.get("tokenizer.ggml.add_space_prefix") {
            None => None,
            Some(v) => Some(v.to_bool().map_err(|_| {
                EngineError::metadata("tokenizer.ggml.add_space_prefix", "is not a bool")
            })?),
        },
        add_bos: match md.get("tokenizer.ggml.add_bos_token") {
            None => false,
            Some(v) => v.to_bool().map_err(|_| {
                EngineError::metadata("tokenizer.ggml.add_bos_token", "is not a bool")
            })?,
        },
        chat_template: opt_str(md, "tokenizer.chat_template"),
    })
}

fn get_str(md: &HashMap<String, Value>, key: &str) -> Result<String> {
    match md.get(key) {
        None => Err(EngineError::metadata(key, "missing")),
        Some(v) => v
            .to_string()
            .cloned()
            .map_err(|_| EngineError::metadata(key, "is not a string")),
    }
}

fn opt_str(md: &HashMap<String, Value>, key: &str) -> Option<String> {
    md.get(key).and_then(|v| v.to_string().ok().cloned())
}

fn opt_usize(md: &HashMap<String, Value>, key: &str) -> Result<Option<usize>> {
    md.get(key).map(|v| value_usize(key, v)).transpose()
}

fn value_usize(key: &str, v: &Value) -> Result<usize> {
    let n: i128 = match v {
        Value::U8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        _ => return Err(EngineError::metadata(key, "is not an integer")),
    };
    usize::try_from(n).map_err(|_| {
        let why = if n < 0 {
            "a count cannot be negative".to_string()
        } else {
            format!("at most {} in this build", usize::MAX)
        };
        EngineError::metadata(key, format!("{n} is not a valid count ({why})"))
    })
}

/// Per-layer shapes from the `edgefit.layers.*` keys (see the module docs), if present.
fn layer_shapes(md: &HashMap<String, Value>, n_layers: usize) -> Result<Option<Vec<LayerShape>>> {
    const PREFIX: &str = "edgefit.layers.";
    if !md.keys().any(|k| k.starts_with(PREFIX)) {
        return Ok(None);
    }
    let field = |name: &str| -> Result<Vec<usize>> {
        let key = format!("{PREFIX}{name}");
        let v = opt_usize_array(md, &key)?.ok_or_else(|| EngineError::metadata(&key, "missing"))?;
        if v.len() != n_layers {
            return Err(EngineError::metadata(
                &key,
                format!("has {} entries for {n_layers} layers", v.len()),
            ));
        }
        Ok(v)
    };
    let (heads, kv_heads, qk, v, ffn) = (
        field("head_count")?,
        field("head_count_kv")?,
        field("key_length")?,
        field("value_length")?,
        field("feed_forward_length")?,
    );
    let pairs_key = format!("{PREFIX}rope_pairs");
    let pairs = opt_usize_array(md, &pairs_key)?
        .ok_or_else(|| EngineError::metadata(&pairs_key, "missing"))?;
    let mut rest = pairs.as_slice();
    let mut layers = Vec::with_capacity(n_layers);
    for i in 0..n_layers {
        let n = qk[i] / 2;
        if rest.len() < n {
            return Err(EngineError::metadata(
                &pairs_key,
                format!("ends before layer {i}'s {n} pairs"),
            ));
        }
        let (mine, tail) = rest.split_at(n);
        rest = tail;
        let rope_pairs = mine
            .iter()
            .map(|&p| {
                u16::try_from(p).map_err(|_| {
                    EngineError::metadata(&pairs_key, format!("pair {p} is too large"))
                })
            })
            .collect::<Result<_>>()?;
        layers.push(LayerShape {
            n_heads: heads[i],
            n_kv_heads: kv_heads[i],
            qk_dim: qk[i],
            v_dim: v[i],
            ffn: ffn[i],
            rope_pairs,
        });
    }
    if !rest.is_empty() {
        return Err(EngineError::metadata(
            &pairs_key,
            format!(
                "has {} entries beyond the layers' key_length / 2",
                rest.len()
            ),
        ));
    }
    Ok(Some(layers))
}

fn opt_usize_array(md: &HashMap<String, Value>, key: &str) -> Result<Option<Vec<usize>>> {
    let Some(v) = md.get(key) else {
        return Ok(None);
    };
    let Value::Array(items) = v else {
        return Err(EngineError::metadata(key, "is not an array"));
    };
    items
        .iter()
        .map(|x| value_usize(key, x))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

fn get_usize(md: &HashMap<String, Value>, key: &str) -> Result<usize> {
    opt_usize(md, key)?.ok_or_else(|| EngineError::metadata(key, "missing"))
}

fn opt_f32(md: &HashMap<String, Value>, key: &str) -> Result<Option<f32>> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::F32(x)) => Ok(Some(*x)),
        Some(Value::F64(x)) => Ok(Some(*x as f32)),
        Some(_) => Err(EngineError::metadata(key, "is not a float")),
    }
}

/// What a GGUF header says before any tensor is read ([`check_header`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HeaderCheck {
    /// `general.architecture`, one this engine builds.
    pub arch: String,
    /// `general.name`, if any.
    pub name: Option<String>,
    /// Tensors listed.
    pub tensors: usize,
}

/// The checks a load makes on the header alone, so a file is refused before its tensor data is
/// read: the magic, version and caps ([`prescan`]), the tensor layout against the file's length
/// (every tensor inside the file, none overlapping) and an architecture this engine builds.
/// Reads the metadata and tensor list only (the first few MB of a model).
pub fn check_header<R: Read + Seek>(reader: &mut R) -> Result<HeaderCheck> {
    let (content, _) = read_content(reader)?;
    let arch = get_str(&content.metadata, "general.architecture")?;
    Arch::named(&arch, "architecture")?;
    Ok(HeaderCheck {
        arch,
        name: opt_str(&content.metadata, "general.name"),
        tensors: content.tensor_infos.len(),
    })
}

/// Reads only a GGUF file's header (metadata and tensor list, no tensor data) in the form the
/// estimator takes, so `edgefit estimate --model file.gguf` sizes exactly the file's shape.
pub fn read_estimate_metadata<R: Read + Seek>(reader: &mut R) -> Result<GgufMetadata> {
    let (content, _) = read_content(reader)?;
    let kv = content
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), estimate_value(k, v)))
        .collect();
    let mut tensors: Vec<GgufTensorInfo> = content
        .tensor_infos
        .iter()
        .map(|(name, info)| GgufTensorInfo {
            name: name.clone(),
            // candle lists dims slowest-first; GGUF (and the estimator) fastest-first.
            dims: info.shape.dims().iter().rev().map(|d| *d as u64).collect(),
        })
        .collect();
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(GgufMetadata { kv, tensors })
}

/// The estimator's form of one value: arrays by length, except the integer arrays of
/// `edgefit.layers.*` (per-layer shapes of a pruned model), which it reads.
fn estimate_value(key: &str, v: &Value) -> GgufValue {
    match v {
        Value::Array(a) if key.starts_with("edgefit.layers.") => {
            let ints: Option<Vec<u64>> = a
                .iter()
                .map(|x| match x {
                    Value::U8(x) => Some(*x as u64),
                    Value::U16(x) => Some(*x as u64),
                    Value::U32(x) => Some(*x as u64),
                    Value::U64(x) => Some(*x),
                    Value::I32(x) => u64::try_from(*x).ok(),
                    Value::I64(x) => u64::try_from(*x).ok(),
                    _ => None,
                })
                .collect();
            match ints {
                Some(v) => GgufValue::UintArray(v),
                None => GgufValue::ArrayLen(a.len() as u64),
            }
        }
        Value::U8(x) => GgufValue::Uint(*x as u64),
        Value::U16(x) => GgufValue::Uint(*x as u64),
        Value::U32(x) => GgufValue::Uint(*x as u64),
        Value::U64(x) => GgufValue::Uint(*x),
        Value::I8(x) => GgufValue::Int(*x as i64),
        Value::I16(x) => GgufValue::Int(*x as i64),
        Value::I32(x) => GgufValue::Int(*x as i64),
        Value::I64(x) => GgufValue::Int(*x),
        Value::F32(x) => GgufValue::Float(*x as f64),
        Value::F64(x) => GgufValue::Float(*x),
        Value::Bool(x) => GgufValue::Bool(*x),
        Value::String(x) => GgufValue::String(x.clone()),
        Value::Array(a) => GgufValue::ArrayLen(a.len() as u64),
    }
}

/// Caps on what a GGUF header may declare. Far above any model a phone or a browser tab holds
/// (a 512-layer model has under 5 000 tensors; the largest vocabularies, ~256k tokens, have as
/// many merges), they bound the work and memory the header parse can be made to do: candle
/// keeps every array element as a 32-byte value, so an uncapped array of one-byte elements
/// would cost 32 times its size in the file.
pub const MAX_TENSORS: u64 = 1 << 16;
/// Most metadata entries.
pub const MAX_METADATA: u64 = 1 << 16;
/// Longest metadata key, in bytes.
pub const MAX_KEY_LEN: u64 = 1 << 16;
/// Most elements in one metadata array.
pub const MAX_ARRAY_LEN: u64 = 1 << 24;
/// Largest `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 16;
/// Deepest nesting of arrays in arrays.
const MAX_DEPTH: usize = 4;

/// Prescans, parses (candle) and checks the tensor layout of a GGUF file from its start;
/// returns the parse and the file's length.
fn read_content<R: Read + Seek>(reader: &mut R) -> Result<(Content, u64)> {
    let io = |e: std::io::Error| EngineError::Format(format!("reading the GGUF header: {e}"));
    let file_len = reader.seek(SeekFrom::End(0)).map_err(io)?;
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    prescan(reader, file_len)?;
    reader.seek(SeekFrom::Start(0)).map_err(io)?;
    let content = Content::read(reader)
        .map_err(|e| EngineError::Format(format!("GGUF header: {}", candle_msg(&e))))?;
    check_layout(&content, file_len)?;
    Ok((content, file_len))
}

/// Reads the header's fields in order, keeping only a small buffer, and refuses what candle's
/// parser would panic on or over-allocate for (see `read_content`).
pub fn prescan<R: Read + Seek>(reader: &mut R, file_len: u64) -> Result<()> {
    let mut s = Scan {
        r: reader,
        pos: 0,
        len: file_len,
        buf: Vec::new(),
    };
    if file_len < 4 {
        return Err(EngineError::Format(format!(
            "the file is {file_len} bytes, too short for a GGUF header"
        )));
    }
    let magic = s.take(4, "magic")?;
    if magic != b"GGUF" {
        return Err(EngineError::Format(format!(
            "the file starts with {magic:02x?}, not the GGUF magic `GGUF`"
        )));
    }
    let version = s.u32("version")?;
    if !(version == 2 || version == 3) {
        return Err(EngineError::Unsupported(format!(
            "GGUF version {version} (supported: 2, 3)"
        )));
    }
    let tensors = s.u64("tensor count")?;
    if tensors > MAX_TENSORS {
        return Err(EngineError::Format(format!(
            "GGUF header declares {tensors} tensors (at most {MAX_TENSORS})"
        )));
    }
    let entries = s.u64("metadata count")?;
    if entries > MAX_METADATA {
        return Err(EngineError::Format(format!(
            "GGUF header declares {entries} metadata entries (at most {MAX_METADATA})"
        )));
    }
    for i in 0..entries {
        let key = s.string("metadata key length", "metadata key", |n| {
            format!("GGUF metadata entry {i}: key of {n} bytes (at most {MAX_KEY_LEN})")
        })?;
        let ty = s.u32("metadata value type")?;
        if key == "general.alignment" {
            let bytes = match ty {
                0 | 1 => 1,
                2 | 3 => 2,
                4 | 5 => 4,
                _ => {
                    return Err(EngineError::metadata(
                        &key,
                        format!("has value type {ty}; expected an integer of 32 bits or fewer"),
                    ))
                }
            };
            let raw = s.take(bytes, &key)?;
            let mut le = [0u8; 8];
            le[..raw.len()].copy_from_slice(raw);
            let mut v = i64::from_le_bytes(le);
            if ty % 2 == 1 {
                // Signed: sign-extend from `bytes` bytes.
                let shift = 64 - 8 * bytes as u32;
                v = (v << shift) >> shift;
            }
            if !(v > 0 && (v as u64).is_power_of_two() && v as u64 <= MAX_ALIGNMENT) {
                return Err(EngineError::metadata(
                    &key,
                    format!("{v} is not a power of two from 1 to {MAX_ALIGNMENT}"),
                ));
            }
        } else {
            s.skip_value(&key, ty, 0)?;
        }
    }
    // The tensor infos: name, dimension count, dimensions, ggml type, offset. A file cut inside
    // them is named here (candle would only say that it failed to fill a buffer).
    for i in 0..tensors {
        let name = s.string("tensor name length", "tensor name", |n| {
            format!("GGUF tensor info {i}: name of {n} bytes (at most {MAX_KEY_LEN})")
        })?;
        let dims = s.u32(&format!("tensor `{name}` dimension count"))?;
        if dims > MAX_TENSOR_DIMS {
            return Err(EngineError::Format(format!(
                "GGUF header: tensor `{name}` has {dims} dimensions (at most {MAX_TENSOR_DIMS})"
            )));
        }
        s.skip(
            u64::from(dims) * 8 + 4 + 8,
            &format!("tensor `{name}` dimensions, type and offset"),
        )?;
    }
    Ok(())
}

/// Dimensions a GGUF tensor may have (candle's limit too).
const MAX_TENSOR_DIMS: u32 = 4;

/// A reading position in a GGUF header, with the file's length for bounds checks.
struct Scan<'a, R> {
    r: &'a mut R,
    pos: u64,
    len: u64,
    buf: Vec<u8>,
}

impl<R: Read + Seek> Scan<'_, R> {
    fn short(&self, n: u64, what: &str) -> EngineError {
        EngineError::Format(format!(
            "GGUF header: {what} at byte {} needs {n} bytes but the file ends at byte {}",
            self.pos, self.len
        ))
    }

    /// Reads `n` bytes (small ones only; see [`Scan::skip`]).
    fn take(&mut self, n: u64, what: &str) -> Result<&[u8]> {
        if self.len.saturating_sub(self.pos) < n || n > MAX_KEY_LEN {
            return Err(self.short(n, what));
        }
        self.buf.resize(n as usize, 0);
        self.r
            .read_exact(&mut self.buf)
            .map_err(|e| EngineError::Format(format!("GGUF header: reading {what}: {e}")))?;
        self.pos += n;
        Ok(&self.buf)
    }

    /// Moves past `n` bytes: read through a small buffer (a seek would drop a `BufReader`'s
    /// buffer, and a vocabulary has ~50k short strings), seek when long.
    fn skip(&mut self, n: u64, what: &str) -> Result<()> {
        if self.len.saturating_sub(self.pos) < n {
            return Err(self.short(n, what));
        }
        if n <= 4096 {
            self.take(n, what)?;
            return Ok(());
        }
        let to = self.pos + n;
        self.r
            .seek(SeekFrom::Start(to))
            .map_err(|e| EngineError::Format(format!("GGUF header: skipping {what}: {e}")))?;
        self.pos = to;
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A length-prefixed string (a key or a tensor name) of at most [`MAX_KEY_LEN`] bytes;
    /// `too_long(n)` words the error for a longer one.
    fn string(
        &mut self,
        len_what: &str,
        what: &str,
        too_long: impl FnOnce(u64) -> String,
    ) -> Result<String> {
        let n = self.u64(len_what)?;
        if n > MAX_KEY_LEN {
            return Err(EngineError::Format(too_long(n)));
        }
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }

    /// Moves past one value of GGUF type `ty` belonging to `key`.
    fn skip_value(&mut self, key: &str, ty: u32, depth: usize) -> Result<()> {
        match scalar_size(ty) {
            Some(n) => return self.skip(n, key),
            None if ty == 8 => {
                let n = self.u64(key)?;
                return self.skip(n, key);
            }
            None if ty == 9 => {}
            None => {
                return Err(EngineError::metadata(
                    key,
                    format!("value type {ty} is not a GGUF type"),
                ))
            }
        }
        if depth >= MAX_DEPTH {
            return Err(EngineError::metadata(
                key,
                format!("arrays nested more than {MAX_DEPTH} deep"),
            ));
        }
        let elem = self.u32(key)?;
        let n = self.u64(key)?;
        if n > MAX_ARRAY_LEN {
            return Err(EngineError::metadata(
                key,
                format!("array of {n} elements (at most {MAX_ARRAY_LEN})"),
            ));
        }
        match scalar_size(elem) {
            Some(size) => self.skip(n * size, key),
            None => {
                // Strings and arrays: each at least an 8-byte length.
                if self.len.saturating_sub(self.pos) / 8 < n {
                    return Err(self.short(n * 8, key));
                }
                (0..n).try_for_each(|_| self.skip_value(key, elem, depth + 1))
            }
        }
    }
}

/// Size of a GGUF scalar type, `None` for strings, arrays and unknown types.
fn scalar_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// Bytes of `elems` values of `dtype` (whole blocks only), with checked arithmetic.
fn byte_len(name: &str, dtype: GgmlDType, elems: u64) -> Result<u64> {
    let block = dtype.block_size() as u64;
    if !elems.is_multiple_of(block) {
        return Err(EngineError::tensor(
            name,
            format!("{elems} values is not a whole number of {dtype:?} blocks of {block}"),
        ));
    }
    (elems / block)
        .checked_mul(dtype.type_size() as u64)
        .ok_or_else(|| {
            EngineError::tensor(
                name,
                format!("{elems} values of {dtype:?}: the size overflows"),
            )
        })
}

/// Every tensor's bytes, computed with checked arithmetic, lie inside the file and overlap no
/// other tensor's.
fn check_layout(content: &Content, file_len: u64) -> Result<()> {
    let mut infos: Vec<_> = content.tensor_infos.iter().collect();
    infos.sort_by_key(|(name, info)| (info.offset, name.as_str()));
    let mut spans: Vec<(u64, u64, &str)> = Vec::with_capacity(infos.len());
    for (name, info) in infos {
        let dims = info.shape.dims();
        let elems = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| {
                EngineError::tensor(name, format!("dims {dims:?} multiply past 2^64"))
            })?;
        let len = byte_len(name, info.ggml_dtype, elems)?;
        let start = content.tensor_data_offset.checked_add(info.offset);
        match start.and_then(|s| s.checked_add(len).map(|e| (s, e))) {
            Some((start, end)) if end <= file_len => spans.push((start, end, name)),
            _ => {
                return Err(EngineError::tensor(
                    name,
                    format!(
                    "{len} bytes at offset {} + {} run past the end of the file ({file_len} bytes)",
                    content.tensor_data_offset, info.offset
                ),
                ))
            }
        }
    }
    spans.sort();
    let mut last: Option<(u64, u64, &str)> = None;
    for span in spans {
        if span.0 == span.1 {
            continue;
        }
        if let Some(prev) = last {
            if span.0 < prev.1 {
                return Err(EngineError::tensor(
                    span.2,
                    format!(
                        "bytes {}..{} overlap tensor `{}` at {}..{}",
                        span.0, span.1, prev.2, prev.0, prev.1
                    ),
                ));
            }
        }
        if last.is_none_or(|prev| span.1 > prev.1) {
            last = Some(span);
        }
    }
    Ok(())
}
