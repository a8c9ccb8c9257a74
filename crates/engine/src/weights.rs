//! The model's weights in the format the user chose, and how loaders produce them.
//!
//! Loaders hand over each tensor as a [`RawTensor`] (f32, or a GGUF block format's bytes);
//! [`Weights::read_all`] turns it into a [`Matrix`] of the requested [`WeightsFormat`], one
//! tensor at a time, so loading never holds an f32 copy of the whole model:
//!
//! | requested | source tensor | result |
//! |---|---|---|
//! | `w4g32` | GGUF Q4_0 | symmetric w4, nibbles and scales copied (no re-rounding) |
//! | `w4g32` | GGUF Q4_1 | asymmetric w4 (scale + min), copied (no re-rounding) |
//! | `w4gG` | anything else | dequantized to f32 (that tensor only), then symmetric round-to-nearest |
//! | `q8_0` | GGUF Q8_0 | copied |
//! | `q8_0`, `f16`, `f32` | anything else | dequantized to f32 (that tensor only), then converted |
//!
//! The embedding (and untied output head) has its own format. By default it follows the
//! linear layers for `f32`/`f16`/`q8_0`, and is `q8_0` when the linear layers are 4-bit: the
//! tied embedding is also the output head, the one matrix whose error lands directly on the
//! logits; `cargo xtask bench e2e` and the perplexity test measure the choice.
//!
//! [`Weights::converted`] applies the same conversion to weights already loaded (a pruned f32
//! model quantized to w4g32, say): each matrix goes through f32 into the requested format,
//! unless it already is that format.

use std::fmt;
use std::str::FromStr;

use edgefit_kernels::{F16Matrix, Matrix, Q8Matrix, W4Kind, W4Matrix};
use serde::Serialize;

use crate::config::{LayerShape, LlamaConfig};
use crate::error::{EngineError, Result};

/// How the engine stores a weight matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum WeightsFormat {
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
    pub const ALL: [WeightsFormat; 6] = [
        WeightsFormat::W4g32,
        WeightsFormat::W4g64,
        WeightsFormat::W4g128,
        WeightsFormat::Q8_0,
        WeightsFormat::F16,
        WeightsFormat::F32,
    ];

    /// The format the engine loads models into unless told otherwise.
    pub const DEFAULT: WeightsFormat = WeightsFormat::W4g32;

    pub fn as_str(self) -> &'static str {
        match self {
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

    /// The embedding format used with these linear-layer weights unless one is given.
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
    /// `w4g32`, Q8_0 for `q8_0`) instead of keeping them: dequantize, then symmetric
    /// round-to-nearest like any other source. Off by default; it exists to measure what the
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
}

fn kernel_err(name: &str, e: edgefit_kernels::KernelError) -> EngineError {
    EngineError::tensor(name, e.to_string())
}

impl RawTensor {
    /// The values as f32 (`rows × cols`).
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
        }
    }

    pub fn into_f32(self, name: &str, rows: usize, cols: usize) -> Result<Vec<f32>> {
        let err = |e| kernel_err(name, e);
        Ok(match self {
            RawTensor::F32(v) => v,
            RawTensor::Q4_0(b) => W4Matrix::from_q4_0(&b, rows, cols)
                .map_err(err)?
                .dequantize(),
            RawTensor::Q4_1(b) => W4Matrix::from_q4_1(&b, rows, cols)
                .map_err(err)?
                .dequantize(),
            RawTensor::Q8_0(b) => Q8Matrix::from_q8_0(&b, rows, cols)
                .map_err(err)?
                .dequantize(),
        })
    }

    /// Converts to `format`, without re-rounding where the source already is that format.
    pub fn into_matrix(
        self,
        name: &str,
        rows: usize,
        cols: usize,
        format: WeightsFormat,
        requantize: bool,
    ) -> Result<Matrix> {
        let err = |e| kernel_err(name, e);
        let raw = match (requantize, self) {
            (true, raw @ (RawTensor::Q4_0(_) | RawTensor::Q4_1(_) | RawTensor::Q8_0(_))) => {
                RawTensor::F32(raw.into_f32(name, rows, cols)?)
            }
            (_, raw) => raw,
        };
        match (format, raw) {
            (WeightsFormat::W4g32, RawTensor::Q4_0(b)) => Ok(Matrix::W4(
                W4Matrix::from_q4_0(&b, rows, cols).map_err(err)?,
            )),
            (WeightsFormat::W4g32, RawTensor::Q4_1(b)) => Ok(Matrix::W4(
                W4Matrix::from_q4_1(&b, rows, cols).map_err(err)?,
            )),
            (WeightsFormat::Q8_0, RawTensor::Q8_0(b)) => Ok(Matrix::Q8(
                Q8Matrix::from_q8_0(&b, rows, cols).map_err(err)?,
            )),
            (format, raw) => {
                let w = raw.into_f32(name, rows, cols)?;
                Ok(match format {
                    WeightsFormat::F32 => Matrix::F32 {
                        data: w,
                        rows,
                        cols,
                    },
                    WeightsFormat::F16 => {
                        Matrix::F16(F16Matrix::from_f32(&w, rows, cols).map_err(err)?)
                    }
                    WeightsFormat::Q8_0 => {
                        Matrix::Q8(Q8Matrix::quantize(&w, rows, cols).map_err(err)?)
                    }
                    WeightsFormat::W4g32 | WeightsFormat::W4g64 | WeightsFormat::W4g128 => {
                        let group = format.w4_group().unwrap_or(32);
                        Matrix::W4(
                            W4Matrix::quantize(&w, rows, cols, group, W4Kind::Symmetric)
                                .map_err(err)?,
                        )
                    }
                })
            }
        }
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
        let conv = |part: &str, m: Matrix| convert_owned(&name(part), m, lin, options.requantize);
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
}

/// What the weights are stored as: per stored format, how many matrices and bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WeightsSummary {
    /// The linear layers' requested format (`w4g32`, ...).
    pub weights: String,
    /// The embedding / output head's format.
    pub embedding: String,
    /// Whether already-quantized tensors were re-rounded ([`LoadOptions::requantize`]).
    pub requantized: bool,
    /// `(stored format, matrices, bytes)` for every format held, e.g. GGUF Q4_1 tensors kept
    /// exactly show as `q4_1` (asymmetric 4-bit with groups of 32).
    pub stored: Vec<StoredFormat>,
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
            embedding: self.options.embedding_format().to_string(),
            requantized: self.options.requantize,
            stored,
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
        let conv = |name: &str, m: &Matrix, f| convert_matrix(name, m, f, options.requantize);
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
        Ok(Weights {
            embed: conv("embedding", &self.embed, emb)?,
            layers,
            final_norm: self.final_norm.clone(),
            output: match &self.output {
                Some(m) => Some(conv("output head", m, emb)?),
                None => None,
            },
            options,
        })
    }

    /// [`converted`](Self::converted), consuming `self` and dropping each source matrix once
    /// it is converted, so converting needs memory for the result plus what is left of the
    /// source (not two whole models).
    pub fn into_converted(self, options: LoadOptions) -> Result<Weights> {
        let emb = options.embedding_format();
        let embed = convert_owned("embedding", self.embed, emb, options.requantize)?;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (i, l) in self.layers.into_iter().enumerate() {
            layers.push(l.into_converted(i, options)?);
        }
        let output = match self.output {
            Some(m) => Some(convert_owned("output head", m, emb, options.requantize)?),
            None => None,
        };
        Ok(Weights {
            embed,
            layers,
            final_norm: self.final_norm,
            output,
            options,
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
        let mut matrix = |role, rows, cols, format| -> Result<Matrix> {
            let (name, raw) = read(role, rows, cols)?;
            raw.into_matrix(&name, rows, cols, format, options.requantize)
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
        })
    }
}

/// Whether `m` already is `format` (see [`Weights::converted`]).
fn keeps(m: &Matrix, format: WeightsFormat, requantize: bool) -> bool {
    if requantize {
        return false;
    }
    match m {
        Matrix::W4(w) => format.w4_group() == Some(w.group()),
        other => other.format_name() == format.as_str(),
    }
}

/// `m` in `format`, consuming it (returned as it is when it already is `format`).
fn convert_owned(name: &str, m: Matrix, format: WeightsFormat, requantize: bool) -> Result<Matrix> {
    if keeps(&m, format, requantize) {
        Ok(m)
    } else {
        convert_matrix(name, &m, format, requantize)
    }
}

/// `m` in `format`, through f32 unless it already is `format`.
fn convert_matrix(
    name: &str,
    m: &Matrix,
    format: WeightsFormat,
    requantize: bool,
) -> Result<Matrix> {
    if keeps(m, format, requantize) {
        return Ok(m.clone());
    }
    RawTensor::F32(m.to_f32()).into_matrix(name, m.rows(), m.cols(), format, false)
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
/// An upper bound, with the same formats the load produces:
///
/// - `weights`: the linear layers in [`LoadOptions::weights`] (4-bit counted with a scale and a
///   minimum per group, as GGUF Q4_1 kept exactly is; Q8_0 34 bytes per 32 values);
/// - `embedding`: the embedding, and the output head when untied, in
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

/// Bytes of a `rows × cols` matrix in `format` (an upper bound for 4-bit; see [`MemoryNeed`]).
pub fn matrix_bytes(format: WeightsFormat, rows: usize, cols: usize) -> u64 {
    let (rows, cols) = (rows as u64, cols as u64);
    let per_row = match format {
        WeightsFormat::F32 => cols.saturating_mul(4),
        WeightsFormat::F16 => cols.saturating_mul(2),
        WeightsFormat::Q8_0 => cols.div_ceil(32).saturating_mul(34),
        WeightsFormat::W4g32 | WeightsFormat::W4g64 | WeightsFormat::W4g128 => {
            let g = format.w4_group().unwrap_or(32) as u64;
            cols.div_ceil(g).saturating_mul(g / 2 + 4)
        }
    };
    rows.saturating_mul(per_row)
}

impl MemoryNeed {
    /// The need of `config` loaded with `options`.
    pub fn of(config: &LlamaConfig, options: &LoadOptions) -> MemoryNeed {
        let (h, vocab) = (config.hidden, config.vocab);
        let lin = options.weights;
        let mut weights = 0u64;
        let mut largest = (vocab as u64).saturating_mul(h as u64);
        let mut widest = h.max(vocab);
        let mut vectors = h as u64; // the final norm
        for l in config.layer_shapes() {
            for part in LayerPart::ALL.into_iter().filter(|p| p.present(config)) {
                let (rows, cols) = part.shape(&l, h);
                if part.is_vector() {
                    vectors = vectors.saturating_add(cols as u64);
                    continue;
                }
                weights = weights.saturating_add(matrix_bytes(lin, rows, cols));
                largest = largest.max((rows as u64).saturating_mul(cols as u64));
            }
            widest = widest.max(l.ffn).max(l.q_width());
        }
        let heads = if config.tied_embeddings { 1 } else { 2 };
        let embedding = matrix_bytes(options.embedding_format(), vocab, h).saturating_mul(heads);
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
