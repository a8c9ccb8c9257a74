//! Converting weights already loaded into other formats ([`Weights::converted`], a pruned f32
//! model quantized to w4g32, say) and the record of every matrix converted from a quantized
//! source ([`Conversion`], which the model info lists).

use edgefit_kernels::Matrix;
use serde::Serialize;

use super::format::{plan, MatrixUse, Plan, Source, WeightsFormat};
use super::{LayerWeights, LoadOptions, RawTensor, Weights};
use crate::error::Result;

/// Matrices converted from a quantized source to another format, grouped by `(from, to)`:
/// what the model info names ([`WeightsSummary::converted`](super::WeightsSummary::converted)).
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
pub(super) fn record(list: &mut Vec<Conversion>, name: &str, from: &str, to: &str) {
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

impl LayerWeights {
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
            bo: self.bo,
            b_gate: self.b_gate,
            b_up: self.b_up,
            b_down: self.b_down,
            q_norm: self.q_norm,
            k_norm: self.k_norm,
            post_attn_norm: self.post_attn_norm,
            post_ffn_norm: self.post_ffn_norm,
        })
    }
}

impl Weights {
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
                    bo: l.bo.clone(),
                    b_gate: l.b_gate.clone(),
                    b_up: l.b_up.clone(),
                    b_down: l.b_down.clone(),
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
pub(super) fn convert_matrix(
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
