//! Reading one tensor of a GGUF file: its bytes checked against the shape and the file's
//! length before they are read, kept as raw blocks for the types the kernels run (with their
//! f16 scales checked finite), or dequantized by candle for the others.

use std::io::{Read, Seek, SeekFrom};

use candle_core::quantized::GgmlDType;
use candle_core::Device;

use crate::error::{EngineError, Result};
use crate::weights::{RawTensor, Source};

use super::candle_msg;
use super::prescan::{byte_len, Header, OwnType};

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
/// ([`iq4_nl_as_q8_0`]), IQ4_XS values are converted like the other types the kernels do not
/// run ([`iq4_xs_values`]), every other type is [`source_of`] its type.
pub(super) fn source_in(header: &Header, name: &str) -> Option<Source> {
    let info = header.content.tensor_infos.get(name)?;
    Some(match header.own.get(name) {
        Some(t) => t.source(),
        None => source_of(info.ggml_dtype),
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

/// IQ4_XS super-blocks (f16 scale `d`, 16 bits of high scale bits, 4 bytes of low ones, then
/// 128 bytes of indices) as values: sub-block `b` of 32 has the 6-bit scale
/// `ls = low nibble b of scales_l | 2 bits b of scales_h << 4` and values
/// `d · (ls − 32) · table[index]`, its 16 index bytes holding values `j` (low nibbles) and
/// `j + 16` (high), as ggml's `dequantize_row_iq4_xs` computes them.
pub(crate) fn iq4_xs_values(blocks: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(blocks.len() / 136 * 256);
    for b in blocks.chunks_exact(136) {
        let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
        let scales_h = u16::from_le_bytes([b[2], b[3]]);
        let scales_l = &b[4..8];
        for (ib, qs) in b[8..].chunks_exact(16).enumerate() {
            let ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) as i32
                | ((((scales_h >> (2 * ib)) & 3) as i32) << 4);
            let dl = d * (ls - 32) as f32;
            out.extend(
                qs.iter()
                    .map(|q| dl * f32::from(IQ4_NL_VALUES[usize::from(q & 0xf)])),
            );
            out.extend(
                qs.iter()
                    .map(|q| dl * f32::from(IQ4_NL_VALUES[usize::from(q >> 4)])),
            );
        }
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
    let own = header.own.get(name).copied();
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
    if raw || own.is_some() {
        let elems = rows as u64 * cols as u64;
        let len = match own {
            Some(t) => t.byte_len(name, elems)?,
            None => byte_len(name, dtype, elems)?,
        };
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
        match own {
            Some(OwnType::Iq4Nl) => {
                check_block_scales(name, &bytes, 18, 1)?;
                return Ok(RawTensor::Q8_0(iq4_nl_as_q8_0(&bytes)));
            }
            Some(OwnType::Iq4Xs) => {
                let v = iq4_xs_values(&bytes);
                check_finite(name, &v)?;
                return Ok(RawTensor::Dequantized(OwnType::Iq4Xs.source(), v));
            }
            None => {}
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

    /// Blocks and the values gguf-py's own dequantizer gives for them
    /// (`tests/golden/make_iq4_goldens.py`).
    fn golden(kind: &str) -> (Vec<u8>, Vec<f32>) {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../../tests/golden/ggml/iq4.json")).unwrap();
        let e = &doc[kind];
        (
            serde_json::from_value(e["bytes"].clone()).unwrap(),
            serde_json::from_value(e["values"].clone()).unwrap(),
        )
    }

    /// Three IQ4_NL blocks (scales 0.0123, −0.5 and 3.0): the Q8_0 blocks hold exactly gguf-py's
    /// values.
    #[test]
    fn iq4_nl_blocks_become_q8_0_blocks_of_the_same_values() {
        let (raw, want) = golden("iq4_nl");
        assert_eq!(want.len(), 96);
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

    /// Two IQ4_XS super-blocks (scales 0.0371 and −0.002, random sub-block scales and
    /// indices): exactly gguf-py's values.
    #[test]
    fn iq4_xs_blocks_dequantize_as_gguf_py_does() {
        let (raw, want) = golden("iq4_xs");
        assert_eq!((raw.len(), want.len()), (2 * 136, 512));
        assert_eq!(iq4_xs_values(&raw), want);
    }
}
