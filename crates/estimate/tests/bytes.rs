//! Byte counts of weight and KV formats, by hand.

// On wasm32 these run under wasm-bindgen-test (Node and headless Chromium).
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use edgefit_estimate::{
    kv_bytes, kv_bytes_per_token, preset, weight_bytes, KvFormat, LayerSpec, ModelSpec,
    WeightFormat,
};

#[test]
fn matrix_bytes_by_hand() {
    use WeightFormat::*;
    // 4096 x 4096 (16,777,216 weights).
    let (r, c) = (4096u64, 4096u64);
    let n = r * c;
    assert_eq!(F32.matrix_bytes(r, c), 4 * n);
    assert_eq!(F16.matrix_bytes(r, c), 2 * n);
    assert_eq!(Bf16.matrix_bytes(r, c), 2 * n);
    assert_eq!(Int8.matrix_bytes(r, c), n + 2 * r); // one fp16 scale per row
    assert_eq!(W4g32.matrix_bytes(r, c), n / 2 + 2 * n / 32); // 4.5 bits
    assert_eq!(W4g64.matrix_bytes(r, c), n / 2 + 2 * n / 64);
    assert_eq!(W4g128.matrix_bytes(r, c), n / 2 + 2 * n / 128);
    assert_eq!(Q4_0.matrix_bytes(r, c), n / 32 * 18);
    assert_eq!(Q4_1.matrix_bytes(r, c), n / 32 * 20);
    assert_eq!(Q8_0.matrix_bytes(r, c), n / 32 * 34);
    assert_eq!(Q4K.matrix_bytes(r, c), n / 256 * 144);
    assert_eq!(Q6K.matrix_bytes(r, c), n / 256 * 210);
    // 6B-class fp16 is ~12 GB, int4 with g32 scales ~3.4 GB (domain notes §5).
    assert_eq!(W4g32.bits_per_weight(), 4.5);
    assert_eq!(Q6K.bits_per_weight(), 6.5625);
    assert_eq!(Q4_1.bits_per_weight(), 5.0);
}

#[test]
fn tail_groups_are_padded() {
    // 3 rows x 33 cols in w4g32: 2 groups per row, 18 bytes each.
    assert_eq!(WeightFormat::W4g32.matrix_bytes(3, 33), 3 * 2 * 18);
    assert_eq!(WeightFormat::W4g128.matrix_bytes(1, 1), 66);
    assert_eq!(WeightFormat::Q4K.matrix_bytes(2, 257), 2 * 2 * 144);
    assert_eq!(WeightFormat::Int8.matrix_bytes(5, 7), 5 * (7 + 2));
    assert_eq!(WeightFormat::F16.matrix_bytes(0, 7), 0);
    // Saturates instead of overflowing.
    assert_eq!(WeightFormat::F32.matrix_bytes(u64::MAX, u64::MAX), u64::MAX);
}

#[test]
fn format_names_round_trip_and_reject_unknowns() {
    for f in WeightFormat::ALL {
        assert_eq!(f.as_str().parse::<WeightFormat>().unwrap(), *f);
        let j = serde_json::to_string(f).unwrap();
        assert_eq!(j, format!("\"{}\"", f.as_str()));
    }
    let names: Vec<&str> = WeightFormat::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(
        names,
        [
            "f32", "f16", "bf16", "int8", "w4g32", "w4g64", "w4g128", "q4_0", "q4_1", "q5_0",
            "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"
        ]
    );
    let kv: Vec<&str> = KvFormat::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(kv, ["f32", "f16", "k8v16", "int8", "int4g32", "kivi4"]);
    let e = "w5g32".parse::<WeightFormat>().unwrap_err().to_string();
    assert!(e.contains("w5g32") && e.contains("w4g32"), "{e}");
    assert!("Q4_0".parse::<WeightFormat>().is_err());
    assert!(serde_json::from_str::<KvFormat>("\"int3\"").is_err());
}

#[test]
fn kv_per_token_by_hand() {
    let s = preset("smollm2-135m").unwrap(); // 30 layers, 3 KV heads, head dim 64
    let per = |f| kv_bytes_per_token(&s, f);
    assert_eq!(per(KvFormat::F32), 30 * 3 * (64 + 64) * 4);
    assert_eq!(per(KvFormat::F16), 30 * 3 * (64 + 64) * 2); // 23,040
    assert_eq!(per(KvFormat::K8v16), 30 * 3 * ((64 + 2) + 64 * 2)); // 17,460
    assert_eq!(per(KvFormat::Int8), 30 * 3 * ((64 + 2) + (64 + 2)));
    assert_eq!(per(KvFormat::Int4g32), 30 * 3 * (2 * 18 + 2 * 18));
    // Llama-3.2-1B f16: 2 x 16 layers x 8 KV heads x 64 x 2 bytes = 32 KiB per token.
    let l = preset("llama-3.2-1b").unwrap();
    assert_eq!(kv_bytes_per_token(&l, KvFormat::F16), 32 * 1024);
    // Bytes for n tokens are exactly n x per token, for every linear format.
    for f in KvFormat::ALL.iter().filter(|f| f.is_linear()) {
        for n in [0u64, 1, 7, 512, 2048, 100_000] {
            assert_eq!(kv_bytes(&s, *f, n), kv_bytes_per_token(&s, *f) * n);
        }
    }
}

#[test]
fn kivi4_bytes_by_hand() {
    let s = preset("smollm2-135m").unwrap(); // 30 layers, 3 KV heads, head dim 64
                                             // A full block of 32 keys per head: 32 tokens x 2 groups x 16 bytes + 64 channels x
                                             // (fp16 scale + fp16 min) = 1024 + 256; V int4g32: 2 x 18 per token.
    let block = 32 * 2 * 16 + 64 * 4;
    let v = 2 * 18;
    assert_eq!(
        kv_bytes_per_token(&s, KvFormat::Kivi4),
        30 * 3 * (block / 32 + v)
    );
    for n in [0u64, 1, 31, 32, 33, 63, 64, 512, 2047, 2048] {
        let k = (n / 32) * block + (n % 32) * 64 * 2;
        assert_eq!(
            kv_bytes(&s, KvFormat::Kivi4, n),
            30 * 3 * (k + n * v),
            "{n}"
        );
    }
    // At whole blocks the per-token figure is exact, and the tail never makes it cheaper
    // than int4g32 per token at that length.
    assert_eq!(
        kv_bytes(&s, KvFormat::Kivi4, 2048),
        kv_bytes_per_token(&s, KvFormat::Kivi4) * 2048
    );
    assert!(!KvFormat::Kivi4.is_linear());
    // Odd head dims: 44 channels, 2 groups of nibbles per token, 4 bytes per channel.
    let l = LayerSpec {
        num_heads: 4,
        num_kv_heads: 1,
        qk_head_dim: 44,
        v_head_dim: 44,
        intermediate_size: 8,
        sliding_window: None,
    };
    assert_eq!(
        KvFormat::Kivi4.layer_bytes(&l, 40),
        (32 * 2 * 16 + 44 * 4) + 8 * 44 * 2 + 40 * 2 * 18
    );
}

#[test]
fn kv_decoupled_dims_and_per_layer_shapes() {
    let l = LayerSpec {
        num_heads: 8,
        num_kv_heads: 2,
        qk_head_dim: 44,
        v_head_dim: 45,
        intermediate_size: 100,
        sliding_window: None,
    };
    assert_eq!(KvFormat::F16.layer_bytes_per_token(&l), 2 * (44 + 45) * 2);
    assert_eq!(KvFormat::K8v16.layer_k_bytes_per_token(&l), 2 * 46);
    assert_eq!(KvFormat::K8v16.layer_v_bytes_per_token(&l), 2 * 90);
    assert_eq!(
        KvFormat::Int4g32.layer_bytes_per_token(&l),
        2 * (2 * 18 + 2 * 18)
    );
}

#[test]
fn more_bits_never_lower_memory() {
    // Ordered by nominal bits per weight; checked on shapes whose width is a multiple of every
    // block (256), where padding does not distort the comparison. (With padding a coarse group
    // can cost more: SmolLM2's 576-wide rows need 5 groups of 128 = 640 values in w4g128.)
    use WeightFormat::*;
    let order = [W4g128, W4g64, W4g32, Q4_1, Q6K, Int8, Q8_0, F16, F32];
    for s in ["llama-3.2-1b", "gemma-2-2b", "llama-2-7b"] {
        let spec = preset(s).unwrap();
        for w in order.windows(2) {
            let a = weight_bytes(&spec, w[0], w[0]).total();
            let b = weight_bytes(&spec, w[1], w[1]).total();
            assert!(a <= b, "{s}: {} {a} > {} {b}", w[0], w[1]);
        }
        let kv = [
            KvFormat::Int4g32,
            KvFormat::Int8,
            KvFormat::K8v16,
            KvFormat::F16,
            KvFormat::F32,
        ];
        for w in kv.windows(2) {
            assert!(kv_bytes_per_token(&spec, w[0]) <= kv_bytes_per_token(&spec, w[1]));
        }
    }
}

#[test]
fn component_bytes_by_hand() {
    let s = preset("smollm2-135m").unwrap();
    let c = weight_bytes(&s, WeightFormat::W4g32, WeightFormat::Q8_0);
    // Embedding 49152 x 576 in q8_0: 18 blocks of 34 bytes per row.
    assert_eq!(c.embedding, 49_152 * 18 * 34);
    assert_eq!(c.lm_head, 0);
    // Per layer: q 576 rows x 18 groups, k and v 192 rows, o 576 rows (576 cols = 18 groups);
    // gate and up 1536 rows x 18 groups, down 576 rows x 48 groups; 18 bytes a group.
    let attn = (576 + 192 + 192 + 576) * 18 * 18;
    let mlp = (2 * 1536 * 18 + 576 * 48) * 18;
    assert_eq!(c.attention, 30 * attn);
    assert_eq!(c.mlp, 30 * mlp);
    assert_eq!(c.norms, 4 * (30 * 2 * 576 + 576));
}

#[test]
fn same_block_more_bits_never_lower_memory_for_any_shape() {
    use WeightFormat::*;
    for rows in [1u64, 3, 64, 577] {
        for cols in [1u64, 31, 32, 33, 255, 256, 257, 1000] {
            let b = |f: WeightFormat| f.matrix_bytes(rows, cols);
            assert!(b(W4g32) <= b(Q4_1) && b(Q4_1) <= b(Q8_0), "{rows}x{cols}");
            assert_eq!(b(W4g32), b(Q4_0));
            assert!(b(Q4K) <= b(Q6K));
            assert!(b(Int8) <= b(F16) + 2 * rows && b(F16) <= b(F32));
        }
    }
}

/// Gemma 2 from config.json: transformers slides the even layers (its `layer_types` default)
/// with `sliding_window` (default 4096), so their KV cache holds at most the window; an
/// explicit `layer_types` is followed as written. The bundled gemma-2-2b preset (26 layers,
/// window 4096) holds 13 full layers and 13 windows at 8192 tokens.
#[test]
fn gemma2_kv_bytes_follow_the_sliding_window() {
    let base = r#""model_type":"gemma2","hidden_size":32,"num_hidden_layers":3,
        "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
        "intermediate_size":32,"vocab_size":384,"max_position_embeddings":256"#;
    let windows = |json: String| -> Vec<Option<u32>> {
        ModelSpec::from_hf_config("g2", &json)
            .unwrap()
            .layers
            .iter()
            .map(|l| l.sliding_window)
            .collect()
    };
    assert_eq!(
        windows(format!("{{{base},\"sliding_window\":8}}")),
        [Some(8), None, Some(8)]
    );
    assert_eq!(
        windows(format!("{{{base}}}")),
        [Some(4096), None, Some(4096)]
    );
    assert_eq!(
        windows(format!(
            "{{{base},\"sliding_window\":8,\"layer_types\":[\"full_attention\",\"sliding_attention\",\"full_attention\"]}}"
        )),
        [None, Some(8), None]
    );
    let spec =
        ModelSpec::from_hf_config("g2", &format!("{{{base},\"sliding_window\":8}}")).unwrap();
    let per = 2 * 2 * 16 * 4;
    assert_eq!(kv_bytes(&spec, KvFormat::F32, 100), per * (8 + 100 + 8));
    let g = preset("gemma-2-2b").unwrap();
    let full = g
        .layers
        .iter()
        .filter(|l| l.sliding_window.is_none())
        .count();
    assert_eq!((g.layers.len(), full), (26, 13));
    let per_layer = |t: u64| 2 * 4 * 256 * 2 * t; // 4 KV heads × 256 dims, K and V, f16
    assert_eq!(
        kv_bytes(&g, KvFormat::F16, 8192),
        13 * per_layer(8192) + 13 * per_layer(4096)
    );
}

/// llama.cpp's Q4_K_M recipe (`LayerMix`): `use_more_bits` picks the first and last eighth of
/// the layers and every third between; those layers' `attn_v` and `ffn_down` are Q6_K, and a
/// 256-wide K-quant row that does not fill its block falls back to Q5_0 / Q5_1 / Q8_0 (f16
/// where 32 does not divide it either).
#[test]
fn q4_k_m_files_hold_v_and_down_of_half_the_layers_in_q6_k() {
    use edgefit_estimate::{weight_bytes_mixed, BlockMatrix, LayerMix};
    use WeightFormat::*;
    let picked: Vec<usize> = (0..32)
        .filter(|&i| LayerMix::use_more_bits(i, 32))
        .collect();
    assert_eq!(
        picked,
        [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    );
    for (f, cols, want) in [
        (Q4K, 4096, Q4K),
        (Q4K, 576, Q5_0),
        (Q5K, 896, Q5_1),
        (Q6K, 576, Q8_0),
        (Q4K, 100, F16),
        (W4g32, 576, W4g32),
        (Q8_0, 100, Q8_0),
    ] {
        assert_eq!(f.ggml_fallback(cols), want, "{f} at {cols}");
    }
    let mix = LayerMix {
        more_bits: Some(Q6K),
        block_fallback: true,
        token_embd: None,
        recipe: None,
    };
    assert_eq!(mix.format(Q4K, BlockMatrix::Down, 6, 32, 14336), Q6K);
    assert_eq!(mix.format(Q4K, BlockMatrix::Down, 7, 32, 14336), Q4K);
    assert_eq!(mix.format(Q4K, BlockMatrix::Plain, 0, 32, 4096), Q4K);
    assert_eq!(mix.format(Q4K, BlockMatrix::V, 0, 32, 576), Q8_0);

    // Llama 3 8B: 32 layers, d 4096, 8 KV heads of 128, I 14336.
    let spec = preset("llama-3-8b").unwrap();
    let pure = weight_bytes(&spec, Q4K, Q6K);
    let m = weight_bytes_mixed(&spec, Q4K, mix, Q6K);
    let (d, kv, i) = (4096u64, 1024u64, 14336u64);
    let extra = |rows, cols| Q6K.matrix_bytes(rows, cols) - Q4K.matrix_bytes(rows, cols);
    assert_eq!(m.attention - pure.attention, 16 * extra(kv, d));
    assert_eq!(m.mlp - pure.mlp, 16 * extra(d, i));
    assert_eq!(
        (m.embedding, m.lm_head, m.norms),
        (pure.embedding, pure.lm_head, pure.norms)
    );
    // A pure mix is the plain sum.
    assert_eq!(
        weight_bytes_mixed(&spec, Q4K, LayerMix::default(), Q6K),
        pure
    );
}
