//! Perplexity: the windowed, sub-batched implementation against a direct computation on the
//! synthetic model; the uniform case; errors; and the real default model over the first 512
//! tokens of the evaluation text (`tests/data/constitution.txt`) in several weight formats.
// Native only: these tests read files and use the native clock.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use edgefit_engine::native::NativePlatform;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType, CONTEXT};
use edgefit_engine::{
    perplexity, perplexity_of_text, EngineError, LoadOptions, Logits, Model, PerplexityOptions,
    PerplexityReport, TextTokenizer, WeightsFormat,
};

const SEED: u64 = 5;

/// About 120 tokens with the synthetic byte-level tokenizer (fits its 128-token context).
const TEXT: &str = "the cat sat on the mat; then the theme: 42 ü ends. the dog ran to the \
                    theatre and the other one sat there, then the three went home at 9.";

fn synthetic(weights: WeightsFormat) -> (Model, TextTokenizer) {
    let bytes = gguf_bytes(SEED, SyntheticDType::F32).unwrap();
    let options = LoadOptions {
        weights,
        embedding: None,
        requantize: false,
    };
    edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
        .unwrap()
}

/// Mean NLL computed directly: one `forward(..., Logits::All)` per window over all its inputs,
/// then `−ln(exp(l_target − max) / Σ exp(l − max))` written out independently of the engine.
fn direct_mean_nll(model: &Model, tokens: &[u32], window: usize) -> f64 {
    let vocab = model.config.vocab;
    let inputs = &tokens[..tokens.len() - 1];
    let mut total = 0.0f64;
    for (w, chunk) in inputs.chunks(window).enumerate() {
        let mut cache = model.new_cache(window);
        let logits = model.forward(chunk, &mut cache, Logits::All).unwrap();
        assert_eq!(logits.len(), chunk.len() * vocab);
        for (i, row) in logits.chunks_exact(vocab).enumerate() {
            let target = tokens[w * window + i + 1] as usize;
            let max = row.iter().map(|&v| v as f64).fold(f64::MIN, f64::max);
            let z: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            total -= ((row[target] as f64 - max).exp() / z).ln();
        }
    }
    total / inputs.len() as f64
}

fn run(model: &Model, tokens: &[u32], window: Option<usize>, batch: usize) -> PerplexityReport {
    perplexity(
        model,
        tokens,
        PerplexityOptions {
            window,
            batch: Some(batch),
            ..PerplexityOptions::default()
        },
        None,
        &mut |_, _| {},
    )
    .unwrap()
}

#[test]
fn windowed_sub_batched_perplexity_equals_direct_computation() {
    for format in [WeightsFormat::F32, WeightsFormat::W4g32] {
        let (model, tok) = synthetic(format);
        let tokens = tok.encode(TEXT).unwrap();
        assert!(
            (100..=CONTEXT).contains(&tokens.len()),
            "{} tokens",
            tokens.len()
        );
        // A window holding everything, windows that split the text unevenly, and window 1.
        for window in [CONTEXT, 50, 7, 1] {
            let expected = direct_mean_nll(&model, &tokens, window);
            for batch in [1, 3, 64] {
                let got = run(&model, &tokens, Some(window), batch);
                let rel = (got.mean_nll - expected).abs() / expected.abs();
                assert!(
                    rel < 1e-9,
                    "{format} window {window} batch {batch}: mean NLL {} vs direct {expected} \
                     (relative {rel:e})",
                    got.mean_nll
                );
                assert_eq!(got.tokens, tokens.len() - 1);
                assert_eq!(got.windows, (tokens.len() - 1).div_ceil(window));
                assert!((got.perplexity - expected.exp()).abs() / expected.exp() < 1e-9);
                assert!(got.ms.is_none() && got.tokens_per_s.is_none());
            }
        }
        // Random weights are not a language model: close to, but not, uniform over the vocab.
        let r = run(&model, &tokens, None, 64);
        assert!(r.perplexity.is_finite() && r.perplexity > 1.0);
        assert_eq!(r.window, CONTEXT);
    }
}

/// LongRoPE (`phi3_longrope`, original context 14): a window longer than the original context
/// scores every token with the long factors, as one pass over the window does, whatever the
/// sub-batch (a sub-batch within the original context must not score with the short ones).
#[test]
fn longrope_windows_score_as_one_pass_whatever_the_batch() {
    let (model, tok) = crate::common::fixtures::from_hf("phi3_longrope");
    let tokens = tok.encode(TEXT).unwrap();
    let window = 30;
    assert!(tokens.len() > 2 * window, "{} tokens", tokens.len());
    let expected = direct_mean_nll(&model, &tokens, window);
    for batch in [1, 5, 14, 30] {
        let got = run(&model, &tokens, Some(window), batch);
        let rel = (got.mean_nll - expected).abs() / expected.abs();
        assert!(
            rel < 1e-6,
            "batch {batch}: mean NLL {} vs one pass per window {expected} (relative {rel:e})",
            got.mean_nll
        );
    }
}

#[test]
fn context_changes_the_result_so_windows_are_real() {
    let (model, tok) = synthetic(WeightsFormat::F32);
    let tokens = tok.encode(TEXT).unwrap();
    let full = run(&model, &tokens, None, 64);
    let short = run(&model, &tokens, Some(1), 64);
    assert!(
        (full.mean_nll - short.mean_nll).abs() > 1e-6,
        "window 1 must lose context: {} vs {}",
        full.mean_nll,
        short.mean_nll
    );
}

#[test]
fn uniform_logits_give_the_vocabulary_size() {
    let (mut model, tok) = synthetic(WeightsFormat::F32);
    // A zero final norm zeroes the hidden state the head sees: every logit is 0.
    model.weights.final_norm.fill(0.0);
    let tokens = tok.encode(TEXT).unwrap();
    for batch in [1, 64] {
        let r = run(&model, &tokens, Some(50), batch);
        let vocab = model.config.vocab as f64;
        assert!(
            (r.perplexity - vocab).abs() / vocab < 1e-12,
            "uniform perplexity {} vs vocabulary {vocab}",
            r.perplexity
        );
    }
}

#[test]
fn max_tokens_progress_and_timing() {
    let (model, tok) = synthetic(WeightsFormat::F32);
    let tokens = tok.encode(TEXT).unwrap();
    let mut calls = Vec::new();
    let platform = NativePlatform::default();
    let r = perplexity(
        &model,
        &tokens,
        PerplexityOptions {
            max_tokens: Some(20),
            window: Some(8),
            batch: Some(3),
        },
        Some(&platform),
        &mut |done, total| calls.push((done, total)),
    )
    .unwrap();
    assert_eq!(r.tokens, 20);
    assert_eq!(r.text_tokens, tokens.len());
    assert_eq!(r.windows, 3);
    // The first 20 predictions are the same whether or not the rest of the text follows.
    let prefix = run(&model, &tokens[..21], Some(8), 3);
    assert_eq!(r.mean_nll, prefix.mean_nll);
    assert_eq!(calls.first(), Some(&(0, 20)));
    assert_eq!(calls.last(), Some(&(20, 20)));
    assert!(calls.windows(2).all(|w| w[0].0 < w[1].0 && w[1].1 == 20));
    // The call before any work, then one per forward: windows of 8, 8 and 4 inputs in batches
    // of 3 are 3 + 3 + 2 calls.
    assert_eq!(calls.len(), 1 + 3 + 3 + 2);
    assert!(r.ms.is_some_and(|ms| ms >= 0.0));
    assert!(r.tokens_per_s.is_some_and(|t| t >= 0.0));
    let json = serde_json::to_value(&r).unwrap();
    for key in ["perplexity", "tokens", "mean_nll", "ms", "tokens_per_s"] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
}

#[test]
fn bad_inputs_are_errors() {
    let (model, tok) = synthetic(WeightsFormat::F32);
    let none = |text: &str, options| {
        perplexity_of_text(&model, &tok, text, options, None, &mut |_, _| {}).unwrap_err()
    };
    let d = PerplexityOptions::default();
    for (err, name) in [
        (none("", d), "text"),
        (none("a", d), "text"),
        (
            none(
                TEXT,
                PerplexityOptions {
                    window: Some(0),
                    ..d
                },
            ),
            "window",
        ),
        (
            none(
                TEXT,
                PerplexityOptions {
                    window: Some(CONTEXT + 1),
                    ..d
                },
            ),
            "window",
        ),
        (
            none(
                TEXT,
                PerplexityOptions {
                    batch: Some(0),
                    ..d
                },
            ),
            "batch",
        ),
        (
            none(
                TEXT,
                PerplexityOptions {
                    max_tokens: Some(0),
                    ..d
                },
            ),
            "max_tokens",
        ),
    ] {
        assert!(
            matches!(&err, EngineError::Setting { name: n, .. } if *n == name),
            "expected a `{name}` setting error, got {err}"
        );
    }
    // A text longer than the context needs a window: the default window is the context.
    let long = TEXT.repeat(3);
    let r = perplexity_of_text(&model, &tok, &long, d, None, &mut |_, _| {}).unwrap();
    assert!(r.windows >= 2);
    // A token id outside the vocabulary, also as the last target (never an input).
    let vocab = model.config.vocab as u32;
    for tokens in [vec![vocab, 5, 6], vec![5, 6, vocab]] {
        let err = perplexity(&model, &tokens, d, None, &mut |_, _| {}).unwrap_err();
        assert!(
            matches!(err, EngineError::Setting { name: "token", .. }),
            "{err}"
        );
    }
}

// ---- The real default model -------------------------------------------------------------------

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_path() -> PathBuf {
    match std::env::var_os("EDGEFIT_MODEL") {
        Some(p) => PathBuf::from(p),
        None => repo().join("models/smollm2-135m-instruct-q4_1.gguf"),
    }
}

fn real(weights: WeightsFormat) -> (Model, TextTokenizer) {
    let path = model_path();
    let file = std::fs::File::open(&path).unwrap_or_else(|e| {
        panic!(
            "the default model is needed at {} ({e}); `cargo xtask setup` fetches it",
            path.display()
        )
    });
    let options = LoadOptions {
        weights,
        embedding: None,
        requantize: false,
    };
    edgefit_engine::gguf::load_gguf(&mut std::io::BufReader::new(file), options, &mut |_, _| {})
        .expect("model loads")
}

/// Predicted tokens of the evaluation text the real-model test scores.
const REAL_TOKENS: usize = 512;

/// Bounds, with the values measured when this test was written in the comments:
/// - every format in 2..100 (a sane English perplexity for a 135M model on legal prose);
/// - `w4g32` (the GGUF's own Q4_1 weights, q8_0 embedding) within 10% of `f32` (which holds the
///   same Q4_1 weights dequantized, so this isolates the embedding/head format and the int16
///   activations);
/// - `w4g128` (the Q4_1 weights dequantized and re-rounded to symmetric 4-bit in groups of 128)
///   below twice `f32`'s: re-rounding already-4-bit weights onto a coarser symmetric grid costs
///   a 135M model real quality (measured: f32 6.3062, w4g32 6.3065, w4g128 11.1340, +77%); the
///   bound catches a broken kernel or packing (which gives hundreds or thousands), not the
///   format's known cost.
#[test]
fn default_model_perplexity_on_the_evaluation_text() {
    let text = std::fs::read_to_string(repo().join("tests/data/constitution.txt"))
        .expect("tests/data/constitution.txt");
    let options = PerplexityOptions {
        max_tokens: Some(REAL_TOKENS),
        ..PerplexityOptions::default()
    };
    let mut results = Vec::new();
    for format in [
        WeightsFormat::F32,
        WeightsFormat::W4g32,
        WeightsFormat::W4g128,
    ] {
        let (model, tok) = real(format);
        let r = perplexity_of_text(&model, &tok, &text, options, None, &mut |_, _| {}).unwrap();
        eprintln!(
            "{format}: perplexity {:.4} over {} tokens",
            r.perplexity, r.tokens
        );
        assert_eq!(r.tokens, REAL_TOKENS);
        assert!(
            r.perplexity.is_finite() && (2.0..100.0).contains(&r.perplexity),
            "{format}: perplexity {} outside 2..100",
            r.perplexity
        );
        results.push((format, r.perplexity));
    }
    let f32_ppl = results[0].1;
    for (format, bound) in [(WeightsFormat::W4g32, 0.10), (WeightsFormat::W4g128, 1.0)] {
        let ppl = results.iter().find(|(f, _)| *f == format).unwrap().1;
        let rel = (ppl - f32_ppl).abs() / f32_ppl;
        assert!(
            rel < bound,
            "{format}: perplexity {ppl} is {:.1}% from f32's {f32_ppl} (bound {:.0}%)",
            rel * 100.0,
            bound * 100.0
        );
    }
}
