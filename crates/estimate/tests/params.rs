//! Parameter counts against published totals, config.json and GGUF parsing, pruning.

// On wasm32 these run under wasm-bindgen-test (Node and headless Chromium).
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::collections::BTreeMap;

use edgefit_estimate::{
    preset, preset_ids, preset_info, EstimateError, Family, GgufMetadata, GgufTensorInfo,
    GgufValue, LayerPrune, ModelSpec, PruneRatios, Pruning,
};

/// Published totals (HF Hub safetensors parameter counts), typed here by hand, independent of
/// the preset files.
const PUBLISHED: &[(&str, u64)] = &[
    ("smollm2-135m", 134_515_008),
    ("smollm2-360m", 361_821_120),
    ("smollm2-1.7b", 1_711_376_384),
    ("qwen2.5-0.5b", 494_032_768),
    ("qwen2.5-1.5b", 1_543_714_304),
    ("llama-3.2-1b", 1_235_814_400),
    ("llama-3.2-3b", 3_212_749_824),
    ("llama-3-8b", 8_030_261_248),
    ("llama-2-7b", 6_738_415_616),
    ("mistral-7b", 7_241_732_096),
    ("phi-3-mini", 3_821_079_552),
    ("gemma-2b", 2_506_172_416),
    ("gemma-2-2b", 2_614_341_888),
    // Published as "1.3B" / 1.35B on the Hub; within 1% of 1.35e9.
    ("sheared-llama-1.3b", 1_345_423_360),
    // Presets added for the validation set.
    ("llama-3.1-8b", 8_030_261_248),
    ("phi-3.5-mini", 3_821_079_552),
    ("qwen2.5-7b", 7_615_616_512),
    // Gemma 3: the 270M total is the published GGUF's tensor sum, the 1B one its config's shape.
    ("gemma-3-270m", 268_098_176),
    ("gemma-3-1b", 999_885_952),
];

#[test]
fn presets_match_published_totals_exactly() {
    for (id, total) in PUBLISHED {
        let spec = preset(id).unwrap();
        assert_eq!(spec.params().total, *total, "{id}");
    }
    let s = preset("sheared-llama-1.3b").unwrap().params().total as f64;
    assert!((s / 1.35e9 - 1.0).abs() < 0.01);
}

#[test]
fn every_preset_within_one_percent_of_its_recorded_total() {
    assert!(preset_ids().len() >= 12);
    for id in preset_ids() {
        let info = preset_info(id).unwrap();
        let got = preset(id).unwrap().params().total as f64;
        let rel = (got / info.published_params as f64 - 1.0).abs();
        assert!(rel < 0.01, "{id}: {got} vs {}", info.published_params);
        assert!(!info.params_source.is_empty());
    }
}

#[test]
fn smollm2_135m_components_by_hand() {
    let p = preset("smollm2-135m").unwrap().params();
    // d = 576, 30 layers, 9 heads, 3 KV heads, head dim 64, I = 1536, V = 49152, tied.
    assert_eq!(p.embedding, 49_152 * 576);
    let attn_layer = 576 * 576 + 576 * 192 + 576 * 192 + 576 * 576; // q, k, v, o
    assert_eq!(p.attention, 30 * attn_layer);
    assert_eq!(p.mlp, 30 * 3 * 576 * 1536);
    assert_eq!(p.norms, 30 * 2 * 576 + 576);
    assert_eq!(p.lm_head, 0);
    assert_eq!(p.total, 134_515_008);
}

#[test]
fn qwen2_biases_and_gemma2_norms_are_counted() {
    let q = preset("qwen2.5-0.5b").unwrap();
    assert!(q.qkv_bias && q.tie_word_embeddings);
    // Per layer: q 896 + k 128 + v 128 bias values.
    let l = q.layers[0];
    assert_eq!(
        q.attention_params(&l),
        896 * 896 + 2 * 896 * 128 + 896 * 896 + 896 + 2 * 128
    );
    let g = preset("gemma-2-2b").unwrap();
    assert_eq!(g.norms_per_layer, 4);
    assert_eq!(g.family, Family::Gemma2);
    assert_eq!(g.layers[0].qk_head_dim, 256); // decoupled from 2304 / 8 = 288
}

#[test]
fn config_json_families_and_defaults() {
    // Mistral-Nemo style: head_dim given and not hidden/heads.
    let nemo = r#"{"model_type":"mistral","hidden_size":5120,"num_hidden_layers":40,
        "num_attention_heads":32,"num_key_value_heads":8,"head_dim":128,
        "intermediate_size":14336,"vocab_size":131072}"#;
    let s = ModelSpec::from_hf_config("nemo", nemo).unwrap();
    assert_eq!(s.layers[0].qk_head_dim, 128);
    assert!(!s.tie_word_embeddings);
    // 12,247,782,400 is Mistral-NeMo-12B's published total.
    assert_eq!(s.params().total, 12_247_782_400);

    // head_dim null falls back to hidden/heads; gemma defaults to tied.
    let gemma = r#"{"model_type":"gemma","hidden_size":2048,"num_hidden_layers":18,
        "num_attention_heads":8,"num_key_value_heads":1,"head_dim":null,
        "intermediate_size":16384,"vocab_size":256000}"#;
    let g = ModelSpec::from_hf_config("g", gemma).unwrap();
    assert!(g.tie_word_embeddings);
    assert_eq!(g.layers[0].qk_head_dim, 256);

    // num_key_value_heads absent = MHA.
    let phi = r#"{"model_type":"phi3","hidden_size":3072,"num_hidden_layers":32,
        "num_attention_heads":32,"intermediate_size":8192,"vocab_size":32064,
        "tie_word_embeddings":false}"#;
    let p = ModelSpec::from_hf_config("", phi).unwrap();
    assert_eq!(p.layers[0].num_kv_heads, 32);
    assert_eq!(p.params().total, 3_821_079_552);

    // Llama with attention_bias and mlp_bias.
    let biased = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,
        "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,
        "vocab_size":100,"attention_bias":true,"mlp_bias":true,"tie_word_embeddings":true}"#;
    let b = ModelSpec::from_hf_config("b", biased).unwrap();
    let l = b.layers[0];
    // q 64x64, k 32x64, v 32x64, o 64x64 + biases 64+32+32 + 64.
    assert_eq!(b.attention_params(&l), 64 * 64 * 2 + 2 * 32 * 64 + 128 + 64);
    assert_eq!(b.mlp_params(&l), 3 * 64 * 128 + 2 * 128 + 64);
}

#[test]
fn config_json_errors_name_the_field() {
    let e = ModelSpec::from_hf_config("x", r#"{"model_type":"gpt2"}"#).unwrap_err();
    assert!(matches!(e, EstimateError::UnsupportedArchitecture { .. }));
    assert!(e.to_string().contains("gpt2"));
    let e =
        ModelSpec::from_hf_config("x", r#"{"model_type":"llama","hidden_size":64}"#).unwrap_err();
    assert!(e.to_string().contains("num_hidden_layers"), "{e}");
    let e = ModelSpec::from_hf_config("x", "{not json").unwrap_err();
    assert!(matches!(e, EstimateError::Json { .. }));
    let odd = r#"{"model_type":"llama","hidden_size":60,"num_hidden_layers":1,
        "num_attention_heads":4,"intermediate_size":8,"vocab_size":10}"#;
    let e = ModelSpec::from_hf_config("odd", odd).unwrap_err();
    assert!(
        e.to_string().contains("qk_head_dim") && e.to_string().contains("15"),
        "{e}"
    );
    let gqa = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,
        "num_attention_heads":4,"num_key_value_heads":3,"intermediate_size":8,"vocab_size":10}"#;
    assert!(ModelSpec::from_hf_config("gqa", gqa)
        .unwrap_err()
        .to_string()
        .contains("multiple"));
    let neg = r#"{"model_type":"llama","hidden_size":-1}"#;
    assert!(ModelSpec::from_hf_config("n", neg)
        .unwrap_err()
        .to_string()
        .contains("hidden_size"));
    let huge = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":4000000000,
        "num_attention_heads":4,"intermediate_size":8,"vocab_size":10}"#;
    assert!(ModelSpec::from_hf_config("h", huge).is_err());
    assert!(preset("gpt-5")
        .unwrap_err()
        .to_string()
        .contains("smollm2-135m"));
}

fn smollm_gguf(layers: u32) -> GgufMetadata {
    // The metadata of models/smollm2-135m-instruct-q4_1.gguf (read with a GGUF dump).
    let mut kv = BTreeMap::new();
    let s = |v: &str| GgufValue::String(v.into());
    kv.insert("general.architecture".into(), s("llama"));
    kv.insert("general.name".into(), s("Smollm2 135M 8k Lc100K Mix1 Ep2"));
    kv.insert(
        "llama.block_count".into(),
        GgufValue::Uint(u64::from(layers)),
    );
    kv.insert("llama.context_length".into(), GgufValue::Uint(8192));
    kv.insert("llama.embedding_length".into(), GgufValue::Uint(576));
    kv.insert("llama.feed_forward_length".into(), GgufValue::Uint(1536));
    kv.insert("llama.attention.head_count".into(), GgufValue::Uint(9));
    kv.insert("llama.attention.head_count_kv".into(), GgufValue::Uint(3));
    kv.insert("llama.rope.dimension_count".into(), GgufValue::Uint(64));
    kv.insert("llama.vocab_size".into(), GgufValue::Uint(49152));
    kv.insert("tokenizer.ggml.tokens".into(), GgufValue::ArrayLen(49152));
    let mut tensors = vec![
        GgufTensorInfo {
            name: "token_embd.weight".into(),
            dims: vec![576, 49152],
        },
        GgufTensorInfo {
            name: "output_norm.weight".into(),
            dims: vec![576],
        },
    ];
    for i in 0..layers {
        for (n, dims) in [
            ("attn_q", vec![576, 576]),
            ("attn_k", vec![576, 192]),
            ("attn_v", vec![576, 192]),
            ("attn_output", vec![576, 576]),
            ("ffn_gate", vec![576, 1536]),
            ("ffn_up", vec![576, 1536]),
            ("ffn_down", vec![1536, 576]),
        ] {
            tensors.push(GgufTensorInfo {
                name: format!("blk.{i}.{n}.weight"),
                dims,
            });
        }
    }
    GgufMetadata { kv, tensors }
}

#[test]
fn gguf_metadata_gives_the_same_shape_as_the_preset() {
    let g = smollm_gguf(30).to_spec("").unwrap();
    let p = preset("smollm2-135m").unwrap();
    assert_eq!(g.name, "Smollm2 135M 8k Lc100K Mix1 Ep2");
    assert_eq!(g.layers, p.layers);
    assert!(g.tie_word_embeddings);
    assert_eq!(g.params().total, 134_515_008);
}

#[test]
fn gguf_reads_a_pruned_file_layer_by_layer() {
    let mut m = smollm_gguf(2);
    // Layer 1: 6 query heads, 96-wide MLP... as a pruned export would store it.
    for t in &mut m.tensors {
        match t.name.as_str() {
            "blk.1.attn_q.weight" => t.dims = vec![576, 384],
            "blk.1.attn_output.weight" => t.dims = vec![384, 576],
            "blk.1.ffn_down.weight" => t.dims = vec![768, 576],
            _ => {}
        }
    }
    m.tensors.push(GgufTensorInfo {
        name: "output.weight".into(),
        dims: vec![576, 49152],
    });
    let s = m.to_spec("pruned").unwrap();
    assert_eq!(s.layers[0].num_heads, 9);
    assert_eq!(s.layers[1].num_heads, 6);
    assert_eq!(s.layers[1].intermediate_size, 768);
    assert!(!s.tie_word_embeddings);
    let mut empty = smollm_gguf(1);
    empty.tensors.clear();
    assert!(empty
        .to_spec("x")
        .unwrap_err()
        .to_string()
        .contains("tensors"));
    let mut bad = smollm_gguf(1);
    bad.kv.insert(
        "general.architecture".into(),
        GgufValue::String("mamba".into()),
    );
    assert!(matches!(
        bad.to_spec("x"),
        Err(EstimateError::UnsupportedArchitecture { .. })
    ));
    let mut wrong = smollm_gguf(1);
    wrong
        .kv
        .insert("llama.block_count".into(), GgufValue::String("30".into()));
    assert!(wrong
        .to_spec("x")
        .unwrap_err()
        .to_string()
        .contains("llama.block_count"));
}

#[test]
fn pruning_shapes_and_rules() {
    let base = preset("llama-3.2-1b").unwrap();
    let p = Pruning {
        all_layers: LayerPrune {
            intermediate_size: Some(4096),
            ..Default::default()
        },
        per_layer: [(
            3,
            LayerPrune {
                num_heads: Some(16),
                ..Default::default()
            },
        )]
        .into(),
        drop_layers: vec![14],
    };
    let s = base.pruned(&p).unwrap();
    assert_eq!(s.num_layers(), 15);
    assert_eq!(s.layers[0].intermediate_size, 4096);
    assert_eq!(s.layers[3].num_heads, 16);
    assert_eq!(s.layers[4].num_heads, 32);
    let d = u64::from(base.hidden_size);
    // 1 layer fewer, 4096 fewer MLP channels in each of the 15 left, 16 fewer heads in layer 3.
    let removed = base.params().total - s.params().total;
    let one_layer =
        base.attention_params(&base.layers[0]) + base.mlp_params(&base.layers[0]) + 2 * d;
    let expect = one_layer + 15 * 3 * d * 4096 + 2 * d * 16 * 64;
    assert_eq!(removed, expect);

    let grow = Pruning {
        all_layers: LayerPrune {
            intermediate_size: Some(9000),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(base
        .pruned(&grow)
        .unwrap_err()
        .to_string()
        .contains("never grows"));
    let gqa = Pruning {
        all_layers: LayerPrune {
            num_heads: Some(30),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(base
        .pruned(&gqa)
        .unwrap_err()
        .to_string()
        .contains("multiple"));
    let odd = Pruning {
        all_layers: LayerPrune {
            qk_head_dim: Some(45),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(base.pruned(&odd).unwrap_err().to_string().contains("RoPE"));
    let all = Pruning {
        drop_layers: (0..16).collect(),
        ..Default::default()
    };
    assert!(base.pruned(&all).is_err());
    let twice = Pruning {
        drop_layers: vec![2, 2],
        ..Default::default()
    };
    assert!(base
        .pruned(&twice)
        .unwrap_err()
        .to_string()
        .contains("twice"));
    let out = Pruning {
        drop_layers: vec![16],
        ..Default::default()
    };
    assert!(base.pruned(&out).unwrap_err().to_string().contains("16"));
}

#[test]
fn ratios_round_like_the_engine() {
    let base = preset("llama-3.2-1b").unwrap(); // 32 heads / 8 KV, dk 64, I 8192, 16 layers
    let r = PruneRatios {
        heads: 0.25,
        qk_dims: 0.3,
        v_dims: 0.3,
        mlp: 0.5,
        layers: 2,
    };
    let s = base
        .pruned(&Pruning::from_ratios(&base, &r).unwrap())
        .unwrap();
    assert_eq!(s.num_layers(), 14);
    let l = s.layers[0];
    assert_eq!(l.num_heads, 24); // 3 of 4 per group x 8 groups
    assert_eq!(l.qk_head_dim, 44); // 2 * round(0.7 * 32) = 2 * 22
    assert_eq!(l.v_head_dim, 45); // round(0.7 * 64) = 44.8 -> 45
    assert_eq!(l.intermediate_size, 4096);
    for bad in [1.0, -0.1, f64::NAN] {
        let r = PruneRatios {
            mlp: bad,
            ..Default::default()
        };
        assert!(Pruning::from_ratios(&base, &r).is_err(), "{bad}");
    }
    let r = PruneRatios {
        layers: 16,
        ..Default::default()
    };
    assert!(Pruning::from_ratios(&base, &r).is_err());
}

/// Presets added for the validation set whose shapes the spec has exactly.
#[test]
fn validation_presets_match_published_totals() {
    for (id, total) in [
        ("qwen2-7b", 7_615_616_512u64),
        ("deepseek-r1-distill-qwen-1.5b", 1_777_088_000),
        ("falcon3-7b", 7_455_550_464),
    ] {
        assert_eq!(preset(id).unwrap().params().total, total, "{id}");
    }
}

/// Qwen3 presets (`model_type: qwen3`: per-head q/k RMSNorms, head_dim 128 decoupled from
/// hidden / heads) count exactly the total recorded in the preset, computed from the
/// config.json shape (by hand here for 0.6B).
#[test]
fn qwen3_presets_count_the_qk_norms() {
    // Qwen3-0.6B by hand: d = 1024, 28 layers, 16 heads × 128, 8 KV heads × 128, I = 3072,
    // V = 151936, tied; per layer q 1024·2048, k and v 1024·1024, o 2048·1024, MLP 3·1024·3072,
    // two norms 2·1024, q/k norms 2·128; final norm 1024.
    let per_layer = 1024 * 2048 + 2 * 1024 * 1024 + 2048 * 1024 + 3 * 1024 * 3072 + 2 * 1024 + 256;
    assert_eq!(
        preset_info("qwen3-0.6b").unwrap().published_params,
        151_936 * 1024 + 28 * per_layer + 1024
    );
    for id in ["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"] {
        let spec = preset(id).unwrap();
        assert!(spec.qk_norm, "{id} has q/k norms");
        assert_eq!(
            spec.params().total,
            preset_info(id).unwrap().published_params,
            "{id}"
        );
    }
}
