//! The JSON the wasm facade (crates/wasm/src/lib.rs) takes from the page, through the same calls
//! in the same order (the facade itself needs a JS host). The first byte picks the entry point:
//! * 0: a `ModelSpec` (`kvBytes`, `prunedSpec`, `estimate`): validate, KV bytes in every format,
//!   the fit recipe's pruning at a few levels, an estimate on a bundled device;
//! * 1: a `Deployment` (`estimate`) with a bundled preset and device;
//! * 2: a `FitRequest` (`fit`) on a bundled device.
#![no_main]

use edgefit_estimate::fit::prune_recipe;
use edgefit_estimate::{
    device, estimate, fit, kv_bytes, preset, preset_ids, Deployment, FitModel, FitRequest,
    KvFormat, ModelSpec, Pruning,
};
use libfuzzer_sys::fuzz_target;

fn with_mode(mode: u8, json: &[u8]) -> Vec<u8> {
    let mut v = vec![mode];
    v.extend_from_slice(json);
    v
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for id in preset_ids() {
        let spec = preset(id).expect("bundled preset");
        out.push((
            format!("spec-{id}.json"),
            with_mode(0, &serde_json::to_vec(&spec).expect("spec JSON")),
        ));
    }
    out.push((
        "deployment-default.json".into(),
        with_mode(
            1,
            &serde_json::to_vec(&Deployment::default()).expect("deployment JSON"),
        ),
    ));
    out.push((
        "deployment-partial.json".into(),
        with_mode(1, br#"{"context": 8192, "weights": "q4_k", "kv": "int8"}"#),
    ));
    let request = FitRequest {
        models: ["smollm2-135m", "qwen2.5-0.5b"]
            .iter()
            .map(|id| FitModel {
                id: id.to_string(),
                spec: preset(id).expect("bundled preset"),
            })
            .collect(),
        prune_levels: vec![0.0, 0.3],
        contexts: vec![1024, 4096],
        ..FitRequest::default()
    };
    out.push((
        "fit-request.json".into(),
        with_mode(2, &serde_json::to_vec(&request).expect("request JSON")),
    ));
    out
}

fuzz_target!(
    init: {
        edgefit_fuzz::write_seeds_if_asked(seeds);
        edgefit_fuzz::warm_estimator();
    },
    |data: &[u8]| {
        let Some((&mode, json)) = data.split_first() else {
            return;
        };
        let Ok(json) = std::str::from_utf8(json) else {
            return;
        };
        let dev = device("snapdragon-8-gen3").expect("bundled device");
        match mode % 3 {
            0 => {
                let Ok(spec) = serde_json::from_str::<ModelSpec>(json) else {
                    return;
                };
                let _ = estimate(&spec, &Deployment::default(), &dev);
                if spec.validate().is_err() {
                    return;
                }
                for f in KvFormat::ALL {
                    let _ = kv_bytes(&spec, *f, 1_000_000_000_000);
                }
                for level in [0.1, 0.5, 0.9] {
                    if let Ok(p) = Pruning::from_ratios(&spec, &prune_recipe(level)) {
                        let _ = spec.pruned(&p);
                    }
                }
            }
            1 => {
                let Ok(dep) = serde_json::from_str::<Deployment>(json) else {
                    return;
                };
                let spec = preset("smollm2-135m").expect("bundled preset");
                let _ = estimate(&spec, &dep, &dev);
            }
            _ => {
                let Ok(req) = serde_json::from_str::<FitRequest>(json) else {
                    return;
                };
                let _ = fit(&req, &dev);
            }
        }
    }
);
