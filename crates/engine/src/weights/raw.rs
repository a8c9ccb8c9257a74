//! One tensor as a loader read it ([`RawTensor`]: f32, or a GGUF block format's bytes) and
//! its conversion into a [`Matrix`] of the requested format: blocks kept exactly, cut by
//! whole block rows (fused tensors), or dequantized and re-rounded.

use std::ops::Range;

use edgefit_kernels::{F16Matrix, GgmlFormat, GgmlMatrix, Matrix, Q8Matrix, W4Kind, W4Matrix};

use super::format::{plan, MatrixUse, Plan, Source, WeightsFormat};
use crate::error::{EngineError, Result};

/// One tensor as a loader read it.
#[derive(Debug)]
pub enum RawTensor {
    F32(Vec<f32>),
    /// ggml `block_q4_0` bytes.
    Q4_0(Vec<u8>),
    /// ggml `block_q4_1` bytes.
    Q4_1(Vec<u8>),
    /// ggml `block_q8_0` bytes.
    Q8_0(Vec<u8>),
    /// ggml `block_q5_0`, `block_q5_1`, `block_q4_K`, `block_q5_K` or `block_q6_K` bytes.
    Ggml(GgmlFormat, Vec<u8>),
    /// Values dequantized (or widened) by the reader from a type held otherwise in the file
    /// (f16, bf16, or a [`Source::Other`] type).
    Dequantized(Source, Vec<f32>),
}

fn kernel_err(name: &str, e: edgefit_kernels::KernelError) -> EngineError {
    EngineError::tensor(name, e.to_string())
}

impl RawTensor {
    /// The format the tensor had in its file.
    pub fn source(&self) -> Source {
        match self {
            RawTensor::F32(_) => Source::Float("f32"),
            RawTensor::Q4_0(_) => Source::Q4_0,
            RawTensor::Q4_1(_) => Source::Q4_1,
            RawTensor::Q8_0(_) => Source::Q8_0,
            RawTensor::Ggml(f, _) => Source::Ggml(*f),
            RawTensor::Dequantized(s, _) => *s,
        }
    }

    /// The same tensor with its rows reordered: new row `r` is old row `src[r]` (block formats
    /// hold whole rows of blocks, so this moves bytes and never re-rounds). `src` must be a
    /// permutation of the rows, each row `len / src.len()` elements.
    pub fn rows_permuted(self, src: &[usize]) -> RawTensor {
        fn permute<T: Copy>(v: &[T], src: &[usize]) -> Vec<T> {
            let row = v.len() / src.len().max(1);
            src.iter()
                .flat_map(|&s| v[s * row..(s + 1) * row].iter().copied())
                .collect()
        }
        match self {
            RawTensor::F32(v) => RawTensor::F32(permute(&v, src)),
            RawTensor::Q4_0(b) => RawTensor::Q4_0(permute(&b, src)),
            RawTensor::Q4_1(b) => RawTensor::Q4_1(permute(&b, src)),
            RawTensor::Q8_0(b) => RawTensor::Q8_0(permute(&b, src)),
            RawTensor::Ggml(f, b) => RawTensor::Ggml(f, permute(&b, src)),
            RawTensor::Dequantized(s, v) => RawTensor::Dequantized(s, permute(&v, src)),
        }
    }

    /// Rows `range` of this tensor of `rows` rows (a part of a fused tensor: Phi-3's
    /// `attn_qkv`, `ffn_up`). Block formats hold each row as whole blocks, so the part is a run
    /// of bytes, never re-rounded; `cols` not a whole number of blocks is refused.
    pub fn row_range(
        &self,
        name: &str,
        rows: usize,
        cols: usize,
        range: Range<usize>,
    ) -> Result<RawTensor> {
        let block = match self {
            RawTensor::F32(_) | RawTensor::Dequantized(..) => 1,
            RawTensor::Q4_0(_) | RawTensor::Q4_1(_) | RawTensor::Q8_0(_) => 32,
            RawTensor::Ggml(f, _) => f.block_values(),
        };
        if range.start > range.end || range.end > rows || !cols.is_multiple_of(block) {
            return Err(EngineError::tensor(
                name,
                format!(
                    "rows {range:?} of {rows} rows of {cols} values (blocks of {block}) are not whole blocks of rows"
                ),
            ));
        }
        fn part<T: Copy>(v: &[T], rows: usize, r: &Range<usize>) -> Vec<T> {
            let row = v.len() / rows.max(1);
            v[r.start * row..r.end * row].to_vec()
        }
        Ok(match self {
            RawTensor::F32(v) => RawTensor::F32(part(v, rows, &range)),
            RawTensor::Q4_0(b) => RawTensor::Q4_0(part(b, rows, &range)),
            RawTensor::Q4_1(b) => RawTensor::Q4_1(part(b, rows, &range)),
            RawTensor::Q8_0(b) => RawTensor::Q8_0(part(b, rows, &range)),
            RawTensor::Ggml(f, b) => RawTensor::Ggml(*f, part(b, rows, &range)),
            RawTensor::Dequantized(s, v) => RawTensor::Dequantized(*s, part(v, rows, &range)),
        })
    }

    /// The values as f32 (`rows × cols`).
    pub fn into_f32(self, name: &str, rows: usize, cols: usize) -> Result<Vec<f32>> {
        let err = |e| kernel_err(name, e);
        Ok(match self {
            RawTensor::F32(v) | RawTensor::Dequantized(_, v) => v,
            RawTensor::Q4_0(b) => W4Matrix::from_q4_0(&b, rows, cols)
                .map_err(err)?
                .dequantize(),
            RawTensor::Q4_1(b) => W4Matrix::from_q4_1(&b, rows, cols)
                .map_err(err)?
                .dequantize(),
            RawTensor::Q8_0(b) => Q8Matrix::from_q8_0(&b, rows, cols)
                .map_err(err)?
                .dequantize(),
            RawTensor::Ggml(f, b) => GgmlMatrix::from_ggml_vec(f, b, rows, cols)
                .map_err(err)?
                .dequantize(),
        })
    }

    /// Converts to `format` (for `use_`), without re-rounding where [`held_format`](super::held_format) keeps the
    /// source's blocks.
    pub fn into_matrix(
        self,
        name: &str,
        rows: usize,
        cols: usize,
        format: WeightsFormat,
        use_: MatrixUse,
        requantize: bool,
    ) -> Result<Matrix> {
        let err = |e| kernel_err(name, e);
        let target = match plan(self.source(), format, use_, requantize) {
            Plan::Keep => {
                return Ok(match self {
                    RawTensor::Q4_0(b) => {
                        Matrix::W4(W4Matrix::from_q4_0(&b, rows, cols).map_err(err)?)
                    }
                    RawTensor::Q4_1(b) => {
                        Matrix::W4(W4Matrix::from_q4_1(&b, rows, cols).map_err(err)?)
                    }
                    RawTensor::Q8_0(b) => {
                        Matrix::Q8(Q8Matrix::from_q8_0(&b, rows, cols).map_err(err)?)
                    }
                    RawTensor::Ggml(f, b) => {
                        Matrix::Ggml(GgmlMatrix::from_ggml_vec(f, b, rows, cols).map_err(err)?)
                    }
                    // `plan` keeps only the block formats above.
                    RawTensor::F32(_) | RawTensor::Dequantized(..) => {
                        return Err(EngineError::tensor(name, "float tensor planned as kept"))
                    }
                });
            }
            Plan::Convert(f) => f,
        };
        let w = self.into_f32(name, rows, cols)?;
        Ok(match target {
            WeightsFormat::F32 => Matrix::F32 {
                data: w,
                rows,
                cols,
            },
            WeightsFormat::F16 => Matrix::F16(F16Matrix::from_f32(&w, rows, cols).map_err(err)?),
            WeightsFormat::Q8_0 | WeightsFormat::Auto => {
                Matrix::Q8(Q8Matrix::quantize(&w, rows, cols).map_err(err)?)
            }
            WeightsFormat::W4g32 | WeightsFormat::W4g64 | WeightsFormat::W4g128 => {
                let group = target.w4_group().unwrap_or(32);
                Matrix::W4(
                    W4Matrix::quantize(&w, rows, cols, group, W4Kind::Symmetric).map_err(err)?,
                )
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random but valid blocks: a finite f16 scale (and min) then the quants.
    fn blocks(n: usize, block_bytes: usize, halves: usize, seed: u32) -> Vec<u8> {
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mut out = Vec::with_capacity(n * block_bytes);
        for _ in 0..n {
            for _ in 0..halves {
                let s = half::f16::from_f32((next() % 1000) as f32 / 1000.0 + 0.01);
                out.extend_from_slice(&s.to_le_bytes());
            }
            out.extend((2 * halves..block_bytes).map(|_| next() as u8));
        }
        out
    }

    /// A part of a fused block tensor (rows `range`) is exactly those rows of the whole one
    /// dequantized: the bytes of whole block rows move, nothing is re-rounded. Rows of 64
    /// values (two blocks each), cut where q/k/v of a GQA block would be.
    #[test]
    fn fused_block_rows_split_exactly_at_row_boundaries() {
        let (rows, cols) = (12, 64);
        let cases = [
            (RawTensor::Q8_0(blocks(rows * 2, 34, 1, 7)), "q8_0"),
            (RawTensor::Q4_0(blocks(rows * 2, 18, 1, 8)), "q4_0"),
            (RawTensor::Q4_1(blocks(rows * 2, 20, 2, 9)), "q4_1"),
        ];
        for (raw, what) in cases {
            let whole = match &raw {
                RawTensor::Q8_0(b) => RawTensor::Q8_0(b.clone()),
                RawTensor::Q4_0(b) => RawTensor::Q4_0(b.clone()),
                RawTensor::Q4_1(b) => RawTensor::Q4_1(b.clone()),
                _ => unreachable!(),
            }
            .into_f32(what, rows, cols)
            .unwrap();
            for r in [0..8, 8..10, 10..12, 3..7] {
                let part = raw
                    .row_range(what, rows, cols, r.clone())
                    .unwrap()
                    .into_f32(what, r.len(), cols)
                    .unwrap();
                assert_eq!(part, whole[r.start * cols..r.end * cols], "{what} {r:?}");
            }
            assert!(raw.row_range(what, rows, cols, 10..13).is_err());
        }
        // Rows that are not whole blocks cannot be cut.
        let raw = RawTensor::Q8_0(blocks(1, 34, 1, 3));
        let err = raw.row_range("t", 2, 16, 0..1).unwrap_err().to_string();
        assert!(err.contains("whole blocks"), "{err}");
    }
}
