//! The validation set: the committed transcriptions (`models/validation/*.json`, bundled with
//! `include_str!`), the slug map, and each point turned into a [`Case`] (spec, deployment,
//! device, runtime) or a [`Skipped`] with its reason.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deploy::Deployment;
use crate::device::{device, DeviceProfile};
use crate::error::{json_error_in, EstimateError, Result};
use crate::format::{ComputeUnit, KvFormat, WeightFormat};
use crate::hf::preset;
use crate::runtime::{runtime_profiles, Runtime, RuntimeProfile};
use crate::source::Source;
use crate::spec::ModelSpec;

use super::{DEFAULT_GEN, DEFAULT_PROMPT};

macro_rules! validation_files {
    ($($id:literal),+ $(,)?) => {
        pub(crate) const VALIDATION_FILES: &[(&str, &str)] = &[
            $(($id, include_str!(concat!("../../../../models/validation/", $id, ".json")))),+
        ];
    };
}

validation_files!(
    "aihub-models-perf-2026-02",
    "aihub-models-perf-history",
    "arxiv-2410.03613",
    "arxiv-2603.23640-tinybench",
    "edge-ai-study-raspi5",
    "edge-llm-bench-leaderboard",
    "executorch-issue-22968-vulkan-s26u",
    "executorch-llama-readme",
    "executorch-llama-readme-2024-10",
    "executorch-llama2-readme",
    "executorch-llama2-readme-early",
    "executorch-pr-20587-qnn-sm8750",
    "geerlingguy-ai-benchmarks-issue-7",
    "geerlingguy-ai-benchmarks-readme",
    "gpu-benchmarks-on-llm-inference-apple",
    "litert-community-hf-cards",
    "litert-lm-issue-1748",
    "litert-lm-readme",
    "litert-samples-lm-leaderboard",
    "llamacpp-discussion-4167",
    "llamacpp-docs-snapdragon-readme",
    "llamacpp-issue-27078-m1max",
    "llamacpp-pr-10693-xiaomi14",
    "llamacpp-pr-14987-opencl-fa-adreno830",
    "llamacpp-pr-15732-opencl-q8_0-adreno830",
    "llamacpp-pr-19356-19360-rpi5",
    "llamacpp-prs-apple-m4-m5",
    "llamacpp-prs-opencl-adreno",
    "mlc-blog-orange-pi",
    "mlc-llm-issue-1359",
    "mlc-relax-pr-319-adreno-gemv",
    "nyunai-edge-llm-leaderboard-rpi5",
    "optimum-executorch-readme-2025-06",
    "pocketpal-pr-702",
    "pocketpal-pr-722",
    "pocketpal-pr-740",
    "t-mac-profiling-data",
    "yardstick-results",
    "pocketpal-baseline-poco-x7-klee",
);

pub(crate) const MAP: &str = include_str!("../../../../models/validation/map.json");

/// One published measurement, as transcribed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Unique id.
    pub id: String,
    /// Device as published.
    #[serde(default)]
    pub device: Option<String>,
    /// SoC slug.
    #[serde(default)]
    pub soc: Option<String>,
    /// Model slug.
    #[serde(default)]
    pub model: Option<String>,
    /// HF repo of the model.
    #[serde(default)]
    pub hf_model: Option<String>,
    /// Parameters, billions, as published.
    #[serde(default)]
    pub params_b: Option<f64>,
    /// Weight format slug.
    #[serde(default)]
    pub weights: Option<String>,
    /// What the source says about the weights.
    #[serde(default)]
    pub weights_note: Option<String>,
    /// Runtime id.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Backend as published.
    #[serde(default)]
    pub backend: Option<String>,
    /// Unit id.
    #[serde(default)]
    pub unit: Option<String>,
    /// Threads, if published.
    #[serde(default)]
    pub threads: Option<u32>,
    /// Prompt tokens, if published.
    #[serde(default)]
    pub prompt_tokens: Option<u32>,
    /// Generated tokens, if published.
    #[serde(default)]
    pub gen_tokens: Option<u32>,
    /// Context the deployment was compiled / configured for, if published (a static-shape
    /// runtime's attention spans all of it: [`crate::runtime::RuntimeUnit::static_context`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u32>,
    /// Measured prefill tok/s.
    #[serde(default)]
    pub prefill_tok_s: Option<f64>,
    /// Measured decode tok/s.
    #[serde(default)]
    pub decode_tok_s: Option<f64>,
    /// Measured TTFT, ms.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// The sentence or table row the numbers were read from.
    #[serde(default)]
    pub quote: Option<String>,
}

/// One file of the set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidationFile {
    /// The source.
    pub source: Source,
    /// Its measurements.
    pub points: Vec<Point>,
}

/// `models/validation/map.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlugMap {
    /// SoC slug → device profile id.
    pub soc: BTreeMap<String, String>,
    /// Model slug → preset id.
    pub model: BTreeMap<String, String>,
    /// Weight slug → format; `runtime/slug` keys (e.g. `mlx/int4`) take precedence.
    pub weights: BTreeMap<String, WeightFormat>,
    /// Point id → format (overrides `weights`).
    pub point_weights: BTreeMap<String, WeightFormat>,
    /// Weight slug → compute precision the slug itself names, keyed like `weights` (AI Hub's
    /// `qnn/w4`: 4-bit weights with fp16 activations, where `qnn/w4a16` keeps the runtime's
    /// integer default).
    pub weights_compute: BTreeMap<String, crate::format::ComputeDtype>,
    /// Point id → compute precision the source states (overrides `weights_compute`).
    pub point_compute: BTreeMap<String, crate::format::ComputeDtype>,
    /// Source id → tokens in the KV cache when its timed decode starts, where the source's
    /// harness says so (llama-bench's `tgN` test decodes into an empty cache: `-d` depth 0 by
    /// default), instead of the point's prompt.
    pub decode_depth: BTreeMap<String, u32>,
    /// Point id → why it is skipped.
    pub skip: BTreeMap<String, String>,
    /// Point id → why its prefill figure is not used (its decode figure is).
    pub skip_prefill: BTreeMap<String, String>,
    /// Notes on the mapping choices.
    pub notes: Vec<String>,
}

/// A point ready to estimate.
#[derive(Clone, Debug)]
pub struct Case {
    /// Source id.
    pub source: String,
    /// The point.
    pub point: Point,
    /// Device profile id.
    pub device_id: String,
    /// Preset id.
    pub preset: String,
    /// The deployment estimated.
    pub deployment: Deployment,
    /// The deployment whose decode is compared, when the decode ran at another cache depth
    /// than after the point's prompt ([`SlugMap::decode_depth`]); `None`: `deployment`.
    pub decode_deployment: Option<Deployment>,
    /// Runtime.
    pub runtime: Runtime,
    /// Unit.
    pub unit: ComputeUnit,
    pub(super) spec: ModelSpec,
    pub(super) device: DeviceProfile,
}

/// A point not estimated, with the reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// Source id.
    pub source: String,
    /// Point id.
    pub id: String,
    /// Why.
    pub reason: String,
}

/// The bundled files, parsed.
pub fn validation_files() -> Result<Vec<ValidationFile>> {
    VALIDATION_FILES
        .iter()
        .map(|(id, text)| {
            let f: ValidationFile = serde_json::from_str(text)
                .map_err(|e| json_error_in(format!("validation file {id}.json"), text, e))?;
            if f.source.id != *id {
                return Err(EstimateError::Validation {
                    what: format!("{id}.json"),
                    reason: format!("source.id {:?} differs from the file name", f.source.id),
                });
            }
            Ok(f)
        })
        .collect()
}

/// The slug map.
pub fn slug_map() -> Result<SlugMap> {
    serde_json::from_str(MAP).map_err(|e| json_error_in("models/validation/map.json", MAP, e))
}

fn case_of(
    source: &str,
    p: &Point,
    map: &SlugMap,
    profiles: &[RuntimeProfile],
) -> std::result::Result<Case, String> {
    if let Some(r) = map.skip.get(&p.id) {
        return Err(r.clone());
    }
    if p.prefill_tok_s.is_none() && p.decode_tok_s.is_none() {
        return Err("neither prefill nor decode tok/s published".into());
    }
    let soc = p.soc.as_deref().unwrap_or("");
    let device_id = map
        .soc
        .get(soc)
        .ok_or_else(|| format!("no device profile mapped for soc {soc:?}"))?;
    let model = p.model.as_deref().unwrap_or("");
    let preset_id = map
        .model
        .get(model)
        .ok_or_else(|| format!("no preset mapped for model {model:?}"))?;
    let slug = p.weights.as_deref().unwrap_or("");
    let by_runtime = format!("{}/{slug}", p.runtime.as_deref().unwrap_or(""));
    let weights = match map.point_weights.get(&p.id) {
        Some(w) => *w,
        None => *map
            .weights
            .get(&by_runtime)
            .or_else(|| map.weights.get(slug))
            .ok_or_else(|| format!("no weight format mapped for {slug:?}"))?,
    };
    let compute = map
        .point_compute
        .get(&p.id)
        .or_else(|| map.weights_compute.get(&by_runtime))
        .or_else(|| map.weights_compute.get(slug))
        .copied();
    let runtime: Runtime = p
        .runtime
        .as_deref()
        .unwrap_or("")
        .parse()
        .map_err(|e: EstimateError| e.to_string())?;
    let unit: ComputeUnit = p
        .unit
        .as_deref()
        .unwrap_or("")
        .parse()
        .map_err(|e: EstimateError| e.to_string())?;
    let spec = preset(preset_id).map_err(|e| e.to_string())?;
    let dev = device(device_id).map_err(|e| e.to_string())?;
    let mut point = p.clone();
    if map.skip_prefill.contains_key(&p.id) {
        point.prefill_tok_s = None;
    }
    let prompt = p.prompt_tokens.unwrap_or(DEFAULT_PROMPT);
    let gen = p.gen_tokens.unwrap_or(DEFAULT_GEN);
    // The KV format the runtime's exported models hold where it fixes one (LiteRT's f32), else
    // f16, what the other runtimes measured use.
    let kv = profiles
        .iter()
        .find(|r| r.id == runtime)
        .and_then(|r| r.units.get(&unit))
        .and_then(|u| u.kv_cache)
        .unwrap_or(KvFormat::F16);
    let deployment = Deployment {
        weights,
        kv,
        // The published context where the source gives one (raised to prompt + generated
        // tokens where a published prompt fills it), else the next power of two that holds
        // the run.
        context: p.context_tokens.map_or_else(
            || (prompt + gen).next_power_of_two().max(256),
            |c| c.max(prompt + gen),
        ),
        prompt_tokens: prompt,
        gen_tokens: gen,
        unit: Some(unit),
        runtime: Some(runtime),
        threads: p.threads,
        compute,
        ..Deployment::default()
    };
    // A decode timed from cache depth d runs its steps at cache lengths d, d+1, …: the same
    // deployment with a prompt of d tokens (at least 1, the first step's own position).
    let decode_deployment = map.decode_depth.get(source).map(|&d| Deployment {
        prompt_tokens: d.max(1),
        ..deployment.clone()
    });
    Ok(Case {
        source: source.to_string(),
        point,
        device_id: device_id.clone(),
        preset: preset_id.clone(),
        deployment,
        decode_deployment,
        runtime,
        unit,
        spec,
        device: dev,
    })
}

/// Every point of the bundled set: the cases to estimate and the skipped points.
pub fn cases() -> Result<(Vec<Case>, Vec<Skipped>)> {
    let map = slug_map()?;
    let profiles = runtime_profiles()?;
    let mut cases = Vec::new();
    let mut skipped = Vec::new();
    for f in validation_files()? {
        for p in &f.points {
            if let Some(reason) = map.skip_prefill.get(&p.id) {
                skipped.push(Skipped {
                    source: f.source.id.clone(),
                    id: format!("{} (prefill only)", p.id),
                    reason: reason.clone(),
                });
            }
            match case_of(&f.source.id, p, &map, &profiles) {
                Ok(c) => cases.push(c),
                Err(reason) => skipped.push(Skipped {
                    source: f.source.id.clone(),
                    id: p.id.clone(),
                    reason,
                }),
            }
        }
    }
    Ok((cases, skipped))
}
