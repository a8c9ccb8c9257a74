//! `ModelSpec` from a Hugging Face `config.json`, and the bundled model presets.
//!
//! Fields read (HF names): `model_type`, `hidden_size`, `num_hidden_layers`,
//! `num_attention_heads`, `num_key_value_heads` (default: `num_attention_heads`), `head_dim`
//! (when present and not null; else `hidden_size / num_attention_heads`, which must divide),
//! `intermediate_size`, `vocab_size`, `tie_word_embeddings` (default per family, as in
//! `transformers`: false for llama/mistral/qwen2/phi3, true for gemma/gemma2),
//! `attention_bias` and `mlp_bias` (llama), `max_position_embeddings`.
//! Family-specific structure: Qwen2 always has q/k/v biases; Qwen3 has per-head q/k norms; Gemma 2 has four norms a layer;
//! Phi-3's fused `qkv_proj` and `gate_up_proj` hold exactly the q, k, v and gate, up weights.
//! A multimodal config whose decoder sits under `text_config` is read from there.
//! A structurally pruned model written by edgefit adds `edgefit_layers`: one object per layer
//! with `n_heads`, `n_kv_heads`, `qk_dim`, `v_dim` and `ffn` (other keys, such as `rope_pairs`,
//! are the engine's); when present, each layer's shape is taken from it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{json_error, EstimateError, Result};
use crate::spec::{Family, LayerSpec, ModelSpec, RopeScaling};

const SRC: &str = "config.json";

fn get_u32(v: &Value, key: &str) -> Result<Option<u32>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if n <= u64::from(u32::MAX) => Ok(Some(n as u32)),
            _ => Err(EstimateError::MissingField {
                source_kind: SRC,
                field: key.to_string(),
                expected: "a non-negative integer below 2^32",
            }),
        },
    }
}

fn req_u32(v: &Value, key: &str) -> Result<u32> {
    get_u32(v, key)?.ok_or_else(|| EstimateError::MissingField {
        source_kind: SRC,
        field: key.to_string(),
        expected: "a non-negative integer",
    })
}

fn get_bool(v: &Value, key: &str) -> Result<Option<bool>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(EstimateError::MissingField {
            source_kind: SRC,
            field: key.to_string(),
            expected: "a boolean",
        }),
    }
}

/// An optional number that must be a finite f32; the error names the key and shows the value.
fn get_f32(v: &Value, key: &str) -> Result<Option<f32>> {
    get_f32_as(v, key, key)
}

/// [`get_f32`] naming the key `name` in errors (`rope_scaling.factor`).
fn get_f32_as(v: &Value, key: &str, name: &str) -> Result<Option<f32>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_f64().map(|f| f as f32).filter(|f| f.is_finite()) {
            Some(f) => Ok(Some(f)),
            None => {
                let mut shown = x.to_string();
                if shown.len() > 60 {
                    shown = format!("{}...", shown.chars().take(60).collect::<String>());
                }
                Err(crate::error::out_of_range(
                    format!("{SRC} `{name}`"),
                    shown,
                    "must be a finite number (in f32 range)",
                ))
            }
        },
    }
}

/// RoPE as a `config.json` describes it: the base `θ` (`None` when the file does not say) and
/// the scaling.
#[derive(Clone, Debug, PartialEq)]
pub struct HfRope {
    /// `rope_theta` (top level, or inside `rope_parameters`).
    pub theta: Option<f32>,
    /// The scaling, from `rope_scaling` / `rope_parameters`.
    pub scaling: RopeScaling,
    /// The base of sliding-window layers when they have their own, unscaled (Gemma 3:
    /// `rope_local_base_freq`, or `rope_parameters.sliding_attention.rope_theta`).
    pub local_theta: Option<f32>,
}

/// Reads RoPE from a `config.json` object, in both layouts:
/// - transformers 4: `rope_theta` at the top and `rope_scaling` (null, or an object with
///   `rope_type` or the older `type`);
/// - transformers 5: `rope_parameters = {"rope_type", "rope_theta", "factor", ...}`.
///
/// Kinds: `default` (none), `linear` (`factor`), `llama3` (`factor`, `low_freq_factor`,
/// `high_freq_factor`, `original_max_position_embeddings`), `yarn` (`factor`, optional
/// `beta_fast` 32, `beta_slow` 1, `attention_factor`, `mscale`, `mscale_all_dim`, `truncate`
/// true) and `longrope` (`short_factor`, `long_factor`, optional `factor`,
/// `attention_factor`; Phi-3 also spells it `su` or `yarn`, which transformers' Phi3Config
/// reads as longrope). Their original context is, as transformers 5 resolves it
/// (`standardize_rope_params`), a top-level `original_max_position_embeddings` (Phi-3's
/// config class has 4096 when the file says nothing), else the one inside the scaling object,
/// else `max_position_embeddings`. Any other kind (`dynamic`, ...) is refused naming it, as
/// is a file where `rope_scaling` and `rope_parameters` disagree. A `rope_parameters` keyed by layer type (transformers 5 Gemma 3)
/// may have `full_attention` (the global base and scaling) and `sliding_attention` (the local
/// base, which must be unscaled); other layer types are refused naming them.
pub fn rope_from_hf_config(v: &Value) -> Result<HfRope> {
    let unsupported = |what: String| EstimateError::UnsupportedFeature {
        source_kind: SRC,
        what,
    };
    let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
    let phi3 = model_type == "phi3";
    // transformers' config attribute `max_position_embeddings` (Phi3Config's default 4096 when
    // absent) and the top-level `original_max_position_embeddings` (Phi3Config: 4096).
    let max_positions = get_u32(v, "max_position_embeddings")?.or(phi3.then_some(4096));
    let top_original = get_u32(v, "original_max_position_embeddings")?.or(phi3.then_some(4096));
    let scaling_of = |obj: &Value, key: &str| -> Result<RopeScaling> {
        let field = |k: &str| format!("{key}.{k}");
        let original = || -> Result<u32> {
            top_original
                .or(get_u32(obj, "original_max_position_embeddings")?)
                .or(max_positions)
                .ok_or_else(|| EstimateError::MissingField {
                    source_kind: SRC,
                    field: field("original_max_position_embeddings"),
                    expected: "a non-negative integer (or a top-level `max_position_embeddings`)",
                })
        };
        // `factor`, or the stretch `max_position_embeddings / original` (transformers, when
        // the scaling object has none).
        let factor_or_stretch = |original: u32| -> Result<f32> {
            match get_f32_as(obj, "factor", &field("factor"))? {
                Some(f) => Ok(f),
                None => match max_positions {
                    Some(m) if original > 0 => Ok(m as f32 / original as f32),
                    _ => Err(EstimateError::MissingField {
                        source_kind: SRC,
                        field: field("factor"),
                        expected: "a finite number (or a top-level `max_position_embeddings`)",
                    }),
                },
            }
        };
        let factors = |k: &str| -> Result<Vec<f32>> {
            let bad = || EstimateError::MissingField {
                source_kind: SRC,
                field: field(k),
                expected: "a list of finite numbers",
            };
            let list = obj.get(k).and_then(Value::as_array).ok_or_else(bad)?;
            list.iter()
                .map(|x| {
                    x.as_f64()
                        .map(|f| f as f32)
                        .filter(|f| f.is_finite())
                        .ok_or_else(bad)
                })
                .collect()
        };
        let kind = match obj.get("rope_type").or(obj.get("type")) {
            None | Some(Value::Null) => "default",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => {
                return Err(EstimateError::MissingField {
                    source_kind: SRC,
                    field: field("rope_type"),
                    expected: "a string",
                })
            }
        };
        let req = |k: &str| -> Result<f32> {
            get_f32_as(obj, k, &field(k))?.ok_or_else(|| EstimateError::MissingField {
                source_kind: SRC,
                field: field(k),
                expected: "a finite number",
            })
        };
        // Phi3Config reads `su` and `yarn` as longrope (transformers 5).
        let kind = match kind {
            "su" | "yarn" if phi3 => "longrope",
            k => k,
        };
        match kind {
            "default" => Ok(RopeScaling::None),
            "linear" => Ok(RopeScaling::Linear {
                factor: req("factor")?,
            }),
            "llama3" => Ok(RopeScaling::Llama3 {
                factor: req("factor")?,
                low_freq_factor: req("low_freq_factor")?,
                high_freq_factor: req("high_freq_factor")?,
                original_context: original()?,
            }),
            "yarn" => {
                let original_context = original()?;
                let factor = factor_or_stretch(original_context)?;
                let opt = |k: &str| get_f32_as(obj, k, &field(k));
                // transformers: `attention_factor`, else the ratio of the two mscales when
                // both are set (and not 0), else yarn_get_mscale(factor).
                let attention_factor = match (opt("attention_factor")?, opt("mscale")?, opt("mscale_all_dim")?) {
                    (Some(a), _, _) => a,
                    (None, Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                        crate::spec::yarn_mscale(factor, m) / crate::spec::yarn_mscale(factor, all)
                    }
                    _ => crate::spec::yarn_mscale(factor, 1.0),
                };
                // `beta_fast or 32`, `beta_slow or 1` (0 or null take the default).
                let beta = |k: &str, default: f32| -> Result<f32> {
                    Ok(opt(k)?.filter(|b| *b != 0.0).unwrap_or(default))
                };
                let truncate = match obj.get("truncate") {
                    None | Some(Value::Null) => true,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(EstimateError::MissingField {
                            source_kind: SRC,
                            field: field("truncate"),
                            expected: "a boolean",
                        })
                    }
                };
                Ok(RopeScaling::Yarn {
                    factor,
                    original_context,
                    beta_fast: beta("beta_fast", 32.0)?,
                    beta_slow: beta("beta_slow", 1.0)?,
                    truncate,
                    attention_factor,
                })
            }
            "longrope" => {
                let original_context = original()?;
                let attention_factor = match get_f32_as(obj, "attention_factor", &field("attention_factor"))? {
                    Some(a) => a,
                    None => crate::spec::longrope_attention_factor(
                        factor_or_stretch(original_context)?,
                        original_context,
                    ),
                };
                Ok(RopeScaling::LongRope {
                    short_factor: factors("short_factor")?,
                    long_factor: factors("long_factor")?,
                    original_context,
                    attention_factor,
                })
            }
            other => Err(unsupported(format!(
                "RoPE scaling kind {other:?} in `{key}` (supported: default, linear, llama3, yarn, longrope)"
            ))),
        }
    };
    let top_theta = get_f32(v, "rope_theta")?;
    let scaling = match v.get("rope_scaling") {
        None | Some(Value::Null) => None,
        Some(o @ Value::Object(_)) => Some(scaling_of(o, "rope_scaling")?),
        Some(_) => {
            return Err(EstimateError::MissingField {
                source_kind: SRC,
                field: "rope_scaling".into(),
                expected: "null or an object",
            })
        }
    };
    let top_local = get_f32(v, "rope_local_base_freq")?;
    match v.get("rope_parameters") {
        None | Some(Value::Null) => Ok(HfRope {
            theta: top_theta,
            scaling: scaling.unwrap_or_default(),
            local_theta: top_local,
        }),
        Some(Value::Object(o)) if !o.is_empty() && o.values().all(Value::is_object) => {
            if let Some(other) = o
                .keys()
                .find(|k| !["full_attention", "sliding_attention"].contains(&k.as_str()))
            {
                return Err(unsupported(format!(
                    "`rope_parameters` for layer type `{other}` (supported: full_attention, sliding_attention)"
                )));
            }
            let (theta, from_params) = match o.get("full_attention") {
                Some(p) => (
                    get_f32(p, "rope_theta")?.or(top_theta),
                    scaling_of(p, "rope_parameters.full_attention")?,
                ),
                None => (top_theta, RopeScaling::None),
            };
            if let Some(s) = scaling.filter(|s| *s != from_params) {
                return Err(unsupported(format!(
                    "`rope_scaling` ({s:?}) disagreeing with `rope_parameters` ({from_params:?})"
                )));
            }
            let local_theta = match o.get("sliding_attention") {
                Some(p) => {
                    let s = scaling_of(p, "rope_parameters.sliding_attention")?;
                    if s != RopeScaling::None {
                        return Err(unsupported(format!(
                            "RoPE scaling {s:?} on sliding-window layers (`rope_parameters.sliding_attention`)"
                        )));
                    }
                    get_f32(p, "rope_theta")?.or(top_local)
                }
                None => top_local,
            };
            Ok(HfRope {
                theta,
                scaling: from_params,
                local_theta,
            })
        }
        Some(p @ Value::Object(_)) => {
            let from_params = scaling_of(p, "rope_parameters")?;
            if let Some(s) = scaling.filter(|s| *s != from_params) {
                return Err(unsupported(format!(
                    "`rope_scaling` ({s:?}) disagreeing with `rope_parameters` ({from_params:?})"
                )));
            }
            Ok(HfRope {
                theta: get_f32(p, "rope_theta")?.or(top_theta),
                scaling: from_params,
                local_theta: top_local,
            })
        }
        Some(_) => Err(EstimateError::MissingField {
            source_kind: SRC,
            field: "rope_parameters".into(),
            expected: "null or an object",
        }),
    }
}

impl ModelSpec {
    /// Parses an HF `config.json` (the text of the file). `name` is used for display (the
    /// config's `_name_or_path` when `name` is empty).
    pub fn from_hf_config(name: &str, json: &str) -> Result<ModelSpec> {
        let root: Value = serde_json::from_str(json).map_err(|e| json_error(SRC, e))?;
        if !root.is_object() {
            return Err(EstimateError::Json {
                what: SRC.into(),
                message: "the top level is not an object".into(),
            });
        }
        let v = match root.get("text_config") {
            Some(t) if t.is_object() && root.get("hidden_size").is_none() => t,
            _ => &root,
        };
        let model_type =
            v.get("model_type")
                .and_then(Value::as_str)
                .ok_or(EstimateError::MissingField {
                    source_kind: SRC,
                    field: "model_type".into(),
                    expected: "a string",
                })?;
        // transformers names Gemma 3's text decoder `gemma3_text`.
        let family_name = match model_type {
            "gemma3_text" => "gemma3",
            other => other,
        };
        let family: Family =
            family_name
                .parse()
                .map_err(|_| EstimateError::UnsupportedArchitecture {
                    source_kind: SRC,
                    value: model_type.to_string(),
                })?;
        let hidden = req_u32(v, "hidden_size")?;
        let layers = req_u32(v, "num_hidden_layers")?;
        let heads = req_u32(v, "num_attention_heads")?;
        // What transformers' config classes assume for an absent key (transformers 5.24
        // defaults; the engine's HF loader uses the same: `Arch::hf_defaults`).
        let (default_kv, default_head_dim) = match family {
            Family::Gemma3 | Family::Gemma2 => (Some(4), Some(256)),
            Family::Qwen3 => (Some(32), Some(128)),
            Family::Qwen2 => (Some(32), None),
            Family::Mistral => (Some(8), None),
            _ => (None, None),
        };
        let kv_heads = get_u32(v, "num_key_value_heads")?
            .or(default_kv)
            .unwrap_or(heads);
        let intermediate = req_u32(v, "intermediate_size")?;
        let vocab = req_u32(v, "vocab_size")?;
        let head_dim = match get_u32(v, "head_dim")?.or(default_head_dim) {
            Some(h) => h,
            None => {
                if heads == 0 || hidden % heads != 0 {
                    return Err(EstimateError::InvalidShape {
                        model: name.to_string(),
                        field: "head_dim".into(),
                        reason: format!(
                            "absent, and hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
                        ),
                    });
                }
                hidden / heads
            }
        };
        let tied_default = matches!(family, Family::Gemma | Family::Gemma2 | Family::Gemma3);
        let tied = get_bool(v, "tie_word_embeddings")?
            .or(get_bool(&root, "tie_word_embeddings")?)
            .unwrap_or(tied_default);
        let attention_bias = get_bool(v, "attention_bias")?.unwrap_or(false);
        let mlp_bias = get_bool(v, "mlp_bias")?.unwrap_or(false);
        let display = if name.is_empty() {
            root.get("_name_or_path")
                .and_then(Value::as_str)
                .unwrap_or(model_type)
                .to_string()
        } else {
            name.to_string()
        };
        if layers as usize > crate::spec::MAX_LAYERS {
            return Err(crate::error::out_of_range(
                "num_hidden_layers",
                layers,
                format!("must be at most {}", crate::spec::MAX_LAYERS),
            ));
        }
        let spec = ModelSpec {
            name: display,
            family,
            hidden_size: hidden,
            vocab_size: vocab,
            tie_word_embeddings: tied,
            qkv_bias: family == Family::Qwen2 || attention_bias,
            o_bias: attention_bias,
            mlp_bias,
            norms_per_layer: family.norms_per_layer(),
            qk_norm: family.qk_norm(),
            max_position_embeddings: get_u32(v, "max_position_embeddings")?,
            layers: match v.get("edgefit_layers") {
                None | Some(Value::Null) => vec![
                    LayerSpec {
                        num_heads: heads,
                        num_kv_heads: kv_heads,
                        qk_head_dim: head_dim,
                        v_head_dim: head_dim,
                        intermediate_size: intermediate,
                        sliding_window: None,
                    };
                    layers as usize
                ],
                Some(list) => edgefit_layers(list, layers)?,
            },
        };
        let mut spec = spec;
        for (l, w) in spec
            .layers
            .iter_mut()
            .zip(sliding_windows(v, family, layers)?)
        {
            l.sliding_window = w;
        }
        spec.validate()?;
        Ok(spec)
    }
}

/// Each layer's sliding window (Gemma 2 and 3): `sliding_window` on the layers `layer_types`
/// marks `sliding_attention` (transformers 5), or, without `layer_types`, on every layer but
/// each `sliding_window_pattern`-th (transformers 4; default 6, Gemma 2: 2, its even layers). Mistral and Phi-3: every layer when
/// the window is narrower than `max_position_embeddings` (transformers masks with it whenever
/// it is set; the engine runs it the same). Other families: none (Qwen2's window needs
/// `use_sliding_window`, which the engine refuses).
fn sliding_windows(v: &Value, family: Family, n: u32) -> Result<Vec<Option<u32>>> {
    let none = vec![None; n as usize];
    // An absent key takes the class default (4096 for Mistral, Qwen2/3 and Gemma 3); null is
    // no window.
    let default = matches!(
        family,
        Family::Mistral | Family::Gemma2 | Family::Gemma3 | Family::Qwen2 | Family::Qwen3
    ) && v.get("sliding_window").is_none();
    let w = match get_u32(v, "sliding_window")? {
        Some(w) => w,
        None if default => 4096,
        None => return Ok(none),
    };
    if matches!(family, Family::Qwen2 | Family::Qwen3) {
        // transformers: the window only with `use_sliding_window`, on the layers
        // `layer_types` marks or else from `max_window_layers` (default 28) on.
        if get_bool(v, "use_sliding_window")? != Some(true) {
            return Ok(none);
        }
        if let Some(types) = v.get("layer_types").and_then(Value::as_array) {
            return Ok(types
                .iter()
                .map(|t| (t.as_str() == Some("sliding_attention")).then_some(w))
                .collect());
        }
        let from = get_u32(v, "max_window_layers")?.unwrap_or(28);
        return Ok((0..n).map(|i| (i >= from).then_some(w)).collect());
    }
    if matches!(family, Family::Mistral | Family::Phi3) {
        // Without max_position_embeddings: the class default (Mistral 131072, Phi-3 4096).
        let default_context = if family == Family::Mistral {
            131_072
        } else {
            4096
        };
        let narrower = w < get_u32(v, "max_position_embeddings")?.unwrap_or(default_context);
        return Ok(if narrower {
            vec![Some(w); n as usize]
        } else {
            none
        });
    }
    if !matches!(family, Family::Gemma2 | Family::Gemma3) {
        return Ok(none);
    }
    if let Some(types) = v.get("layer_types").and_then(Value::as_array) {
        if types.len() != n as usize {
            return Err(EstimateError::MissingField {
                source_kind: SRC,
                field: "layer_types".into(),
                expected: "one entry per layer (num_hidden_layers entries)",
            });
        }
        return Ok(types
            .iter()
            .map(|t| (t.as_str() == Some("sliding_attention")).then_some(w))
            .collect());
    }
    // Gemma 2 has no pattern key: transformers slides the even layers (`layer_types` default
    // `sliding_attention` where `(i + 1) % 2`), i.e. a pattern of 2.
    let pattern = match get_u32(v, "sliding_window_pattern")? {
        Some(p) => p,
        None if family == Family::Gemma2 => 2,
        None => get_u32(v, "_sliding_window_pattern")?.unwrap_or(6),
    }
    .max(1);
    Ok((0..n)
        .map(|i| ((i + 1) % pattern != 0).then_some(w))
        .collect())
}

/// `edgefit_layers` of a pruned model's config: exactly `num_hidden_layers` objects.
fn edgefit_layers(list: &Value, n: u32) -> Result<Vec<LayerSpec>> {
    const FIELD: &str = "edgefit_layers";
    let bad = |expected: &'static str| EstimateError::MissingField {
        source_kind: SRC,
        field: FIELD.into(),
        expected,
    };
    let items = list
        .as_array()
        .ok_or_else(|| bad("an array with one object per layer"))?;
    if items.len() != n as usize {
        return Err(bad("exactly num_hidden_layers entries"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = |k: &str| -> Result<u32> {
                get_u32(item, k)?.ok_or_else(|| EstimateError::MissingField {
                    source_kind: SRC,
                    field: format!("{FIELD}[{i}].{k}"),
                    expected: "a non-negative integer",
                })
            };
            Ok(LayerSpec {
                num_heads: field("n_heads")?,
                num_kv_heads: field("n_kv_heads")?,
                qk_head_dim: field("qk_dim")?,
                v_head_dim: field("v_dim")?,
                intermediate_size: field("ffn")?,
                sliding_window: None,
            })
        })
        .collect()
}

/// Where a preset's published parameter total comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PresetInfo {
    /// The preset id (`smollm2-135m`).
    pub id: String,
    /// Display name.
    pub name: String,
    /// The Hugging Face repository the config comes from.
    pub hf_repo: String,
    /// The published parameter total.
    pub published_params: u64,
    /// Where that total is published.
    pub params_source: String,
}

macro_rules! presets {
    ($($id:literal),+ $(,)?) => {
        pub(crate) const PRESET_FILES: &[(&str, &str)] = &[
            $(($id, include_str!(concat!("../../../models/presets/", $id, ".json")))),+
        ];
    };
}

presets!(
    "smollm2-135m",
    "smollm2-360m",
    "smollm2-1.7b",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "llama-3.2-1b",
    "llama-3.2-3b",
    "llama-3-8b",
    "llama-2-7b",
    "mistral-7b",
    "sheared-llama-1.3b",
    "phi-3-mini",
    "gemma-2b",
    "gemma-2-2b",
    "gemma-3-270m",
    "gemma-3-1b",
    "llama-3.1-8b",
    "phi-3.5-mini",
    "qwen2.5-7b",
    "qwen2-7b",
    "qwen3-0.6b",
    "qwen3-1.7b",
    "qwen3-4b",
    "qwen3-8b",
    "deepseek-r1-distill-qwen-1.5b",
    "falcon3-7b",
);

/// Ids of the bundled presets (files in `models/presets/`, HF config.json form plus an
/// `edgefit` object with the published parameter total and its source).
pub fn preset_ids() -> Vec<&'static str> {
    PRESET_FILES.iter().map(|(id, _)| *id).collect()
}

fn preset_file(id: &str) -> Result<&'static str> {
    PRESET_FILES
        .iter()
        .find(|(i, _)| *i == id)
        .map(|(_, text)| *text)
        .ok_or_else(|| EstimateError::UnknownName {
            kind: "model preset",
            value: id.to_string(),
            expected: preset_ids().join(", "),
        })
}

/// The bundled preset `id` as a [`ModelSpec`].
pub fn preset(id: &str) -> Result<ModelSpec> {
    let info = preset_info(id)?;
    ModelSpec::from_hf_config(&info.name, preset_file(id)?)
}

/// The provenance record of preset `id`.
pub fn preset_info(id: &str) -> Result<PresetInfo> {
    let text = preset_file(id)?;
    #[derive(Deserialize)]
    struct Wrapper {
        edgefit: PresetInfo,
    }
    let w: Wrapper =
        serde_json::from_str(text).map_err(|e| json_error(format!("preset {id}"), e))?;
    Ok(w.edgefit)
}
