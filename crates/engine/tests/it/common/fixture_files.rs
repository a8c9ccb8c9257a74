//! The tiny fixtures' model files (`tests/golden/arch/<case>/model*.safetensors|gguf`), which
//! are not committed: rebuilt here from the case's `weights.json`, byte for byte the files the
//! scripts wrote and transformers read for the goldens (the manifest's sha256 is checked). The
//! generator and the manifest are described in `tests/golden/fixture_weights.py`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use serde_json::Value;
use sha2::{Digest, Sha256};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const SQRT3: f64 = 1.732_050_807_568_877_2;

/// `n` values of the generator: `center + scale · (2u − 1) · √3` in f64, rounded to f32, with
/// `u = (z >> 11) · 2⁻⁵³` and `z = splitmix64(seed + (i + 1) · GOLDEN)`.
pub fn values(seed: u64, n: usize, center: f64, scale: f64) -> Vec<f32> {
    (1..=n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add(i.wrapping_mul(GOLDEN));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0);
            (center + scale * ((2.0 * u - 1.0) * SQRT3)) as f32
        })
        .collect()
}

/// Rebuilt files by (case, file name).
type Built = Mutex<HashMap<(String, String), Arc<Vec<u8>>>>;

/// The bytes of `case/file` when the case's manifest lists it; `None` for any other file.
/// Built once per process and checked against the manifest's sha256.
pub fn model_file(dir: &Path, case: &str, file: &str) -> Option<Arc<Vec<u8>>> {
    static BUILT: OnceLock<Built> = OnceLock::new();
    let key = (case.to_string(), file.to_string());
    if let Some(bytes) = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .get(&key)
    {
        return Some(bytes.clone());
    }
    let manifest = std::fs::read(dir.join("weights.json")).ok()?;
    let manifest: Value =
        serde_json::from_slice(&manifest).unwrap_or_else(|e| panic!("{case}/weights.json: {e}"));
    let entry = manifest["files"]
        .as_array()
        .expect("weights.json: files")
        .iter()
        .find(|f| f["file"] == file)?;
    let tensors = &manifest["tensors"];
    let bytes = if let Some(st) = entry.get("safetensors") {
        safetensors_file(tensors, st)
    } else {
        gguf_file(tensors, &entry["gguf"])
    };
    let sha = format!("{:x}", Sha256::digest(&bytes));
    if sha != entry["sha256"].as_str().unwrap() {
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{case}-{file}"));
        let _ = std::fs::write(&kept, &bytes);
        panic!(
            "{case}/{file}: the rebuilt file (kept as {}) is not the one the script wrote \
             (sha256 {sha}, weights.json says {})",
            kept.display(),
            entry["sha256"]
        );
    }
    let bytes = Arc::new(bytes);
    BUILT
        .get()
        .unwrap()
        .lock()
        .unwrap()
        .insert(key, bytes.clone());
    Some(bytes)
}

/// An HF tensor of the manifest: its shape and f32 values.
fn hf_tensor(tensors: &Value, name: &str) -> (Vec<usize>, Vec<f32>) {
    let spec = &tensors[name];
    let shape: Vec<usize> = serde_json::from_value(spec["shape"].clone())
        .unwrap_or_else(|e| panic!("weights.json: tensor {name}: {e}"));
    let n = shape.iter().product();
    let v = values(
        spec["seed"].as_u64().unwrap(),
        n,
        spec["center"].as_f64().unwrap(),
        spec["scale"].as_f64().unwrap(),
    );
    (shape, v)
}

fn safetensors_file(tensors: &Value, st: &Value) -> Vec<u8> {
    let built: Vec<(String, Vec<usize>, Vec<u8>)> = st["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let name = n.as_str().unwrap();
            let (shape, v) = hf_tensor(tensors, name);
            let data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (name.to_string(), shape, data)
        })
        .collect();
    let views = built.iter().map(|(name, shape, data)| {
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                .unwrap();
        (name.clone(), view)
    });
    let metadata: HashMap<String, String> = serde_json::from_value(st["metadata"].clone()).unwrap();
    safetensors::serialize(views, Some(metadata)).unwrap()
}

/// llama.cpp's q/k row permutation (convert_hf_to_gguf.py `LlamaModel.permute`): within each
/// of `heads` heads, row `2i + j` takes row `j · d/2 + i` (rotate-half to interleaved pairs).
fn permute(v: &[f32], rows: usize, heads: usize) -> Vec<f32> {
    let cols = v.len() / rows;
    let d = rows / heads;
    let mut out = vec![0.0; v.len()];
    for h in 0..heads {
        for i in 0..d / 2 {
            for j in 0..2 {
                let to = (h * d + 2 * i + j) * cols;
                let from = (h * d + j * (d / 2) + i) * cols;
                out[to..to + cols].copy_from_slice(&v[from..from + cols]);
            }
        }
    }
    out
}

/// A GGUF tensor's values (f32, row-major over `dims` reversed) from its recipe.
fn gguf_values(tensors: &Value, t: &Value) -> Vec<f32> {
    if let Some(vals) = t.get("values") {
        return serde_json::from_value::<Vec<f64>>(vals.clone())
            .unwrap()
            .into_iter()
            .map(|x| x as f32)
            .collect();
    }
    let (shape, mut v) = hf_tensor(tensors, t["from"].as_str().unwrap());
    if let Some(heads) = t.get("permute") {
        v = permute(&v, shape[0], heads.as_u64().unwrap() as usize);
    }
    if let Some(add) = t.get("add") {
        let add = add.as_f64().unwrap() as f32;
        v.iter_mut().for_each(|x| *x += add);
    }
    v
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF value of type `ty` (gguf-py's type names, lower case) without its type tag.
fn put_value(out: &mut Vec<u8>, ty: &str, v: &Value) {
    match ty {
        "uint8" => out.push(v.as_u64().unwrap() as u8),
        "int8" => out.push(v.as_i64().unwrap() as i8 as u8),
        "uint16" => out.extend_from_slice(&(v.as_u64().unwrap() as u16).to_le_bytes()),
        "int16" => out.extend_from_slice(&(v.as_i64().unwrap() as i16).to_le_bytes()),
        "uint32" => out.extend_from_slice(&(v.as_u64().unwrap() as u32).to_le_bytes()),
        "int32" => out.extend_from_slice(&(v.as_i64().unwrap() as i32).to_le_bytes()),
        "uint64" => out.extend_from_slice(&v.as_u64().unwrap().to_le_bytes()),
        "int64" => out.extend_from_slice(&v.as_i64().unwrap().to_le_bytes()),
        "float32" => out.extend_from_slice(&(v.as_f64().unwrap() as f32).to_le_bytes()),
        "float64" => out.extend_from_slice(&v.as_f64().unwrap().to_le_bytes()),
        "bool" => out.push(v.as_bool().unwrap() as u8),
        "string" => put_str(out, v.as_str().unwrap()),
        other => panic!("weights.json: GGUF value type {other}"),
    }
}

/// gguf-py's numbering of the value types.
fn type_id(ty: &str) -> u32 {
    let types = [
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
        "array", "uint64", "int64", "float64",
    ];
    types
        .iter()
        .position(|t| *t == ty)
        .unwrap_or_else(|| panic!("weights.json: GGUF value type {ty}")) as u32
}

/// The tensor's data in its GGUF type (ggml's reference quantizers, through candle).
fn tensor_data(ty: &str, dims: &[usize], v: Vec<f32>) -> (u32, Vec<u8>) {
    let (id, ggml) = match ty {
        "F32" => return (0, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        "F16" => {
            let data = v
                .iter()
                .flat_map(|x| half::f16::from_f32(*x).to_le_bytes())
                .collect();
            return (1, data);
        }
        "Q4_0" => (2, GgmlDType::Q4_0),
        "Q8_0" => (8, GgmlDType::Q8_0),
        other => panic!("weights.json: GGUF tensor type {other}"),
    };
    let shape: Vec<usize> = dims.iter().rev().copied().collect();
    let t = Tensor::from_vec(v, shape, &Device::Cpu).unwrap();
    let q = QTensor::quantize(&t, ggml).unwrap();
    (id, q.data().unwrap().into_owned())
}

fn pad(out: &mut Vec<u8>, align: usize) {
    out.resize(out.len().next_multiple_of(align), 0);
}

/// A GGUF file as gguf-py's `GGUFWriter` lays it out: header, metadata, tensor infos, padding
/// to the alignment, then each tensor's data padded to the alignment.
fn gguf_file(tensors: &Value, g: &Value) -> Vec<u8> {
    let align = g["alignment"].as_u64().unwrap() as usize;
    let kv = g["kv"].as_array().unwrap();
    let infos = g["tensors"].as_array().unwrap();
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&(g["version"].as_u64().unwrap() as u32).to_le_bytes());
    out.extend_from_slice(&(infos.len() as u64).to_le_bytes());
    out.extend_from_slice(&(kv.len() as u64).to_le_bytes());
    for e in kv {
        let (key, ty, v) = (e[0].as_str().unwrap(), e[1].as_str().unwrap(), &e[2]);
        put_str(&mut out, key);
        if let Some(elem) = ty.strip_prefix("array:") {
            let items = v.as_array().unwrap();
            out.extend_from_slice(&type_id("array").to_le_bytes());
            out.extend_from_slice(&type_id(elem).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            items.iter().for_each(|x| put_value(&mut out, elem, x));
        } else {
            out.extend_from_slice(&type_id(ty).to_le_bytes());
            put_value(&mut out, ty, v);
        }
    }
    let mut data = Vec::new();
    for t in infos {
        let dims: Vec<usize> = serde_json::from_value(t["dims"].clone()).unwrap();
        let (id, bytes) = tensor_data(t["type"].as_str().unwrap(), &dims, gguf_values(tensors, t));
        put_str(&mut out, t["name"].as_str().unwrap());
        out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        dims.iter()
            .for_each(|d| out.extend_from_slice(&(*d as u64).to_le_bytes()));
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        data.extend_from_slice(&bytes);
        pad(&mut data, align);
    }
    pad(&mut out, align);
    out.extend_from_slice(&data);
    out
}
