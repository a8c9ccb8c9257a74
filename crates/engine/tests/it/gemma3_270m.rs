//! The second real model, Gemma 3 270M Q4_K_M (`models/gemma3-270m-it-q4_k_m.gguf`, fetched by
//! `cargo xtask setup --gemma`, which `cargo xtask test` runs), end to end against
//! `tests/golden/gemma3-270m.json`: transformers 5.24 reading the same GGUF (every tensor
//! dequantized to f32), eager attention, f32.
//!
//! The engine holds the file's blocks as they are (`auto`: q5_0, q4_k, q6_k, q8_0), so the
//! weights are the reference's exactly; what differs is the arithmetic. The integer kernels read
//! each activation rounded to int16 per block of 32 (relative error ≤ 2⁻¹⁶ of the block's
//! largest value, at each of the 7 products of 18 layers and the 262,144-row head), and the f32
//! sums run in another order. The tiny Q8_0 fixtures measured 6·10⁻⁴ … 1·10⁻³ through 2–6
//! layers (`arch_goldens.rs`); this model's logits are ~30× larger (top logits ≈ 15–30) and it is
//! 18 layers deep. Measured here: see the printed worst error; the bound 0.05 (≈ 0.2 % of the
//! top logits) is a few times that, while a wrong block layout, norm, window or RoPE base moves
//! the top logits by whole units. Greedy continuations must equal the reference's.

use std::path::PathBuf;

use edgefit_engine::{LoadOptions, Logits, Model, TextTokenizer};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load() -> Option<(Model, TextTokenizer)> {
    let path = root().join("models/gemma3-270m-it-q4_k_m.gguf");
    if !path.exists() {
        eprintln!(
            "SKIPPED: {} is absent (`cargo xtask setup --gemma` fetches it)",
            path.display()
        );
        return None;
    }
    let mut f = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    Some(
        edgefit_engine::gguf::load_gguf(&mut f, LoadOptions::default(), &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
}

use crate::common::greedy;

#[test]
fn gemma3_270m_matches_transformers_on_its_own_blocks() {
    let Some((model, tok)) = load() else { return };
    let golden: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root().join("tests/golden/gemma3-270m.json")).unwrap(),
    )
    .unwrap();
    let vocab = model.config.vocab;
    assert_eq!(vocab, 262_144);
    let mut worst = 0.0f64;
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone()).unwrap();
        // The file's own tokenizer gives the reference's ids (BOS first).
        assert_eq!(
            tok.encode(case["rendered"].as_str().unwrap()).unwrap(),
            tokens,
            "{name}: token ids"
        );
        let mut cache = model.new_cache(256);
        let got = model.forward(&tokens, &mut cache, Logits::All).unwrap();
        for pos in case["positions"].as_array().unwrap() {
            let p = pos["pos"].as_u64().unwrap() as usize;
            let top: Vec<(u32, f64)> = serde_json::from_value(pos["top"].clone()).unwrap();
            for (id, want) in top {
                let e = (got[p * vocab + id as usize] as f64 - want).abs();
                worst = worst.max(e);
                assert!(
                    e <= 0.05,
                    "{name}: position {p} token {id}: {} vs {want}",
                    got[p * vocab + id as usize]
                );
            }
        }
        let want: Vec<u32> = serde_json::from_value(case["greedy"]["tokens"].clone()).unwrap();
        let got = greedy::greedy(
            &model,
            &mut cache,
            &got[(tokens.len() - 1) * vocab..],
            want.len(),
        );
        assert_eq!(got, want, "{name}: greedy tokens");
    }
    eprintln!("Gemma 3 270M Q4_K_M (blocks kept): max |logit − transformers| = {worst:.2e}");
}

/// The estimator sizes a llama.cpp "q4_k" file as the Q4_K_M file `llama-quantize` writes
/// (`file_layers` and `quantized_head` in `models/runtimes/llamacpp.json`): for this real
/// Q4_K_M file that is exactly the bytes the engine holds, which are the file's blocks as they
/// are (q5_0 for the 640-wide rows a Q4_K block cannot hold, q4_k, q6_k / q8_0 for `ffn_down` /
/// `attn_v` of the layers that get more bits, a q8_0 tied embedding, f32 norms).
#[test]
fn the_estimators_q4_k_m_sizing_is_the_files_bytes() {
    use edgefit_estimate::{ComputeUnit, Deployment, Runtime, WeightFormat};
    let Some((model, _)) = load() else { return };
    let spec = model.config.to_spec();
    let dep = Deployment {
        weights: WeightFormat::Q4K,
        unit: Some(ComputeUnit::Cpu),
        runtime: Some(Runtime::Llamacpp),
        ..Deployment::default()
    };
    let device = edgefit_estimate::device("snapdragon-8-gen3").unwrap();
    let report = edgefit_estimate::estimate(&spec, &dep, &device).unwrap();
    assert_eq!(report.memory.weights_bytes, model.weights.bytes());
}

/// The page's "Estimate vs measured in this tab" (and `edgefit generate --estimate`) sizes the
/// same file the same way: the deployment it derives from the engine's held formats is `q4_k`
/// (not `q5_0`, the format most of this file's matrices are in), and under this engine's own
/// runtime its weight bytes are the bytes held.
#[test]
fn the_tab_comparison_sizes_a_q4_k_m_file_as_held() {
    use edgefit_estimate::compare::{measured_deployment, Measured};
    use edgefit_estimate::{Runtime, WeightFormat};
    let Some((model, _)) = load() else { return };
    let summary = model.weights.summary();
    let stored = summary.stored_for_comparison();
    let run = Measured {
        prompt_tokens: 8,
        generated_tokens: 8,
        weights: model.weights.linear_format_name(),
        embedding: summary.embedding.clone(),
        kv_format: "int8".into(),
        ..Measured::default()
    };
    let dep = measured_deployment(&run, &stored).unwrap();
    assert_eq!(dep.weights, WeightFormat::Q4K, "{:?}", summary.stored);
    let device = edgefit_estimate::device("this-browser").unwrap();
    let report = edgefit_estimate::estimate(&model.config.to_spec(), &dep, &device).unwrap();
    assert_eq!(report.deployment.runtime, Some(Runtime::Edgefit));
    assert_eq!(report.memory.weights_bytes, model.weights.bytes());
}
