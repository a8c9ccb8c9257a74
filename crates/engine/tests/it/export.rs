//! Exporting a model (HF safetensors layout) and reading it back through the engine's own
//! loaders gives the same model: identical logits, tokenizer and shape, pruned layers included;
//! converting weights between formats gives what loading in that format gives. The same for
//! the GGUF export through the GGUF loader.
// Native only: these tests use the native temp directory.
#![cfg(not(target_arch = "wasm32"))]

use candle_core::quantized::gguf_file::{self, Content, Value as GValue};
use candle_core::quantized::QTensor;
use candle_core::Device;
use edgefit_engine::config::LayerShape;
use edgefit_engine::export::{
    gguf_bytes as gguf_bytes_of, hf_files, save_hf, ExportDType, GgufDType,
};
use edgefit_engine::hf::load_hf;
use edgefit_engine::synthetic::{gguf_bytes, hf_files as synthetic_hf_files, SyntheticDType};
use edgefit_engine::{EngineError, LoadOptions, Logits, Model, TextTokenizer, WeightsFormat};
use edgefit_kernels::Matrix;

const SEED: u64 = 23;
const TEXT: &str = "the theme: 42 ü <|im_end|> the thesis";

const F32: LoadOptions = LoadOptions {
    weights: WeightsFormat::F32,
    embedding: None,
    requantize: false,
};

fn synthetic_f32() -> (Model, TextTokenizer) {
    let (config, tokenizer, tokenizer_config, st) = synthetic_hf_files(SEED).unwrap();
    load_hf(
        &config,
        tokenizer.as_bytes(),
        Some(&tokenizer_config),
        &[&st],
        F32,
    )
    .unwrap()
}

fn file<'a>(files: &'a [(String, Vec<u8>)], name: &str) -> &'a [u8] {
    &files
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} not exported"))
        .1
}

/// Loads exported files, optionally with a replaced `config.json`.
fn reload(
    files: &[(String, Vec<u8>)],
    config: Option<&str>,
    options: LoadOptions,
) -> edgefit_engine::Result<(Model, TextTokenizer)> {
    let text = |name| String::from_utf8(file(files, name).to_vec()).unwrap();
    let config = config.map_or_else(|| text("config.json"), str::to_string);
    load_hf(
        &config,
        file(files, "tokenizer.json"),
        Some(&text("tokenizer_config.json")),
        &[file(files, "model.safetensors")],
        options,
    )
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

fn assert_same_tokenizer(a: &TextTokenizer, b: &TextTokenizer) {
    assert_eq!(a.encode(TEXT).unwrap(), b.encode(TEXT).unwrap());
    assert_eq!(a.vocab_size(), b.vocab_size());
    assert!(b.has_chat_template());
    assert_eq!(
        a.apply_chat_template("hi").unwrap(),
        b.apply_chat_template("hi").unwrap()
    );
    assert_eq!(a.bos_text(), b.bos_text());
    assert_eq!(a.eos_text(), b.eos_text());
    assert_eq!(a.add_bos(), b.add_bos());
    for id in 0..a.vocab_size() as u32 {
        assert_eq!(a.is_stop(id), b.is_stop(id), "stop token {id}");
    }
}

#[test]
fn f32_export_reloads_with_identical_logits_config_and_tokenizer() {
    let (model, tok) = synthetic_f32();
    let files = hf_files(&model, &tok, ExportDType::F32).unwrap();
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "config.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "model.safetensors"
        ]
    );
    let config: serde_json::Value = serde_json::from_slice(file(&files, "config.json")).unwrap();
    assert_eq!(config["architectures"][0], "LlamaForCausalLM");
    assert_eq!(config["torch_dtype"], "float32");
    assert_eq!(
        config["rms_norm_eps"].as_f64(),
        Some(1e-5),
        "shortest decimal"
    );
    assert!(
        config.get("edgefit_layers").is_none(),
        "unpruned: no layers"
    );
    let (back, back_tok) = reload(&files, None, F32).unwrap();
    assert_eq!(back.config, model.config);
    assert!(back.weights.output.is_none(), "tied head stays tied");
    assert_same_tokenizer(&tok, &back_tok);
    let tokens = tok.encode(TEXT).unwrap();
    assert!(tokens.len() > 8);
    assert_eq!(
        max_diff(&logits(&model, &tokens), &logits(&back, &tokens)),
        0.0
    );
    // The exported safetensors equal the synthetic HF file tensor for tensor.
    let (.., st) = synthetic_hf_files(SEED).unwrap();
    let (a, b) = (
        safetensors::SafeTensors::deserialize(&st).unwrap(),
        safetensors::SafeTensors::deserialize(file(&files, "model.safetensors")).unwrap(),
    );
    let mut names = a.names();
    names.sort();
    let mut names_b = b.names();
    names_b.sort();
    assert_eq!(names, names_b);
    for n in names {
        assert_eq!(a.tensor(n).unwrap(), b.tensor(n).unwrap(), "{n}");
    }
}

/// Every weight (norms too) rounded through f16, as an f16 export stores them.
fn rounded_f16(model: &Model) -> Model {
    let r =
        |v: &[f32]| -> Vec<f32> { v.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect() };
    let m = |x: &Matrix| Matrix::F32 {
        data: r(&x.to_f32()),
        rows: x.rows(),
        cols: x.cols(),
    };
    let mut out = model.clone();
    let w = &mut out.weights;
    w.embed = m(&w.embed);
    w.final_norm = r(&w.final_norm);
    w.output = w.output.as_ref().map(m);
    for l in &mut w.layers {
        l.attn_norm = r(&l.attn_norm);
        l.ffn_norm = r(&l.ffn_norm);
        for x in [
            &mut l.wq,
            &mut l.wk,
            &mut l.wv,
            &mut l.wo,
            &mut l.w_gate,
            &mut l.w_up,
            &mut l.w_down,
        ] {
            *x = m(x);
        }
    }
    out
}

#[test]
fn f16_export_is_the_model_rounded_to_f16() {
    let (model, tok) = synthetic_f32();
    let files = hf_files(&model, &tok, ExportDType::F16).unwrap();
    let config: serde_json::Value = serde_json::from_slice(file(&files, "config.json")).unwrap();
    assert_eq!(config["torch_dtype"], "float16");
    let (back, _) = reload(&files, None, F32).unwrap();
    let tokens = tok.encode(TEXT).unwrap();
    let want = logits(&rounded_f16(&model), &tokens);
    assert_eq!(max_diff(&want, &logits(&back, &tokens)), 0.0);
    let base = logits(&model, &tokens);
    let scale = base.iter().map(|v| v.abs()).fold(0.0, f32::max);
    let d = max_diff(&base, &want) / scale;
    assert!(d > 0.0 && d < 5e-3, "f16 rounding moved logits by {d}");
}

/// Keeps `rows` of `m` (as f32).
fn keep_rows(m: &Matrix, rows: &[usize]) -> Matrix {
    let (w, cols) = (m.to_f32(), m.cols());
    Matrix::F32 {
        data: rows
            .iter()
            .flat_map(|&r| w[r * cols..(r + 1) * cols].iter().copied())
            .collect(),
        rows: rows.len(),
        cols,
    }
}

/// Keeps columns `keep` of `m` (as f32).
fn keep_cols(m: &Matrix, keep: &[usize]) -> Matrix {
    let (w, cols) = (m.to_f32(), m.cols());
    Matrix::F32 {
        data: w
            .chunks_exact(cols)
            .flat_map(|row| keep.iter().map(|&c| row[c]))
            .collect(),
        rows: m.rows(),
        cols: keep.len(),
    }
}

/// For heads of `dim` rows, the row indices of `heads` keeping `dims` of each.
fn head_rows(heads: &[usize], dim: usize, dims: &[usize]) -> Vec<usize> {
    heads
        .iter()
        .flat_map(|h| dims.iter().map(move |d| h * dim + d))
        .collect()
}

/// The synthetic model pruned by hand, non-uniformly: layer 0 loses a KV group (heads 0, 1 and
/// KV head 0) and every sixth MLP channel; layer 1 loses RoPE pair 3 of every q/k head and
/// four value dimensions of every head.
fn pruned() -> (Model, TextTokenizer) {
    use edgefit_engine::synthetic::{FFN, HEAD_DIM};
    let (mut model, tok) = synthetic_f32();
    let c = model.config.clone();
    let all_dims: Vec<usize> = (0..HEAD_DIM).collect();
    // Layer 0.
    let ffn: Vec<usize> = (0..FFN).filter(|i| i % 6 != 5).collect();
    let l0 = &mut model.weights.layers[0];
    l0.wq = keep_rows(&l0.wq, &head_rows(&[2, 3], HEAD_DIM, &all_dims));
    l0.wk = keep_rows(&l0.wk, &head_rows(&[1], HEAD_DIM, &all_dims));
    l0.wv = keep_rows(&l0.wv, &head_rows(&[1], HEAD_DIM, &all_dims));
    l0.wo = keep_cols(&l0.wo, &head_rows(&[2, 3], HEAD_DIM, &all_dims));
    l0.w_gate = keep_rows(&l0.w_gate, &ffn);
    l0.w_up = keep_rows(&l0.w_up, &ffn);
    l0.w_down = keep_cols(&l0.w_down, &ffn);
    let shape0 = LayerShape {
        n_heads: 2,
        n_kv_heads: 1,
        qk_dim: HEAD_DIM,
        v_dim: HEAD_DIM,
        ffn: ffn.len(),
        rope_pairs: (0..(HEAD_DIM / 2) as u16).collect(),
    };
    // Layer 1: internal pair order, pair 3 = rows 6 and 7 of each head.
    let qk_dims: Vec<usize> = (0..HEAD_DIM).filter(|d| d / 2 != 3).collect();
    let v_dims: Vec<usize> = (0..HEAD_DIM).filter(|d| d % 4 != 1).collect();
    let heads: Vec<usize> = (0..c.n_heads).collect();
    let kv_heads: Vec<usize> = (0..c.n_kv_heads).collect();
    let l1 = &mut model.weights.layers[1];
    l1.wq = keep_rows(&l1.wq, &head_rows(&heads, HEAD_DIM, &qk_dims));
    l1.wk = keep_rows(&l1.wk, &head_rows(&kv_heads, HEAD_DIM, &qk_dims));
    l1.wv = keep_rows(&l1.wv, &head_rows(&kv_heads, HEAD_DIM, &v_dims));
    l1.wo = keep_cols(&l1.wo, &head_rows(&heads, HEAD_DIM, &v_dims));
    let shape1 = LayerShape {
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        qk_dim: qk_dims.len(),
        v_dim: v_dims.len(),
        ffn: c.ffn,
        rope_pairs: vec![0, 1, 2, 4, 5, 6, 7],
    };
    let mut config = c;
    config.layers = Some(vec![shape0, shape1]);
    config.validate().unwrap();
    let weights = model.weights.clone();
    (Model::new(config, weights), tok)
}

#[test]
fn pruned_model_round_trips_with_identical_logits_and_layers() {
    let (model, tok) = pruned();
    let tokens = tok.encode(TEXT).unwrap();
    let want = logits(&model, &tokens);
    let (full, _) = synthetic_f32();
    assert!(
        max_diff(&want, &logits(&full, &tokens)) > 0.0,
        "pruning did something"
    );
    let files = hf_files(&model, &tok, ExportDType::F32).unwrap();
    let config: serde_json::Value = serde_json::from_slice(file(&files, "config.json")).unwrap();
    assert_eq!(config["edgefit_layers"][1]["qk_dim"], 14);
    assert_eq!(config["num_attention_heads"], 4, "globals stay unpruned");
    let (back, back_tok) = reload(&files, None, F32).unwrap();
    assert_eq!(back.config.layers, model.config.layers);
    assert_eq!(back.config, model.config);
    assert_same_tokenizer(&tok, &back_tok);
    assert_eq!(max_diff(&want, &logits(&back, &tokens)), 0.0);

    // Written to disk and read back the same way.
    let dir = std::env::temp_dir().join(format!("edgefit-export-test-{}", std::process::id()));
    let paths = save_hf(&model, &tok, &dir, ExportDType::F32).unwrap();
    assert_eq!(paths.len(), 4);
    let on_disk: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(n, _)| (n.clone(), std::fs::read(dir.join(n)).unwrap()))
        .collect();
    assert_eq!(on_disk, files);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_edgefit_layers_are_clear_errors() {
    let (model, tok) = pruned();
    let files = hf_files(&model, &tok, ExportDType::F32).unwrap();
    let config: serde_json::Value = serde_json::from_slice(file(&files, "config.json")).unwrap();
    let bad = |edit: &dyn Fn(&mut serde_json::Value), expect: &str| {
        let mut c = config.clone();
        edit(&mut c["edgefit_layers"]);
        let err = match reload(&files, Some(&c.to_string()), F32) {
            Ok(_) => panic!("accepted bad edgefit_layers ({expect})"),
            Err(e) => e,
        };
        assert!(matches!(err, EngineError::Config(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("`edgefit_layers`"), "{msg}");
        assert!(msg.contains(expect), "{msg} should say {expect}");
    };
    bad(
        &|l| {
            l.as_array_mut().unwrap().pop();
        },
        "1 layer shapes for n_layers = 2",
    );
    bad(
        &|l| l[1]["qk_dim"] = 13.into(),
        "layer 1: qk_dim = 13 but 7 RoPE pairs",
    );
    bad(
        &|l| l[1]["rope_pairs"][6] = 8.into(),
        "RoPE pairs must be increasing and below 8",
    );
    bad(
        &|l| l[0]["ffn"] = 1000.into(),
        "layer 0: ffn = 1000 is outside 1..=96",
    );
    bad(&|l| l[0]["ffn"] = (-1).into(), "invalid value");
    bad(&|l| *l = "wide".into(), "invalid type");
    // `null` is the same as absent: the tensors then have the wrong (pruned) shapes.
    let mut c = config.clone();
    c["edgefit_layers"] = serde_json::Value::Null;
    let err = reload(&files, Some(&c.to_string()), F32).err().unwrap();
    assert!(matches!(err, EngineError::Tensor { .. }), "{err}");
}

fn gguf_as(options: LoadOptions) -> Model {
    let bytes = gguf_bytes(SEED, SyntheticDType::F32).unwrap();
    edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
        .unwrap()
        .0
}

fn same_weights(a: &Model, b: &Model) {
    let (wa, wb) = (&a.weights, &b.weights);
    assert_eq!(wa.bytes(), wb.bytes());
    assert_eq!(wa.summary(), wb.summary());
    let all = |w: &edgefit_engine::weights::Weights| -> Vec<Vec<f32>> {
        std::iter::once(&w.embed)
            .chain(w.layers.iter().flat_map(|l| l.matrices()))
            .chain(w.output.iter())
            .map(Matrix::to_f32)
            .collect()
    };
    assert!(all(wa) == all(wb), "matrices differ");
}

#[test]
fn converted_weights_equal_loading_that_format() {
    let f32_model = gguf_as(F32);
    let tokens: Vec<u32> = (40..56).collect();
    let base = logits(&f32_model, &tokens);
    let scale = base.iter().map(|v| v.abs()).fold(0.0, f32::max);
    for (options, budget) in [
        (LoadOptions::default(), 0.3),
        (
            LoadOptions {
                weights: WeightsFormat::W4g128,
                embedding: Some(WeightsFormat::F16),
                requantize: false,
            },
            0.3,
        ),
        (
            LoadOptions {
                weights: WeightsFormat::Q8_0,
                ..F32
            },
            0.03,
        ),
        (
            LoadOptions {
                weights: WeightsFormat::F16,
                ..F32
            },
            0.005,
        ),
    ] {
        let direct = gguf_as(options);
        let mut conv = f32_model.clone();
        conv.weights = f32_model.weights.converted(options).unwrap();
        assert_eq!(conv.weights.options, options);
        same_weights(&direct, &conv);
        let mut consumed = f32_model.clone();
        consumed.weights = f32_model.weights.clone().into_converted(options).unwrap();
        same_weights(&direct, &consumed);
        let got = logits(&conv, &tokens);
        assert_eq!(got, logits(&direct, &tokens), "{options:?}");
        let d = max_diff(&base, &got) / scale;
        assert!(d > 0.0 && d < budget, "{options:?}: relative error {d}");
    }
    // Converting to the format already held keeps every matrix as it is (no re-rounding).
    let w4 = gguf_as(LoadOptions::default());
    let mut again = w4.clone();
    again.weights = w4.weights.converted(LoadOptions::default()).unwrap();
    same_weights(&w4, &again);
    // Q4_1 blocks (asymmetric) count as w4g32, as when loading.
    let q41 = gguf_bytes(SEED, SyntheticDType::Q4_1).unwrap();
    let (q41, _) = edgefit_engine::gguf::load_gguf(
        &mut std::io::Cursor::new(q41),
        LoadOptions::default(),
        &mut |_, _| {},
    )
    .unwrap();
    let kept = q41.weights.converted(LoadOptions::default()).unwrap();
    assert_eq!(kept.summary(), q41.weights.summary());
    let rerounded = q41
        .weights
        .converted(LoadOptions {
            requantize: true,
            ..LoadOptions::default()
        })
        .unwrap();
    assert!(rerounded
        .summary()
        .stored
        .iter()
        .all(|s| s.format != "q4_1"));
}

#[test]
fn pruned_model_quantizes_and_stays_close() {
    let (model, tok) = pruned();
    let tokens = tok.encode(TEXT).unwrap();
    let base = logits(&model, &tokens);
    let scale = base.iter().map(|v| v.abs()).fold(0.0, f32::max);
    let mut q = model.clone();
    q.weights = model.weights.converted(LoadOptions::default()).unwrap();
    assert!(q.weights.bytes() * 4 < model.weights.bytes());
    let d = max_diff(&base, &logits(&q, &tokens)) / scale;
    assert!(
        d > 0.0 && d < 0.3,
        "w4g32 of the pruned model: relative error {d}"
    );
    // Exporting the quantized model writes its dequantized values; reloading as f32 and
    // converting again reproduces the same 4-bit matrices' values closely.
    let files = hf_files(&q, &tok, ExportDType::F32).unwrap();
    let (back, _) = reload(&files, None, F32).unwrap();
    assert_eq!(back.config, model.config);
    let d = max_diff(&logits(&back, &tokens), &base) / scale;
    assert!(d < 0.3, "dequantized export: relative error {d}");
}

fn load_gguf_bytes(
    bytes: Vec<u8>,
    options: LoadOptions,
) -> edgefit_engine::Result<(Model, TextTokenizer)> {
    edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), options, &mut |_, _| {})
}

#[test]
fn gguf_export_round_trips_unpruned_and_pruned() {
    for (model, tok) in [synthetic_f32(), pruned()] {
        let tokens = tok.encode(TEXT).unwrap();
        let want = logits(&model, &tokens);
        let bytes = gguf_bytes_of(&model, &tok, GgufDType::F32).unwrap();
        let (back, back_tok) = load_gguf_bytes(bytes, F32).unwrap();
        assert_eq!(back.config, model.config);
        assert_same_tokenizer(&tok, &back_tok);
        assert_eq!(max_diff(&want, &logits(&back, &tokens)), 0.0);

        // F16 and Q8_0 (the pruned MLP's 80-wide down projection falls back to F16).
        let scale = want.iter().map(|v| v.abs()).fold(0.0, f32::max);
        for (dtype, budget) in [(GgufDType::F16, 5e-3), (GgufDType::Q8_0, 0.03)] {
            let bytes = gguf_bytes_of(&model, &tok, dtype).unwrap();
            let (back, _) = load_gguf_bytes(bytes, F32).unwrap();
            let d = max_diff(&want, &logits(&back, &tokens)) / scale;
            assert!(d > 0.0 && d < budget, "{dtype}: relative error {d}");
        }
    }
}

#[test]
fn gguf_q8_0_export_keeps_q8_0_blocks_exactly() {
    let q8 = LoadOptions {
        weights: WeightsFormat::Q8_0,
        ..F32
    };
    let (model, tok) =
        load_gguf_bytes(gguf_bytes(SEED, SyntheticDType::Q8_0).unwrap(), q8).unwrap();
    let bytes = gguf_bytes_of(&model, &tok, GgufDType::Q8_0).unwrap();
    let (back, _) = load_gguf_bytes(bytes, q8).unwrap();
    same_weights(&model, &back);
    let tokens = tok.encode(TEXT).unwrap();
    assert_eq!(logits(&model, &tokens), logits(&back, &tokens));
}

/// The exported pruned GGUF with one metadata value replaced.
fn pruned_gguf_with(key: &str, value: GValue) -> Vec<u8> {
    let (model, tok) = pruned();
    let bytes = gguf_bytes_of(&model, &tok, GgufDType::F32).unwrap();
    let mut cursor = std::io::Cursor::new(bytes);
    let content = Content::read(&mut cursor).unwrap();
    let mut md: Vec<(String, GValue)> = content.metadata.clone().into_iter().collect();
    md.retain(|(k, _)| k != key);
    md.push((key.to_string(), value));
    let tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|n| {
            let t = content.tensor(&mut cursor, n, &Device::Cpu).unwrap();
            (n.clone(), t)
        })
        .collect();
    let md_refs: Vec<(&str, &GValue)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md_refs, &t_refs).unwrap();
    out.into_inner()
}

#[test]
fn bad_gguf_layer_keys_are_clear_errors() {
    let u32s = |v: &[u32]| GValue::Array(v.iter().map(|x| GValue::U32(*x)).collect());
    for (key, value, expect) in [
        (
            "edgefit.layers.key_length",
            u32s(&[16]),
            "has 1 entries for 2 layers",
        ),
        (
            "edgefit.layers.rope_pairs",
            u32s(&[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 4, 5, 6, 8]),
            "RoPE pairs must be increasing and below 8",
        ),
        (
            "edgefit.layers.rope_pairs",
            u32s(&[0, 1, 2]),
            "ends before layer 0's 8 pairs",
        ),
        (
            "edgefit.layers.value_length",
            u32s(&[16, 17]),
            "layer 1: v_dim = 17 is outside 1..=16",
        ),
        (
            "edgefit.layers.head_count",
            GValue::U32(4),
            "is not an array",
        ),
    ] {
        let err = match load_gguf_bytes(pruned_gguf_with(key, value), F32) {
            Ok(_) => panic!("accepted bad {key}"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("edgefit.layers"), "{err}");
        assert!(err.contains(expect), "{err} should say {expect}");
    }
}

/// The estimator reads a pruned export (GGUF header or config.json) into exactly the shape the
/// engine holds, per layer, Q/K dims included (the tensor widths alone cannot tell a narrower
/// head from fewer heads).
#[test]
fn the_estimator_reads_pruned_exports_per_layer() {
    let (model, tok) = pruned();
    let want = model.config.to_spec().layers;
    assert_ne!(want[0], want[1], "the layers differ");

    let bytes = gguf_bytes_of(&model, &tok, GgufDType::F32).unwrap();
    let md =
        edgefit_engine::gguf::read_estimate_metadata(&mut std::io::Cursor::new(bytes)).unwrap();
    assert_eq!(md.to_spec("pruned").unwrap().layers, want);

    let files = hf_files(&model, &tok, ExportDType::F32).unwrap();
    let config = std::str::from_utf8(file(&files, "config.json")).unwrap();
    let spec = edgefit_estimate::ModelSpec::from_hf_config("pruned", config).unwrap();
    assert_eq!(spec.layers, want);

    // A per-layer array of the wrong length is named, not guessed around.
    let bad = pruned_gguf_with(
        "edgefit.layers.key_length",
        GValue::Array(vec![GValue::U32(16)]),
    );
    let md = edgefit_engine::gguf::read_estimate_metadata(&mut std::io::Cursor::new(bad)).unwrap();
    let err = md.to_spec("pruned").unwrap_err().to_string();
    assert!(err.contains("edgefit.layers.key_length"), "{err}");
}
