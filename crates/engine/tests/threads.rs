//! The forward pass on any number of threads gives the logits of one thread, bit for bit:
//! the synthetic model in every weight format, a prefill of several tokens (the GEMM paths and
//! the per-(token, head) attention split) then decode steps, in f32 and quantized KV caches.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::native::NativePlatform;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{Engine, LoadOptions, Logits, Model, WeightsFormat};
use edgefit_estimate::KvFormat;
use edgefit_kernels::{Kernel, Pool};

fn model(dtype: SyntheticDType, weights: WeightsFormat) -> Model {
    let bytes = gguf_bytes(5, dtype).expect("synthetic model");
    let options = LoadOptions {
        weights,
        embedding: None,
        requantize: false,
    };
    let engine = Engine::load_gguf(
        &mut std::io::Cursor::new(bytes),
        Box::new(NativePlatform::default()),
        options,
        &mut |_, _| {},
    )
    .expect("the synthetic model loads");
    engine.model().clone()
}

/// Logits of a 13-token prefill and 4 decode steps, all concatenated.
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
    all
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
    let pools: Vec<Pool> = [2, 3, 7].map(|n| Pool::new(n).expect("pool")).into();
    for (dtype, weights, kv) in cases {
        let mut m = model(dtype, weights);
        m.kv_format = kv;
        for kernel in Kernel::available() {
            m.kernel = kernel;
            m.pool = Pool::serial();
            let want = run(&m);
            assert!(
                want.iter().all(|v| v.is_finite()),
                "{weights:?}: finite logits"
            );
            for pool in &pools {
                m.pool = pool.clone();
                let got = run(&m);
                let same = got.len() == want.len()
                    && got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{weights:?} / {kv} on {} with {} threads",
                    kernel.name(),
                    pool.threads()
                );
            }
        }
    }
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
    let e = engine.set_threads(0).expect_err("0 threads").to_string();
    assert!(e.contains("threads") && e.contains('0'), "{e}");
    assert!(engine.set_threads(100_000).is_err());
    engine.set_threads(2).expect("2 threads");
    assert_eq!(engine.metrics().threads, 2);
}
