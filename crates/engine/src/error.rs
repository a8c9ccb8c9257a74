//! The engine's one error type.

use thiserror::Error;

/// Everything that can go wrong loading a model or generating with it. Messages name the thing
/// and the value so a user can act on them.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The file is not a model this engine can read (bad magic, truncated, corrupt structure).
    #[error("not a readable model file: {0}")]
    Format(String),
    /// A metadata key the model needs is missing or has the wrong type.
    #[error("model metadata `{key}`: {problem}")]
    Metadata { key: String, problem: String },
    /// The model's architecture or a feature of it is not supported.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// The model's shape is inconsistent or out of the supported range.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// A tensor is missing or has the wrong shape.
    #[error("tensor `{name}`: {problem}")]
    Tensor { name: String, problem: String },
    /// Building or running the tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// Rendering the chat template failed.
    #[error("chat template: {0}")]
    ChatTemplate(String),
    /// A generation setting is out of range.
    #[error("invalid setting `{name}` = {value}: {expected}")]
    Setting {
        name: &'static str,
        value: String,
        expected: String,
    },
    /// The prompt plus requested tokens do not fit the model's context.
    #[error(
        "context full: {needed} tokens needed but the context holds {limit}; start a new \
         conversation or ask for fewer tokens"
    )]
    ContextFull { needed: usize, limit: usize },
    /// `step` was called with no generation started.
    /// The thread pool failed inside a forward pass ([`edgefit_kernels::Pool::check`]).
    #[error("{0}")]
    Threads(String),
    #[error("no generation in progress: call start first")]
    NotStarted,
    /// The model would need more memory than the budget allows (checked before any tensor is
    /// allocated; see [`crate::weights::MemoryNeed`]).
    #[error(
        "the model needs {needed} bytes ({needed_h}) but the memory budget is {budget} bytes \
         ({budget_h}): {parts}"
    )]
    OverBudget {
        needed: u64,
        budget: u64,
        needed_h: String,
        budget_h: String,
        /// The biggest parts, largest first, e.g. `weights 3.1 GB, KV cache (8192 tokens) 1.2 GB`.
        parts: String,
    },
    /// Reading a file failed.
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Shorthand for results in this crate.
pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    pub(crate) fn tensor(name: &str, problem: impl Into<String>) -> Self {
        EngineError::Tensor {
            name: name.to_string(),
            problem: problem.into(),
        }
    }

    pub(crate) fn metadata(key: &str, problem: impl Into<String>) -> Self {
        EngineError::Metadata {
            key: key.to_string(),
            problem: problem.into(),
        }
    }
}
