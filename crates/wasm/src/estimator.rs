//! The estimator's half of the facade: the bundled presets, device and runtime profiles, the
//! estimator's tables, `estimate`, the "What fits?" solver (`fit`, `FitSearch`), the page's
//! pruned specs and the estimate-vs-measured comparison. Every function forwards to
//! `edgefit-estimate` with JS objects in and out (`crate::to_js` / `crate::from_js`), exactly
//! as the CLI calls the same functions; the engine's half (loading, generating, pruning the
//! real model, the micro-benchmarks) stays in `lib.rs`.

use wasm_bindgen::prelude::*;

use crate::{from_js, js_err, js_json, to_js};

/// `[{id, name}]`, with each name looked up by `name_of` (empty if the lookup fails).
fn id_name_list(
    ids: Vec<&str>,
    name_of: impl Fn(&str) -> Option<String>,
) -> Result<JsValue, JsError> {
    let list: Vec<serde_json::Value> = ids
        .into_iter()
        .map(|id| serde_json::json!({ "id": id, "name": name_of(id).unwrap_or_default() }))
        .collect();
    to_js(&list)
}

/// The model presets: an array of `{id, name}`.
#[wasm_bindgen(js_name = presetIds)]
pub fn preset_ids() -> Result<JsValue, JsError> {
    id_name_list(edgefit_estimate::preset_ids(), |id| {
        edgefit_estimate::preset(id).ok().map(|s| s.name)
    })
}

/// The bundled device profiles: an array of `{id, name}`.
#[wasm_bindgen(js_name = deviceIds)]
pub fn device_ids() -> Result<JsValue, JsError> {
    id_name_list(edgefit_estimate::device_ids(), |id| {
        edgefit_estimate::device(id).ok().map(|d| d.name)
    })
}

/// The bundled runtimes: an array of `{id, name, units}` (`units`: the compute units its
/// profile runs on, e.g. `["cpu","gpu"]`; a deployment naming another unit is refused by the
/// estimator), in the estimator's order.
#[wasm_bindgen(js_name = runtimeIds)]
pub fn runtime_ids() -> Result<JsValue, JsError> {
    let list: Vec<serde_json::Value> = edgefit_estimate::runtime_profiles()
        .map_err(js_err)?
        .into_iter()
        .map(|p| {
            let units: Vec<&str> = p.units.keys().map(|u| u.as_str()).collect();
            serde_json::json!({ "id": p.id.as_str(), "name": p.name, "units": units })
        })
        .collect();
    to_js(&list)
}

/// The estimator's tables (`edgefit_estimate::uncertainty::Tables` JSON: the ranges' bands and
/// the runtime profiles refitted on the validation set), computing them if this instance has
/// not yet (a few hundred milliseconds: the leave-one-source-out refits).
#[wasm_bindgen(js_name = estimatorTables)]
pub fn estimator_tables() -> Result<String, JsError> {
    serde_json::to_string(&edgefit_estimate::uncertainty::tables().map_err(js_err)?).map_err(js_err)
}

/// Hands this instance precomputed tables (the site build's `estimator-tables.json`, the JSON
/// of [`estimator_tables`]) so the first estimate does not compute them. Throws on bad JSON or
/// tables of other data (their key names the data); `false` when the instance had them already.
#[wasm_bindgen(js_name = seedEstimatorTables)]
pub fn seed_estimator_tables(tables_json: &str) -> Result<bool, JsError> {
    let t: edgefit_estimate::uncertainty::Tables = serde_json::from_str(tables_json)
        .map_err(|e| JsError::new(&format!("estimator tables: {e}")))?;
    edgefit_estimate::uncertainty::seed(t).map_err(js_err)
}

/// A preset's `ModelSpec` object.
#[wasm_bindgen(js_name = presetSpec)]
pub fn preset_spec(id: &str) -> Result<JsValue, JsError> {
    to_js(&edgefit_estimate::preset(id).map_err(js_err)?)
}

/// A `ModelSpec` object from the text of an HF `config.json` (a file the user dropped: text).
#[wasm_bindgen(js_name = specFromConfig)]
pub fn spec_from_config(name: &str, config_json: &str) -> Result<JsValue, JsError> {
    to_js(&edgefit_estimate::ModelSpec::from_hf_config(name, config_json).map_err(js_err)?)
}

/// A bundled device profile object.
#[wasm_bindgen(js_name = deviceProfile)]
pub fn device_profile(id: &str) -> Result<JsValue, JsError> {
    to_js(&edgefit_estimate::device(id).map_err(js_err)?)
}

/// A device profile object read and validated as the CLI reads a profile file.
fn device_from_js(device: &JsValue) -> Result<edgefit_estimate::DeviceProfile, JsError> {
    edgefit_estimate::DeviceProfile::from_json(&js_json("device profile", device)?).map_err(js_err)
}

/// The published sustained-load traces measured on the bundled device `id`, for the thermal
/// chart: an array (empty when the device has none) of the committed trace objects
/// (`source`, `device`, `soc`, `model`, `runtime`, `unit`, `ambient_c`, `samples`, ...) each
/// with `reference_tok_s` (its peak, or null) and `points`: `[{t_s, span_s: [from, to],
/// fraction, tok_s}]` (seconds since the start of the load; the fraction of the peak; tok/s or
/// null). Throws naming an unknown id.
#[wasm_bindgen(js_name = thermalTraces)]
pub fn thermal_traces(id: &str) -> Result<JsValue, JsError> {
    to_js(&edgefit_estimate::trace_views(id).map_err(js_err)?)
}

/// The `this-browser` profile filled with figures measured in this tab (a `BrowserMeasurements`
/// object, from `BrowserBench.finish()`), as a device profile object.
#[wasm_bindgen(js_name = thisBrowserDevice)]
pub fn this_browser_device(measurements: &JsValue) -> Result<JsValue, JsError> {
    let m: edgefit_estimate::BrowserMeasurements = from_js("measurements", measurements)?;
    to_js(&edgefit_estimate::DeviceProfile::this_browser(&m).map_err(js_err)?)
}

/// The estimator's full report (a `Report` object) for a `ModelSpec` object, a deployment (an
/// object whose missing fields take their defaults) and a device profile object.
#[wasm_bindgen]
pub fn estimate(
    spec: &JsValue,
    deployment: &JsValue,
    device: &JsValue,
) -> Result<JsValue, JsError> {
    let spec: edgefit_estimate::ModelSpec = from_js("model spec", spec)?;
    let dep: edgefit_estimate::Deployment = from_js("deployment", deployment)?;
    let dev = device_from_js(device)?;
    to_js(&edgefit_estimate::estimate(&spec, &dep, &dev).map_err(js_err)?)
}

/// "What fits?": the sizing solver's answer (a `FitResult` object) for a `FitRequest` object
/// (the candidate models with their shapes, and optional weight / KV / pruning-level / context
/// lists and base deployment; empty lists take the defaults) on a device profile object. The
/// CLI's `edgefit fit --json` runs the same function, so the two rankings are equal by
/// construction. Throws with a message naming the problem (a bad field, a level outside
/// [0, 0.9], too many configurations, an impossible model shape).
#[wasm_bindgen]
pub fn fit(request: &JsValue, device: &JsValue) -> Result<JsValue, JsError> {
    let req: edgefit_estimate::FitRequest = from_js("fit request", request)?;
    let dev = device_from_js(device)?;
    to_js(&edgefit_estimate::fit(&req, &dev).map_err(js_err)?)
}

/// The search of [`fit`] one model at a time, so the page can show progress with time left:
/// `new FitSearch(request, device)` validates (throwing like `fit`), `step()` searches the next
/// model and returns whether more remain, `models()` / `modelsDone()` count them, `finish()`
/// returns the same `FitResult` object as `fit`.
#[wasm_bindgen]
pub struct FitSearch {
    inner: edgefit_estimate::FitSearch,
}

#[wasm_bindgen]
impl FitSearch {
    #[wasm_bindgen(constructor)]
    pub fn new(request: &JsValue, device: &JsValue) -> Result<FitSearch, JsError> {
        let req: edgefit_estimate::FitRequest = from_js("fit request", request)?;
        let dev = device_from_js(device)?;
        let inner = edgefit_estimate::FitSearch::new(&req, &dev).map_err(js_err)?;
        Ok(FitSearch { inner })
    }

    /// Models in the request.
    pub fn models(&self) -> usize {
        self.inner.models()
    }

    /// Models searched so far.
    #[wasm_bindgen(js_name = modelsDone)]
    pub fn models_done(&self) -> usize {
        self.inner.models_done()
    }

    /// Searches the next model; `false` once all are done.
    pub fn step(&mut self) -> Result<bool, JsError> {
        self.inner.step().map_err(js_err)
    }

    /// The ranked `FitResult` object (consumes the search).
    pub fn finish(self) -> Result<JsValue, JsError> {
        to_js(&self.inner.finish())
    }
}

/// The highest TransAct pruning level [`pruned_spec`] takes, the bound the fit solver checks
/// its `prune_levels` against (`edgefit_estimate::fit::MAX_PRUNE_LEVEL`; the page's
/// `FIT_MAX_PRUNE` mirrors it, and `tests/page_constants.rs` checks both).
pub const MAX_PRUNE_LEVEL: f64 = edgefit_estimate::fit::MAX_PRUNE_LEVEL;

/// A `ModelSpec` object pruned TransAct-style at `level` ([`prune_spec`]). Throws naming a bad
/// spec or a level outside [0, [`MAX_PRUNE_LEVEL`]].
#[wasm_bindgen(js_name = prunedSpec)]
pub fn pruned_spec(spec: &JsValue, level: f64) -> Result<JsValue, JsError> {
    let spec: edgefit_estimate::ModelSpec = from_js("model spec", spec)?;
    to_js(&prune_spec(&spec, level).map_err(|e| JsError::new(&e))?)
}

/// `spec` pruned TransAct-style at `level` (the fit solver's recipe: MLP width, per-head Q/K
/// dims and per-head V dims each lose the fraction `level` in every layer; heads, depth and
/// hidden size stay), rounded exactly as the engine prunes. Level 0 returns the spec
/// unchanged; a level outside [0, [`MAX_PRUNE_LEVEL`]] is refused naming it. (The Rust half
/// of [`pruned_spec`], callable off wasm: `tests/page_constants.rs` runs it natively.)
pub fn prune_spec(
    spec: &edgefit_estimate::ModelSpec,
    level: f64,
) -> Result<edgefit_estimate::ModelSpec, String> {
    spec.validate().map_err(|e| e.to_string())?;
    if !(level.is_finite() && (0.0..=MAX_PRUNE_LEVEL).contains(&level)) {
        return Err(format!(
            "pruning level {level}: expected a fraction from 0 to {MAX_PRUNE_LEVEL}"
        ));
    }
    if level == 0.0 {
        return Ok(spec.clone());
    }
    let recipe = edgefit_estimate::fit::prune_recipe(level);
    let pruning =
        edgefit_estimate::Pruning::from_ratios(spec, &recipe).map_err(|e| e.to_string())?;
    spec.pruned(&pruning).map_err(|e| e.to_string())
}

/// The deployment object that predicts the run the engine measured
/// (`edgefit_estimate::compare::measured_deployment`): `metrics` is the engine's `metrics()`,
/// `stored` its `info().weights.stored` (`[]`: the requested format). Throws when the run has
/// nothing to compare (no generated token) or names an unknown format.
#[wasm_bindgen(js_name = comparisonDeployment)]
pub fn comparison_deployment(metrics: &JsValue, stored: &JsValue) -> Result<JsValue, JsError> {
    use edgefit_estimate::compare::{measured_deployment, Measured, StoredWeights};
    let m: Measured = from_js("metrics", metrics)?;
    let stored: Vec<StoredWeights> = from_js("stored weights", stored)?;
    to_js(&measured_deployment(&m, &stored).map_err(js_err)?)
}

/// The estimate-vs-measured rows (an array of `{key, label, unit, estimate, measured,
/// error_pct}`, `edgefit_estimate::compare::comparison_rows`) of a report (the estimate of
/// [`comparison_deployment`]) against the engine's metrics of the model `spec` (objects all).
#[wasm_bindgen(js_name = comparisonRows)]
pub fn comparison_rows(
    spec: &JsValue,
    report: &JsValue,
    metrics: &JsValue,
) -> Result<JsValue, JsError> {
    let spec: edgefit_estimate::ModelSpec = from_js("model spec", spec)?;
    let report: edgefit_estimate::Report = from_js("report", report)?;
    let m: edgefit_estimate::compare::Measured = from_js("metrics", metrics)?;
    to_js(&edgefit_estimate::compare::comparison_rows(&spec, &report, &m).map_err(js_err)?)
}
