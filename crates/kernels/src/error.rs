//! The kernels crate's error type: malformed shapes or packed data handed to a format.

use thiserror::Error;

/// What went wrong building a quantized matrix.
#[derive(Debug, Error, PartialEq)]
pub enum KernelError {
    /// A dimension or group size is unusable.
    #[error("{what}: {detail}")]
    Shape { what: &'static str, detail: String },
    /// Packed bytes (GGUF blocks) have the wrong length for the shape.
    #[error("{format} data for {rows}×{cols}: {got} bytes, expected {expected}")]
    DataLength {
        format: &'static str,
        rows: usize,
        cols: usize,
        got: usize,
        expected: usize,
    },
    /// A thread count this build cannot use.
    #[error("threads: {value} is not usable: {expected}")]
    Threads { value: usize, expected: String },
    /// A thread could not be started.
    #[error("could not start a pool thread: {0}")]
    Spawn(String),
    /// A pool thread failed inside a parallel region (a job panicked on it, or its Web Worker
    /// stopped); the pool runs no more parallel work.
    #[error("thread pool failed: {0}")]
    PoolFailed(String),
    /// A value that must be finite is not.
    #[error("{what}: value {value} at index {index} is not finite")]
    NotFinite {
        what: &'static str,
        index: usize,
        value: f32,
    },
}

pub type Result<T> = std::result::Result<T, KernelError>;
