//! `ModelSpec` from GGUF metadata, given as key/value pairs and a tensor list.
//!
//! The engine owns the GGUF reader; it fills a [`GgufMetadata`] (no tensor data) and calls
//! [`GgufMetadata::to_spec`]. Keys read, with `A` = `general.architecture`:
//! `A.embedding_length`, `A.block_count`, `A.feed_forward_length`, `A.attention.head_count`,
//! `A.attention.head_count_kv` (default: head_count), `A.attention.key_length` and
//! `A.attention.value_length` (default: embedding/heads, llama.cpp's rule; never
//! `A.rope.dimension_count`, which is the rotated part of a head: Phi-3's partial RoPE),
//! `A.vocab_size` (else the length of `tokenizer.ggml.tokens`, else `token_embd.weight`'s second
//! dimension), `A.context_length`.
//!
//! From the tensor list: embeddings are tied when there is no `output.weight`; q/k/v biases when
//! `blk.0.attn_q.bias` exists; and each layer's own shape when its tensors are listed (so a
//! pruned GGUF, whose layers differ, is read correctly): heads = `attn_q` out-dim / key_length,
//! KV heads = `attn_k` out-dim / key_length, V dim = `attn_v` out-dim / KV heads, MLP width =
//! `ffn_down` in-dim. GGUF lists dims fastest-first: `[in_features, out_features]`. Fused
//! tensors (Phi-3, llama.cpp's `LLM_ARCH_PHI3`): `attn_qkv` holds q, k and v rows and must be
//! `heads · key_length + 2 · kv_heads · key_length` wide, `ffn_up` holds gate and up rows and
//! must be `2 · ffn` wide; the bytes are those of the unfused matrices (the same rows).
//!
//! A GGUF written by edgefit's pruning (`edgefit.layers.*`, see the engine's `gguf` module) can
//! differ in per-head Q/K dims between layers, which the tensor widths alone cannot tell apart
//! from a different head count; there `edgefit.layers.key_length` (one entry per layer) gives
//! each layer's Q/K head dim, and the heads follow from the widths as above.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{EstimateError, Result};
use crate::format::WeightFormat;
use crate::spec::{Family, LayerSpec, ModelSpec, RopeScaling};

const SRC: &str = "GGUF metadata";

/// One metadata value. Arrays are given by length only (the estimator needs no array content).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GgufValue {
    /// Any unsigned integer type.
    Uint(u64),
    /// Any signed integer type.
    Int(i64),
    /// f32 or f64.
    Float(f64),
    /// bool.
    Bool(bool),
    /// string.
    String(String),
    /// An array, by its element count.
    ArrayLen(u64),
    /// An array of non-negative integers, with its content (the engine passes the content for
    /// `edgefit.layers.*`; other arrays come as [`GgufValue::ArrayLen`]).
    UintArray(Vec<u64>),
    /// An array of booleans, with its content (the engine passes it for
    /// `{arch}.attention.sliding_window_pattern`, one flag per layer).
    BoolArray(Vec<bool>),
}

/// One tensor's name and dims (GGUF order: fastest-varying first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GgufTensorInfo {
    /// e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// e.g. `[576, 576]`.
    pub dims: Vec<u64>,
}

/// The metadata of a GGUF file, without tensor data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GgufMetadata {
    /// All key/value pairs.
    pub kv: BTreeMap<String, GgufValue>,
    /// All tensor infos. Must not be empty: tied embeddings are told by the absence of
    /// `output.weight`, and per-layer shapes (pruned files) by each layer's tensors.
    pub tensors: Vec<GgufTensorInfo>,
}

impl GgufMetadata {
    fn uint(&self, key: &str) -> Result<Option<u32>> {
        match self.kv.get(key) {
            None => Ok(None),
            Some(GgufValue::Uint(v)) if *v <= u64::from(u32::MAX) => Ok(Some(*v as u32)),
            Some(GgufValue::Int(v)) if (0..=i64::from(u32::MAX)).contains(v) => Ok(Some(*v as u32)),
            Some(_) => Err(EstimateError::MissingField {
                source_kind: SRC,
                field: key.to_string(),
                expected: "a non-negative integer below 2^32",
            }),
        }
    }

    fn req(&self, key: &str) -> Result<u32> {
        self.uint(key)?.ok_or_else(|| EstimateError::MissingField {
            source_kind: SRC,
            field: key.to_string(),
            expected: "a non-negative integer",
        })
    }

    fn tensor(&self, name: &str) -> Option<&GgufTensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    fn out_dim(&self, name: &str) -> Result<Option<u64>> {
        match self.tensor(name) {
            None => Ok(None),
            Some(t) if t.dims.len() == 2 => Ok(Some(t.dims[1])),
            Some(t) => Err(EstimateError::InvalidShape {
                model: "GGUF".into(),
                field: name.to_string(),
                reason: format!("expected 2 dims, found {:?}", t.dims),
            }),
        }
    }

    /// A per-layer array (`edgefit.layers.*`): `None` when absent, an error naming the key when
    /// it is not `n` integers below 2^32 (zero included: a zero dim fails validation later
    /// with the layer's index, but a zero here would divide by zero first, so it is refused).
    fn per_layer(&self, key: &str, n: u32) -> Result<Option<Vec<u32>>> {
        match self.kv.get(key) {
            None => Ok(None),
            Some(GgufValue::UintArray(a))
                if a.len() == n as usize
                    && a.iter().all(|&v| v > 0 && v <= u64::from(u32::MAX)) =>
            {
                Ok(Some(a.iter().map(|&v| v as u32).collect()))
            }
            Some(_) => Err(EstimateError::MissingField {
                source_kind: SRC,
                field: key.to_string(),
                expected: "one positive integer per layer (block_count entries)",
            }),
        }
    }

    /// Which of `n` layers slide, as llama.cpp's `load_swa_pattern` reads `key`: one flag per
    /// layer, or a period `p` (layer `i` slides when `i % p < p − 1`; 0: every layer), else
    /// `default_period`.
    pub fn sliding_pattern(&self, key: &str, n: u32, default_period: u32) -> Result<Vec<bool>> {
        let period = |p: u32| (0..n).map(|i| p == 0 || i % p < p - 1).collect();
        match self.kv.get(key) {
            None => Ok(period(default_period)),
            Some(GgufValue::BoolArray(a)) if a.len() == n as usize => Ok(a.clone()),
            Some(GgufValue::BoolArray(_) | GgufValue::ArrayLen(_) | GgufValue::UintArray(_)) => {
                Err(EstimateError::MissingField {
                    source_kind: SRC,
                    field: key.to_string(),
                    expected: "one boolean per layer (block_count entries) or a period",
                })
            }
            Some(_) => Ok(period(self.req(key)?)),
        }
    }

    fn float(&self, key: &str) -> Result<Option<f32>> {
        let f = match self.kv.get(key) {
            None => return Ok(None),
            Some(GgufValue::Float(f)) => *f as f32,
            Some(GgufValue::Uint(v)) => *v as f32,
            Some(GgufValue::Int(v)) => *v as f32,
            Some(_) => f32::NAN,
        };
        if f.is_finite() {
            Ok(Some(f))
        } else {
            Err(EstimateError::MissingField {
                source_kind: SRC,
                field: key.to_string(),
                expected: "a finite number",
            })
        }
    }

    /// The RoPE scaling the metadata of architecture `arch` states, as llama.cpp reads it:
    /// `{arch}.rope.scaling.type` (`none` or `linear`; `linear` when absent) with the factor
    /// `{arch}.rope.scaling.factor` (or the older `{arch}.rope.scale_linear`; no factor, 0 or
    /// 1 = no scaling), or `yarn` with `{arch}.rope.scaling.factor`,
    /// `.original_context_length` (default: the context length) and `.yarn_beta_fast` /
    /// `.yarn_beta_slow` (default 32 / 1), rounded ramp ends and the attention factor
    /// `0.1 · ln(factor) + 1`, as ggml's `rope_yarn` computes them with an attention factor of 1
    /// (a file that sets `.attn_factor` or `.yarn_log_multiplier` is refused naming the key:
    /// llama.cpp combines them per architecture). Other types (`longrope`, ...) are refused
    /// naming them. Per-pair divisors (`rope_freqs.weight`) and LongRoPE's factors
    /// (`rope_factors_long/short.weight`) are tensor data: the engine reads them.
    pub fn rope_scaling(&self, arch: &str) -> Result<RopeScaling> {
        let key = |s: &str| format!("{arch}.{s}");
        let kind = match self.kv.get(&key("rope.scaling.type")) {
            None => "linear".to_string(),
            Some(GgufValue::String(s)) => s.clone(),
            Some(_) => {
                return Err(EstimateError::MissingField {
                    source_kind: SRC,
                    field: key("rope.scaling.type"),
                    expected: "a string",
                })
            }
        };
        let factor = match self.float(&key("rope.scaling.factor"))? {
            Some(f) => Some(f),
            None => self.float(&key("rope.scale_linear"))?,
        };
        match (kind.as_str(), factor) {
            ("none", _) | ("linear", None) => Ok(RopeScaling::None),
            ("linear", Some(f)) if f == 0.0 || f == 1.0 => Ok(RopeScaling::None),
            ("linear", Some(factor)) => Ok(RopeScaling::Linear { factor }),
            ("yarn", factor) => {
                for k in ["rope.scaling.attn_factor", "rope.scaling.yarn_log_multiplier"] {
                    if let Some(v) = self.float(&key(k))? {
                        return Err(EstimateError::UnsupportedFeature {
                            source_kind: SRC,
                            what: format!("`{}` = {v} with YaRN RoPE scaling", key(k)),
                        });
                    }
                }
                let factor = factor.ok_or_else(|| EstimateError::MissingField {
                    source_kind: SRC,
                    field: key("rope.scaling.factor"),
                    expected: "a finite number (YaRN's stretch)",
                })?;
                let original_context = match self.uint(&key("rope.scaling.original_context_length"))? {
                    Some(n) => n,
                    None => self.req(&key("context_length"))?,
                };
                let beta = |k: &str, default: f32| -> Result<f32> {
                    Ok(self.float(&key(k))?.unwrap_or(default))
                };
                Ok(RopeScaling::Yarn {
                    factor,
                    original_context,
                    beta_fast: beta("rope.scaling.yarn_beta_fast", 32.0)?,
                    beta_slow: beta("rope.scaling.yarn_beta_slow", 1.0)?,
                    truncate: true,
                    attention_factor: crate::spec::yarn_mscale(factor, 1.0),
                })
            }
            (other, _) => Err(EstimateError::UnsupportedFeature {
                source_kind: SRC,
                what: format!(
                    "RoPE scaling type {other:?} in `{}` (supported: none, linear, yarn, and per-pair `rope_freqs.weight`)",
                    key("rope.scaling.type")
                ),
            }),
        }
    }

    /// Builds the [`ModelSpec`]. The tied-embedding flag needs the tensor list: with an empty
    /// list this returns an error naming `tensors` rather than guessing.
    pub fn to_spec(&self, name: &str) -> Result<ModelSpec> {
        let arch = match self.kv.get("general.architecture") {
            Some(GgufValue::String(s)) => s.clone(),
            _ => {
                return Err(EstimateError::MissingField {
                    source_kind: SRC,
                    field: "general.architecture".into(),
                    expected: "a string",
                })
            }
        };
        let family: Family = arch
            .parse()
            .map_err(|_| EstimateError::UnsupportedArchitecture {
                source_kind: SRC,
                value: arch.clone(),
            })?;
        let k = |s: &str| format!("{arch}.{s}");
        let hidden = self.req(&k("embedding_length"))?;
        let n_layers = self.req(&k("block_count"))?;
        let ffn = self.req(&k("feed_forward_length"))?;
        let heads = self.req(&k("attention.head_count"))?;
        let kv_heads = self.uint(&k("attention.head_count_kv"))?.unwrap_or(heads);
        let fallback_dim = hidden.checked_div(heads).unwrap_or(0);
        let key_len = self
            .uint(&k("attention.key_length"))?
            .unwrap_or(fallback_dim);
        let value_len = self.uint(&k("attention.value_length"))?.unwrap_or(key_len);
        let vocab = match self.uint(&k("vocab_size"))? {
            Some(v) => v,
            None => match self.kv.get("tokenizer.ggml.tokens") {
                Some(GgufValue::ArrayLen(n)) if *n <= u64::from(u32::MAX) => *n as u32,
                Some(GgufValue::UintArray(a)) if a.len() as u64 <= u64::from(u32::MAX) => {
                    a.len() as u32
                }
                _ => match self.out_dim("token_embd.weight")? {
                    Some(v) if v <= u64::from(u32::MAX) => v as u32,
                    _ => {
                        return Err(EstimateError::MissingField {
                            source_kind: SRC,
                            field: k("vocab_size"),
                            expected: "an integer (or tokenizer.ggml.tokens / token_embd.weight)",
                        })
                    }
                },
            },
        };
        if self.tensors.is_empty() {
            return Err(EstimateError::MissingField {
                source_kind: SRC,
                field: "tensors".into(),
                expected: "a non-empty tensor list (needed to tell tied embeddings)",
            });
        }
        if n_layers as usize > crate::spec::MAX_LAYERS {
            return Err(crate::error::out_of_range(
                k("block_count"),
                n_layers,
                format!("must be at most {}", crate::spec::MAX_LAYERS),
            ));
        }
        let tied = self.tensor("output.weight").is_none();
        let qkv_bias = self.tensor("blk.0.attn_q.bias").is_some();
        let to_u32 = |field: String, v: u64| -> Result<u32> {
            u32::try_from(v).map_err(|_| crate::error::out_of_range(field, v, "exceeds 2^32"))
        };
        let per_head = |field: String, width: u64, dim: u32| -> Result<u32> {
            if width.checked_rem(u64::from(dim)) != Some(0) {
                return Err(EstimateError::InvalidShape {
                    model: name.to_string(),
                    field,
                    reason: format!("width {width} is not a multiple of head dim {dim}"),
                });
            }
            to_u32(String::new(), width / u64::from(dim))
        };
        let key_lens = self.per_layer("edgefit.layers.key_length", n_layers)?;
        // llama.cpp's layouts (`src/models/gemma{2,3}.cpp`, `load_swa_pattern`): the file's
        // `{arch}.attention.sliding_window_pattern` (a period or one flag per layer), else
        // Gemma 3 every 6th layer full, Gemma 2 every 2nd (even layers slide); Gemma 2's window
        // is 4096 when the file does not say; other families' windows are not read (Phi-3's,
        // which llama.cpp disables) or refused by the engine.
        let swa = match family {
            Family::Gemma3 => self.uint(&k("attention.sliding_window"))?,
            Family::Gemma2 => Some(self.uint(&k("attention.sliding_window"))?.unwrap_or(4096)),
            _ => None,
        }
        .filter(|&w| w > 0);
        let sliding = match swa {
            None => vec![false; n_layers as usize],
            Some(_) => self.sliding_pattern(
                &k("attention.sliding_window_pattern"),
                n_layers,
                if family == Family::Gemma2 { 2 } else { 6 },
            )?,
        };
        let mut layers = Vec::with_capacity(n_layers as usize);
        for i in 0..n_layers {
            let key_len = key_lens.as_ref().map_or(key_len, |v| v[i as usize]);
            let t = |s: &str| format!("blk.{i}.{s}.weight");
            let h = match self.out_dim(&t("attn_q"))? {
                Some(w) => per_head(t("attn_q"), w, key_len)?,
                None => heads,
            };
            let hkv = match self.out_dim(&t("attn_k"))? {
                Some(w) => per_head(t("attn_k"), w, key_len)?,
                None => kv_heads,
            };
            let dv = match self.out_dim(&t("attn_v"))? {
                Some(w) => per_head(t("attn_v"), w, hkv)?,
                None => value_len,
            };
            let inter = match self.tensor(&t("ffn_down")) {
                Some(td) if td.dims.len() == 2 => to_u32(t("ffn_down"), td.dims[0])?,
                _ => ffn,
            };
            // Fused q/k/v and gate/up (Phi-3): the widths must be what the parts add up to.
            let fused = [
                (
                    "attn_qkv",
                    u64::from(h) * u64::from(key_len) + u64::from(hkv) * u64::from(key_len + dv),
                ),
                ("ffn_up", 2 * u64::from(inter)),
            ];
            for (part, want) in fused {
                if part == "ffn_up" && self.tensor(&t("ffn_gate")).is_some() {
                    continue;
                }
                if let Some(w) = self.out_dim(&t(part))? {
                    if w != want {
                        return Err(EstimateError::InvalidShape {
                            model: name.to_string(),
                            field: t(part),
                            reason: format!(
                                "fused width {w}, expected {want} (the parts it holds: {})",
                                if part == "ffn_up" {
                                    "gate and up"
                                } else {
                                    "q, k and v"
                                }
                            ),
                        });
                    }
                }
            }
            layers.push(LayerSpec {
                num_heads: h,
                num_kv_heads: hkv,
                qk_head_dim: key_len,
                v_head_dim: dv,
                intermediate_size: inter,
                sliding_window: swa.filter(|_| sliding[i as usize]),
            });
        }
        let display = match (name.is_empty(), self.kv.get("general.name")) {
            (true, Some(GgufValue::String(s))) => s.clone(),
            _ => name.to_string(),
        };
        let spec = ModelSpec {
            name: display,
            family,
            hidden_size: hidden,
            vocab_size: vocab,
            tie_word_embeddings: tied,
            qkv_bias,
            o_bias: self.tensor("blk.0.attn_output.bias").is_some(),
            mlp_bias: self.tensor("blk.0.ffn_down.bias").is_some(),
            norms_per_layer: family.norms_per_layer(),
            qk_norm: self.tensor("blk.0.attn_q_norm.weight").is_some(),
            max_position_embeddings: self.uint(&k("context_length"))?,
            layers,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// What `general.file_type` (llama.cpp's `llama_ftype`, the recipe `llama-quantize` wrote
    /// the file with) says of the file's weights: its name and the layer format the estimator
    /// sizes it as, if any. `None` when the key is absent or not an integer.
    pub fn file_type(&self) -> Option<GgufFileType> {
        let code = match self.kv.get("general.file_type")? {
            GgufValue::Uint(v) => u32::try_from(*v).ok()?,
            GgufValue::Int(v) => u32::try_from(*v).ok()?,
            _ => return None,
        };
        Some(GgufFileType::from_code(code))
    }
}

/// A GGUF file's `general.file_type`: llama.cpp's `llama_ftype` code, its `llama-quantize`
/// name, and the layer format the estimator sizes such a file as (`None` for the recipes whose
/// types it has no layout for: the IQ, ternary and MXFP4 types).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufFileType {
    /// The `llama_ftype` value.
    pub code: u32,
    /// llama.cpp's name of the recipe (`Q4_K_M`, `Q8_0`, `F16`, ...), or `type N`.
    pub name: String,
    /// The weight format of the file's layers as the estimator names it (`q4_k` for Q4_K_S and
    /// Q4_K_M, `q3_k` for Q3_K_S/M/L, `q2_k` for Q2_K and Q2_K_S: the estimator's llama.cpp
    /// runtime sizes them as the Q4_K_M, Q3_K_M and Q2_K recipes).
    pub weights: Option<WeightFormat>,
}

impl GgufFileType {
    /// The values of `enum llama_ftype` (llama.cpp `include/llama.h`; 4–6 are retired, 1024 is
    /// "guessed": not written to files).
    pub fn from_code(code: u32) -> GgufFileType {
        use WeightFormat as W;
        let (name, weights) = match code {
            0 => ("F32", Some(W::F32)),
            1 => ("F16", Some(W::F16)),
            2 => ("Q4_0", Some(W::Q4_0)),
            3 => ("Q4_1", Some(W::Q4_1)),
            7 => ("Q8_0", Some(W::Q8_0)),
            8 => ("Q5_0", Some(W::Q5_0)),
            9 => ("Q5_1", Some(W::Q5_1)),
            10 => ("Q2_K", Some(W::Q2K)),
            11 => ("Q3_K_S", Some(W::Q3K)),
            12 => ("Q3_K_M", Some(W::Q3K)),
            13 => ("Q3_K_L", Some(W::Q3K)),
            14 => ("Q4_K_S", Some(W::Q4K)),
            15 => ("Q4_K_M", Some(W::Q4K)),
            16 => ("Q5_K_S", Some(W::Q5K)),
            17 => ("Q5_K_M", Some(W::Q5K)),
            18 => ("Q6_K", Some(W::Q6K)),
            19 => ("IQ2_XXS", None),
            20 => ("IQ2_XS", None),
            21 => ("Q2_K_S", Some(W::Q2K)),
            22 => ("IQ3_XS", None),
            23 => ("IQ3_XXS", None),
            24 => ("IQ1_S", None),
            25 => ("IQ4_NL", None),
            26 => ("IQ3_S", None),
            27 => ("IQ3_M", None),
            28 => ("IQ2_S", None),
            29 => ("IQ2_M", None),
            30 => ("IQ4_XS", None),
            31 => ("IQ1_M", None),
            32 => ("BF16", Some(W::Bf16)),
            36 => ("TQ1_0", None),
            37 => ("TQ2_0", None),
            38 => ("MXFP4_MOE", None),
            _ => ("", None),
        };
        GgufFileType {
            code,
            name: if name.is_empty() {
                format!("type {code}")
            } else {
                name.to_string()
            },
            weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_type_names_llama_cpp_recipes_and_the_format_the_estimator_sizes() {
        let with = |v: GgufValue| GgufMetadata {
            kv: BTreeMap::from([("general.file_type".to_string(), v)]),
            tensors: Vec::new(),
        };
        for (v, name, weights) in [
            (GgufValue::Uint(15), "Q4_K_M", Some(WeightFormat::Q4K)),
            (GgufValue::Int(3), "Q4_1", Some(WeightFormat::Q4_1)),
            (GgufValue::Uint(12), "Q3_K_M", Some(WeightFormat::Q3K)),
            (GgufValue::Uint(30), "IQ4_XS", None),
        ] {
            let f = with(v).file_type().unwrap();
            assert_eq!((f.name.as_str(), f.weights), (name, weights));
        }
        assert_eq!(
            with(GgufValue::Uint(99)).file_type().unwrap().name,
            "type 99"
        );
        assert_eq!(with(GgufValue::String("15".into())).file_type(), None);
        assert_eq!(with(GgufValue::Int(-1)).file_type(), None);
        let none = GgufMetadata {
            kv: BTreeMap::new(),
            tensors: Vec::new(),
        };
        assert_eq!(none.file_type(), None);
    }

    /// A Phi-3 header as llama.cpp's converter writes it (the tiny `phi3_gguf` fixture's shape:
    /// hidden 32, 4 heads of 8, 2 KV heads, RoPE on 4 dims of each head, MLP 32, untied).
    fn phi3(qkv_width: u64) -> GgufMetadata {
        let mut kv = BTreeMap::new();
        kv.insert(
            "general.architecture".into(),
            GgufValue::String("phi3".into()),
        );
        for (k, v) in [
            ("phi3.embedding_length", 32),
            ("phi3.block_count", 2),
            ("phi3.feed_forward_length", 32),
            ("phi3.attention.head_count", 4),
            ("phi3.attention.head_count_kv", 2),
            ("phi3.rope.dimension_count", 4),
            ("phi3.context_length", 256),
            ("phi3.attention.sliding_window", 0),
        ] {
            kv.insert(k.into(), GgufValue::Uint(v));
        }
        kv.insert("tokenizer.ggml.tokens".into(), GgufValue::ArrayLen(384));
        let t = |name: &str, dims: &[u64]| GgufTensorInfo {
            name: name.into(),
            dims: dims.to_vec(),
        };
        let mut tensors = vec![
            t("token_embd.weight", &[32, 384]),
            t("output.weight", &[32, 384]),
            t("output_norm.weight", &[32]),
        ];
        for i in 0..2 {
            tensors.push(t(&format!("blk.{i}.attn_qkv.weight"), &[32, qkv_width]));
            tensors.push(t(&format!("blk.{i}.attn_output.weight"), &[32, 32]));
            tensors.push(t(&format!("blk.{i}.ffn_up.weight"), &[32, 64]));
            tensors.push(t(&format!("blk.{i}.ffn_down.weight"), &[32, 32]));
            tensors.push(t(&format!("blk.{i}.attn_norm.weight"), &[32]));
            tensors.push(t(&format!("blk.{i}.ffn_norm.weight"), &[32]));
        }
        GgufMetadata { kv, tensors }
    }

    /// A Gemma 2 header (3 blocks, window 8): llama.cpp slides the even blocks
    /// (`set_swa_pattern(2)`), so blocks 0 and 2 hold at most 8 tokens and block 1 all of them.
    #[test]
    fn gemma2_slides_every_other_layer() {
        let mut kv = BTreeMap::new();
        kv.insert(
            "general.architecture".into(),
            GgufValue::String("gemma2".into()),
        );
        for (k, v) in [
            ("gemma2.embedding_length", 32),
            ("gemma2.block_count", 3),
            ("gemma2.feed_forward_length", 32),
            ("gemma2.attention.head_count", 4),
            ("gemma2.attention.head_count_kv", 2),
            ("gemma2.attention.key_length", 16),
            ("gemma2.attention.value_length", 16),
            ("gemma2.context_length", 256),
            ("gemma2.attention.sliding_window", 8),
        ] {
            kv.insert(k.into(), GgufValue::Uint(v));
        }
        kv.insert("tokenizer.ggml.tokens".into(), GgufValue::ArrayLen(384));
        let t = |name: String, dims: &[u64]| GgufTensorInfo {
            name,
            dims: dims.to_vec(),
        };
        let mut tensors = vec![
            t("token_embd.weight".into(), &[32, 384]),
            t("output_norm.weight".into(), &[32]),
        ];
        for i in 0..3 {
            for (n, d) in [
                ("attn_q.weight", &[32, 64][..]),
                ("attn_k.weight", &[32, 32]),
                ("attn_v.weight", &[32, 32]),
                ("attn_output.weight", &[64, 32]),
                ("ffn_gate.weight", &[32, 32]),
                ("ffn_up.weight", &[32, 32]),
                ("ffn_down.weight", &[32, 32]),
                ("attn_norm.weight", &[32]),
                ("post_attention_norm.weight", &[32]),
                ("ffn_norm.weight", &[32]),
                ("post_ffw_norm.weight", &[32]),
            ] {
                tensors.push(t(format!("blk.{i}.{n}"), d));
            }
        }
        let spec = GgufMetadata { kv, tensors }.to_spec("").unwrap();
        assert_eq!(spec.family, Family::Gemma2);
        let windows: Vec<Option<u32>> = spec.layers.iter().map(|l| l.sliding_window).collect();
        assert_eq!(windows, [Some(8), None, Some(8)]);
        // f32 K and V: 2 KV heads × 16 dims × 4 bytes × 2 per token and layer.
        let per = 2 * 2 * 16 * 4;
        assert_eq!(
            crate::kv_bytes(&spec, crate::KvFormat::F32, 100),
            per * (8 + 100 + 8)
        );
    }

    /// The head size is hidden / heads (8), not the rotated dims (4), and the fused tensors
    /// count as the matrices they hold.
    #[test]
    fn phi3_fused_tensors_and_partial_rope_give_the_real_shape() {
        let spec = phi3(64).to_spec("").unwrap();
        assert_eq!(spec.family, Family::Phi3);
        assert!(!spec.tie_word_embeddings);
        for l in &spec.layers {
            assert_eq!((l.num_heads, l.num_kv_heads), (4, 2));
            assert_eq!((l.qk_head_dim, l.v_head_dim), (8, 8));
            assert_eq!((l.intermediate_size, l.sliding_window), (32, None));
        }
        // 2 embeddings + per layer q/k/v/o + gate/up/down + 2 norms, + the final norm.
        let per_layer = 32 * (32 + 16 + 16) + 32 * 32 + 3 * 32 * 32 + 2 * 32;
        assert_eq!(spec.params().total, 2 * 384 * 32 + 2 * per_layer + 32);
        let err = phi3(60).to_spec("").unwrap_err().to_string();
        assert!(
            err.contains("blk.0.attn_qkv.weight") && err.contains("60"),
            "{err}"
        );
    }
}
