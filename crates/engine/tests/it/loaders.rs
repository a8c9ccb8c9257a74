//! Loading the synthetic tiny model from every supported source and rejecting broken files with
//! errors (never panics).
// Native only: these tests read files and use the native clock.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::hf::load_hf;
use edgefit_engine::synthetic::{gguf_bytes, hf_files, SyntheticDType};
use edgefit_engine::{
    Engine, EngineError, GenerateOptions, LoadOptions, Logits, Model, TextTokenizer, WeightsFormat,
};

const SEED: u64 = 11;

const F32: LoadOptions = LoadOptions {
    weights: WeightsFormat::F32,
    embedding: None,
    requantize: false,
};

fn from_gguf(dtype: SyntheticDType) -> (Model, TextTokenizer) {
    from_gguf_as(dtype, F32)
}

fn from_gguf_as(dtype: SyntheticDType, options: LoadOptions) -> (Model, TextTokenizer) {
    let bytes = gguf_bytes(SEED, dtype).unwrap();
    edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
        .unwrap()
}

fn logits(model: &Model, tokens: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(64);
    model.forward(tokens, &mut cache, Logits::All).unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn hf_safetensors_and_gguf_give_the_same_logits() {
    let (gguf_model, gguf_tok) = from_gguf(SyntheticDType::F32);
    let (config, tokenizer, tokenizer_config, st) = hf_files(SEED).unwrap();
    let (hf_model, hf_tok) = load_hf(
        &config,
        tokenizer.as_bytes(),
        Some(&tokenizer_config),
        &[&st],
        F32,
    )
    .unwrap();
    let text = "the theme: 42 ü";
    let tokens = gguf_tok.encode(text).unwrap();
    assert_eq!(tokens, hf_tok.encode(text).unwrap());
    let d = max_diff(&logits(&gguf_model, &tokens), &logits(&hf_model, &tokens));
    // Same f32 weights, same order of operations once q/k rows are permuted back: exact.
    assert_eq!(
        d, 0.0,
        "HF loader (with the rotate-half permutation) disagrees with GGUF"
    );
    assert_eq!(
        hf_tok.apply_chat_template("hi").unwrap(),
        gguf_tok.apply_chat_template("hi").unwrap()
    );
}

#[test]
fn quantized_gguf_types_dequantize_close_to_f32() {
    let (reference, tok) = from_gguf(SyntheticDType::F32);
    let tokens = tok.encode("the the the").unwrap();
    let base = logits(&reference, &tokens);
    let scale = base.iter().map(|v| v.abs()).fold(0.0, f32::max);
    // Error budgets relative to the largest logit: f16 ~1e-3, 8-bit ~1e-2, 4-bit ~2e-1.
    for (dtype, budget) in [
        (SyntheticDType::F16, 0.005),
        (SyntheticDType::Q8_0, 0.03),
        (SyntheticDType::Q4_0, 0.3),
        (SyntheticDType::Q4_1, 0.3),
    ] {
        let (m, _) = from_gguf(dtype);
        let d = max_diff(&base, &logits(&m, &tokens)) / scale;
        assert!(
            d < budget,
            "{dtype:?}: relative logit error {d} over budget {budget}"
        );
        assert!(d > 0.0, "{dtype:?}: quantization must change something");
    }
}

#[test]
fn tokenizer_applies_merges_and_special_tokens() {
    let (_, tok) = from_gguf(SyntheticDType::F32);
    let vocab = edgefit_engine::synthetic::vocab();
    let id = |s: &str| vocab.iter().position(|t| t == s).unwrap() as u32;
    // " the" merges to one token via "Ġ t" then "Ġt he".
    assert_eq!(tok.encode(" the").unwrap(), vec![id("Ġthe")]);
    assert_eq!(tok.encode("<|im_start|>").unwrap(), vec![1]);
    let text = "x <|im_end|> 東京😀";
    assert_eq!(tok.decode(&tok.encode(text).unwrap()).unwrap(), text);
}

#[test]
fn kv_cache_decode_matches_full_recompute() {
    let (model, tok) = from_gguf(SyntheticDType::F32);
    let tokens = tok.encode("the theme of the thesis").unwrap();
    let full = logits(&model, &tokens);
    let vocab = model.config.vocab;
    let mut cache = model.new_cache(64);
    let (head, tail) = tokens.split_at(3);
    model.forward(head, &mut cache, Logits::Last).unwrap();
    for (i, t) in tail.iter().enumerate() {
        let step = model.forward(&[*t], &mut cache, Logits::Last).unwrap();
        let pos = head.len() + i;
        let d = max_diff(&step, &full[pos * vocab..(pos + 1) * vocab]);
        assert!(
            d < 1e-4,
            "position {pos}: incremental decode differs by {d}"
        );
    }
}

#[test]
fn broken_files_are_errors() {
    let good = gguf_bytes(SEED, SyntheticDType::Q8_0).unwrap();
    let load = |b: &[u8]| {
        edgefit_engine::gguf::load_gguf(
            &mut std::io::Cursor::new(b.to_vec()),
            LoadOptions::default(),
            &mut |_, _| {},
        )
    };
    assert!(matches!(load(b""), Err(EngineError::Format(_))));
    assert!(matches!(
        load(b"GGUF\x03\0\0\0garbage"),
        Err(EngineError::Format(_))
    ));
    for cut in [8, 100, good.len() / 3, good.len() - 10] {
        assert!(
            load(&good[..cut]).is_err(),
            "truncated at {cut} of {}",
            good.len()
        );
    }
    // Flip the architecture name to one we do not support.
    let pos = good.windows(5).position(|w| w == b"llama").unwrap();
    let mut bad = good.clone();
    bad[pos..pos + 5].copy_from_slice(b"gemma");
    let err = load(&bad).expect_err("unsupported architecture");
    assert!(err.to_string().contains("gemma"), "{err}");
    // A config.json that is not a llama.
    assert!(load_hf(r#"{"model_type":"bert","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":8,"vocab_size":8}"#, b"{}", None, &[], F32).is_err());
}

/// An engine on the synthetic Q8_0 model, loaded with the default options.
fn synthetic_engine() -> Engine {
    crate::common::synthetic::synthetic_engine(SEED, SyntheticDType::Q8_0, LoadOptions::default())
}

#[test]
fn engine_generates_and_rejects_bad_settings() {
    let mut engine = synthetic_engine();
    let opts = GenerateOptions {
        max_tokens: 5,
        ..GenerateOptions::default()
    };
    engine.generate("the", opts, &mut |_| {}).unwrap();
    let m = engine.metrics();
    assert!(m.generated_tokens <= 5);
    assert_eq!(m.prompt_tokens, 2, "`the` is `t` + the merged `he`");
    assert!(matches!(
        engine.start(
            "the",
            GenerateOptions {
                max_tokens: 1000,
                ..opts
            }
        ),
        Err(EngineError::ContextFull { .. })
    ));
    // The refused start ended the previous generation.
    assert!(matches!(engine.step(), Ok(None)));
    assert!(engine.start("", opts).is_err(), "empty prompt");
}

/// Kept turns fill the synthetic model's 128-token context; the turn that would overflow fails
/// with "context full", changes nothing, and a new conversation works again.
#[test]
fn kept_turns_reach_the_context_limit_with_a_clear_error() {
    let mut engine = synthetic_engine();
    let first = GenerateOptions {
        max_tokens: 20,
        ..GenerateOptions::default()
    };
    let keep = GenerateOptions {
        keep: true,
        ..first
    };
    assert!(matches!(engine.step(), Err(EngineError::NotStarted)));
    engine.generate("the cat", first, &mut |_| {}).unwrap();
    let mut held = engine.metrics().kv_tokens;
    assert_eq!(engine.metrics().kv_limit, 128);
    let err = loop {
        match engine.generate(" and the dog", keep, &mut |_| {}) {
            Ok(_) => {
                let m = engine.metrics();
                assert!(m.kv_tokens > held, "the conversation grows");
                assert!(m.reused_tokens > 0 && m.reused_tokens <= held);
                held = m.kv_tokens;
            }
            Err(e) => break e,
        }
    };
    let msg = err.to_string();
    assert!(
        matches!(err, EngineError::ContextFull { limit: 128, .. }),
        "{msg}"
    );
    assert!(
        msg.starts_with("context full") && msg.contains("new conversation"),
        "{msg}"
    );
    assert_eq!(
        engine.metrics().kv_tokens,
        held,
        "a refused turn changes nothing"
    );
    engine.generate("the cat", first, &mut |_| {}).unwrap();
    assert_eq!(engine.metrics().reused_tokens, 0);
    assert!(engine.metrics().kv_tokens < held);
}

#[test]
fn estimator_counts_the_same_parameters_as_the_loaded_model() {
    let (model, _) = from_gguf(SyntheticDType::F32);
    let spec = model.config.to_spec();
    assert_eq!(spec.params().total, model.config.params());
    let held = model.weights.bytes() / 4;
    assert_eq!(
        held,
        model.config.params(),
        "every parameter is held once as f32"
    );
    // KV accounting: the cache's bytes are the estimator's, and both equal the f32 storage.
    let tokens: Vec<u32> = (0..9).collect();
    let mut cache = model.new_cache(64);
    model.forward(&tokens, &mut cache, Logits::Last).unwrap();
    let c = &model.config;
    let stored = 9 * c.n_layers * 2 * c.kv_dim() * 4;
    assert_eq!(cache.bytes(), stored as u64);
    assert_eq!(
        cache.bytes(),
        edgefit_estimate::kv_bytes(&spec, edgefit_estimate::KvFormat::F32, 9)
    );
}

/// Weight bytes the engine holds equal the estimator's `weight_bytes` for the same format, for
/// every format (one shared byte formula: `edgefit_estimate::WeightFormat::matrix_bytes`).
#[test]
fn held_weight_bytes_equal_the_estimators_for_every_format() {
    use edgefit_estimate::WeightFormat as E;
    for (weights, linear, embedding) in [
        (WeightsFormat::F32, E::F32, E::F32),
        (WeightsFormat::F16, E::F16, E::F16),
        (WeightsFormat::Q8_0, E::Q8_0, E::Q8_0),
        (WeightsFormat::W4g32, E::W4g32, E::Q8_0),
        (WeightsFormat::W4g64, E::W4g64, E::Q8_0),
        (WeightsFormat::W4g128, E::W4g128, E::Q8_0),
    ] {
        let options = LoadOptions {
            weights,
            embedding: None,
            requantize: false,
        };
        let (model, _) = from_gguf_as(SyntheticDType::F32, options);
        let spec = model.config.to_spec();
        let want = edgefit_estimate::weight_bytes(&spec, linear, embedding).total();
        assert_eq!(model.weights.bytes(), want, "{weights}");
        let summary = model.weights.summary();
        assert_eq!(summary.weights, weights.as_str());
    }
    // GGUF Q4_1 layers kept as they are hold exactly the estimator's `q4_1` bytes: with the
    // default `auto` the Q4_1 embedding too, with `w4g32` a q8_0 embedding.
    let (model, _) = from_gguf_as(SyntheticDType::Q4_1, LoadOptions::default());
    let spec = model.config.to_spec();
    let want = edgefit_estimate::weight_bytes(&spec, E::Q4_1, E::Q4_1).total();
    assert_eq!(model.weights.bytes(), want);
    let w4g32 = LoadOptions {
        weights: WeightsFormat::W4g32,
        embedding: None,
        requantize: false,
    };
    let (model, _) = from_gguf_as(SyntheticDType::Q4_1, w4g32);
    let want = edgefit_estimate::weight_bytes(&spec, E::Q4_1, E::Q8_0).total();
    assert_eq!(model.weights.bytes(), want);
}

/// Default loading keeps GGUF Q4_0 / Q4_1 / Q8_0 blocks bit for bit: the engine's matrices
/// dequantize to exactly what candle-core's own GGUF dequantization gives (an independent
/// reader), and requantizing to other groups does change them.
#[test]
fn default_load_keeps_gguf_blocks_exactly() {
    use candle_core::quantized::gguf_file::Content;
    for dtype in [
        SyntheticDType::Q4_0,
        SyntheticDType::Q4_1,
        SyntheticDType::Q8_0,
    ] {
        let bytes = gguf_bytes(SEED, dtype).unwrap();
        let mut cur = std::io::Cursor::new(bytes.clone());
        let content = Content::read(&mut cur).unwrap();
        let mut candle = |name: &str| -> Vec<f32> {
            content
                .tensor_infos
                .get(name)
                .unwrap()
                .read(
                    &mut cur,
                    content.tensor_data_offset,
                    &candle_core::Device::Cpu,
                )
                .unwrap()
                .dequantize(&candle_core::Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        let options = LoadOptions {
            weights: WeightsFormat::W4g32,
            embedding: Some(WeightsFormat::Q8_0),
            requantize: false,
        };
        let (model, _) = from_gguf_as(dtype, options);
        let layer = &model.weights.layers[0];
        let expect_format = match dtype {
            SyntheticDType::Q4_0 => "w4g32",
            SyntheticDType::Q4_1 => "q4_1",
            _ => "w4g32", // Q8_0 layers are requantized to 4 bits
        };
        assert_eq!(layer.w_up.format_name(), expect_format, "{dtype:?}");
        if dtype != SyntheticDType::Q8_0 {
            assert_eq!(
                layer.w_up.to_f32(),
                candle("blk.0.ffn_up.weight"),
                "{dtype:?}: 4-bit blocks re-rounded"
            );
        } else {
            assert_eq!(model.weights.embed.format_name(), "q8_0");
            assert_eq!(model.weights.embed.to_f32(), candle("token_embd.weight"));
            assert_ne!(layer.w_up.to_f32(), candle("blk.0.ffn_up.weight"));
        }
        let (g128, _) = from_gguf_as(
            dtype,
            LoadOptions {
                weights: WeightsFormat::W4g128,
                embedding: None,
                requantize: false,
            },
        );
        assert_eq!(g128.weights.layers[0].w_up.format_name(), "w4g128");
    }
}

/// Every weight format runs the forward pass within its error budget of f32 (relative to the
/// largest logit), on every kernel this build has; the kernels agree with the scalar reference.
#[test]
fn every_format_and_kernel_runs_close_to_f32() {
    let (reference, tok) = from_gguf(SyntheticDType::F32);
    let tokens = tok.encode("the theme of the thesis").unwrap();
    let base = logits(&reference, &tokens);
    let scale = base.iter().map(|v| v.abs()).fold(0.0, f32::max);
    for (weights, budget) in [
        (WeightsFormat::F16, 0.005),
        (WeightsFormat::Q8_0, 0.03),
        (WeightsFormat::W4g32, 0.3),
        (WeightsFormat::W4g128, 0.3),
    ] {
        let options = LoadOptions {
            weights,
            embedding: None,
            requantize: false,
        };
        let (mut m, _) = from_gguf_as(SyntheticDType::F32, options);
        m.kernel = edgefit_kernels::Kernel::Scalar;
        let scalar = logits(&m, &tokens);
        let d = max_diff(&base, &scalar) / scale;
        assert!(d < budget && d > 0.0, "{weights}: relative error {d}");
        for kernel in edgefit_kernels::Kernel::available() {
            m.kernel = kernel;
            let d = max_diff(&scalar, &logits(&m, &tokens)) / scale;
            assert!(d < 1e-4, "{weights} on {}: {d} from scalar", kernel.name());
        }
    }
}

/// The bytes every KV format holds equal the estimator's `kv_bytes` for the same shape, format
/// and token count, counted from the stores' contents (not only `len × per-token`), at several
/// lengths; and each format's logits stay within its rounding budget of the f32 cache's.
#[test]
fn every_kv_format_holds_exactly_the_estimated_bytes_and_runs_close_to_f32() {
    use edgefit_estimate::KvFormat;
    let (mut model, tok) = from_gguf(SyntheticDType::F32);
    let spec = model.config.to_spec();
    assert!(
        model.config.n_kv_heads < model.config.n_heads,
        "the synthetic model is GQA"
    );
    let tokens = tok.encode("the theme of the thesis is the theme").unwrap();
    let base = logits(&model, &tokens);
    let scale = base.iter().map(|v| v.abs()).fold(0.0, f32::max);
    for (format, budget) in [
        (KvFormat::F32, 0.0),
        (KvFormat::F16, 0.005),
        (KvFormat::K8v16, 0.03),
        (KvFormat::Int8, 0.03),
        (KvFormat::Int4g32, 0.3),
    ] {
        model.kv_format = format;
        let mut cache = model.new_cache(64);
        assert_eq!(cache.format(), format);
        let mut held = 0;
        for piece in [&tokens[..1], &tokens[1..4], &tokens[4..]] {
            model.forward(piece, &mut cache, Logits::Last).unwrap();
            held += piece.len();
            let want = edgefit_estimate::kv_bytes(&spec, format, held as u64);
            assert_eq!(cache.len(), held);
            assert_eq!(cache.bytes(), want, "{format} at {held} tokens");
            assert_eq!(
                cache.stored_bytes(),
                want,
                "{format} stores at {held} tokens"
            );
            assert!(cache.reserved_bytes() >= want);
        }
        let d = max_diff(&base, &logits(&model, &tokens)) / scale;
        assert!(
            d <= budget,
            "{format}: relative logit error {d} over {budget}"
        );
        if format != KvFormat::F32 {
            assert!(d > 0.0, "{format}: rounding the cache changes something");
        }
    }
}

/// `tokenizer.ggml.eot_token_id` and `eom_token_id` stop generation besides the EOS (Llama
/// 3.x GGUF files: EOS `<|end_of_text|>`, EOT `<|eot_id|>`, EOM `<|eom_id|>`): a chat turn
/// ends where the model writes either. The ids chosen here are plain byte tokens, so nothing
/// but the metadata key can make them stop tokens.
#[test]
fn gguf_eot_and_eom_ids_are_stop_tokens() {
    use edgefit_engine::native::NativePlatform;
    use edgefit_engine::FinishReason;
    let with = |keys: &[(&str, u32)]| {
        let keys: Vec<(String, u32)> = keys.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        edgefit_engine::synthetic::gguf_bytes_with(SEED, SyntheticDType::F32, move |md| {
            for (k, v) in keys {
                md.push((k, candle_core::quantized::gguf_file::Value::U32(v)));
            }
        })
        .unwrap()
    };
    let tok = |bytes: Vec<u8>| {
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .unwrap()
            .1
    };
    let plain = tok(with(&[]));
    assert!(!plain.is_stop(10) && !plain.is_stop(11));
    let both = tok(with(&[
        ("tokenizer.ggml.eot_token_id", 10),
        ("tokenizer.ggml.eom_token_id", 11),
    ]));
    assert!(both.is_stop(2), "EOS still stops");
    assert!(both.is_stop(10), "EOT stops");
    assert!(both.is_stop(11), "EOM stops");
    // An EOM id outside the vocabulary is refused by its key.
    let bad = with(&[("tokenizer.ggml.eom_token_id", 100_000)]);
    let err = edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bad), F32, &mut |_, _| {})
        .expect_err("EOM beyond the vocabulary");
    assert!(err.to_string().contains("eom_token_id"), "{err}");
    // A chat run: the model's first greedy token, declared the EOT, ends the turn at once.
    let engine = |bytes: Vec<u8>| {
        Engine::load_gguf(
            &mut std::io::Cursor::new(bytes),
            Box::new(NativePlatform::default()),
            F32,
            &mut |_, _| {},
        )
        .unwrap()
    };
    let opts = GenerateOptions {
        chat: true,
        max_tokens: 8,
        ..GenerateOptions::default()
    };
    let (model, plain_tok) = from_gguf(SyntheticDType::F32);
    let prompt = plain_tok
        .encode(&plain_tok.apply_chat_template("the cat").unwrap())
        .unwrap();
    let last = logits(&model, &prompt);
    let last = &last[last.len() - model.config.vocab..];
    let first = (0..last.len()).fold(0, |b, i| if last[i] > last[b] { i } else { b }) as u32;
    assert!(
        !plain.is_stop(first),
        "the greedy token {first} is no stop token by itself"
    );
    let mut run = engine(with(&[]));
    run.generate("the cat", opts, &mut |_| {}).unwrap();
    assert!(run.metrics().generated_tokens > 0);
    let mut run = engine(with(&[("tokenizer.ggml.eot_token_id", first)]));
    let text = run.generate("the cat", opts, &mut |_| {}).unwrap();
    assert_eq!(run.metrics().generated_tokens, 0, "{text:?}");
    assert_eq!(run.metrics().finish_reason, Some(FinishReason::Stop));
}
