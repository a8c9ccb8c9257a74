//! `edgefit generate --estimate this-browser`, the native twin of the page's "Estimate vs
//! measured": the profile is filled with this machine's micro-benchmarks (the page's probes,
//! run natively) and is named as this machine's, not a browser tab's.

mod common;

use common::{assert_ok, edgefit};
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use serde_json::Value;

#[test]
fn this_browser_natively_measures_this_machine_and_says_so() {
    let dir = std::env::temp_dir().join(format!("edgefit-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("synthetic.gguf");
    std::fs::write(&model, gguf_bytes(3, SyntheticDType::Q8_0).unwrap()).unwrap();
    let out = edgefit(&[
        "generate",
        "--model",
        &model.display().to_string(),
        "--prompt",
        "the theme",
        "--max-tokens",
        "4",
        "--threads",
        "1",
        "--json",
        "--estimate",
        "this-browser",
    ]);
    assert_ok(&out);
    let v: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    let c = &v["estimate_comparison"];
    let name = c["device_name"].as_str().unwrap();
    assert!(
        name.starts_with("This machine (native, ") && name.ends_with("one thread)"),
        "{name}"
    );
    assert_eq!(c["device"], "this-browser");
    let row = |key: &str| {
        c["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("no {key} row in {c}"))
            .clone()
    };
    for key in ["prefill", "decode"] {
        let r = row(key);
        for side in ["estimate", "measured"] {
            let x = r[side].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{key} {side}: {r}");
        }
    }
}
