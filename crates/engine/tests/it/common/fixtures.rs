//! The tiny architecture fixtures of `tests/golden/arch/` (see its README), read from disk (the
//! model files rebuilt from each case's `weights.json`): the helpers `arch_goldens`,
//! `arch_phi3`, `threads` and `spm_tokenizer` share.
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use edgefit_engine::hf::load_hf;
use edgefit_engine::{LoadOptions, Model, TextTokenizer, WeightsFormat};

pub const F32: LoadOptions = LoadOptions {
    weights: WeightsFormat::F32,
    embedding: None,
    requantize: false,
};

pub fn dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/arch")
        .join(case)
}

/// A fixture file: the model files rebuilt from the case's `weights.json`
/// ([`super::fixture_files`]), any other file read from the directory.
pub fn read(case: &str, file: &str) -> Vec<u8> {
    if let Some(bytes) = super::fixture_files::model_file(&dir(case), case, file) {
        return bytes.to_vec();
    }
    std::fs::read(dir(case).join(file)).unwrap_or_else(|e| panic!("{case}/{file}: {e}"))
}

pub fn text(case: &str, file: &str) -> String {
    String::from_utf8(read(case, file)).unwrap()
}

pub fn from_hf(case: &str) -> (Model, TextTokenizer) {
    load_hf(
        &text(case, "config.json"),
        &read(case, "tokenizer.json"),
        Some(&text(case, "tokenizer_config.json")),
        &[&read(case, "model.safetensors")],
        F32,
    )
    .unwrap_or_else(|e| panic!("{case}: {e}"))
}

pub fn from_gguf(case: &str) -> Option<(Model, TextTokenizer)> {
    let bytes = super::fixture_files::model_file(&dir(case), case, "model.gguf")?.to_vec();
    Some(
        edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{case} GGUF: {e}")),
    )
}

/// The model of `case/file` without its tokenizer (SentencePiece GGUF vocabularies are read
/// by another branch): driven by the goldens' token ids.
pub fn gguf_model(case: &str, file: &str, options: LoadOptions) -> Model {
    edgefit_engine::gguf::load_gguf_model(
        &mut std::io::Cursor::new(read(case, file)),
        options,
        &mut |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{case}/{file}: {e}"))
}

/// `case/file` with metadata `extra_keys` set (added or replaced), `drop_keys` removed and f32
/// vectors `extra_tensors` appended (candle's GGUF writer: every other tensor as it is).
pub fn gguf_with(
    case: &str,
    file: &str,
    extra_keys: &[(&str, candle_core::quantized::gguf_file::Value)],
    drop_keys: &[&str],
    extra_tensors: &[(&str, Vec<f32>)],
) -> Vec<u8> {
    use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
    use candle_core::{Device, Tensor};
    let bytes = read(case, file);
    let mut r = std::io::Cursor::new(&bytes);
    let content = gguf_file::Content::read(&mut r).unwrap();
    let mut md: Vec<(String, gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    md.retain(|(k, _)| !extra_keys.iter().any(|(e, _)| e == k) && !drop_keys.contains(&k.as_str()));
    md.extend(extra_keys.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let mut tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|n| (n.clone(), content.tensor(&mut r, n, &Device::Cpu).unwrap()))
        .collect();
    for (name, values) in extra_tensors {
        let t = Tensor::new(values.clone(), &Device::Cpu).unwrap();
        tensors.push((
            name.to_string(),
            QTensor::quantize(&t, GgmlDType::F32).unwrap(),
        ));
    }
    let md_refs: Vec<(&str, &gguf_file::Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &md_refs, &t_refs).unwrap();
    out.into_inner()
}
