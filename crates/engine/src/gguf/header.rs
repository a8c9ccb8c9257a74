//! What the header alone answers, for callers that read no tensor: the check a page makes
//! before reading a whole file ([`check_header`]) and the estimator's view of the header
//! ([`read_estimate_metadata`]).

use std::io::{Read, Seek};

use candle_core::quantized::gguf_file::Value;

use edgefit_estimate::{GgufMetadata, GgufTensorInfo, GgufValue};

use crate::config::Arch;
use crate::error::Result;

use super::metadata::{get_str, opt_str};
use super::prescan::read_content;

/// What a GGUF header says before any tensor is read ([`check_header`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HeaderCheck {
    /// `general.architecture`, one this engine builds.
    pub arch: String,
    /// `general.name`, if any.
    pub name: Option<String>,
    /// Tensors listed.
    pub tensors: usize,
}

/// The checks a load makes on the header alone, so a file is refused before its tensor data is
/// read: the magic, version and caps ([`prescan`](super::prescan)), the tensor layout against the file's length
/// (every tensor inside the file, none overlapping) and an architecture this engine builds.
/// Reads the metadata and tensor list only (the first few MB of a model).
pub fn check_header<R: Read + Seek>(reader: &mut R) -> Result<HeaderCheck> {
    let content = read_content(reader)?.content;
    let arch = get_str(&content.metadata, "general.architecture")?;
    Arch::named(&arch, "architecture")?;
    Ok(HeaderCheck {
        arch,
        name: opt_str(&content.metadata, "general.name"),
        tensors: content.tensor_infos.len(),
    })
}

/// Reads only a GGUF file's header (metadata and tensor list, no tensor data) in the form the
/// estimator takes, so `edgefit estimate --model file.gguf` sizes exactly the file's shape.
pub fn read_estimate_metadata<R: Read + Seek>(reader: &mut R) -> Result<GgufMetadata> {
    let content = read_content(reader)?.content;
    let kv = content
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), estimate_value(k, v)))
        .collect();
    let mut tensors: Vec<GgufTensorInfo> = content
        .tensor_infos
        .iter()
        .map(|(name, info)| GgufTensorInfo {
            name: name.clone(),
            // candle lists dims slowest-first; GGUF (and the estimator) fastest-first.
            dims: info.shape.dims().iter().rev().map(|d| *d as u64).collect(),
        })
        .collect();
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(GgufMetadata { kv, tensors })
}

/// The estimator's form of one value: arrays by length, except the integer arrays of
/// `edgefit.layers.*` (per-layer shapes of a pruned model) and the flags of
/// `{arch}.attention.sliding_window_pattern`, which it reads.
pub(super) fn estimate_value(key: &str, v: &Value) -> GgufValue {
    match v {
        Value::Array(a) if key.starts_with("edgefit.layers.") => {
            let ints: Option<Vec<u64>> = a
                .iter()
                .map(|x| match x {
                    Value::U8(x) => Some(*x as u64),
                    Value::U16(x) => Some(*x as u64),
                    Value::U32(x) => Some(*x as u64),
                    Value::U64(x) => Some(*x),
                    Value::I32(x) => u64::try_from(*x).ok(),
                    Value::I64(x) => u64::try_from(*x).ok(),
                    _ => None,
                })
                .collect();
            match ints {
                Some(v) => GgufValue::UintArray(v),
                None => GgufValue::ArrayLen(a.len() as u64),
            }
        }
        Value::Array(a) if key.ends_with(".attention.sliding_window_pattern") => {
            let flags: Option<Vec<bool>> = a
                .iter()
                .map(|x| match x {
                    Value::Bool(b) => Some(*b),
                    _ => None,
                })
                .collect();
            match flags {
                Some(v) => GgufValue::BoolArray(v),
                None => GgufValue::ArrayLen(a.len() as u64),
            }
        }
        Value::U8(x) => GgufValue::Uint(*x as u64),
        Value::U16(x) => GgufValue::Uint(*x as u64),
        Value::U32(x) => GgufValue::Uint(*x as u64),
        Value::U64(x) => GgufValue::Uint(*x),
        Value::I8(x) => GgufValue::Int(*x as i64),
        Value::I16(x) => GgufValue::Int(*x as i64),
        Value::I32(x) => GgufValue::Int(*x as i64),
        Value::I64(x) => GgufValue::Int(*x),
        Value::F32(x) => GgufValue::Float(*x as f64),
        Value::F64(x) => GgufValue::Float(*x),
        Value::Bool(x) => GgufValue::Bool(*x),
        Value::String(x) => GgufValue::String(x.clone()),
        Value::Array(a) => GgufValue::ArrayLen(a.len() as u64),
    }
}
