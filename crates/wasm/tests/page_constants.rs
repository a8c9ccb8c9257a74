//! Drift tests: the page keeps a few lists and limits as constants (so it can fill its pickers
//! and check a request before the wasm has compiled); each must equal the Rust value it
//! mirrors. Reads the page's sources as text at test time (milliseconds) and compares:
//!
//! | page constant | Rust value |
//! |---|---|
//! | `web/protocol/catalog.js` `FIT_CONTEXTS` | `edgefit_estimate::fit::DEFAULT_CONTEXTS` |
//! | `web/protocol/catalog.js` `FIT_FAMILIES` | the families of the bundled presets, in `Family::ALL` order |
//! | `web/protocol/catalog.js` `FIT_MAX_PRUNE` | [`edgefit_wasm::MAX_PRUNE_LEVEL`], the bound the fit solver checks |
//! | `web/protocol/catalog.js` `MAX_THREADS` | `edgefit_kernels::pool::MAX_THREADS` (the wasm's `maxThreads()`) |
//! | `web/estimate-view.js` `MAX_THREADS`, `MAX_CONTEXT` | `edgefit_estimate::{MAX_THREADS, MAX_CONTEXT}` |
//! | `web/protocol/catalog.js` `START_OPTION_KEYS` | [`edgefit_wasm::START_FIELDS`], the fields `Engine.start` reads |
//!
//! Natively only (the wasm32 test runners have no file system).
#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

use edgefit_estimate::{fit, Family, FitModel, FitRequest, KvFormat, WeightFormat};

/// The text of `web/<file>` in this repository.
fn web(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../web")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The initializer of `export const NAME = …;` in `src`, without an `Object.freeze(…)` around
/// it; panics naming the constant when it is missing or declared twice.
fn js_const<'a>(src: &'a str, file: &str, name: &str) -> &'a str {
    let decl = format!("export const {name} = ");
    let mut hits = src.match_indices(&decl);
    let (at, _) = hits
        .next()
        .unwrap_or_else(|| panic!("{file} has no `export const {name}`"));
    assert!(hits.next().is_none(), "{file} declares {name} twice");
    let rest = &src[at + decl.len()..];
    let init = rest[..rest.find(';').expect("the declaration ends with ;")].trim();
    init.strip_prefix("Object.freeze(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(init)
        .trim()
}

/// The items of a JS array literal of numbers or quoted strings (`[1, 2]`, `['a', "b"]`).
fn js_list(init: &str, name: &str) -> Vec<String> {
    let inner = init
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{name} is not an array literal: {init}"));
    inner
        .split(',')
        .map(|s| s.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The number literal a `web/<file>` constant is initialised with.
fn page_number(file: &str, name: &str) -> f64 {
    let stem = file.rsplit('/').next().unwrap_or(file);
    js_number(js_const(&web(file), stem, name), name)
}

/// A JS number literal (`0.9`, `2_097_152`).
fn js_number(init: &str, name: &str) -> f64 {
    init.replace('_', "")
        .parse()
        .unwrap_or_else(|e| panic!("{name} is not a number literal ({init}): {e}"))
}

#[test]
fn the_readers_find_what_they_should() {
    let src = "export const A = Object.freeze([1024, 2048]);\nexport const B = ['x', \"y\"];\n\
               export const C = 0.5;\nexport const AB = 3_000;\n";
    assert_eq!(js_list(js_const(src, "t", "A"), "A"), ["1024", "2048"]);
    assert_eq!(js_list(js_const(src, "t", "B"), "B"), ["x", "y"]);
    assert_eq!(js_number(js_const(src, "t", "C"), "C"), 0.5);
    assert_eq!(js_number(js_const(src, "t", "AB"), "AB"), 3000.0);
    assert!(std::panic::catch_unwind(|| js_const(src, "t", "D")).is_err());
}

#[test]
fn fit_contexts_are_the_solvers_defaults() {
    let page = js_list(
        js_const(&web("protocol/catalog.js"), "catalog.js", "FIT_CONTEXTS"),
        "FIT_CONTEXTS",
    );
    let rust: Vec<String> = fit::DEFAULT_CONTEXTS.iter().map(u32::to_string).collect();
    assert_eq!(page, rust, "web/protocol/catalog.js FIT_CONTEXTS");
}

#[test]
fn fit_families_are_the_presets_families() {
    let page = js_list(
        js_const(&web("protocol/catalog.js"), "catalog.js", "FIT_FAMILIES"),
        "FIT_FAMILIES",
    );
    let held: Vec<Family> = edgefit_estimate::preset_ids()
        .into_iter()
        .map(|id| edgefit_estimate::preset(id).expect("bundled preset").family)
        .collect();
    let rust: Vec<String> = Family::ALL
        .iter()
        .filter(|f| held.contains(f))
        .map(|f| f.as_str().to_string())
        .collect();
    assert_eq!(
        page, rust,
        "web/protocol/catalog.js FIT_FAMILIES must list the bundled presets' families"
    );
}

#[test]
fn fit_max_prune_is_the_bound_the_solver_checks() {
    let page = page_number("protocol/catalog.js", "FIT_MAX_PRUNE");
    assert_eq!(
        page,
        edgefit_wasm::MAX_PRUNE_LEVEL,
        "web/protocol/catalog.js FIT_MAX_PRUNE"
    );
    // The solver checks that bound: it takes MAX_PRUNE_LEVEL and refuses the next f64 above it.
    let device = edgefit_estimate::device(edgefit_estimate::device_ids()[0]).expect("device");
    let request = |level: f64| FitRequest {
        models: vec![FitModel {
            id: "smollm2-135m".to_string(),
            spec: edgefit_estimate::preset("smollm2-135m").expect("preset"),
        }],
        weights: vec![WeightFormat::W4g32],
        kv: vec![KvFormat::F16],
        prune_levels: vec![level],
        contexts: vec![1024],
        ..FitRequest::default()
    };
    let max = edgefit_wasm::MAX_PRUNE_LEVEL;
    fit(&request(max), &device).expect("the solver takes MAX_PRUNE_LEVEL");
    let above = f64::from_bits(max.to_bits() + 1);
    let err = fit(&request(above), &device).expect_err("the solver refuses above it");
    assert!(err.to_string().contains("prune level"), "{err}");
    let spec = &request(0.0).models[0].spec;
    assert!(edgefit_wasm::prune_spec(spec, max).is_ok());
    let err = edgefit_wasm::prune_spec(spec, above).expect_err("the page's bound too");
    assert!(err.starts_with("pruning level "), "{err}");
}

#[test]
fn thread_limits_are_the_rust_ones() {
    let catalog = page_number("protocol/catalog.js", "MAX_THREADS");
    assert_eq!(
        catalog,
        edgefit_kernels::pool::MAX_THREADS as f64,
        "web/protocol/catalog.js MAX_THREADS (the engine's pool)"
    );
    assert_eq!(
        edgefit_wasm::max_threads(),
        edgefit_kernels::pool::MAX_THREADS
    );
    let view = page_number("estimate-view.js", "MAX_THREADS");
    assert_eq!(
        view,
        edgefit_estimate::MAX_THREADS as f64,
        "web/estimate-view.js MAX_THREADS (the estimator's)"
    );
}

#[test]
fn the_estimators_context_limit_is_the_rust_one() {
    let view = page_number("estimate-view.js", "MAX_CONTEXT");
    assert_eq!(
        view,
        edgefit_estimate::MAX_CONTEXT as f64,
        "web/estimate-view.js MAX_CONTEXT"
    );
}

#[test]
fn start_option_keys_are_the_fields_start_reads() {
    let src = web("protocol/catalog.js");
    let keys = js_list(
        js_const(&src, "catalog.js", "START_OPTION_KEYS"),
        "START_OPTION_KEYS",
    );
    assert_eq!(
        keys,
        edgefit_wasm::START_FIELDS,
        "web/protocol/catalog.js START_OPTION_KEYS must list edgefit_wasm::START_FIELDS in order"
    );
}
