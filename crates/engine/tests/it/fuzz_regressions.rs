//! Regression tests for what `cargo xtask fuzz` found in the engine's loaders, one per finding,
//! named after what it was. Each input is the smallest clean form of the crashing one.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::synthetic::hf_files;
use edgefit_engine::{EngineError, TextTokenizer};

/// The synthetic model's tokenizer.json and tokenizer_config.json.
fn tokenizer_files() -> (String, String) {
    let (_, tok, tok_cfg, _) = hf_files(7).unwrap();
    (tok, tok_cfg)
}

/// Replaces the value of the top-level `key` in `json` with the raw text `raw`.
fn with_raw_value(json: &str, key: &str, raw: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    v[key] = serde_json::Value::String("@@RAW@@".into());
    serde_json::to_string(&v)
        .unwrap()
        .replace("\"@@RAW@@\"", raw)
}

fn tokenizer_error(json: &str) -> String {
    let (_, cfg) = tokenizer_files();
    match TextTokenizer::from_hf(json.as_bytes(), Some(&cfg), &[]) {
        Ok(_) => panic!("a broken tokenizer.json must be refused"),
        Err(e) => {
            assert!(matches!(e, EngineError::Tokenizer(_)), "{e:?}");
            e.to_string()
        }
    }
}

/// Fuzz target `tokenizer`: a syntax error inside `"decoder"` made `tokenizers` panic
/// (`expect("Helper")` in its decoder deserializer) instead of returning an error.
#[test]
fn tokenizer_json_syntax_error_inside_the_decoder_is_an_error_not_a_panic() {
    let (tok, _) = tokenizer_files();
    let broken = with_raw_value(&tok, "decoder", r#"{"type": ByteLevel}"#);
    let msg = tokenizer_error(&broken);
    assert!(msg.contains("tokenizer.json"), "{msg}");
    // The same text put back as valid JSON still loads.
    let v: serde_json::Value = serde_json::from_str(&tok).unwrap();
    let fixed = with_raw_value(&tok, "decoder", &v["decoder"].to_string());
    let (_, cfg) = tokenizer_files();
    TextTokenizer::from_hf(fixed.as_bytes(), Some(&cfg), &[]).unwrap();
}

/// Read in `tokenizers` while fixing the above: a `Precompiled` normalizer with a malformed
/// charsmap panics there too (`expect("Precompiled")`); edgefit refuses the normalizer.
#[test]
fn tokenizer_json_precompiled_normalizer_is_an_error_not_a_panic() {
    let (tok, _) = tokenizer_files();
    for normalizer in [
        r#"{"type": "Precompiled", "precompiled_charsmap": 5}"#,
        r#"{"type": "Sequence", "normalizers": [{"type": "Precompiled"}]}"#,
    ] {
        let broken = with_raw_value(&tok, "normalizer", normalizer);
        let msg = tokenizer_error(&broken);
        assert!(msg.contains("Precompiled"), "{msg}");
    }
}
