//! Phi-3 from GGUF as llama.cpp's converter writes it (`tests/golden/arch/phi3_gguf`, made by
//! `tests/golden/make_phi3_gguf.py`, with transformers reading the files for goldens): the f16
//! and Q4_0 files, the estimator's sizes, what the engine refuses, and LongRoPE from GGUF
//! against the same factors from config.json. The bound on logits is `arch_goldens`'s.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::hf::load_hf;
use edgefit_engine::{LoadOptions, Logits, Model, TextTokenizer, WeightsFormat};

use crate::common::fixtures::{gguf_with, read, text, F32};
use crate::common::greedy::greedy;

/// The `phi3_gguf` goldens (transformers reading the file itself, see
/// `tests/golden/make_phi3_gguf.py`): token ids from the file's SentencePiece vocabulary, the
/// top 10 logits at every position and the whole vocabulary at the last within the f32 bound
/// of this file's header, and the greedy tokens. Returns the worst logit error.
fn check_phi3(label: &str, model: &Model, tok: &TextTokenizer, golden: &serde_json::Value) -> f64 {
    let mut worst = 0.0f64;
    let mut bound = |got: f32, want: f64, what: String| {
        let e = (got as f64 - want).abs();
        worst = worst.max(e);
        assert!(
            e <= 1e-4 + 1e-5 * want.abs(),
            "{label}: {what}: {got} vs {want}"
        );
    };
    for case in golden["cases"].as_array().unwrap() {
        let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone()).unwrap();
        let prompt = case["prompt"].as_str().unwrap();
        assert_eq!(
            tok.encode(prompt).unwrap(),
            tokens,
            "{label}: ids of {prompt:?}"
        );
        let top: Vec<Vec<(u32, f64)>> = serde_json::from_value(case["top"].clone()).unwrap();
        let last: Vec<f64> = serde_json::from_value(case["last_logits"].clone()).unwrap();
        let mut cache = model.new_cache(256);
        let got = model.forward(&tokens, &mut cache, Logits::All).unwrap();
        let vocab = model.config.vocab;
        assert_eq!(top.len(), tokens.len());
        for (p, row) in top.iter().enumerate() {
            for &(id, want) in row {
                bound(
                    got[p * vocab + id as usize],
                    want,
                    format!("position {p} token {id}"),
                );
            }
        }
        let at = (tokens.len() - 1) * vocab;
        for (id, (g, w)) in got[at..].iter().zip(&last).enumerate() {
            bound(*g, *w, format!("last position, token {id}"));
        }
        let want_greedy: Vec<u32> = serde_json::from_value(case["greedy"].clone()).unwrap();
        let greedy = greedy(model, &mut cache, &got[at..], want_greedy.len());
        assert_eq!(greedy, want_greedy, "{label}: greedy tokens");
    }
    worst
}

fn phi3_gguf(file: &str, options: LoadOptions) -> (Model, TextTokenizer) {
    edgefit_engine::gguf::load_gguf(
        &mut std::io::Cursor::new(read("phi3_gguf", file)),
        options,
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("phi3_gguf/{file}: {e}"))
}

/// Phi-3 as llama.cpp's converter writes it (fused `attn_qkv` and `ffn_up` holding gate and
/// up, `phi3.rope.dimension_count` = 4 of 8 dims, `phi3.attention.sliding_window` = 0, a
/// SentencePiece `llama` vocabulary with the space prefix): the f16 file and the Q4_0 one
/// (fused rows split at row boundaries, block bytes untouched), both read as f32 — every block
/// dequantized exactly, so the f32 bound holds against transformers reading the same file —
/// and the Q4_0 file with its blocks kept, within the integer kernels' bound of
/// `q8_0_files_match_their_goldens` (activations rounded to int16 per block; measured below).
#[test]
fn phi3_gguf_matches_transformers_reading_the_file() {
    for (file, golden) in [
        ("model.gguf", "golden.json"),
        ("model-q4_0.gguf", "golden-q4_0.json"),
    ] {
        let golden: serde_json::Value = serde_json::from_slice(&read("phi3_gguf", golden)).unwrap();
        let (model, tok) = phi3_gguf(file, F32);
        assert_eq!(model.config.arch, "phi3");
        assert_eq!((model.config.head_dim, model.config.rope_dim), (8, Some(4)));
        assert_eq!(model.config.sliding_window, None);
        let e = check_phi3(&format!("phi3_gguf {file} as f32"), &model, &tok, &golden);
        eprintln!("phi3_gguf {file} (read as f32): max |logit − transformers| = {e:.2e}");
    }
    let golden: serde_json::Value =
        serde_json::from_slice(&read("phi3_gguf", "golden-q4_0.json")).unwrap();
    let (model, tok) = phi3_gguf("model-q4_0.gguf", LoadOptions::default());
    let l = &model.weights.layers[0];
    for m in [&l.wq, &l.wk, &l.wv, &l.w_gate, &l.w_up] {
        assert_eq!(m.format_name(), "w4g32", "Q4_0 blocks kept");
    }
    let mut worst = 0.0f64;
    for case in golden["cases"].as_array().unwrap() {
        let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone()).unwrap();
        let last: Vec<f64> = serde_json::from_value(case["last_logits"].clone()).unwrap();
        let mut cache = model.new_cache(256);
        let got = model.forward(&tokens, &mut cache, Logits::Last).unwrap();
        for (g, w) in got.iter().zip(&last) {
            worst = worst.max((*g as f64 - w).abs());
        }
        let want_greedy: Vec<u32> = serde_json::from_value(case["greedy"].clone()).unwrap();
        let greedy = greedy(&model, &mut cache, &got, want_greedy.len());
        assert_eq!(greedy, want_greedy, "phi3_gguf q4_0 kept: greedy tokens");
    }
    eprintln!(
        "phi3_gguf model-q4_0.gguf (blocks kept): max |last logits − transformers| = {worst:.2e}"
    );
    assert!(worst <= 5e-3, "{worst}");
    drop(tok);
}

/// The estimator sizes a Phi-3 GGUF from its header alone as the engine holds it: the fused
/// tensors' widths give the same shape (head size hidden / heads, not the rotated dims), and
/// the weight bytes equal the engine's for the Q4_0 blocks kept and for the f16 file read as
/// f16.
#[test]
fn the_estimator_sizes_phi3_gguf_as_the_engine_holds_it() {
    use edgefit_estimate::WeightFormat as E;
    for (file, options, linear, embedding) in [
        ("model-q4_0.gguf", LoadOptions::default(), E::Q4_0, E::Q4_0),
        (
            "model.gguf",
            LoadOptions {
                weights: WeightsFormat::F16,
                embedding: None,
                requantize: false,
            },
            E::F16,
            E::F16,
        ),
    ] {
        let meta = edgefit_engine::gguf::read_estimate_metadata(&mut std::io::Cursor::new(read(
            "phi3_gguf",
            file,
        )))
        .unwrap();
        let spec = meta.to_spec("").unwrap();
        let (model, _) = phi3_gguf(file, options);
        assert_eq!(spec.layers, model.config.to_spec().layers, "{file}");
        assert_eq!(spec.params().total, model.config.params(), "{file}");
        let want = edgefit_estimate::weight_bytes(&spec, linear, embedding).total();
        eprintln!(
            "phi3_gguf {file}: estimator {want} weight bytes, engine {}",
            model.weights.bytes()
        );
        assert_eq!(model.weights.bytes(), want, "{file}");
    }
}

fn phi3_gguf_with(
    extra_keys: &[(&str, candle_core::quantized::gguf_file::Value)],
    extra_tensors: &[(&str, Vec<f32>)],
) -> Vec<u8> {
    gguf_with("phi3_gguf", "model.gguf", extra_keys, &[], extra_tensors)
}

/// What the engine does not implement in a Phi-3 GGUF is refused naming it: an attention
/// factor without LongRoPE factors, and one LongRoPE factor tensor without the other; the
/// file itself, rewritten unchanged, still loads.
#[test]
fn phi3_gguf_refuses_what_it_lacks_naming_it() {
    use candle_core::quantized::gguf_file::Value;
    use edgefit_engine::EngineError;
    let load = |bytes: Vec<u8>| {
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .map(|_| ())
    };
    load(phi3_gguf_with(&[], &[])).expect("the rewritten file loads");
    let err = load(phi3_gguf_with(
        &[("phi3.rope.scaling.attn_factor", Value::F32(1.19))],
        &[],
    ))
    .unwrap_err();
    eprintln!("phi3_gguf refusal: {err}");
    assert!(matches!(err, EngineError::Unsupported(_)), "{err}");
    assert!(
        err.to_string().contains("phi3.rope.scaling.attn_factor"),
        "{err}"
    );
    let err = load(phi3_gguf_with(
        &[],
        &[("rope_factors_long.weight", vec![1.0, 1.0])],
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("rope_factors_short.weight"),
        "{err}"
    );
}

/// Phi-3-mini-4k's GGUF files carry `phi3.attention.sliding_window` = 2047 below their
/// context of 4096 (llama.cpp's converter writes the config's window). Both readers of the
/// format run them with full attention (llama.cpp disables Phi-3's window, transformers'
/// GGUF loader does not read the key), and so does the engine: the fixture with a window of 3,
/// narrower than its prompts, loads without a window and gives the same logits as without
/// the key, which match transformers reading the file.
#[test]
fn phi3_gguf_window_is_read_as_both_gguf_readers_read_it() {
    use candle_core::quantized::gguf_file::Value;
    let golden: serde_json::Value =
        serde_json::from_slice(&read("phi3_gguf", "golden.json")).unwrap();
    let bytes = phi3_gguf_with(&[("phi3.attention.sliding_window", Value::U32(3))], &[]);
    let (model, tok) =
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .expect("a Phi-3 GGUF with a window narrower than its context loads");
    assert_eq!(model.config.sliding_window, None);
    assert!(model.config.sliding_layers.iter().all(|s| !s));
    let tokens: Vec<u32> = serde_json::from_value(golden["cases"][1]["tokens"].clone()).unwrap();
    assert!(tokens.len() > 3, "the prompt reaches past the window");
    let (plain, _) = phi3_gguf("model.gguf", F32);
    let mut a = model.new_cache(256);
    let mut b = plain.new_cache(256);
    assert_eq!(
        model.forward(&tokens, &mut a, Logits::All).unwrap(),
        plain.forward(&tokens, &mut b, Logits::All).unwrap()
    );
    let e = check_phi3("phi3_gguf with a window", &model, &tok, &golden);
    eprintln!(
        "phi3_gguf with phi3.attention.sliding_window = 3: max |logit − transformers| = {e:.2e}"
    );
}

/// `case`'s model.safetensors with every matrix rounded to f16 (as an `--outtype f16` GGUF of
/// it holds them; vectors stay f32).
fn f16_matrices(case: &str) -> Vec<u8> {
    use safetensors::{tensor::TensorView, Dtype, SafeTensors};
    let bytes = read(case, "model.safetensors");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let rounded: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(name, t)| {
            assert_eq!(t.dtype(), Dtype::F32, "{name}");
            let data: Vec<u8> = t
                .data()
                .chunks_exact(4)
                .flat_map(|b| {
                    let v = f32::from_le_bytes(b.try_into().unwrap());
                    let v = if t.shape().len() == 2 {
                        half::f16::from_f32(v).to_f32()
                    } else {
                        v
                    };
                    v.to_le_bytes()
                })
                .collect();
            (name, t.shape().to_vec(), data)
        })
        .collect();
    let views: Vec<(String, TensorView)> = rounded
        .iter()
        .map(|(n, shape, d)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, shape.clone(), d).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, None).unwrap()
}

/// Phi-3 LongRoPE from GGUF as llama.cpp's converter writes it (`rope_factors_short/long`
/// tensors, `rope.scaling.original_context_length`, `rope.scaling.attn_factor` or none) runs
/// exactly as the same factors from config.json on the same weights (`phi3_gguf` holds the
/// `phi3` case's weights in f16, so the HF side reads them rounded alike; the HF path
/// matches transformers in `phi3_longrope`), in both the short and the long regime.
#[test]
fn phi3_gguf_longrope_runs_as_the_hf_config_says() {
    use candle_core::quantized::gguf_file::Value;
    let (short, long) = (vec![1.0f32, 1.7], vec![2.5f32, 9.0]);
    let weights = f16_matrices("phi3");
    let mut config: serde_json::Value = serde_json::from_str(&text("phi3", "config.json")).unwrap();
    config["original_max_position_embeddings"] = 10.into();
    config["rope_scaling"] = serde_json::json!({"rope_type": "longrope",
        "short_factor": short, "long_factor": long});
    // The HF path, with an explicit attention factor when the GGUF has one.
    let hf_with = |attn: Option<f32>| {
        let mut c = config.clone();
        if let Some(a) = attn {
            c["rope_scaling"]["attention_factor"] = a.into();
        }
        load_hf(
            &c.to_string(),
            &read("phi3", "tokenizer.json"),
            Some(&text("phi3", "tokenizer_config.json")),
            &[&weights],
            F32,
        )
        .unwrap()
        .0
    };
    for attn in [None, Some(1.3f32)] {
        let mut keys = vec![("phi3.rope.scaling.original_context_length", Value::U32(10))];
        if let Some(a) = attn {
            keys.push(("phi3.rope.scaling.attn_factor", Value::F32(a)));
        }
        let bytes = phi3_gguf_with(
            &keys,
            &[
                ("rope_factors_short.weight", short.clone()),
                ("rope_factors_long.weight", long.clone()),
            ],
        );
        let gguf = edgefit_engine::gguf::load_gguf_model(
            &mut std::io::Cursor::new(bytes),
            F32,
            &mut |_, _| {},
        )
        .unwrap();
        let hf = hf_with(attn);
        assert_eq!(gguf.config.rope_scaling, hf.config.rope_scaling, "{attn:?}");
        // 6 tokens (short factors), then 12 (long).
        for n in [6usize, 12] {
            let tokens: Vec<u32> = (0..n as u32).map(|i| 5 + i * 17 % 300).collect();
            let (mut a, mut b) = (gguf.new_cache(64), hf.new_cache(64));
            let x = gguf.forward(&tokens, &mut a, Logits::All).unwrap();
            let y = hf.forward(&tokens, &mut b, Logits::All).unwrap();
            assert_eq!(a.long_rope(), n > 10);
            let worst = x
                .iter()
                .zip(&y)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-4, "{attn:?} {n} tokens: GGUF vs HF {worst}");
        }
    }
}
