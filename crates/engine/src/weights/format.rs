//! The weight formats a user can ask for ([`WeightsFormat`], [`LoadOptions`]), the format a
//! tensor has in its file ([`Source`]), and the one rule that decides whether a matrix is kept
//! as its file's blocks or converted ([`held_format`]; the memory preflight and the loaders
//! share it).

use std::fmt;
use std::str::FromStr;

use edgefit_estimate::WeightFormat as HeldFormat;
use edgefit_kernels::GgmlFormat;
use serde::Serialize;

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
    pub(super) fn concrete(self, use_: MatrixUse) -> WeightsFormat {
        match (self, use_) {
            (WeightsFormat::Auto, MatrixUse::Linear) => WeightsFormat::W4g32,
            (WeightsFormat::Auto, MatrixUse::Embedding) => WeightsFormat::Q8_0,
            (f, _) => f,
        }
    }

    /// The estimator's name of the format a matrix converted to `self` is held in.
    pub(super) fn held(self) -> HeldFormat {
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
pub(super) enum Plan {
    Keep,
    Convert(WeightsFormat),
}

pub(super) fn plan(
    source: Source,
    format: WeightsFormat,
    use_: MatrixUse,
    requantize: bool,
) -> Plan {
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
