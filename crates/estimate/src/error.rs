//! The one error type of the crate.

use thiserror::Error;

/// Everything the estimator can refuse. Every message names the thing and the value, so a user
/// reading it in the CLI or on the page knows which knob or field to fix.
///
/// The estimator never clamps a bad input silently and never panics: absurd knob values (zero or
/// huge context, unknown format names, a prompt longer than the context, ...) come back as one
/// of these.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum EstimateError {
    /// A name (format, unit, policy, preset, device, family) that is not one we know.
    #[error("unknown {kind} {value:?}; expected one of: {expected}")]
    UnknownName {
        /// What kind of name it was ("weight format", "device", ...).
        kind: &'static str,
        /// The name given.
        value: String,
        /// The accepted names, comma separated.
        expected: String,
    },
    /// A number outside the range the estimator accepts.
    #[error("{what} = {value} is out of range: {reason}")]
    OutOfRange {
        /// The knob or field.
        what: String,
        /// The value given, as text.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A model shape that cannot describe a real model (e.g. query heads not a multiple of KV heads).
    #[error("invalid model shape {model:?}: {field}: {reason}")]
    InvalidShape {
        /// The model's name.
        model: String,
        /// The field (e.g. `layers[3].num_kv_heads`).
        field: String,
        /// Why.
        reason: String,
    },
    /// A field a config.json or GGUF metadata must have is absent or has the wrong type.
    #[error("{source_kind}: field {field:?} is missing or not {expected}")]
    MissingField {
        /// "config.json", "GGUF metadata", "device profile", ...
        source_kind: &'static str,
        /// The key.
        field: String,
        /// The expected type.
        expected: &'static str,
    },
    /// A model family we do not account for.
    #[error("unsupported architecture {value:?} in {source_kind}; supported: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3")]
    UnsupportedArchitecture {
        /// "config.json" or "GGUF metadata".
        source_kind: &'static str,
        /// The `model_type` / `general.architecture` given.
        value: String,
    },
    /// A feature of a model file that is not implemented (the engine runs what this crate
    /// parses, so it refuses rather than running the model approximately).
    #[error("{source_kind}: {what} is not supported")]
    UnsupportedFeature {
        /// "config.json" or "GGUF metadata".
        source_kind: &'static str,
        /// The feature and the value that names it (`RoPE scaling kind "yarn"`).
        what: String,
    },
    /// Text that is not valid JSON (or not the expected JSON shape).
    #[error("invalid JSON in {what}: {message}")]
    Json {
        /// What was being parsed.
        what: String,
        /// serde_json's message, with line and column.
        message: String,
    },
    /// A pruning request that would not leave a valid smaller model.
    #[error("invalid pruning of {what}: {reason}")]
    Prune {
        /// The layer/field being pruned.
        what: String,
        /// Why.
        reason: String,
    },
    /// The deployment asks for a compute unit the device profile does not have.
    #[error("device {device:?} has no {unit} compute unit (it has: {available})")]
    UnitUnavailable {
        /// Device id.
        device: String,
        /// Unit requested.
        unit: String,
        /// Units the profile lists.
        available: String,
    },
    /// The compute unit has no peak throughput for the requested compute dtype.
    #[error("device {device:?} unit {unit} has no peak throughput for compute dtype {dtype} (it has: {available})")]
    DtypeUnavailable {
        /// Device id.
        device: String,
        /// Unit.
        unit: String,
        /// Dtype requested.
        dtype: String,
        /// Dtypes the unit lists.
        available: String,
    },
    /// A device profile field is missing or absurd.
    #[error("invalid device profile {device:?}: {field}: {reason}")]
    InvalidDevice {
        /// Device id.
        device: String,
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },
    /// A runtime profile field is missing or absurd.
    #[error("invalid runtime profile {runtime:?}: {field}: {reason}")]
    InvalidRuntime {
        /// Runtime id.
        runtime: String,
        /// The field.
        field: String,
        /// Why.
        reason: String,
    },
    /// The deployment asks a runtime to run on a compute unit it does not run on.
    #[error("runtime {runtime} does not run on the {unit} (it runs on: {supported})")]
    RuntimeUnitUnsupported {
        /// Runtime id.
        runtime: String,
        /// Unit requested.
        unit: String,
        /// Units the runtime profile lists.
        supported: String,
    },
    /// A validation file or point that cannot be used.
    #[error("validation set: {what}: {reason}")]
    Validation {
        /// The file or point.
        what: String,
        /// Why.
        reason: String,
    },
}

/// Result alias used across the crate.
pub type Result<T, E = EstimateError> = std::result::Result<T, E>;

pub(crate) fn out_of_range(
    what: impl Into<String>,
    value: impl std::fmt::Display,
    reason: impl Into<String>,
) -> EstimateError {
    EstimateError::OutOfRange {
        what: what.into(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

pub(crate) fn json_error(what: impl Into<String>, e: serde_json::Error) -> EstimateError {
    EstimateError::Json {
        what: what.into(),
        message: e.to_string(),
    }
}

/// [`json_error`] for text that parsed as JSON but not into the expected shape: serde names the
/// line and column but not the field, so the message adds the last key before that position
/// (e.g. `invalid value: integer `-5`, expected u64 at line 1 column 721 (field "usable_bytes")`).
pub(crate) fn json_error_in(
    what: impl Into<String>,
    text: &str,
    e: serde_json::Error,
) -> EstimateError {
    let mut message = e.to_string();
    if let Some(key) = key_before(text, e.line(), e.column()) {
        message.push_str(&format!(" (field {key:?})"));
    }
    EstimateError::Json {
        what: what.into(),
        message,
    }
}

/// The last `"key":` in `text` before 1-based `line` and `column` (a char count), if any.
fn key_before(text: &str, line: usize, column: usize) -> Option<String> {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.checked_sub(1)?)
        .map(str::len)
        .sum();
    let rest = text.get(line_start..)?;
    let col = rest
        .char_indices()
        .nth(column)
        .map_or(rest.len(), |(i, _)| i);
    let before = text.get(..line_start + col)?;
    let colon = before.rfind("\":")?;
    let open = before[..colon].rfind('"')?;
    let key = &before[open + 1..colon];
    (key.len() <= 100).then(|| key.to_string())
}
