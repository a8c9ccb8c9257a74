//! "What fits?": the sizing solver. For one device, it estimates every combination of model ×
//! weight format × KV format × structured-pruning level × context length, keeps the ones that
//! pass the golden four, ranks them and marks the Pareto frontier of quality against speed and
//! memory.
//!
//! Pure like the rest of the crate: the same [`FitRequest`] gives the same [`FitResult`] in the
//! CLI (`edgefit fit`) and on the page (wasm `fit`), so their rankings are equal by construction.
//!
//! ## The search
//! - **models**: the candidates given (the CLI and the page pass the bundled presets, optionally
//!   one preset or one family, or the loaded model's shape);
//! - **weights** (default `f16`, `q8_0`, `w4g32`, `w4g128`), **KV** (default every
//!   [`KvFormat`]), **pruning levels** (default 0, 10, 20, 30%), **contexts** (default 1024,
//!   2048, 4096, 8192 tokens; one when the user fixes it);
//! - a pruning level `r` is TransAct-style: MLP width, per-head Q/K dims and per-head V dims
//!   each lose the fraction `r` in every layer, heads, depth and hidden size stay
//!   ([`Pruning::from_ratios`] rounds exactly as the engine's pruning does);
//! - every other knob (prompt and generated tokens, policy, minutes, thresholds) comes from the
//!   request's base [`Deployment`], so the verdicts are those of `edgefit estimate` for the
//!   same configuration.
//!
//! ## Quality, ranking and the frontier
//! The estimator cannot measure quality, so quality is **retained parameters** (the pruned
//! model's parameter count), then **weight bits** (more bits per weight is closer to the
//! trained model: f16 > q8_0 > 4-bit), then **KV bits per token** (a larger cache format is
//! the more exact one). Passing configurations are ranked by, in order: parameters
//! (descending), weight bytes per parameter (descending), context (descending), KV bytes per
//! token (descending), sustained tokens/s (descending), peak memory (ascending), then the
//! names, so the order is total and stable. A row is on the **frontier** when no other passing
//! row is at least as good on all of parameters (↑), sustained tokens/s (↑) and peak memory
//! (↓) and strictly better on one.

use serde::{Deserialize, Serialize};

use crate::deploy::Deployment;
use crate::device::DeviceProfile;
use crate::error::{out_of_range, Result};
use crate::format::{KvFormat, WeightFormat};
use crate::report::estimate;
use crate::spec::{ModelSpec, PruneRatios, Pruning};
use crate::verdict::Verdict;

/// Default weight formats searched.
pub const DEFAULT_WEIGHTS: &[WeightFormat] = &[
    WeightFormat::F16,
    WeightFormat::Q8_0,
    WeightFormat::W4g32,
    WeightFormat::W4g128,
];
/// Default pruning levels searched (fractions; see the module docs for the recipe).
pub const DEFAULT_PRUNE_LEVELS: &[f64] = &[0.0, 0.1, 0.2, 0.3];

/// The highest TransAct pruning level the solver takes (a request above it is refused).
pub const MAX_PRUNE_LEVEL: f64 = 0.9;
/// Default context lengths searched.
pub const DEFAULT_CONTEXTS: &[u32] = &[1024, 2048, 4096, 8192];
/// Most configurations one request may estimate (a bound on time, not a clamp: larger
/// requests are refused with the count).
pub const MAX_CONFIGS: usize = 100_000;

/// One model to consider: an id (preset id or a name the caller chose) and its shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitModel {
    /// Preset id or caller's name (`smollm2-135m`, `@loaded`).
    pub id: String,
    /// Shape.
    pub spec: ModelSpec,
}

/// What to search. Empty lists take the defaults above.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FitRequest {
    /// Candidate models.
    pub models: Vec<FitModel>,
    /// Weight formats.
    pub weights: Vec<WeightFormat>,
    /// KV formats (empty: every format).
    pub kv: Vec<KvFormat>,
    /// Pruning levels, each in [0, [`MAX_PRUNE_LEVEL`]].
    pub prune_levels: Vec<f64>,
    /// Context lengths.
    pub contexts: Vec<u32>,
    /// Everything else (prompt/generated tokens, policy, thresholds, ...). Its `weights`, `kv`
    /// and `context` are replaced by each configuration's.
    pub base: Deployment,
}

/// One configuration that passes the golden four.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitRow {
    /// 1-based rank.
    pub rank: usize,
    /// Model id (from the request).
    pub model: String,
    /// Model display name.
    pub model_name: String,
    /// Linear-layer weight format.
    pub weights: WeightFormat,
    /// KV format.
    pub kv: KvFormat,
    /// Pruning level (fraction of MLP width, Q/K and V head dims removed).
    pub prune: f64,
    /// Context length.
    pub context: u32,
    /// Parameters after pruning.
    pub params: u64,
    /// Parameters after pruning over the unpruned model's.
    pub params_fraction: f64,
    /// Weight bytes.
    pub weights_bytes: u64,
    /// KV bytes per token.
    pub kv_bytes_per_token: u64,
    /// Peak memory (the estimator's total).
    pub peak_memory_bytes: u64,
    /// Time to first token.
    pub ttft_ms: f64,
    /// Decode tokens/s at the top frequency.
    pub decode_tok_s: f64,
    /// Sustained decode tokens/s after throttling.
    pub sustained_tok_s: f64,
    /// Temperature rise.
    pub temp_rise_c: f64,
    /// On the Pareto frontier of parameters ↑, sustained tok/s ↑, peak memory ↓.
    pub frontier: bool,
}

/// Why configurations failed, counted per golden-four verdict (a configuration can fail
/// several).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailCounts {
    /// Peak memory over the threshold or the device.
    pub memory: usize,
    /// TTFT too long.
    pub ttft: usize,
    /// Sustained decode too slow.
    pub sustained: usize,
    /// Too hot.
    pub temperature: usize,
    /// The deployment is impossible for the model (e.g. the context is shorter than prompt +
    /// generated tokens); these are not estimated.
    pub invalid: usize,
}

/// The solver's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitResult {
    /// Device id.
    pub device: String,
    /// Device name.
    pub device_name: String,
    /// Configurations estimated (invalid ones included).
    pub tried: usize,
    /// How many failed which verdict.
    pub failed: FailCounts,
    /// Passing configurations, best first.
    pub rows: Vec<FitRow>,
    /// The search actually run (defaults filled in).
    pub request: FitRequest,
}

/// The TransAct-style pruning of level `r` (module docs).
pub fn prune_recipe(r: f64) -> PruneRatios {
    PruneRatios {
        heads: 0.0,
        qk_dims: r,
        v_dims: r,
        mlp: r,
        layers: 0,
    }
}

impl FitRequest {
    /// The request with every empty list replaced by its default.
    pub fn resolved(&self) -> FitRequest {
        let mut r = self.clone();
        if r.weights.is_empty() {
            r.weights = DEFAULT_WEIGHTS.to_vec();
        }
        if r.kv.is_empty() {
            r.kv = KvFormat::ALL.to_vec();
        }
        if r.prune_levels.is_empty() {
            r.prune_levels = DEFAULT_PRUNE_LEVELS.to_vec();
        }
        if r.contexts.is_empty() {
            r.contexts = DEFAULT_CONTEXTS.to_vec();
        }
        r
    }

    /// Configurations the resolved request estimates.
    pub fn size(&self) -> usize {
        let r = self.resolved();
        r.models.len() * r.weights.len() * r.kv.len() * r.prune_levels.len() * r.contexts.len()
    }

    fn validate(&self) -> Result<()> {
        if self.models.is_empty() {
            return Err(out_of_range("models", 0, "at least one model is needed"));
        }
        for &p in &self.prune_levels {
            if !(0.0..=MAX_PRUNE_LEVEL).contains(&p) {
                return Err(out_of_range(
                    "prune level",
                    p,
                    format!("must be in [0, {MAX_PRUNE_LEVEL}]"),
                ));
            }
        }
        for &c in &self.contexts {
            if c == 0 || c > crate::deploy::MAX_CONTEXT {
                return Err(out_of_range(
                    "context",
                    c,
                    format!("must be in 1..={}", crate::deploy::MAX_CONTEXT),
                ));
            }
        }
        let n = self.size();
        if n > MAX_CONFIGS {
            return Err(out_of_range(
                "configurations",
                n,
                format!("at most {MAX_CONFIGS} per search; narrow the models or the lists"),
            ));
        }
        self.base.validate()
    }
}

/// Runs the search (module docs) for `device`.
pub fn fit(request: &FitRequest, device: &DeviceProfile) -> Result<FitResult> {
    let mut search = FitSearch::new(request, device)?;
    while search.step()? {}
    Ok(search.finish())
}

/// The search of [`fit`], one model at a time, so that a caller (the page's worker) can report
/// progress between models. `fit` is `new`, `step` until it returns `false`, then `finish`.
#[derive(Clone, Debug)]
pub struct FitSearch {
    req: FitRequest,
    device: DeviceProfile,
    next_model: usize,
    failed: FailCounts,
    rows: Vec<FitRow>,
    tried: usize,
}

impl FitSearch {
    /// Validates the request and the device; nothing is estimated yet.
    pub fn new(request: &FitRequest, device: &DeviceProfile) -> Result<FitSearch> {
        let req = request.resolved();
        req.validate()?;
        device.validate()?;
        Ok(FitSearch {
            req,
            device: device.clone(),
            next_model: 0,
            failed: FailCounts::default(),
            rows: Vec::new(),
            tried: 0,
        })
    }

    /// Models in the request.
    pub fn models(&self) -> usize {
        self.req.models.len()
    }

    /// Models searched so far.
    pub fn models_done(&self) -> usize {
        self.next_model
    }

    /// Searches the next model's configurations; `false` once every model is done (then it
    /// does nothing).
    pub fn step(&mut self) -> Result<bool> {
        let Some(m) = self.req.models.get(self.next_model) else {
            return Ok(false);
        };
        let (req, device) = (&self.req, &self.device);
        let (failed, rows, tried) = (&mut self.failed, &mut self.rows, &mut self.tried);
        m.spec.validate()?;
        let full_params = m.spec.params().total;
        for &level in &req.prune_levels {
            let spec = if level == 0.0 {
                m.spec.clone()
            } else {
                m.spec
                    .pruned(&Pruning::from_ratios(&m.spec, &prune_recipe(level))?)?
            };
            let params = spec.params().total;
            for &context in &req.contexts {
                for &weights in &req.weights {
                    for &kv in &req.kv {
                        *tried += 1;
                        let dep = Deployment {
                            weights,
                            kv,
                            context,
                            ..req.base.clone()
                        };
                        if dep.validate().is_err() {
                            failed.invalid += 1;
                            continue;
                        }
                        let rep = estimate(&spec, &dep, device)?;
                        let v = &rep.verdict;
                        let fails = [
                            (v.memory, &mut failed.memory),
                            (v.ttft, &mut failed.ttft),
                            (v.sustained, &mut failed.sustained),
                            (v.temperature, &mut failed.temperature),
                        ];
                        let mut pass = true;
                        for (verdict, count) in fails {
                            if verdict == Verdict::Fail {
                                *count += 1;
                                pass = false;
                            }
                        }
                        if !pass {
                            continue;
                        }
                        rows.push(FitRow {
                            rank: 0,
                            model: m.id.clone(),
                            model_name: spec.name.clone(),
                            weights,
                            kv,
                            prune: level,
                            context,
                            params,
                            params_fraction: params as f64 / full_params.max(1) as f64,
                            weights_bytes: rep.memory.weights_bytes,
                            kv_bytes_per_token: rep.memory.kv_bytes_per_token,
                            peak_memory_bytes: rep.memory.total_bytes,
                            ttft_ms: rep.latency.ttft_ms,
                            decode_tok_s: rep.latency.decode_tok_s,
                            sustained_tok_s: rep.thermal.sustained_tok_s,
                            temp_rise_c: rep.thermal.temp_rise_c,
                            frontier: false,
                        });
                    }
                }
            }
        }
        self.next_model += 1;
        Ok(self.next_model < self.req.models.len())
    }

    /// The ranked result with its frontier (call after the last `step`; models not yet searched
    /// are simply not in it).
    pub fn finish(self) -> FitResult {
        let mut rows = self.rows;
        rank(&mut rows);
        mark_frontier(&mut rows);
        FitResult {
            device: self.device.id.clone(),
            device_name: self.device.name.clone(),
            tried: self.tried,
            failed: self.failed,
            rows,
            request: self.req,
        }
    }
}

/// Sorts best first (module docs) and numbers the rows.
fn rank(rows: &mut [FitRow]) {
    let bpp = |r: &FitRow| r.weights_bytes as f64 / r.params.max(1) as f64;
    rows.sort_by(|a, b| {
        b.params
            .cmp(&a.params)
            .then(bpp(b).total_cmp(&bpp(a)))
            .then(b.context.cmp(&a.context))
            .then(b.kv_bytes_per_token.cmp(&a.kv_bytes_per_token))
            .then(b.sustained_tok_s.total_cmp(&a.sustained_tok_s))
            .then(a.peak_memory_bytes.cmp(&b.peak_memory_bytes))
            .then(a.model.cmp(&b.model))
            .then(a.weights.cmp(&b.weights))
            .then(a.kv.cmp(&b.kv))
    });
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
}

/// Marks the rows no other row dominates on (params ↑, sustained ↑, memory ↓).
fn mark_frontier(rows: &mut [FitRow]) {
    let dominated = |a: &FitRow, b: &FitRow| {
        b.params >= a.params
            && b.sustained_tok_s >= a.sustained_tok_s
            && b.peak_memory_bytes <= a.peak_memory_bytes
            && (b.params > a.params
                || b.sustained_tok_s > a.sustained_tok_s
                || b.peak_memory_bytes < a.peak_memory_bytes)
    };
    let flags: Vec<bool> = rows
        .iter()
        .map(|a| !rows.iter().any(|b| dominated(a, b)))
        .collect();
    for (r, f) in rows.iter_mut().zip(flags) {
        r.frontier = f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{device, preset};

    fn request(ids: &[&str]) -> FitRequest {
        FitRequest {
            models: ids
                .iter()
                .map(|id| FitModel {
                    id: id.to_string(),
                    spec: preset(id).unwrap(),
                })
                .collect(),
            ..FitRequest::default()
        }
    }

    #[test]
    fn searching_model_by_model_reports_progress_and_equals_fit() {
        let req = request(&["smollm2-135m", "llama-3.2-1b", "qwen2.5-0.5b"]);
        let dev = device("snapdragon-8-gen3").unwrap();
        let mut search = FitSearch::new(&req, &dev).unwrap();
        assert_eq!((search.models_done(), search.models()), (0, 3));
        let mut seen = vec![];
        while search.step().unwrap() {
            seen.push(search.models_done());
        }
        seen.push(search.models_done());
        assert_eq!(seen, vec![1, 2, 3]);
        assert!(!search.step().unwrap(), "a finished search stays finished");
        let stepped = serde_json::to_string(&search.finish()).unwrap();
        let whole = serde_json::to_string(&fit(&req, &dev).unwrap()).unwrap();
        assert_eq!(stepped, whole);
        assert!(
            FitSearch::new(&request(&[]), &dev).is_err(),
            "no models is refused up front"
        );
    }

    #[test]
    fn every_row_passes_when_estimated_alone_and_the_order_is_the_documented_one() {
        let phone = device("snapdragon-8-gen3").unwrap();
        let req = request(&["smollm2-360m", "llama-3.2-1b"]);
        let res = fit(&req, &phone).unwrap();
        assert_eq!(res.tried, 2 * 4 * KvFormat::ALL.len() * 4 * 4);
        assert!(!res.rows.is_empty());
        let passing = res.rows.len();
        let f = &res.failed;
        assert!(passing + f.invalid <= res.tried);
        for w in res.rows.windows(2) {
            assert!(w[0].params >= w[1].params, "{:?} before {:?}", w[0], w[1]);
            assert_eq!(w[0].rank + 1, w[1].rank);
        }
        // Spot-check rows against a direct estimate.
        for r in res.rows.iter().step_by(17) {
            let spec = if r.prune == 0.0 {
                preset(&r.model).unwrap()
            } else {
                let s = preset(&r.model).unwrap();
                s.pruned(&Pruning::from_ratios(&s, &prune_recipe(r.prune)).unwrap())
                    .unwrap()
            };
            let dep = Deployment {
                weights: r.weights,
                kv: r.kv,
                context: r.context,
                ..Deployment::default()
            };
            let rep = estimate(&spec, &dep, &phone).unwrap();
            assert_eq!(rep.memory.total_bytes, r.peak_memory_bytes);
            assert_eq!(rep.thermal.sustained_tok_s, r.sustained_tok_s);
            assert!(rep.verdict.memory == Verdict::Pass && rep.verdict.sustained == Verdict::Pass);
            assert_eq!(spec.params().total, r.params);
        }
        // At least one frontier row, and no frontier row is dominated.
        let front: Vec<&FitRow> = res.rows.iter().filter(|r| r.frontier).collect();
        assert!(!front.is_empty());
        for a in &front {
            for b in &res.rows {
                let better = b.params >= a.params
                    && b.sustained_tok_s >= a.sustained_tok_s
                    && b.peak_memory_bytes <= a.peak_memory_bytes
                    && (b.params > a.params
                        || b.sustained_tok_s > a.sustained_tok_s
                        || b.peak_memory_bytes < a.peak_memory_bytes);
                assert!(!better, "{a:?} dominated by {b:?}");
            }
        }
    }

    #[test]
    fn a_big_model_fails_memory_on_a_small_device_and_strict_thresholds_empty_the_list() {
        let pi = device("raspberry-pi-5").unwrap();
        let mut req = request(&["llama-3-8b"]);
        req.weights = vec![WeightFormat::F16];
        req.kv = vec![KvFormat::F16];
        req.prune_levels = vec![0.0];
        req.contexts = vec![2048];
        let res = fit(&req, &pi).unwrap();
        assert_eq!(res.tried, 1);
        assert!(res.rows.is_empty());
        assert_eq!(res.failed.memory, 1, "{:?}", res.failed);

        let phone = device("snapdragon-8-gen3").unwrap();
        let mut req = request(&["smollm2-135m"]);
        req.base.thresholds = Some(crate::Thresholds {
            sustained_tok_s: 1e8,
            ..crate::Thresholds::default()
        });
        let res = fit(&req, &phone).unwrap();
        assert!(res.rows.is_empty());
        assert_eq!(res.failed.sustained, res.tried - res.failed.invalid);
    }

    #[test]
    fn bad_requests_name_the_problem() {
        let phone = device("snapdragon-8-gen3").unwrap();
        let err = |r: FitRequest| fit(&r, &phone).unwrap_err().to_string();
        assert!(err(FitRequest::default()).contains("models"));
        let mut r = request(&["smollm2-135m"]);
        r.prune_levels = vec![0.95];
        assert!(err(r).contains("prune level"));
        let mut r = request(&["smollm2-135m"]);
        r.contexts = vec![0];
        assert!(err(r).contains("context"));
        let mut r = request(&["smollm2-135m"]);
        r.contexts = (1..=5000).collect();
        r.prune_levels = vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5];
        assert!(err(r).contains("configurations"));
    }

    #[test]
    fn short_contexts_that_cannot_hold_the_prompt_are_counted_invalid_not_estimated() {
        let phone = device("snapdragon-8-gen3").unwrap();
        let mut r = request(&["smollm2-135m"]);
        r.contexts = vec![128, 2048];
        let res = fit(&r, &phone).unwrap();
        let per_context = 4 * KvFormat::ALL.len() * 4;
        assert_eq!(
            res.failed.invalid, per_context,
            "128 < 128 prompt + 128 generated"
        );
        assert!(res.rows.iter().all(|r| r.context == 2048));
    }
}
