//! The tiny architecture fixtures of `tests/golden/arch/` (random f32 models in HF layout with
//! transformers' logits at every position and 16 greedy tokens, see its README): every case the
//! engine implements, from HF files and, where the case has one, from its f32 `model.gguf`.
//!
//! Bound on logits: the goldens carry 6 significant digits (error ≤ 5·10⁻⁶·|v|), and the
//! engine's f32 forward differs from torch's f32 one by the rounding of dot products of length
//! ≤ 32 through two blocks (measured ≈ 10⁻⁵ against an f64 forward in `arch_reference.rs`), so
//! `|engine − golden| ≤ 10⁻⁴ + 10⁻⁵·|golden|` holds with a wide margin, while a missing bias, a
//! wrong permutation or unscaled RoPE moves logits by O(0.1–1) (the fixtures' README: 1.288 for
//! the Llama 3 scaling). Greedy tokens must be identical.
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use edgefit_engine::hf::load_hf;
use edgefit_engine::{LoadOptions, Logits, Model, TextTokenizer, WeightsFormat};

const F32: LoadOptions = LoadOptions {
    weights: WeightsFormat::F32,
    embedding: None,
    requantize: false,
};

fn dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/arch")
        .join(case)
}

fn read(case: &str, file: &str) -> Vec<u8> {
    std::fs::read(dir(case).join(file)).unwrap_or_else(|e| panic!("{case}/{file}: {e}"))
}

fn text(case: &str, file: &str) -> String {
    String::from_utf8(read(case, file)).unwrap()
}

fn from_hf(case: &str) -> (Model, TextTokenizer) {
    load_hf(
        &text(case, "config.json"),
        &read(case, "tokenizer.json"),
        Some(&text(case, "tokenizer_config.json")),
        &[&read(case, "model.safetensors")],
        F32,
    )
    .unwrap_or_else(|e| panic!("{case}: {e}"))
}

fn from_gguf(case: &str) -> Option<(Model, TextTokenizer)> {
    let bytes = std::fs::read(dir(case).join("model.gguf")).ok()?;
    Some(
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{case} GGUF: {e}")),
    )
}

fn argmax(v: &[f32]) -> u32 {
    v.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &x)| if x > b.1 { (i, x) } else { b },
        )
        .0 as u32
}

/// Checks `model` against `golden` (the parsed golden.json); returns the worst logit error.
fn check(
    label: &str,
    model: &Model,
    tok: Option<&TextTokenizer>,
    golden: &serde_json::Value,
) -> f64 {
    let mut worst = 0.0f64;
    for case in golden["cases"].as_array().unwrap() {
        let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone()).unwrap();
        if let Some(tok) = tok {
            let prompt = case["prompt"].as_str().unwrap();
            assert_eq!(
                tok.encode(prompt).unwrap(),
                tokens,
                "{label}: token ids of {prompt:?}"
            );
        }
        let want: Vec<Vec<f64>> = serde_json::from_value(case["logits"].clone()).unwrap();
        let mut cache = model.new_cache(256);
        let got = model.forward(&tokens, &mut cache, Logits::All).unwrap();
        let vocab = model.config.vocab;
        for (p, row) in want.iter().enumerate() {
            for (g, w) in got[p * vocab..(p + 1) * vocab].iter().zip(row) {
                let e = (*g as f64 - w).abs();
                worst = worst.max(e);
                assert!(
                    e <= 1e-4 + 1e-5 * w.abs(),
                    "{label}: position {p}: {g} vs {w}"
                );
            }
        }
        // Greedy: 16 argmax tokens, each step on the cache (the goldens recompute the whole
        // sequence each step: the same numbers up to rounding, and identical tokens).
        let want_greedy: Vec<u32> = serde_json::from_value(case["greedy"].clone()).unwrap();
        let mut next = argmax(&got[(tokens.len() - 1) * vocab..]);
        let mut greedy = vec![next];
        while greedy.len() < want_greedy.len() {
            let l = model.forward(&[next], &mut cache, Logits::Last).unwrap();
            next = argmax(&l);
            greedy.push(next);
        }
        assert_eq!(greedy, want_greedy, "{label}: greedy tokens");
    }
    worst
}

#[test]
fn every_implemented_architecture_matches_transformers() {
    // (case, the case whose golden.json it uses)
    let cases = [
        ("llama", "llama"),
        ("llama3", "llama3"),
        ("llama3_rope_parameters", "llama3"),
        ("qwen2", "qwen2"),
        ("qwen3", "qwen3"),
    ];
    for (case, golden_case) in cases {
        let golden: serde_json::Value =
            serde_json::from_slice(&read(golden_case, "golden.json")).unwrap();
        let (model, tok) = from_hf(case);
        let e = check(case, &model, Some(&tok), &golden);
        eprintln!("{case} (HF): max |logit − golden| = {e:.2e}");
        if let Some((model, tok)) = from_gguf(case) {
            let e = check(&format!("{case} GGUF"), &model, Some(&tok), &golden);
            eprintln!("{case} (GGUF f32): max |logit − golden| = {e:.2e}");
        }
    }
}

#[test]
fn unimplemented_fixtures_are_refused_naming_what_is_missing() {
    for case in ["gemma3", "phi3"] {
        let err = load_hf(
            &text(case, "config.json"),
            &read(case, "tokenizer.json"),
            Some(&text(case, "tokenizer_config.json")),
            &[&read(case, "model.safetensors")],
            F32,
        )
        .map(|_| ())
        .unwrap_err();
        // gemma3: its per-layer-type rope_parameters; phi3: its model_type.
        assert!(
            matches!(err, edgefit_engine::EngineError::Unsupported(_)),
            "{case}: {err}"
        );
        eprintln!("{case}: {err}");
    }
}
