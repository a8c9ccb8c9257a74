//! RoPE scaling as the one parser per format reads it (the engine runs what these return).

use std::collections::BTreeMap;

use edgefit_estimate::{rope_from_hf_config, EstimateError, GgufMetadata, GgufValue, RopeScaling};
use serde_json::json;

#[test]
fn hf_rope_in_both_transformers_layouts() {
    let llama3 = RopeScaling::Llama3 {
        factor: 32.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_context: 8192,
    };
    // Llama 3.2 1B's config.json, transformers 4.
    let t4 = json!({"rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
        "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}});
    let r = rope_from_hf_config(&t4).unwrap();
    assert_eq!((r.theta, &r.scaling), (Some(500000.0), &llama3));
    // The same, transformers 5.
    let t5 = json!({"rope_parameters": {"rope_theta": 500000.0, "factor": 32.0, "high_freq_factor": 4.0,
        "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}});
    assert_eq!(rope_from_hf_config(&t5).unwrap(), r);
    // No scaling at all; `default`; the old `type` key.
    assert_eq!(
        rope_from_hf_config(&json!({})).unwrap().scaling,
        RopeScaling::None
    );
    let d = json!({"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}});
    assert_eq!(rope_from_hf_config(&d).unwrap().theta, Some(1e6));
    let lin = json!({"rope_scaling": {"type": "linear", "factor": 4.0}});
    assert_eq!(
        rope_from_hf_config(&lin).unwrap().scaling,
        RopeScaling::Linear { factor: 4.0 }
    );
    for kind in ["dynamic", "su", "ntk"] {
        let e = rope_from_hf_config(&json!({"rope_scaling": {"rope_type": kind, "factor": 2.0}}))
            .unwrap_err();
        assert!(matches!(e, EstimateError::UnsupportedFeature { .. }), "{e}");
        assert!(e.to_string().contains(&format!("{kind:?}")), "{e}");
    }
}

#[test]
fn hf_yarn_as_transformers_resolves_it() {
    // Qwen's model cards: factor 4 over 32768; attention factor 0.1 ln 4 + 1, betas 32 / 1.
    let q = json!({"max_position_embeddings": 32768, "rope_theta": 1e6, "rope_scaling":
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}});
    let RopeScaling::Yarn {
        factor,
        original_context,
        beta_fast,
        beta_slow,
        truncate,
        attention_factor,
    } = rope_from_hf_config(&q).unwrap().scaling
    else {
        panic!("yarn expected")
    };
    assert_eq!(
        (factor, original_context, beta_fast, beta_slow, truncate),
        (4.0, 32768, 32.0, 1.0, true)
    );
    assert!((attention_factor - (0.1 * 4f32.ln() + 1.0)).abs() < 1e-6);
    // mscale / mscale_all_dim (DeepSeek style) give their ratio; an explicit attention_factor
    // wins; no original context inside: the top-level `max_position_embeddings`.
    let m = json!({"max_position_embeddings": 4096, "rope_parameters": {"rope_type": "yarn",
        "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.5}});
    let s = rope_from_hf_config(&m).unwrap().scaling;
    let want = (0.1 * 40f32.ln() + 1.0) / (0.05 * 40f32.ln() + 1.0);
    assert!((s.attention_factor() - want).abs() < 1e-6, "{s:?}");
    assert!(matches!(
        s,
        RopeScaling::Yarn {
            original_context: 4096,
            ..
        }
    ));
    let a = json!({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn",
        "factor": 2.0, "attention_factor": 1.5, "truncate": false}});
    let s = rope_from_hf_config(&a).unwrap().scaling;
    assert_eq!(s.attention_factor(), 1.5);
    assert!(matches!(
        s,
        RopeScaling::Yarn {
            truncate: false,
            ..
        }
    ));
}

#[test]
fn yarn_divisors_follow_the_ramp() {
    // θ = 10⁴, 16 dims, original context 64: c(32) = 16 ln(64 / 64π) / (2 ln 10⁴) ≈ −0.99 →
    // lo = 0; c(1) = 16 ln(64 / 2π) / (2 ln 10⁴) ≈ 2.02 → hi = 3. Pairs ≥ 3 are interpolated
    // (divided by the factor), pair 0 kept, pairs 1 and 2 blended with weights 2/3 and 1/3.
    let s = RopeScaling::Yarn {
        factor: 4.0,
        original_context: 64,
        beta_fast: 32.0,
        beta_slow: 1.0,
        truncate: true,
        attention_factor: 1.0,
    };
    let d = s.divisors(1e4, 16).unwrap();
    let blend = |e: f32| 1.0 / ((1.0 - e) / 4.0 + e);
    let want = [
        1.0,
        blend(2.0 / 3.0),
        blend(1.0 / 3.0),
        4.0,
        4.0,
        4.0,
        4.0,
        4.0,
    ];
    for (g, w) in d.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{d:?}");
    }
    // Without rounding the ramp runs from −0.99 (clamped to 0) to 2.02.
    let s = RopeScaling::Yarn {
        factor: 4.0,
        original_context: 64,
        beta_fast: 32.0,
        beta_slow: 1.0,
        truncate: false,
        attention_factor: 1.0,
    };
    let d = s.divisors(1e4, 16).unwrap();
    let hi = 16.0 * (64.0f64 / (2.0 * std::f64::consts::PI)).ln() / (2.0 * 1e4f64.ln());
    let e1 = 1.0 - (1.0 / hi) as f32;
    assert!((d[1] - blend(e1)).abs() < 1e-5, "{d:?}");
    assert_eq!(d[3], 4.0);
}

#[test]
fn hf_longrope_as_phi3_reads_it() {
    // Phi-3.5-mini: no `factor`, the top-level original context: attention factor
    // sqrt(1 + ln(131072 / 4096) / ln 4096); Phi-3 spells it `su` or `yarn` too.
    for kind in ["longrope", "su", "yarn"] {
        let c = json!({"model_type": "phi3", "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": kind, "short_factor": [1.0, 2.0], "long_factor": [3.0, 4.0]}});
        let s = rope_from_hf_config(&c).unwrap().scaling;
        let want = (1.0 + 32f64.ln() / 4096f64.ln()).sqrt() as f32;
        assert!((s.attention_factor() - want).abs() < 1e-6, "{kind}: {s:?}");
        assert_eq!(s.divisors(1e4, 4).unwrap(), [1.0, 2.0]);
        assert_eq!(s.long_divisors(4).unwrap().unwrap(), (4096, vec![3.0, 4.0]));
        assert_eq!(s.kind(), "longrope");
    }
    // Elsewhere `yarn` is YaRN; the factor lists must match the rotated pairs.
    let y = json!({"model_type": "llama", "max_position_embeddings": 8192,
        "rope_scaling": {"type": "yarn", "factor": 2.0}});
    assert_eq!(rope_from_hf_config(&y).unwrap().scaling.kind(), "yarn");
    let c = json!({"model_type": "phi3", "rope_scaling": {"type": "longrope",
        "short_factor": [1.0], "long_factor": [3.0, 4.0]}});
    let s = rope_from_hf_config(&c).unwrap().scaling;
    assert!(s.divisors(1e4, 4).unwrap_err().contains("short_factor"));
    let c = json!({"model_type": "phi3", "rope_scaling": {"type": "longrope",
        "short_factor": [1.0, 1.0]}});
    assert!(rope_from_hf_config(&c)
        .unwrap_err()
        .to_string()
        .contains("long_factor"));
}

#[test]
fn llama3_divisors_at_the_band_edges() {
    // Llama 3.2: θ = 5·10⁵, 64 dims per head. Pair 0 (wavelength 2π) is kept, the last pair
    // (wavelength ≈ 2π·θ^(62/64) ≫ 8192) is divided by the factor, and every divisor lies in
    // [1, factor] and does not decrease with the wavelength.
    let s = RopeScaling::Llama3 {
        factor: 32.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_context: 8192,
    };
    let d = s.divisors(500000.0, 64).unwrap();
    assert_eq!(d.len(), 32);
    assert_eq!(d[0], 1.0);
    assert_eq!(d[31], 32.0);
    assert!(d.windows(2).all(|w| w[0] <= w[1]) && d.iter().all(|&x| (1.0..=32.0).contains(&x)));
    assert!(
        d.iter().any(|&x| x > 1.0 && x < 32.0),
        "some pair is blended: {d:?}"
    );
    let bad = RopeScaling::Divisors {
        divisors: vec![1.0; 3],
    };
    assert!(bad
        .divisors(1e4, 64)
        .unwrap_err()
        .contains("3 RoPE frequency divisors"));
    let bad = RopeScaling::Linear { factor: -1.0 };
    assert!(bad.divisors(1e4, 64).is_err());
}

#[test]
fn gguf_rope_scaling_as_llama_cpp_reads_it() {
    let md = |pairs: &[(&str, GgufValue)]| GgufMetadata {
        kv: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        tensors: Vec::new(),
    };
    assert_eq!(md(&[]).rope_scaling("llama").unwrap(), RopeScaling::None);
    // No type = linear, as llama.cpp defaults it; factor 1 = none.
    let f = |x: f64| ("llama.rope.scaling.factor", GgufValue::Float(x));
    assert_eq!(
        md(&[f(4.0)]).rope_scaling("llama").unwrap(),
        RopeScaling::Linear { factor: 4.0 }
    );
    assert_eq!(
        md(&[f(1.0)]).rope_scaling("llama").unwrap(),
        RopeScaling::None
    );
    let t = |s: &str| ("llama.rope.scaling.type", GgufValue::String(s.into()));
    assert_eq!(
        md(&[t("none"), f(4.0)]).rope_scaling("llama").unwrap(),
        RopeScaling::None
    );
    // YaRN as llama.cpp's converter writes it (Qwen2Model): type, factor, original context;
    // the betas default to 32 / 1 and the attention factor is 0.1 ln(factor) + 1.
    let ctx = (
        "llama.rope.scaling.original_context_length",
        GgufValue::Uint(32768),
    );
    let y = md(&[t("yarn"), f(4.0), ctx.clone()])
        .rope_scaling("llama")
        .unwrap();
    assert_eq!(
        y,
        RopeScaling::Yarn {
            factor: 4.0,
            original_context: 32768,
            beta_fast: 32.0,
            beta_slow: 1.0,
            truncate: true,
            attention_factor: 0.1 * 4f32.ln() + 1.0,
        }
    );
    // An attention factor or log multiplier with YaRN (llama.cpp combines them per
    // architecture) is refused naming the key; so is a kind llama.cpp has no reader for here.
    let a = ("llama.rope.scaling.attn_factor", GgufValue::Float(0.5));
    let e = md(&[t("yarn"), f(4.0), ctx, a])
        .rope_scaling("llama")
        .unwrap_err();
    assert!(
        e.to_string().contains("llama.rope.scaling.attn_factor"),
        "{e}"
    );
    let e = md(&[t("longrope"), f(4.0)])
        .rope_scaling("llama")
        .unwrap_err();
    assert!(e.to_string().contains("\"longrope\""), "{e}");
}
