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
//!
//! | file | what |
//! |---|---|
//! | `format.rs` | [`WeightsFormat`], [`LoadOptions`], a tensor's [`Source`] format, the keep-or-convert rule ([`held_format`]) |
//! | `raw.rs` | [`RawTensor`]: a tensor as read, cut by rows, turned into a [`Matrix`] |
//! | `convert.rs` | [`Weights::converted`], [`Conversion`] records |
//! | `memory.rs` | the memory preflight, [`MemoryNeed`] |
//! | `mod.rs` | [`Weights`], [`LayerWeights`], the one assembly routine [`Weights::read_all`] |
//!
//! The tensor table ([`LayerPart`], [`TensorRole`]) is the leaf [`crate::tensors`] (its one
//! path; not re-exported here).

mod convert;
mod format;
mod memory;
mod raw;

use std::ops::Range;

use edgefit_kernels::Matrix;
use serde::Serialize;

use self::convert::record;
pub use self::convert::Conversion;
pub use self::format::{held_format, LoadOptions, MatrixUse, Source, WeightsFormat};
pub use self::memory::{human_bytes, MemoryNeed};
pub use self::raw::RawTensor;
use crate::tensors::{LayerPart, TensorRole};

use crate::config::{LayerShape, LlamaConfig};
use crate::error::Result;

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
    /// Bias of the output projection (`hidden`; Llama with `attention_bias`).
    pub bo: Option<Vec<f32>>,
    /// Biases of gate, up (`ffn`) and down (`hidden`; Llama with `mlp_bias`).
    pub b_gate: Option<Vec<f32>>,
    pub b_up: Option<Vec<f32>>,
    pub b_down: Option<Vec<f32>>,
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
            LayerPart::OBias => self.bo.as_ref(),
            LayerPart::GateBias => self.b_gate.as_ref(),
            LayerPart::UpBias => self.b_up.as_ref(),
            LayerPart::DownBias => self.b_down.as_ref(),
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

impl WeightsSummary {
    /// The held formats as the estimator's comparison reads them
    /// (`edgefit_estimate::compare::measured_deployment`).
    pub fn stored_for_comparison(&self) -> Vec<edgefit_estimate::compare::StoredWeights> {
        self.stored
            .iter()
            .map(|s| edgefit_estimate::compare::StoredWeights {
                format: s.format.clone(),
                matrices: s.matrices as u64,
            })
            .collect()
    }
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
            let bo = vector(LayerPart::OBias)?;
            let b_gate = vector(LayerPart::GateBias)?;
            let b_up = vector(LayerPart::UpBias)?;
            let b_down = vector(LayerPart::DownBias)?;
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
                bo,
                b_gate,
                b_up,
                b_down,
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
