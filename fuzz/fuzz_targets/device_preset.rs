//! Device profiles and model presets (the JSON files of `models/devices/` and
//! `models/presets/`; a user's `--device-file` and the page's `this-browser` measurements take
//! the same paths). Every input goes through each reader: `DeviceProfile::from_json` (then an
//! estimate of a bundled preset on it), `ModelSpec::from_hf_config` (a preset is an HF
//! config.json plus an `edgefit` record; then an estimate on a bundled device), the preset
//! record, and `BrowserMeasurements` into `DeviceProfile::this_browser`.
#![no_main]

use edgefit_estimate::{
    device, estimate, preset, BrowserMeasurements, Deployment, DeviceProfile, ModelSpec, PresetInfo,
};
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;

#[derive(Deserialize)]
struct Wrapper {
    #[allow(dead_code)]
    edgefit: PresetInfo,
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = edgefit_fuzz::json_files("models/devices");
    out.extend(edgefit_fuzz::json_files("models/presets"));
    out.push((
        "measurements.json".into(),
        br#"{"read_bandwidth_gbs": 12.5, "f32_gflops": 40.0, "weight_rate_gws": {"f32": 3.1, "w4g32": 5.2}, "wasm_limit_bytes": 4294967296}"#.to_vec(),
    ));
    out
}

fuzz_target!(
    init: {
        edgefit_fuzz::write_seeds_if_asked(seeds);
        edgefit_fuzz::warm_estimator();
    },
    |data: &[u8]| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let dep = Deployment::default();
        if let Ok(dev) = DeviceProfile::from_json(text) {
            let spec = preset("smollm2-135m").expect("bundled preset");
            let _ = estimate(&spec, &dep, &dev);
        }
        if let Ok(spec) = ModelSpec::from_hf_config("fuzz", text) {
            let dev = device("snapdragon-8-gen3").expect("bundled device");
            let _ = estimate(&spec, &dep, &dev);
        }
        let _ = serde_json::from_str::<Wrapper>(text);
        if let Ok(m) = serde_json::from_str::<BrowserMeasurements>(text) {
            if let Ok(dev) = DeviceProfile::this_browser(&m) {
                let spec = preset("smollm2-135m").expect("bundled preset");
                let _ = estimate(&spec, &dep, &dev);
            }
        }
    }
);
