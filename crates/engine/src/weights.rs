//! The model's weights in the format the user chose, and how loaders produce them.
//!
//! Loaders hand over each tensor as a [`RawTensor`] (f32, or a GGUF block format's bytes);
//! [`Weights::read_all`] turns it into a [`Matrix`] of the requested [`WeightsFormat`], one
//! tensor at a time, so loading never holds an f32 copy of the whole model:
//!
//! | requested | source tensor | result |
//! |---|---|---|
//! | `auto` (default) | GGUF Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K | kept as the file's blocks (no re-rounding; Q5/K-quants as [`edgefit_kernels::GgmlMatrix`]) |
//! | `auto` | f32, f16, bf16 (HF safetensors, float GGUF) | as `w4g32` (embedding and output head: `q8_0`) |
//! | `auto` | other GGUF types (Q2_K, Q3_K, Q8_1, Q8_K) | dequantized, then as `w4g32` (embedding: `q8_0`); named in [`WeightsSummary::converted`] |
//! | `w4g32` | GGUF Q4_0 | symmetric w4, nibbles and scales copied (no re-rounding) |
//! | `w4g32` | GGUF Q4_1 | asymmetric w4 (scale + min), copied (no re-rounding) |
//! | `w4gG` | anything else | dequantized to f32 (that tensor only), then symmetric round-to-nearest |
//! | `q8_0` | GGUF Q8_0 | copied |
//! | `q8_0`, `f16`, `f32` | anything else | dequantized to f32 (that tensor only), then converted |
//!
//! The embedding (and untied output head) has its own format. By default it follows the
//! linear layers for `auto`/`f32`/`f16`/`q8_0`, and is `q8_0` when the linear layers are 4-bit: the
//! tied embedding is also the output head, the one matrix whose error lands directly on the
//! logits; `cargo xtask bench e2e` and the perplexity test measure the choice.
//!
//! [`Weights::converted`] applies the same conversion to weights already loaded (a pruned f32
//! model quantized to w4g32, say): each matrix goes through f32 into the requested format,
//! unless it already is that format.
//!
//! Every matrix converted from a quantized source to another format (a requested re-rounding,
//! or a GGUF type the kernels do not run) is recorded by tensor name in
//! [`Weights::conversions`], and the model info lists them ([`WeightsSummary::converted`]).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use edgefit_estimate::WeightFormat as HeldFormat;
use edgefit_kernels::{F16Matrix, GgmlFormat, GgmlMatrix, Matrix, Q8Matrix, W4Kind, W4Matrix};
use serde::Serialize;

use crate::config::{LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};

/// How the engine stores a weight matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum WeightsFormat {
    /// Each tensor as the file holds it when the kernels run that format (GGUF Q4_0, Q4_1,
    /// Q8_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); float tensors as `w4g32` (embedding `q8_0`), any
    /// other type converted the same way and named in the model info.
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "f32")]
    F32,
    #[serde(rename = "f16")]
    F16,
    /// int8 with one fp16 scale per block of 32 (ggml Q8_0's layout).
    #[serde(rename = "q8_0")]
    Q8_0,
    #[serde(rename = "w4g32")]
    W4g32,
    #[serde(rename = "w4g64")]
    W4g64,
    #[serde(rename = "w4g128")]
    W4g128,
}

impl WeightsFormat {
    /// Every format, in the order the page lists them.
    pub const ALL: [WeightsFormat; 7] = [
        WeightsFormat::Auto,
        WeightsFormat::W4g32,
        WeightsFormat::W4g64,
        WeightsFormat::W4g128,
        WeightsFormat::Q8_0,
        WeightsFormat::F16,
        WeightsFormat::F32,
    ];

    /// The format the engine loads models into unless told otherwise: [`WeightsFormat::Auto`]
    /// (a GGUF file's quantized tensors as they are; float weights as `w4g32`).
    pub const DEFAULT: WeightsFormat = WeightsFormat::Auto;

    pub fn as_str(self) -> &'static str {
        match self {
            WeightsFormat::Auto => "auto",
            WeightsFormat::F32 => "f32",
            WeightsFormat::F16 => "f16",
            WeightsFormat::Q8_0 => "q8_0",
            WeightsFormat::W4g32 => "w4g32",
            WeightsFormat::W4g64 => "w4g64",
            WeightsFormat::W4g128 => "w4g128",
        }
    }

    /// The 4-bit group size, if 4-bit.
    pub fn w4_group(self) -> Option<usize> {
        match self {
            WeightsFormat::W4g32 => Some(32),
            WeightsFormat::W4g64 => Some(64),
            WeightsFormat::W4g128 => Some(128),
            _ => None,
        }
    }

    /// The embedding format used with these linear-layer weights unless one is given
    /// (`auto` keeps a quantized GGUF embedding as it is, and makes a float one `q8_0`).
    pub fn default_embedding(self) -> WeightsFormat {
        match self {
            WeightsFormat::W4g32 | WeightsFormat::W4g64 | WeightsFormat::W4g128 => {
                WeightsFormat::Q8_0
            }
            other => other,
        }
    }
}

impl fmt::Display for WeightsFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WeightsFormat {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self> {
        WeightsFormat::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| EngineError::Setting {
                name: "weights",
                value: s.to_string(),
                expected: format!(
                    "one of {}",
                    WeightsFormat::ALL.map(WeightsFormat::as_str).join(", ")
                ),
            })
    }
}

/// How to load a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Format of the linear layers (attention and MLP projections).
    pub weights: WeightsFormat,
    /// Format of the embedding and untied output head; `None` = [`WeightsFormat::default_embedding`].
    pub embedding: Option<WeightsFormat>,
    /// Re-round tensors the file already holds in the requested format (GGUF Q4_0/Q4_1 for
    /// `w4g32`, Q8_0 for `q8_0`, every quantized type for `auto`, which then means `w4g32` with a
    /// `q8_0` embedding) instead of keeping them: dequantize, then symmetric round-to-nearest
    /// like any other source. Off by default; it exists to measure what the
    /// engine's own quantizer costs on a model that ships already quantized.
    pub requantize: bool,
}

impl Default for WeightsFormat {
    fn default() -> Self {
        WeightsFormat::DEFAULT
    }
}

impl LoadOptions {
    /// The embedding format these options resolve to.
    pub fn embedding_format(&self) -> WeightsFormat {
        self.embedding
            .unwrap_or_else(|| self.weights.default_embedding())
    }
}

/// What a matrix is used as: the embedding and output head have their own format
/// ([`LoadOptions::embedding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixUse {
    Linear,
    Embedding,
}

impl WeightsFormat {
    /// The format a matrix converted under this request is made in: `auto` quantizes as
    /// `w4g32`, or `q8_0` for the embedding / output head.
    fn concrete(self, use_: MatrixUse) -> WeightsFormat {
        match (self, use_) {
            (WeightsFormat::Auto, MatrixUse::Linear) => WeightsFormat::W4g32,
            (WeightsFormat::Auto, MatrixUse::Embedding) => WeightsFormat::Q8_0,
            (f, _) => f,
        }
    }

    /// The estimator's name of the format a matrix converted to `self` is held in.
    fn held(self) -> HeldFormat {
        match self {
            WeightsFormat::F32 => HeldFormat::F32,
            WeightsFormat::F16 => HeldFormat::F16,
            WeightsFormat::Q8_0 | WeightsFormat::Auto => HeldFormat::Q8_0,
            WeightsFormat::W4g32 => HeldFormat::W4g32,
            WeightsFormat::W4g64 => HeldFormat::W4g64,
            WeightsFormat::W4g128 => HeldFormat::W4g128,
        }
    }
}

/// The format of a tensor in its file, as far as loading cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// f32, f16 or bf16 (the name).
    Float(&'static str),
    Q4_0,
    Q4_1,
    Q8_0,
    /// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: blocks the kernels run as they are.
    Ggml(GgmlFormat),
    /// A ggml type the kernels do not run (`q2_k`, `q3_k`, `q8_1`, `q8_k`): always converted.
    Other(&'static str),
}

impl Source {
    /// The lower-case ggml type name (`q4_k`, `f16`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Source::Float(n) | Source::Other(n) => n,
            Source::Q4_0 => "q4_0",
            Source::Q4_1 => "q4_1",
            Source::Q8_0 => "q8_0",
            Source::Ggml(f) => f.name(),
        }
    }
}

/// How one matrix is loaded: kept as its source's blocks, or converted (through f32) to a
/// concrete format. The one rule [`RawTensor::into_matrix`], [`held_format`] and the memory
/// preflight share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Keep,
    Convert(WeightsFormat),
}

fn plan(source: Source, format: WeightsFormat, use_: MatrixUse, requantize: bool) -> Plan {
    let keep = !requantize
        && matches!(
            (format, source),
            (
                WeightsFormat::Auto,
                Source::Q4_0 | Source::Q4_1 | Source::Q8_0 | Source::Ggml(_)
            ) | (WeightsFormat::W4g32, Source::Q4_0 | Source::Q4_1)
                | (WeightsFormat::Q8_0, Source::Q8_0)
        );
    if keep {
        Plan::Keep
    } else {
        Plan::Convert(format.concrete(use_))
    }
}

/// The format (the estimator's name, whose byte arithmetic is the engine's) a matrix read
/// from `source` is held in when loaded as `format` for `use_`: a kept GGUF Q4_0 tensor is
/// `w4g32` (the same 18-byte blocks), Q4_1 `q4_1`, Q8_0 `q8_0`, a ggml block format itself;
/// a converted one its target.
pub fn held_format(
    source: Source,
    format: WeightsFormat,
    use_: MatrixUse,
    requantize: bool,
) -> HeldFormat {
    match plan(source, format, use_, requantize) {
        Plan::Keep => match source {
            Source::Q4_0 => HeldFormat::W4g32,
            Source::Q4_1 => HeldFormat::Q4_1,
            Source::Ggml(GgmlFormat::Q5_0) => HeldFormat::Q5_0,
            Source::Ggml(GgmlFormat::Q5_1) => HeldFormat::Q5_1,
            Source::Ggml(GgmlFormat::Q4K) => HeldFormat::Q4K,
            Source::Ggml(GgmlFormat::Q5K) => HeldFormat::Q5K,
            Source::Ggml(GgmlFormat::Q6K) => HeldFormat::Q6K,
            _ => HeldFormat::Q8_0,
        },
        Plan::Convert(f) => f.held(),
    }
}

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

    /// Converts to `format` (for `use_`), without re-rounding where [`held_format`] keeps the
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

/// Matrices converted from a quantized source to another format, grouped by `(from, to)`:
/// what the model info names ([`WeightsSummary::converted`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conversion {
    /// The source format (`q3_k`, `q4_k`, ...).
    pub from: String,
    /// The held format (`w4g32`, `q8_0`, ...).
    pub to: String,
    /// The tensors converted, by name.
    pub tensors: Vec<String>,
}

/// Records `name` as converted from `from` to `to` when `from` is a quantized format other
/// than `to` (float sources quantized on request are not conversions of a quantized file).
fn record(list: &mut Vec<Conversion>, name: &str, from: &str, to: &str) {
    if from == to || matches!(from, "f32" | "f16" | "bf16") {
        return;
    }
    match list.iter_mut().find(|c| c.from == from && c.to == to) {
        Some(c) => c.tensors.push(name.to_string()),
        None => list.push(Conversion {
            from: from.to_string(),
            to: to.to_string(),
            tensors: vec![name.to_string()],
        }),
    }
}

/// One transformer block's weights.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    /// `n_heads·qk_dim × hidden` (see [`crate::config::LayerShape`])
    pub wq: Matrix,
    /// `n_kv_heads·qk_dim × hidden`
    pub wk: Matrix,
    /// `n_kv_heads·v_dim × hidden`
    pub wv: Matrix,
    /// `hidden × n_heads·v_dim`
    pub wo: Matrix,
    pub ffn_norm: Vec<f32>,
    /// `ffn × hidden`
    pub w_gate: Matrix,
    /// `ffn × hidden`
    pub w_up: Matrix,
    /// `hidden × ffn`
    pub w_down: Matrix,
    /// Biases of q, k, v (`q_width`, `k_width`, `v_width`; Qwen2), q/k in the pair layout.
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    /// RMSNorm weights of every head's q and of every head's k (`qk_dim` each, shared by
    /// all heads; Qwen3), in the pair layout.
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// RMSNorm weights of the attention output and of the MLP output (`hidden` each; Gemma's
    /// sandwich norms, [`LlamaConfig::post_norms`]).
    pub post_attn_norm: Option<Vec<f32>>,
    pub post_ffn_norm: Option<Vec<f32>>,
}

impl LayerWeights {
    /// The seven matrices, in file order.
    pub fn matrices(&self) -> [&Matrix; 7] {
        [
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.w_gate,
            &self.w_up,
            &self.w_down,
        ]
    }

    /// The vector a [`LayerPart::is_vector`] part names (`None` for a matrix part, or an
    /// optional vector this architecture does not have).
    pub fn vector(&self, part: LayerPart) -> Option<&Vec<f32>> {
        match part {
            LayerPart::AttnNorm => Some(&self.attn_norm),
            LayerPart::FfnNorm => Some(&self.ffn_norm),
            LayerPart::QBias => self.bq.as_ref(),
            LayerPart::KBias => self.bk.as_ref(),
            LayerPart::VBias => self.bv.as_ref(),
            LayerPart::QNorm => self.q_norm.as_ref(),
            LayerPart::KNorm => self.k_norm.as_ref(),
            LayerPart::PostAttnNorm => self.post_attn_norm.as_ref(),
            LayerPart::PostFfnNorm => self.post_ffn_norm.as_ref(),
            _ => None,
        }
    }

    /// The matrix a matrix part names (`None` for a vector part).
    pub fn matrix(&self, part: LayerPart) -> Option<&Matrix> {
        Some(match part {
            LayerPart::Q => &self.wq,
            LayerPart::K => &self.wk,
            LayerPart::V => &self.wv,
            LayerPart::O => &self.wo,
            LayerPart::Gate => &self.w_gate,
            LayerPart::Up => &self.w_up,
            LayerPart::Down => &self.w_down,
            _ => return None,
        })
    }

    /// Number of f32 values in this layer's vectors (norms, biases).
    pub fn vector_len(&self) -> usize {
        LayerPart::ALL
            .iter()
            .filter_map(|&p| self.vector(p))
            .map(Vec::len)
            .sum()
    }

    /// This layer's matrices in `options`' linear format (layer `index`, for error messages),
    /// dropping each source matrix once converted; matrices already in it are kept as they
    /// are. What [`Weights::into_converted`] does to each layer.
    pub fn into_converted(self, index: usize, options: LoadOptions) -> Result<LayerWeights> {
        let lin = options.weights;
        let name = |part: &str| format!("layer {index} {part}");
        let mut log = Vec::new();
        let mut conv = |part: &str, m: Matrix| {
            convert_owned(
                &name(part),
                m,
                lin,
                MatrixUse::Linear,
                options.requantize,
                &mut log,
            )
        };
        Ok(LayerWeights {
            attn_norm: self.attn_norm,
            wq: conv("q", self.wq)?,
            wk: conv("k", self.wk)?,
            wv: conv("v", self.wv)?,
            wo: conv("o", self.wo)?,
            ffn_norm: self.ffn_norm,
            w_gate: conv("gate", self.w_gate)?,
            w_up: conv("up", self.w_up)?,
            w_down: conv("down", self.w_down)?,
            bq: self.bq,
            bk: self.bk,
            bv: self.bv,
            q_norm: self.q_norm,
            k_norm: self.k_norm,
            post_attn_norm: self.post_attn_norm,
            post_ffn_norm: self.post_ffn_norm,
        })
    }
}

/// All weights of a model.
#[derive(Debug, Clone)]
pub struct Weights {
    /// `vocab × hidden`
    pub embed: Matrix,
    pub layers: Vec<LayerWeights>,
    pub final_norm: Vec<f32>,
    /// `vocab × hidden`; `None` when tied to `embed`.
    pub output: Option<Matrix>,
    /// The options the weights were loaded with.
    pub options: LoadOptions,
    /// Matrices converted from a quantized source format to another one (see the module docs).
    pub conversions: Vec<Conversion>,
}

/// What the weights are stored as: per stored format, how many matrices and bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WeightsSummary {
    /// The linear layers' requested format (`w4g32`, ...).
    pub weights: String,
    /// The embedding / output head's format (for `auto`, the one held, e.g. `q8_0`).
    pub embedding: String,
    /// Whether already-quantized tensors were re-rounded ([`LoadOptions::requantize`]).
    pub requantized: bool,
    /// `(stored format, matrices, bytes)` for every format held, e.g. GGUF Q4_1 tensors kept
    /// exactly show as `q4_1` (asymmetric 4-bit with groups of 32), Q4_K ones as `q4_k`.
    pub stored: Vec<StoredFormat>,
    /// Matrices converted from a quantized format of the file to another (re-rounded on
    /// request, or a GGUF type the kernels do not run), by tensor name.
    pub converted: Vec<Conversion>,
}

/// One row of [`WeightsSummary::stored`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredFormat {
    pub format: String,
    pub matrices: usize,
    pub bytes: u64,
}

impl Weights {
    /// Every matrix: embedding, layers, output head.
    fn all_matrices(&self) -> impl Iterator<Item = &Matrix> {
        std::iter::once(&self.embed)
            .chain(self.layers.iter().flat_map(|l| l.matrices()))
            .chain(self.output.iter())
    }

    /// The linear layers' format for reports that need one estimator format name: the
    /// requested one, except for `auto`, where it is the format most matrices are held in
    /// (`q5_0` for a Q4_K_M file, whose Q4_K/Q6_K/Q8_0 rest [`Weights::summary`] lists).
    pub fn linear_format_name(&self) -> String {
        if self.options.weights != WeightsFormat::Auto {
            return self.options.weights.to_string();
        }
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for m in self.layers.iter().flat_map(|l| l.matrices()) {
            match counts.iter_mut().find(|c| c.0 == m.format_name()) {
                Some(c) => c.1 += 1,
                None => counts.push((m.format_name(), 1)),
            }
        }
        // The first of the most numerous (max_by_key keeps the last of equals).
        let most = counts.iter().rev().max_by_key(|c| c.1);
        most.map_or_else(|| self.embed.format_name(), |c| c.0)
            .to_string()
    }

    /// The embedding's format for reports: the requested one, or for `auto` the one held.
    pub fn embedding_format_name(&self) -> String {
        match self.options.embedding_format() {
            WeightsFormat::Auto => self.embed.format_name().to_string(),
            f => f.to_string(),
        }
    }

    /// Bytes of weight storage held (matrices with their scales, and f32 norms).
    pub fn bytes(&self) -> u64 {
        let norms: usize = self
            .layers
            .iter()
            .map(LayerWeights::vector_len)
            .sum::<usize>()
            + self.final_norm.len();
        self.all_matrices().map(Matrix::bytes).sum::<u64>() + 4 * norms as u64
    }

    /// The formats held, for reports.
    pub fn summary(&self) -> WeightsSummary {
        let mut stored: Vec<StoredFormat> = Vec::new();
        for m in self.all_matrices() {
            let name = m.format_name();
            match stored.iter_mut().find(|s| s.format == name) {
                Some(s) => {
                    s.matrices += 1;
                    s.bytes += m.bytes();
                }
                None => stored.push(StoredFormat {
                    format: name.to_string(),
                    matrices: 1,
                    bytes: m.bytes(),
                }),
            }
        }
        WeightsSummary {
            weights: self.options.weights.to_string(),
            embedding: self.embedding_format_name(),
            requantized: self.options.requantize,
            stored,
            converted: self.conversions.clone(),
        }
    }

    /// The same weights with every matrix in the formats `options` asks for: linear layers in
    /// `options.weights`, embedding and untied output head in
    /// [`LoadOptions::embedding_format`]; norms stay f32. A matrix already held in the
    /// requested format is kept as it is (a 4-bit matrix with the requested group size counts,
    /// as GGUF Q4_0/Q4_1 blocks do when loading `w4g32`) unless `options.requantize`; any other
    /// goes through f32 and the loaders' own conversion ([`RawTensor::into_matrix`]), so
    /// converting f32 weights gives exactly what loading the f32 file in that format gives.
    /// This is how a pruned f32 model is quantized.
    pub fn converted(&self, options: LoadOptions) -> Result<Weights> {
        let (lin, emb) = (options.weights, options.embedding_format());
        let log = std::cell::RefCell::new(self.conversions.clone());
        let conv = |name: &str, m: &Matrix, f| {
            let use_ = match name {
                "embedding" | "output head" => MatrixUse::Embedding,
                _ => MatrixUse::Linear,
            };
            convert_matrix(name, m, f, use_, options.requantize, &mut log.borrow_mut())
        };
        let layers = self
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = |part: &str| format!("layer {i} {part}");
                Ok(LayerWeights {
                    attn_norm: l.attn_norm.clone(),
                    wq: conv(&name("q"), &l.wq, lin)?,
                    wk: conv(&name("k"), &l.wk, lin)?,
                    wv: conv(&name("v"), &l.wv, lin)?,
                    wo: conv(&name("o"), &l.wo, lin)?,
                    ffn_norm: l.ffn_norm.clone(),
                    w_gate: conv(&name("gate"), &l.w_gate, lin)?,
                    w_up: conv(&name("up"), &l.w_up, lin)?,
                    w_down: conv(&name("down"), &l.w_down, lin)?,
                    bq: l.bq.clone(),
                    bk: l.bk.clone(),
                    bv: l.bv.clone(),
                    q_norm: l.q_norm.clone(),
                    k_norm: l.k_norm.clone(),
                    post_attn_norm: l.post_attn_norm.clone(),
                    post_ffn_norm: l.post_ffn_norm.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let embed = conv("embedding", &self.embed, emb)?;
        let output = match &self.output {
            Some(m) => Some(conv("output head", m, emb)?),
            None => None,
        };
        Ok(Weights {
            embed,
            layers,
            final_norm: self.final_norm.clone(),
            output,
            options,
            conversions: log.into_inner(),
        })
    }

    /// [`converted`](Self::converted), consuming `self` and dropping each source matrix once
    /// it is converted, so converting needs memory for the result plus what is left of the
    /// source (not two whole models).
    pub fn into_converted(self, options: LoadOptions) -> Result<Weights> {
        let emb = options.embedding_format();
        let mut log = self.conversions;
        let (e, rq) = (MatrixUse::Embedding, options.requantize);
        let embed = convert_owned("embedding", self.embed, emb, e, rq, &mut log)?;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (i, l) in self.layers.into_iter().enumerate() {
            for (part, m) in ["q", "k", "v", "o", "gate", "up", "down"]
                .iter()
                .zip(l.matrices())
            {
                let to = conversion_target(m, options.weights, MatrixUse::Linear, rq);
                record(&mut log, &format!("layer {i} {part}"), m.format_name(), to);
            }
            layers.push(l.into_converted(i, options)?);
        }
        let output = match self.output {
            Some(m) => Some(convert_owned("output head", m, emb, e, rq, &mut log)?),
            None => None,
        };
        Ok(Weights {
            embed,
            layers,
            final_norm: self.final_norm,
            output,
            options,
            conversions: log,
        })
    }

    /// Builds all weights of `config` by asking `read(role, rows, cols)` for each tensor, in
    /// file order (embedding, layers, final norm, output head unless tied), converting each to
    /// the format `options` asks for before reading the next; vectors have `rows == 1`. The
    /// loaders differ only in how they name and fetch a role.
    pub fn read_all(
        config: &LlamaConfig,
        options: LoadOptions,
        mut read: impl FnMut(TensorRole, usize, usize) -> Result<(String, RawTensor)>,
    ) -> Result<Weights> {
        let (h, vocab) = (config.hidden, config.vocab);
        let emb = options.embedding_format();
        let lin = options.weights;
        let mut conversions = Vec::new();
        let mut matrix = |role, rows, cols, format| -> Result<Matrix> {
            let (name, raw) = read(role, rows, cols)?;
            let use_ = match role {
                TensorRole::Embed | TensorRole::Output => MatrixUse::Embedding,
                _ => MatrixUse::Linear,
            };
            let from = raw.source().name();
            let m = raw.into_matrix(&name, rows, cols, format, use_, options.requantize)?;
            if rows > 1 {
                record(&mut conversions, &name, from, m.format_name());
            }
            Ok(m)
        };
        let embed = matrix(TensorRole::Embed, vocab, h, emb)?;
        let mut layers = Vec::with_capacity(config.n_layers);
        for (i, shape) in config.layer_shapes().iter().enumerate() {
            let l = |p| TensorRole::Layer(i, p);
            let mut vector = |p: LayerPart| -> Result<Option<Vec<f32>>> {
                if !p.present(config) {
                    return Ok(None);
                }
                let (_, len) = p.shape(shape, h);
                Ok(Some(matrix(l(p), 1, len, WeightsFormat::F32)?.to_f32()))
            };
            let attn_norm = vector(LayerPart::AttnNorm)?.unwrap_or_default();
            let bq = vector(LayerPart::QBias)?;
            let bk = vector(LayerPart::KBias)?;
            let bv = vector(LayerPart::VBias)?;
            let q_norm = vector(LayerPart::QNorm)?;
            let k_norm = vector(LayerPart::KNorm)?;
            let post_attn_norm = vector(LayerPart::PostAttnNorm)?;
            let ffn_norm = vector(LayerPart::FfnNorm)?.unwrap_or_default();
            let post_ffn_norm = vector(LayerPart::PostFfnNorm)?;
            let mut mat = |p: LayerPart| {
                let (rows, cols) = p.shape(shape, h);
                matrix(l(p), rows, cols, lin)
            };
            layers.push(LayerWeights {
                attn_norm,
                wq: mat(LayerPart::Q)?,
                wk: mat(LayerPart::K)?,
                wv: mat(LayerPart::V)?,
                wo: mat(LayerPart::O)?,
                ffn_norm,
                w_gate: mat(LayerPart::Gate)?,
                w_up: mat(LayerPart::Up)?,
                w_down: mat(LayerPart::Down)?,
                bq,
                bk,
                bv,
                q_norm,
                k_norm,
                post_attn_norm,
                post_ffn_norm,
            });
        }
        let final_norm = matrix(TensorRole::FinalNorm, 1, h, WeightsFormat::F32)?.to_f32();
        let output = if config.tied_embeddings {
            None
        } else {
            Some(matrix(TensorRole::Output, vocab, h, emb)?)
        };
        Ok(Weights {
            embed,
            layers,
            final_norm,
            output,
            options,
            conversions,
        })
    }
}

/// The source format of a held matrix, for [`plan`].
fn matrix_source(m: &Matrix) -> Source {
    match m {
        Matrix::F32 { .. } => Source::Float("f32"),
        Matrix::F16(_) => Source::Float("f16"),
        Matrix::W4(w) if w.format_name() == "q4_1" => Source::Q4_1,
        // Symmetric 4-bit in groups of 32 is Q4_0's layout.
        Matrix::W4(w) if w.group() == 32 => Source::Q4_0,
        Matrix::W4(_) => Source::Other("w4"),
        Matrix::Q8(_) => Source::Q8_0,
        Matrix::Ggml(g) => Source::Ggml(g.format()),
    }
}

/// Whether `m` already is `format` (see [`Weights::converted`]).
fn keeps(m: &Matrix, format: WeightsFormat, use_: MatrixUse, requantize: bool) -> bool {
    if requantize {
        return false;
    }
    match m {
        Matrix::W4(w) if format.w4_group() == Some(w.group()) => true,
        other if other.format_name() == format.as_str() => true,
        other => plan(matrix_source(other), format, use_, false) == Plan::Keep,
    }
}

/// The format name `m` has after conversion to `format` (its own when kept).
fn conversion_target(
    m: &Matrix,
    format: WeightsFormat,
    use_: MatrixUse,
    requantize: bool,
) -> &'static str {
    if keeps(m, format, use_, requantize) {
        m.format_name()
    } else {
        format.concrete(use_).held().as_str()
    }
}

/// `m` in `format`, consuming it (returned as it is when it already is `format`).
fn convert_owned(
    name: &str,
    m: Matrix,
    format: WeightsFormat,
    use_: MatrixUse,
    requantize: bool,
    log: &mut Vec<Conversion>,
) -> Result<Matrix> {
    if keeps(&m, format, use_, requantize) {
        Ok(m)
    } else {
        convert_matrix(name, &m, format, use_, requantize, log)
    }
}

/// `m` in `format`, through f32 unless it already is `format`; a conversion of a quantized
/// matrix is recorded in `log`.
fn convert_matrix(
    name: &str,
    m: &Matrix,
    format: WeightsFormat,
    use_: MatrixUse,
    requantize: bool,
    log: &mut Vec<Conversion>,
) -> Result<Matrix> {
    if keeps(m, format, use_, requantize) {
        return Ok(m.clone());
    }
    let out =
        RawTensor::F32(m.to_f32()).into_matrix(name, m.rows(), m.cols(), format, use_, false)?;
    record(log, name, m.format_name(), out.format_name());
    Ok(out)
}

/// The rows part `part` takes of its fused tensor in a block of shape `s` ([`Arch::fused`]:
/// `qkv` = q, k, v rows; `gate_up` = gate, up rows), and that tensor's row count; `None` for
/// parts that are never fused.
///
/// [`Arch::fused`]: crate::config::Arch::fused
pub(crate) fn fused_rows(part: LayerPart, s: &LayerShape) -> Option<(Range<usize>, usize)> {
    let (q, k, v) = (s.q_width(), s.k_width(), s.v_width());
    let qkv = q + k + v;
    Some(match part {
        LayerPart::Q => (0..q, qkv),
        LayerPart::K => (q..q + k, qkv),
        LayerPart::V => (q + k..qkv, qkv),
        LayerPart::Gate => (0..s.ffn, 2 * s.ffn),
        LayerPart::Up => (s.ffn..2 * s.ffn, 2 * s.ffn),
        _ => return None,
    })
}

/// A weight tensor of the model, named independently of any file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    Embed,
    /// `layer`, part.
    Layer(usize, LayerPart),
    FinalNorm,
    Output,
}

impl TensorRole {
    /// The GGUF tensor name (`token_embd.weight`, `blk.3.attn_q.weight`, ...).
    pub fn gguf_name(self) -> String {
        match self {
            TensorRole::Embed => "token_embd.weight".to_string(),
            TensorRole::FinalNorm => "output_norm.weight".to_string(),
            TensorRole::Output => "output.weight".to_string(),
            TensorRole::Layer(i, part) => part.gguf_name(i),
        }
    }
}

/// A weight inside one transformer block. With [`LayerPart::ALL`], [`LayerPart::gguf_name`],
/// [`LayerPart::hf_name`], [`LayerPart::shape`] and [`LayerPart::present`] this is the one
/// table of a block's tensors (llama.cpp's `LLM_TENSOR_NAMES` plays this role there) that the
/// loaders, the writers, the memory preflight and the synthetic model iterate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerPart {
    AttnNorm,
    Q,
    K,
    V,
    /// Optional: bias of q ([`LlamaConfig::qkv_bias`]).
    QBias,
    KBias,
    VBias,
    /// Optional: RMSNorm weight of each q head ([`LlamaConfig::qk_norm`]).
    QNorm,
    KNorm,
    O,
    /// Optional: RMSNorm of the attention output ([`LlamaConfig::post_norms`]).
    PostAttnNorm,
    FfnNorm,
    Gate,
    Up,
    Down,
    /// Optional: RMSNorm of the MLP output ([`LlamaConfig::post_norms`]).
    PostFfnNorm,
}

impl LayerPart {
    /// Every part, in the order the loaders read and the writers write them.
    pub const ALL: [LayerPart; 16] = [
        LayerPart::AttnNorm,
        LayerPart::Q,
        LayerPart::K,
        LayerPart::V,
        LayerPart::QBias,
        LayerPart::KBias,
        LayerPart::VBias,
        LayerPart::QNorm,
        LayerPart::KNorm,
        LayerPart::O,
        LayerPart::PostAttnNorm,
        LayerPart::FfnNorm,
        LayerPart::Gate,
        LayerPart::Up,
        LayerPart::Down,
        LayerPart::PostFfnNorm,
    ];

    /// `(GGUF name, HF name)` inside block `i`, without the `blk.{i}.` / `model.layers.{i}.`
    /// prefix.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            LayerPart::AttnNorm => ("attn_norm.weight", "input_layernorm.weight"),
            LayerPart::Q => ("attn_q.weight", "self_attn.q_proj.weight"),
            LayerPart::K => ("attn_k.weight", "self_attn.k_proj.weight"),
            LayerPart::V => ("attn_v.weight", "self_attn.v_proj.weight"),
            LayerPart::QBias => ("attn_q.bias", "self_attn.q_proj.bias"),
            LayerPart::KBias => ("attn_k.bias", "self_attn.k_proj.bias"),
            LayerPart::VBias => ("attn_v.bias", "self_attn.v_proj.bias"),
            LayerPart::QNorm => ("attn_q_norm.weight", "self_attn.q_norm.weight"),
            LayerPart::KNorm => ("attn_k_norm.weight", "self_attn.k_norm.weight"),
            LayerPart::O => ("attn_output.weight", "self_attn.o_proj.weight"),
            LayerPart::FfnNorm => ("ffn_norm.weight", "post_attention_layernorm.weight"),
            LayerPart::Gate => ("ffn_gate.weight", "mlp.gate_proj.weight"),
            LayerPart::Up => ("ffn_up.weight", "mlp.up_proj.weight"),
            LayerPart::Down => ("ffn_down.weight", "mlp.down_proj.weight"),
            // HF names are the architecture's ([`crate::config::Arch::hf_names`]).
            LayerPart::PostAttnNorm => ("post_attention_norm.weight", ""),
            LayerPart::PostFfnNorm => ("post_ffw_norm.weight", ""),
        }
    }

    /// The GGUF tensor name in block `layer` (`blk.3.attn_q.bias`).
    pub fn gguf_name(self, layer: usize) -> String {
        format!("blk.{layer}.{}", self.names().0)
    }

    /// The GGUF tensor name in block `layer` of architecture `arch`: [`gguf_name`](Self::gguf_name)
    /// unless [`Arch::gguf_names`](crate::config::Arch::gguf_names) renames it (Phi-3's fused
    /// `attn_qkv` for q, k and v).
    pub fn gguf_name_in(self, arch: &crate::config::Arch, layer: usize) -> String {
        match arch.gguf_names.iter().find(|(p, _)| *p == self) {
            Some((_, n)) => format!("blk.{layer}.{n}"),
            None => self.gguf_name(layer),
        }
    }

    /// The HF safetensors name in block `layer` of architecture `arch`
    /// (`model.layers.3.self_attn.q_proj.bias`): the LLaMA name unless
    /// [`Arch::hf_names`](crate::config::Arch::hf_names) renames it. Fused tensors (Phi-3's
    /// `qkv_proj`) are named for each part they hold.
    pub fn hf_name(self, arch: &crate::config::Arch, layer: usize) -> String {
        let name = arch
            .hf_names
            .iter()
            .find(|(p, _)| *p == self)
            .map_or(self.names().1, |(_, n)| n);
        format!("model.layers.{layer}.{name}")
    }

    /// A vector (norm weight or bias), held as f32.
    pub fn is_vector(self) -> bool {
        matches!(
            self,
            LayerPart::AttnNorm
                | LayerPart::FfnNorm
                | LayerPart::PostAttnNorm
                | LayerPart::PostFfnNorm
                | LayerPart::QBias
                | LayerPart::KBias
                | LayerPart::VBias
                | LayerPart::QNorm
                | LayerPart::KNorm
        )
    }

    /// A norm weight (Gemma's HF files store these as `w` of `1 + w`).
    pub fn is_norm(self) -> bool {
        self.is_vector() && !matches!(self, LayerPart::QBias | LayerPart::KBias | LayerPart::VBias)
    }

    /// Whether the model `config` describes has this tensor.
    pub fn present(self, config: &LlamaConfig) -> bool {
        match self {
            LayerPart::QBias | LayerPart::KBias | LayerPart::VBias => config.qkv_bias,
            LayerPart::QNorm | LayerPart::KNorm => config.qk_norm,
            LayerPart::PostAttnNorm | LayerPart::PostFfnNorm => config.post_norms,
            _ => true,
        }
    }

    /// Whether its rows (or entries) run along q/k head dimensions, so they follow RoPE's
    /// layout: HF's rotate-half order is permuted into pairs at load (and back on export).
    pub fn along_qk(self) -> bool {
        matches!(
            self,
            LayerPart::Q
                | LayerPart::K
                | LayerPart::QBias
                | LayerPart::KBias
                | LayerPart::QNorm
                | LayerPart::KNorm
        )
    }

    /// `(rows, cols)` in a block of shape `s` with hidden size `h`; vectors are `(1, len)`.
    pub fn shape(self, s: &LayerShape, h: usize) -> (usize, usize) {
        match self {
            LayerPart::AttnNorm
            | LayerPart::FfnNorm
            | LayerPart::PostAttnNorm
            | LayerPart::PostFfnNorm => (1, h),
            LayerPart::Q => (s.q_width(), h),
            LayerPart::K => (s.k_width(), h),
            LayerPart::V => (s.v_width(), h),
            LayerPart::QBias => (1, s.q_width()),
            LayerPart::KBias => (1, s.k_width()),
            LayerPart::VBias => (1, s.v_width()),
            LayerPart::QNorm | LayerPart::KNorm => (1, s.qk_dim),
            LayerPart::O => (h, s.o_width()),
            LayerPart::Gate | LayerPart::Up => (s.ffn, h),
            LayerPart::Down => (h, s.ffn),
        }
    }
}

/// What a model will need in memory once loaded, by part, computed from its shape alone (no
/// tensor read), so a loader can refuse a model over a memory budget before allocating it.
/// With the same formats the load produces ([`held_format`] of each tensor's type in the file):
///
/// - `weights`: the linear layers as held: kept GGUF blocks at their own size (Q4_K 144 bytes
///   per 256 values, ...), converted ones in [`LoadOptions::weights`];
/// - `embedding`: the embedding, and the output head when untied, as held under
///   [`LoadOptions::embedding_format`];
/// - `norms`: the f32 vectors (norm weights, and biases where the architecture has them);
/// - `kv_cache`: the KV cache at the model's whole context in the engine's default KV format
///   ([`edgefit_estimate::DEFAULT_KV_FORMAT`]); the cache grows in steps, so this is what a
///   conversation reaches at the context limit;
/// - `load_scratch`: while loading, the largest tensor twice at f32 (its bytes as read, at
///   most f32, and its f32 conversion);
/// - `run_scratch`: while generating, the logits and a few activation rows, plus one row of
///   attention scores over the whole context.
///
/// Loading and generating do not overlap, so [`total`](MemoryNeed::total) is the weights plus
/// the larger of `load_scratch` and `kv_cache + run_scratch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryNeed {
    pub weights: u64,
    pub embedding: u64,
    pub norms: u64,
    pub kv_cache: u64,
    pub kv_tokens: u64,
    pub load_scratch: u64,
    pub run_scratch: u64,
}

impl MemoryNeed {
    /// The need of `config` loaded with `options` from float tensors (HF safetensors, the
    /// synthetic model); a GGUF loader that knows each tensor's type uses
    /// [`MemoryNeed::of_sources`].
    pub fn of(config: &LlamaConfig, options: &LoadOptions) -> MemoryNeed {
        Self::of_sources(config, options, |_| Source::Float("f32"))
    }

    /// The need of `config` loaded with `options` when tensor `role` is stored as
    /// `source(role)`: each matrix counted in the format it will be held in ([`held_format`]),
    /// with the estimator's byte arithmetic (`edgefit_estimate::WeightFormat::matrix_bytes`),
    /// which is what the loaded matrices hold.
    pub fn of_sources(
        config: &LlamaConfig,
        options: &LoadOptions,
        source: impl Fn(TensorRole) -> Source,
    ) -> MemoryNeed {
        let (h, vocab) = (config.hidden, config.vocab);
        let lin = options.weights;
        let rq = options.requantize;
        let bytes = |role: TensorRole, format, use_, rows: usize, cols: usize| {
            held_format(source(role), format, use_, rq).matrix_bytes(rows as u64, cols as u64)
        };
        let mut weights = 0u64;
        let mut largest = (vocab as u64).saturating_mul(h as u64);
        let mut widest = h.max(vocab);
        let mut vectors = h as u64; // the final norm
        for (i, l) in config.layer_shapes().iter().enumerate() {
            for part in LayerPart::ALL.into_iter().filter(|p| p.present(config)) {
                let (rows, cols) = part.shape(l, h);
                if part.is_vector() {
                    vectors = vectors.saturating_add(cols as u64);
                    continue;
                }
                let role = TensorRole::Layer(i, part);
                weights = weights.saturating_add(bytes(role, lin, MatrixUse::Linear, rows, cols));
                largest = largest.max((rows as u64).saturating_mul(cols as u64));
            }
            widest = widest.max(l.ffn).max(l.q_width());
        }
        let emb = options.embedding_format();
        let mut embedding = bytes(TensorRole::Embed, emb, MatrixUse::Embedding, vocab, h);
        if !config.tied_embeddings {
            embedding = embedding.saturating_add(bytes(
                TensorRole::Output,
                emb,
                MatrixUse::Embedding,
                vocab,
                h,
            ));
        }
        let norms = vectors.saturating_mul(4);
        let kv_tokens = config.context_length as u64;
        let kv_cache = edgefit_estimate::kv_bytes(
            &config.to_spec(),
            edgefit_estimate::DEFAULT_KV_FORMAT,
            kv_tokens,
        );
        let load_scratch = largest.saturating_mul(8);
        let run_scratch = (widest as u64)
            .saturating_mul(4 * 8)
            .saturating_add(kv_tokens.saturating_mul(4));
        MemoryNeed {
            weights,
            embedding,
            norms,
            kv_cache,
            kv_tokens,
            load_scratch,
            run_scratch,
        }
    }

    /// Weights, embedding and norms, plus the larger of loading's and generating's extra.
    pub fn total(&self) -> u64 {
        let extra = self
            .load_scratch
            .max(self.kv_cache.saturating_add(self.run_scratch));
        [self.embedding, self.norms, extra]
            .iter()
            .fold(self.weights, |a, b| a.saturating_add(*b))
    }

    /// `Ok` when `budget` is `None` or at least [`total`](Self::total); else
    /// [`EngineError::OverBudget`] with the numbers and the parts, largest first.
    pub fn check(&self, budget: Option<u64>) -> Result<()> {
        let Some(budget) = budget else {
            return Ok(());
        };
        let needed = self.total();
        if needed <= budget {
            return Ok(());
        }
        let mut parts = [
            ("weights".to_string(), self.weights),
            ("embedding".to_string(), self.embedding),
            (
                format!("KV cache ({} tokens)", self.kv_tokens),
                self.kv_cache,
            ),
            ("loading scratch".to_string(), self.load_scratch),
            ("generation scratch".to_string(), self.run_scratch),
            ("norms".to_string(), self.norms),
        ];
        parts.sort_by_key(|p| std::cmp::Reverse(p.1));
        let parts = parts
            .iter()
            .filter(|p| p.1 > 0)
            .map(|(what, b)| format!("{what} {}", human_bytes(*b)))
            .collect::<Vec<_>>()
            .join(", ");
        Err(EngineError::OverBudget {
            needed,
            budget,
            needed_h: human_bytes(needed),
            budget_h: human_bytes(budget),
            parts,
        })
    }
}

/// `1234567` → `1.2 MB` (powers of 1000, one decimal).
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < units.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
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
