//! The tiny architecture fixtures of `tests/golden/arch/` (random f32 models in HF layout with
//! transformers' logits at every position and 16 greedy tokens, see its README): every case the
//! engine implements, from HF files and, where the case has one, from its f32 `model.gguf`.
//!
//! Bound on logits: the goldens carry 6 significant digits (error ≤ 5·10⁻⁶·|v|), and the
//! engine's f32 forward differs from torch's f32 one by the rounding of dot products of length
//! ≤ 32 through two blocks (measured ≈ 10⁻⁵ against an f64 forward in `arch_reference.rs`), so
//! `|engine − golden| ≤ 10⁻⁴ + 10⁻⁵·|golden|` holds with a wide margin, while a missing bias, a
//! wrong permutation or unscaled RoPE moves logits by O(0.1–1) (the fixtures' README: 1.652 for
//! the Llama 3 scaling). Greedy tokens must be identical.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::hf::load_hf;
use edgefit_engine::{LoadOptions, Logits, Model, TextTokenizer, WeightsFormat};

use crate::common::fixtures::{from_gguf, from_hf, gguf_model, gguf_with, read, text, F32};
use crate::common::greedy::greedy;

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
        let greedy = greedy(
            model,
            &mut cache,
            &got[(tokens.len() - 1) * vocab..],
            want_greedy.len(),
        );
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
        ("llama_bias", "llama_bias"),
        ("qwen2", "qwen2"),
        ("qwen3", "qwen3"),
        ("gemma3", "gemma3"),
        ("gemma3_gguf", "gemma3_gguf"),
        ("phi3", "phi3"),
        ("mistral_swa", "mistral_swa"),
        ("gemma2", "gemma2"),
        ("phi3_longrope", "phi3_longrope"),
        ("qwen3_yarn", "qwen3_yarn"),
    ];
    for (case, golden_case) in cases {
        let golden: serde_json::Value =
            serde_json::from_slice(&read(golden_case, "golden.json")).unwrap();
        let (model, tok) = from_hf(case);
        let e = check(case, &model, Some(&tok), &golden);
        eprintln!("{case} (HF): max |logit − golden| = {e:.2e}");
        // gemma3_gguf's and gemma2's GGUFs have a SentencePiece vocabulary:
        // `gemma_ggufs_match_transformers`.
        let gguf = (!["gemma3_gguf", "gemma2"].contains(&case))
            .then(|| from_gguf(case))
            .flatten();
        if let Some((model, tok)) = gguf {
            let e = check(&format!("{case} GGUF"), &model, Some(&tok), &golden);
            eprintln!("{case} (GGUF f32): max |logit − golden| = {e:.2e}");
        }
    }
}

/// Gemma 3 and Gemma 2 from llama.cpp's GGUF layout (norms with the +1 baked in, the sliding
/// pattern, local base and query scale hard-coded; Gemma 2's soft-caps from the file): the f32
/// files give the HF goldens.
#[test]
fn gemma_ggufs_match_transformers() {
    for (case, sliding, caps) in [
        (
            "gemma3_gguf",
            &[true, true, true, true, true, false][..],
            (None, None),
        ),
        ("gemma2", &[true, false, true][..], (Some(2.0), Some(3.0))),
    ] {
        let golden: serde_json::Value = serde_json::from_slice(&read(case, "golden.json")).unwrap();
        let model = gguf_model(case, "model.gguf", F32);
        assert_eq!(model.config.sliding_window, Some(8), "{case}");
        assert_eq!(model.config.sliding_layers, sliding, "{case}");
        assert_eq!(
            (model.config.attn_softcap, model.config.final_softcap),
            caps,
            "{case}"
        );
        let e = check(&format!("{case} GGUF"), &model, None, &golden);
        eprintln!("{case} (GGUF f32): max |logit − golden| = {e:.2e}");
    }
}

/// Gemma 2's defaults where its config.json says nothing (transformers' Gemma2Config): the
/// even layers slide (`gemma2` has no `layer_types`), soft-caps 50 and 30 when the keys are
/// absent, none when they are null.
#[test]
fn gemma2_takes_transformers_defaults() {
    let (model, _) = from_hf("gemma2");
    assert_eq!(model.config.sliding_layers, [true, false, true]);
    assert_eq!(model.config.rope_local_base, None);
    let mut config: serde_json::Value =
        serde_json::from_str(&text("gemma2", "config.json")).unwrap();
    let load = |config: &serde_json::Value| {
        load_hf(
            &config.to_string(),
            &read("gemma2", "tokenizer.json"),
            Some(&text("gemma2", "tokenizer_config.json")),
            &[&read("gemma2", "model.safetensors")],
            F32,
        )
        .unwrap()
        .0
    };
    let obj = config.as_object_mut().unwrap();
    obj.remove("attn_logit_softcapping");
    obj.remove("final_logit_softcapping");
    let m = load(&config);
    assert_eq!(
        (m.config.attn_softcap, m.config.final_softcap),
        (Some(50.0), Some(30.0))
    );
    config["attn_logit_softcapping"] = serde_json::Value::Null;
    config["final_logit_softcapping"] = serde_json::Value::Null;
    let m = load(&config);
    assert_eq!(
        (m.config.attn_softcap, m.config.final_softcap),
        (None, None)
    );
}

/// LongRoPE switches to its long factors for a pass reaching past the original context and
/// stays there, as transformers generates: a prompt fed in chunks after planning
/// (`plan_positions`, as the engine's prefill does) gives the logits of one pass over it (long
/// factors); without planning, the chunk that crosses runs the whole sequence again with the
/// long factors (transformers' `generate` drops the cache there), so the logits are the same,
/// and not those of keeping the first chunk's short-rotated keys. The goldens' greedy tokens
/// (`generate`, crossing during generation) are checked in
/// `every_implemented_architecture_matches_transformers`.
#[test]
fn longrope_switches_its_factors_as_transformers_generates() {
    let (model, _) = from_hf("phi3_longrope");
    let golden: serde_json::Value =
        serde_json::from_slice(&read("phi3_longrope", "golden.json")).unwrap();
    let tokens: Vec<u32> = serde_json::from_value(golden["cases"][0]["tokens"].clone()).unwrap();
    assert_eq!(tokens.len(), 15);
    let vocab = model.config.vocab;
    let mut whole = model.new_cache(64);
    let want = model.forward(&tokens, &mut whole, Logits::Last).unwrap();
    assert!(whole.long_rope());
    let mut planned = model.new_cache(64);
    model.plan_positions(&mut planned, tokens.len());
    model
        .forward(&tokens[..8], &mut planned, Logits::None)
        .unwrap();
    let got = model
        .forward(&tokens[8..], &mut planned, Logits::Last)
        .unwrap();
    let worst = want
        .iter()
        .zip(&got)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        worst < 1e-4,
        "planned chunks differ from one pass by {worst}"
    );
    let mut unplanned = model.new_cache(64);
    model
        .forward(&tokens[..8], &mut unplanned, Logits::None)
        .unwrap();
    assert!(!unplanned.long_rope());
    let crossing = model
        .forward(&tokens[8..], &mut unplanned, Logits::All)
        .unwrap();
    assert!(unplanned.long_rope());
    assert_eq!(unplanned.len(), tokens.len());
    assert_eq!(unplanned.tokens(), &tokens[..]);
    assert_eq!(
        crossing.len(),
        (tokens.len() - 8) * vocab,
        "the new tokens' rows only"
    );
    let gap = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max)
    };
    let recomputed = gap(&want, &crossing[crossing.len() - vocab..]);
    assert!(
        recomputed < 1e-4,
        "the crossing chunk differs from one pass by {recomputed}"
    );
    assert_eq!(want.len(), vocab);
    // A truncated cache that used the long factors starts over.
    assert_eq!(whole.truncate(4), 0);
    assert!(!whole.long_rope());
}

/// Gemma 3 with a prompt within the window (8): the sliding layers take the pass's tokens at
/// once, as a full layer does, and give transformers' logits for those positions (causal: the
/// first 8 positions of a golden prompt see only its first 8 tokens), in one call and in two
/// (5 then 3), with the f32 KV cache.
#[test]
fn gemma3_prompts_within_the_window_match_transformers() {
    for (label, model, golden_case) in [
        ("gemma3", from_hf("gemma3").0, "gemma3"),
        (
            "gemma3_gguf",
            gguf_model("gemma3_gguf", "model.gguf", F32),
            "gemma3_gguf",
        ),
    ] {
        let golden: serde_json::Value =
            serde_json::from_slice(&read(golden_case, "golden.json")).unwrap();
        let w = model.config.sliding_window.expect("a sliding window");
        assert_eq!(w, 8, "{label}");
        let vocab = model.config.vocab;
        for case in golden["cases"].as_array().unwrap() {
            let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone()).unwrap();
            let want: Vec<Vec<f64>> = serde_json::from_value(case["logits"].clone()).unwrap();
            for pieces in [&[8usize][..], &[5, 3]] {
                let mut cache = model.new_cache(64);
                let mut got = Vec::new();
                let mut fed = 0;
                for &n in pieces {
                    got.extend(
                        model
                            .forward(&tokens[fed..fed + n], &mut cache, Logits::All)
                            .unwrap(),
                    );
                    fed += n;
                }
                for (p, row) in want[..w].iter().enumerate() {
                    for (g, x) in got[p * vocab..(p + 1) * vocab].iter().zip(row) {
                        assert!(
                            (*g as f64 - x).abs() <= 1e-4 + 1e-5 * x.abs(),
                            "{label} {pieces:?}: position {p}: {g} vs {x}"
                        );
                    }
                }
            }
        }
    }
}

/// Gemma 3's sliding layers keep only their window in every KV format, and the bytes held are
/// what the estimator computes from the same files on its own (`ModelSpec::from_hf_config`,
/// the GGUF metadata): 90 tokens, fed in pieces (a prefill of 17, then pieces of 1 and 9),
/// past the window of 8 and past kivi4's first dropped block. The f32 cache's logits equal a
/// one-chunk prefill of the same tokens; the other formats stay close to f32's.
#[test]
fn gemma3_sliding_layers_hold_their_window_and_the_estimated_bytes() {
    use edgefit_estimate::{kv_bytes, GgufMetadata, KvFormat, ModelSpec};
    let golden: serde_json::Value = serde_json::from_slice(&read("gemma3", "golden.json")).unwrap();
    let prompt: Vec<u32> = serde_json::from_value(golden["cases"][1]["tokens"].clone()).unwrap();
    let tokens: Vec<u32> = prompt.iter().cycle().take(90).copied().collect();
    let (hf_model, _) = from_hf("gemma3");
    let hf_spec = ModelSpec::from_hf_config("", &text("gemma3", "config.json")).unwrap();
    let gguf_model_ = gguf_model("gemma3_gguf", "model.gguf", F32);
    let meta: GgufMetadata = edgefit_engine::gguf::read_estimate_metadata(
        &mut std::io::Cursor::new(read("gemma3_gguf", "model.gguf")),
    )
    .unwrap();
    let gguf_spec = meta.to_spec("").unwrap();
    assert_eq!(
        gguf_spec
            .layers
            .iter()
            .map(|l| l.sliding_window)
            .collect::<Vec<_>>(),
        [Some(8), Some(8), Some(8), Some(8), Some(8), None]
    );
    for (label, mut model, spec) in [
        ("gemma3", hf_model, hf_spec),
        ("gemma3_gguf", gguf_model_, gguf_spec),
    ] {
        let mut whole = model.new_cache(256);
        let want = model.forward(&tokens, &mut whole, Logits::Last).unwrap();
        for format in KvFormat::ALL.iter().copied() {
            model.kv_format = format;
            let mut cache = model.new_cache(256);
            let mut last = Vec::new();
            let mut fed = 0;
            for piece in [17usize, 1, 9, 1, 30, 1, 31] {
                last = model
                    .forward(&tokens[fed..fed + piece], &mut cache, Logits::Last)
                    .unwrap();
                fed += piece;
                let est = kv_bytes(&spec, format, fed as u64);
                assert_eq!(cache.bytes(), est, "{label} {format} at {fed}");
                assert_eq!(
                    cache.stored_bytes(),
                    est,
                    "{label} {format} at {fed} (stores)"
                );
            }
            assert_eq!(fed, tokens.len());
            // Held: fewer bytes than a full-attention cache of the same tokens.
            let full: u64 = spec
                .layers
                .iter()
                .map(|l| format.layer_bytes(l, fed as u64))
                .sum();
            assert!(cache.bytes() < full, "{label} {format}");
            let d = last
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            let budget = match format {
                KvFormat::F32 => 1e-4,
                KvFormat::F16 => 0.05,
                _ => 1.5,
            };
            eprintln!(
                "{label} {format}: {} bytes, max |logit − one-chunk f32| = {d:.2e}",
                cache.bytes()
            );
            assert!(d <= budget, "{label} {format}: {d}");
        }
    }
}

/// Mistral with `sliding_window` = 4 below its context: every layer slides (transformers masks
/// with the window whenever it is set; the goldens of `every_implemented_architecture_...`
/// cover the logits, with prompts and greedy tokens past the window), the KV cache holds the
/// window and the estimator counts the same bytes from the same `config.json`; exporting it is
/// refused (the writers have no window to write).
#[test]
fn mistral_sliding_window_slides_every_layer_and_the_estimate_follows() {
    use edgefit_estimate::{kv_bytes, KvFormat, ModelSpec};
    let (mut model, tok) = from_hf("mistral_swa");
    assert_eq!(model.config.sliding_window, Some(4));
    assert_eq!(model.config.sliding_layers, [true, true]);
    let spec = ModelSpec::from_hf_config("", &text("mistral_swa", "config.json")).unwrap();
    assert!(spec.layers.iter().all(|l| l.sliding_window == Some(4)));
    let tokens: Vec<u32> = (0..20).map(|i| 3 + (i * 7) % 300).collect();
    for format in KvFormat::ALL.iter().copied() {
        model.kv_format = format;
        let mut cache = model.new_cache(256);
        let mut fed = 0;
        for piece in [9usize, 1, 10] {
            model
                .forward(&tokens[fed..fed + piece], &mut cache, Logits::Last)
                .unwrap();
            fed += piece;
            assert_eq!(
                cache.bytes(),
                kv_bytes(&spec, format, fed as u64),
                "{format} at {fed}"
            );
        }
    }
    let err =
        edgefit_engine::export::hf_files(&model, &tok, edgefit_engine::export::ExportDType::F32)
            .map(|_| ())
            .unwrap_err()
            .to_string();
    assert!(err.contains("sliding window"), "{err}");
}

/// Top-10 logits per position and greedy tokens of `golden-q8_0.json` (the HF model holding
/// the Q8_0-dequantized weights); returns the worst error.
fn check_top(label: &str, model: &Model, golden: &serde_json::Value, bound: f64) -> f64 {
    let mut worst = 0.0f64;
    for case in golden["cases"].as_array().unwrap() {
        let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone()).unwrap();
        let top: Vec<Vec<(u32, f64)>> = serde_json::from_value(case["top"].clone()).unwrap();
        let mut cache = model.new_cache(256);
        let got = model.forward(&tokens, &mut cache, Logits::All).unwrap();
        let vocab = model.config.vocab;
        for (p, row) in top.iter().enumerate() {
            for &(id, want) in row {
                let e = (got[p * vocab + id as usize] as f64 - want).abs();
                worst = worst.max(e);
                assert!(
                    e <= bound,
                    "{label}: position {p} token {id}: {} vs {want}",
                    got[p * vocab + id as usize]
                );
            }
        }
        let want_greedy: Vec<u32> = serde_json::from_value(case["greedy"].clone()).unwrap();
        let greedy = greedy(
            model,
            &mut cache,
            &got[(tokens.len() - 1) * vocab..],
            want_greedy.len(),
        );
        assert_eq!(greedy, want_greedy, "{label}: greedy tokens");
    }
    worst
}

/// The Q8_0 files: loaded as f32 (the blocks dequantized exactly, so the f32 bound holds) and
/// as `q8_0` (the blocks kept). The integer kernels read activations rounded to int16 per block
/// of 32 (a relative error ≤ 2⁻¹⁶ of each block's largest value at every one of the ~8
/// products per layer, amplified by the norms that follow); measured: 5.7·10⁻⁴ (llama3),
/// 1.0·10⁻³ (qwen3), 5.9·10⁻⁴ (gemma3_gguf). The bound 5·10⁻³ leaves room for other kernels'
/// summation orders, while a wrong dequantization or layout moves logits by O(1). Greedy tokens
/// must be identical.
#[test]
fn q8_0_files_match_their_goldens() {
    let q8 = LoadOptions {
        weights: WeightsFormat::Q8_0,
        embedding: None,
        requantize: false,
    };
    for case in ["llama3", "qwen3", "gemma3_gguf"] {
        let golden: serde_json::Value =
            serde_json::from_slice(&read(case, "golden-q8_0.json")).unwrap();
        let model = gguf_model(case, "model-q8_0.gguf", F32);
        let e = check_top(&format!("{case} q8_0 as f32"), &model, &golden, 1e-4 + 1e-4);
        eprintln!("{case} (GGUF q8_0 read as f32): max |logit − golden| = {e:.2e}");
        let model = gguf_model(case, "model-q8_0.gguf", q8);
        assert_eq!(model.weights.layers[0].wq.format_name(), "q8_0");
        let e = check_top(&format!("{case} q8_0"), &model, &golden, 5e-3);
        eprintln!("{case} (GGUF q8_0 kept): max |logit − golden| = {e:.2e}");
    }
}

fn refusal(case: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let mut config: serde_json::Value = serde_json::from_str(&text(case, "config.json")).unwrap();
    edit(&mut config);
    let err = load_hf(
        &config.to_string(),
        &read(case, "tokenizer.json"),
        Some(&text(case, "tokenizer_config.json")),
        &[&read(case, "model.safetensors")],
        F32,
    )
    .map(|_| ())
    .unwrap_err();
    assert!(
        matches!(err, edgefit_engine::EngineError::Unsupported(_)),
        "{case}: {err}"
    );
    err.to_string()
}

/// A fixture case, the feature its edited config adds, and the edit.
type RefusalCase = (&'static str, &'static str, fn(&mut serde_json::Value));

#[test]
fn unimplemented_features_are_refused_naming_them() {
    let cases: [RefusalCase; 5] = [
        ("llama", "dynamic", |c| {
            c["rope_scaling"] = serde_json::json!({"rope_type": "dynamic", "factor": 2.0});
        }),
        ("qwen2", "final_logit_softcapping", |c| {
            c["final_logit_softcapping"] = 30.0.into();
        }),
        ("llama", "attn_logit_softcapping", |c| {
            c["attn_logit_softcapping"] = 50.0.into();
        }),
        ("gemma3", "gelu", |c| c["hidden_activation"] = "gelu".into()),
        ("gemma3", "chunked_attention", |c| {
            c["layer_types"][1] = "chunked_attention".into();
        }),
    ];
    for (case, named, edit) in cases {
        let msg = refusal(case, edit);
        assert!(msg.contains(named), "{case}: {msg}");
        eprintln!("{case}: {msg}");
    }
}

/// Zeroes column `c` of an f32 matrix (the input feature `c` then contributes nothing).
fn zero_col(m: &mut edgefit_kernels::Matrix, c: usize) {
    let edgefit_kernels::Matrix::F32 { data, cols, .. } = m else {
        panic!("f32 weights expected")
    };
    let cols = *cols;
    data.chunks_exact_mut(cols).for_each(|row| row[c] = 0.0);
}

/// Pruning Gemma 3: heads (one per KV group, with the per-head q/k norms shared by all heads
/// kept whole), MLP channels and a whole layer — here the full-attention layer, so the kept
/// layers must keep their sliding kind — are removed consistently: when the removed units
/// contribute exactly nothing (zeroed output columns: the post-norms then see the same
/// values), the pruned model gives the same logits, its KV bytes are the estimator's for the
/// pruned spec, and Q/K dims (under QK-norm) and any pruning of Phi-3 (partial RoPE) are
/// refused naming why.
#[test]
fn gemma3_prunes_consistently_and_what_cannot_be_pruned_is_refused() {
    use edgefit_engine::{prune, EngineError, LayerRatios, PrunePlan};
    let (mut model, _) = from_hf("gemma3");
    let hd = model.config.head_dim;
    for (l, lw) in model.weights.layers.iter_mut().enumerate() {
        // Heads 1 and 2 (one in each KV group of two) and MLP channels 0..4 write nothing.
        for c in hd..3 * hd {
            zero_col(&mut lw.wo, c);
        }
        for c in 0..4 {
            zero_col(&mut lw.w_down, c);
        }
        if l == 1 {
            // Layer 1 (the full-attention one) adds nothing to the residual stream.
            let f = |m: &mut edgefit_kernels::Matrix| {
                for c in 0..m.cols() {
                    zero_col(m, c);
                }
            };
            f(&mut lw.wo);
            f(&mut lw.w_down);
        }
    }
    let tokens: Vec<u32> = (0..40).map(|i| (i * 37 % 380 + 2) as u32).collect();
    let run = |m: &Model| {
        let mut cache = m.new_cache(64);
        let l = m.forward(&tokens, &mut cache, Logits::All).unwrap();
        (l, cache.bytes())
    };
    let (want, _) = run(&model);
    let plan = PrunePlan {
        ratios: LayerRatios {
            heads: 0.5,
            mlp: 4.0 / 32.0,
            ..Default::default()
        },
        drop_layers: vec![1],
        ..Default::default()
    };
    let (pruned, report) = prune(&model, &plan, None).unwrap();
    assert_eq!(report.dropped_layers, [1]);
    assert_eq!(pruned.config.sliding_layers, [true, true]);
    assert_eq!(pruned.config.n_layers, 2);
    let shape = &report.shapes[0];
    assert_eq!((shape.n_heads, shape.n_kv_heads, shape.ffn), (2, 2, 28));
    let (got, bytes) = run(&pruned);
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("gemma3 pruned: max |logit difference| = {d:.2e} (scale {scale:.1})");
    assert!(d <= 1e-5 * scale, "{d}");
    let spec = edgefit_estimate::ModelSpec::from_hf_config("", &text("gemma3", "config.json"))
        .unwrap()
        .pruned(&report.pruning)
        .unwrap();
    assert_eq!(
        bytes,
        edgefit_estimate::kv_bytes(&spec, edgefit_estimate::KvFormat::F32, 40)
    );
    assert_eq!(spec.params().total, pruned.config.params());

    let qk = PrunePlan {
        ratios: LayerRatios {
            qk_dims: 0.25,
            ..Default::default()
        },
        ..Default::default()
    };
    let err = prune(&model, &qk, None).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("qk_dims"), "{err}");
    eprintln!("gemma3 qk_dims: {err}");
    let (phi3, _) = from_hf("phi3");
    let mlp = PrunePlan {
        ratios: LayerRatios {
            mlp: 0.25,
            ..Default::default()
        },
        ..Default::default()
    };
    let err = prune(&phi3, &mlp, None).map(|_| ()).unwrap_err();
    assert!(matches!(err, EngineError::Unsupported(_)), "{err}");
    assert!(err.to_string().contains("partial RoPE"), "{err}");
    eprintln!("phi3: {err}");
    // Export: refused naming the architecture, never a file that loads wrong.
    for m in [&model, &phi3] {
        let err =
            edgefit_engine::export::safetensors_bytes(m, edgefit_engine::export::ExportDType::F32)
                .map(|_| ())
                .unwrap_err();
        assert!(err.to_string().contains(&m.config.arch), "{err}");
        eprintln!("export: {err}");
    }
    // The limits the page disables its controls by are these same refusals.
    let l = edgefit_engine::limits(&model.config);
    assert_eq!(l.prune, None);
    assert!(
        l.qk_dims.as_deref().unwrap().contains("q/k RMSNorm"),
        "{l:?}"
    );
    assert!(l.export.as_deref().unwrap().contains("gemma3"), "{l:?}");
    let l = edgefit_engine::limits(&phi3.config);
    assert!(
        l.prune.as_deref().unwrap().contains("partial RoPE"),
        "{l:?}"
    );
    assert_eq!(l.qk_dims, l.prune);
    assert!(l.export.is_some());
    let (llama, _) = from_hf("llama");
    assert_eq!(
        edgefit_engine::limits(&llama.config),
        edgefit_engine::PruneLimits::default()
    );
}

/// The published `config.json` of each family (every field as published, only the sizes and
/// token ids shrunk: `tests/golden/arch/README.md`, "Published configs") with tiny random
/// weights: the engine reads each file as transformers does and gives its logits and greedy
/// tokens; the estimator reads the same file to the same KV bytes the engine holds.
#[test]
fn published_configs_match_transformers() {
    use edgefit_estimate::{kv_bytes, KvFormat, ModelSpec};
    for case in [
        "llama32_1b",
        "smollm2_135m",
        "qwen25_05b",
        "qwen25_swa",
        "qwen3_06b",
        "gemma3_1b",
        "gemma3_270m",
        "gemma3_4b_text",
        "phi35_mini",
        "phi35_longrope",
        "gemma2_9b",
    ] {
        let golden: serde_json::Value = serde_json::from_slice(&read(case, "golden.json")).unwrap();
        let (model, tok) = from_hf(case);
        let e = check(case, &model, Some(&tok), &golden);
        eprintln!("{case} (published config): max |logit − golden| = {e:.2e}");
        // What transformers read for the sliding layers is what the engine runs.
        let read = &golden["transformers_read"];
        let want_sliding: Vec<bool> = read["layer_types"].as_array().map_or_else(
            || vec![false; model.config.n_layers],
            |t| t.iter().map(|t| t == "sliding_attention").collect(),
        );
        let got_sliding: Vec<bool> = (0..model.config.n_layers)
            .map(|i| model.config.layer_window(i).is_some())
            .collect();
        assert_eq!(got_sliding, want_sliding, "{case}: sliding layers");
        let spec = ModelSpec::from_hf_config("", &text(case, "config.json"))
            .unwrap_or_else(|e| panic!("{case}: estimator: {e}"));
        let tokens: Vec<u32> = (0..40).map(|i| 3 + (i * 11) % 300).collect();
        let mut cache = model.new_cache(256);
        model
            .forward(&tokens, &mut cache, Logits::Last)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(
            cache.bytes(),
            kv_bytes(&spec, KvFormat::F32, tokens.len() as u64),
            "{case}: KV bytes held vs estimated"
        );
    }
}

/// Gemma 3 4B's linear RoPE scaling (factor 8) applies to the full-attention layers only; the
/// sliding layers keep the local base unscaled (transformers' `rope_parameters` per layer
/// type, llama.cpp's `rope_freq_scale_train_swa = 1`): the HF files (config.json in the
/// transformers-4 form, top-level `rope_scaling`) and the f32 GGUF (`rope.scaling.type`
/// linear, `rope.scaling.factor` 8) both give transformers' logits.
#[test]
fn gemma3_linear_scaling_on_full_layers_matches_transformers() {
    let golden: serde_json::Value =
        serde_json::from_slice(&read("gemma3_linear_gguf", "golden.json")).unwrap();
    let (model, tok) = from_hf("gemma3_linear_gguf");
    assert_eq!(
        model.config.rope_scaling,
        edgefit_estimate::RopeScaling::Linear { factor: 8.0 }
    );
    let e = check("gemma3_linear_gguf", &model, Some(&tok), &golden);
    eprintln!("gemma3_linear_gguf (HF): max |logit − golden| = {e:.2e}");
    let model = gguf_model("gemma3_linear_gguf", "model.gguf", F32);
    assert_eq!(
        model.config.rope_scaling,
        edgefit_estimate::RopeScaling::Linear { factor: 8.0 }
    );
    let e = check("gemma3_linear_gguf GGUF", &model, None, &golden);
    eprintln!("gemma3_linear_gguf (GGUF f32): max |logit − golden| = {e:.2e}");
}

/// Every id of a config.json `eos_token_id` list stops generation: Llama 3.2 Instruct's
/// `[128001, 128008, 128009]` (here mapped to 0, 1, 2) ends a chat turn on `<|eot_id|>`, the
/// last. Id 1 (`<|im_start|>` in this vocabulary) is no end-of-turn text, so only the list
/// makes it a stop token; a list entry beyond the vocabulary or not an id is refused by name.
#[test]
fn every_eos_id_of_a_config_list_stops() {
    let (_, tok) = from_hf("llama32_1b");
    for id in [0, 1, 2] {
        assert!(tok.is_stop(id), "eos_token_id {id} stops");
    }
    let config = text("llama32_1b", "config.json");
    let load = |config: &str| {
        load_hf(
            config,
            &read("llama32_1b", "tokenizer.json"),
            Some(&text("llama32_1b", "tokenizer_config.json")),
            &[&read("llama32_1b", "model.safetensors")],
            F32,
        )
    };
    let list = "\"eos_token_id\": [\n    0,\n    1,\n    2\n  ]";
    assert!(config.contains(list), "the fixture's list");
    let single = load(&config.replace(list, "\"eos_token_id\": 0"))
        .unwrap()
        .1;
    assert!(!single.is_stop(1), "without the list, id 1 does not stop");
    let err = load(&config.replace(list, "\"eos_token_id\": [0, 384]"))
        .expect_err("id beyond the vocabulary");
    assert!(err.to_string().contains("eos_token_id"), "{err}");
    let err = load(&config.replace(list, "\"eos_token_id\": [0, \"x\"]")).expect_err("not an id");
    assert!(err.to_string().contains("eos_token_id"), "{err}");
    // An HF export writes the whole list back, and the files stop where the model does.
    let (model, tok) = load(&config).unwrap();
    let exported: serde_json::Value = serde_json::from_str(
        &edgefit_engine::export::config_json(
            &model.config,
            &tok,
            edgefit_engine::export::ExportDType::F32,
        )
        .unwrap(),
    )
    .unwrap();
    let mut ids: Vec<u64> = serde_json::from_value(exported["eos_token_id"].clone()).unwrap();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2], "{}", exported["eos_token_id"]);
}

/// Llama with `attention_bias` and `mlp_bias` (biases on q, k, v, o, gate, up, down): both
/// loaders find all seven (the goldens above check their values); the estimator counts the
/// parameters the file holds; HF and GGUF exports, of the model and of a pruned one, reload to
/// the same logits and hold the estimated parameters.
#[test]
fn llama_biases_load_prune_and_export() {
    use edgefit_engine::export::{gguf_bytes, hf_files, ExportDType, GgufDType};
    use edgefit_engine::{prune, Importance, LayerRatios, PrunePlan};
    let (model, tok) = from_hf("llama_bias");
    // The GGUF's own tokenizer for the GGUF export (an HF tokenizer.json with a custom
    // pre-tokenizer regex has no GGUF form).
    let (gmodel, gtok) = from_gguf("llama_bias").expect("llama_bias/model.gguf");
    for c in [&model.config, &gmodel.config] {
        assert!(c.qkv_bias && c.o_bias && c.mlp_bias, "{c:?}");
    }
    let st = read("llama_bias", "model.safetensors");
    let elements = |bytes: &[u8]| -> u64 {
        let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
        st.tensors()
            .iter()
            .map(|(_, t)| t.shape().iter().product::<usize>() as u64)
            .sum()
    };
    let spec = edgefit_estimate::ModelSpec::from_hf_config("", &text("llama_bias", "config.json"))
        .unwrap();
    assert_eq!(
        spec.params().total,
        elements(&st),
        "estimated vs stored parameters"
    );
    assert_eq!(model.config.params(), elements(&st));
    let tokens: Vec<u32> = (0..20).map(|i| 3 + (i * 17) % 300).collect();
    let logits = |m: &Model| {
        let mut cache = m.new_cache(64);
        m.forward(&tokens, &mut cache, Logits::All).unwrap()
    };
    let plan = PrunePlan {
        ratios: LayerRatios {
            mlp: 0.25,
            heads: 0.5,
            ..LayerRatios::default()
        },
        importance: Importance::Magnitude,
        ..PrunePlan::default()
    };
    let (pruned, report) = prune(&model, &plan, None).unwrap();
    assert!(report.params_after < report.params_before);
    for m in [&model, &pruned] {
        let want = logits(m);
        let files = hf_files(m, &tok, ExportDType::F32).unwrap();
        let file = |n: &str| files.iter().find(|(f, _)| f == n).unwrap().1.clone();
        let config = String::from_utf8(file("config.json")).unwrap();
        let (back, _) = load_hf(
            &config,
            &file("tokenizer.json"),
            Some(&String::from_utf8(file("tokenizer_config.json")).unwrap()),
            &[&file("model.safetensors")],
            F32,
        )
        .unwrap();
        assert_eq!(logits(&back), want, "HF export reloads exactly");
        assert_eq!(elements(&file("model.safetensors")), m.config.params());
        let g = gguf_bytes(m, &gtok, GgufDType::F32).unwrap();
        let (back, _) =
            edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(g), F32, &mut |_, _| {})
                .unwrap();
        assert!(back.config.o_bias && back.config.mlp_bias);
        assert_eq!(logits(&back), want, "GGUF export reloads exactly");
    }
    // A llama with q/k/v biases but none on o (possible in GGUF) has no config.json form.
    let mut odd = model.clone();
    odd.config.o_bias = false;
    odd.weights.layers.iter_mut().for_each(|l| l.bo = None);
    let err = hf_files(&odd, &tok, ExportDType::F32).unwrap_err();
    assert!(err.to_string().contains("attention_bias"), "{err}");
    // Elsewhere the biases stay refused by name (Qwen3 has none in transformers either).
    let qwen3 = text("qwen3", "config.json");
    for (from, to) in [
        ("\"attention_bias\": false", "\"attention_bias\": true"),
        ("\"attention_bias\": false", "\"mlp_bias\": true"),
    ] {
        assert!(qwen3.contains(from));
        let err = load_hf(
            &qwen3.replace(from, to),
            &read("qwen3", "tokenizer.json"),
            None,
            &[&read("qwen3", "model.safetensors")],
            F32,
        )
        .expect_err("refused");
        let key = to.split('"').nth(1).unwrap();
        assert!(err.to_string().contains(key), "{err}");
    }
}

/// Gemma 3 4B's published layout (`Gemma3ForConditionalGeneration`, the decoder under
/// `text_config`) is refused naming the class, not as a config without `hidden_size`.
#[test]
fn multimodal_gemma3_config_is_refused_by_name() {
    let text_config: serde_json::Value =
        serde_json::from_str(&text("gemma3_4b_text", "config.json")).unwrap();
    let config = serde_json::json!({
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": text_config,
        "vision_config": {"model_type": "siglip_vision_model"},
    })
    .to_string();
    let err = load_hf(
        &config,
        &read("gemma3_4b_text", "tokenizer.json"),
        None,
        &[&read("gemma3_4b_text", "model.safetensors")],
        F32,
    )
    .expect_err("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("Gemma3ForConditionalGeneration") && msg.contains("text_config"),
        "{msg}"
    );
    assert!(
        matches!(err, edgefit_engine::EngineError::Unsupported(_)),
        "{err:?}"
    );
}

/// A Gemma GGUF's own layout, read as llama.cpp reads it (`load_swa_pattern`, and the sliding
/// layers' RoPE base `gemma3.rope.freq_base_swa`, which its converter writes): the default
/// layout spelled out (one flag per layer, or the period 6) changes nothing; another layout and
/// base give what the HF loader gives for a config.json saying the same (`layer_types`,
/// `rope_local_base_freq`), whose semantics the HF goldens check against transformers, and
/// the estimator sizes the same sliding layers from the header. A flag array of the wrong
/// length is refused naming the key. Gemma 2 without `gemma2.attention.sliding_window` slides
/// its even layers by 4096, llama.cpp's default.
#[test]
fn gemma_gguf_layout_keys_are_read_as_llama_cpp_reads_them() {
    use candle_core::quantized::gguf_file::Value;
    let golden: serde_json::Value =
        serde_json::from_slice(&read("gemma3_gguf", "golden.json")).unwrap();
    let tokens: Vec<u32> = serde_json::from_value(golden["cases"][1]["tokens"].clone()).unwrap();
    assert!(tokens.len() > 8, "the prompt reaches past the window of 8");
    let load = |bytes: Vec<u8>| {
        edgefit_engine::gguf::load_gguf_model(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
    };
    let logits = |model: &edgefit_engine::Model| {
        let mut cache = model.new_cache(256);
        model.forward(&tokens, &mut cache, Logits::All).unwrap()
    };
    let flags = |f: &[bool]| Value::Array(f.iter().map(|&b| Value::Bool(b)).collect());
    const PATTERN: &str = "gemma3.attention.sliding_window_pattern";
    const BASE: &str = "gemma3.rope.freq_base_swa";
    let plain = logits(&gguf_model("gemma3_gguf", "model.gguf", F32));
    for keys in [
        vec![
            (PATTERN, flags(&[true, true, true, true, true, false])),
            (BASE, Value::F32(10_000.0)),
        ],
        vec![(PATTERN, Value::U32(6))],
    ] {
        let model = load(gguf_with("gemma3_gguf", "model.gguf", &keys, &[], &[])).unwrap();
        assert_eq!(logits(&model), plain, "the default layout spelled out");
    }
    let layout = [false, true, true, false, true, false];
    let bytes = gguf_with(
        "gemma3_gguf",
        "model.gguf",
        &[(PATTERN, flags(&layout)), (BASE, Value::F32(500.0))],
        &[],
        &[],
    );
    let model = load(bytes.clone()).unwrap();
    assert_eq!(model.config.sliding_layers, layout);
    assert_eq!(model.config.rope_local_base, Some(500.0));
    let spec = edgefit_engine::gguf::read_estimate_metadata(&mut std::io::Cursor::new(bytes))
        .unwrap()
        .to_spec("")
        .unwrap();
    let windows: Vec<Option<u32>> = spec.layers.iter().map(|l| l.sliding_window).collect();
    let want: Vec<Option<u32>> = layout.iter().map(|&s| s.then_some(8)).collect();
    assert_eq!(windows, want, "the estimator's sliding layers");
    let mut config: serde_json::Value =
        serde_json::from_str(&text("gemma3_gguf", "config.json")).unwrap();
    config["layer_types"] = layout
        .iter()
        .map(|&s| {
            if s {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    config["rope_local_base_freq"] = 500.0.into();
    let (hf, _) = load_hf(
        &config.to_string(),
        &read("gemma3_gguf", "tokenizer.json"),
        Some(&text("gemma3_gguf", "tokenizer_config.json")),
        &[&read("gemma3_gguf", "model.safetensors")],
        F32,
    )
    .unwrap();
    assert_eq!(hf.config.sliding_layers, layout);
    let (got, want) = (logits(&model), logits(&hf));
    let diff = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    let moved = got
        .iter()
        .zip(&plain)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("gemma3_gguf with its own layout: max |GGUF − HF| = {diff:.2e}, moved {moved:.2e} from the default layout");
    assert!(diff <= 1e-4, "{diff}");
    assert!(moved > 1e-2, "the keys change the model: {moved}");
    let err = load(gguf_with(
        "gemma3_gguf",
        "model.gguf",
        &[(PATTERN, flags(&[true, false]))],
        &[],
        &[],
    ))
    .unwrap_err();
    assert!(err.to_string().contains(PATTERN), "{err}");
    let bytes = gguf_with(
        "gemma2",
        "model.gguf",
        &[],
        &["gemma2.attention.sliding_window"],
        &[],
    );
    let model = load(bytes.clone()).unwrap();
    assert_eq!(model.config.sliding_window, Some(4096));
    assert_eq!(model.config.sliding_layers, [true, false, true]);
    let spec = edgefit_engine::gguf::read_estimate_metadata(&mut std::io::Cursor::new(bytes))
        .unwrap()
        .to_spec("")
        .unwrap();
    let windows: Vec<Option<u32>> = spec.layers.iter().map(|l| l.sliding_window).collect();
    assert_eq!(windows, [Some(4096), None, Some(4096)]);
}
