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
    for kind in ["dynamic", "yarn", "longrope", "su"] {
        let e = rope_from_hf_config(&json!({"rope_scaling": {"rope_type": kind, "factor": 2.0}}))
            .unwrap_err();
        assert!(matches!(e, EstimateError::UnsupportedFeature { .. }), "{e}");
        assert!(e.to_string().contains(&format!("{kind:?}")), "{e}");
    }
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
    let e = md(&[t("yarn"), f(4.0)]).rope_scaling("llama").unwrap_err();
    assert!(e.to_string().contains("\"yarn\""), "{e}");
}
