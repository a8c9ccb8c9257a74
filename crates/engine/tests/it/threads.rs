//! The forward pass on any number of threads gives the logits of one thread, bit for bit: a
//! prefill of several tokens (the GEMM paths, the per-(token, head) attention split, the
//! output head over every position) then decode steps, on every kernel this build runs, for
//! - the synthetic LLaMA model in every weight format and several KV formats;
//! - the tiny Gemma 3 fixtures (`tests/golden/arch/gemma3*`), whose sliding-window layers take
//!   a prompt one token at a time with that token's heads split across the pool, with a prompt
//!   longer than the window (the ring wraps during prefill and again while decoding);
//! - pruned models (fewer heads, RoPE pairs, V dims, MLP channels and layers), whose pruned
//!   head dims take the per-pair RoPE table and whose widths are no multiple of the split.
//!
//! And a hostile thread count is one clear error naming the accepted range.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::native::NativePlatform;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{Engine, LayerRatios, LoadOptions, Logits, Model, PrunePlan, WeightsFormat};
use edgefit_estimate::KvFormat;
use edgefit_kernels::{Kernel, Pool};

use crate::common::fixtures::read as fixture;

fn options(weights: WeightsFormat) -> LoadOptions {
    LoadOptions {
        weights,
        embedding: None,
        requantize: false,
    }
}

fn synthetic(dtype: SyntheticDType, weights: WeightsFormat) -> Model {
    let bytes = gguf_bytes(5, dtype).expect("synthetic model");
    let engine = Engine::load_gguf(
        &mut std::io::Cursor::new(bytes),
        Box::new(NativePlatform::default()),
        options(weights),
        &mut |_, _| {},
    )
    .expect("the synthetic model loads");
    engine.model().clone()
}

/// The tiny Gemma 3 in HF layout: 3 layers (sliding, full, sliding), window 8, 4 heads over
/// 2 KV heads, hidden 32, vocabulary 384.
fn gemma3_hf(weights: WeightsFormat) -> Model {
    let text = |f: &str| String::from_utf8(fixture("gemma3", f)).expect("utf-8");
    edgefit_engine::hf::load_hf(
        &text("config.json"),
        &fixture("gemma3", "tokenizer.json"),
        Some(&text("tokenizer_config.json")),
        &[&fixture("gemma3", "model.safetensors")],
        options(weights),
    )
    .expect("the gemma3 fixture loads")
    .0
}

/// The tiny Gemma 3 GGUF with Q8_0 blocks: 6 layers (5 sliding, window 8, then 1 full).
fn gemma3_gguf_q8() -> Model {
    edgefit_engine::gguf::load_gguf_model(
        &mut std::io::Cursor::new(fixture("gemma3_gguf", "model-q8_0.gguf")),
        options(WeightsFormat::Auto),
        &mut |_, _| {},
    )
    .expect("the gemma3 Q8_0 fixture loads")
}

/// Logits of a 13-token prefill and 4 decode steps, all concatenated.
/// Rows of logits [`run`] returns.
const RUN_ROWS: usize = 13 + 4 + 6 + 1 + 3;

/// A 13-token prompt and 4 decode steps, then in a new cache a 6-token prompt and a token that
/// stay within the fixtures' window of 8 (the sliding layers' tokens go in at once) and 3 more
/// that make the ring wrap (one at a time).
fn run(model: &Model) -> Vec<f32> {
    let mut cache = model.new_cache(64);
    let prompt: Vec<u32> = (0..13).map(|i| (i * 7 + 3) % 40).collect();
    let mut all = model
        .forward(&prompt, &mut cache, Logits::All)
        .expect("prefill");
    for t in [5u32, 17, 2, 33] {
        all.extend(
            model
                .forward(&[t], &mut cache, Logits::Last)
                .expect("decode"),
        );
    }
    let mut cache = model.new_cache(64);
    for (tokens, which) in [
        (&prompt[..6], Logits::All),
        (&[9][..], Logits::Last),
        (&[1, 4, 11][..], Logits::All),
    ] {
        all.extend(model.forward(tokens, &mut cache, which).expect("forward"));
    }
    all
}

/// `run` on one thread, then on pools of 2, 3 and 7: the same bits, for every kernel and KV
/// format given.
fn assert_same_bits_on_any_pool(label: &str, model: &Model, kvs: &[KvFormat]) {
    let pools: Vec<Pool> = [2, 3, 7].map(|n| Pool::new(n).expect("pool")).into();
    let mut m = model.clone();
    for &kv in kvs {
        m.kv_format = kv;
        for kernel in Kernel::available() {
            m.kernel = kernel;
            m.pool = Pool::serial();
            let want = run(&m);
            assert_eq!(want.len(), RUN_ROWS * m.config.vocab, "{label}");
            assert!(want.iter().all(|v| v.is_finite()), "{label}: finite logits");
            for pool in &pools {
                m.pool = pool.clone();
                let got = run(&m);
                let first_diff = got
                    .iter()
                    .zip(&want)
                    .position(|(a, b)| a.to_bits() != b.to_bits());
                assert!(
                    got.len() == want.len() && first_diff.is_none(),
                    "{label} / KV {kv} on {} with {} threads: first difference at logit {first_diff:?}",
                    kernel.name(),
                    pool.threads()
                );
            }
        }
    }
}

#[test]
fn logits_are_the_same_bits_on_any_thread_count() {
    let cases = [
        (SyntheticDType::F32, WeightsFormat::F32, KvFormat::F32),
        (SyntheticDType::F16, WeightsFormat::F16, KvFormat::F16),
        (SyntheticDType::Q8_0, WeightsFormat::Q8_0, KvFormat::Int8),
        (
            SyntheticDType::Q4_1,
            WeightsFormat::W4g32,
            KvFormat::Int4g32,
        ),
        (SyntheticDType::F32, WeightsFormat::W4g32, KvFormat::Kivi4),
    ];
    for (dtype, weights, kv) in cases {
        assert_same_bits_on_any_pool(
            &format!("synthetic {dtype:?} as {weights:?}"),
            &synthetic(dtype, weights),
            &[kv],
        );
    }
}

#[test]
fn sliding_window_layers_are_the_same_bits_on_any_thread_count() {
    let m = gemma3_hf(WeightsFormat::F32);
    let windows: Vec<_> = (0..m.config.n_layers)
        .map(|l| m.config.layer_window(l))
        .collect();
    // The prompt (13 tokens) and the whole run (17) outgrow the window of 8.
    assert!(
        windows.iter().any(|w| w.is_some_and(|w| w < 13)) && windows.iter().any(|w| w.is_none()),
        "the fixture mixes sliding and full layers: {windows:?}"
    );
    assert_same_bits_on_any_pool("gemma3 f32", &m, &[KvFormat::F32, KvFormat::Int8]);
    assert_same_bits_on_any_pool(
        "gemma3 w4g32",
        &gemma3_hf(WeightsFormat::W4g32),
        &[KvFormat::K8v16],
    );
    assert_same_bits_on_any_pool("gemma3 GGUF q8_0", &gemma3_gguf_q8(), &[KvFormat::Int8]);
}

#[test]
fn pruned_models_are_the_same_bits_on_any_thread_count() {
    let plan = PrunePlan {
        ratios: LayerRatios {
            heads: 0.5,
            kv_heads: 0.0,
            qk_dims: 0.25,
            v_dims: 0.25,
            mlp: 0.3,
        },
        ..PrunePlan::default()
    };
    let base = synthetic(SyntheticDType::F32, WeightsFormat::F32);
    let (pruned, _) = edgefit_engine::prune::prune(&base, &plan, None).expect("prune synthetic");
    let shape = &pruned.config.layer_shapes()[0];
    assert!(
        shape.qk_dim < base.config.head_dim && shape.ffn < base.config.ffn,
        "the synthetic model is pruned: {shape:?}"
    );
    assert_same_bits_on_any_pool(
        "pruned synthetic",
        &pruned,
        &[KvFormat::F32, KvFormat::Int8],
    );

    // Gemma 3's per-head q/k RMSNorm keeps its Q/K dims (the pruner refuses them there).
    let plan = PrunePlan {
        ratios: LayerRatios {
            qk_dims: 0.0,
            ..plan.ratios
        },
        drop_layers: vec![2],
        ..plan
    };
    let base = gemma3_hf(WeightsFormat::F32);
    let (pruned, _) = edgefit_engine::prune::prune(&base, &plan, None).expect("prune gemma3");
    assert_eq!(pruned.config.n_layers, base.config.n_layers - 1);
    assert_same_bits_on_any_pool("pruned gemma3", &pruned, &[KvFormat::F32]);
}

#[test]
fn a_hostile_thread_count_is_a_clear_error() {
    let bytes = gguf_bytes(5, SyntheticDType::Q8_0).expect("synthetic model");
    let mut engine = Engine::load_gguf(
        &mut std::io::Cursor::new(bytes),
        Box::new(NativePlatform::default()),
        LoadOptions::default(),
        &mut |_, _| {},
    )
    .expect("loads");
    let max = edgefit_kernels::pool::MAX_THREADS;
    for bad in [0, max + 1, 100_000] {
        let e = engine.set_threads(bad).expect_err("refused").to_string();
        assert_eq!(
            e,
            format!("invalid setting `threads` = {bad}: a thread count from 1 to {max}"),
        );
        assert_eq!(
            engine.metrics().threads,
            1,
            "a refused count changes nothing"
        );
    }
    engine.set_threads(2).expect("2 threads");
    assert_eq!(engine.metrics().threads, 2);
    assert_eq!(engine.model().pool.threads(), 2);
}
