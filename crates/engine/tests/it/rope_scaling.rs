//! RoPE scaling (Llama 3.x `llama3`, `linear`) read from every source the engine loads: HF
//! `config.json` in the transformers 4 layout (`rope_scaling`) and the transformers 5 layout
//! (`rope_parameters`), GGUF (`rope_freqs.weight`, `rope.scaling.type`), and written back by
//! both exporters; kinds the engine does not implement are refused naming the kind.
#![cfg(not(target_arch = "wasm32"))]

use edgefit_engine::export::{config_json, gguf_bytes, ExportDType, GgufDType};
use edgefit_engine::hf::load_hf;
use edgefit_engine::synthetic::{self, hf_files, SyntheticDType, Value, CONTEXT, HEAD_DIM};
use edgefit_engine::{EngineError, LoadOptions, Logits, Model, TextTokenizer, WeightsFormat};
use edgefit_estimate::RopeScaling;
use serde_json::json;

const SEED: u64 = 5;

const F32: LoadOptions = LoadOptions {
    weights: WeightsFormat::F32,
    embedding: None,
    requantize: false,
};

/// The synthetic model's HF files with `edit` applied to its `config.json`.
fn hf_model(
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> Result<(Model, TextTokenizer), EngineError> {
    let (config, tokenizer, tokenizer_config, st) = hf_files(SEED).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&config).unwrap();
    edit(v.as_object_mut().unwrap());
    load_hf(
        &v.to_string(),
        tokenizer.as_bytes(),
        Some(&tokenizer_config),
        &[&st],
        F32,
    )
}

/// Llama 3.x parameters scaled down to the synthetic model: with θ = 10⁴ and 16 dims per
/// head, the wavelengths 2π·θ^(2i/16) run from 6.3 to 19 869, so `original = 32` with
/// factors 1 and 4 puts pairs in all three bands (kept below 8, blended 8..32, divided above 32).
fn llama3_params() -> serde_json::Value {
    json!({
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32
    })
}

fn logits(model: &Model, tokens: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(CONTEXT);
    model.forward(tokens, &mut cache, Logits::All).unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

const TOKENS: [u32; 24] = [
    3, 9, 14, 4, 22, 7, 30, 11, 5, 18, 2, 27, 8, 16, 21, 6, 13, 25, 10, 19, 12, 29, 17, 23,
];

/// The transformers formula (`_compute_llama3_parameters`), in f64, written from its
/// definition independently of the estimator's f32 one.
fn reference_llama3_inv_freq(
    theta: f64,
    d: usize,
    factor: f64,
    lo: f64,
    hi: f64,
    old: f64,
) -> Vec<f64> {
    (0..d / 2)
        .map(|i| {
            let f = theta.powf(-((2 * i) as f64) / d as f64);
            let wavelen = 2.0 * std::f64::consts::PI / f;
            if wavelen < old / hi {
                f
            } else if wavelen > old / lo {
                f / factor
            } else {
                let smooth = (old / wavelen - lo) / (hi - lo);
                (1.0 - smooth) * f / factor + smooth * f
            }
        })
        .collect()
}

#[test]
fn llama3_scaling_matches_the_transformers_formula_in_both_config_layouts() {
    // transformers 4: top-level rope_theta + rope_scaling.
    let (t4, _) = hf_model(|c| {
        c.insert("rope_scaling".into(), llama3_params());
    })
    .unwrap();
    // transformers 5: everything in rope_parameters (rope_theta included).
    let (t5, _) = hf_model(|c| {
        c.remove("rope_theta");
        let mut p = llama3_params();
        p["rope_theta"] = json!(10000.0);
        c.insert("rope_parameters".into(), p);
    })
    .unwrap();
    let (plain, _) = hf_model(|_| {}).unwrap();
    assert!(matches!(t4.config.rope_scaling, RopeScaling::Llama3 { .. }));
    assert_eq!(t4.config.rope_scaling, t5.config.rope_scaling);

    let want = reference_llama3_inv_freq(1e4, HEAD_DIM, 8.0, 1.0, 4.0, 32.0);
    let got = t4.config.rope_inv_freq().unwrap();
    let bands = got
        .iter()
        .zip(plain.config.rope_inv_freq().unwrap())
        .map(|(s, u)| {
            if *s == u {
                b'k'
            } else if (s * 8.0 - u).abs() < 1e-6 * u {
                1
            } else {
                2
            }
        })
        .collect::<Vec<_>>();
    assert!(
        bands.contains(&b'k') && bands.contains(&1) && bands.contains(&2),
        "every band is exercised: {bands:?}"
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        // f32 powf and division: a few ulp.
        let rel = ((*g as f64 - w) / w).abs();
        assert!(rel < 1e-5, "pair {i}: {g} vs {w} (rel {rel:e})");
    }

    let (a, b, p) = (
        logits(&t4, &TOKENS),
        logits(&t5, &TOKENS),
        logits(&plain, &TOKENS),
    );
    assert_eq!(
        max_diff(&a, &b),
        0.0,
        "the two config layouts must be the same model"
    );
    let vocab = t4.config.vocab;
    // Position 0 does not rotate: scaling cannot change it. Later positions must change.
    assert_eq!(max_diff(&a[..vocab], &p[..vocab]), 0.0);
    assert!(
        max_diff(&a[vocab..], &p[vocab..]) > 1e-4,
        "scaling had no effect on the logits"
    );
}

#[test]
fn llama3_and_linear_round_trip_through_both_exporters() {
    let (tok_model, tok) = hf_model(|c| {
        c.insert("rope_scaling".into(), llama3_params());
    })
    .unwrap();
    let want = logits(&tok_model, &TOKENS);

    // GGUF: written as rope_freqs.weight (llama.cpp's form), read back as divisors.
    let bytes = gguf_bytes(&tok_model, &tok, GgufDType::F32).unwrap();
    let (g, _) =
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .unwrap();
    assert!(matches!(
        g.config.rope_scaling,
        RopeScaling::Divisors { .. }
    ));
    assert_eq!(max_diff(&logits(&g, &TOKENS), &want), 0.0);
    // Divisors have no config.json form: HF export refuses rather than dropping them.
    let err = config_json(&g.config, &tok, ExportDType::F32).unwrap_err();
    assert!(err.to_string().contains("rope_freqs.weight"), "{err}");

    // HF: written as rope_scaling, read back as the same scaling.
    let text = config_json(&tok_model.config, &tok, ExportDType::F32).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["rope_scaling"]["rope_type"], "llama3");
    let (back, _) = hf_model(|c| {
        c.insert("rope_scaling".into(), v["rope_scaling"].clone());
    })
    .unwrap();
    assert_eq!(back.config.rope_scaling, tok_model.config.rope_scaling);

    // Linear: HF rope_scaling {linear, 2} == GGUF rope.scaling.type linear, factor 2, both
    // ways, and == dividing every frequency by 2.
    let (lin, lin_tok) = hf_model(|c| {
        c.insert(
            "rope_scaling".into(),
            json!({"type": "linear", "factor": 2.0}),
        );
    })
    .unwrap();
    assert_eq!(lin.config.rope_scaling, RopeScaling::Linear { factor: 2.0 });
    let (plain, _) = hf_model(|_| {}).unwrap();
    for (s, u) in lin
        .config
        .rope_inv_freq()
        .unwrap()
        .iter()
        .zip(plain.config.rope_inv_freq().unwrap())
    {
        assert_eq!(*s, u / 2.0);
    }
    let bytes = gguf_bytes(&lin, &lin_tok, GgufDType::F32).unwrap();
    let (g, _) =
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .unwrap();
    assert_eq!(g.config.rope_scaling, RopeScaling::Linear { factor: 2.0 });
    assert_eq!(max_diff(&logits(&g, &TOKENS), &logits(&lin, &TOKENS)), 0.0);
}

/// YaRN and LongRoPE round-trip through the exporters: YaRN as llama.cpp's keys (GGUF) and a
/// `rope_scaling` object (HF), LongRoPE as the two factor tensors and the attention factor key
/// (GGUF) and its `rope_scaling` object (HF); the reloaded models give the same logits. A YaRN
/// with an attention factor llama.cpp would not compute has no GGUF form and is refused.
#[test]
fn yarn_and_longrope_round_trip_through_both_exporters() {
    let half = hf_model(|_| {}).unwrap().0.config.rotary_dim() / 2;
    let factors = |step: f32| (0..half).map(|i| 1.0 + step * i as f32).collect::<Vec<_>>();
    let scalings = [
        json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
        json!({"rope_type": "longrope", "original_max_position_embeddings": 4,
               "short_factor": factors(0.25), "long_factor": factors(2.0)}),
    ];
    for scaling in scalings {
        let (m, tok) = hf_model(|c| {
            c.insert("rope_scaling".into(), scaling.clone());
        })
        .unwrap();
        let want = logits(&m, &TOKENS);
        let bytes = gguf_bytes(&m, &tok, GgufDType::F32).unwrap();
        let (g, _) =
            edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
                .unwrap();
        assert_eq!(g.config.rope_scaling, m.config.rope_scaling, "{scaling}");
        assert_eq!(max_diff(&logits(&g, &TOKENS), &want), 0.0, "{scaling}");
        let text = config_json(&m.config, &tok, ExportDType::F32).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let (back, _) = hf_model(|c| {
            c.insert("rope_scaling".into(), v["rope_scaling"].clone());
        })
        .unwrap();
        assert_eq!(back.config.rope_scaling, m.config.rope_scaling, "{scaling}");
        assert_eq!(max_diff(&logits(&back, &TOKENS), &want), 0.0, "{scaling}");
    }
    let (odd, tok) = hf_model(|c| {
        c.insert(
            "rope_scaling".into(),
            json!({"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.0}),
        );
    })
    .unwrap();
    let err = gguf_bytes(&odd, &tok, GgufDType::F32).unwrap_err();
    assert!(err.to_string().contains("YaRN"), "{err}");
}

#[test]
fn unimplemented_rope_kinds_are_refused_naming_the_kind() {
    // `dynamic` NTK recomputes the frequencies from the sequence length at every pass
    // (transformers' `dynamic_frequency_update`): not implemented. (`yarn` and `longrope` run:
    // `arch_goldens.rs`, `qwen3_yarn` and `phi3_longrope`.)
    for kind in ["dynamic"] {
        for key in ["rope_scaling", "rope_parameters"] {
            let err = hf_model(|c| {
                c.insert(key.into(), json!({"rope_type": kind, "factor": 4.0}));
            })
            .map(|_| ())
            .unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, EngineError::Unsupported(_)),
                "{key} {kind}: {msg}"
            );
            assert!(msg.contains(kind) && msg.contains(key), "{msg}");
        }
    }
    // Per-layer-type parameters (Gemma 3 in transformers 5): full and sliding are read (the
    // gemma3 fixture, `arch_goldens.rs`); another layer type, or scaling on sliding layers, is
    // refused naming it.
    for (params, named) in [
        (
            json!({"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                   "chunked_attention": {"rope_type": "default", "rope_theta": 1e4}}),
            "chunked_attention",
        ),
        (
            json!({"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                   "sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
            "sliding_attention",
        ),
    ] {
        let err = hf_model(|c| {
            c.insert("rope_parameters".into(), params.clone());
        })
        .map(|_| ())
        .unwrap_err();
        assert!(matches!(err, EngineError::Unsupported(_)), "{err}");
        assert!(err.to_string().contains(named), "{err}");
    }
    // A llama3 entry missing a field names it.
    let err = hf_model(|c| {
        c.insert(
            "rope_parameters".into(),
            json!({"rope_type": "llama3", "factor": 8.0}),
        );
    })
    .map(|_| ())
    .unwrap_err();
    assert!(
        err.to_string().contains("rope_parameters.low_freq_factor"),
        "{err}"
    );
    // rope_scaling and rope_parameters that disagree.
    let err = hf_model(|c| {
        c.insert(
            "rope_scaling".into(),
            json!({"rope_type": "linear", "factor": 2.0}),
        );
        c.insert("rope_parameters".into(), llama3_params());
    })
    .map(|_| ())
    .unwrap_err();
    assert!(err.to_string().contains("disagreeing"), "{err}");
    // A bad factor is a config error, not a silently unscaled model.
    let err = hf_model(|c| {
        c.insert(
            "rope_scaling".into(),
            json!({"rope_type": "linear", "factor": 0.0}),
        );
    })
    .map(|_| ())
    .unwrap_err();
    assert!(err.to_string().contains("factor"), "{err}");

    // GGUF: YaRN runs as llama.cpp's converter writes it (`qwen3_yarn`, `arch_goldens.rs`),
    // but with an attention factor (which llama.cpp combines per architecture) it is refused
    // naming the key.
    let bytes = synthetic::gguf_bytes_with(SEED, SyntheticDType::F32, |md| {
        md.push((
            "llama.rope.scaling.type".into(),
            Value::String("yarn".into()),
        ));
        md.push(("llama.rope.scaling.factor".into(), Value::F32(4.0)));
        md.push(("llama.rope.scaling.attn_factor".into(), Value::F32(0.5)));
    })
    .unwrap();
    let err =
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .map(|_| ())
            .unwrap_err();
    assert!(
        matches!(err, EngineError::Unsupported(_))
            && err.to_string().contains("llama.rope.scaling.attn_factor"),
        "{err}"
    );
}
