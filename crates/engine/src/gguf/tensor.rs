//! Reading one tensor of a GGUF file: its bytes checked against the shape and the file's
//! length before they are read, kept as raw blocks for the types the kernels run (with their
//! f16 scales checked finite), or dequantized by candle for the others.

use std::io::{Read, Seek, SeekFrom};

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::GgmlDType;
use candle_core::Device;

use crate::error::{EngineError, Result};
use crate::weights::{RawTensor, Source};

use super::candle_msg;
use super::prescan::byte_len;

/// What a ggml type is to the loader.
pub(super) fn source_of(dtype: GgmlDType) -> Source {
    use edgefit_kernels::GgmlFormat as G;
    match dtype {
        GgmlDType::F32 => Source::Float("f32"),
        GgmlDType::F16 => Source::Float("f16"),
        GgmlDType::BF16 => Source::Float("bf16"),
        GgmlDType::Q4_0 => Source::Q4_0,
        GgmlDType::Q4_1 => Source::Q4_1,
        GgmlDType::Q8_0 => Source::Q8_0,
        GgmlDType::Q5_0 => Source::Ggml(G::Q5_0),
        GgmlDType::Q5_1 => Source::Ggml(G::Q5_1),
        GgmlDType::Q4K => Source::Ggml(G::Q4K),
        GgmlDType::Q5K => Source::Ggml(G::Q5K),
        GgmlDType::Q6K => Source::Ggml(G::Q6K),
        GgmlDType::Q8_1 => Source::Other("q8_1"),
        GgmlDType::Q2K => Source::Other("q2_k"),
        GgmlDType::Q3K => Source::Other("q3_k"),
        GgmlDType::Q8K => Source::Other("q8_k"),
    }
}

/// Reads one tensor, checking it is `rows × cols` (a vector when `rows == 1`) and that its
/// bytes lie inside the file before reading them.
pub(super) fn read_tensor<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    file_len: u64,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<RawTensor> {
    let info = content
        .tensor_infos
        .get(name)
        .ok_or_else(|| EngineError::tensor(name, "missing"))?;
    let dims = info.shape.dims();
    let ok = if rows == 1 {
        dims == [cols] || dims == [1, cols]
    } else {
        dims == [rows, cols]
    };
    if !ok {
        return Err(EngineError::tensor(
            name,
            format!("shape {dims:?}, expected [{rows}, {cols}]"),
        ));
    }
    let dtype = info.ggml_dtype;
    let source = source_of(dtype);
    let raw = matches!(
        source,
        Source::Float("f32") | Source::Q4_0 | Source::Q4_1 | Source::Q8_0 | Source::Ggml(_)
    );
    if raw {
        let len = byte_len(name, dtype, rows as u64 * cols as u64)?;
        let start = content
            .tensor_data_offset
            .checked_add(info.offset)
            .ok_or_else(|| EngineError::tensor(name, "offset overflows"))?;
        if start.checked_add(len).is_none_or(|end| end > file_len) {
            let problem = format!(
                "{len} bytes at offset {start} run past the end of the file ({file_len} bytes)"
            );
            return Err(EngineError::tensor(name, problem));
        }
        let n = usize::try_from(len)
            .map_err(|_| EngineError::tensor(name, format!("{len} bytes do not fit in memory")))?;
        let mut bytes = vec![0u8; n];
        reader
            .seek(SeekFrom::Start(start))
            .and_then(|_| reader.read_exact(&mut bytes))
            .map_err(|e| EngineError::tensor(name, format!("reading {len} bytes: {e}")))?;
        return Ok(match source {
            Source::Float(_) | Source::Other(_) => {
                let v: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                check_finite(name, &v)?;
                RawTensor::F32(v)
            }
            Source::Q4_0 => {
                check_block_scales(name, &bytes, 18, 1)?;
                RawTensor::Q4_0(bytes)
            }
            Source::Q4_1 => {
                check_block_scales(name, &bytes, 20, 2)?;
                RawTensor::Q4_1(bytes)
            }
            // Scales are checked when the blocks become a matrix (`GgmlMatrix::from_ggml_vec`
            // names the field and the block).
            Source::Ggml(f) => RawTensor::Ggml(f, bytes),
            Source::Q8_0 => {
                check_block_scales(name, &bytes, 34, 1)?;
                RawTensor::Q8_0(bytes)
            }
        });
    }
    let q = info
        .read(reader, content.tensor_data_offset, &Device::Cpu)
        .map_err(|e| EngineError::tensor(name, candle_msg(&e)))?;
    let t = q
        .dequantize(&Device::Cpu)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| EngineError::tensor(name, format!("dequantizing {dtype:?}: {e}")))?;
    check_finite(name, &t)?;
    Ok(RawTensor::Dequantized(source, t))
}

/// The f16 scale (and, for Q4_1, minimum) at the start of each `block_bytes`-byte block of 32
/// values must be finite; the error names the first value index the bad block covers.
fn check_block_scales(name: &str, bytes: &[u8], block_bytes: usize, halves: usize) -> Result<()> {
    for (b, block) in bytes.chunks_exact(block_bytes).enumerate() {
        for h in block[..2 * halves].chunks_exact(2) {
            let v = half::f16::from_le_bytes([h[0], h[1]]);
            if !v.is_finite() {
                return Err(EngineError::tensor(
                    name,
                    format!(
                        "block scale {v} for values {}..{} is not finite",
                        b * 32,
                        b * 32 + 32
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_finite(name: &str, t: &[f32]) -> Result<()> {
    match t.iter().position(|v| !v.is_finite()) {
        Some(bad) => Err(EngineError::tensor(
            name,
            format!("value {} at index {bad} is not finite", t[bad]),
        )),
        None => Ok(()),
    }
}
