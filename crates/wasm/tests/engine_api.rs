//! The wasm API end to end on the synthetic tiny model, run by wasm-bindgen-test in Node and in
//! headless Chromium (`cargo xtask test` runs both). Natively these tests are not compiled.
#![cfg(target_arch = "wasm32")]

use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_wasm::Engine;
use wasm_bindgen_test::wasm_bindgen_test;

fn engine() -> Engine {
    let bytes = gguf_bytes(7, SyntheticDType::Q8_0).expect("synthetic model");
    Engine::load_gguf(&bytes).unwrap_or_else(|_| panic!("synthetic model loads"))
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).expect("valid JSON")
}

#[wasm_bindgen_test]
fn loads_and_reports_the_shape() {
    let e = engine();
    let info = json(&e.info().unwrap_or_else(|_| panic!("info")));
    assert_eq!(info["n_layers"], 2);
    assert_eq!(info["n_kv_heads"], 2);
    assert_eq!(info["chat_template"], true);
}

#[wasm_bindgen_test]
fn generates_with_measurements() {
    let mut e = engine();
    e.start("the cat", false, 6, 0.0, 1.0, 0)
        .unwrap_or_else(|_| panic!("start"));
    let mut pieces = 0;
    while let Some(_piece) = e.step().unwrap_or_else(|_| panic!("step")) {
        pieces += 1;
        assert!(pieces <= 6, "never more pieces than max_tokens");
    }
    let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    let generated = m["generated_tokens"].as_u64().unwrap();
    assert!((1..=6).contains(&generated));
    assert!(m["prompt_tokens"].as_u64().unwrap() >= 2);
    assert!(m["ttft_ms"].as_f64().unwrap() >= 0.0);
    assert!(m["weights_bytes"].as_u64().unwrap() > 0);
    assert!(m["kv_bytes"].as_u64().unwrap() > 0);
    // The wasm memory holds at least the f32 weights.
    assert!(m["peak_bytes"].as_u64().unwrap() >= m["weights_bytes"].as_u64().unwrap());
    // A finished generation keeps returning undefined.
    assert!(e.step().unwrap_or_else(|_| panic!("step")).is_none());
}

#[wasm_bindgen_test]
fn greedy_is_deterministic_and_chat_works() {
    let run = |chat| {
        let mut e = engine();
        e.start("hello there", chat, 5, 0.0, 1.0, 0)
            .unwrap_or_else(|_| panic!("start"));
        let mut text = String::new();
        while let Some(p) = e.step().unwrap_or_else(|_| panic!("step")) {
            text.push_str(&p);
        }
        (
            text,
            json(&e.metrics().unwrap_or_else(|_| panic!("metrics")))["prompt_tokens"]
                .as_u64()
                .unwrap(),
        )
    };
    let (a, plain_tokens) = run(false);
    let (b, _) = run(false);
    assert_eq!(a, b);
    let (_, chat_tokens) = run(true);
    assert!(chat_tokens > plain_tokens, "the chat template adds tokens");
}

#[wasm_bindgen_test]
fn bad_input_is_an_error_not_a_panic() {
    assert!(Engine::load_gguf(b"definitely not a gguf file").is_err());
    let bytes = gguf_bytes(7, SyntheticDType::Q8_0).unwrap();
    assert!(
        Engine::load_gguf(&bytes[..bytes.len() / 2]).is_err(),
        "truncated file"
    );
    let mut e = engine();
    assert!(
        e.start("x", false, 4, -1.0, 1.0, 0).is_err(),
        "negative temperature"
    );
    assert!(
        e.start("x", false, 0, 0.0, 1.0, 0).is_err(),
        "zero max tokens"
    );
    assert!(
        e.start("x", false, 4, 0.0, 1.5, 0).is_err(),
        "top-p above 1"
    );
    assert!(
        e.start("x", false, 100_000, 0.0, 1.0, 0).is_err(),
        "beyond the context"
    );
    assert!(e.step().is_err(), "step without a started generation");
}
