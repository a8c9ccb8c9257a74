//! The validation set and `edgefit validate`: the estimator against published measurements.
//!
//! # The set
//! `models/validation/*.json`, one file per source (`{"source": {...}, "points": [...]}`),
//! copied verbatim from the transcription (every number as published, batch 1), plus
//! `models/validation/map.json`, which maps the files' slugs to the estimator's ids (`soc` →
//! device profile, `model` → preset, `weights` → weight format, per point where the slug is
//! ambiguous) and lists the points that are skipped, each with its reason. A point whose
//! device, model or weight format has no mapping is skipped with that reason, never guessed.
//!
//! # What is estimated per point
//! The deployment is the point's: weight format, runtime, unit, threads (default: the
//! runtime's / device's), prompt tokens (default [`DEFAULT_PROMPT`] when the source gives only
//! decode), generated tokens (default [`DEFAULT_GEN`]), the context (the point's
//! `context_tokens` where published, at least prompt + generated; else the next power of two
//! ≥ prompt + generated, at least 256: it matters only to a static-shape runtime such as QNN,
//! whose attention spans the whole context), f16 KV cache (what the runtimes measured use),
//! batch 1, the top frequency (no throttling). Prefill tok/s and decode tok/s
//! are compared with the measured figures where the source gives them.
//!
//! # The fit ([`fit_runtimes`]): two or three numbers per runtime × unit, shared by every device
//! For each (runtime, unit) with points, in this order, from the committed priors:
//! 1. `compute_fraction` `η_c` from its prefill points;
//! 2. `decode_bandwidth_fraction` `η_d` from its decode points — on a CPU runtime with a
//!    kernel roof, only from points of unquantized formats (f32/f16/bf16, which no unpacking
//!    kernel bounds), else the prior stays;
//! 3. `decode_kernel_fraction` `κ` (CPU runtimes with a kernel roof) from its decode points
//!    of quantized formats (bisection in log space over [[`FIT_MIN`], 1]);
//! 4. `η_c` again with the new `η_d` and `κ`.
//!
//! Each step solves, per point, the value that makes the estimate equal the measurement (the
//! estimate is monotone in it; bisection over [[`FIT_MIN`], 1] to 2^-30; a point beyond
//! reach at a bound takes that bound). The value kept is a **median of per-source medians**:
//! each source's points give the median of their solutions, and the parameter is the median
//! over the sources, so each source is one vote — a source with many points (one device, one
//! harness, one app) cannot outvote the others, and one outlier cannot drag a runtime. Both
//! medians are taken in log space (`log_median`: the geometric mean of the middle two for an
//! even count; the values are fractions and rates, compared by ratio). No other figure is
//! fitted. A (runtime, unit) whose points do not constrain a parameter takes the log-space
//! median of that parameter over the other runtimes fitted on the same unit (pooled); only a
//! unit no point constrains keeps the committed prior.
//! Deterministic: same files, same numbers.
//!
//! # The figures
//! Error per point `(estimated − measured) / measured`; MAPE = mean of `|error|` × 100, by
//! phase, unit, runtime and device. **Leave-one-source-out** (LOSO): for each source, refit
//! without its points, estimate them, and pool those errors: the figure to trust for a device
//! or runtime the set has not seen. The ranges of [`crate::uncertainty`] come from the LOSO
//! residuals; "inside range" counts the points whose measurement lies in the range the
//! estimator prints for them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::band::{band_of, Bands, Phase, MIN_POINTS};
use crate::deploy::Deployment;
use crate::device::{device, DeviceProfile};
use crate::error::{json_error_in, EstimateError, Result};
use crate::format::{ComputeUnit, KvFormat, WeightFormat};
use crate::hf::preset;
use crate::runtime::{runtime_profiles, Runtime, RuntimeProfile};
pub use crate::source::Source;
use crate::spec::ModelSpec;

/// Prompt tokens assumed when a source gives only decode.
pub const DEFAULT_PROMPT: u32 = 64;
/// Generated tokens assumed when a source does not say.
pub const DEFAULT_GEN: u32 = 128;
/// Lowest value a fitted fraction may take.
pub const FIT_MIN: f64 = 0.002;

macro_rules! validation_files {
    ($($id:literal),+ $(,)?) => {
        pub(crate) const VALIDATION_FILES: &[(&str, &str)] = &[
            $(($id, include_str!(concat!("../../../models/validation/", $id, ".json")))),+
        ];
    };
}

validation_files!(
    "aihub-models-perf-2026-02",
    "aihub-models-perf-history",
    "arxiv-2603.23640-tinybench",
    "edge-llm-bench-leaderboard",
    "executorch-llama-readme",
    "executorch-llama-readme-2024-10",
    "executorch-llama2-readme",
    "executorch-llama2-readme-early",
    "geerlingguy-ai-benchmarks-issue-7",
    "geerlingguy-ai-benchmarks-readme",
    "gpu-benchmarks-on-llm-inference-apple",
    "litert-lm-readme",
    "llamacpp-discussion-4167",
    "llamacpp-docs-snapdragon-readme",
    "llamacpp-issue-27078-m1max",
    "llamacpp-pr-19356-19360-rpi5",
    "llamacpp-prs-apple-m4-m5",
    "llamacpp-prs-opencl-adreno",
    "mlc-blog-orange-pi",
    "mlc-llm-issue-1359",
    "pocketpal-pr-702",
    "pocketpal-pr-722",
    "pocketpal-pr-740",
    "t-mac-profiling-data",
    "yardstick-results",
);

pub(crate) const MAP: &str = include_str!("../../../models/validation/map.json");

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
    /// Point id → compute precision the source states (e.g. fp16 activations of a `w4`
    /// NPU model rather than the runtime's integer default).
    pub point_compute: BTreeMap<String, crate::format::ComputeDtype>,
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
    /// Runtime.
    pub runtime: Runtime,
    /// Unit.
    pub unit: ComputeUnit,
    spec: ModelSpec,
    device: DeviceProfile,
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

fn case_of(source: &str, p: &Point, map: &SlugMap) -> std::result::Result<Case, String> {
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
    let weights = match map.point_weights.get(&p.id) {
        Some(w) => *w,
        None => {
            let w = p.weights.as_deref().unwrap_or("");
            let by_runtime = format!("{}/{w}", p.runtime.as_deref().unwrap_or(""));
            *map.weights
                .get(&by_runtime)
                .or_else(|| map.weights.get(w))
                .ok_or_else(|| format!("no weight format mapped for {w:?}"))?
        }
    };
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
    let deployment = Deployment {
        weights,
        kv: KvFormat::F16,
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
        compute: map.point_compute.get(&p.id).copied(),
        ..Deployment::default()
    };
    Ok(Case {
        source: source.to_string(),
        point,
        device_id: device_id.clone(),
        preset: preset_id.clone(),
        deployment,
        runtime,
        unit,
        spec,
        device: dev,
    })
}

/// Every point of the bundled set: the cases to estimate and the skipped points.
pub fn cases() -> Result<(Vec<Case>, Vec<Skipped>)> {
    let map = slug_map()?;
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
            match case_of(&f.source.id, p, &map) {
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

/// Estimated (prefill tok/s, decode tok/s) of a case with the given runtime profiles.
fn speeds_of(c: &Case, profiles: &[RuntimeProfile]) -> Result<(f64, f64)> {
    let rt =
        profiles
            .iter()
            .find(|p| p.id == c.runtime)
            .ok_or_else(|| EstimateError::Validation {
                what: c.point.id.clone(),
                reason: format!("no profile for runtime {}", c.runtime),
            })?;
    let s = crate::speed::speeds(&c.spec, &c.deployment, &c.device, rt)?;
    Ok((s.prefill_tok_s, s.decode_tok_s))
}

/// A fitted parameter of a runtime × unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Param {
    /// `compute_fraction`, from prefill points.
    Compute,
    /// `decode_bandwidth_fraction`, from decode points (of unquantized formats when the unit
    /// has a kernel roof).
    Bandwidth,
    /// `decode_kernel_fraction`, from decode points of quantized formats.
    Kernel,
}

impl Param {
    fn phase(self) -> Phase {
        match self {
            Param::Compute => Phase::Prefill,
            Param::Bandwidth | Param::Kernel => Phase::Decode,
        }
    }
    fn bounds(self) -> (f64, f64) {
        match self {
            Param::Compute | Param::Bandwidth | Param::Kernel => (FIT_MIN, 1.0),
        }
    }
}

fn set_param(p: &mut RuntimeProfile, unit: ComputeUnit, api: Option<&str>, param: Param, v: f64) {
    let Some(u) = p.units.get_mut(&unit) else {
        return;
    };
    if let Some(f) = api.and_then(|a| u.api_fractions.get_mut(a)) {
        match param {
            Param::Compute => f.compute_fraction = v,
            Param::Bandwidth => f.decode_bandwidth_fraction = v,
            Param::Kernel => u.decode_kernel_fraction = Some(v),
        }
        return;
    }
    match param {
        Param::Compute => u.compute_fraction = v,
        Param::Bandwidth => u.decode_bandwidth_fraction = v,
        Param::Kernel => u.decode_kernel_fraction = Some(v),
    }
}

/// The GPU programming interface whose fractions of `rt` apply to `c` (the device unit's
/// `api` when the runtime profile has an entry for it; `None`: the unit-level pair).
fn api_of(c: &Case, profiles: &[RuntimeProfile]) -> Option<String> {
    let ru = profiles
        .iter()
        .find(|p| p.id == c.runtime)?
        .units
        .get(&c.unit)?;
    let api = c.device.units.get(&c.unit)?.api.as_deref();
    ru.api_entry(api).map(|(a, _)| a.to_string())
}

/// The value of the phase's parameter that makes the estimate of `c` equal its measurement.
fn solve(c: &Case, profiles: &[RuntimeProfile], param: Param, measured: f64) -> Result<f64> {
    let phase = param.phase();
    let idx = profiles.iter().position(|p| p.id == c.runtime).unwrap_or(0);
    let api = api_of(c, profiles);
    let mut trial = profiles.to_vec();
    let mut at = |v: f64| -> Result<f64> {
        set_param(&mut trial[idx], c.unit, api.as_deref(), param, v);
        let (p, d) = speeds_of(c, &trial)?;
        Ok(match phase {
            Phase::Prefill => p,
            Phase::Decode => d,
        })
    };
    let (mut lo, mut hi) = param.bounds();
    if at(hi)? <= measured {
        return Ok(hi);
    }
    if at(lo)? >= measured {
        return Ok(lo);
    }
    for _ in 0..40 {
        let mid = if param == Param::Kernel {
            (lo * hi).sqrt()
        } else {
            0.5 * (lo + hi)
        };
        if at(mid)? < measured {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(if param == Param::Kernel {
        (lo * hi).sqrt()
    } else {
        0.5 * (lo + hi)
    })
}

/// The median in log space: the geometric mean of the middle two for an even count (the
/// fitted values are fractions and rates, compared by ratio).
fn log_median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some((v[(n - 1) / 2] * v[n / 2]).sqrt())
}

fn measured(c: &Case, phase: Phase) -> Option<f64> {
    match phase {
        Phase::Prefill => c.point.prefill_tok_s,
        Phase::Decode => c.point.decode_tok_s,
    }
}

/// The fit of the module docs: the committed priors refitted on `cases`.
pub fn fit_runtimes(cases: &[&Case]) -> Result<Vec<RuntimeProfile>> {
    let mut profiles = runtime_profiles()?;
    // One group per runtime × unit × GPU interface with its own fractions (see api_of).
    let apis: Vec<Option<String>> = cases.iter().map(|c| api_of(c, &profiles)).collect();
    let mut groups: Vec<(Runtime, ComputeUnit, Option<String>)> = cases
        .iter()
        .zip(&apis)
        .map(|(c, a)| (c.runtime, c.unit, a.clone()))
        .collect();
    groups.sort();
    groups.dedup();
    type Fitted = (Runtime, ComputeUnit, Option<String>, Param, f64);
    let mut fitted: Vec<Fitted> = Vec::new();
    for param in [
        Param::Compute,
        Param::Bandwidth,
        Param::Kernel,
        Param::Compute,
    ] {
        fitted.retain(|(_, _, _, q, _)| *q != param);
        for (rt, unit, api) in &groups {
            let (rt, unit) = (*rt, *unit);
            let Some(ru) = profiles
                .iter()
                .find(|p| p.id == rt)
                .and_then(|p| p.units.get(&unit))
            else {
                continue;
            };
            if ru.device_figures {
                continue;
            }
            let kernel_roof = ru.decode_kernel_fraction.is_some();
            if param == Param::Kernel && !kernel_roof {
                continue;
            }
            // Per source, the (log-space) median of its points' solutions; then the median over
            // the sources: each source is one vote, so a source with many points (one device,
            // one harness) cannot outvote the others.
            let mut by_source: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            for (c, _) in cases
                .iter()
                .zip(&apis)
                .filter(|(c, a)| c.runtime == rt && c.unit == unit && *a == api)
            {
                let quantized = crate::runtime::is_quantized(c.deployment.weights);
                let evidence = match param {
                    Param::Compute => true,
                    Param::Bandwidth => !kernel_roof || !quantized,
                    Param::Kernel => quantized,
                };
                if let (true, Some(m)) = (evidence, measured(c, param.phase())) {
                    by_source
                        .entry(c.source.as_str())
                        .or_default()
                        .push(solve(c, &profiles, param, m)?);
                }
            }
            let sol: Vec<f64> = by_source.into_values().filter_map(log_median).collect();
            if let Some(v) = log_median(sol) {
                let idx = profiles.iter().position(|p| p.id == rt).unwrap_or(0);
                set_param(&mut profiles[idx], unit, api.as_deref(), param, v);
                fitted.push((rt, unit, api.clone(), param, v));
            }
        }
    }
    // A runtime × unit the points do not constrain takes the median of the values fitted
    // for other runtimes on the same unit (pooled), not its prior: so leaving a source out
    // leaves the evidence of the other runtimes, not a guess.
    // The same for a GPU interface entry no point constrains: the pool of that unit.
    for param in [Param::Compute, Param::Bandwidth, Param::Kernel] {
        for p in profiles.iter_mut() {
            let id = p.id;
            for (unit, ru) in p.units.iter_mut() {
                if ru.device_figures
                    || (param == Param::Kernel && ru.decode_kernel_fraction.is_none())
                {
                    continue;
                }
                let keys: Vec<Option<String>> = std::iter::once(None)
                    .chain(ru.api_fractions.keys().cloned().map(Some))
                    .filter(|k| param != Param::Kernel || k.is_none())
                    .collect();
                for key in keys {
                    if fitted
                        .iter()
                        .any(|(r, u, a, q, _)| *r == id && u == unit && *a == key && *q == param)
                    {
                        continue;
                    }
                    let pool: Vec<f64> = fitted
                        .iter()
                        .filter(|(_, u, _, q, _)| u == unit && *q == param)
                        .map(|(_, _, _, _, v)| *v)
                        .collect();
                    let Some(v) = log_median(pool) else {
                        continue;
                    };
                    let entry = key.as_ref().and_then(|a| ru.api_fractions.get_mut(a));
                    match (param, entry) {
                        (Param::Compute, Some(f)) => f.compute_fraction = v,
                        (Param::Bandwidth, Some(f)) => f.decode_bandwidth_fraction = v,
                        (Param::Compute, None) => ru.compute_fraction = v,
                        (Param::Bandwidth, None) => ru.decode_bandwidth_fraction = v,
                        (Param::Kernel, _) => ru.decode_kernel_fraction = Some(v),
                    }
                }
            }
        }
    }
    Ok(profiles)
}

/// The fit on the whole bundled set (what [`crate::estimate`] uses).
pub fn fit_all() -> Result<Vec<RuntimeProfile>> {
    let (cases, _) = cases()?;
    let refs: Vec<&Case> = cases.iter().collect();
    fit_runtimes(&refs)
}

/// One point's estimate against its measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Source id.
    pub source: String,
    /// Point id.
    pub id: String,
    /// Device profile id.
    pub device: String,
    /// Preset id.
    pub model: String,
    /// Runtime.
    pub runtime: Runtime,
    /// Unit.
    pub unit: ComputeUnit,
    /// Weight format estimated.
    pub weights: WeightFormat,
    /// Prompt tokens estimated.
    pub prompt_tokens: u32,
    /// Threads estimated (CPU).
    pub threads: Option<u32>,
    /// Phase.
    pub phase: Phase,
    /// Measured tok/s.
    pub measured: f64,
    /// Estimated tok/s, fitted on the whole set.
    pub estimated: f64,
    /// `(estimated − measured)/measured`, %.
    pub error_pct: f64,
    /// Estimated with the fit that left this point's source out.
    pub loso_estimated: f64,
    /// Its error, %.
    pub loso_error_pct: f64,
    /// The range the estimator prints for this point.
    pub range: [f64; 2],
    /// Measured within `range`.
    pub inside_range: bool,
}

/// MAPE of a group of rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mape {
    /// `phase`, `unit`, `runtime` or `device`.
    pub by: String,
    /// The group's key (`decode`, `npu cpu`...); phase-split groups read `key phase`.
    pub key: String,
    /// Rows.
    pub points: usize,
    /// In-sample MAPE, %.
    pub mape_pct: f64,
    /// Leave-one-source-out MAPE, %.
    pub loso_mape_pct: f64,
}

/// Everything `edgefit validate` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidationReport {
    /// Sources used.
    pub sources: Vec<Source>,
    /// Per point and phase.
    pub rows: Vec<Row>,
    /// Skipped points.
    pub skipped: Vec<Skipped>,
    /// MAPE tables.
    pub mape: Vec<Mape>,
    /// The fitted runtime parameters on the whole set: (runtime, unit, compute_fraction,
    /// decode_bandwidth_fraction).
    pub fitted: Vec<(Runtime, ComputeUnit, f64, f64, Option<f64>)>,
    /// The fitted per-GPU-interface fractions on the whole set: (runtime, unit, interface,
    /// compute_fraction, decode_bandwidth_fraction) ([`crate::runtime::ApiFractions`]).
    #[serde(default)]
    pub fitted_api: Vec<(Runtime, ComputeUnit, String, f64, f64)>,
    /// Fraction of rows inside their printed range.
    pub inside_range: f64,
    /// The bands.
    pub bands: Bands,
}

struct Loso {
    /// (case index, phase) → (in-sample estimate, LOSO estimate)
    est: Vec<(usize, Phase, f64, f64)>,
    all: Vec<RuntimeProfile>,
}

fn run_loso(cases: &[Case]) -> Result<Loso> {
    let refs: Vec<&Case> = cases.iter().collect();
    let all = fit_runtimes(&refs)?;
    let mut sources: Vec<&str> = cases.iter().map(|c| c.source.as_str()).collect();
    sources.sort();
    sources.dedup();
    let mut loso_est: BTreeMap<(usize, Phase), f64> = BTreeMap::new();
    for s in &sources {
        let train: Vec<&Case> = cases.iter().filter(|c| c.source != *s).collect();
        let fitted = fit_runtimes(&train)?;
        for (i, c) in cases.iter().enumerate().filter(|(_, c)| c.source == *s) {
            let (p, d) = speeds_of(c, &fitted)?;
            loso_est.insert((i, Phase::Prefill), p);
            loso_est.insert((i, Phase::Decode), d);
        }
    }
    let mut est = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let (p, d) = speeds_of(c, &all)?;
        for (phase, e) in [(Phase::Prefill, p), (Phase::Decode, d)] {
            if measured(c, phase).is_some() {
                est.push((i, phase, e, loso_est[&(i, phase)]));
            }
        }
    }
    Ok(Loso { est, all })
}

fn bands_from(cases: &[Case], loso: &Loso) -> Bands {
    let mut by_unit = Vec::new();
    let mut pooled = Vec::new();
    for phase in [Phase::Prefill, Phase::Decode] {
        // Both residuals of each point: against the LOSO estimate (out of sample) and against
        // the estimate the user sees (fitted on the whole set).
        let res = |u: Option<ComputeUnit>| -> Vec<f64> {
            loso.est
                .iter()
                .filter(|(i, p, _, _)| *p == phase && u.is_none_or(|u| cases[*i].unit == u))
                .flat_map(|(i, _, e, l)| {
                    measured(&cases[*i], phase)
                        .map(|m| [m / l, m / e])
                        .into_iter()
                        .flatten()
                })
                .collect()
        };
        let all = res(None);
        if !all.is_empty() {
            pooled.push((
                phase,
                band_of(all, format!("all units, {}", phase.as_str())),
            ));
        }
        for u in ComputeUnit::ALL {
            let r = res(Some(*u));
            if r.len() >= MIN_POINTS {
                by_unit.push((*u, phase, band_of(r, format!("{u} {}", phase.as_str()))));
            }
        }
    }
    Bands { by_unit, pooled }
}

/// The bands of [`crate::uncertainty`], from the bundled set.
pub fn compute_bands() -> Result<Bands> {
    let (cases, _) = cases()?;
    let loso = run_loso(&cases)?;
    Ok(bands_from(&cases, &loso))
}

fn mape(rows: &[&Row], by: &str, key: String) -> Mape {
    let n = rows.len().max(1) as f64;
    Mape {
        by: by.into(),
        key,
        points: rows.len(),
        mape_pct: rows.iter().map(|r| r.error_pct.abs()).sum::<f64>() / n,
        loso_mape_pct: rows.iter().map(|r| r.loso_error_pct.abs()).sum::<f64>() / n,
    }
}

/// Estimates every point of the bundled set (see the module docs).
pub fn validate() -> Result<ValidationReport> {
    let (cases, skipped) = cases()?;
    let loso = run_loso(&cases)?;
    let bands = bands_from(&cases, &loso);
    let mut rows = Vec::new();
    for &(i, phase, e, l) in &loso.est {
        let c = &cases[i];
        let m = measured(c, phase).unwrap_or(f64::NAN);
        let b = bands.band(c.unit, phase);
        let range = [e * b.low, e * b.high];
        rows.push(Row {
            source: c.source.clone(),
            id: c.point.id.clone(),
            device: c.device_id.clone(),
            model: c.preset.clone(),
            runtime: c.runtime,
            unit: c.unit,
            weights: c.deployment.weights,
            prompt_tokens: c.deployment.prompt_tokens,
            threads: crate::speed::speeds(
                &c.spec,
                &c.deployment,
                &c.device,
                loso.all
                    .iter()
                    .find(|p| p.id == c.runtime)
                    .unwrap_or(&loso.all[0]),
            )?
            .threads,
            phase,
            measured: m,
            estimated: e,
            error_pct: (e - m) / m * 100.0,
            loso_estimated: l,
            loso_error_pct: (l - m) / m * 100.0,
            range,
            inside_range: m >= range[0] && m <= range[1],
        });
    }
    let mut tables = Vec::new();
    for phase in [Phase::Prefill, Phase::Decode] {
        let r: Vec<&Row> = rows.iter().filter(|r| r.phase == phase).collect();
        tables.push(mape(&r, "phase", phase.as_str().into()));
    }
    type KeyFn = fn(&Row) -> String;
    let keys: [(&str, KeyFn); 3] = [
        ("unit", |r| r.unit.to_string()),
        ("runtime", |r| r.runtime.to_string()),
        ("device", |r| r.device.clone()),
    ];
    for (by, key) in keys {
        let mut ks: Vec<String> = rows.iter().map(key).collect();
        ks.sort();
        ks.dedup();
        for k in ks {
            for phase in [Phase::Prefill, Phase::Decode] {
                let r: Vec<&Row> = rows
                    .iter()
                    .filter(|r| r.phase == phase && key(r) == k)
                    .collect();
                if !r.is_empty() {
                    tables.push(mape(&r, by, format!("{k} {}", phase.as_str())));
                }
            }
        }
    }
    let fitted = loso
        .all
        .iter()
        .flat_map(|p| {
            p.units
                .iter()
                .filter(|(u, ru)| {
                    !ru.device_figures && cases.iter().any(|c| c.runtime == p.id && c.unit == **u)
                })
                .map(|(u, ru)| {
                    (
                        p.id,
                        *u,
                        ru.compute_fraction,
                        ru.decode_bandwidth_fraction,
                        ru.decode_kernel_fraction,
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let fitted_api = loso
        .all
        .iter()
        .flat_map(|p| {
            p.units
                .iter()
                .flat_map(|(u, ru)| {
                    ru.api_fractions.iter().map(|(a, f)| {
                        (
                            p.id,
                            *u,
                            a.clone(),
                            f.compute_fraction,
                            f.decode_bandwidth_fraction,
                        )
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let inside = rows.iter().filter(|r| r.inside_range).count() as f64 / rows.len().max(1) as f64;
    Ok(ValidationReport {
        sources: validation_files()?.into_iter().map(|f| f.source).collect(),
        rows,
        skipped,
        mape: tables,
        fitted,
        fitted_api,
        inside_range: inside,
        bands,
    })
}

impl ValidationReport {
    /// The summary README shows between `<!-- validate:begin -->` and `<!-- validate:end -->`:
    /// MAPE by phase (in-sample and LOSO), by unit, runtime and device, the fraction inside the
    /// ranges, the bands and the counts. Deterministic text.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let n_points: std::collections::BTreeSet<&str> =
            self.rows.iter().map(|r| r.id.as_str()).collect();
        let _ = writeln!(
            s,
            "{} points from {} sources ({} rows: a point may give prefill and decode), {} skipped",
            n_points.len(),
            self.sources.len(),
            self.rows.len(),
            self.skipped.len()
        );
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:<8} {:<34} {:>6} {:>10} {:>10}",
            "by", "group", "rows", "MAPE %", "LOSO %"
        );
        for m in &self.mape {
            let _ = writeln!(
                s,
                "{:<8} {:<34} {:>6} {:>10.1} {:>10.1}",
                m.by, m.key, m.points, m.mape_pct, m.loso_mape_pct
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "inside the printed range: {:.1}% of {} rows",
            self.inside_range * 100.0,
            self.rows.len()
        );
        for (phase, b) in &self.bands.pooled {
            let _ = writeln!(
                s,
                "band {:<16} x{:.2} .. x{:.2} ({} residuals)",
                format!("all {}", phase.as_str()),
                b.low,
                b.high,
                b.points
            );
        }
        for (u, phase, b) in &self.bands.by_unit {
            let _ = writeln!(
                s,
                "band {:<16} x{:.2} .. x{:.2} ({} residuals)",
                format!("{u} {}", phase.as_str()),
                b.low,
                b.high,
                b.points
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "fitted (whole set): runtime unit compute_fraction decode_bandwidth_fraction decode_kernel_fraction"
        );
        for (rt, u, cf, bw, w) in &self.fitted {
            let w = w.map(|w| format!("{w:.3}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(s, "  {rt:<10} {u:<4} {cf:.3} {bw:.3} {w}");
        }
        for (rt, u, a, cf, bw) in &self.fitted_api {
            let _ = writeln!(s, "  {rt:<10} {:<4} {cf:.3} {bw:.3} -", format!("{u}/{a}"));
        }
        s
    }

    /// The whole text `edgefit validate` prints: every row, the skipped points, the summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<50} {:<7} {:>5} {:>3} {:>10} {:>10} {:>8} {:>10} {:>8} {:>21}",
            "point",
            "phase",
            "P",
            "t",
            "measured",
            "estimate",
            "err %",
            "LOSO est",
            "LOSO %",
            "range"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<50} {:<7} {:>5} {:>3} {:>10.2} {:>10.2} {:>+8.1} {:>10.2} {:>+8.1} {:>9.2}..{:<9.2}{}",
                r.id,
                r.phase.as_str(),
                r.prompt_tokens,
                r.threads.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
                r.measured,
                r.estimated,
                r.error_pct,
                r.loso_estimated,
                r.loso_error_pct,
                r.range[0],
                r.range[1],
                if r.inside_range { "" } else { " out" }
            );
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(s, "\nskipped");
            for k in &self.skipped {
                let _ = writeln!(s, "  {} ({}): {}", k.id, k.source, k.reason);
            }
        }
        let _ = writeln!(s);
        s.push_str(&self.summary());
        s
    }
}
