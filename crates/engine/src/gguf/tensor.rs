//! Reading one tensor of a GGUF file: its bytes checked against the shape and the file's
//! length before they are read, kept as raw blocks for the types the kernels run (with their
//! f16 scales checked finite), or dequantized by candle for the others.

use std::io::{Read, Seek, SeekFrom};

use candle_core::quantized::GgmlDType;
use candle_core::Device;

use crate::error::{EngineError, Result};
use crate::weights::{RawTensor, Source};

use super::candle_msg;
use super::prescan::{byte_len, Header};

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

/// What the loader holds tensor `name` of `header` as: IQ4_NL blocks become Q8_0 blocks
/// ([`iq4_nl_as_q8_0`]), every other type is [`source_of`] its type.
pub(super) fn source_in(header: &Header, name: &str) -> Option<Source> {
    let info = header.content.tensor_infos.get(name)?;
    Some(if header.iq4_nl.contains(name) {
        Source::Q8_0
    } else {
        source_of(info.ggml_dtype)
    })
}

/// The 16 values an IQ4_NL index stands for, times the block's scale (ggml-common.h
/// `kvalues_iq4nl`).
const IQ4_NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// IQ4_NL blocks (f16 scale `d`, then 16 bytes: value `j` is the low nibble of byte `j`, value
/// `j + 16` its high nibble, each an index into [`IQ4_NL_VALUES`]) as Q8_0 blocks (the same
/// `d`, then the 32 values as int8): `d · table[index]` is `d · q` exactly, so nothing is
/// rounded.
pub(crate) fn iq4_nl_as_q8_0(blocks: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(blocks.len() / 18 * 34);
    for b in blocks.chunks_exact(18) {
        out.extend_from_slice(&b[..2]);
        let idx = &b[2..];
        out.extend(
            idx.iter()
                .map(|q| IQ4_NL_VALUES[usize::from(q & 0xf)] as u8),
        );
        out.extend(idx.iter().map(|q| IQ4_NL_VALUES[usize::from(q >> 4)] as u8));
    }
    out
}

/// Reads one tensor, checking it is `rows × cols` (a vector when `rows == 1`) and that its
/// bytes lie inside the file before reading them.
pub(super) fn read_tensor<R: Read + Seek>(
    header: &Header,
    reader: &mut R,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<RawTensor> {
    let (content, file_len) = (&header.content, header.file_len);
    let iq4_nl = header.iq4_nl.contains(name);
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
        if iq4_nl {
            check_block_scales(name, &bytes, 18, 1)?;
            return Ok(RawTensor::Q8_0(iq4_nl_as_q8_0(&bytes)));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Three IQ4_NL blocks (scales 0.0123, −0.5 and 3.0 as f16, random index bytes) and what
    /// gguf-py's own dequantizer makes of them (`gguf.quants.dequantize(raw,
    /// GGMLQuantizationType.IQ4_NL)`, gguf-py of llama.cpp as vendored in llama-cpp-python
    /// 0.3.36, numpy seed 7): the Q8_0 blocks hold exactly those values.
    #[test]
    // The values as gguf-py printed them (exact: an f16 scale times a small integer).
    #[allow(clippy::excessive_precision)]
    fn iq4_nl_blocks_become_q8_0_blocks_of_the_same_values() {
        #[rustfmt::skip]
        let raw: [u8; 54] = [
            76, 34, 139, 74, 229, 241, 169, 65, 6, 160, 149, 106, 38, 175, 188, 205, 175, 229,
            0, 184, 98, 249, 10, 148, 95, 86, 147, 198, 66, 39, 106, 213, 171, 45, 167, 57,
            0, 66, 69, 81, 55, 14, 153, 178, 215, 76, 52, 39, 250, 72, 215, 50, 161, 223,
        ];
        #[rustfmt::skip]
        let want: [f32; 96] = [
            0.46734619140625, 0.307464599609375, -0.430450439453125, -1.279052734375,
            0.159881591796875, -1.279052734375, -0.27056884765625, -1.561920166015625,
            -0.430450439453125, 0.307464599609375, -0.27056884765625, 1.389739990234375,
            0.651824951171875, 0.848602294921875, 1.389739990234375, -0.430450439453125,
            0.012298583984375, -0.602630615234375, 1.094573974609375, 1.389739990234375,
            0.307464599609375, -0.602630615234375, -1.561920166015625, 0.307464599609375,
            0.159881591796875, -0.27056884765625, -1.020782470703125, 0.307464599609375,
            0.46734619140625, 0.651824951171875, 0.307464599609375, 1.094573974609375,
            41.5, -6.5, -12.5, 24.5, -56.5, 11.0, 32.5, 11.0, 41.5, 5.0, -12.5, 17.5, -19.0,
            -34.5, 5.0, -6.5, 11.0, -56.5, 63.5, -6.5, 17.5, 17.5, -6.5, -26.5, 24.5, 41.5,
            11.0, -34.5, -12.5, 41.5, -12.5, 32.5,
            -105.0, -312.0, -30.0, 267.0, 39.0, -249.0, -30.0, 159.0, -147.0, -30.0, 75.0, 3.0,
            -30.0, -249.0, -312.0, 339.0, -147.0, -105.0, -195.0, -381.0, 39.0, 114.0, 207.0,
            -147.0, -195.0, -249.0, 339.0, -147.0, 207.0, -195.0, 75.0, 207.0,
        ];
        let q8 = iq4_nl_as_q8_0(&raw);
        assert_eq!(q8.len(), 3 * 34);
        let got: Vec<f32> = q8
            .chunks_exact(34)
            .flat_map(|b| {
                let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                b[2..].iter().map(move |&q| d * f32::from(q as i8))
            })
            .collect();
        assert_eq!(got, want);
    }
}
