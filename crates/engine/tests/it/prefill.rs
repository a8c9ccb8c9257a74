//! The prefill in chunks ([`Engine::prefill_chunk`], [`PREFILL_CHUNK`] tokens each): the same
//! results as one call, progress that counts the prompt's tokens, and a generation stopped
//! mid-prefill that keeps what was fed for the next kept turn.
#![cfg(not(target_arch = "wasm32"))]

use crate::common::synthetic::synthetic_engine;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{
    Engine, GenerateOptions, LoadOptions, Logits, Model, PrefillProgress, SamplerConfig,
    WeightsFormat, PREFILL_CHUNK,
};
use edgefit_estimate::KvFormat;

const SEED: u64 = 11;
/// Text of more than one chunk of the synthetic tokenizer's tokens (79, checked below), within
/// the synthetic model's 128-token context with room to generate.
const LONG: &str = "the theme of the thesis is the theme of the cat and the dog on the mat, \
    then the thesis of the theme is the cat sat on the theme";

fn engine(options: LoadOptions) -> Engine {
    synthetic_engine(SEED, SyntheticDType::Q8_0, options)
}

fn greedy(max_tokens: usize, keep: bool) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        keep,
        sampler: SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        },
        ..GenerateOptions::default()
    }
}

/// Feeds `tokens` to a fresh cache in pieces ending at `cuts` (and the end); returns the last
/// token's logits and the cache's length.
fn fed_in_pieces(model: &Model, tokens: &[u32], cuts: &[usize]) -> (Vec<f32>, usize) {
    let mut cache = model.new_cache(128);
    let mut last = Vec::new();
    let mut from = 0;
    for &end in cuts.iter().chain([&tokens.len()]) {
        last = model
            .forward(&tokens[from..end], &mut cache, Logits::Last)
            .expect("forward");
        from = end;
    }
    (last, cache.len())
}

/// Every KV format and weight format: an earlier turn of 5 tokens, then the prompt in one call
/// or in the engine's chunks (ending where the cache holds a multiple of [`PREFILL_CHUNK`]
/// tokens): bit-for-bit the same logits, because each chunk's keys and values reach the cache
/// before its attention reads them and no chunk boundary splits a kivi4 block. Uneven pieces
/// (1, 8, 66, the rest) give the same too, except for kivi4, whose blocks of 32 tokens are
/// quantized once full: a boundary inside a block changes which tokens a query reads quantized.
#[test]
fn a_prefill_in_chunks_gives_the_same_logits_as_one_call() {
    for weights in [
        WeightsFormat::F32,
        WeightsFormat::Q8_0,
        WeightsFormat::W4g32,
    ] {
        let bytes = gguf_bytes(SEED, SyntheticDType::F32).expect("synthetic model");
        let options = LoadOptions {
            weights,
            embedding: None,
            requantize: false,
        };
        let (mut model, tok) = edgefit_engine::gguf::load_gguf(
            &mut std::io::Cursor::new(bytes),
            options,
            &mut |_, _| {},
        )
        .expect("loads");
        let tokens = tok.encode(LONG).expect("encodes");
        assert!(
            tokens.len() > PREFILL_CHUNK + 8,
            "the text is more than one chunk: {} tokens",
            tokens.len()
        );
        for &format in KvFormat::ALL {
            model.kv_format = format;
            let (whole, held) = fed_in_pieces(&model, &tokens, &[5]);
            let mut cases = vec![vec![5, PREFILL_CHUNK]];
            if format != KvFormat::Kivi4 {
                cases.push(vec![1, 8, PREFILL_CHUNK + 2, tokens.len() - 1]);
            }
            for cuts in cases {
                let (last, len) = fed_in_pieces(&model, &tokens, &cuts);
                assert_eq!(len, held);
                let diff = last
                    .iter()
                    .zip(&whole)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(
                    last == whole,
                    "{weights} weights, {format} cache, pieces ending at {cuts:?}: the logits \
                     differ from one call's by up to {diff}"
                );
            }
        }
    }
}

/// A turn that continues a conversation starts mid-chunk: its first chunk ends where the cache
/// reaches a multiple of [`PREFILL_CHUNK`], and so does every later one.
#[test]
fn chunks_end_at_multiples_of_the_chunk_in_the_cache() {
    let mut e = engine(LoadOptions::default());
    e.generate("the cat", greedy(3, false), &mut |_| {})
        .expect("first turn");
    let held = e.metrics().kv_tokens;
    assert!(
        !held.is_multiple_of(PREFILL_CHUNK),
        "the first turn leaves {held} tokens"
    );
    e.start(&format!(" {LONG}"), greedy(2, true))
        .expect("start");
    let mut ends = Vec::new();
    loop {
        let p = e.prefill_chunk().expect("chunk");
        ends.push(e.metrics().kv_tokens);
        if p.finished() {
            break;
        }
    }
    let last = ends.pop().expect("at least one chunk");
    assert!(
        !ends.is_empty(),
        "more than one chunk: {last} tokens in all"
    );
    for end in &ends {
        assert_eq!(end % PREFILL_CHUNK, 0, "chunk ends {ends:?}, then {last}");
    }
    assert_eq!(
        ends[0], PREFILL_CHUNK,
        "the first chunk fills up to {PREFILL_CHUNK}"
    );
}

#[test]
fn prefill_chunks_report_progress_and_the_generation_equals_one_step() {
    let mut a = engine(LoadOptions::default());
    let mut b = engine(LoadOptions::default());
    a.start(LONG, greedy(8, false)).expect("start");
    b.start(LONG, greedy(8, false)).expect("start");
    let total = a.metrics().prompt_tokens;
    let mut seen = Vec::new();
    loop {
        let p = a.prefill_chunk().expect("chunk");
        assert_eq!(p.total, total);
        assert_eq!(
            a.metrics().kv_tokens,
            p.done,
            "the cache grows chunk by chunk"
        );
        seen.push(p.done);
        if p.finished() {
            break;
        }
    }
    let want: Vec<usize> = (1..=total.div_ceil(PREFILL_CHUNK))
        .map(|i| (i * PREFILL_CHUNK).min(total))
        .collect();
    assert_eq!(seen, want, "one chunk of {PREFILL_CHUNK} tokens per call");
    assert!(
        a.metrics().prefill_tok_s > 0.0,
        "the prefill rate covers all chunks"
    );
    // Once fed, asking again changes nothing.
    assert_eq!(
        a.prefill_chunk().expect("chunk"),
        PrefillProgress { done: total, total }
    );
    // `b` never calls prefill_chunk: its first step runs the whole prefill. Same text.
    let run = |e: &mut Engine| {
        let mut text = String::new();
        while let Some(piece) = e.step().expect("step") {
            text.push_str(&piece);
        }
        text
    };
    assert_eq!(run(&mut a), run(&mut b));
    assert_eq!(a.metrics().generated_tokens, b.metrics().generated_tokens);
    assert_eq!(a.metrics().kv_tokens, b.metrics().kv_tokens);
}

/// Stopped after one chunk: the cache holds that chunk, the next kept turn reuses it and feeds
/// only the rest (the turn's prompt continues the stopped one, whose answer is empty).
#[test]
fn a_generation_stopped_mid_prefill_keeps_what_was_fed() {
    let mut e = engine(LoadOptions::default());
    e.start(LONG, greedy(4, false)).expect("start");
    let total = e.metrics().prompt_tokens;
    let p = e.prefill_chunk().expect("chunk");
    assert_eq!(p.done, PREFILL_CHUNK);
    assert_eq!(e.metrics().generated_tokens, 0);
    // The user pressed Stop here; the next turn continues the conversation.
    e.start(" and", greedy(4, true))
        .expect("the next turn starts");
    let m = e.metrics();
    assert_eq!(
        m.reused_tokens, PREFILL_CHUNK,
        "the chunk fed before Stop is reused"
    );
    assert!(
        m.prompt_tokens > total - PREFILL_CHUNK,
        "the rest of the stopped prompt and the new text are fed: {} tokens",
        m.prompt_tokens
    );
    while e.step().expect("step").is_some() {}
    assert!(e.metrics().generated_tokens >= 1);
}

#[test]
fn prefill_chunk_without_a_generation_is_an_error() {
    let mut e = engine(LoadOptions::default());
    let err = e.prefill_chunk().expect_err("nothing started");
    assert!(err.to_string().contains("start"), "{err}");
}

/// A pass that asks for no logits ([`Logits::None`], a prefill chunk before the prompt's last)
/// returns none and leaves the cache as a pass that asks for them: the next pass's logits are
/// the same bits.
#[test]
fn a_pass_without_logits_leaves_the_same_cache() {
    let e = engine(LoadOptions::default());
    let model = e.model();
    let tokens: Vec<u32> = (0..20).map(|i| (i * 5 + 1) % 40).collect();
    let mut with = model.new_cache(64);
    let mut without = model.new_cache(64);
    assert!(!model
        .forward(&tokens, &mut with, Logits::Last)
        .unwrap()
        .is_empty());
    assert!(model
        .forward(&tokens, &mut without, Logits::None)
        .unwrap()
        .is_empty());
    assert_eq!(without.len(), with.len());
    let a = model.forward(&[7, 3], &mut with, Logits::All).unwrap();
    let b = model.forward(&[7, 3], &mut without, Logits::All).unwrap();
    assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()) && a.len() == b.len());
}
