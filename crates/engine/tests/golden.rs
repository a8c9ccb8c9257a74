//! The engine against an independent reference: `tests/golden/make_goldens.py` (numpy + the PyPI
//! `gguf` reader + jinja2, its own BPE tokenizer) computed the real default model's logits for a
//! few prompts. This test loads the same GGUF and checks the rendered chat prompt, the token
//! ids, the top-k logits at every position and the greedy continuation.
//!
//! Tolerance: both sides dequantize the same 4-bit weights exactly and compute in f32, differing
//! only in summation order (numpy's pairwise BLAS sums vs the engine's 8-lane dot products), and
//! exp/sin/cos implementations. Over 30 layers that accumulated to 1e-4 at most on logits of
//! magnitude ~10–30 when this test was written, so we allow `LOGIT_TOL` = 0.002 absolute (20×
//! that). Breaking RoPE, the causal mask, the GQA head mapping or a norm moves logits by whole
//! units, far outside it.
// Native only: these tests read files and use the native clock.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use edgefit_engine::native::NativePlatform;
use edgefit_engine::{Engine, GenerateOptions, LoadOptions, Logits, SamplerConfig, WeightsFormat};
use serde_json::Value;

const LOGIT_TOL: f32 = 0.002;

/// With the default w4g32 load the weights are the file's own 4-bit values, bit for bit, so the
/// only new error is the int16 activations (relative ~2⁻¹⁶ of each block's largest value). Over
/// 30 layers that measured 0.0061 at most on the reference's top-10 logits (f32 weights: 0.0001)
/// when this test was written; the tolerance is 5× that. The greedy continuations stay identical.
const W4_LOGIT_TOL: f32 = 0.03;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_path() -> PathBuf {
    match std::env::var_os("EDGEFIT_MODEL") {
        Some(p) => PathBuf::from(p),
        None => repo().join("models/smollm2-135m-instruct-q4_1.gguf"),
    }
}

fn load() -> Engine {
    load_with(LoadOptions {
        weights: WeightsFormat::F32,
        embedding: None,
        requantize: false,
    })
}

fn load_with(options: LoadOptions) -> Engine {
    let path = model_path();
    let file = std::fs::File::open(&path).unwrap_or_else(|e| {
        panic!(
            "the default model is needed at {} ({e}); `cargo xtask setup` fetches it",
            path.display()
        )
    });
    let mut reader = std::io::BufReader::new(file);
    Engine::load_gguf(
        &mut reader,
        Box::new(NativePlatform::default()),
        options,
        &mut |_, _| {},
    )
    .expect("model loads")
}

fn goldens() -> Value {
    let text = std::fs::read_to_string(repo().join("tests/golden/smollm2-135m.json"))
        .expect("golden file");
    serde_json::from_str(&text).expect("golden JSON")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

/// Compares every case; returns the largest logit difference seen.
fn check_case(engine: &Engine, case: &Value, tol: f32) -> f32 {
    let name = case["name"].as_str().unwrap();
    let tok = engine.tokenizer();
    let prompt = case["prompt"].as_str().unwrap();
    let rendered = if case["chat"].as_bool().unwrap() {
        tok.apply_chat_template(prompt).unwrap()
    } else {
        prompt.to_string()
    };
    assert_eq!(
        rendered,
        case["rendered"].as_str().unwrap(),
        "{name}: rendered prompt"
    );
    let tokens = tok.encode(&rendered).unwrap();
    assert_eq!(tokens, ids(&case["tokens"]), "{name}: token ids");

    let model = engine.model();
    let vocab = model.config.vocab;
    // The reference computes attention in f32: so does this check.
    let mut cache = model.new_cache_in(edgefit_estimate::KvFormat::F32, 256);
    let logits = model.forward(&tokens, &mut cache, Logits::All).unwrap();
    let mut worst = 0.0f32;
    for p in case["positions"].as_array().unwrap() {
        let pos = p["pos"].as_u64().unwrap() as usize;
        let row = &logits[pos * vocab..(pos + 1) * vocab];
        let top = p["top"].as_array().unwrap();
        for entry in top {
            let id = entry[0].as_u64().unwrap() as usize;
            let want = entry[1].as_f64().unwrap() as f32;
            let diff = (row[id] - want).abs();
            worst = worst.max(diff);
            assert!(
                diff <= tol,
                "{name} pos {pos} token {id}: {} vs reference {want}",
                row[id]
            );
        }
        // Nothing outside the reference's top-k may beat its k-th logit by more than the tolerance.
        let kth = top.last().unwrap()[1].as_f64().unwrap() as f32;
        let listed: Vec<usize> = top
            .iter()
            .map(|e| e[0].as_u64().unwrap() as usize)
            .collect();
        for (id, l) in row.iter().enumerate() {
            if !listed.contains(&id) {
                assert!(
                    *l <= kth + tol,
                    "{name} pos {pos}: token {id} has {l}, above the reference top-k"
                );
            }
        }
    }
    // Greedy continuation, token by token through the KV cache (the reference does not stop at
    // end-of-turn tokens, so neither does this loop).
    let want = ids(&case["greedy"]["tokens"]);
    let mut got = Vec::new();
    let mut last = &logits[(tokens.len() - 1) * vocab..];
    let mut step_logits;
    for _ in 0..want.len() {
        let next = edgefit_engine::sampler::argmax(last);
        got.push(next);
        step_logits = model.forward(&[next], &mut cache, Logits::Last).unwrap();
        last = &step_logits;
    }
    assert_eq!(got, want, "{name}: greedy continuation");
    assert_eq!(
        tok.decode(&got).unwrap(),
        case["greedy"]["text"].as_str().unwrap(),
        "{name}: greedy text"
    );
    worst
}

#[test]
fn logits_tokens_and_greedy_text_match_the_numpy_reference() {
    let engine = load();
    let g = goldens();
    let mut worst = 0.0f32;
    for case in g["cases"].as_array().unwrap() {
        worst = worst.max(check_case(&engine, case, LOGIT_TOL));
    }
    eprintln!("largest logit difference against the reference: {worst:.5} (tolerance {LOGIT_TOL})");
}

#[test]
fn default_w4_weights_keep_the_files_values_and_match_the_reference() {
    let engine = load_with(LoadOptions::default());
    let summary = engine.info().weights;
    assert_eq!(summary.weights, "auto");
    let formats: Vec<&str> = summary.stored.iter().map(|s| s.format.as_str()).collect();
    assert_eq!(
        formats,
        ["q8_0", "q4_1"],
        "Q8_0 embedding and Q4_1 layers kept as they are"
    );
    let g = goldens();
    let mut worst = 0.0f32;
    for case in g["cases"].as_array().unwrap() {
        worst = worst.max(check_case(&engine, case, W4_LOGIT_TOL));
    }
    eprintln!(
        "w4 (int16 activations): largest logit difference {worst:.5} (tolerance {W4_LOGIT_TOL})"
    );
}

#[test]
fn capital_of_france_is_paris_through_the_engine() {
    let mut engine = load();
    let opts = GenerateOptions {
        chat: false,
        max_tokens: 8,
        sampler: SamplerConfig::default(),
        keep: false,
    };
    let mut streamed = String::new();
    let text = engine
        .generate("The capital of France is", opts, &mut |p| {
            streamed.push_str(p)
        })
        .unwrap();
    assert!(text.starts_with(" Paris"), "got {text:?}");
    assert_eq!(text, streamed);
    let m = engine.metrics();
    assert_eq!(m.prompt_tokens, 5);
    assert_eq!(m.generated_tokens, 8);
    assert!(m.ttft_ms > 0.0 && m.prefill_tok_s > 0.0 && m.decode_tok_s > 0.0);
    // The default KV cache is int8: per token, 30 layers × 3 KV heads × (K and V: 64 int8 + an
    // fp16 scale).
    assert_eq!(m.kv_format, "int8");
    assert_eq!(m.kv_bytes, (5 + 7) as u64 * 30 * 3 * 2 * (64 + 2));
    assert!(m.peak_bytes >= m.weights_bytes);
}

#[test]
fn chat_generation_stops_at_end_of_turn() {
    let mut engine = load();
    let opts = GenerateOptions {
        chat: true,
        max_tokens: 40,
        sampler: SamplerConfig::default(),
        keep: false,
    };
    let text = engine.generate("What is 2+2?", opts, &mut |_| {}).unwrap();
    assert!(text.contains('4'), "got {text:?}");
    assert!(
        !text.contains("<|im_end|>"),
        "the stop token is not part of the text: {text:?}"
    );
    assert_eq!(
        engine.metrics().finish_reason,
        Some(edgefit_engine::FinishReason::Stop)
    );
}

/// On the real (GQA) default model: every KV format holds exactly the estimator's bytes at
/// several lengths, and greedy text with the hybrid k8v16 cache stays the f32 cache's.
#[test]
fn kv_formats_on_the_default_model_hold_the_estimated_bytes() {
    use edgefit_estimate::KvFormat;
    let mut engine = load_with(LoadOptions::default());
    let spec = engine.model_spec();
    let opts = GenerateOptions {
        chat: false,
        max_tokens: 12,
        sampler: SamplerConfig::default(),
        keep: false,
    };
    let mut texts = Vec::new();
    for format in KvFormat::ALL.iter().copied() {
        engine.set_kv_format(format);
        let text = engine
            .generate("The capital of France is", opts, &mut |_| {})
            .unwrap();
        let m = engine.metrics();
        assert_eq!(m.kv_format, format.as_str());
        assert_eq!(m.kv_tokens, 5 + 11);
        assert_eq!(
            m.kv_bytes,
            edgefit_estimate::kv_bytes(&spec, format, m.kv_tokens as u64),
            "{format}"
        );
        let model = engine.model();
        let mut cache = model.new_cache(64);
        for n in [1usize, 7, 33] {
            let toks: Vec<u32> = (0..n as u32).map(|i| 100 + i).collect();
            cache.reset();
            model.forward(&toks, &mut cache, Logits::Last).unwrap();
            assert_eq!(
                cache.stored_bytes(),
                edgefit_estimate::kv_bytes(&spec, format, n as u64),
                "{format} at {n} tokens"
            );
        }
        texts.push((format, text));
    }
    let f32_text = &texts[0].1;
    let k8v16 = texts.iter().find(|(f, _)| *f == KvFormat::K8v16).unwrap();
    assert_eq!(&k8v16.1, f32_text, "hybrid cache keeps the greedy text");
}

/// Multi-turn chat on the real model: a second turn that reuses the cached first turn gives the
/// same greedy answer as recomputing the whole conversation, and computes only the new tokens.
#[test]
fn a_kept_conversation_matches_recomputing_it() {
    let mut engine = load_with(LoadOptions::default());
    let first = GenerateOptions {
        chat: true,
        max_tokens: 16,
        sampler: SamplerConfig::default(),
        keep: false,
    };
    let next = GenerateOptions {
        keep: true,
        ..first
    };
    let turn = |engine: &mut Engine, prompt: &str, o| {
        let text = engine.generate(prompt, o, &mut |_| {}).unwrap();
        (text, engine.metrics().clone())
    };
    let (_, m1) = turn(&mut engine, "What is the capital of France?", first);
    let (reused_text, m2) = turn(&mut engine, "And of Germany?", next);
    assert_eq!(
        m2.reused_tokens, m1.kv_tokens,
        "the whole first turn is reused"
    );
    // Every generated token is fed back except the last when max_tokens ends the turn.
    let unfed = usize::from(m2.finish_reason == Some(edgefit_engine::FinishReason::Length));
    assert_eq!(
        m2.kv_tokens,
        m2.reused_tokens + m2.prompt_tokens + m2.generated_tokens - unfed
    );
    // The same conversation again, but with the cache emptied before turn 2 (changing the KV
    // format rebuilds it), so turn 2 recomputes everything from the kept history.
    let (_, _) = turn(&mut engine, "What is the capital of France?", first);
    engine.set_kv_format(edgefit_estimate::KvFormat::F32);
    let (recomputed_text, m3) = turn(&mut engine, "And of Germany?", next);
    assert_eq!(m3.reused_tokens, 0);
    assert_eq!(m3.prompt_tokens, m2.reused_tokens + m2.prompt_tokens);
    assert_eq!(reused_text, recomputed_text);
    assert!(reused_text.contains("Berlin"), "{reused_text:?}");
    // A new conversation forgets the old one.
    let (_, m4) = turn(&mut engine, "And of Germany?", first);
    assert_eq!(m4.reused_tokens, 0);
    assert!(m4.prompt_tokens < m3.prompt_tokens);
}
