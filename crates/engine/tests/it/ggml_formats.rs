//! GGUF tensors in Q5_0, Q5_1, Q4_K, Q5_K and Q6_K load as their own blocks (no re-rounding)
//! into every 2-D weight, the embedding and the untied output head included; the formats held
//! are what the model info lists, the memory preflight and the estimator's byte arithmetic
//! count exactly what is held, requested formats still convert (and say so), and the types the
//! kernels do not run (Q2_K, Q3_K) are converted and named. Crafted files (a tiny LLaMA with
//! a 256-wide hidden size, every matrix in one type, written with candle-core's GGUF writer),
//! plus tensor-level checks of the real Gemma 3 270M Q4_K_M file when it is present.
#![cfg(not(target_arch = "wasm32"))]

use std::io::{Cursor, Read, Seek, SeekFrom};
use std::str::FromStr;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use edgefit_engine::gguf::{gguf_memory_need, load_gguf, read_matrices};
use edgefit_engine::model::Logits;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{LoadOptions, Model, WeightsFormat};
use edgefit_estimate::WeightFormat;
use edgefit_kernels::{Matrix, W4Kind, W4Matrix};

const HIDDEN: usize = 256;
const KV_WIDTH: usize = 128;
const FFN: usize = 512;
const LAYERS: usize = 2;

/// Deterministic values in about ±`scale` (xorshift).
fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The synthetic model's metadata and tokenizer with a 256-wide hidden size (4 heads of 64, 2
/// KV heads, FFN 512), an untied output head, and every matrix stored as `dtype`.
fn craft(dtype: GgmlDType) -> Vec<u8> {
    let base = gguf_bytes(1, SyntheticDType::F32).unwrap();
    let content = Content::read(&mut Cursor::new(&base)).unwrap();
    let vocab = content.tensor_infos["token_embd.weight"].shape.dims()[0];
    let mut md: Vec<(String, Value)> = content.metadata.into_iter().collect();
    md.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in md.iter_mut() {
        match k.as_str() {
            "llama.embedding_length" => *v = Value::U32(HIDDEN as u32),
            "llama.feed_forward_length" => *v = Value::U32(FFN as u32),
            "llama.rope.dimension_count" => *v = Value::U32(64),
            _ => {}
        }
    }
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        ("token_embd.weight".into(), vec![vocab, HIDDEN]),
        ("output.weight".into(), vec![vocab, HIDDEN]),
        ("output_norm.weight".into(), vec![HIDDEN]),
    ];
    for l in 0..LAYERS {
        for (part, dims) in [
            ("attn_norm.weight", vec![HIDDEN]),
            ("attn_q.weight", vec![HIDDEN, HIDDEN]),
            ("attn_k.weight", vec![KV_WIDTH, HIDDEN]),
            ("attn_v.weight", vec![KV_WIDTH, HIDDEN]),
            ("attn_output.weight", vec![HIDDEN, HIDDEN]),
            ("ffn_norm.weight", vec![HIDDEN]),
            ("ffn_gate.weight", vec![FFN, HIDDEN]),
            ("ffn_up.weight", vec![FFN, HIDDEN]),
            ("ffn_down.weight", vec![HIDDEN, FFN]),
        ] {
            shapes.push((format!("blk.{l}.{part}"), dims));
        }
    }
    let tensors: Vec<(String, QTensor)> = shapes
        .into_iter()
        .enumerate()
        .map(|(i, (name, dims))| {
            let n = dims.iter().product();
            let (v, dt) = if dims.len() == 1 {
                (
                    values(i as u64 + 7, n, 0.1)
                        .iter()
                        .map(|x| 1.0 + x)
                        .collect(),
                    GgmlDType::F32,
                )
            } else {
                (values(i as u64 + 7, n, 0.08), dtype)
            };
            let t = Tensor::from_vec(v, dims, &Device::Cpu).unwrap();
            (name, QTensor::quantize(&t, dt).unwrap())
        })
        .collect();
    let md: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md, &ts).unwrap();
    out.into_inner()
}

fn load(bytes: &[u8], options: LoadOptions) -> Model {
    load_gguf(&mut Cursor::new(bytes), options, &mut |_, _| {})
        .unwrap()
        .0
}

/// Every matrix of `model` with its GGUF name.
fn matrices(model: &Model) -> Vec<(String, &Matrix)> {
    let w = &model.weights;
    let mut out = vec![("token_embd.weight".to_string(), &w.embed)];
    let parts = [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ];
    for (l, layer) in w.layers.iter().enumerate() {
        for (p, m) in parts.iter().zip(layer.matrices()) {
            out.push((format!("blk.{l}.{p}.weight"), m));
        }
    }
    out.extend(w.output.iter().map(|m| ("output.weight".to_string(), m)));
    out
}

/// candle-core's dequantization of tensor `name` (its port of ggml's `dequantize_row_*`).
fn candle_f32(bytes: &[u8], name: &str) -> Vec<f32> {
    let mut r = Cursor::new(bytes);
    let content = Content::read(&mut r).unwrap();
    content.tensor_infos[name]
        .read(&mut r, content.tensor_data_offset, &Device::Cpu)
        .unwrap()
        .dequantize(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

/// Asserts the model's conversions are `want`: (from, to, how many tensors).
fn assert_converted(model: &Model, want: &[(&str, &str, usize)]) {
    let s = model.weights.summary();
    let conv: Vec<(&str, &str, usize)> = s
        .converted
        .iter()
        .map(|c| (c.from.as_str(), c.to.as_str(), c.tensors.len()))
        .collect();
    println!("converted {conv:?}");
    assert_eq!(conv, want);
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn weights(
    weights: WeightsFormat,
    embedding: Option<WeightsFormat>,
    requantize: bool,
) -> LoadOptions {
    LoadOptions {
        weights,
        embedding,
        requantize,
    }
}

const KEPT: [(GgmlDType, &str); 5] = [
    (GgmlDType::Q5_0, "q5_0"),
    (GgmlDType::Q5_1, "q5_1"),
    (GgmlDType::Q4K, "q4_k"),
    (GgmlDType::Q5K, "q5_k"),
    (GgmlDType::Q6K, "q6_k"),
];

/// Default loading keeps every matrix's blocks: each dequantizes bit for bit to candle's
/// dequantization of the file's tensor, holds exactly the estimator's bytes for its format,
/// the info lists the format with no conversion, the preflight counts the bytes held, and the
/// forward pass on the blocks agrees with the same values held as f32.
#[test]
fn every_ggml_block_type_loads_as_its_blocks() {
    for (dtype, name) in KEPT {
        let bytes = craft(dtype);
        let model = load(&bytes, LoadOptions::default());
        let mut held = 0u64;
        for (tensor, m) in matrices(&model) {
            assert_eq!(m.format_name(), name, "{tensor}");
            assert!(matches!(m, Matrix::Ggml(_)), "{tensor}");
            assert!(
                same_bits(&m.to_f32(), &candle_f32(&bytes, &tensor)),
                "{name} {tensor}: dequantized values differ from candle's"
            );
            let est = WeightFormat::from_str(name).unwrap();
            assert_eq!(
                m.bytes(),
                est.matrix_bytes(m.rows() as u64, m.cols() as u64)
            );
            held += m.bytes();
        }
        let summary = model.weights.summary();
        assert_eq!(summary.weights, "auto");
        assert_eq!(summary.stored.len(), 1, "{summary:?}");
        assert_eq!(summary.stored[0].format, name);
        assert_eq!(summary.stored[0].matrices, 2 + 7 * LAYERS);
        assert_eq!(summary.stored[0].bytes, held);
        assert!(summary.converted.is_empty(), "{:?}", summary.converted);
        let options = LoadOptions::default();
        let need = gguf_memory_need(&mut Cursor::new(&bytes), &model.config, &options).unwrap();
        assert_eq!(need.weights + need.embedding, held, "{name} preflight");
        assert_eq!(
            need.weights + need.embedding + need.norms,
            model.weights.bytes()
        );

        let f32_model = load(&bytes, weights(WeightsFormat::F32, None, false));
        let tokens: Vec<u32> = (3..19).collect();
        let run = |m: &Model| {
            let mut cache = m.new_cache(32);
            m.forward(&tokens, &mut cache, Logits::All).unwrap()
        };
        let (a, b) = (run(&model), run(&f32_model));
        let scale = b.iter().fold(0f32, |s, x| s.max(x.abs()));
        let diff = a
            .iter()
            .zip(&b)
            .fold(0f32, |s, (x, y)| s.max((x - y).abs()));
        println!("{name}: blocks vs the same values in f32, logits max |diff| {diff:.2e} (max |logit| {scale:.3})");
        assert!(a.iter().all(|x| x.is_finite()));
        // int16 activations (2^-15 relative per block) on 256- and 512-long dot products.
        assert!(diff <= 2e-3 * scale.max(1.0), "{name}: {diff} vs {scale}");
    }
}

/// Requested formats still convert K-quant blocks (`w4g32`, `--requantize`), and each
/// conversion is named with its tensors; an explicit `auto` embedding keeps its blocks.
#[test]
fn requested_formats_convert_and_are_named() {
    let bytes = craft(GgmlDType::Q4K);
    let model = load(&bytes, weights(WeightsFormat::W4g32, None, false));
    let s = model.weights.summary();
    let formats: Vec<(&str, usize)> = s
        .stored
        .iter()
        .map(|f| (f.format.as_str(), f.matrices))
        .collect();
    assert_eq!(formats, [("q8_0", 2), ("w4g32", 7 * LAYERS)]);
    let conv: Vec<(&str, &str, usize)> = s
        .converted
        .iter()
        .map(|c| (c.from.as_str(), c.to.as_str(), c.tensors.len()))
        .collect();
    assert_eq!(conv, [("q4_k", "q8_0", 2), ("q4_k", "w4g32", 7 * LAYERS)]);
    assert!(s.converted[1]
        .tensors
        .contains(&"blk.1.ffn_down.weight".to_string()));
    println!("q4_k file as w4g32: stored {formats:?}, converted {conv:?}");
    let need = gguf_memory_need(
        &mut Cursor::new(&bytes),
        &model.config,
        &weights(WeightsFormat::W4g32, None, false),
    )
    .unwrap();
    assert_eq!(
        need.weights + need.embedding + need.norms,
        model.weights.bytes()
    );

    let rq = load(&bytes, weights(WeightsFormat::Auto, None, true));
    let rq_summary = rq.weights.summary();
    let formats: Vec<&str> = rq_summary
        .stored
        .iter()
        .map(|f| f.format.as_str())
        .collect();
    assert_eq!(formats, ["q8_0", "w4g32"]);
    assert_eq!(rq_summary.converted.len(), 2);

    let kept_embedding = load(
        &bytes,
        weights(WeightsFormat::W4g32, Some(WeightsFormat::Auto), false),
    );
    assert_eq!(kept_embedding.weights.embed.format_name(), "q4_k");
    assert_eq!(kept_embedding.weights.layers[0].wq.format_name(), "w4g32");
}

/// Q2_K and Q3_K (no kernels) are dequantized and converted, as w4g32 layers and a q8_0
/// embedding / output head, and the model info names every converted tensor.
#[test]
fn types_without_kernels_are_converted_and_named() {
    for (dtype, name) in [(GgmlDType::Q2K, "q2_k"), (GgmlDType::Q3K, "q3_k")] {
        let bytes = craft(dtype);
        let model = load(&bytes, LoadOptions::default());
        let s = model.weights.summary();
        assert_converted(&model, &[(name, "q8_0", 2), (name, "w4g32", 7 * LAYERS)]);
        assert_eq!(
            s.converted[0].tensors,
            ["token_embd.weight", "output.weight"]
        );
        let options = LoadOptions::default();
        let need = gguf_memory_need(&mut Cursor::new(&bytes), &model.config, &options).unwrap();
        assert_eq!(
            need.weights + need.embedding + need.norms,
            model.weights.bytes()
        );
        // The conversion starts from candle's dequantization, then edgefit's w4g32 quantizer.
        let want = candle_f32(&bytes, "blk.0.attn_q.weight");
        let w4 = W4Matrix::quantize(&want, HIDDEN, HIDDEN, 32, W4Kind::Symmetric).unwrap();
        let got = model.weights.layers[0].wq.to_f32();
        assert!(same_bits(&got, &w4.dequantize()), "{name}");
    }
}

/// The real Gemma 3 270M Q4_K_M file, tensor by tensor (its forward pass is another
/// branch's): every 2-D tensor loads, by default, in the file's own type, dequantizes bit for
/// bit to candle's dequantization (the embedding on sample rows), and holds exactly the
/// estimator's bytes for that type.
#[test]
fn gemma3_q4_k_m_tensors_load_as_stored() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/gemma3-270m-it-q4_k_m.gguf");
    let Ok(file) = std::fs::File::open(&path) else {
        println!(
            "SKIPPED: {} is absent (`cargo xtask setup --gemma` fetches it)",
            path.display()
        );
        return;
    };
    let mut r = std::io::BufReader::new(file);
    let content = Content::read(&mut r).unwrap();
    let options = LoadOptions::default();
    let mut counts: Vec<(String, usize, u64)> = Vec::new();
    let mut rows_checked = 0usize;
    let mut file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    read_matrices(&mut file, &options, |name, m| {
        let info = &content.tensor_infos[name];
        let (rows, cols) = (info.shape.dims()[0], info.shape.dims()[1]);
        let ty = format!("{:?}", info.ggml_dtype)
            .to_lowercase()
            .replace("k", "_k");
        assert_eq!(m.format_name(), ty, "{name}");
        let est = WeightFormat::from_str(&ty).unwrap();
        assert_eq!(
            m.bytes(),
            est.matrix_bytes(rows as u64, cols as u64),
            "{name}"
        );
        // Sample rows: the first two, a third, the middle, the last.
        let row_bytes = info.ggml_dtype.type_size() * cols / info.ggml_dtype.block_size();
        let mut raw = vec![0u8; row_bytes];
        let mut got = vec![0f32; cols];
        for row in [0, 1, rows / 3, rows / 2, rows - 1] {
            r.seek(SeekFrom::Start(
                content.tensor_data_offset + info.offset + (row * row_bytes) as u64,
            ))
            .unwrap();
            r.read_exact(&mut raw).unwrap();
            let want: Vec<f32> = qtensor_from_ggml(info.ggml_dtype, &raw, vec![cols], &Device::Cpu)
                .unwrap()
                .dequantize(&Device::Cpu)
                .unwrap()
                .to_vec1()
                .unwrap();
            m.row(row, &mut got);
            assert!(same_bits(&got, &want), "{name} row {row}");
            rows_checked += 1;
        }
        match counts.iter_mut().find(|c| c.0 == ty) {
            Some(c) => {
                c.1 += 1;
                c.2 += m.bytes();
            }
            None => counts.push((ty, 1, m.bytes())),
        }
        Ok(())
    })
    .unwrap();
    println!("{rows_checked} sample rows equal candle's dequantization bit for bit");
    println!("gemma3-270m-it-q4_k_m.gguf as held (format, matrices, bytes): {counts:?}");
    let total: usize = counts.iter().map(|c| c.1).sum();
    assert_eq!(total, 127);
}

/// IQ4_NL (ggml type 20), which llama.cpp's quantizer writes for IQ4_NL files and for the rows
/// other low-bit types cannot cover: the synthetic Q4_0 file with every Q4_0 tensor's type
/// set to IQ4_NL (the same block size and layout) loads; each value is the block's scale times
/// `kvalues_iq4nl[index]` (the table `iq4_nl_blocks_become_q8_0_blocks_of_the_same_values`
/// checks against gguf-py), not Q4_0's `index − 8`; with `auto` the blocks are held as Q8_0
/// blocks (exact), which the memory preflight counts; the header readers see the file as it
/// is. A block with a non-finite scale is refused naming the tensor.
#[test]
fn iq4_nl_tensors_load_as_q8_0_blocks_of_their_values() {
    use crate::common::hostile_cases::{layout, set_u32};
    const TABLE: [f32; 16] = [
        -127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0,
        69.0, 89.0, 113.0,
    ];
    let mut bytes = gguf_bytes(7, SyntheticDType::Q4_0).unwrap();
    let l = layout(&bytes);
    let mut patched = Vec::new();
    for t in &l.tensors {
        if u32::from_le_bytes(bytes[t.dtype_at..t.dtype_at + 4].try_into().unwrap()) == 2 {
            set_u32(&mut bytes, t.dtype_at, 20);
            patched.push(t.name.clone());
        }
    }
    assert!(patched.len() >= 7, "{patched:?}");
    let mut seen = 0;
    read_matrices(
        &mut Cursor::new(&bytes),
        &weights(WeightsFormat::F32, Some(WeightsFormat::F32), false),
        |name, m| {
            if !patched.iter().any(|p| p == name) {
                return Ok(());
            }
            let data = l.data_of(name);
            let n = m.rows() * m.cols();
            let want: Vec<f32> = bytes[data..data + n / 32 * 18]
                .chunks_exact(18)
                .flat_map(|b| {
                    let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                    let lo = b[2..].iter().map(move |q| d * TABLE[usize::from(q & 0xf)]);
                    let hi = b[2..].iter().map(move |q| d * TABLE[usize::from(q >> 4)]);
                    lo.chain(hi).collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(m.to_f32(), want, "{name}");
            seen += 1;
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(seen, patched.len());
    let (model, _) = load_gguf(
        &mut Cursor::new(&bytes),
        LoadOptions::default(),
        &mut |_, _| {},
    )
    .expect("an IQ4_NL file loads");
    let l0 = &model.weights.layers[0];
    for m in [
        &l0.wq, &l0.wk, &l0.wv, &l0.wo, &l0.w_gate, &l0.w_up, &l0.w_down,
    ] {
        assert_eq!(m.format_name(), "q8_0");
    }
    let need = gguf_memory_need(
        &mut Cursor::new(&bytes),
        &model.config,
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        need.weights + need.embedding + need.norms,
        model.weights.bytes()
    );
    let logits = model
        .forward(&[1, 2, 3], &mut model.new_cache(16), Logits::Last)
        .unwrap();
    assert!(logits.iter().all(|v| v.is_finite()));
    edgefit_engine::gguf::check_header(&mut Cursor::new(&bytes)).unwrap();
    edgefit_engine::gguf::read_estimate_metadata(&mut Cursor::new(&bytes)).unwrap();

    let name = &patched[0];
    let at = l.data_of(name) + 18;
    bytes[at..at + 2].copy_from_slice(&half::f16::INFINITY.to_le_bytes());
    let err = load_gguf(
        &mut Cursor::new(&bytes),
        LoadOptions::default(),
        &mut |_, _| {},
    )
    .map(|_| ())
    .unwrap_err();
    assert!(
        err.to_string().contains(name.as_str()) && err.to_string().contains("block scale"),
        "{err}"
    );
}

/// IQ4_XS (ggml type 23, IQ4_XS files): a crafted 256-wide file whose matrices are IQ4_XS, each
/// super-block one of `tests/golden/ggml/iq4.json`'s (gguf-py's values), loads; read as f32
/// every matrix holds gguf-py's values; by default the kernels have no IQ4_XS blocks, so the
/// matrices are converted (`w4g32`, the embedding and head `q8_0`) and named, and the memory
/// preflight counts what is held.
#[test]
fn iq4_xs_tensors_load_as_gguf_py_reads_them_and_convert_by_name() {
    use crate::common::hostile_cases::{layout, set_u32};
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/golden/ggml/iq4.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let raw: Vec<u8> = serde_json::from_value(doc["iq4_xs"]["bytes"].clone()).unwrap();
    let values: Vec<f32> = serde_json::from_value(doc["iq4_xs"]["values"].clone()).unwrap();
    let mut bytes = craft(GgmlDType::Q4K);
    let l = layout(&bytes);
    let mut patched = Vec::new();
    for t in &l.tensors {
        if u32::from_le_bytes(bytes[t.dtype_at..t.dtype_at + 4].try_into().unwrap()) != 12 {
            continue;
        }
        // Q4_K's 144-byte super-blocks hold IQ4_XS's 136-byte ones (the rest is a gap).
        let n: usize = t
            .dims_at
            .iter()
            .map(|&at| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize)
            .product();
        let start = l.data_of(&t.name);
        for (k, block) in bytes[start..start + n / 256 * 136]
            .chunks_exact_mut(136)
            .enumerate()
        {
            block.copy_from_slice(&raw[(k % 2) * 136..(k % 2 + 1) * 136]);
        }
        set_u32(&mut bytes, t.dtype_at, 23);
        patched.push((t.name.clone(), n));
    }
    assert_eq!(patched.len(), 2 + 7 * LAYERS);
    let mut seen = 0;
    read_matrices(
        &mut Cursor::new(&bytes),
        &weights(WeightsFormat::F32, Some(WeightsFormat::F32), false),
        |name, m| {
            let n = m.rows() * m.cols();
            assert!(patched.contains(&(name.to_string(), n)), "{name}");
            let want: Vec<f32> = values.iter().copied().cycle().take(n).collect();
            assert_eq!(m.to_f32(), want, "{name}");
            seen += 1;
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(seen, patched.len());
    let model = load(&bytes, LoadOptions::default());
    assert_converted(
        &model,
        &[("iq4_xs", "q8_0", 2), ("iq4_xs", "w4g32", 7 * LAYERS)],
    );
    let options = LoadOptions::default();
    let need = gguf_memory_need(&mut Cursor::new(&bytes), &model.config, &options).unwrap();
    assert_eq!(
        need.weights + need.embedding + need.norms,
        model.weights.bytes()
    );
}
