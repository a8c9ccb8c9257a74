//! A tiny random LLaMA model (or one of any architecture of [`crate::config::ARCHS`],
//! [`model_of`]), written as real GGUF and HF files, for tests that must not depend on a
//! downloaded model (the wasm tests in Node and Chromium, loader tests). It has a real
//! byte-level BPE tokenizer (256 byte tokens, three merges, ChatML special tokens) and a ChatML
//! chat template; its weights are deterministic pseudo-random numbers, so it generates noise,
//! but every code path of loading, tokenizing, the forward pass and generation runs.

use candle_core::quantized::gguf_file;
pub use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use crate::config::{Arch, LlamaConfig};
use crate::error::{EngineError, Result};
use crate::hf::pairs_to_rotate_half;
use crate::model::Model;
use crate::tensors::{LayerPart, TensorRole};
use crate::tokenizer::{GgufTokenizerFields, TextTokenizer};
use crate::weights::Weights;
use crate::weights::{LoadOptions, RawTensor, WeightsFormat};

/// Shape of the synthetic model.
pub const LAYERS: usize = 2;
pub const HIDDEN: usize = 64;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const HEAD_DIM: usize = 16;
pub const FFN: usize = 96;
pub const CONTEXT: usize = 128;

const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
const MERGES: [&str; 3] = ["Ġ t", "h e", "Ġt he"];
const CHAT_TEMPLATE: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Weight storage type of the synthetic GGUF's matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntheticDType {
    F32,
    F16,
    Q8_0,
    Q4_0,
    Q4_1,
}

impl SyntheticDType {
    fn ggml(self) -> GgmlDType {
        match self {
            SyntheticDType::F32 => GgmlDType::F32,
            SyntheticDType::F16 => GgmlDType::F16,
            SyntheticDType::Q8_0 => GgmlDType::Q8_0,
            SyntheticDType::Q4_0 => GgmlDType::Q4_0,
            SyntheticDType::Q4_1 => GgmlDType::Q4_1,
        }
    }
}

/// GPT-2's reversible map from bytes to printable characters.
fn byte_chars() -> Vec<char> {
    let mut printable: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars: Vec<u32> = printable.clone();
    let mut extra = 0;
    for b in 0..256u32 {
        if !printable.contains(&b) {
            printable.push(b);
            chars.push(256 + extra);
            extra += 1;
        }
    }
    let mut table = vec!['\0'; 256];
    for (b, c) in printable.iter().zip(chars) {
        table[*b as usize] = char::from_u32(c).unwrap_or('?');
    }
    table
}

/// The synthetic vocabulary: specials, 256 byte tokens, merged tokens.
pub fn vocab() -> Vec<String> {
    let mut v: Vec<String> = SPECIALS.iter().map(|s| s.to_string()).collect();
    v.extend(byte_chars().into_iter().map(String::from));
    v.extend(MERGES.iter().map(|m| m.replace(' ', "")));
    v
}

fn tokenizer_fields() -> GgufTokenizerFields {
    let tokens = vocab();
    let token_types = (0..tokens.len())
        .map(|i| if i < SPECIALS.len() { 3 } else { 1 })
        .collect();
    GgufTokenizerFields {
        model: "gpt2".to_string(),
        pre: "default".to_string(),
        tokens,
        token_types,
        merges: MERGES.iter().map(|s| s.to_string()).collect(),
        bos: Some(1),
        eos: Some(2),
        add_bos: false,
        chat_template: Some(CHAT_TEMPLATE.to_string()),
        ..GgufTokenizerFields::default()
    }
}

/// Deterministic values in [-scale, scale).
fn values(seed: u64, len: usize, scale: f32) -> Vec<f32> {
    let mut v = edgefit_kernels::pseudo_random(seed, len);
    v.iter_mut().for_each(|x| *x *= scale);
    v
}

/// Every tensor of the synthetic model in GGUF naming and layout: (name, rows, cols, values);
/// rows = 1 for vectors.
pub fn tensors(seed: u64) -> Vec<(String, usize, usize, Vec<f32>)> {
    let vocab = vocab().len();
    let (h, qd, kvd) = (HIDDEN, HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    let mut out = Vec::new();
    let mut n = 0u64;
    let mut push = |name: String, rows: usize, cols: usize, scale: f32, offset: f32| {
        n += 1;
        let v = values(seed.wrapping_mul(1000).wrapping_add(n), rows * cols, scale)
            .into_iter()
            .map(|x| x + offset)
            .collect();
        out.push((name, rows, cols, v));
    };
    push("token_embd.weight".into(), vocab, h, 1.0, 0.0);
    for i in 0..LAYERS {
        push(format!("blk.{i}.attn_norm.weight"), 1, h, 0.1, 1.0);
        push(format!("blk.{i}.attn_q.weight"), qd, h, 0.3, 0.0);
        push(format!("blk.{i}.attn_k.weight"), kvd, h, 0.3, 0.0);
        push(format!("blk.{i}.attn_v.weight"), kvd, h, 0.3, 0.0);
        push(format!("blk.{i}.attn_output.weight"), h, qd, 0.2, 0.0);
        push(format!("blk.{i}.ffn_norm.weight"), 1, h, 0.1, 1.0);
        push(format!("blk.{i}.ffn_gate.weight"), FFN, h, 0.3, 0.0);
        push(format!("blk.{i}.ffn_up.weight"), FFN, h, 0.3, 0.0);
        push(format!("blk.{i}.ffn_down.weight"), h, FFN, 0.2, 0.0);
    }
    push("output_norm.weight".into(), 1, h, 0.1, 1.0);
    out
}

/// The synthetic shape as architecture `arch` (an [`crate::config::ARCHS`] name) with
/// `head_dim` dims per head (16 = `HIDDEN / HEADS`; another value decouples them, as Qwen3
/// does), every tensor of the architecture's table random (biases too; norm weights near 1),
/// as a loaded f32 model with the synthetic tokenizer. The exporters turn it into HF files or
/// GGUF bytes of that architecture.
pub fn model_of(arch: &str, seed: u64, head_dim: usize) -> Result<(Model, TextTokenizer)> {
    let desc = Arch::named(arch, "architecture")?;
    let config = LlamaConfig {
        name: format!("edgefit synthetic tiny {arch}"),
        arch: arch.to_string(),
        n_layers: LAYERS,
        hidden: HIDDEN,
        n_heads: HEADS,
        n_kv_heads: KV_HEADS,
        head_dim,
        ffn: FFN,
        vocab: vocab().len(),
        context_length: CONTEXT,
        rope_base: 10_000.0,
        rope_scaling: edgefit_estimate::RopeScaling::None,
        rms_eps: 1e-5,
        tied_embeddings: true,
        qkv_bias: desc.qkv_bias,
        o_bias: false,
        mlp_bias: false,
        qk_norm: desc.qk_norm,
        embed_scale: desc.embed_scale,
        post_norms: desc.post_norms,
        activation: desc.activation,
        query_pre_attn_scalar: None,
        sliding_window: None,
        sliding_layers: Vec::new(),
        rope_local_base: None,
        rope_dim: None,
        attn_softcap: None,
        final_softcap: None,
        layers: None,
    };
    config.validate()?;
    let options = LoadOptions {
        weights: WeightsFormat::F32,
        embedding: None,
        requantize: false,
    };
    let mut n = 0u64;
    let weights = Weights::read_all(&config, options, |role, rows, cols| {
        n += 1;
        let (scale, offset) = match role {
            TensorRole::Embed => (1.0, 0.0),
            TensorRole::FinalNorm => (0.1, 1.0),
            TensorRole::Layer(_, p) => match p {
                p if p.is_norm() => (0.1, 1.0),
                LayerPart::O | LayerPart::Down => (0.2, 0.0),
                _ => (0.3, 0.0),
            },
            TensorRole::Output => (0.3, 0.0),
        };
        let v = values(seed.wrapping_mul(1000).wrapping_add(n), rows * cols, scale)
            .into_iter()
            .map(|x| x + offset)
            .collect();
        Ok((format!("{role:?}"), RawTensor::F32(v)))
    })?;
    let tokenizer = TextTokenizer::from_gguf(tokenizer_fields())?;
    Ok((Model::new(config, weights), tokenizer))
}

fn candle_err(e: candle_core::Error) -> EngineError {
    EngineError::Format(format!("writing synthetic GGUF: {e}"))
}

/// The synthetic model as GGUF bytes, matrices stored as `dtype` (norms stay F32).
pub fn gguf_bytes(seed: u64, dtype: SyntheticDType) -> Result<Vec<u8>> {
    gguf_bytes_with(seed, dtype, |_| {})
}

/// [`gguf_bytes`] with the metadata edited by `edit` before writing (keys set, changed or
/// removed; the hostile-file tests build inconsistent files this way). [`Value`] is candle's
/// GGUF value type.
pub fn gguf_bytes_with(
    seed: u64,
    dtype: SyntheticDType,
    edit: impl FnOnce(&mut Vec<(String, Value)>),
) -> Result<Vec<u8>> {
    let tf = tokenizer_fields();
    let strings = |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
    let u32v = |v: usize| Value::U32(v as u32);
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        (
            "general.name",
            Value::String("edgefit synthetic tiny".into()),
        ),
        ("llama.block_count", u32v(LAYERS)),
        ("llama.context_length", u32v(CONTEXT)),
        ("llama.embedding_length", u32v(HIDDEN)),
        ("llama.feed_forward_length", u32v(FFN)),
        ("llama.attention.head_count", u32v(HEADS)),
        ("llama.attention.head_count_kv", u32v(KV_HEADS)),
        ("llama.rope.dimension_count", u32v(HEAD_DIM)),
        ("llama.rope.freq_base", Value::F32(10_000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("tokenizer.ggml.model", Value::String(tf.model.clone())),
        ("tokenizer.ggml.pre", Value::String(tf.pre.clone())),
        ("tokenizer.ggml.tokens", strings(&tf.tokens)),
        (
            "tokenizer.ggml.token_type",
            Value::Array(tf.token_types.iter().map(|t| Value::I32(*t)).collect()),
        ),
        ("tokenizer.ggml.merges", strings(&tf.merges)),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(false)),
        (
            "tokenizer.chat_template",
            Value::String(CHAT_TEMPLATE.into()),
        ),
    ];
    let mut metadata: Vec<(String, Value)> = metadata
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    edit(&mut metadata);
    let mut qtensors = Vec::new();
    for (name, rows, cols, v) in tensors(seed) {
        let (shape, dt) = if rows == 1 {
            (vec![cols], GgmlDType::F32)
        } else {
            (vec![rows, cols], dtype.ggml())
        };
        let t = Tensor::from_vec(v, shape, &Device::Cpu).map_err(candle_err)?;
        qtensors.push((name, QTensor::quantize(&t, dt).map_err(candle_err)?));
    }
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = qtensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut cursor = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut cursor, &md, &ts).map_err(candle_err)?;
    Ok(cursor.into_inner())
}

/// The same model as HF files: `(config.json, tokenizer.json, tokenizer_config.json,
/// model.safetensors bytes)`, F32, q/k rows in HF's rotate-half order.
pub fn hf_files(seed: u64) -> Result<(String, String, String, Vec<u8>)> {
    let tok = TextTokenizer::from_gguf(tokenizer_fields())?;
    let tokenizer_json = tok.to_json()?;
    let config = serde_json::json!({
        "model_type": "llama",
        "_name_or_path": "edgefit synthetic tiny",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "intermediate_size": FFN,
        "vocab_size": vocab().len(),
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": CONTEXT,
        "tie_word_embeddings": true,
        "hidden_act": "silu",
        "eos_token_id": 2,
    });
    let tokenizer_config = serde_json::json!({
        "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>",
        "add_bos_token": false,
        "chat_template": CHAT_TEMPLATE,
    });
    let hf_name = |gguf: &str| -> String {
        let map = [
            ("attn_norm", "input_layernorm"),
            ("attn_q", "self_attn.q_proj"),
            ("attn_k", "self_attn.k_proj"),
            ("attn_v", "self_attn.v_proj"),
            ("attn_output", "self_attn.o_proj"),
            ("ffn_norm", "post_attention_layernorm"),
            ("ffn_gate", "mlp.gate_proj"),
            ("ffn_up", "mlp.up_proj"),
            ("ffn_down", "mlp.down_proj"),
        ];
        match gguf {
            "token_embd.weight" => "model.embed_tokens.weight".to_string(),
            "output_norm.weight" => "model.norm.weight".to_string(),
            _ => {
                let mut parts = gguf.splitn(3, '.');
                let (_, layer, rest) = (
                    parts.next(),
                    parts.next().unwrap_or("0"),
                    parts.next().unwrap_or(""),
                );
                let base = rest.trim_end_matches(".weight");
                let hf = map
                    .iter()
                    .find(|(g, _)| *g == base)
                    .map_or(base, |(_, h)| h);
                format!("model.layers.{layer}.{hf}.weight")
            }
        }
    };
    let mut data: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, rows, cols, v) in tensors(seed) {
        let v = if name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight") {
            pairs_to_rotate_half(&v, HEAD_DIM, cols)
        } else {
            v
        };
        let shape = if rows == 1 {
            vec![cols]
        } else {
            vec![rows, cols]
        };
        let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        data.push((hf_name(&name), shape, bytes));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| {
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                .map(|view| (n.clone(), view))
                .map_err(|e| EngineError::Format(format!("writing synthetic safetensors: {e}")))
        })
        .collect::<Result<_>>()?;
    let st = safetensors::serialize(views, None)
        .map_err(|e| EngineError::Format(format!("writing synthetic safetensors: {e}")))?;
    Ok((
        config.to_string(),
        tokenizer_json,
        tokenizer_config.to_string(),
        st,
    ))
}
